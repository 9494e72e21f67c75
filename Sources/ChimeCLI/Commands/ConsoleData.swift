import ChimeConsole
import ChimeCore
import ChimeMQTT
import Synchronization

/// The workers as `chime console` sees them, over one MQTT connection as a backend account: the
/// retained statuses and the stats of every worker (kept as they arrive), and commands sent with
/// the CLI's request and reply (``Connection/send(_:device:_:)``).
final class ConsoleMQTTData: ConsoleData {
    /// Workers remembered, at most: a broker that lets anyone write `P/$worker/...` cannot grow the
    /// console's memory without bound.
    static let maximumWorkers = 1000
    /// A status or stats message larger than this is ignored: a worker's are a few KiB.
    static let maximumMessageBytes = 64 * 1024

    /// What each worker published: its status, its latest stats and the stats before them.
    final class Heard: Sendable {
        struct Worker {
            var status: JSONObject?
            var stats: JSONObject?
            var previousStats: JSONObject?
        }

        let workers = Mutex<[String: Worker]>([:])
        let topics: Topics

        init(topics: Topics) { self.topics = topics }

        func take(_ message: MQTTMessage) {
            guard message.payload.count <= maximumMessageBytes,
                let (id, kind) = topics.parseWorkerTopic(message.topic)
            else { return }
            // An empty retained message clears a worker's status.
            let object = (try? JSON(parsing: message.payload))?.objectValue
            workers.withLock { workers in
                guard workers[id] != nil || workers.count < maximumWorkers else { return }
                var worker = workers[id] ?? Worker()
                if kind == .status {
                    worker.status = object
                } else if let object {
                    worker.previousStats = worker.stats
                    worker.stats = object
                }
                workers[id] = worker
            }
        }

        /// Every worker that has a status, by id, each named by the id in its topics, which the
        /// broker's ACL ties to the worker's account: a payload's `workerId` could name another.
        var fleet: [FleetWorker] {
            workers.withLock { $0 }.sorted { $0.key < $1.key }.compactMap { id, worker in
                worker.status.map {
                    FleetWorker(id: id, status: $0, stats: worker.stats, previousStats: worker.previousStats)
                }
            }
        }
    }

    let connection: Connection
    let heard: Heard
    let gathering: Task<Void, Never>

    /// Subscribes to the workers' status and stats topics and keeps what comes.
    init(_ connection: Connection) async throws(CLIFailure) {
        self.connection = connection
        let topics = connection.topics
        let heard = Heard(topics: topics)
        self.heard = heard
        let stream = connection.requester.messages
        gathering = Task {
            for await message in stream { heard.take(message) }
        }
        do {
            try await connection.requester.subscribe(topics.workerStatus("+"), qos: 1, timeout: connection.waitLimit)
            try await connection.requester.subscribe(topics.workerStats("+"), qos: 0, timeout: connection.waitLimit)
            // One subscription for the replies of every device the console asks: the requester
            // then subscribes to no device's reply topic of its own.
            try await connection.requester.subscribe(
                connection.options.replyTopic(for: "+"),
                qos: 1,
                timeout: connection.waitLimit
            )
        } catch {
            throw CLIFailure(.unreachable, "cannot subscribe to the worker topics: \(error.message)")
        }
    }

    func fleet() async -> [FleetWorker] {
        heard.fleet
    }

    func send(_ op: Operation, device: String, _ payload: JSONObject) async -> Result<JSONObject, ConsoleDataError> {
        do throws(CLIFailure) {
            return .success(try await connection.send(op, device: device, payload))
        } catch {
            let code =
                switch error.kind {
                case .unreachable: "unreachable"
                case .reply: "refused"
                case .usage, .failed: "failed"
                }
            return .failure(ConsoleDataError(code: code, message: error.message))
        }
    }

    func stop() {
        gathering.cancel()
        connection.close()
    }
}
