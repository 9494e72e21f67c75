import ChimeCore
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// Where a test's worker keeps its journal and snapshots: tests that are about what survives run
/// on both (`@Test(arguments: StoreKind.allCases)`).
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// The data directory (`--data-dir`), the default.
    case directory
    /// A PostgreSQL of the test's own (`--store`, TestPostgres).
    case postgres

    var testDescription: String { rawValue }
}

/// A broker, a data directory (or a PostgreSQL), a `chimed` and an MQTT 5 client: one test's world.
final class WorkerFixture: Sendable {
    let broker: TestBroker
    let data: TemporaryDirectory
    /// The store, with ``StoreKind/postgres``.
    let postgres: TestPostgres?
    let workerId: String
    let topics = Topics(prefix: "chime")
    let extraArguments: [String]
    let current: Mutex<Chimed?>
    /// The test's client: commands with a Response Topic, deliveries, and every other message it
    /// receives (`commands.received`).
    let commands: CommandClient
    var client: MQTTRequester { commands.requester }

    static func start(
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

    var worker: Chimed? { current.withLock { $0 } }

    /// - Parameter environment: chimed's environment (``FakeTime`` sets its clock).
    func startWorker(environment: [String: String] = [:]) async throws {
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
    func killWorker() async {
        guard let chimed = worker else { return }
        chimed.process.kill()
        await chimed.process.waitForExit(timeout: .seconds(10))
    }

    /// SIGTERM and wait; returns the exit status.
    @discardableResult
    func stopWorker() async -> ChildProcess.Termination? {
        guard let chimed = worker else { return nil }
        chimed.process.terminate()
        return await chimed.process.waitForExit(timeout: .seconds(20))
    }

    func stop() async {
        commands.stop()
        await killWorker()
        await broker.stop()
        await postgres?.stop()
    }

    /// Sends a command with an MQTT 5 Response Topic and returns the reply as JSON.
    func send(
        _ device: String,
        _ op: ChimeCore.Operation,
        _ payload: String,
        timeout: Duration = .seconds(10)
    ) async throws
        -> JSONObject
    {
        try await commands.send(device, op, payload, timeout: timeout)
    }

    func send(topic: String, _ payload: String, timeout: Duration = .seconds(10)) async throws -> JSONObject {
        try await commands.send(topic: topic, Array(payload.utf8), timeout: timeout)
    }

    /// The `result` of an ok reply; throws with the reply otherwise.
    @discardableResult
    func ok(_ device: String, _ op: ChimeCore.Operation, _ payload: String) async throws -> JSONObject {
        try await commands.ok(device, op, payload)
    }

    func list(_ device: String) async throws -> [JSONObject] {
        let result = try await ok(device, .list, #"{"limit":1000}"#)
        guard case .array(let rows)? = result["notifications"] else { return [] }
        return rows.compactMap(\.objectValue)
    }

    func subscribeDeliveries(_ device: String) async throws {
        try await commands.subscribeDeliveries(device)
    }

    /// The deliveries received so far for `device`, as JSON.
    func deliveries(_ device: String) -> [JSONObject] { commands.deliveries(device) }

    /// Waits until `count` deliveries for `device` have arrived (or the timeout passes), and
    /// returns what arrived.
    func waitForDeliveries(_ device: String, count: Int, timeout: Duration) async -> [JSONObject] {
        _ = await eventually(timeout: timeout) { deliveries(device).count >= count }
        return deliveries(device)
    }
}
