import ChimeEngine
import ChimeLog
import ChimeProtocol

/// Slot mode's state beside the engines: which slots are held (``SlotOwnership``), which are being
/// loaded and which handed over, and whether the retained status still says which are served.
struct SlotServing {
    var ownership: SlotOwnership
    /// Slots being handed over (no new commands), since when.
    var draining: [Int: Instant] = [:]
    /// Slots whose journals are being read, since when their leases were taken.
    var loading: [Int: ContinuousClock.Instant] = [:]
    /// The served slots changed since the retained status last said. It says again at most once a
    /// second (``announceDue(now:)``): a worker taking thousands of slots one by one would otherwise
    /// publish thousands of ever longer statuses.
    var changed = false
    private var lastAnnounced: Instant?
    /// The monotonic time of the last lease event.
    var lastLeaseEvent: ContinuousClock.Instant?

    init(ownership: SlotOwnership) { self.ownership = ownership }

    /// The served slots changed, and the status last said so a second ago or more.
    func announceDue(now: Instant) -> Bool {
        changed && lastAnnounced.map({ now.milliseconds - $0.milliseconds >= 1000 }) ?? true
    }

    /// The retained status says which slots are served as of `now`.
    mutating func announced(now: Instant) {
        changed = false
        lastAnnounced = now
    }
}

/// Slot mode: the worker's half of ``SlotOwnership``. The ownership machine decides which slots
/// are held; this carries its decisions out on the engines (an engine per slot served), and turns
/// its store calls into ``WorkerStateMachine/Action/lease(_:)`` for the loop.
extension WorkerStateMachine {
    /// How long a slot being handed over waits for its deliveries in flight before it is released
    /// anyway (they are delivered again by the next owner, with their fireIds).
    static let drainGrace: Int64 = 2000

    /// Slot mode: the slot is being handed over; it takes no commands and fires nothing more.
    @inline(__always)
    func isDraining(_ slot: Int) -> Bool { slots?.draining[slot] != nil }

    /// Feeds the ownership machine and carries out what it decides. `monotonic` is nil for events
    /// that come from a commit (fenced slots): those need no clock.
    mutating func lease(
        _ event: SlotOwnership.Event,
        now: Instant,
        monotonic: ContinuousClock.Instant?,
        _ actions: inout [Action]
    ) {
        guard slots != nil, let clock = monotonic ?? slots!.lastLeaseEvent else { return }
        if let monotonic { slots!.lastLeaseEvent = monotonic }
        if case .renewed(_, _, let sentAt) = event { stats.leaseRenew.record(clock - sentAt) }
        // In place: a copy would share its slots' table, and the next change would copy the whole
        // table, once a slot loaded (at 65,536 slots, most of the worker's time).
        let decided = slots!.ownership.handle(event, now: clock)
        for action in decided {
            switch action {
            case .heartbeat, .renew, .acquire, .deregister:
                actions.append(.lease(action))
            case .load(let slot, let epoch):
                slots!.loading[slot] = clock
                actions.append(.loadSlot(slot: slot, epoch: epoch))
            case .drain(let slot):
                slots!.draining[slot] = now
                log(.info, "handing a slot over", ["slot": "\(slot)"], into: &actions)
            case .release(let held):
                actions.append(.lease(action))
                for slot in held.keys.sorted() {
                    if let since = slots!.draining[slot] {
                        let took = now.milliseconds - since.milliseconds
                        stats.handover.record(.milliseconds(took))
                        log(.info, "handed a slot over", ["slot": "\(slot)", "handoverMs": "\(took)"], into: &actions)
                    }
                    dropSlot(slot, because: "handed over", &actions)
                }
            case .stopServing(let slot, let reason):
                log(
                    reason == .expired ? .warning : .notice,
                    "no longer serving a slot",
                    ["slot": "\(slot)", "reason": reason.rawValue],
                    into: &actions
                )
                dropSlot(slot, because: reason.rawValue, &actions)
            }
        }
        nextLeaseDeadline = slots!.ownership.nextDeadline()
        if !isStopping, slots?.announceDue(now: now) == true {
            announceOnline(now: now, &actions)
        }
    }

    /// The engine the loop rebuilt from the slot's journal (``Action/loadSlot(slot:epoch:)``), or
    /// nil when it could not be read.
    public mutating func adopt(
        slot: Int,
        epoch: Int64,
        _ engine: Engine?,
        now: Instant,
        monotonic: ContinuousClock.Instant
    ) -> [Action] {
        var actions: [Action] = []
        let loadingSince = slots?.loading.removeValue(forKey: slot)
        guard let engine else {
            lease(.loadFailed(slot: slot, epoch: epoch), now: now, monotonic: monotonic, &actions)
            return actions
        }
        guard slots?.ownership.held[slot]?.epoch == epoch else {
            // Lost while it loaded.
            actions.append(.forgetSlot(slot: slot))
            return actions
        }
        engine.setConnected(isConnected && lifecycle == .running, now: now)
        engines[slot] = engine
        slotSubscription(slot, serving: true, &actions)
        zones.toCompare.insert(slot)
        stats.slotsLoaded += 1
        let loadTime = loadingSince.map { monotonic - $0 } ?? .zero
        stats.slotLoad.record(loadTime)
        log(
            .info,
            "serving a slot",
            [
                "slot": "\(slot)", "epoch": "\(epoch)", "notifications": "\(engine.pendingCount)",
                "loadMs": "\(Int64(loadTime / .milliseconds(1)))",
            ],
            into: &actions
        )
        slots?.changed = true
        lease(.loaded(slot: slot, epoch: epoch), now: now, monotonic: monotonic, &actions)
        return actions
    }

    /// Drops a slot's engine, the replies of its commands that wait for a commit, and its deliveries
    /// in flight (their acknowledgements no longer matter here).
    mutating func dropSlot(_ slot: Int, because reason: String, _ actions: inout [Action]) {
        slots?.draining[slot] = nil
        slots?.loading[slot] = nil
        commits.dropReplies(slot: slot)
        window.drop(slot: slot)
        if engines.removeValue(forKey: slot) != nil {
            stats.slotsDropped += 1
            slots?.changed = true
            slotSubscription(slot, serving: false, &actions)
        }
        actions.append(.forgetSlot(slot: slot))
    }

    /// After a commit: the slots being handed over whose commands are all committed and answered,
    /// and whose deliveries were acknowledged (or waited for long enough), are released.
    mutating func finishDraining(now: Instant, _ actions: inout [Action]) {
        for (slot, since) in (slots?.draining ?? [:]).sorted(by: { $0.key < $1.key }) {
            let idle = (engines[slot]?.inflightCount ?? 0) == 0
            guard idle || now.milliseconds - since.milliseconds >= Self.drainGrace else { continue }
            lease(.drained(slot: slot), now: now, monotonic: nil, &actions)
        }
    }
}
