import ChimeCore
import ChimeMQTT
import Foundation
import Synchronization
import Testing

/// Where a test's worker keeps its journal and snapshots: tests that are about what survives run
/// on both (`@Test(arguments: StoreKind.allCases)`).
public enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// The data directory (`--data-dir`), the default.
    case directory
    /// A PostgreSQL of the test's own (`--store`, TestPostgres).
    case postgres

    public var testDescription: String { rawValue }
}

/// A broker, a data directory (or a PostgreSQL), a `chimed` and an MQTT 5 client: one test's world.
public final class WorkerFixture: Sendable {
    public let broker: TestBroker
    public let data: TemporaryDirectory
    /// The store, with ``StoreKind/postgres``.
    public let postgres: TestPostgres?
    public let workerId: String
    public let topics = Topics(prefix: "chime")
    public let extraArguments: [String]
    public let current: Mutex<Chimed?>
    /// The test's client: commands with a Response Topic, deliveries, and every other message it
    /// receives (`commands.received`).
    public let commands: CommandClient
    public var client: MQTTRequester { commands.requester }

    public static func start(
        extra: [String] = [],
        brokerConfiguration: TestBroker.Configuration = .init(),
        environment: [String: String] = [:],
        store: StoreKind = .directory
    ) async throws
        -> WorkerFixture
    {
        let broker = try await TestBroker.start(brokerConfiguration)
        let postgres = store == .postgres ? try await TestPostgres.start() : nil
        let fixture = try await WorkerFixture(
            broker: broker,
            postgres: postgres,
            extra: extra + (postgres.map { ["--store", $0.uri] } ?? [])
        )
        try await fixture.startWorker(environment: environment)
        return fixture
    }

    private init(broker: TestBroker, postgres: TestPostgres?, extra: [String]) async throws {
        self.broker = broker
        self.postgres = postgres
        self.data = try TemporaryDirectory(prefix: "chime-data")
        self.workerId = "test-\(UInt32.random(in: 0...UInt32.max))"
        self.extraArguments = extra
        self.current = Mutex(nil)
        self.commands = try await CommandClient(broker: broker, clientId: "tester-\(UInt32.random(in: 0...UInt32.max))")
    }

    public var worker: Chimed? { current.withLock { $0 } }

    /// - Parameter environment: chimed's environment (``FakeTime`` sets its clock).
    public func startWorker(environment: [String: String] = [:]) async throws {
        let chimed = try Chimed(
            broker: broker,
            dataDirectory: data.path,
            workerId: workerId,
            extra: extraArguments,
            environment: environment
        )
        current.withLock { $0 = chimed }
        try await chimed.start()
    }

    /// kill -9.
    public func killWorker() async {
        guard let chimed = worker else { return }
        chimed.process.kill()
        await chimed.process.waitForExit(timeout: .seconds(10))
    }

    /// SIGTERM and wait; returns the exit status.
    @discardableResult
    public func stopWorker() async -> ChildProcess.Termination? {
        guard let chimed = worker else { return nil }
        chimed.process.terminate()
        return await chimed.process.waitForExit(timeout: .seconds(20))
    }

    public func stop() async {
        commands.stop()
        await killWorker()
        await broker.stop()
        await postgres?.stop()
    }

    /// Sends a command with an MQTT 5 Response Topic and returns the reply as JSON.
    public func send(
        _ device: String,
        _ op: ChimeCore.Operation,
        _ payload: String,
        timeout: Duration = .seconds(10)
    ) async throws
        -> JSONObject
    {
        try await commands.send(device, op, payload, timeout: timeout)
    }

    public func send(topic: String, _ payload: String, timeout: Duration = .seconds(10)) async throws -> JSONObject {
        try await commands.send(topic: topic, Array(payload.utf8), timeout: timeout)
    }

    /// The `result` of an ok reply; throws with the reply otherwise.
    @discardableResult
    public func ok(_ device: String, _ op: ChimeCore.Operation, _ payload: String) async throws -> JSONObject {
        try await commands.ok(device, op, payload)
    }

    public func list(_ device: String) async throws -> [JSONObject] {
        let result = try await ok(device, .list, #"{"limit":1000}"#)
        guard case .array(let rows)? = result["notifications"] else { return [] }
        return rows.compactMap(\.objectValue)
    }

    public func subscribeDeliveries(_ device: String) async throws {
        try await commands.subscribeDeliveries(device)
    }

    /// The deliveries received so far for `device`, as JSON.
    public func deliveries(_ device: String) -> [JSONObject] { commands.deliveries(device) }

    /// Waits until `count` deliveries for `device` have arrived (or the timeout passes), and
    /// returns what arrived.
    public func waitForDeliveries(_ device: String, count: Int, timeout: Duration) async -> [JSONObject] {
        _ = await eventually(timeout: timeout) { deliveries(device).count >= count }
        return deliveries(device)
    }
}

extension WorkerFixture {
    /// Sends a command and returns the whole reply, or nil when none came within `timeout`.
    public func reply(
        _ device: String,
        _ op: ChimeCore.Operation,
        _ payload: String,
        timeout: Duration = .seconds(10)
    ) async
        -> JSONObject?
    {
        try? await send(topic: topics.command(device, op), payload, timeout: timeout)
    }
}

extension JSONObject {
    /// `error.code` of a reply.
    public var errorCode: String? { self["error"]?.objectValue?["code"]?.stringValue }
    public var errorField: String? { self["error"]?.objectValue?["field"]?.stringValue }
    public var isOK: Bool { self["ok"] == true }
}

// MARK: - A client without a chimed of its own

/// An MQTT 5 client of a broker, sending commands with a Response Topic and collecting the
/// deliveries of the devices it subscribed to: ``WorkerFixture``'s client, for tests that run the
/// worker themselves.
public final class CommandClient: Sendable {
    public let requester: MQTTRequester
    public let topics = Topics(prefix: "chime")
    public let replyTopic = "test/replies/\(UInt32.random(in: 0...UInt32.max))"
    /// Every message on the client's subscriptions that was not a reply, in arrival order.
    public let received = Mutex<[MQTTMessage]>([])

    public init(
        broker: TestBroker,
        clientId: String = "client-\(UInt32.random(in: 0...UInt32.max))",
        persistent: Bool = false
    )
        async throws
    {
        var options = broker.clientOptions(clientId: clientId)
        if persistent {
            options.cleanStart = false
            options.sessionExpiryInterval = 3600
        }
        options.reconnectDelay = .milliseconds(200) ... .seconds(1)
        requester = try MQTTRequester(options: options)
        try await requester.connect(timeout: .seconds(10))
        let stream = requester.messages
        Task { [self] in
            for await message in stream { received.withLock { $0.append(message) } }
        }
    }

    public func stop() { requester.stop() }

    /// Sends a command and returns the reply; throws on timeout.
    public func send(
        _ device: String,
        _ op: ChimeCore.Operation,
        _ payload: String,
        timeout: Duration = .seconds(10)
    )
        async throws -> JSONObject
    {
        try await send(topic: topics.command(device, op), Array(payload.utf8), timeout: timeout)
    }

    public func send(topic: String, _ payload: [UInt8], timeout: Duration = .seconds(10)) async throws -> JSONObject {
        let reply = try await requester.request(
            topic: topic,
            payload: payload,
            responseTopic: replyTopic,
            timeout: timeout
        )
        guard case .object(let o) = try JSON(parsing: reply.payload) else {
            throw HarnessError("reply is not an object")
        }
        return o
    }

    /// The `result` of an ok reply; throws with the reply otherwise.
    @discardableResult
    public func ok(_ device: String, _ op: ChimeCore.Operation, _ payload: String) async throws -> JSONObject {
        let reply = try await send(device, op, payload)
        guard reply.isOK, case .object(let result)? = reply["result"] else {
            throw HarnessError("expected ok, got \(JSON.object(reply).text)")
        }
        return result
    }

    public func listedIds(_ device: String) async throws -> [String] {
        let result = try await ok(device, .list, #"{"limit":1000}"#)
        return (result["notifications"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
    }

    public func subscribeDeliveries(_ device: String) async throws {
        try await requester.subscribe(topics.notifications(device), qos: 1, timeout: .seconds(10))
    }

    /// Deliveries received so far for `device`.
    public func deliveries(_ device: String) -> [JSONObject] { objects(on: topics.notifications(device)) }

    /// The JSON objects received so far on `topic`, in arrival order.
    public func objects(on topic: String) -> [JSONObject] {
        received.withLock { $0.filter { $0.topic == topic } }.compactMap {
            (try? JSON(parsing: $0.payload))?.objectValue
        }
    }

    /// Waits until a delivery of notification `id` of `device` arrives; returns it.
    public func waitForDelivery(_ device: String, id: String, timeout: Duration = .seconds(20)) async -> JSONObject? {
        var found: JSONObject?
        _ = await eventually(timeout: timeout) {
            found = deliveries(device).first { $0["id"]?.stringValue == id }
            return found != nil
        }
        return found
    }
}

/// A value behind a lock that tasks can share (a local `Mutex` cannot be captured by them).
public final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    public init(_ value: Value) { mutex = Mutex(value) }
    public func withLock<R>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
    public var value: Value { mutex.withLock { $0 } }
}

extension CommandClient {
    /// Slot mode: the slots each worker said it served in its latest stats (every second), by the
    /// stats' `workerId`.
    public func slotsServed() -> [String: Set<Int>] {
        var latest: [String: Set<Int>] = [:]
        for stats in received.withLock({ $0.filter { $0.topic.hasSuffix("/stats") } }) {
            guard case .object(let o)? = try? JSON(parsing: stats.payload), let id = o["workerId"]?.stringValue
            else { continue }
            latest[id] = Set(
                (o["slots"]?.arrayValue ?? []).compactMap { slot -> Int? in
                    if case .int(let n) = slot { Int(n) } else { nil }
                }
            )
        }
        return latest
    }

    /// Waits until the latest stats of the workers `names` show each of `slots` slots served by one
    /// of them, in shares that differ by one at most.
    public func waitUntilBalanced(among names: Set<String>, slots: Int, timeout: Duration) async -> Bool {
        await eventually(timeout: timeout, every: .milliseconds(250)) {
            let served = self.slotsServed().filter { names.contains($0.key) }
            let all = served.values.reduce(into: [Int]()) { $0 += $1 }
            let shares = served.values.map(\.count).sorted()
            return served.count == names.count && all.count == slots && Set(all).count == slots
                && shares.last! - shares.first! <= 1
        }
    }
}
