import ChimeCore
import ChimeMQTT
import ChimePush
import ChimeStore
import ChimeSupport
import ChimeTime
import Foundation

/// `chimed`: recovers the data directory, connects to the broker and runs the engine loop.
///
/// Threads: the libmosquitto network thread only copies events into the ``Inbox``; one loop
/// thread (the caller of ``run()``) runs the ``WorkerLoop``, whose ``WorkerStateMachine`` owns
/// the engine and every decision; a background thread writes snapshots from a frozen copy of the
/// state.
public final class Worker: Sendable {
    public let configuration: WorkerConfiguration
    let logger: Logger
    /// Opens the concrete store: the executable's choice.
    let opener: StoreOpener
    let inbox = Inbox()

    /// - Parameter store: opens the store `configuration` names (ChimeWiring's
    ///   `StoreOpener.configured(_:logger:fileSystem:)`, which tests give a fault-injecting file system).
    public init(configuration: WorkerConfiguration, logger: Logger, store: StoreOpener) {
        self.configuration = configuration
        self.logger = logger
        self.opener = store
    }

    /// Tells this process from another one with the same worker id, in the retained status.
    static let instance = String(UInt64.random(in: 0...UInt64.max), radix: 36)

    /// Asks the loop to shut down gracefully. Safe from any thread, more than once.
    public func stop() {
        inbox.push(.stop)
    }

    /// Asks for a snapshot now (SIGUSR1), whatever the journal's size: before a backup, or to
    /// make the next start quick. Safe from any thread.
    public func requestSnapshot() {
        inbox.push(.snapshotRequested)
    }

    /// Asks the loop to read the zone database again now (SIGHUP), after a tzdata upgrade. Safe from
    /// any thread.
    public func requestZoneCheck() {
        inbox.push(.zoneCheckRequested)
    }

    /// Slot mode: joins the store's workers. No engine yet: each slot's comes with its lease.
    func joinSlots(_ slots: (count: Int, leaseTTL: Duration), uri: String) throws(WorkerError) -> JoinedSlots {
        let joined = try opener.joinSlots(slots, uri, Self.instance)
        logger.notice(
            "ready",
            [
                "slots": "\(joined.slotCount)", "leaseTTL": "\(slots.leaseTTL)", "worker": configuration.workerId,
                "store": redacted(uri),
            ]
        )
        return joined
    }

    /// Opens the data directory and rebuilds the engine from it, logging progress and a `ready`
    /// line. What was read from the disk is dropped on return (it can be as large as the state).
    func recover() throws(WorkerError) -> (any WorkerStore, Engine) {
        let started = ContinuousClock.now
        let (store, recovery) = try opener.recover()
        for warning in recovery.warnings { logger.warning(warning) }
        let readMs = milliseconds(ContinuousClock.now - started)
        var phaseMs: [String: Int64] = [:]

        if let snapshot = recovery.snapshot {
            logger.info(
                "recovering",
                [
                    "snapshotSequence": "\(snapshot.sequence)", "snapshotEntries": "\(snapshot.count)",
                    "records": "\(recovery.records.count)",
                ]
            )
        }
        // Large data directories take a while: say how far recovery has got every few seconds.
        var lastProgress = ContinuousClock.now
        let engine: Engine
        do {
            engine = try Engine.replaying(
                recovery,
                configuration: configuration.engine,
                directory: configuration.dataDirectory
            ) { phase, done, total in
                guard ContinuousClock.now - lastProgress >= .seconds(2) else { return }
                lastProgress = .now
                logger.info("recovering", ["phase": phase, "done": "\(done)", "total": "\(total)"])
            } timings: {
                phaseMs[$0] = milliseconds($1)
            }
        } catch {
            try? store.close()
            throw WorkerError(error.message)
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
                configuration.store == nil ? "dataDir" : "store": configuration.store.map(redacted)
                    ?? configuration.dataDirectory,
            ]
        )
        return (store, engine)
    }

    /// Runs until ``stop()``; returns after a clean shutdown.
    /// - Throws: ``WorkerError`` when the data directory cannot be used, the journal is
    ///   corrupt, or a sync failed.
    public func run() throws(WorkerError) {
        if let directory = configuration.zoneinfo { ZoneDatabase.shared.use(directories: [directory]) }
        logger.info(
            "zone database",
            [
                "directories": ZoneDatabase.shared.directories.joined(separator: ":"),
                "checkSeconds": "\(configuration.zoneinfoCheck)",
            ]
        )
        let clock = SystemClock()
        var policy = WorkerStateMachine.Policy(configuration, logLevel: logger.level)
        // Listening before recovery: /livez answers while a large data directory is read.
        let metrics = try configuration.metricsListen.map { address throws(WorkerError) in
            let placeholder = WorkerStateMachine(policy: policy, engine: Engine(), now: clock.now())
            let endpoint = try MetricsEndpoint(listen: address, initial: placeholder.metrics(now: clock.now()))
            logger.info("metrics endpoint listening", ["address": address, "port": "\(endpoint.port)"])
            return endpoint
        }
        let store: any WorkerStore
        let engine: Engine?
        if let slots = configuration.slots, let uri = configuration.store {
            let joined = try joinSlots(slots, uri: uri)
            policy.slots = SlotOwnership.Policy(
                worker: configuration.workerId,
                slotCount: joined.slotCount,
                leaseTTL: slots.leaseTTL
            )
            policy.routing = configuration.routing
            policy.shareGroup = joined.shareGroup
            (store, engine) = (joined.store, nil)
        } else {
            (store, engine) = try recover()
            // What recovery read is freed by now, in pieces the allocator would otherwise keep.
            Memory.releaseFree()
        }

        let inbox = self.inbox
        var pusher: PushService?
        if !configuration.push.providers.isEmpty {
            do {
                pusher = try PushService(configuration: configuration.push, now: { clock.now() }) { key, result in
                    inbox.push(.push(key, result))
                }
            } catch {
                try? store.close()
                throw WorkerError("cannot start push delivery: \(error)")
            }
            logger.info(
                "push delivery",
                ["providers": configuration.push.providers.map(\.rawValue).sorted().joined(separator: ",")]
            )
        }
        let client: MQTTClient
        do {
            var options = configuration.broker
            if configuration.routing == .slot {
                // A member of a shared subscription whose session outlives it keeps its share of the
                // commands queued there (mosquitto 2.0): a dead worker would hold 1/N of every
                // device's commands. A clean session leaves the share with the connection.
                options.cleanStart = true
                options.sessionExpiryInterval = 0
                // And a worker that froze (SIGSTOP, a stalled VM) leaves the group after 15 s, not 45.
                options.keepAlive = min(options.keepAlive, 10)
            } else {
                options.cleanStart = false
                options.sessionExpiryInterval = 7 * 24 * 3600
            }
            options.will = MQTTWill(
                topic: configuration.topics.workerStatus(configuration.workerId),
                payload: WorkerStateMachine.statusPayload("offline", policy: policy),
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
            pusher?.shutdown()
            try? store.close()
            throw WorkerError("cannot start the MQTT client: \(error)")
        }

        try runLoop(
            WorkerStateMachine(policy: policy, engine: engine, now: clock.now()),
            store,
            MQTTTransport(client),
            clock,
            metrics,
            pusher
        )
    }

    /// The loop over this store (the existential opened: the loop is generic over its seams).
    private func runLoop(
        _ machine: WorkerStateMachine,
        _ store: some WorkerStore,
        _ transport: MQTTTransport,
        _ clock: SystemClock,
        _ metrics: MetricsEndpoint?,
        _ pusher: PushService?
    ) throws(WorkerError) {
        let loop = WorkerLoop(
            machine: machine,
            store: store,
            transport: transport,
            clock: clock,
            logger: logger,
            inbox: inbox,
            metrics: metrics,
            engineConfiguration: configuration.engine,
            pusher: pusher
        )
        defer { pusher?.shutdown() }
        try loop.run()
    }
}

/// The URL without its password, for logs.
public func redacted(_ url: String) -> String {
    guard let at = url.lastIndex(of: "@"), let scheme = url.range(of: "://") else { return url }
    let credentials = url[scheme.upperBound..<at]
    guard let colon = credentials.firstIndex(of: ":") else { return url }
    return url.replacingCharacters(in: colon..<at, with: ":***")
}

extension WorkerStateMachine.Policy {
    /// The policy `configuration` asks for. The instance tells this process from another with
    /// the same worker id.
    init(_ configuration: WorkerConfiguration, logLevel: LogLevel) {
        self.init(
            workerId: configuration.workerId,
            instance: Worker.instance,
            pid: Int64(getpid()),
            clientId: configuration.broker.clientId ?? "",
            topics: configuration.topics,
            partition: configuration.partition,
            limits: configuration.limits,
            deviceBudget: configuration.deviceBudget,
            statsInterval: Int64(configuration.statsInterval) * 1000,
            logLevel: logLevel
        )
        version = chimeVersion
        zoneCheckInterval = Int64(configuration.zoneinfoCheck) * 1000
        metricsInterval = configuration.metricsListen == nil ? 0 : MetricsEndpoint.interval
        pushLimits.perProvider = configuration.push.inFlight
    }
}
