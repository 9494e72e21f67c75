import ChimeCore
import ChimeMQTT
import ChimePush
import ChimeStore
import ChimeSupport
import ChimeTime

/// The loop thread: hands each event to the ``WorkerStateMachine`` and carries out what it
/// decides against three seams, a store, a transport and a clock. Every decision is the
/// machine's; this is only a dispatcher.
public final class WorkerLoop<Store: WorkerStore, Transport: WorkerTransport, Clock: WorkerClock> {
    public private(set) var machine: WorkerStateMachine
    let store: Store
    let transport: Transport
    let clock: Clock
    let logger: Logger
    let inbox: Inbox
    /// Where the numbers go for the metrics endpoint.
    let metrics: (any MetricsSink)?
    /// Slot mode: what each slot's engine is built with when it is loaded.
    let engineConfiguration: EngineConfiguration
    /// Where the zones' rules are read again (``WorkerStateMachine/Action/checkZones(_:)``).
    let zoneDatabase: ZoneDatabase
    /// Where push attempts go (nil: no provider has credentials).
    let pusher: (any PushSender)?

    public init(
        machine: WorkerStateMachine,
        store: Store,
        transport: Transport,
        clock: Clock,
        logger: Logger,
        inbox: Inbox,
        metrics: (any MetricsSink)? = nil,
        engineConfiguration: EngineConfiguration = EngineConfiguration(),
        zoneDatabase: ZoneDatabase = .shared,
        pusher: (any PushSender)? = nil
    ) {
        self.pusher = pusher
        self.zoneDatabase = zoneDatabase
        self.engineConfiguration = engineConfiguration
        self.machine = machine
        self.store = store
        self.transport = transport
        self.clock = clock
        self.logger = logger
        self.inbox = inbox
        self.metrics = metrics
    }

    /// Runs until the machine exits.
    /// - Throws: the machine's reason to exit 1, or a store failure at shutdown.
    public func run() throws(WorkerError) {
        defer { transport.stop() }
        while !machine.isFinished {
            try step(inbox.take(timeout: Double(waitTime) / 1000))
        }
    }

    /// Milliseconds the loop may sleep: until the machine, its leases or the store's sync policy
    /// needs it.
    var waitTime: Int64 {
        var wait = machine.waitTime(now: clock.now())
        if machine.hasSlots, let deadline = machine.nextLeaseDeadline {
            let now = clock.monotonic()
            wait = min(wait, deadline <= now ? 0 : milliseconds(deadline - now) + 1)
        }
        return store.syncWait.map { min(wait, max(0, $0)) } ?? wait
    }

    /// Handles the events that arrived together, then ends the batch (deliveries, commit, replies).
    /// In slot mode the leases come first: a worker that was paused drops what expired meanwhile
    /// before it handles a command that arrived meanwhile. Their commands are decoded ahead on a
    /// second thread (``Predecoding``) while the machine handles them in order.
    public func step(_ events: [WorkerEvent]) throws(WorkerError) {
        let started = clock.monotonic()
        if machine.hasSlots {
            try perform(machine.handle(.lease(.tick, monotonic: started), now: clock.now()))
        }
        let predecoding =
            Predecoding.mayHelp(events) ? Predecoding.start(events, machine: machine, now: clock.now()) : nil
        for (i, event) in events.enumerated() { try handle(event, decoded: predecoding?.command(forEvent: i)) }
        try perform(machine.handle(.batchEnded, now: clock.now()))
        try perform(machine.report(.stepTook(clock.monotonic() - started), now: clock.now()))
    }

    func handle(_ event: WorkerEvent, decoded: PredecodedCommand? = nil) throws(WorkerError) {
        switch event {
        case .mqtt(.message(let message)):
            // The device whose command this is pays for the engine time it takes, its decoding
            // on another thread included.
            // One reading of the wall clock serves both calls: a command is handled within
            // microseconds, and each reading is a few percent of that.
            let started = clock.monotonic()
            let now = clock.now()
            var inbound = InboundMessage(message)
            inbound.decoded = decoded
            try perform(machine.handle(.message(inbound), now: now))
            let cost = seconds(clock.monotonic() - started) * 1000 + (decoded?.milliseconds ?? 0)
            try perform(machine.report(.commandCost(milliseconds: cost), now: now))
        case .mqtt(.connected(let sessionPresent)):
            try perform(machine.handle(.connected(sessionPresent: sessionPresent), now: clock.now()))
        case .mqtt(.disconnected(let reason)):
            try perform(machine.handle(.disconnected(reasonCode: reason), now: clock.now()))
        case .mqtt(.published(let messageId, let reasonCode)):
            try perform(machine.handle(.acknowledged(messageId: messageId, reasonCode: reasonCode), now: clock.now()))
        case .mqtt(.subscribed(let messageId, let grantedQoS)):
            try perform(machine.handle(.subscribed(messageId: messageId, grantedQoS: grantedQoS), now: clock.now()))
        case .snapshotWritten(let writeError):
            let outcome: Result<UInt64, StoreError>
            do {
                outcome = .success(try store.completeSnapshot(writeError: writeError))
            } catch {
                outcome = .failure(error)
            }
            try perform(machine.handle(.snapshotFinished(outcome), now: clock.now()))
        case .snapshotRequested:
            try perform(machine.handle(.snapshotRequested, now: clock.now()))
        case .zoneCheckRequested:
            try perform(machine.handle(.zoneCheckRequested, now: clock.now()))
        case .stop:
            try perform(machine.handle(.stopRequested, now: clock.now()))
        case .push(let key, let result):
            try perform(machine.handle(.pushFinished(key, result), now: clock.now()))
        }
    }

    /// Carries out actions in order, reporting each result to the machine as it comes.
    func perform(_ actions: [WorkerStateMachine.Action]) throws(WorkerError) {
        for action in actions {
            switch action {
            case .append(let entry, let key, let slot, let id):
                let outcome: Result<Void, StoreError>
                do {
                    try store.append(entry, key: key, slot: slot)
                    outcome = .success(())
                } catch {
                    outcome = .failure(error)
                }
                try perform(machine.report(.appended(id, outcome), now: clock.now()))
            case .commit:
                let result: WorkerStateMachine.ActionResult
                do {
                    result = .committed(syncMicroseconds: try store.commit(), store: store.status, fenced: store.fenced)
                } catch {
                    result = .commitFailed(error)
                }
                try perform(machine.report(result, now: clock.now()))
            case .publish(let message):
                let outcome: Result<Int32, TransportError>
                do {
                    outcome = .success(try transport.publish(message))
                } catch {
                    outcome = .failure(error)
                }
                try perform(machine.report(.published(message.purpose, outcome), now: clock.now()))
            case .subscribe(let subscription):
                let outcome: Result<Int32, TransportError>
                do {
                    outcome = .success(try transport.subscribe(subscription.filter(machine.policy), qos: 1))
                } catch {
                    outcome = .failure(error)
                }
                try perform(machine.report(.subscribeSent(subscription, outcome), now: clock.now()))
            case .unsubscribe(let subscription):
                do {
                    try transport.unsubscribe(subscription.filter(machine.policy))
                } catch {
                    // The connection is gone: so is the subscription (a routing worker's session is clean).
                    logger.debug("cannot unsubscribe", ["error": "\(error)"])
                }
            case .startSnapshot(let slot):
                let outcome: Result<UInt64, StoreError>
                do {
                    outcome = .success(try store.beginSnapshot(slot: slot))
                } catch {
                    outcome = .failure(error)
                }
                try perform(machine.report(.snapshotStarted(outcome), now: clock.now()))
            case .writeSnapshot(let frozen):
                let inbox = self.inbox
                store.writeSnapshot(frozen) { inbox.push(.snapshotWritten($0)) }
            case .abandonSnapshot:
                try handle(.snapshotWritten(StoreError("the snapshot's slot is no longer served here")))
            case .lease(let call):
                let sentAt = clock.monotonic()
                let event: SlotOwnership.Event?
                do {
                    event = try store.lease(call, sentAt: sentAt)
                } catch {
                    logger.warning("a lease call to the store failed", ["error": "\(error)"])
                    event = .storeFailed
                }
                if let event {
                    try perform(machine.handle(.lease(event, monotonic: clock.monotonic()), now: clock.now()))
                }
            case .loadSlot(let slot, let epoch):
                var engine: Engine?
                do {
                    let recovery = try store.loadSlot(slot, epoch: epoch)
                    let loaded = try Engine.replaying(
                        recovery,
                        configuration: engineConfiguration,
                        directory: "slot \(slot)"
                    )
                    // The read and the decoding free their memory in pieces: hand back the pages
                    // that came free (what stays still varies: docs/benchmarks.md, "Loading a slot").
                    if loaded.pendingCount >= trimAfterLoading { Memory.releaseFree() }
                    engine = loaded
                } catch {
                    logger.error("cannot load a slot", ["slot": "\(slot)", "error": "\(error)"])
                }
                try perform(
                    machine.adopt(slot: slot, epoch: epoch, engine, now: clock.now(), monotonic: clock.monotonic())
                )
            case .forgetSlot(let slot):
                store.forgetSlot(slot)
            case .log(let line):
                logger.write(line.level, line.message, metadata: line.metadata)
            case .disconnect:
                transport.stop()
                // Commands that arrived before the disconnect were acknowledged by the client
                // library: hand them in so that nothing it acknowledged is lost.
                for event in inbox.take(timeout: 0) {
                    if case .mqtt(.message(let message)) = event {
                        try perform(machine.handle(.message(InboundMessage(message)), now: clock.now()))
                    }
                }
                try perform(machine.handle(.drained, now: clock.now()))
            case .closeStore:
                do {
                    try store.close()
                } catch {
                    throw WorkerError("journal sync failed at shutdown: \(error)")
                }
            case .exit(let fatal):
                metrics?.stopped()
                if let fatal { throw fatal }
            case .exportMetrics(let numbers):
                metrics?.update(numbers)
            case .sendPush(let job, _):
                if let pusher {
                    pusher.send(job)
                } else {
                    // Credentials taken away since the registration: kept until it expires.
                    inbox.push(.push(job.key, PushService.unconfigured("push credentials")))
                }
            case .checkZones(let zones):
                // File reads: a zone file is a few kilobytes, and only the zones in use are read.
                let reload = zoneDatabase.reload(zones)
                try perform(machine.handle(.zoneRulesChecked(reload), now: clock.now()))
            }
        }
    }
}

extension InboundMessage {
    /// The message as the machine sees it.
    public init(_ message: MQTTMessage) {
        self.init(
            topic: message.topic,
            payload: message.payload,
            qos: message.qos,
            messageId: message.messageId,
            responseTopic: message.responseTopic,
            correlationData: message.correlationData
        )
    }
}

/// The notifications of a slot from which its load hands the heap's free pages back
/// (``Memory/releaseFree()``, about 10 ms at a million): smaller slots leave little behind.
private let trimAfterLoading = 10_000
