import ChimeCore
import Testing

/// SlotOwnership driven against a model of the store's lease table on a virtual clock: several
/// workers, killed, paused and leaving, checked for the safety rule (never two workers serving a
/// slot at once) and for liveness (every slot served again within the bound).
@Suite struct SlotOwnershipTests {
    /// The store's lease and membership tables, with the semantics of SlotStore (the database's
    /// clock is the same virtual clock).
    final class Store {
        var leases: [(owner: String?, epoch: Int64, expires: ContinuousClock.Instant)]
        var members: [String: (expires: ContinuousClock.Instant, leaving: Bool)] = [:]
        let ttl: Duration

        init(slots: Int, ttl: Duration, now: ContinuousClock.Instant) {
            leases = Array(repeating: (nil, 0, now), count: slots)
            self.ttl = ttl
        }

        func view(now: ContinuousClock.Instant) -> ([SlotOwnership.Member], [SlotOwnership.Lease]) {
            let live = members.filter { $0.value.expires > now }
                .map { SlotOwnership.Member(worker: $0.key, leaving: $0.value.leaving) }
            let leases = self.leases.enumerated().map { slot, l in
                SlotOwnership.Lease(slot: slot, owner: l.owner, epoch: l.epoch, live: l.expires > now)
            }
            return (live, leases)
        }
    }

    /// One worker: its policy and the loop that would carry out its actions.
    final class Worker {
        var ownership: SlotOwnership
        var running = true
        var stops: [(slot: Int, reason: SlotOwnership.StopReason)] = []
        var loads = 0

        init(_ name: String, slots: Int, ttl: Duration) {
            ownership = SlotOwnership(policy: .init(worker: name, slotCount: slots, leaseTTL: ttl))
        }
        var name: String { ownership.policy.worker }

        func handle(_ event: SlotOwnership.Event, _ store: Store, now: ContinuousClock.Instant) {
            var queue = [event]
            while !queue.isEmpty {
                let actions = ownership.handle(queue.removeFirst(), now: now)
                for action in actions { queue += carryOut(action, store, now: now) }
            }
        }

        /// What the worker's loop does with an action: the store call, then its result.
        func carryOut(
            _ action: SlotOwnership.Action,
            _ store: Store,
            now: ContinuousClock.Instant
        )
            -> [SlotOwnership.Event]
        {
            switch action {
            case .heartbeat(let leaving):
                store.members[name] = (now + store.ttl, leaving)
                let (members, leases) = store.view(now: now)
                return [.heartbeat(members: members, leases: leases, sentAt: now)]
            case .renew(let held):
                var kept: Set<Int> = []
                for (slot, epoch) in held where store.leases[slot].owner == name && store.leases[slot].epoch == epoch {
                    store.leases[slot].expires = now + store.ttl
                    kept.insert(slot)
                }
                return [.renewed(kept, requested: held, sentAt: now)]
            case .acquire(let slots):
                var taken: [Int: Int64] = [:]
                for slot in slots where store.leases[slot].owner == nil || store.leases[slot].expires <= now {
                    store.leases[slot] = (name, store.leases[slot].epoch + 1, now + store.ttl)
                    taken[slot] = store.leases[slot].epoch
                }
                return [.acquired(taken, sentAt: now)]
            case .load(let slot, let epoch):
                loads += 1
                return [.loaded(slot: slot, epoch: epoch)]
            case .drain(let slot):
                return [.drained(slot: slot)]
            case .release(let held):
                for (slot, epoch) in held where store.leases[slot].owner == name && store.leases[slot].epoch == epoch {
                    store.leases[slot] = (nil, epoch, now)
                }
                return []
            case .stopServing(let slot, let reason):
                stops.append((slot, reason))
                return []
            case .deregister:
                store.members[name] = nil
                return []
            }
        }
    }

    struct World {
        let start = ContinuousClock.now
        var elapsed = Duration.zero
        let store: Store
        var workers: [Worker]
        let slots: Int

        init(workers names: [String], slots: Int, ttl: Duration = .seconds(10)) {
            self.slots = slots
            store = Store(slots: slots, ttl: ttl, now: start)
            workers = names.map { Worker($0, slots: slots, ttl: ttl) }
        }

        var now: ContinuousClock.Instant { start + elapsed }

        /// Advances the clock in steps of `step`, ticking the running workers, checking after
        /// every step that no slot is served by two workers.
        mutating func run(for duration: Duration, step: Duration = .milliseconds(100), checking: Bool = true) {
            let end = elapsed + duration
            while elapsed < end {
                elapsed += step
                for worker in workers where worker.running { worker.handle(.tick, store, now: now) }
                if checking { checkSafety() }
            }
        }

        func checkSafety() {
            for slot in 0..<slots {
                let servers = workers.filter { $0.ownership.isServing(slot, now: now) }.map(\.name)
                #expect(servers.count <= 1, "slot \(slot) served by \(servers) at \(elapsed)")
                // A worker serving a slot holds its current epoch in the store.
                if let name = servers.first, let held = workers.first(where: { $0.name == name })!.ownership.held[slot]
                {
                    #expect(store.leases[slot].epoch == held.epoch, "slot \(slot): \(name) serves an old epoch")
                }
            }
        }

        func served(by name: String) -> Int {
            let worker = workers.first { $0.name == name }!
            return (0..<slots).filter { worker.ownership.isServing($0, now: now) }.count
        }

        var unserved: [Int] {
            (0..<slots).filter { slot in !workers.contains { $0.ownership.isServing(slot, now: now) } }
        }
    }

    @Test func threeWorkersShareSixtyFourSlotsEvenly() {
        var world = World(workers: ["a", "b", "c"], slots: 64)
        world.run(for: .seconds(30))
        #expect(world.unserved.isEmpty)
        #expect(world.workers.map { world.served(by: $0.name) }.sorted() == [21, 21, 22])
        // Settled: nothing moves any more.
        let loads = world.workers.map(\.loads)
        world.run(for: .seconds(30))
        #expect(world.workers.map(\.loads) == loads)
        #expect(world.workers.allSatisfy { $0.stops.isEmpty })
    }

    @Test func aKilledWorkersSlotsAreServedAgainWithinTwoLeaseTimes() {
        var world = World(workers: ["a", "b", "c"], slots: 64)
        world.run(for: .seconds(30))
        let killed = world.workers[1]
        let its = (0..<64).filter { killed.ownership.isServing($0, now: world.now) }
        #expect(its.count >= 21)
        killed.running = false  // kill -9: no more ticks, no release
        let killedAt = world.elapsed
        var servedAgain: Duration?
        while world.elapsed - killedAt < .seconds(60) {
            world.run(for: .milliseconds(100))
            // The dead worker's struct still says serving; only the live ones count.
            let live = world.workers.filter(\.running)
            if its.allSatisfy({ slot in live.contains { $0.ownership.isServing(slot, now: world.now) } }) {
                servedAgain = world.elapsed - killedAt
                break
            }
        }
        // Its leases end at most a TTL after the kill (renewed at most a third of one before), the
        // others see that in their next round (a third of a TTL) and take the slots a batch after
        // another: 14 s with a TTL of 10 (the bound docs/production.md promises is 2 × TTL plus loading).
        let bound = Duration.seconds(14)
        #expect(servedAgain != nil && servedAgain! <= bound, "served again after \(String(describing: servedAgain))")
        #expect([world.served(by: "a"), world.served(by: "c")].sorted() == [32, 32])
    }

    @Test func aPausedWorkerStopsServingBeforeItsSlotsMoveAndNeverServesAnOldEpoch() {
        var world = World(workers: ["a", "b"], slots: 16)
        world.run(for: .seconds(20))
        let paused = world.workers[0]
        let its = (0..<16).filter { paused.ownership.isServing($0, now: world.now) }
        #expect(its.count == 8)
        paused.running = false  // SIGSTOP
        // While paused its leases run out: it may no longer claim to serve them, even before it runs.
        world.run(for: .seconds(12))
        #expect(its.allSatisfy { !paused.ownership.isServing($0, now: world.now) })
        world.run(for: .seconds(20))
        #expect(world.served(by: "b") == 16)
        paused.running = true  // SIGCONT: its first tick drops what expired
        world.run(for: .milliseconds(100))
        #expect(Set(paused.stops.map(\.slot)) == Set(its))
        #expect(paused.stops.allSatisfy { $0.reason == .expired })
        // And the two share again, each slot moving through a release or an expiry, never doubly served.
        world.run(for: .seconds(40))
        #expect([world.served(by: "a"), world.served(by: "b")] == [8, 8])
        #expect(world.unserved.isEmpty)
    }

    @Test func aWorkerThatJoinsTakesItsShareFromTheOthersWithoutWaitingForExpiry() {
        var world = World(workers: ["a", "b"], slots: 64)
        world.run(for: .seconds(20))
        #expect([world.served(by: "a"), world.served(by: "b")] == [32, 32])
        world.workers.append(Worker("c", slots: 64, ttl: .seconds(10)))
        let joined = world.elapsed
        var settled: Duration?
        while world.elapsed - joined < .seconds(60) {
            world.run(for: .milliseconds(100))
            if world.workers.map({ world.served(by: $0.name) }).sorted() == [21, 21, 22] {
                settled = world.elapsed - joined
                break
            }
        }
        // Drained and released by their holders, and taken 8 a round (rounds every TTL / 3): 21
        // slots in 3 rounds after the first that sees the newcomer, before any lease could expire
        // and be taken (which would need a TTL without renewal).
        #expect(settled != nil && settled! < .seconds(14), "\(String(describing: settled))")
        #expect(world.workers.allSatisfy { w in w.stops.allSatisfy { $0.reason != .expired } })
    }

    /// Eight slots a round, and the next round as soon as they are loaded: a lone worker serves
    /// 64 slots after eight quick rounds, not after eight round intervals.
    @Test func aWorkerTakesSlotsABatchAfterAnotherWithoutWaitingForTheNextRound() {
        var world = World(workers: ["a"], slots: 64)
        world.run(for: .seconds(2))
        #expect(world.served(by: "a") == 64)
        #expect(world.workers[0].loads == 64)
    }

    /// The loop sleeps until ``SlotOwnership/nextDeadline()``: driven that way (a tick only when
    /// it is due), a lone worker serves 8,192 slots after 32 rounds of a 32nd each, each due at
    /// once after the last one's loads, within the first second (more slots take more rounds of
    /// 256; `make bench-slot-load` starts a worker on 65,536).
    @Test func aLoneWorkerServesEverySlotInThirtyTwoRounds() throws {
        #expect(
            SlotOwnership.Policy(worker: "a", slotCount: SlotOwnership.slotCounts.upperBound).maxAcquirePerRound == 256
        )
        #expect(SlotOwnership.Policy(worker: "a", slotCount: 64).maxAcquirePerRound == 8)
        let slots = 8192
        var world = World(workers: ["a"], slots: slots)
        let worker = world.workers[0]
        #expect(worker.ownership.policy.maxAcquirePerRound == slots / 32)
        var rounds = 0
        // The model loads at once, so what is held is served.
        while worker.ownership.held.count < slots, rounds < 100 {
            worker.handle(.tick, world.store, now: world.now)
            rounds += 1
            if worker.ownership.held.count < slots {
                let deadline = try #require(worker.ownership.nextDeadline())
                #expect(deadline <= world.now, "round \(rounds): the next one waits \(deadline - world.now)")
                world.elapsed += .milliseconds(10)  // the round's store calls and loads
            }
        }
        #expect(world.served(by: "a") == slots)
        #expect(rounds == 32)
        #expect(world.elapsed < .seconds(1))
    }

    /// A worker that cannot reach the broker holds no round: its past round time must not make the
    /// loop wake again at once, over and over.
    @Test func anUnavailableWorkersRoundDoesNotWakeTheLoop() throws {
        var world = World(workers: ["a"], slots: 4)
        let worker = world.workers[0]
        worker.handle(.tick, world.store, now: world.now)
        #expect(world.served(by: "a") == 4)
        worker.handle(.available(false), world.store, now: world.now)
        world.elapsed += .seconds(5)  // past the round (a third of the TTL), before the leases end
        let deadline = try #require(worker.ownership.nextDeadline())
        #expect(deadline > world.now)
        worker.handle(.available(true), world.store, now: world.now)
        #expect(worker.ownership.nextDeadline().map { $0 <= world.now } == true)
    }

    @Test func aLeavingWorkerHandsEverySlotOverAndDeregisters() {
        var world = World(workers: ["a", "b", "c"], slots: 64)
        world.run(for: .seconds(30))
        let leaver = world.workers[2]
        leaver.handle(.leave, world.store, now: world.now)
        #expect(leaver.ownership.hasLeft)
        #expect(world.store.members[leaver.name] == nil)
        #expect((0..<64).allSatisfy { world.store.leases[$0].owner != leaver.name })
        // The others take the released slots in their next rounds, long before any lease expires.
        world.run(for: .seconds(5))
        #expect(world.unserved.isEmpty)
        #expect([world.served(by: "a"), world.served(by: "b")] == [32, 32])
    }

    @Test func slotsThatAFencedCommitOrARenewalLostAreDroppedAtOnce() {
        var world = World(workers: ["a"], slots: 4)
        world.run(for: .seconds(5))
        let a = world.workers[0]
        #expect(world.served(by: "a") == 4)
        a.handle(.fenced([2]), world.store, now: world.now)
        #expect(!a.ownership.isServing(2, now: world.now))
        #expect(a.stops.last.map { "\($0.slot) \($0.reason)" } == "2 lost")
        // Someone else holds slot 1 now (an operator's update of the table: the store's own
        // acquire never takes a live lease, so the safety check is off here). The next renewal
        // finds it gone.
        world.store.leases[1].owner = "z"
        world.store.leases[1].epoch += 1
        world.run(for: .seconds(4), checking: false)
        #expect(!a.ownership.isServing(1, now: world.now))
        #expect(a.stops.contains { $0.slot == 1 && $0.reason == .lost })
    }

    @Test func aSlotThatCannotBeLoadedIsHandedBack() {
        var ownership = SlotOwnership(policy: .init(worker: "a", slotCount: 2))
        let now = ContinuousClock.now
        _ = ownership.handle(.tick, now: now)
        let actions = ownership.handle(
            .heartbeat(
                members: [.init(worker: "a")],
                leases: [
                    .init(slot: 0, owner: nil, epoch: 0, live: false),
                    .init(slot: 1, owner: nil, epoch: 4, live: false),
                ],
                sentAt: now
            ),
            now: now
        )
        #expect(actions == [.acquire([0, 1])])
        #expect(
            ownership.handle(.acquired([0: 1, 1: 5], sentAt: now), now: now) == [
                .load(slot: 0, epoch: 1), .load(slot: 1, epoch: 5),
            ]
        )
        #expect(
            ownership.handle(.loadFailed(slot: 1, epoch: 5), now: now) == [
                .release([1: 5]), .stopServing(slot: 1, reason: .loadFailed),
            ]
        )
        #expect(ownership.handle(.loaded(slot: 0, epoch: 1), now: now).isEmpty)
        #expect(ownership.isServing(0, now: now))
        #expect(!ownership.isServing(1, now: now))
        // A stale result (an older epoch) changes nothing.
        #expect(ownership.handle(.loaded(slot: 1, epoch: 5), now: now).isEmpty)
        #expect(!ownership.isServing(1, now: now))

        // It is not taken again by this worker before a round has passed, then twice as long
        // after each failure (the store shows it free again).
        func round(at time: ContinuousClock.Instant) -> [Int] {
            _ = ownership.handle(.tick, now: time)
            let leases: [SlotOwnership.Lease] = [
                .init(slot: 0, owner: "a", epoch: 1, live: true), .init(slot: 1, owner: nil, epoch: 5, live: false),
            ]
            return ownership.handle(.heartbeat(members: [.init(worker: "a")], leases: leases, sentAt: time), now: time)
                .flatMap { action -> [Int] in if case .acquire(let slots) = action { slots } else { [] } }
                .filter { $0 == 1 }
        }
        let interval = ownership.policy.roundInterval
        #expect(round(at: now + interval / 2).isEmpty)
        #expect(round(at: now + interval) == [1])
        _ = ownership.handle(.acquired([1: 6], sentAt: now + interval), now: now + interval)
        _ = ownership.handle(.loadFailed(slot: 1, epoch: 6), now: now + interval)
        #expect(round(at: now + interval * 2.5).isEmpty)
        #expect(round(at: now + interval * 3) == [1])
    }
}
