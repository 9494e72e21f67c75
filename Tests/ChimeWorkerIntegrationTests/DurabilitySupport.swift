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
