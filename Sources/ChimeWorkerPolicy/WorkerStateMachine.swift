import ChimeEngine
import ChimeLog
import ChimeProtocol

/// The worker's policy as a state machine: what `chimed` does with each command, delivery,
/// acknowledgement, journal result and connection change, and in which order. No I/O and no
/// clock: its owner (ChimeWorker's `WorkerLoop`) feeds it ``Event``s from the world and the
/// ``ActionResult`` of each ``Action`` it carried out, always with `now`, and carries out the
/// actions it returns, in order.
///
/// The rules it keeps, each in one place:
/// - a command that changes state is appended to the store before the engine applies it
///   (``command(_:now:)``), and its reply waits for the commit that makes it durable
///   (``committed(_:now:)``);
/// - a delivery is published when the engine says it is due (``tick(now:)``) and recorded when
///   the broker acknowledges it (``acknowledged(messageId:reasonCode:now:)``); a refusal leaves it
///   due;
/// - when a delivery record cannot be journaled, memory is ahead of the store: commands are
///   refused until a snapshot that froze everything applied has been written
///   (``SnapshotSchedule``);
/// - a graceful stop stops deliveries, waits up to ``Policy/stopGrace`` for those in flight,
///   publishes `offline`, disconnects and journals the commands that were already received.
///
/// Each concern that changes on its own is a small machine of its own (``BrokerSession``,
/// ``SnapshotSchedule``, ``CommitQueue``, ``DeliveryWindow``, ``SlotServing``, ``ZoneChecks``,
/// ``PushDispatch``, ``CommandIntake``, ``ReportSchedule``), its state kept as enums whose cases carry
/// their data; this type coordinates them, and keeps the life cycle.
public struct WorkerStateMachine {
    /// What the policy is configured with, validated by the worker's configuration.
    public struct Policy: Sendable {
        public var workerId: String
        /// Tells this process from another one with the same worker id, in the retained status.
        public var instance: String
        public var pid: Int64
        public var clientId: String
        public var topics: Topics
        public var partition: Partition
        public var limits: CommandLimits
        public var deviceBudget: DeviceBudget
        /// Milliseconds between stats publications; 0 turns them off.
        public var statsInterval: Int64
        /// Lines below this level are not built.
        public var logLevel: LogLevel
        /// chimed's version, in the `online` status and the metrics' worker info; "" for none.
        public var version = ""
        /// Milliseconds between two ``Action/exportMetrics(_:)``; 0: none (no metrics endpoint).
        public var metricsInterval: Int64 = 0

        /// Deliveries published and not yet acknowledged, at most. More would only queue up
        /// inside the MQTT client (whose queue is slow to walk when long) while the broker's
        /// window is full.
        public var maxDeliveriesInFlight = 1000
        /// The longest the loop handles commands without delivering what fell due meanwhile.
        public var tickInterval: Int64 = 10
        /// How long a graceful stop waits for deliveries in flight.
        public var stopGrace: Int64 = 5000
        /// When to ask again for a command subscription the broker refused.
        public var resubscribeDelay: Int64 = 10_000
        /// The least time between two attempts at a snapshot after one failed or did not catch up.
        public var snapshotRetry: Int64 = 5000
        /// Devices and notifications copied into a snapshot being taken per turn of the loop
        /// (``Engine/continueSnapshot(budget:)``).
        public var snapshotStep = Engine.snapshotStep
        /// Takeovers within ``takeoverWindow`` milliseconds after which the worker gives up: two
        /// workers with one id (or a client that took the id) would otherwise knock each other
        /// off for ever.
        public var maxTakeovers = 5
        public var takeoverWindow: Int64 = 60_000
        /// Slot mode (many workers on one store, `--slots`): the slots and their leases. nil: the
        /// worker serves its whole store, the devices of its `partition`.
        public var slots: SlotOwnership.Policy?
        /// Slot mode: how commands reach the owner of their slot (`--routing`).
        public var routing = CommandRouting.broadcast
        /// Routing by slot: the shared subscription's group, the store's secret
        /// (`chime_cluster.share_group`).
        public var shareGroup = "chimed"
        /// Milliseconds between two readings of the zone database (`--zoneinfo-check`); 0: only on
        /// SIGHUP (``Event/zoneCheckRequested``).
        public var zoneCheckInterval: Int64 = 0
        /// Pushes in flight, per provider and per device (``PushDispatch``).
        public var pushLimits = PushDispatch.Limits()

        /// What the worker subscribes to for commands: all of them, or with routing by slot its share
        /// of a subscription shared by every worker.
        public var commandFilter: String {
            routing == .slot ? topics.sharedCommandFilter(group: shareGroup) : topics.commandFilter
        }

        /// The slot of a device: `crc32(deviceId) mod S` in slot mode, else 0.
        public func slot(of deviceId: String) -> Int {
            guard let slots else { return 0 }
            return Int(deviceBucket(deviceId, among: UInt32(slots.slotCount)))
        }

        public init(
            workerId: String,
            instance: String,
            pid: Int64,
            clientId: String,
            topics: Topics,
            partition: Partition,
            limits: CommandLimits,
            deviceBudget: DeviceBudget,
            statsInterval: Int64,
            logLevel: LogLevel
        ) {
            self.workerId = workerId
            self.instance = instance
            self.pid = pid
            self.clientId = clientId
            self.topics = topics
            self.partition = partition
            self.limits = limits
            self.deviceBudget = deviceBudget
            self.statsInterval = statsInterval
            self.logLevel = logLevel
        }
    }

    /// What happens in the world.
    public enum Event: Sendable {
        case connected(sessionPresent: Bool)
        /// The connection was lost or closed, with the MQTT 5 reason code (0 when none).
        case disconnected(reasonCode: Int32)
        case message(InboundMessage)
        /// The broker's PUBACK for a QoS 1 publication, with its reason code.
        case acknowledged(messageId: Int32, reasonCode: Int32)
        /// The broker's SUBACK, with one granted QoS or refusal code per filter.
        case subscribed(messageId: Int32, grantedQoS: [Int32])
        /// SIGUSR1: a snapshot now, whatever the journal's size.
        case snapshotRequested
        /// The background snapshot was written and compacted (its covered sequence), or failed.
        case snapshotFinished(Result<UInt64, StoreError>)
        case stopRequested
        /// The events that arrived together have been handled: deliver what is due and commit.
        case batchEnded
        /// After ``Action/disconnect``: the commands received before it have been handed in.
        case drained
        /// Slot mode: a lease call's result (or `.tick`), with the loop's monotonic time.
        case lease(SlotOwnership.Event, monotonic: ContinuousClock.Instant)
        /// SIGHUP: read the zone database again now.
        case zoneCheckRequested
        /// After ``Action/checkZones(_:)``: the zones whose rules changed (the database now hands out
        /// the new ones) and those that could not be read.
        case zoneRulesChecked(ZoneDatabase.Reload)
        /// A push attempt (``Action/sendPush(_:attempt:)``) ended.
        case pushFinished(PushJobKey, PushAttemptResult)
    }

    /// What the owner does for the policy.
    public enum Action: Sendable {
        /// Append to the store (to the journal of `slot` in slot mode, else 0); report
        /// ``ActionResult/appended(_:_:)`` with `id`.
        case append(JournalEntry, key: CommandKey?, slot: Int, id: AppendId)
        /// Make everything appended durable; report ``ActionResult/committed(syncMicroseconds:store:)``.
        case commit
        /// Publish; report ``ActionResult/published(_:_:)``.
        case publish(OutboundMessage)
        /// Subscribe at QoS 1; report ``ActionResult/subscribeSent(_:_:)``.
        case subscribe(Subscription)
        /// Routing by slot: end a slot's subscription (nothing to report).
        case unsubscribe(Subscription)
        /// Begin a snapshot of the slot's engine (0 without slots) covering what was appended;
        /// report ``ActionResult/snapshotStarted(_:)``. The engine's state is then copied over the
        /// next turns, and handed over with ``writeSnapshot(_:)``.
        case startSnapshot(slot: Int)
        /// Write the snapshot begun on another thread; ``Event/snapshotFinished(_:)`` once written.
        case writeSnapshot(EngineSnapshot)
        /// Give up the snapshot begun (its engine is no longer served here), as a write that failed
        /// would: ``Event/snapshotFinished(_:)`` with the failure.
        case abandonSnapshot
        /// Slot mode: call the store for the lease policy and report the result as ``Event/lease(_:monotonic:)``.
        case lease(SlotOwnership.Action)
        /// Slot mode: read the slot's journal, rebuild its engine and hand it to
        /// ``adopt(slot:epoch:_:now:monotonic:)``.
        case loadSlot(slot: Int, epoch: Int64)
        /// Slot mode: the slot is no longer served here; the store forgets what it kept for it.
        case forgetSlot(slot: Int)
        case log(WorkerLog)
        /// Stop the transport; hand in the commands it had received, then ``Event/drained``.
        case disconnect
        /// Sync and close the store.
        case closeStore
        /// Stop: cleanly (nil) or with a one-line reason.
        case exit(WorkerError?)
        /// Hand the numbers to the metrics endpoint (every ``Policy/metricsInterval``). Boxed
        /// (`indirect`): inline, they made every action, a few a command, hundreds of bytes.
        indirect case exportMetrics(WorkerMetrics)
        /// Read the rules of these zones again from the zone database (``ZoneDatabase/reload(_:)``);
        /// report ``Event/zoneRulesChecked(_:)``.
        case checkZones([String])
        /// Make this push attempt off the loop; report ``Event/pushFinished(_:_:)``. Boxed, as a job
        /// carries its delivery.
        indirect case sendPush(PushJob, attempt: Int)
    }

    /// The worker's subscriptions.
    public enum Subscription: Hashable, Sendable {
        /// Its own retained status: another process's status under its worker id tells of a
        /// second worker.
        case status
        /// The commands (``Policy/commandFilter``).
        case commands
        /// Routing by slot: the commands forwarded to a slot served here.
        case slot(Int)
        /// `find` queries across the fleet, which every worker answers (`P/$fleet/find`).
        case fleet

        /// The topic filter subscribed to.
        public func filter(_ policy: Policy) -> String {
            switch self {
            case .status: policy.topics.workerStatus(policy.workerId)
            case .commands: policy.commandFilter
            case .slot(let slot): policy.topics.slotCommandFilter(slot)
            case .fleet: policy.topics.fleetFind
            }
        }
    }

    /// How an action went.
    public enum ActionResult: Sendable {
        /// The append of that id went: each result names its write, whatever order they come in.
        case appended(AppendId, Result<Void, StoreError>)
        /// The commit succeeded; `syncMicroseconds` is how long its sync took, nil when it did not sync.
        /// In slot mode, `fenced`: the slots whose records the store refused (another worker holds
        /// them now); the replies of their commands are not sent.
        case committed(syncMicroseconds: Int64?, store: StoreStatus, fenced: Set<Int> = [])
        case commitFailed(StoreError)
        /// The transport took the publication (its message id) or refused it.
        case published(OutboundMessage.Purpose, Result<Int32, TransportError>)
        case subscribeSent(Subscription, Result<Int32, TransportError>)
        /// The snapshot began (the journal sequence it covers) or could not.
        case snapshotStarted(Result<UInt64, StoreError>)
        /// The engine time, in milliseconds, that the last command took, charged to its device.
        case commandCost(milliseconds: Double)
        /// How long the loop's last turn took: the events that arrived together, what fell due,
        /// the commit and the replies (a part of a snapshot's copy included).
        case stepTook(Duration)
    }

    enum Lifecycle: Equatable {
        case running
        /// No new deliveries; in-flight ones get until `deadline`. `fatal` is the reason to exit 1.
        case stopping(deadline: Instant, fatal: WorkerError?)
        /// Disconnected: commands already received are journaled, their replies dropped.
        case draining(fatal: WorkerError?)
        case stopped
    }

    /// Which append a result is for (``Action/append(_:key:slot:id:)``).
    public struct AppendId: Hashable, Sendable {
        let value: UInt64
    }

    // The coordinator holds one value per concern, each a small machine of its own with its state
    // and tests (BrokerSession, SnapshotSchedule, CommitQueue, DeliveryWindow, SlotServing,
    // ZoneChecks, PushDispatch, CommandIntake, ReportSchedule), and the engines they act on.

    public let policy: Policy
    /// The engines of the slots served here, by slot; without slots one, for slot 0 (see ``slot(of:)``).
    public internal(set) var engines: [Int: Engine]
    /// Slot mode: the slots held, loading and handed over; nil without slots.
    var slots: SlotServing?
    public internal(set) var stats = WorkerStats()
    let startedAt: Instant
    /// What a command meets before the engine: its decoder and its device's budget.
    var intake: CommandIntake
    /// The ids the engines assign.
    var random: any RandomNumberGenerator
    var session: BrokerSession
    var snapshots: SnapshotSchedule
    var commits = CommitQueue()
    var window: DeliveryWindow
    var zones: ZoneChecks
    var reports: ReportSchedule
    var lifecycle = Lifecycle.running {
        didSet { isFinished = lifecycle == .stopped }
    }
    /// The machine has stopped: the loop ends. Stored, not computed, as are ``hasSlots`` and
    /// ``statusTopic``: the loop reads them every turn through its own stored property, where
    /// calling a computed one on the machine copies the whole machine first.
    public private(set) var isFinished = false
    /// Slot mode (``Policy/slots``).
    public let hasSlots: Bool
    /// The worker's own retained status topic: every message is compared with it, so it is built once.
    let statusTopic: String
    /// Pushes to make, in flight and waiting to be tried again.
    public internal(set) var pushes: PushDispatch
    /// Slot mode: when the ownership machine next needs a lease event (``SlotOwnership/nextDeadline()``),
    /// kept after each so that the loop reads it every turn without copying the machine.
    public internal(set) var nextLeaseDeadline: ContinuousClock.Instant?

    /// - Parameters:
    ///   - engine: recovered; the machine owns it from now on. In slot mode (``Policy/slots``) none:
    ///     each slot's engine comes as it is leased and loaded.
    ///   - random: ids the engine assigns; tests pass a seeded generator.
    public init(
        policy: Policy,
        engine: Engine?,
        now: Instant,
        random: any RandomNumberGenerator = SystemRandomNumberGenerator()
    ) {
        precondition((engine == nil) == (policy.slots != nil), "an engine without slots, none with them")
        self.policy = policy
        self.statusTopic = policy.topics.workerStatus(policy.workerId)
        self.hasSlots = policy.slots != nil
        self.engines = engine.map { [0: $0] } ?? [:]
        self.slots = policy.slots.map { SlotServing(ownership: SlotOwnership(policy: $0)) }
        self.zones = ZoneChecks(interval: policy.zoneCheckInterval, toCompare: engine != nil ? [0] : [])
        self.startedAt = now
        self.intake = CommandIntake(decoder: CommandDecoder(limits: policy.limits), budget: policy.deviceBudget)
        self.random = random
        self.session = BrokerSession(resubscribeDelay: policy.resubscribeDelay, takeoverWindow: policy.takeoverWindow)
        self.snapshots = SnapshotSchedule(retry: policy.snapshotRetry)
        self.window = DeliveryWindow(now: now)
        self.reports = ReportSchedule(now: now)
        self.pushes = PushDispatch(limits: policy.pushLimits)
    }

    /// Slot mode: which slots this worker holds, and when it renews and hands them over.
    public var ownership: SlotOwnership? { slots?.ownership }

    /// The engine of the whole store, without slots.
    public var engine: Engine {
        precondition(policy.slots == nil, "slot mode has an engine per slot")
        return engines[0]!
    }

    /// The slot of a device: `crc32(deviceId) mod S` in slot mode, else 0.
    public func slot(of deviceId: String) -> Int { policy.slot(of: deviceId) }

    /// Deliveries in flight over every engine.
    var inflightCount: Int { engines.values.reduce(0) { $0 + $1.inflightCount } }

    /// Connected to the broker, as far as the policy goes (not once a stop has begun disconnecting).
    public var isConnected: Bool { session.isConnected }

    /// The retained status payload (`online` or `offline`) of this worker.
    public static func statusPayload(_ state: String, policy: Policy, extra: JSONObject = [:]) -> [UInt8] {
        var o: JSONObject = [
            "state": .string(state),
            "workerId": .string(policy.workerId),
            "instance": .string(policy.instance),
            "partition": .string(policy.partition.description),
        ]
        for (k, v) in extra { o[k] = v }
        return JSON.object(o).bytes
    }

    /// The MQTT 5 DISCONNECT reason code: another client connected with this client id.
    public static let sessionTakenOver: Int32 = 0x8E

    // MARK: Events

    public mutating func handle(_ event: Event, now: Instant) -> [Action] {
        var actions: [Action] = []
        switch event {
        case .connected(let sessionPresent): connected(sessionPresent: sessionPresent, now: now, &actions)
        case .disconnected(let reason): disconnected(reason: reason, now: now, &actions)
        case .message(let message) where message.topic == statusTopic: status(message, now: now, &actions)
        case .message(let message): command(message, now: now, &actions)
        case .acknowledged(let messageId, let reasonCode):
            acknowledged(messageId: messageId, reasonCode: reasonCode, now: now, &actions)
        case .subscribed(let messageId, let grantedQoS):
            subscribed(messageId: messageId, grantedQoS: grantedQoS, now: now, &actions)
        case .snapshotRequested: snapshots.request()
        case .snapshotFinished(let result): snapshotFinished(result, now: now, &actions)
        case .stopRequested:
            if lifecycle == .running {
                log(.notice, "stopping: finishing deliveries in flight", into: &actions)
                lifecycle = .stopping(deadline: now.adding(milliseconds: policy.stopGrace), fatal: nil)
                // Slot mode: hand every slot over, each once what it received is committed.
                lease(.leave, now: now, monotonic: nil, &actions)
            }
        case .batchEnded:
            tick(now: now, &actions)
            pushTurn(now: now, &actions)
            continueSnapshot(&actions)
            maybeCheckZones(now: now, &actions)
            actions.append(.commit)
            return actions
        case .drained:
            commits.dropReplies()
            guard case .draining(let fatal) = lifecycle else { return [] }
            lifecycle = .stopped
            actions.append(.closeStore)
            log(.notice, "stopped", ["inflightLeft": "\(inflightCount)"], into: &actions)
            actions.append(.exit(fatal))
            return actions
        case .lease(let event, let monotonic):
            // No delivery tick here: a lease call runs in the middle of other actions.
            lease(event, now: now, monotonic: monotonic, &actions)
            return actions
        case .zoneCheckRequested:
            if lifecycle == .running { checkZones(because: "SIGHUP", now: now, &actions) }
        case .zoneRulesChecked(let reload):
            zoneRulesChecked(reload, now: now, &actions)
        case .pushFinished(let key, let result):
            pushFinished(key, result, now: now, &actions)
        }
        // A long batch of commands does not hold up what falls due meanwhile.
        if now.milliseconds - window.lastTick.milliseconds >= policy.tickInterval { tick(now: now, &actions) }
        return actions
    }

    /// How long the owner may wait for the next event, in milliseconds: until the engine's next
    /// wake-up, a retry, stats, or at most a second.
    public func waitTime(now: Instant) -> Int64 {
        if commits.hasReplies || snapshots.capturing != nil { return 0 }
        var wait: Int64 = 1000
        // With the window full, only an acknowledgement (an event) makes room.
        if inflightCount < policy.maxDeliveriesInFlight, let next = engines.values.lazy.compactMap(\.nextWake).min() {
            wait = min(wait, next.milliseconds - now.milliseconds)
        }
        if let at = session.retryAt { wait = min(wait, at.milliseconds - now.milliseconds) }
        if lifecycle == .running, let at = pushes.nextWake { wait = min(wait, at.milliseconds - now.milliseconds) }
        if case .stopping = lifecycle { wait = min(wait, 50) }
        return max(0, wait)
    }

    // MARK: Results of actions

    public mutating func report(_ result: ActionResult, now: Instant) -> [Action] {
        var actions: [Action] = []
        switch result {
        case .appended(let id, let outcome): appended(id, outcome, now: now, &actions)
        case .committed(let syncMicroseconds, let store, let fenced):
            if let syncMicroseconds { stats.fsync.record(microseconds: syncMicroseconds) }
            if !fenced.isEmpty { lease(.fenced(fenced), now: now, monotonic: nil, &actions) }
            committed(store, now: now, &actions)
        case .commitFailed(let error) where error.transient && policy.slots != nil:
            // The store is the truth in slot mode: memory is dropped with the slots, which are
            // loaded again from the store once it answers (what was delivered and not recorded is
            // delivered again, with its fireId).
            log(
                .error,
                "the store's commit failed; dropping every slot until the store answers",
                ["error": "\(error)", "unanswered": "\(commits.replyCount)", "slots": "\(engines.count)"],
                into: &actions
            )
            commits.dropReplies()
            lease(.fenced(Set(engines.keys)), now: now, monotonic: nil, &actions)
        case .commitFailed(let error) where error.transient:
            // A database that went away: whether the commit took effect is unknown, and memory
            // already holds its commands. They get no reply (a client resends a command it got no
            // reply to, and the resend is recognised once the store is back); later commands are
            // refused until a snapshot of memory has caught the store up, while reads and
            // deliveries go on.
            log(
                .error,
                "the store's commit failed; refusing commands until a snapshot catches it up",
                ["error": "\(error)", "unanswered": "\(commits.replyCount)"],
                into: &actions
            )
            commits.dropReplies()
            snapshots.diverge()
            maybeSnapshot(now: now, &actions)
        case .commitFailed(let error):
            lifecycle = .stopped
            actions.append(
                .exit(WorkerError("journal sync failed, exiting so that recovery reads what is on disk: \(error)"))
            )
        case .published(let purpose, let outcome): published(purpose, outcome, now: now, &actions)
        case .subscribeSent(let subscription, let outcome):
            switch outcome {
            case .success(let messageId): session.subscribeSent(subscription, messageId: messageId)
            case .failure(let error):
                if case .slot = subscription {
                    log(
                        .error,
                        "cannot subscribe to a slot's forwarded commands",
                        ["error": "\(error)"],
                        into: &actions
                    )
                    break
                }
                log(.error, "cannot subscribe after connecting: \(error); trying again shortly", into: &actions)
                session.subscribeFailed(now: now)
            }
        case .snapshotStarted(let outcome): snapshotStarted(outcome, now: now, &actions)
        case .commandCost(let milliseconds):
            intake.charge(milliseconds: milliseconds)
        case .stepTook(let duration): stats.loopStep.record(duration)
        }
        return actions
    }

}
