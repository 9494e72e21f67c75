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
///   refused until a snapshot that froze everything applied has been written (``Persistence``);
/// - a graceful stop stops deliveries, waits up to ``Policy/stopGrace`` for those in flight,
///   publishes `offline`, disconnects and journals the commands that were already received.
///
/// State is kept as enums whose cases carry their data, one for each concern that changes on
/// its own: the connection, persistence and snapshots, and the life cycle.
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

    /// The broker connection.
    enum Connection: Equatable {
        case down
        /// Connected; the command subscription was asked for (its message id, once known).
        case subscribing(messageId: Int32?)
        /// Connected, but the broker refused the command subscription: no command can reach the
        /// worker. Asked again at `retryAt` (an ACL can be fixed and reloaded without a reconnection).
        case refused(retryAt: Instant)
        /// Connected and subscribed; `statusMessageId` is the retained `online` status waiting for
        /// its PUBACK.
        case serving(statusMessageId: Int32?)
    }

    /// Whether memory and the store agree, and the snapshot in progress.
    enum Persistence: Equatable {
        case consistent(Snapshot)
        /// A delivery record could not be journaled: memory is ahead of the store until a snapshot
        /// catches up, and commands are refused meanwhile.
        case diverged(CatchUp)
    }

    enum Snapshot: Equatable {
        /// `requested` by SIGUSR1; none begins before `notBefore` (after a failure).
        case idle(requested: Bool, notBefore: Instant?)
        /// Writing since `since`; `requested` again meanwhile.
        case running(since: Instant, requested: Bool)
    }

    enum CatchUp: Equatable {
        /// The next snapshot begins at `notBefore` (at once when nil).
        case waiting(notBefore: Instant?)
        /// A snapshot froze the state at `since`; `coversMemory` until a record goes unjournaled
        /// after that, which that snapshot does not cover.
        case running(since: Instant, coversMemory: Bool)
    }

    enum Lifecycle: Equatable {
        case running
        /// No new deliveries; in-flight ones get until `deadline`. `fatal` is the reason to exit 1.
        case stopping(deadline: Instant, fatal: WorkerError?)
        /// Disconnected: commands already received are journaled, their replies dropped.
        case draining(fatal: WorkerError?)
        case stopped
    }

    /// A store append waiting for its result.
    /// Which append a result is for (``Action/append(_:key:slot:id:)``).
    public struct AppendId: Hashable, Sendable {
        let value: UInt64
    }

    enum PendingWrite {
        case command(Request, JournalEntry, ReplyDestination)
        case record(JournalEntry, slot: Int)
        /// Zone rules; `changed`: the zones whose rules changed since the engine computed with them.
        case zoneRules([ZoneRulesRecord], changed: Set<String>, slot: Int)
    }

    struct ReplyDestination {
        var topic: String
        var correlationData: [UInt8]?
        /// The slot whose command is answered (0 without slots): a reply waiting for a commit is
        /// dropped with its slot.
        var slot: Int
    }

    public let policy: Policy
    /// The engines of the slots served here, by slot; without slots one, for slot 0 (see ``slot(of:)``).
    public internal(set) var engines: [Int: Engine]
    /// Slot mode: which slots this worker holds, and when it renews and hands them over.
    public internal(set) var ownership: SlotOwnership?
    /// Slot mode: slots being handed over (no new commands), since when.
    var draining: [Int: Instant] = [:]
    /// Slot mode: the served slots changed since the retained status last said, and when it did
    /// (it says again at most once a second: a worker taking thousands of slots one by one would
    /// otherwise publish thousands of ever longer statuses).
    var slotsChanged = false
    var lastAnnounced: Instant?
    /// Slot mode: slots whose journals are being read, since when their leases were taken.
    var loading: [Int: ContinuousClock.Instant] = [:]
    /// Slot mode: the monotonic time of the last lease event.
    var lastLeaseEvent: ContinuousClock.Instant?
    public internal(set) var stats = WorkerStats()
    let startedAt: Instant
    /// The slot whose engine copies its state for the snapshot begun (``Action/startSnapshot(slot:)``),
    /// until ``Action/writeSnapshot(_:)``; nil when none is being copied.
    var capturing: Int?
    let decoder: CommandDecoder
    var budget: DeviceBudget
    var random: any RandomNumberGenerator

    var connection = Connection.down
    var persistence = Persistence.consistent(.idle(requested: false, notBefore: nil))
    var lifecycle = Lifecycle.running {
        didSet { isFinished = lifecycle == .stopped }
    }
    /// The machine has stopped: the loop ends. Stored, not computed, as are ``hasSlots`` and
    /// ``statusTopic``: the loop reads them every turn through its own stored property, where
    /// calling a computed one on the machine copies the whole machine first.
    public private(set) var isFinished = false
    /// Slot mode (``Policy/slots``).
    public let hasSlots: Bool
    /// Appended and not yet reported, oldest first, each with its id.
    var pendingWrites: [(id: AppendId, write: PendingWrite)] = []
    var nextAppendId: UInt64 = 0
    /// Replies waiting for the commit that makes their commands durable, with their slots.
    var pendingReplies: [(slot: Int, message: OutboundMessage)] = []
    /// Deliveries published and not yet acknowledged, by message id: their slots and tokens.
    var tokensByMessageId: [Int32: (slot: Int, token: UInt64)] = [:]
    /// Routing by slot: the message id of this connection's forward check
    /// (``OutboundMessage/Purpose/forwardCheck``) until its PUBACK, and slot subscriptions waiting
    /// for their SUBACK.
    var forwardCheckId: Int32?
    var slotSubscriptions: [Int32: Int] = [:]
    /// When the broker reported the session taken over, within the last takeover window.
    var takeovers: [Instant] = []
    var lastTick: Instant
    var lastStats: Instant
    var lastMetrics: Instant?
    /// What the store said after the last commit.
    var store = StoreStatus()
    /// The device that pays for the command being handled, and when it arrived.
    var charging: (device: String, at: Instant)?
    /// When the zone database is read again next (``Policy/zoneCheckInterval``).
    var nextZoneCheck: Instant?
    /// Slots whose engine's zone rules are still to be compared with those it recorded (at start,
    /// and when a slot is loaded).
    var zoneRulesToCompare: Set<Int> = []
    /// Pushes to make, in flight and waiting to be tried again.
    public internal(set) var pushes: PushDispatch

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
        if engine != nil { zoneRulesToCompare = [0] }
        self.ownership = policy.slots.map(SlotOwnership.init(policy:))
        self.startedAt = now
        self.decoder = CommandDecoder(limits: policy.limits)
        self.budget = policy.deviceBudget
        self.random = random
        self.lastTick = now
        self.lastStats = now
        self.pushes = PushDispatch(limits: policy.pushLimits)
    }

    /// The engine of the whole store, without slots.
    public var engine: Engine {
        precondition(policy.slots == nil, "slot mode has an engine per slot")
        return engines[0]!
    }

    /// The slot of a device: `crc32(deviceId) mod S` in slot mode, else 0.
    public func slot(of deviceId: String) -> Int { policy.slot(of: deviceId) }

    /// Deliveries in flight over every engine.
    var inflightCount: Int { engines.values.reduce(0) { $0 + $1.inflightCount } }

    /// The loop is done: the last action was ``Action/exit(_:)``.
    public var isConnected: Bool { connection != .down }

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
        case .snapshotRequested:
            if case .consistent(.idle(_, let notBefore)) = persistence {
                persistence = .consistent(.idle(requested: true, notBefore: notBefore))
            } else if case .consistent(.running(let since, _)) = persistence {
                persistence = .consistent(.running(since: since, requested: true))
            }
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
            pendingReplies.removeAll()
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
        if now.milliseconds - lastTick.milliseconds >= policy.tickInterval { tick(now: now, &actions) }
        return actions
    }

    /// How long the owner may wait for the next event, in milliseconds: until the engine's next
    /// wake-up, a retry, stats, or at most a second.
    public func waitTime(now: Instant) -> Int64 {
        if !pendingReplies.isEmpty || capturing != nil { return 0 }
        var wait: Int64 = 1000
        // With the window full, only an acknowledgement (an event) makes room.
        if inflightCount < policy.maxDeliveriesInFlight, let next = engines.values.lazy.compactMap(\.nextWake).min() {
            wait = min(wait, next.milliseconds - now.milliseconds)
        }
        if case .refused(let at) = connection { wait = min(wait, at.milliseconds - now.milliseconds) }
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
                ["error": "\(error)", "unanswered": "\(pendingReplies.count)", "slots": "\(engines.count)"],
                into: &actions
            )
            pendingReplies.removeAll(keepingCapacity: true)
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
                ["error": "\(error)", "unanswered": "\(pendingReplies.count)"],
                into: &actions
            )
            pendingReplies.removeAll(keepingCapacity: true)
            diverge()
            maybeSnapshot(now: now, &actions)
        case .commitFailed(let error):
            lifecycle = .stopped
            actions.append(
                .exit(WorkerError("journal sync failed, exiting so that recovery reads what is on disk: \(error)"))
            )
        case .published(let purpose, let outcome): published(purpose, outcome, now: now, &actions)
        case .subscribeSent(let subscription, let outcome):
            switch outcome {
            case .success(let messageId):
                if subscription == .commands, case .subscribing = connection {
                    connection = .subscribing(messageId: messageId)
                } else if case .slot(let slot) = subscription {
                    slotSubscriptions[messageId] = slot
                }
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
                if isConnected { connection = .refused(retryAt: now.adding(milliseconds: policy.resubscribeDelay)) }
            }
        case .snapshotStarted(let outcome): snapshotStarted(outcome, now: now, &actions)
        case .commandCost(let milliseconds):
            if let (device, at) = charging { budget.charge(device, milliseconds: milliseconds, now: at) }
            charging = nil
        case .stepTook(let duration): stats.loopStep.record(duration)
        }
        return actions
    }

    // MARK: Connection

    mutating func connected(sessionPresent: Bool, now: Instant, _ actions: inout [Action]) {
        connection = .subscribing(messageId: nil)
        stats.reconnects += 1
        log(.info, "connected", ["sessionPresent": "\(sessionPresent)"], into: &actions)
        // Subscribe on every connection: a broker that lost its sessions forgets them.
        actions.append(.subscribe(.status))
        actions.append(.subscribe(.fleet))
        actions.append(.subscribe(.commands))
        connectedForRouting(&actions)
        for engine in engines.values { engine.setConnected(lifecycle == .running, now: now) }
        lease(.available(true), now: now, monotonic: nil, &actions)
    }

    mutating func disconnected(reason: Int32, now: Instant, _ actions: inout [Action]) {
        connection = .down
        forwardCheckId = nil
        slotSubscriptions.removeAll()
        for engine in engines.values { engine.setConnected(false) }
        lease(.available(false), now: now, monotonic: nil, &actions)
        if reason == Self.sessionTakenOver {
            tookOver(
                because: "another client connected with this worker's client id and took its session",
                now: now,
                &actions
            )
        } else if lifecycle == .running {
            log(.warning, "disconnected from the broker; reconnecting", ["reason": "\(reason)"], into: &actions)
        }
    }

    /// The worker's own retained status topic: every message is compared with it, so it is built once.
    let statusTopic: String

    /// Our own retained status: written by another process when its instance is not ours. One that
    /// started before us is a previous run of this worker (killed before its will went out), not a
    /// second worker: only the older of two concurrent workers gives way.
    mutating func status(_ message: InboundMessage, now: Instant, _ actions: inout [Action]) {
        guard lifecycle == .running || isStopping, case .object(let status)? = try? JSON(parsing: message.payload),
            status["state"] == "online", let other = status["instance"]?.stringValue, other != policy.instance,
            let otherStart = status["startedAt"]?.stringValue, otherStart >= startedAt.rfc3339()
        else { return }
        tookOver(
            because: "another chimed announced itself online with this worker id (instance \(other))",
            now: now,
            &actions
        )
    }

    var isStopping: Bool {
        if case .stopping = lifecycle { return true }
        return false
    }

    /// Another client took our session: say so, and past the limit stop with a one-line reason so
    /// that a supervisor shows it instead of a flapping pair of workers.
    mutating func tookOver(because cause: String, now: Instant, _ actions: inout [Action]) {
        let window = policy.takeoverWindow
        takeovers.removeAll { now.milliseconds - $0.milliseconds > window }
        takeovers.append(now)
        stats.takeovers += 1
        let seconds = window / 1000
        log(
            .error,
            "\(cause); is a second chimed running with --worker-id \(policy.workerId)?",
            ["clientId": policy.clientId, "takeovers": "\(takeovers.count)", "withinSeconds": "\(seconds)"],
            into: &actions
        )
        guard takeovers.count >= policy.maxTakeovers else { return }
        let fatal = WorkerError(
            "the worker id \(policy.workerId) (client id \(policy.clientId)) was taken over \(takeovers.count) times "
                + "within \(seconds) s: another client or a second chimed uses it; stopping"
        )
        switch lifecycle {
        case .running, .stopping(_, nil): lifecycle = .stopping(deadline: now, fatal: fatal)
        case .stopping, .draining, .stopped: break
        }
    }

    mutating func subscribed(messageId: Int32, grantedQoS: [Int32], now: Instant, _ actions: inout [Action]) {
        if let slot = slotSubscriptions.removeValue(forKey: messageId) {
            slotSubscribed(slot, grantedQoS: grantedQoS, &actions)
            return
        }
        guard connection == .subscribing(messageId: messageId) else { return }
        if let refusal = grantedQoS.first(where: { $0 >= 0x80 }) ?? (grantedQoS.isEmpty ? 0x80 : nil) {
            stats.subscriptionRefusals += 1
            connection = .refused(retryAt: now.adding(milliseconds: policy.resubscribeDelay))
            log(
                .error,
                "the broker refused the command subscription: no command can reach this worker (check the broker's "
                    + "ACL for its account)",
                ["filter": policy.commandFilter, "reason": hex(refusal)],
                into: &actions
            )
            return
        }
        // Online only once commands can reach us.
        connection = .serving(statusMessageId: nil)
        announceOnline(now: now, &actions)
        log(.notice, "serving", ["commands": policy.commandFilter], into: &actions)
    }

    /// Publishes the retained `online` status; in slot mode it says which slots are served, so it
    /// is published again when they changed (``slotsChanged``), a second after the last at the
    /// soonest.
    mutating func announceOnline(now: Instant, _ actions: inout [Action]) {
        guard case .serving = connection else { return }
        slotsChanged = false
        lastAnnounced = now
        var extra: JSONObject = ["startedAt": .string(startedAt.rfc3339()), "pid": .int(policy.pid)]
        if !policy.version.isEmpty { extra["version"] = .string(policy.version) }
        if let slots = policy.slots {
            extra["slots"] = .int(Int64(slots.slotCount))
            extra["serving"] = .string(SlotRanges.text(Array(engines.keys)))
        }
        let payload = Self.statusPayload("online", policy: policy, extra: extra)
        actions.append(
            .publish(
                OutboundMessage(topic: statusTopic, payload: payload, qos: 1, retain: true, purpose: .onlineStatus)
            )
        )
    }

    // MARK: Commands

    /// Where a message stands before its payload is read: the one admission that ``command(_:now:_:)``
    /// and ``predecodable(_:now:)`` both follow.
    enum Admission {
        /// Not on a command topic.
        case notACommand
        /// Another worker's: another partition, or (`otherSlot`) a slot not served here, or one being
        /// loaded or handed over, which answers nothing (its next owner answers the resend).
        case elsewhere(otherSlot: Bool)
        /// Served here, by the engine of `slot`.
        case here(Topics.CommandAddress, slot: Int, engine: Engine)
        /// Routing by slot: received through the shared subscription for `slot`, served elsewhere;
        /// forwarded to its owner.
        case forward(slot: Int)
    }

    func admission(_ topic: String) -> Admission {
        guard let address = policy.topics.parseCommand(topic) else { return .notACommand }
        guard policy.partition.owns(address.deviceId) else { return .elsewhere(otherSlot: false) }
        let slot = slot(of: address.deviceId)
        // A forwarded command names its device's slot; one that does not was not forwarded by a
        // worker of this store (another number of slots): left alone.
        if let forwarded = address.forwardedSlot, forwarded != slot { return .elsewhere(otherSlot: true) }
        guard let engine = engines[slot], draining[slot] == nil else {
            // Forwarded once at most: a forwarded command, or one for a slot this worker is taking
            // or handing over (no other worker subscribes to it yet), is left to a resend.
            if policy.routing == .slot, address.forwardedSlot == nil, engines[slot] == nil, loading[slot] == nil {
                return .forward(slot: slot)
            }
            return .elsewhere(otherSlot: policy.slots != nil)
        }
        return .here(address, slot: slot, engine: engine)
    }

    /// Decides a command: refused before it is parsed when its device has used its share, answered
    /// at once when it changes nothing, else appended to the store (``appended(_:_:)`` applies it).
    mutating func command(_ message: InboundMessage, now: Instant, _ actions: inout [Action]) {
        guard lifecycle != .stopped else { return }
        let address: Topics.CommandAddress
        let slot: Int
        let engine: Engine
        switch admission(message.topic) {
        case .notACommand:
            // Off the path of every command: the one other topic a worker subscribes to for queries.
            if message.topic == policy.topics.fleetFind {
                find(message, now: now, &actions)
                return
            }
            stats.invalidTopics += 1
            log(.debug, "ignoring a message on a topic that is not a command", ["topic": message.topic], into: &actions)
            return
        case .elsewhere(let otherSlot):
            if otherSlot { stats.commandsForOtherSlots += 1 }
            return
        case .forward(let slot):
            forward(message, toSlot: slot, &actions)
            return
        case .here(let a, let s, let e):
            (address, slot, engine) = (a, s, e)
        }
        // Op names come from the topic: count the unknown ones under one name, so that a client
        // cannot grow the stats (and the metrics' label values) without bound.
        stats.countCommand(address.op)
        let replyTo = replyDestination(message, address, slot: slot)
        if let problem = address.problem {
            guard let replyTo else {
                stats.invalidTopics += 1
                log(
                    .info,
                    "dropping a command on an invalid topic",
                    ["topic": String(message.topic.prefix(200))],
                    into: &actions
                )
                return
            }
            queueReply(Reply(op: address.opName, requestId: nil, outcome: .failure(problem)), to: replyTo)
            return
        }
        guard let replyTo else { return }
        // Each device pays for the engine time its commands take; one that has used its share is
        // refused before its command is even parsed.
        let admission = budget.admits(address.deviceId, now: now)
        guard admission.admitted else {
            let error = ChimeError(
                .rateLimited,
                "device \(address.deviceId) used its share of the worker (--device-rate \(Int(budget.rate)) ms/s); "
                    + "try again in \(admission.retryAfterMs) ms"
            )
            queueReply(Reply(op: address.opName, requestId: nil, outcome: .failure(error)), to: replyTo)
            return
        }
        charging = (address.deviceId, now)
        let op = address.op!
        var request: Request
        let decoded =
            message.decoded.flatMap { $0.deviceId == address.deviceId && $0.op == op ? $0.outcome : nil }
            ?? decoder.decode(deviceId: address.deviceId, op: op, payload: message.payload)
        switch decoded {
        case .failure(let failure):
            log(
                .debug,
                "rejected",
                ["device": address.deviceId, "op": op.rawValue, "code": failure.error.code.wireName],
                into: &actions
            )
            queueReply(
                Reply(op: op.rawValue, requestId: failure.requestId, outcome: .failure(failure.error)),
                to: replyTo
            )
            return
        case .success(let decoded):
            request = decoded
        }
        // Only what can change state is kept to recognise a redelivery; reads are answered again.
        if op.changesState {
            request.key = CommandKey.of(
                op: op.rawValue,
                payload: message.payload,
                correlationData: message.correlationData,
                hasRequestId: request.requestId != nil,
                packetId: message.messageId,
                qos: message.qos
            )
        }
        switch engine.decide(request, now: now, random: &random) {
        case .reply(let reply):
            if reply.isDuplicate {
                stats.duplicates += 1
                log(
                    .info,
                    "a command was received again and not applied again",
                    ["device": address.deviceId],
                    into: &actions
                )
            }
            queueReply(reply, to: replyTo)
        case .write(let entry):
            if case .diverged = persistence {
                let error = ChimeError(.unavailable, "the journal cannot take writes; nothing was changed")
                queueReply(Reply(request: request, error: error), to: replyTo)
                return
            }
            append(.command(request, entry, replyTo), entry, key: request.key, slot: slot, &actions)
        }
    }

    /// Which of the messages that arrived together the loop may decode in parallel, before it
    /// hands them to the machine in order (decoding is pure; see ``PredecodedCommand``): the
    /// commands ``command(_:now:_:)`` would decode now, at most ``CommandLimits/maxCommandBytes``
    /// of them a device, so that a device that runs out of its share of the worker meanwhile has
    /// at most that much decoded for nothing. Only commands of ``minimumPredecodedBytes`` or more
    /// (batches): a smaller one costs less to decode than to hand to another thread. None unless
    /// there are two.
    public func predecodable(
        _ messages: [InboundMessage],
        now: Instant
    ) -> [(
        index: Int, deviceId: String, op: Operation
    )] {
        guard lifecycle != .stopped else { return [] }
        var picked: [(index: Int, deviceId: String, op: Operation)] = []
        var bytesByDevice: [String: Int] = [:]
        for (i, message) in messages.enumerated()
        where message.payload.count >= Self.minimumPredecodedBytes && message.topic != statusTopic {
            guard case .here(let address, _, _) = admission(message.topic), address.problem == nil, let op = address.op,
                budget.admits(address.deviceId, now: now).admitted
            else { continue }
            let bytes = bytesByDevice[address.deviceId, default: 0] + message.payload.count
            guard bytes <= decoder.limits.maxCommandBytes else { continue }
            bytesByDevice[address.deviceId] = bytes
            picked.append((i, address.deviceId, op))
        }
        return picked.count >= 2 ? picked : []
    }

    public static let minimumPredecodedBytes = 4096

    /// What decodes commands: limits as configured; pure, so any thread may use it.
    public var commandDecoder: CommandDecoder { decoder }

    /// Where a reply goes: the MQTT 5 Response Topic (if `acceptsResponseTopic` allows it), else
    /// `P/{deviceId}/replies` when the device id is valid, else nowhere.
    func replyDestination(
        _ message: InboundMessage,
        _ address: Topics.CommandAddress,
        slot: Int
    ) -> ReplyDestination? {
        if let topic = message.responseTopic, !topic.isEmpty, !Topics.hasWildcard(topic),
            policy.topics.acceptsResponseTopic(topic, forCommandOn: address.deviceId)
        {
            return ReplyDestination(topic: topic, correlationData: message.correlationData, slot: slot)
        }
        if address.problem?.field == "deviceId" { return nil }
        return ReplyDestination(topic: policy.topics.replies(address.deviceId), correlationData: nil, slot: slot)
    }

    mutating func queueReply(_ reply: Reply, to destination: ReplyDestination) {
        if case .failure(let error) = reply.outcome { stats.errorsByCode[error.code.wireName, default: 0] += 1 }
        queueReply(reply.bytes, to: destination)
    }

    /// Queues a reply's bytes, sent once what came before it is committed.
    mutating func queueReply(_ payload: [UInt8], to destination: ReplyDestination) {
        pendingReplies.append(
            (
                destination.slot,
                OutboundMessage(
                    topic: destination.topic,
                    payload: payload,
                    qos: 1,
                    purpose: .reply,
                    contentType: "application/json",
                    correlationData: destination.correlationData
                )
            )
        )
    }

    /// Asks the owner to append `entry`, and keeps what to do once it is appended.
    mutating func append(
        _ write: PendingWrite,
        _ entry: JournalEntry,
        key: CommandKey?,
        slot: Int,
        _ actions: inout [Action]
    ) {
        nextAppendId += 1
        let id = AppendId(value: nextAppendId)
        pendingWrites.append((id, write))
        actions.append(.append(entry, key: key, slot: slot, id: id))
    }

    mutating func appended(
        _ id: AppendId,
        _ outcome: Result<Void, StoreError>,
        now: Instant,
        _ actions: inout [Action]
    ) {
        // The oldest, unless an owner reports out of order.
        guard let index = pendingWrites.firstIndex(where: { $0.id == id }) else {
            log(.error, "an append was reported that is not waiting", ["id": "\(id.value)"], into: &actions)
            return
        }
        switch pendingWrites.remove(at: index).write {
        case .command(let request, let entry, let replyTo):
            switch outcome {
            case .success:
                // A command entry always has a result (nil is for delivery records).
                let reply =
                    engines[replyTo.slot]?.apply(entry, key: request.key).map { Reply(request: request, result: $0) }
                    ?? Reply(request: request, error: ChimeError(.internal, "the command had no result"))
                queueReply(reply, to: replyTo)
            case .failure(let error):
                log(.error, "journal write failed; command refused", ["error": "\(error)"], into: &actions)
                let refusal = ChimeError(.unavailable, "the journal cannot take writes: \(error.message)")
                queueReply(Reply(request: request, error: refusal), to: replyTo)
            }
        case .record(let entry, let slot):
            // The delivery happened: memory goes ahead even when the store cannot take its record,
            // and a snapshot is forced so that the store catches up. In slot mode the store is the
            // truth: the slot is dropped, to be loaded again from it.
            if case .failure(let error) = outcome, policy.slots != nil {
                log(
                    .error,
                    "cannot journal a delivery record; dropping its slot",
                    ["slot": "\(slot)", "error": "\(error)"],
                    into: &actions
                )
                lease(.fenced([slot]), now: now, monotonic: nil, &actions)
                return
            }
            if case .failure(let error) = outcome {
                log(
                    .error,
                    "journal write failed; refusing commands until a snapshot succeeds",
                    ["error": "\(error)"],
                    into: &actions
                )
                diverge()
            }
            engines[slot]?.apply(entry)
        case .zoneRules(let records, let changed, let slot):
            if case .failure(let error) = outcome {
                log(
                    .error,
                    "cannot journal new zone rules; computing with them all the same",
                    ["error": "\(error)"],
                    into: &actions
                )
            }
            zoneRulesAppended(records, changed: changed, slot: slot, &actions)
        }
    }

    /// Memory goes ahead of the store: a snapshot running now froze the state before this.
    mutating func diverge() {
        switch persistence {
        case .consistent(.idle): persistence = .diverged(.waiting(notBefore: nil))
        case .consistent(.running(let since, _)), .diverged(.running(let since, _)):
            persistence = .diverged(.running(since: since, coversMemory: false))
        case .diverged(.waiting): break
        }
    }

    /// Journals an entry the engine produced itself (delivery records), then applies it.
    mutating func record(_ entry: JournalEntry, slot: Int, _ actions: inout [Action]) {
        guard engines[slot] != nil else { return }
        if case .diverged = persistence {
            diverge()
            engines[slot]?.apply(entry)
            return
        }
        append(.record(entry, slot: slot), entry, key: nil, slot: slot, &actions)
    }

    /// After the commit: the replies of what it made durable, then what is due.
    mutating func committed(_ store: StoreStatus, now: Instant, _ actions: inout [Action]) {
        self.store = store
        for reply in pendingReplies { actions.append(.publish(reply.message)) }
        pendingReplies.removeAll(keepingCapacity: true)
        finishDraining(now: now, &actions)
        if case .refused(let at) = connection, now >= at {
            connection = .subscribing(messageId: nil)
            actions.append(.subscribe(.status))
            actions.append(.subscribe(.commands))
        }
        maybeSnapshot(now: now, &actions)
        maybePublishStats(now: now, &actions)
        maybeFinishStopping(now: now, &actions)
    }

    // MARK: Deliveries

    mutating func tick(now: Instant, _ actions: inout [Action]) {
        lastTick = now
        guard lifecycle == .running else { return }
        var room = policy.maxDeliveriesInFlight - inflightCount
        // What is due first goes first, whichever slot it is in; a slot being handed over fires
        // nothing more (its next owner does).
        let due = engines.compactMap { slot, engine -> (slot: Int, engine: Engine, at: Instant)? in
            guard draining[slot] == nil, let at = engine.nextWake, at <= now else { return nil }
            return (slot, engine, at)
        }
        for (slot, engine, _) in due.sorted(by: { $0.at < $1.at }) where room > 0 {
            for output in engine.tick(now: now, limit: room) {
                switch output {
                case .publish(let delivery) where !delivery.mqtt:
                    // Push only: nothing to publish; recorded now, and pushed once recorded.
                    if let entry = engine.acknowledged(delivery.token) { record(entry, slot: slot, &actions) }
                case .publish(let delivery):
                    room -= 1
                    actions.append(
                        .publish(
                            OutboundMessage(
                                topic: policy.topics.notifications(delivery.deviceId),
                                payload: delivery.payload,
                                qos: 1,
                                purpose: .delivery(
                                    token: delivery.token,
                                    fireId: delivery.fireId,
                                    due: delivery.due,
                                    lateness: delivery.lateness,
                                    slot: slot
                                ),
                                contentType: "application/json",
                                userProperties: [.init("fire-id", delivery.fireId)],
                                messageExpiry: delivery.messageExpiry
                            )
                        )
                    )
                case .write(let entry): record(entry, slot: slot, &actions)
                }
            }
        }
    }

    mutating func published(
        _ purpose: OutboundMessage.Purpose,
        _ outcome: Result<Int32, TransportError>,
        now: Instant,
        _ actions: inout [Action]
    ) {
        switch (purpose, outcome) {
        case (.delivery(let token, _, let due, let kind, let slot), .success(let messageId)):
            tokensByMessageId[messageId] = (slot, token)
            let lateness = now.milliseconds - due.milliseconds
            // Lateness the worker did not cause (a date in the past, a catch-up, quiet hours) is
            // measured apart, so that it neither hides nor fakes the worker's own.
            if kind.isExpected {
                stats.expectedLateness.record(microseconds: lateness * 1000)
            } else {
                stats.lateness.record(microseconds: lateness * 1000)
                if let engine = engines[slot], lateness >= engine.configuration.lateThreshold {
                    stats.lateDeliveries += 1
                }
            }
        case (.delivery(let token, let fireId, _, _, let slot), .failure(let error)):
            // Retried with the backoff of a refusal: an error such as an oversized packet would
            // otherwise repeat at full speed.
            let retry = engines[slot]?.publishRefused(token, now: now)
            log(
                .warning,
                "cannot publish a delivery; it will be retried",
                ["fireId": fireId, "error": "\(error)", "retryMs": "\(retry ?? 0)"],
                into: &actions
            )
        case (.onlineStatus, .success(let messageId)):
            if case .serving = connection { connection = .serving(statusMessageId: messageId) }
        case (.reply, .failure(let error)):
            log(.warning, "cannot send a reply", ["error": "\(error)"], into: &actions)
        case (.onlineStatus, .failure(let error)), (.offlineStatus, .failure(let error)):
            log(.warning, "cannot publish the worker's status", ["error": "\(error)"], into: &actions)
        case (.forwardCheck, .success(let messageId)):
            forwardCheckId = messageId
        case (.forward, .failure(let error)), (.forwardCheck, .failure(let error)):
            forwardRefused(because: "\(error)", &actions)
        case (.forward, .success):
            break
        case (.reply, .success), (.offlineStatus, .success), (.stats, _):
            break
        }
    }

    mutating func acknowledged(messageId: Int32, reasonCode: Int32, now: Instant, _ actions: inout [Action]) {
        if case .serving(let statusId?) = connection, statusId == messageId {
            connection = .serving(statusMessageId: nil)
            if reasonCode >= 0x80 {
                log(
                    .error,
                    "the broker refused the worker's status: clients will not see it online (check that the ACL lets "
                        + "this account write \(statusTopic); the deploy ACL names each worker's account after its "
                        + "--worker-id)",
                    ["reason": hex(reasonCode)],
                    into: &actions
                )
            }
            return
        }
        if messageId == forwardCheckId {
            forwardCheckId = nil
            if reasonCode >= 0x80 { forwardRefused(because: "reason \(hex(reasonCode))", &actions) }
            return
        }
        guard let (slot, token) = tokensByMessageId.removeValue(forKey: messageId), let engine = engines[slot] else {
            return
        }
        if reasonCode >= 0x80 {
            // Refused (an ACL, a quota): not delivered. It stays due and is retried later.
            stats.refusedDeliveries += 1
            let retry = engine.publishRefused(token, now: now)
            log(
                .warning,
                "the broker refused a delivery; it stays due",
                ["reason": hex(reasonCode), "retryMs": "\(retry ?? 0)"],
                into: &actions
            )
            return
        }
        if let entry = engine.acknowledged(token) {
            stats.deliveries += 1
            record(entry, slot: slot, &actions)
        }
    }

    // MARK: Snapshots

    mutating func maybeSnapshot(now: Instant, _ actions: inout [Action]) {
        switch persistence {
        case .consistent(.idle(let requested, let notBefore)):
            guard store.snapshotDue || requested, notBefore.map({ now >= $0 }) ?? true else { return }
            persistence = .consistent(.running(since: now, requested: false))
        case .diverged(.waiting(let notBefore)):
            guard notBefore.map({ now >= $0 }) ?? true else { return }
            persistence = .diverged(.running(since: now, coversMemory: true))
        case .consistent(.running), .diverged(.running):
            return
        }
        guard engines[store.snapshotSlot] != nil else {
            persistence = .consistent(.idle(requested: false, notBefore: nil))
            return
        }
        capturing = store.snapshotSlot
        actions.append(.startSnapshot(slot: store.snapshotSlot))
    }

    /// The store began the snapshot: the engine's state as of now is what it covers. It is
    /// copied a part per turn (``continueSnapshot(_:)``), while the engine goes on.
    mutating func snapshotStarted(_ outcome: Result<UInt64, StoreError>, now: Instant, _ actions: inout [Action]) {
        switch outcome {
        case .success(let sequence):
            log(.info, "snapshot started", ["sequence": "\(sequence)"], into: &actions)
            if let slot = capturing { engines[slot]?.beginSnapshot() }
            continueSnapshot(&actions)
        case .failure(let error):
            capturing = nil
            log(.error, "cannot start a snapshot", ["error": "\(error)"], into: &actions)
            snapshotEnded(now: now)
        }
    }

    /// Copies the next part of the snapshot being taken, and hands it to the store once complete.
    mutating func continueSnapshot(_ actions: inout [Action]) {
        guard let slot = capturing else { return }
        guard let engine = engines[slot], engine.isTakingSnapshot else {
            // Its slot was dropped (slot mode), or loaded again as a new engine.
            capturing = nil
            actions.append(.abandonSnapshot)
            return
        }
        guard let frozen = engine.continueSnapshot(budget: policy.snapshotStep) else { return }
        capturing = nil
        actions.append(.writeSnapshot(frozen))
    }

    mutating func snapshotFinished(_ outcome: Result<UInt64, StoreError>, now: Instant, _ actions: inout [Action]) {
        switch outcome {
        case .failure(let error):
            log(.error, "snapshot failed", ["error": "\(error)"], into: &actions)
            snapshotEnded(now: now)
        case .success(let sequence):
            switch persistence {
            case .diverged(.running(_, true)):
                log(.notice, "journal caught up through a snapshot; accepting commands again", into: &actions)
                persistence = .consistent(.idle(requested: false, notBefore: nil))
            case .diverged(.running(let since, false)):
                log(
                    .warning,
                    "a delivery record was not journaled while the snapshot ran; another snapshot follows",
                    into: &actions
                )
                persistence = .diverged(.waiting(notBefore: since.adding(milliseconds: policy.snapshotRetry)))
            case .consistent(.running(_, let requested)):
                persistence = .consistent(.idle(requested: requested, notBefore: nil))
            case .consistent(.idle), .diverged(.waiting):
                break
            }
            log(.info, "snapshot written", ["sequence": "\(sequence)"], into: &actions)
        }
    }

    /// A snapshot that could not start or failed: the next waits a while.
    mutating func snapshotEnded(now: Instant) {
        switch persistence {
        case .consistent(.running(let since, let requested)):
            persistence = .consistent(
                .idle(requested: requested, notBefore: since.adding(milliseconds: policy.snapshotRetry))
            )
        case .diverged(.running(let since, _)):
            persistence = .diverged(.waiting(notBefore: since.adding(milliseconds: policy.snapshotRetry)))
        case .consistent(.idle), .diverged(.waiting):
            break
        }
    }

    // MARK: Stats and stopping

    mutating func maybePublishStats(now: Instant, _ actions: inout [Action]) {
        if policy.metricsInterval > 0,
            lastMetrics.map({ now.milliseconds - $0.milliseconds >= policy.metricsInterval }) ?? true
        {
            lastMetrics = now
            actions.append(.exportMetrics(metrics(now: now)))
        }
        guard policy.statsInterval > 0, isConnected, now.milliseconds - lastStats.milliseconds >= policy.statsInterval
        else { return }
        lastStats = now
        actions.append(
            .publish(
                OutboundMessage(
                    topic: policy.topics.workerStats(policy.workerId),
                    payload: JSON.object(metrics(now: now).statsJSON).bytes,
                    qos: 0,
                    purpose: .stats
                )
            )
        )
    }

    /// Every number the worker reports, now.
    public func metrics(now: Instant) -> WorkerMetrics {
        var notReady: [String] = []
        switch connection {
        case .down: notReady.append("not connected to the broker")
        case .subscribing: notReady.append("waiting for the broker to grant the command subscription")
        case .refused: notReady.append("the broker refused the command subscription")
        case .serving: break
        }
        if case .diverged = persistence {
            notReady.append("the journal cannot take writes until a snapshot catches up")
        }
        if lifecycle != .running { notReady.append("stopping") }
        var numbers = WorkerMetrics(
            stats: stats,
            pending: engines.values.reduce(0) { $0 + $1.pendingCount },
            devices: engines.values.reduce(0) { $0 + $1.deviceCount },
            inflight: inflightCount,
            store: store,
            connected: isConnected,
            notReady: notReady,
            workerId: policy.workerId,
            partition: policy.partition.description,
            instance: policy.instance,
            version: policy.version,
            startedAt: startedAt,
            at: now
        )
        if policy.slots != nil { numbers.slots = engines.keys.sorted() }
        for p in PushRegistration.Provider.allCases { numbers.pushInFlight[p] = pushes.inFlight(p) }
        numbers.pushQueued = pushes.count
        numbers.unresolvedZones = engines.values.reduce(into: Set<String>()) { $0.formUnion($1.unresolvedZones) }.count
        return numbers
    }

    /// Once nothing is in flight (or nothing can be acknowledged, or time is up): `offline`, then
    /// disconnect. After a takeover the status topic belongs to the other holder of this worker id.
    mutating func maybeFinishStopping(now: Instant, _ actions: inout [Action]) {
        // Pushes in flight are waited for too: their outcomes journaled, they are not made again
        // after the restart.
        guard case .stopping(let deadline, let fatal) = lifecycle,
            (inflightCount == 0 || !isConnected) && pushes.totalInFlight == 0 || now >= deadline
        else { return }
        lifecycle = .draining(fatal: fatal)
        if isConnected && fatal == nil {
            let payload = Self.statusPayload("offline", policy: policy)
            actions.append(
                .publish(
                    OutboundMessage(topic: statusTopic, payload: payload, qos: 1, retain: true, purpose: .offlineStatus)
                )
            )
        }
        connection = .down
        for engine in engines.values { engine.setConnected(false) }
        actions.append(.disconnect)
    }

    // MARK: Logging

    func log(
        _ level: LogLevel,
        _ message: @autoclosure () -> String,
        _ metadata: @autoclosure () -> KeyValuePairs<String, String> = [:],
        into actions: inout [Action]
    ) {
        guard level >= policy.logLevel else { return }
        actions.append(.log(WorkerLog(level, message(), Array(metadata()))))
    }

    func hex(_ code: Int32) -> String { "0x\(String(code, radix: 16))" }
}
