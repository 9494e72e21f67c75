import ChimeCore
import ChimeJournal
import ChimeMQTT
import ChimeSupport
import Foundation
import Synchronization

/// Why the worker stopped abnormally: reported in one line, exit status 1.
public struct WorkerError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// `chimed`: recovers the data directory, connects to the broker and runs the engine loop.
///
/// Threads: the libmosquitto network thread only copies events into the ``Inbox``; one loop
/// thread (the caller of ``run()``) owns the engine, the journal and every decision; a
/// background thread writes snapshots from a frozen copy of the state.
public final class Worker: Sendable {
    public let configuration: WorkerConfiguration
    let logger: Logger
    let fileSystem: any FileSystem
    let inbox = Inbox()

    /// - Parameter fileSystem: the journal's file operations; tests inject faults through it.
    public init(configuration: WorkerConfiguration, logger: Logger, fileSystem: any FileSystem = SystemFileSystem()) {
        self.configuration = configuration
        self.logger = logger
        self.fileSystem = fileSystem
    }

    /// Asks the loop to shut down gracefully. Safe from any thread, more than once.
    public func stop() {
        inbox.push(.stop)
    }

    /// Asks for a snapshot now (SIGUSR1), whatever the journal's size: before a backup, or to
    /// make the next start quick. Safe from any thread.
    public func requestSnapshot() {
        inbox.push(.snapshotRequested)
    }

    /// Opens the data directory and rebuilds the engine from it, logging progress and a `ready`
    /// line. What was read from the disk is dropped on return (it can be as large as the state).
    func recover() throws(WorkerError) -> (Journal, Engine) {
        let started = ContinuousClock.now
        let journal: Journal
        let recovery: Recovery
        do {
            (journal, recovery) = try Journal.open(
                directory: configuration.dataDirectory,
                options: JournalOptions(fsync: configuration.fsync, snapshotAfterBytes: configuration.snapshotBytes),
                fileSystem: fileSystem
            )
        } catch {
            throw WorkerError(error.message)
        }
        for warning in recovery.warnings { logger.warning(warning) }
        let readMs = milliseconds(ContinuousClock.now - started)
        var phaseMs: [String: Int64] = [:]

        if let snapshot = recovery.snapshot {
            logger.info(
                "recovering",
                [
                    "snapshotSequence": "\(snapshot.sequence)", "snapshotEntries": "\(snapshot.entries.count)",
                    "records": "\(recovery.records.count)",
                ]
            )
        }
        // Large data directories take a while: say how far recovery has got every few seconds.
        var lastProgress = ContinuousClock.now
        let engine: Engine
        do {
            engine = try Engine.recovered(
                from: recovery,
                configuration: configuration.engine,
                directory: configuration.dataDirectory
            ) { phase, done, total in
                guard ContinuousClock.now - lastProgress >= .seconds(2) else { return }
                lastProgress = .now
                logger.info("recovering", ["phase": phase, "done": "\(done)", "total": "\(total)"])
            } timings: {
                phaseMs[$0] = $1
            }
        } catch {
            try? journal.close()
            throw error
        }
        logger.notice(
            "ready",
            [
                "notifications": "\(engine.pendingCount)",
                "devices": "\(engine.deviceCount)",
                "recoveryMs": "\(milliseconds(ContinuousClock.now - started))",
                // Where the time went: reading the directory, the snapshot, the journal after
                // it, computing the timers.
                "readMs": "\(readMs)",
                "snapshotMs": "\(phaseMs["snapshotMs"] ?? 0)",
                "journalMs": "\(phaseMs["journalMs"] ?? 0)",
                "armMs": "\(phaseMs["armMs"] ?? 0)",
                "worker": configuration.workerId,
                "partition": "\(configuration.partition)",
                "dataDir": configuration.dataDirectory,
            ]
        )
        return (journal, engine)
    }

    /// Runs until ``stop()``; returns after a clean shutdown.
    /// - Throws: ``WorkerError`` when the data directory cannot be used, the journal is
    ///   corrupt, or a sync failed.
    public func run() throws(WorkerError) {
        let (journal, engine) = try recover()

        let inbox = self.inbox
        let client: MQTTClient
        do {
            var options = configuration.broker
            options.cleanStart = false
            options.sessionExpiryInterval = 7 * 24 * 3600
            options.will = MQTTWill(
                topic: configuration.topics.workerStatus(configuration.workerId),
                payload: WorkerLoop.statusPayload(state: "offline", configuration: configuration),
                qos: 1,
                retain: true
            )
            client = try MQTTClient(options: options) { event in inbox.push(.mqtt(event)) }
            logger.info(
                "connecting",
                ["broker": redacted(configuration.brokerURL), "clientId": options.clientId ?? ""]
            )
            if let user = options.username, !user.isEmpty, user != configuration.workerId {
                // A broker that names sessions after accounts (the deploy configuration) ignores the
                // client id, and its ACL lets a worker write only the status of its own name.
                logger.notice(
                    "the broker account differs from the worker id; with the deploy broker configuration name the "
                        + "account after the worker id",
                    ["user": user, "worker": configuration.workerId]
                )
            }
            try client.start()
        } catch {
            try? journal.close()
            throw WorkerError("cannot start the MQTT client: \(error)")
        }

        let loop = WorkerLoop(
            configuration: configuration,
            logger: logger,
            inbox: inbox,
            engine: engine,
            journal: journal,
            client: client
        )
        try loop.run()
    }
}

/// The URL without its password, for logs.
func redacted(_ url: String) -> String {
    guard let at = url.lastIndex(of: "@"), let scheme = url.range(of: "://") else { return url }
    let credentials = url[scheme.upperBound..<at]
    guard let colon = credentials.firstIndex(of: ":") else { return url }
    return url.replacingCharacters(in: colon..<at, with: ":***")
}

/// The engine loop's state, touched only by the loop thread.
final class WorkerLoop {
    let configuration: WorkerConfiguration
    let logger: Logger
    let inbox: Inbox
    let engine: Engine
    let journal: Journal
    let client: MQTTClient
    let decoder: CommandDecoder
    var budget: DeviceBudget
    var random = SystemRandomNumberGenerator()

    /// Replies waiting for the journal commit that makes their commands durable.
    var pendingReplies: [(topic: String, payload: [UInt8], properties: MQTTPublishProperties)] = []
    /// Message ids of deliveries published and not yet acknowledged.
    var tokensByMessageId: [Int32: UInt64] = [:]
    var connected = false
    /// The message id of the command subscription, to know when it is in place.
    var subscription: Int32?
    /// When the broker reported our session taken over, within the last ``takeoverWindow``.
    var takeovers: [ContinuousClock.Instant] = []
    /// Why the worker stops with an error once it has shut down.
    var fatal: WorkerError?
    /// The message id of the retained `online` status, to hear whether the broker took it.
    var statusMessageId: Int32?
    /// When to ask again for a command subscription the broker refused.
    var resubscribeAt: ContinuousClock.Instant?
    var stopping = false
    var stopDeadline: ContinuousClock.Instant?
    /// A delivery record could not be journaled: memory is ahead of the journal until a
    /// snapshot catches up, and commands are refused meanwhile.
    var diverged = false
    var snapshotRunning = false
    /// A snapshot was asked for (SIGUSR1) and has not started yet.
    var snapshotWanted = false
    /// An entry was applied but not journaled after the running snapshot froze the state: that
    /// snapshot does not cover it, so it cannot end the divergence.
    var unjournaledSinceSnapshotFroze = false
    var lastSnapshotAttempt = ContinuousClock.now - .seconds(3600)
    let stats = WorkerStats()
    var lastStats = ContinuousClock.now

    init(
        configuration: WorkerConfiguration,
        logger: Logger,
        inbox: Inbox,
        engine: Engine,
        journal: Journal,
        client: MQTTClient
    ) {
        self.configuration = configuration
        self.logger = logger
        self.inbox = inbox
        self.engine = engine
        self.journal = journal
        self.client = client
        self.decoder = CommandDecoder(limits: configuration.limits)
        self.budget = configuration.deviceBudget
    }

    /// Tells this process from another one with the same worker id, in the retained status.
    static let instance = String(UInt64.random(in: 0...UInt64.max), radix: 36)

    static func statusPayload(state: String, configuration: WorkerConfiguration, extra: JSONObject = [:]) -> [UInt8] {
        var o: JSONObject = [
            "state": .string(state),
            "workerId": .string(configuration.workerId),
            "instance": .string(instance),
            "partition": .string(configuration.partition.description),
        ]
        for (k, v) in extra { o[k] = v }
        return JSON.object(o).bytes
    }

    func run() throws(WorkerError) {
        let startedAt = wallClock()
        defer { client.stop() }
        while true {
            let timeout = waitTime()
            let events = inbox.take(timeout: timeout)
            for event in events {
                switch event {
                case .mqtt(let e): handle(e, startedAt: startedAt)
                case .snapshotFinished(let writer, let error): snapshotFinished(writer, error)
                case .snapshotRequested: snapshotWanted = true
                case .stop:
                    if !stopping {
                        logger.notice("stopping: finishing deliveries in flight")
                        stopping = true
                        stopDeadline = .now + .seconds(5)
                    }
                }
                // A long batch of commands does not hold up what falls due meanwhile.
                if ContinuousClock.now - lastTick >= Self.tickInterval { tick() }
            }
            tick()
            do {
                let syncing = journal.hasUnsyncedData
                let before = ContinuousClock.now
                try journal.commit()
                if syncing && !journal.hasUnsyncedData {
                    stats.fsync.record(milliseconds(ContinuousClock.now - before))
                }
            } catch {
                throw WorkerError("journal sync failed, exiting so that recovery reads what is on disk: \(error)")
            }
            flushReplies()
            if let at = resubscribeAt, connected, ContinuousClock.now >= at { subscribe() }
            maybeSnapshot()
            maybePublishStats()
            if stopping && (engine.inflightCount == 0 || !connected || ContinuousClock.now >= stopDeadline!) {
                break
            }
        }
        try shutdown()
        if let fatal { throw fatal }
    }

    /// When the engine last delivered what was due.
    var lastTick = ContinuousClock.now
    /// The longest the loop handles commands without delivering what fell due meanwhile.
    static let tickInterval: Duration = .milliseconds(10)

    func tick() {
        lastTick = .now
        guard !stopping else { return }
        let room = Self.maxDeliveriesInFlight - engine.inflightCount
        for output in engine.tick(now: wallClock(), limit: room) {
            switch output {
            case .publish(let delivery): publish(delivery)
            case .write(let entry): record(entry)
            }
        }
    }

    /// Deliveries published and not yet acknowledged, at most. More would only queue up inside
    /// the MQTT client (whose queue is slow to walk when long) while the broker's window is full.
    static let maxDeliveriesInFlight = 1000

    /// Seconds until the engine's next wake-up, the fsync interval, or stats are due.
    func waitTime() -> Double {
        if !pendingReplies.isEmpty { return 0 }
        var wait = 1.0
        // With the window full, only an acknowledgement (an event) makes room.
        if let next = engine.nextWake, engine.inflightCount < Self.maxDeliveriesInFlight {
            wait = min(wait, max(0, Double(next.milliseconds - wallClock().milliseconds) / 1000))
        }
        if let deadline = journal.syncDeadline {
            let d = ContinuousClock.now.duration(to: deadline)
            wait = min(wait, max(0, seconds(d)))
        }
        return stopping ? min(wait, 0.05) : wait
    }

    func handle(_ event: MQTTEvent, startedAt: Instant) {
        switch event {
        case .connected(let sessionPresent):
            connected = true
            stats.reconnects += 1
            logger.info("connected", ["sessionPresent": "\(sessionPresent)"])
            // Subscribe on every connection: a broker that lost its sessions forgets them.
            subscribe()
            engine.setConnected(!stopping)
        case .disconnected(let reason):
            connected = false
            engine.setConnected(false)
            if reason == Self.sessionTakenOver {
                tookOver(because: "another client connected with this worker's client id and took its session")
            } else if !stopping {
                logger.warning("disconnected from the broker; reconnecting", ["reason": "\(reason)"])
            }
        case .message(let message) where message.topic == statusTopic:
            // Our own retained status: written by another process when its instance is not ours. One
            // that started before us is a previous run of this worker (killed before its will went
            // out), not a second worker: only the older of two concurrent workers gives way.
            guard case .object(let status)? = try? JSON(parsing: message.payload),
                status["state"] == "online", let other = status["instance"]?.stringValue, other != Self.instance,
                let otherStart = status["startedAt"]?.stringValue, otherStart >= startedAt.rfc3339()
            else { return }
            tookOver(because: "another chimed announced itself online with this worker id (instance \(other))")
        case .message(let message):
            command(message)
        case .published(let messageId, let reasonCode) where messageId == statusMessageId:
            statusMessageId = nil
            if reasonCode >= 0x80 {
                logger.error(
                    "the broker refused the worker's status: clients will not see it online (check that the ACL lets "
                        + "this account write \(statusTopic); the deploy "
                        + "ACL names each worker's account after its --worker-id)",
                    ["reason": "0x\(String(reasonCode, radix: 16))"]
                )
            }
        case .published(let messageId, let reasonCode):
            guard let token = tokensByMessageId.removeValue(forKey: messageId) else { return }
            if reasonCode >= 0x80 {
                // Refused (an ACL, a quota): not delivered. It stays due and is retried later.
                stats.refusedDeliveries += 1
                let retry = engine.publishRefused(token, now: wallClock())
                logger.warning(
                    "the broker refused a delivery; it stays due",
                    ["reason": "0x\(String(reasonCode, radix: 16))", "retryMs": "\(retry ?? 0)"]
                )
                return
            }
            if let entry = engine.acknowledged(token) {
                stats.deliveries += 1
                record(entry)
            }
        case .subscribed(let messageId, let grantedQoS):
            guard messageId == subscription else { return }
            if let refusal = grantedQoS.first(where: { $0 >= 0x80 }) ?? (grantedQoS.isEmpty ? 0x80 : nil) {
                // Not online: commands cannot reach us. Ask again in a while (an ACL can be fixed
                // and reloaded without a reconnection).
                stats.subscriptionRefusals += 1
                subscription = nil
                resubscribeAt = .now + .seconds(10)
                logger.error(
                    "the broker refused the command subscription: no command can reach this worker (check the broker's ACL for its account)",
                    ["filter": configuration.topics.commandFilter, "reason": "0x\(String(refusal, radix: 16))"]
                )
                return
            }
            // Online only once commands can reach us.
            statusMessageId = try? client.publish(
                topic: statusTopic,
                payload: Self.statusPayload(
                    state: "online",
                    configuration: configuration,
                    extra: ["startedAt": .string(startedAt.rfc3339()), "pid": .int(Int64(getpid()))]
                ),
                qos: 1,
                retain: true
            )
            logger.notice("serving", ["commands": configuration.topics.commandFilter])
        }
    }

    /// MQTT 5 DISCONNECT reason 0x8E: another client connected with our client id.
    static let sessionTakenOver: Int32 = 0x8E
    /// Takeovers within ``takeoverWindow`` after which the worker gives up: two workers with one
    /// id (or a client that took the id) would otherwise knock each other off for ever.
    static let maxTakeovers = 5
    static let takeoverWindow: Duration = .seconds(60)

    /// Another client took our session: say so, and past the limit stop with a one-line reason so
    /// that a supervisor shows it instead of a flapping pair of workers.
    func tookOver(because cause: String) {
        let now = ContinuousClock.now
        takeovers.removeAll { now - $0 > Self.takeoverWindow }
        takeovers.append(now)
        stats.takeovers += 1
        let clientId = configuration.broker.clientId ?? ""
        logger.error(
            "\(cause); is a second chimed running with --worker-id \(configuration.workerId)?",
            [
                "clientId": clientId, "takeovers": "\(takeovers.count)",
                "withinSeconds": "\(Self.takeoverWindow.components.seconds)",
            ]
        )
        if takeovers.count >= Self.maxTakeovers && fatal == nil {
            fatal = WorkerError(
                "the worker id \(configuration.workerId) (client id \(clientId)) was taken over \(takeovers.count) times "
                    + "within \(Self.takeoverWindow.components.seconds) s: another client or a second chimed uses it; stopping"
            )
            stopping = true
            stopDeadline = .now
        }
    }

    var statusTopic: String { configuration.topics.workerStatus(configuration.workerId) }

    func subscribe() {
        resubscribeAt = nil
        do {
            // Another process's retained status under our worker id tells of a second worker.
            _ = try client.subscribe(statusTopic, qos: 1)
            subscription = try client.subscribe(configuration.topics.commandFilter, qos: 1)
        } catch {
            logger.error("cannot subscribe after connecting: \(error)")
        }
    }

    // MARK: Commands

    func command(_ message: MQTTMessage) {
        guard let address = configuration.topics.parseCommand(message.topic) else {
            stats.invalidTopics += 1
            logger.debug("ignoring a message on a topic that is not a command", ["topic": message.topic])
            return
        }
        guard configuration.partition.owns(address.deviceId) else { return }
        stats.commands[address.opName, default: 0] += 1
        let replyTo = replyDestination(message, address)
        if let problem = address.problem {
            stats.errors += 1
            guard let replyTo else {
                stats.invalidTopics += 1
                logger.info("dropping a command on an invalid topic", ["topic": String(message.topic.prefix(200))])
                return
            }
            queueReply(Reply(op: address.opName, requestId: nil, outcome: .failure(problem)), to: replyTo)
            return
        }
        // Each device pays for the engine time its commands take; one that has used its share is
        // refused before its command is even parsed.
        let now = wallClock()
        let admission = budget.admits(address.deviceId, now: now)
        guard admission.admitted else {
            stats.rateLimited += 1
            if let replyTo {
                let error = ChimeError(
                    .rateLimited,
                    "device \(address.deviceId) used its share of the worker (--device-rate \(Int(budget.rate)) ms/s); "
                        + "try again in \(admission.retryAfterMs) ms"
                )
                queueReply(Reply(op: address.opName, requestId: nil, outcome: .failure(error)), to: replyTo)
            }
            return
        }
        let started = ContinuousClock.now
        defer { budget.charge(address.deviceId, milliseconds: seconds(ContinuousClock.now - started) * 1000, now: now) }
        let op = address.op!
        let request: Request
        switch decoder.decode(deviceId: address.deviceId, op: op, payload: message.payload) {
        case .failure(let failure):
            stats.errors += 1
            logger.debug(
                "rejected",
                ["device": address.deviceId, "op": op.rawValue, "code": failure.error.code.wireName]
            )
            if let replyTo {
                queueReply(
                    Reply(op: op.rawValue, requestId: failure.requestId, outcome: .failure(failure.error)),
                    to: replyTo
                )
            }
            return
        case .success(var r):
            // Only what can change state is kept to recognise a redelivery; reads are answered again.
            if op.changesState {
                r.key = CommandKey.of(
                    op: op.rawValue,
                    payload: message.payload,
                    correlationData: message.correlationData,
                    hasRequestId: r.requestId != nil,
                    packetId: message.messageId,
                    qos: message.qos
                )
            }
            request = r
        }
        guard let replyTo else { return }
        switch engine.decide(request, now: now, random: &random) {
        case .reply(let reply):
            if !reply.isOK { stats.errors += 1 }
            if case .success(let result) = reply.outcome, result["duplicate"] == true {
                stats.duplicates += 1
                logger.info("a command was received again and not applied again", ["device": address.deviceId])
            }
            queueReply(reply, to: replyTo)
        case .write(let entry):
            if diverged {
                queueReply(
                    Reply(
                        request: request,
                        error: ChimeError(.unavailable, "the journal cannot take writes; nothing was changed")
                    ),
                    to: replyTo
                )
                return
            }
            do {
                try journal.append(type: entry.kind.rawValue, payload: entry.encode(key: request.key))
            } catch {
                stats.errors += 1
                logger.error("journal write failed; command refused", ["error": "\(error)"])
                queueReply(
                    Reply(
                        request: request,
                        error: ChimeError(.unavailable, "the journal cannot take writes: \(error.message)")
                    ),
                    to: replyTo
                )
                return
            }
            let result = engine.apply(entry, key: request.key) ?? [:]
            queueReply(Reply(request: request, result: result), to: replyTo)
        }
    }

    /// Where a reply goes: the MQTT 5 Response Topic (if `acceptsResponseTopic` allows it), else
    /// `P/{deviceId}/replies` when the device id is valid, else nowhere.
    func replyDestination(_ message: MQTTMessage, _ address: Topics.CommandAddress) -> (String, [UInt8]?)? {
        if let topic = message.responseTopic, !topic.isEmpty, !topic.utf8.contains(UInt8(ascii: "+")),
            !topic.utf8.contains(UInt8(ascii: "#")),
            configuration.topics.acceptsResponseTopic(topic, forCommandOn: address.deviceId)
        {
            return (topic, message.correlationData)
        }
        if address.problem?.field == "deviceId" { return nil }
        return (configuration.topics.replies(address.deviceId), nil)
    }

    func queueReply(_ reply: Reply, to destination: (String, [UInt8]?)) {
        var properties = MQTTPublishProperties()
        properties.contentType = "application/json"
        properties.correlationData = destination.1
        pendingReplies.append((destination.0, reply.bytes, properties))
    }

    /// Sends the replies of everything committed: called after the journal sync.
    func flushReplies() {
        for reply in pendingReplies {
            do {
                try client.publish(topic: reply.topic, payload: reply.payload, qos: 1, properties: reply.properties)
            } catch {
                logger.warning("cannot send a reply", ["topic": reply.topic, "error": "\(error)"])
            }
        }
        pendingReplies.removeAll(keepingCapacity: true)
    }

    // MARK: Deliveries

    func publish(_ delivery: Delivery) {
        var properties = MQTTPublishProperties()
        properties.contentType = "application/json"
        properties.userProperties = [MQTTUserProperty("fire-id", delivery.fireId)]
        properties.messageExpiryInterval = delivery.messageExpiry
        do {
            let mid = try client.publish(
                topic: configuration.topics.notifications(delivery.deviceId),
                payload: delivery.payload,
                qos: 1,
                properties: properties
            )
            tokensByMessageId[mid] = delivery.token
            let lateness = wallClock().milliseconds - delivery.due.milliseconds
            stats.lateness.record(lateness)
            if lateness >= configuration.engine.lateThreshold { stats.lateDeliveries += 1 }
        } catch {
            // Retried with the backoff of a refusal: an error such as an oversized packet would
            // otherwise repeat at full speed.
            let retry = engine.publishRefused(delivery.token, now: wallClock())
            logger.warning(
                "cannot publish a delivery; it will be retried",
                ["fireId": delivery.fireId, "error": "\(error)", "retryMs": "\(retry ?? 0)"]
            )
        }
    }

    /// Journals an entry the engine produced itself (delivery records) and applies it. If the
    /// journal cannot take it, memory goes ahead anyway (the delivery happened) and a snapshot
    /// is forced so that the disk catches up.
    func record(_ entry: JournalEntry) {
        if !diverged {
            do {
                try journal.append(type: entry.kind.rawValue, payload: entry.encode())
            } catch {
                logger.error("journal write failed; refusing commands until a snapshot succeeds", ["error": "\(error)"])
                diverged = true
            }
        }
        if diverged && snapshotRunning { unjournaledSinceSnapshotFroze = true }
        engine.apply(entry)
    }

    // MARK: Snapshots

    func maybeSnapshot() {
        guard !snapshotRunning, journal.snapshotDue || diverged || snapshotWanted else { return }
        if diverged && ContinuousClock.now - lastSnapshotAttempt < .seconds(5) { return }
        lastSnapshotAttempt = .now
        let writer: SnapshotWriter
        do {
            writer = try journal.beginSnapshot()
        } catch {
            logger.error("cannot start a snapshot", ["error": "\(error)"])
            return
        }
        snapshotRunning = true
        snapshotWanted = false
        unjournaledSinceSnapshotFroze = false
        let frozen = engine.snapshot
        let inbox = self.inbox
        let started = ContinuousClock.now
        logger.info("snapshot started", ["sequence": "\(writer.coveredSequence)"])
        Thread.detachNewThread {
            var failure: JournalError?
            do throws(JournalError) {
                try frozen.forEachEntry { (entry: [UInt8]) throws(JournalError) in try writer.append(entry) }
                try writer.finish()
            } catch {
                writer.abandon()
                failure = error
            }
            _ = started
            inbox.push(.snapshotFinished(writer, failure))
        }
    }

    func snapshotFinished(_ writer: SnapshotWriter, _ error: JournalError?) {
        snapshotRunning = false
        if let error {
            logger.error("snapshot failed", ["error": "\(error)"])
            return
        }
        do {
            try journal.snapshotCompleted(writer)
            if diverged && unjournaledSinceSnapshotFroze {
                logger.warning("a delivery record was not journaled while the snapshot ran; another snapshot follows")
            } else if diverged {
                logger.notice("journal caught up through a snapshot; accepting commands again")
                diverged = false
            }
            logger.info("snapshot written", ["sequence": "\(writer.coveredSequence)"])
        } catch {
            logger.error("snapshot compaction failed", ["error": "\(error)"])
        }
    }

    // MARK: Stats and shutdown

    func maybePublishStats() {
        guard configuration.statsInterval > 0, connected,
            ContinuousClock.now - lastStats >= .seconds(configuration.statsInterval)
        else { return }
        lastStats = .now
        var o = stats.json
        o["workerId"] = .string(configuration.workerId)
        o["pending"] = .int(Int64(engine.pendingCount))
        o["devices"] = .int(Int64(engine.deviceCount))
        o["inflight"] = .int(Int64(engine.inflightCount))
        o["journalBytesSinceSnapshot"] = .int(Int64(journal.bytesSinceSnapshot))
        o["journalSequence"] = .int(Int64(journal.lastSequence))
        o["at"] = .string(wallClock().rfc3339())
        _ = try? client.publish(
            topic: configuration.topics.workerStats(configuration.workerId),
            payload: JSON.object(o).bytes,
            qos: 0,
            retain: false
        )
    }

    func shutdown() throws(WorkerError) {
        // After a takeover the status topic belongs to the other holder of this worker id.
        if connected && fatal == nil {
            _ = try? client.publish(
                topic: statusTopic,
                payload: Self.statusPayload(state: "offline", configuration: configuration),
                qos: 1,
                retain: true
            )
        }
        client.stop()
        // Commands that arrived before the disconnect were acknowledged by the client library:
        // journal them so that nothing it acknowledged is lost. Their replies cannot be sent.
        for event in inbox.take(timeout: 0) {
            if case .mqtt(.message(let message)) = event { command(message) }
        }
        pendingReplies.removeAll()
        do {
            try journal.close()
        } catch {
            throw WorkerError("journal sync failed at shutdown: \(error)")
        }
        logger.notice("stopped", ["inflightLeft": "\(engine.inflightCount)"])
    }
}

/// A duration in seconds, with its fraction.
func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

func milliseconds(_ d: Duration) -> Int64 {
    d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
}

/// The wall clock, in milliseconds.
func wallClock() -> Instant {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Instant(milliseconds: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
}
