import ChimeEngine
import ChimeProtocol

/// Slot mode: the worker's half of ``SlotOwnership``. The ownership machine decides which slots
/// are held; this carries its decisions out on the engines (an engine per slot served), and turns
/// its store calls into ``WorkerStateMachine/Action/lease(_:)`` for the loop.
extension WorkerStateMachine {
    /// How long a slot being handed over waits for its deliveries in flight before it is released
    /// anyway (they are delivered again by the next owner, with their fireIds).
    static let drainGrace: Int64 = 2000

    /// Feeds the ownership machine and carries out what it decides. `monotonic` is nil for events
    /// that come from a commit (fenced slots): those need no clock.
    mutating func lease(
        _ event: SlotOwnership.Event,
        now: Instant,
        monotonic: ContinuousClock.Instant?,
        _ actions: inout [Action]
    ) {
        guard ownership != nil, let clock = monotonic ?? lastLeaseEvent else { return }
        if let monotonic { lastLeaseEvent = monotonic }
        if case .renewed(_, _, let sentAt) = event { stats.leaseRenew.record(clock - sentAt) }
        // In place: a copy would share its slots' table, and the next change would copy the whole
        // table, once a slot loaded (at 65,536 slots, most of the worker's time).
        let decided = ownership!.handle(event, now: clock)
        for action in decided {
            switch action {
            case .heartbeat, .renew, .acquire, .deregister:
                actions.append(.lease(action))
            case .load(let slot, let epoch):
                loading[slot] = clock
                actions.append(.loadSlot(slot: slot, epoch: epoch))
            case .drain(let slot):
                draining[slot] = now
                log(.info, "handing a slot over", ["slot": "\(slot)"], into: &actions)
            case .release(let held):
                actions.append(.lease(action))
                for slot in held.keys.sorted() {
                    if let since = draining[slot] {
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
        if slotsChanged, !isStopping, lastAnnounced.map({ now.milliseconds - $0.milliseconds >= 1000 }) ?? true {
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
        let loadingSince = loading.removeValue(forKey: slot)
        guard let engine else {
            lease(.loadFailed(slot: slot, epoch: epoch), now: now, monotonic: monotonic, &actions)
            return actions
        }
        guard ownership?.held[slot]?.epoch == epoch else {
            // Lost while it loaded.
            actions.append(.forgetSlot(slot: slot))
            return actions
        }
        engine.setConnected(isConnected && lifecycle == .running, now: now)
        engines[slot] = engine
        slotSubscription(slot, serving: true, &actions)
        zoneRulesToCompare.insert(slot)
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
        slotsChanged = true
        lease(.loaded(slot: slot, epoch: epoch), now: now, monotonic: monotonic, &actions)
        return actions
    }

    /// Drops a slot's engine, the replies of its commands that wait for a commit, and its deliveries
    /// in flight (their acknowledgements no longer matter here).
    mutating func dropSlot(_ slot: Int, because reason: String, _ actions: inout [Action]) {
        draining[slot] = nil
        loading[slot] = nil
        pendingReplies.removeAll { $0.slot == slot }
        tokensByMessageId = tokensByMessageId.filter { $0.value.slot != slot }
        if engines.removeValue(forKey: slot) != nil {
            stats.slotsDropped += 1
            slotsChanged = true
            slotSubscription(slot, serving: false, &actions)
        }
        actions.append(.forgetSlot(slot: slot))
    }

    /// After a commit: the slots being handed over whose commands are all committed and answered,
    /// and whose deliveries were acknowledged (or waited for long enough), are released.
    mutating func finishDraining(now: Instant, _ actions: inout [Action]) {
        for (slot, since) in draining.sorted(by: { $0.key < $1.key }) {
            let idle = (engines[slot]?.inflightCount ?? 0) == 0
            guard idle || now.milliseconds - since.milliseconds >= Self.drainGrace else { continue }
            lease(.drained(slot: slot), now: now, monotonic: nil, &actions)
        }
    }
}
