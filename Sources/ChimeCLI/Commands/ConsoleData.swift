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
    /// Where the workers answer `find`: this console's own reply space, which the deploy ACL lets a
    /// backend account read (`P/$reply/{account}/...`).
    let findReplies: String

    /// Subscribes to the workers' status and stats topics and keeps what comes.
    init(_ connection: Connection) async throws(CLIFailure) {
        self.connection = connection
        let topics = connection.topics
        let heard = Heard(topics: topics)
        self.heard = heard
        let account = connection.options.mqtt.username.flatMap { $0.isEmpty ? nil : $0 } ?? "console"
        findReplies = "\(topics.prefix)/$reply/\(account)/console-\(connection.options.nonce)/find"
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
            try await connection.requester.subscribe(findReplies, qos: 1, timeout: connection.waitLimit)
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

    /// Publishes the query once on `P/$fleet/find` and takes the replies of the workers whose
    /// retained status says online, until each has answered or ``Connection/waitLimit`` has passed.
    func find(_ query: FindQuery) async -> Result<FleetFindAnswers, ConsoleDataError> {
        let online = heard.fleet.filter(\.isOnline).map(\.id)
        guard !online.isEmpty else {
            return .failure(ConsoleDataError(code: "unreachable", message: "no worker is online"))
        }
        let correlation = MQTTRequester.newCorrelationData()
        let expected = correlation
        let topic = findReplies
        // One wait a worker, registered before the query goes out: each takes the next reply.
        let waits = online.map { _ in
            connection.requester.expectMessage { $0.topic == topic && $0.correlationData == expected }
        }
        var properties = MQTTPublishProperties()
        properties.responseTopic = findReplies
        properties.correlationData = correlation
        properties.contentType = "application/json"
        // A worker whose session keeps the query while it is away answers it on its return; by then
        // nobody waits for it.
        properties.messageExpiryInterval = 60
        let limit = connection.waitLimit
        let deadline = ContinuousClock.now + limit
        do {
            let code = try await connection.requester.publish(
                topic: connection.topics.fleetFind,
                payload: JSON.object(query.json).bytes,
                qos: 1,
                properties: properties,
                timeout: limit
            )
            if code >= 0x80 {
                return .failure(
                    ConsoleDataError(
                        code: "refused",
                        message: "the broker refused the query (reason code \(code)): the console's account must "
                            + "be a backend's that may write \(connection.topics.fleetFind)"
                    )
                )
            }
        } catch {
            return .failure(ConsoleDataError(code: "unreachable", message: "cannot send the query: \(error.message)"))
        }
        var answers = FleetFindAnswers(pages: [:])
        for wait in waits {
            let left = max(Duration.zero, deadline - ContinuousClock.now)
            guard let message = try? await wait.value(timeout: left),
                case .object(let reply)? = try? JSON(parsing: message.payload),
                let worker = reply["workerId"]?.stringValue
            else { continue }
            if reply["ok"] == true, case .object(let result)? = reply["result"], let page = FindPage(result: result) {
                answers.pages[worker] = page
            } else {
                let error = reply["error"]?.objectValue
                answers.refusals[worker] = error?["message"]?.stringValue ?? "an answer that is not a find's"
            }
        }
        answers.silent = online.filter { answers.pages[$0] == nil && answers.refusals[$0] == nil }
        return .success(answers)
    }

    func stop() {
        gathering.cancel()
        connection.close()
    }
}
