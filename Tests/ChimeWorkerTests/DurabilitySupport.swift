import ChimeCore
import ChimeJournal
import ChimeMQTT
import ChimeSupport
import ChimeTestSupport
import ChimeWiring
import Foundation
import Synchronization
import Testing

@testable import ChimeWorker

/// Helpers shared by the durability tests: rebuilding the state of a data directory as chimed does,
/// reading it, and an in-process worker (over ``FaultyFileSystem``, for the fault tests).
enum Durability {
    /// Rebuilds the engine from a data directory with the worker's own recovery (`Journal.open`,
    /// then `Engine.replaying`). The journal is closed again (and the directory unlocked) before
    /// this returns.
    static func recover(
        _ directory: String,
        configuration: EngineConfiguration = EngineConfiguration(minRepeatSeconds: 1)
    ) throws -> (engine: Engine, recovery: Recovery) {
        let (journal, engine, recovery) = try open(directory, configuration: configuration)
        try journal.close()
        return (engine, recovery)
    }

    /// ``recover(_:configuration:)``, leaving the journal open for more appends or a snapshot.
    static func open(
        _ directory: String,
        configuration: EngineConfiguration = EngineConfiguration(minRepeatSeconds: 1)
    ) throws -> (journal: Journal, engine: Engine, recovery: Recovery) {
        let (journal, recovery) = try Journal.open(directory: directory)
        do {
            let engine = try Engine.replaying(recovery, configuration: configuration, directory: directory)
            return (journal, engine, recovery)
        } catch {
            try? journal.close()
            throw error
        }
    }

    /// The `result` of a read command answered by `engine` (a read never writes).
    static func read(
        _ engine: Engine,
        _ device: String,
        _ op: ChimeCore.Operation,
        _ payload: String
    ) throws
        -> JSONObject
    {
        guard
            case .success(let request) = CommandDecoder().decode(deviceId: device, op: op, payload: Array(payload.utf8))
        else { throw HarnessError("\(payload) is not a valid \(op.rawValue) command") }
        var random = SystemRandomNumberGenerator()
        guard case .reply(let reply) = engine.decide(request, now: ChimeSupport.wallClock(), random: &random),
            case .success(let result) = reply.outcome
        else { throw HarnessError("\(op.rawValue) \(payload) did not answer ok at once") }
        return result.json
    }

    /// The ids `list` shows for `device` in a recovered engine.
    static func listedIds(_ engine: Engine, _ device: String) throws -> [String] {
        let result = try read(engine, device, .list, #"{"limit":1000}"#)
        return (result["notifications"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
    }
}

extension WorkerFixture {
    /// Sends a command and returns the whole reply, or nil when none came within `timeout`.
    func reply(
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
    var errorCode: String? { self["error"]?.objectValue?["code"]?.stringValue }
    var errorField: String? { self["error"]?.objectValue?["field"]?.stringValue }
    var isOK: Bool { self["ok"] == true }
}

// MARK: - chimed in this process

/// A `Worker` run on a thread of the test process, on a real broker, through a given file system:
/// the only way to reach the journal's file seam from a test that still uses MQTT end to end.
final class InProcessWorker: Sendable {
    let worker: Worker
    private let lines = Lines()
    private let outcome = Mutex<Result<Void, WorkerError>?>(nil)

    /// The log, a line per element (a class, so that the logger's closure can hold it).
    private final class Lines: Sendable {
        let all = Mutex<[String]>([])
    }

    init(broker: TestBroker, dataDirectory: String, workerId: String, fileSystem: any FileSystem) throws {
        let flags = try Flags(
            [
                "--broker", broker.url, "--data-dir", dataDirectory, "--worker-id", workerId,
                "--min-repeat-seconds", "1", "--stats-interval", "0", "--log-level", "debug",
            ],
            specs: WorkerConfiguration.flagSpecs,
            environment: [:]
        )
        let configuration = try WorkerConfiguration(flags: flags)
        let lines = self.lines
        let logger = Logger(level: .debug, format: .text) { bytes in
            lines.all.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
        }
        worker = Worker(configuration: configuration, logger: logger, fileSystem: fileSystem)
    }

    /// Runs the worker on a thread of its own and waits until it serves.
    func start() async throws {
        Thread.detachNewThread {
            do throws(WorkerError) {
                try self.worker.run()
                self.outcome.withLock { $0 = .success(()) }
            } catch {
                self.outcome.withLock { $0 = .failure(error) }
            }
        }
        let serving = await eventually { self.log.contains(" serving ") || self.result != nil }
        guard serving, result == nil else { throw HarnessError("the worker did not start:\n\(log)") }
    }

    var log: String { lines.all.withLock { $0.joined() } }
    /// How `run()` ended; nil while it runs.
    var result: Result<Void, WorkerError>? { outcome.withLock { $0 } }

    /// Waits until `run()` returns or throws.
    func waitForEnd(timeout: Duration = .seconds(20)) async -> Result<Void, WorkerError>? {
        _ = await eventually(timeout: timeout) { self.result != nil }
        return result
    }

    /// Asks for a graceful stop and waits for it.
    @discardableResult
    func stop() async -> Result<Void, WorkerError>? {
        worker.stop()
        return await waitForEnd()
    }
}

// MARK: - A client without a chimed of its own

/// An MQTT 5 client of a broker, sending commands with a Response Topic and collecting the
/// deliveries of the devices it subscribed to: ``WorkerFixture``'s client, for tests that run the
/// worker themselves.
final class CommandClient: Sendable {
    let requester: MQTTRequester
    let topics = Topics(prefix: "chime")
    let replyTopic = "test/replies/\(UInt32.random(in: 0...UInt32.max))"
    /// Every message on the client's subscriptions that was not a reply, in arrival order.
    let received = Mutex<[MQTTMessage]>([])

    init(
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

    func stop() { requester.stop() }

    /// Sends a command and returns the reply; throws on timeout.
    func send(
        _ device: String,
        _ op: ChimeCore.Operation,
        _ payload: String,
        timeout: Duration = .seconds(10)
    )
        async throws -> JSONObject
    {
        try await send(topic: topics.command(device, op), Array(payload.utf8), timeout: timeout)
    }

    func send(topic: String, _ payload: [UInt8], timeout: Duration = .seconds(10)) async throws -> JSONObject {
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
    func ok(_ device: String, _ op: ChimeCore.Operation, _ payload: String) async throws -> JSONObject {
        let reply = try await send(device, op, payload)
        guard reply.isOK, case .object(let result)? = reply["result"] else {
            throw HarnessError("expected ok, got \(JSON.object(reply).text)")
        }
        return result
    }

    func listedIds(_ device: String) async throws -> [String] {
        let result = try await ok(device, .list, #"{"limit":1000}"#)
        return (result["notifications"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
    }

    func subscribeDeliveries(_ device: String) async throws {
        try await requester.subscribe(topics.notifications(device), qos: 1, timeout: .seconds(10))
    }

    /// Deliveries received so far for `device`.
    func deliveries(_ device: String) -> [JSONObject] { objects(on: topics.notifications(device)) }

    /// The JSON objects received so far on `topic`, in arrival order.
    func objects(on topic: String) -> [JSONObject] {
        received.withLock { $0.filter { $0.topic == topic } }.compactMap {
            (try? JSON(parsing: $0.payload))?.objectValue
        }
    }

    /// Waits until a delivery of notification `id` of `device` arrives; returns it.
    func waitForDelivery(_ device: String, id: String, timeout: Duration = .seconds(20)) async -> JSONObject? {
        var found: JSONObject?
        _ = await eventually(timeout: timeout) {
            found = deliveries(device).first { $0["id"]?.stringValue == id }
            return found != nil
        }
        return found
    }
}

/// A value behind a lock that tasks can share (a local `Mutex` cannot be captured by them).
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<R>(_ body: (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }
    var value: Value { mutex.withLock { $0 } }
}

extension CommandClient {
    /// Slot mode: the slots each worker said it served in its latest stats (every second), by the
    /// stats' `workerId`.
    func slotsServed() -> [String: Set<Int>] {
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
    func waitUntilBalanced(among names: Set<String>, slots: Int, timeout: Duration) async -> Bool {
        await eventually(timeout: timeout, every: .milliseconds(250)) {
            let served = self.slotsServed().filter { names.contains($0.key) }
            let all = served.values.reduce(into: [Int]()) { $0 += $1 }
            let shares = served.values.map(\.count).sorted()
            return served.count == names.count && all.count == slots && Set(all).count == slots
                && shares.last! - shares.first! <= 1
        }
    }
}
