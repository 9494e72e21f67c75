import ChimeCore
import Testing

/// The worker's policy in slot mode, driven by hand: which commands it answers, when replies go
/// out, what a fenced commit and a store failure do, and that a slot being handed over fires
/// nothing.
@Suite struct SlotWorkerPolicyTests {
    static let t0 = Instant(milliseconds: 1_796_119_200_000)
    static let topics = Topics(prefix: "chime")

    /// A device in each of the 4 slots.
    static let devices: [String] = {
        var found: [Int: String] = [:]
        var i = 0
        while found.count < 4 {
            let device = "d\(i)"
            let slot = Int(crc32(Array(device.utf8)) % 4)
            if found[slot] == nil { found[slot] = device }
            i += 1
        }
        return (0..<4).map { found[$0]! }
    }()

    /// A serving worker that holds slots 0...3 and has loaded `loaded` of them.
    static func worker(
        loaded: [Int],
        routing: CommandRouting = .broadcast
    ) -> (WorkerStateMachine, ContinuousClock.Instant) {
        var policy = WorkerStateMachine.Policy(
            workerId: "a",
            instance: "this",
            pid: 1,
            clientId: "chimed-a",
            topics: topics,
            partition: .all,
            limits: CommandLimits(),
            deviceBudget: DeviceBudget(rate: 0, burst: 1000),
            statsInterval: 0,
            logLevel: .critical
        )
        policy.slots = SlotOwnership.Policy(worker: "a", slotCount: 4, leaseTTL: .seconds(10))
        policy.routing = routing
        var m = WorkerStateMachine(policy: policy, engine: nil, now: t0)
        let c0 = ContinuousClock.now
        _ = m.handle(.lease(.tick, monotonic: c0), now: t0)
        let leases = (0..<4).map { SlotOwnership.Lease(slot: $0, owner: nil, epoch: 0, live: false) }
        let acquire = m.handle(
            .lease(.heartbeat(members: [.init(worker: "a")], leases: leases, sentAt: c0), monotonic: c0),
            now: t0
        )
        #expect(acquire.contains { if case .lease(.acquire([0, 1, 2, 3])) = $0 { true } else { false } })
        let loads = m.handle(.lease(.acquired([0: 1, 1: 1, 2: 1, 3: 1], sentAt: c0), monotonic: c0), now: t0)
        #expect(loads.filter { if case .loadSlot = $0 { true } else { false } }.count == 4)
        for slot in loaded { _ = m.adopt(slot: slot, epoch: 1, Engine(), now: t0, monotonic: c0) }
        _ = m.handle(.connected(sessionPresent: false), now: t0)
        _ = m.report(.subscribeSent(.commands, .success(7)), now: t0)
        _ = m.handle(.subscribed(messageId: 7, grantedQoS: [1, 1]), now: t0)
        return (m, c0)
    }

    static func schedule(_ device: String, _ id: String, after: Int = 3600) -> WorkerStateMachine.Event {
        .message(
            InboundMessage(
                topic: topics.command(device, .schedule),
                payload: Array(#"{"id":"\#(id)","after":\#(after)}"#.utf8),
                messageId: 1,
                responseTopic: "r",
                correlationData: Array(id.utf8)
            )
        )
    }

    static func appendedSlots(_ actions: [WorkerStateMachine.Action]) -> [Int] {
        actions.compactMap { if case .append(_, _, let slot, _) = $0 { slot } else { nil } }
    }

    /// The ids of the appends asked for, in order.
    static func appendIds(_ actions: [WorkerStateMachine.Action]) -> [WorkerStateMachine.AppendId] {
        actions.compactMap { if case .append(_, _, _, let id) = $0 { id } else { nil } }
    }

    /// Handles `event` and reports each append it asks for as done.
    static func handleAndAppend(
        _ m: inout WorkerStateMachine,
        _ event: WorkerStateMachine.Event
    ) -> [WorkerStateMachine.Action] {
        var after: [WorkerStateMachine.Action] = []
        for id in appendIds(m.handle(event, now: t0)) { after += m.report(.appended(id, .success(())), now: t0) }
        return after
    }

    static func replies(_ actions: [WorkerStateMachine.Action]) -> [[UInt8]?] {
        actions.compactMap { if case .publish(let m) = $0, m.purpose == .reply { m.correlationData } else { nil } }
    }

    @Test func onlyLoadedSlotsAreAnsweredAndRepliesWaitForTheCommit() {
        var (m, _) = Self.worker(loaded: [0, 1])
        // Slot 2 is still loading: nothing, not even an error (its owner answers the resend).
        #expect(m.handle(Self.schedule(Self.devices[2], "x"), now: Self.t0).isEmpty)
        let actions = m.handle(Self.schedule(Self.devices[1], "y"), now: Self.t0)
        #expect(Self.appendedSlots(actions) == [1])
        let id = Self.appendIds(actions)[0]
        #expect(Self.replies(m.report(.appended(id, .success(())), now: Self.t0)).isEmpty)
        #expect(m.handle(.batchEnded, now: Self.t0).contains { if case .commit = $0 { true } else { false } })
        let committed = m.report(.committed(syncMicroseconds: nil, store: StoreStatus()), now: Self.t0)
        #expect(Self.replies(committed) == [Array("y".utf8)])
        #expect(m.metrics(now: Self.t0).slots == [0, 1])
        #expect(m.stats.commandsForOtherSlots == 1)
    }

    /// Each append's result is matched to its write by id: an owner that reports them out of order
    /// gets each command's own reply, and a result for nothing waiting changes nothing.
    @Test func appendResultsAreMatchedByIdentity() throws {
        var (m, _) = Self.worker(loaded: [0, 1])
        let first = Self.appendIds(m.handle(Self.schedule(Self.devices[0], "first"), now: Self.t0))
        let second = Self.appendIds(m.handle(Self.schedule(Self.devices[1], "second"), now: Self.t0))
        try #require(first.count == 1 && second.count == 1 && first != second)
        _ = m.report(.appended(second[0], .failure(StoreError("disk full"))), now: Self.t0)
        _ = m.report(.appended(first[0], .success(())), now: Self.t0)
        _ = m.report(.appended(first[0], .success(())), now: Self.t0)
        let committed = m.report(.committed(syncMicroseconds: nil, store: StoreStatus()), now: Self.t0)
        let replies = committed.compactMap { action -> (String, Bool)? in
            guard case .publish(let message) = action, message.purpose == .reply,
                let object = (try? JSON(parsing: message.payload))?.objectValue
            else { return nil }
            return (String(decoding: message.correlationData ?? [], as: UTF8.self), object["ok"] == true)
        }
        #expect(replies.map(\.0).sorted() == ["first", "second"])
        #expect(replies.first { $0.0 == "first" }?.1 == true)
        #expect(replies.first { $0.0 == "second" }?.1 == false)
    }

    @Test func aFencedCommitSendsNoReplyOfItsSlotAndDropsIt() {
        var (m, _) = Self.worker(loaded: [0, 1])
        _ = Self.handleAndAppend(&m, Self.schedule(Self.devices[0], "lost"))
        _ = Self.handleAndAppend(&m, Self.schedule(Self.devices[1], "kept"))
        let committed = m.report(.committed(syncMicroseconds: nil, store: StoreStatus(), fenced: [0]), now: Self.t0)
        #expect(Self.replies(committed) == [Array("kept".utf8)])
        #expect(committed.contains { if case .forgetSlot(slot: 0) = $0 { true } else { false } })
        #expect(m.engines.keys.sorted() == [1])
        // Commands for the dropped slot are another worker's now.
        #expect(m.handle(Self.schedule(Self.devices[0], "again"), now: Self.t0).isEmpty)
    }

    /// A snapshot of a slot is copied over several turns; if the slot is dropped meanwhile, the
    /// snapshot is abandoned rather than written.
    @Test(arguments: [false, true])
    func aSlotSnapshotIsCopiedOverTurnsAndAbandonedIfTheSlotIsDropped(dropped: Bool) {
        var (m, c0) = Self.worker(loaded: [1])
        let engine = Engine()
        var spec = NotificationSpec()
        spec.alertBody = "later"
        for part in 0..<20 {
            let batch = (0..<1000).map {
                ResolvedNotification(id: "n\(part)-\($0)", fireDate: .instant(Self.t0.adding(seconds: 3600)), spec)
            }
            engine.apply(.schedule(deviceId: Self.devices[0], at: Self.t0, replaced: [], notifications: batch))
        }
        _ = m.adopt(slot: 0, epoch: 1, engine, now: Self.t0, monotonic: c0)
        let due = StoreStatus(snapshotDue: true, snapshotSlot: 0)
        let start = m.report(.committed(syncMicroseconds: nil, store: due), now: Self.t0)
        #expect(start.contains { if case .startSnapshot(slot: 0) = $0 { true } else { false } })
        let began = m.report(.snapshotStarted(.success(3)), now: Self.t0)
        #expect(!began.contains { if case .writeSnapshot = $0 { true } else { false } }, "20,000 take two turns")
        #expect(engine.isTakingSnapshot)
        if dropped { _ = m.report(.committed(syncMicroseconds: nil, store: StoreStatus(), fenced: [0]), now: Self.t0) }
        let next = m.handle(.batchEnded, now: Self.t0)
        let written = next.compactMap { if case .writeSnapshot(let frozen) = $0 { frozen } else { nil } }
        let abandoned = next.contains { if case .abandonSnapshot = $0 { true } else { false } }
        if dropped {
            #expect(written.isEmpty && abandoned)
        } else {
            #expect(written.first?.entryCount == 1 + 1 + 20_000)
            #expect(!abandoned)
        }
        #expect(m.waitTime(now: Self.t0) > 0, "nothing left to copy")
    }

    @Test func aFailedCommitDropsEverySlotAndAnswersNothing() {
        var (m, _) = Self.worker(loaded: [0, 1, 2, 3])
        _ = Self.handleAndAppend(&m, Self.schedule(Self.devices[3], "z"))
        let failed = m.report(.commitFailed(StoreError("connection lost", transient: true)), now: Self.t0)
        #expect(Self.replies(failed).isEmpty)
        #expect(m.engines.isEmpty)
        #expect(failed.filter { if case .forgetSlot = $0 { true } else { false } }.count == 4)
        #expect(m.ownership?.held.isEmpty == true)
    }

    @Test func aSlotBeingHandedOverFiresNothingAndIsReleasedOnceIdle() {
        var (m, c0) = Self.worker(loaded: [0, 1])
        // Both have something due now.
        for (slot, id) in [(0, "a"), (1, "b")] {
            _ = Self.handleAndAppend(&m, Self.schedule(Self.devices[slot], id, after: 1))
        }
        _ = m.report(.committed(syncMicroseconds: nil, store: StoreStatus()), now: Self.t0)
        // A second worker joins: a's target is 2 of 4 and it holds 4 (2 of them still loading): the
        // excess, 2, comes from the loaded ones.
        let later = Self.t0.adding(milliseconds: 2000)
        let leases = (0..<4).map { SlotOwnership.Lease(slot: $0, owner: "a", epoch: 1, live: true) }
        _ = m.handle(
            .lease(
                .heartbeat(members: [.init(worker: "a"), .init(worker: "b")], leases: leases, sentAt: c0),
                monotonic: c0
            ),
            now: later
        )
        let deliveries = m.handle(.batchEnded, now: later).compactMap { action -> Int? in
            if case .publish(let message) = action, case .delivery(_, _, _, _, let slot) = message.purpose {
                slot
            } else {
                nil
            }
        }
        #expect(deliveries.isEmpty, "a draining slot fired: \(deliveries)")
        // Nothing in flight: released at the next commit, and dropped.
        let released = m.report(.committed(syncMicroseconds: nil, store: StoreStatus()), now: later)
        let handedBack = released.reduce(into: [Int: Int64]()) { all, action in
            if case .lease(.release(let held)) = action { all.merge(held) { $1 } }
        }
        #expect(handedBack == [0: 1, 1: 1])
        #expect(m.engines.isEmpty)
        #expect(m.stats.handover.total == 2)
        // The status said the first release at once, the second a second later.
        #expect(Self.statuses(released).map { $0["serving"] } == ["1"])
        let tick = m.handle(.lease(.tick, monotonic: c0), now: later.adding(milliseconds: 1000))
        #expect(Self.statuses(tick).map { $0["serving"] } == [""])
    }

    static func statuses(_ actions: [WorkerStateMachine.Action]) -> [JSONObject] {
        actions.compactMap { action in
            guard case .publish(let m) = action, m.purpose == .onlineStatus,
                case .object(let status)? = try? JSON(parsing: m.payload)
            else { return nil }
            return status
        }
    }

    /// The retained status says which slots are served, again at each change; the stats time each
    /// renewal's round trip and each slot's load.
    @Test func theStatusSaysWhatIsServedAndTheStatsHowLongLeasesTook() {
        var (m, c0) = Self.worker(loaded: [0])
        // Online at t0 said slot 0; a second later the next change is said at once.
        let loaded = m.adopt(
            slot: 2,
            epoch: 1,
            Engine(),
            now: Self.t0.adding(milliseconds: 1000),
            monotonic: c0 + .milliseconds(250)
        )
        let status = Self.statuses(loaded)
        #expect(status.count == 1)
        #expect(status.first?["serving"] == "0,2")
        #expect(status.first?["slots"] == 4)
        // Within the second after it, changes wait for the next tick past it.
        let soon = Self.t0.adding(milliseconds: 1500)
        #expect(Self.statuses(m.adopt(slot: 3, epoch: 1, Engine(), now: soon, monotonic: c0)).isEmpty)
        let tick = m.handle(.lease(.tick, monotonic: c0), now: Self.t0.adding(milliseconds: 2000))
        #expect(Self.statuses(tick).map { $0["serving"] } == ["0,2-3"])
        #expect(m.stats.slotLoad.total == 3)
        #expect(m.stats.slotLoad.maximum == 250_000)
        let sent = c0 + .seconds(3)
        _ = m.handle(
            .lease(
                .renewed([0, 1, 2, 3], requested: [0: 1, 1: 1, 2: 1, 3: 1], sentAt: sent),
                monotonic: sent + .milliseconds(30)
            ),
            now: Self.t0
        )
        #expect(m.stats.leaseRenew.total == 1)
        #expect(m.stats.leaseRenew.maximum == 30_000)
        let stats = m.metrics(now: Self.t0).statsJSON
        #expect(stats["slotLoad"]?.objectValue?["count"] == 3)
        #expect(stats["leaseRenew"]?.objectValue?["max"] == 30)
    }
}
