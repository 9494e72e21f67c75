import ChimeEngine
import ChimeProtocol

/// Which slots a worker serves when many workers share one store (slot mode), as a state machine:
/// when it heartbeats, renews its leases, takes slots and hands them back. No I/O and no clock: its
/// owner runs each ``Action`` against the store (ChimePostgresStore's `SlotStore`), reports the
/// result as an ``Event``, and passes a monotonic `now` with each.
///
/// The rules it keeps:
/// - **A lease is trusted only as long as the store could not have given it away.** A lease taken or
///   renewed by a request sent at `t` is valid here until `t + ttl − safety`: the store's own expiry
///   is `now() + ttl` at the server, which is later than `t`. Past that, the slot stops being served
///   (``StopReason/expired``), whether or not the store could be reached: a worker cut off from the
///   store stops firing once its leases may have moved. Writes are fenced by the epoch in the store
///   anyway, so this bounds duplicates, not correctness.
/// - **Every worker aims for an even share.** Live members (heartbeat not expired, not leaving),
///   sorted by id: with S slots and n members each gets S / n, and the first S mod n one more. Every
///   worker computes the same targets from the same membership. Above its target a worker drains
///   and releases the excess; below it, it takes free or expired slots, those it ranks highest first
///   (rendezvous hashing, so that the same slots tend to come back to the same worker).
/// - **Hand-over without an expiry wait.** A slot given back is first drained (no new commands,
///   what was received committed), then released in the store, so the next owner takes it at once.
///   A leaving worker's target is 0, and the others stop counting it as soon as it says it leaves;
///   while it is there they look again every ``Policy/followUpInterval``, to take its slots as
///   they are released.
/// - **A few slots at a time, without waiting between them.** A round takes at most
///   ``Policy/maxAcquirePerRound`` slots; when it left free slots behind, the next round comes as
///   soon as those are loaded.
public struct SlotOwnership: Sendable {
    /// The numbers of slots a store may have (`--slots`).
    public static let slotCounts = 1...65536

    public struct Policy: Sendable {
        /// This worker's id in the store (unique among the live workers).
        public var worker: String
        public var slotCount: Int
        /// How long a lease lasts in the store after each renewal.
        public var leaseTTL: Duration
        /// Slots taken in one round at most, so that a new worker loads a few at a time (the loads
        /// run on the loop, between its renewals). By default a 32nd of the slots, at least 8 and
        /// at most 256: a round loads about a 32nd of the store's notifications up to 8,192 slots,
        /// and holds the loop for about 0.3 s at most when the slots are empty (an empty slot
        /// loads in about 1.2 ms; `make bench-slot-load`).
        public var maxAcquirePerRound: Int

        public init(worker: String, slotCount: Int, leaseTTL: Duration = .seconds(10), maxAcquirePerRound: Int? = nil) {
            self.worker = worker
            self.slotCount = slotCount
            self.leaseTTL = leaseTTL
            self.maxAcquirePerRound = maxAcquirePerRound ?? min(256, max(8, slotCount / 32))
        }

        /// A round (heartbeat, renewal, balance) every third of the TTL: two rounds can fail before
        /// a lease may expire.
        public var roundInterval: Duration { leaseTTL / 3 }
        /// How soon the next round comes while another worker hands its slots over.
        public var followUpInterval: Duration { min(roundInterval, .milliseconds(500)) }
        /// Margin for the worker's and the store's clocks running at different rates.
        public var safety: Duration { leaseTTL / 10 }
    }

    /// A live worker as the store's membership table shows it.
    public struct Member: Hashable, Sendable {
        public var worker: String
        public var leaving: Bool

        public init(worker: String, leaving: Bool = false) {
            self.worker = worker
            self.leaving = leaving
        }
    }

    /// A slot's lease as the store shows it.
    public struct Lease: Hashable, Sendable {
        public var slot: Int
        public var owner: String?
        public var epoch: Int64
        /// False once the store's clock passed its expiry.
        public var live: Bool

        public init(slot: Int, owner: String?, epoch: Int64, live: Bool) {
            self.slot = slot
            self.owner = owner
            self.epoch = epoch
            self.live = live
        }
    }

    public enum SlotState: Hashable, Sendable {
        /// Leased; its journal is being read. Commands for it wait.
        case loading
        /// Leased and loaded: its commands are answered and its notifications fire.
        case serving
        /// Being given back: no new commands; released once what it received is committed.
        case draining
    }

    public struct Held: Hashable, Sendable {
        public var epoch: Int64
        public var state: SlotState
        /// Until when the lease is trusted here (see the type's rules).
        public var validUntil: ContinuousClock.Instant
    }

    public enum StopReason: String, Hashable, Sendable {
        /// The store says another worker holds it (a renewal or a fenced write failed).
        case lost
        /// Not renewed in time: the store may have given it away.
        case expired
        /// Its journal could not be read.
        case loadFailed
    }

    public enum Event: Sendable {
        /// Time passed: start a round if one is due, stop serving what expired.
        case tick
        /// A heartbeat sent at `sentAt` succeeded; the store's members and leases at that time.
        case heartbeat(members: [Member], leases: [Lease], sentAt: ContinuousClock.Instant)
        /// A renewal sent at `sentAt` of `requested`: these slots are still held.
        case renewed(Set<Int>, requested: [Int: Int64], sentAt: ContinuousClock.Instant)
        /// An acquisition sent at `sentAt` took these slots, with their new epochs.
        case acquired([Int: Int64], sentAt: ContinuousClock.Instant)
        case loaded(slot: Int, epoch: Int64)
        case loadFailed(slot: Int, epoch: Int64)
        /// Everything received for a draining slot is committed.
        case drained(slot: Int)
        /// A commit found these slots fenced off: another worker holds them.
        case fenced(Set<Int>)
        /// A store call of the round failed; the next round tries again.
        case storeFailed
        /// Graceful stop: hand every slot over.
        case leave
        /// Whether the worker can serve at all (connected to the broker). While it cannot, it
        /// neither heartbeats nor renews, so that its leases expire and others take its slots.
        case available(Bool)
    }

    public enum Action: Hashable, Sendable {
        /// Upsert this worker's heartbeat (saying whether it leaves), then read members and leases.
        case heartbeat(leaving: Bool)
        case renew([Int: Int64])
        case acquire([Int])
        /// Read the slot's journal and rebuild its engine, then report ``Event/loaded(slot:epoch:)``.
        case load(slot: Int, epoch: Int64)
        /// Drop the slot's engine and whatever waits for it (replies of uncommitted commands).
        case stopServing(slot: Int, reason: StopReason)
        /// Stop taking the slot's commands, commit what was received, report ``Event/drained(slot:)``.
        case drain(slot: Int)
        /// Give the leases back in the store, then drop the slots' engines.
        case release([Int: Int64])
        /// Nothing is held any more after ``Event/leave``: remove this worker from the store.
        case deregister
    }

    public let policy: Policy
    public private(set) var held: [Int: Held] = [:]
    public private(set) var leaving = false
    /// The live members in the last heartbeat, sorted; empty before the first.
    public private(set) var members: [Member] = []
    var nextRound: ContinuousClock.Instant?
    /// The last round left free slots it did not take (``Policy/maxAcquirePerRound``): the next
    /// round comes as soon as those it took are loaded (``nextDeadline()`` is then now).
    var moreToTake = false
    /// Slots whose journal this worker could not read: not taken again before `retryAt`, a round
    /// after the first failure and twice as long after each next, up to 5 minutes (another
    /// worker may read it meanwhile; this one logs each failure, so not every round).
    var failedLoads: [Int: (failures: Int, retryAt: ContinuousClock.Instant)] = [:]
    var deregistered = false
    public private(set) var available = true

    /// This worker's rendezvous score for each slot: the same on every worker, computed once.
    let ranks: [UInt32]

    public init(policy: Policy) {
        precondition(policy.slotCount > 0)
        self.policy = policy
        ranks = (0..<policy.slotCount).map { crc32(Array("\($0)/\(policy.worker)".utf8)) }
    }

    /// Whether this worker may answer the slot's commands and fire its notifications now: loaded,
    /// and its lease still trusted. (The worker's loop ticks this machine before anything else in
    /// each of its steps, so that what expired is dropped first.)
    public func isServing(_ slot: Int, now: ContinuousClock.Instant) -> Bool {
        guard let h = held[slot] else { return false }
        return h.state == .serving && now < h.validUntil
    }

    /// This worker's share of the slots under the last membership it saw.
    public var target: Int {
        guard !leaving else { return 0 }
        let counted = members.filter { !$0.leaving }.map(\.worker)
        let everyone = counted.contains(policy.worker) ? counted : (counted + [policy.worker]).sorted()
        let base = policy.slotCount / everyone.count
        let index = everyone.firstIndex(of: policy.worker)!
        return base + (index < policy.slotCount % everyone.count ? 1 : 0)
    }

    /// After ``Event/leave``: every slot is handed over and the worker is out of the store.
    public var hasLeft: Bool { leaving && deregistered }

    /// When the next ``Event/tick`` has something to do. The loop asks at every turn: it reads
    /// the earliest expiry kept by ``handle(_:now:)``, not every lease.
    public func nextDeadline() -> ContinuousClock.Instant? {
        // No round while unavailable: its time, once past, would wake the loop at once, again and again.
        [available ? nextRound : nil, earliestExpiry].compactMap { $0 }.min()
    }

    /// The earliest `validUntil` of the leases held: computed again after every event that can
    /// change it (all but ``Event/loaded(slot:epoch:)``, the one that comes once a slot).
    private(set) var earliestExpiry: ContinuousClock.Instant?

    public mutating func handle(_ event: Event, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        switch event {
        case .tick:
            expire(now: now, &actions)
            if available, nextRound.map({ now >= $0 }) ?? true {
                nextRound = now + policy.roundInterval
                actions.append(.heartbeat(leaving: leaving))
            }
        case .heartbeat(let members, let leases, let sentAt):
            self.members = members.sorted { $0.worker < $1.worker }
            expire(now: now, &actions)
            if !held.isEmpty { actions.append(.renew(held.mapValues(\.epoch))) }
            balance(leases, sentAt: sentAt, &actions)
            // A worker that leaves releases its slots one by one as they drain: look again soon.
            if self.members.contains(where: { $0.leaving && $0.worker != policy.worker }), let next = nextRound {
                nextRound = min(next, now + policy.followUpInterval)
            }
        case .renewed(let kept, let requested, let sentAt):
            for (slot, epoch) in requested where held[slot]?.epoch == epoch {
                if kept.contains(slot) {
                    held[slot]!.validUntil = max(held[slot]!.validUntil, sentAt + policy.leaseTTL - policy.safety)
                } else {
                    held[slot] = nil
                    actions.append(.stopServing(slot: slot, reason: .lost))
                }
            }
        case .acquired(let taken, let sentAt):
            for (slot, epoch) in taken.sorted(by: { $0.key < $1.key }) {
                held[slot] = Held(epoch: epoch, state: .loading, validUntil: sentAt + policy.leaseTTL - policy.safety)
                actions.append(.load(slot: slot, epoch: epoch))
            }
        case .loaded(let slot, let epoch):
            guard held[slot]?.epoch == epoch, held[slot]?.state == .loading else { break }
            failedLoads[slot] = nil
            if leaving {
                held[slot]!.state = .draining
                actions.append(.drain(slot: slot))
            } else {
                held[slot]!.state = .serving
                if moreToTake, !held.values.contains(where: { $0.state == .loading }) {
                    moreToTake = false
                    nextRound = now  // due at once: the loop sleeps until nextDeadline()
                }
            }
        case .loadFailed(let slot, let epoch):
            guard held[slot]?.epoch == epoch else { break }
            let failures = (failedLoads[slot]?.failures ?? 0) + 1
            let wait = min(policy.roundInterval * (1 << min(failures - 1, 16)), .seconds(300))
            failedLoads[slot] = (failures, now + wait)
            // Handed back, so that another worker (or this one, next round) tries again.
            actions.append(.release([slot: epoch]))
            held[slot] = nil
            actions.append(.stopServing(slot: slot, reason: .loadFailed))
        case .drained(let slot):
            guard let h = held[slot], h.state == .draining else { break }
            held[slot] = nil
            actions.append(.release([slot: h.epoch]))
        case .fenced(let slots):
            for slot in slots.sorted() where held[slot] != nil {
                held[slot] = nil
                actions.append(.stopServing(slot: slot, reason: .lost))
            }
        case .available(let available):
            self.available = available
            if available { nextRound = now }  // due at once
        case .storeFailed:
            // The round is over; the next one comes at its time. Leases run out on their own.
            break
        case .leave:
            leaving = true
            for slot in held.keys.sorted() {
                switch held[slot]!.state {
                case .serving:
                    held[slot]!.state = .draining
                    actions.append(.drain(slot: slot))
                case .loading, .draining: break  // a loading slot drains once loaded
                }
            }
            actions.append(.heartbeat(leaving: true))
        }
        if leaving && held.isEmpty && !deregistered {
            deregistered = true
            actions.append(.deregister)
        }
        if case .loaded = event {} else { earliestExpiry = held.values.lazy.map(\.validUntil).min() }
        return actions
    }

    /// Stops serving every slot whose lease may have expired in the store.
    mutating func expire(now: ContinuousClock.Instant, _ actions: inout [Action]) {
        // Every turn of the loop ticks: most find nothing due, and need not look at every lease.
        guard let earliest = earliestExpiry, now >= earliest else { return }
        for slot in held.keys.sorted() where now >= held[slot]!.validUntil {
            held[slot] = nil
            actions.append(.stopServing(slot: slot, reason: .expired))
        }
    }

    /// Drains what is above the target, takes free slots while below it.
    mutating func balance(_ leases: [Lease], sentAt: ContinuousClock.Instant, _ actions: inout [Action]) {
        let counted = held.filter { $0.value.state != .draining }
        let target = self.target
        if counted.count > target {
            // Give back the loaded slots this worker ranks lowest; loading ones finish first.
            let excess = ranked(counted.filter { $0.value.state == .serving }.keys).reversed()
                .prefix(counted.count - target)
            for slot in excess.sorted() {
                held[slot]!.state = .draining
                actions.append(.drain(slot: slot))
            }
        } else if counted.count < target, !leaving {
            // Its own leases count as free when not held here: slots dropped after a store
            // failure, or held by this worker's previous run, are taken again at once.
            let free = ranked(
                leases.filter {
                    ($0.owner == nil || !$0.live || $0.owner == policy.worker) && held[$0.slot] == nil
                        && failedLoads[$0.slot].map { sentAt >= $0.retryAt } ?? true
                }
                .map(\.slot)
            )
            let taken = free.prefix(min(target - counted.count, policy.maxAcquirePerRound))
            moreToTake = taken.count < min(free.count, target - counted.count)
            if !taken.isEmpty { actions.append(.acquire(taken.sorted())) }
        }
    }

    /// `slots` by this worker's rank, highest first (ties by slot).
    func ranked(_ slots: some Sequence<Int>) -> [Int] {
        slots.sorted { ranks[$0] != ranks[$1] ? ranks[$0] > ranks[$1] : $0 < $1 }
    }
}

/// A set of slots written as ascending ranges, `0-3,7,9-12` (empty for none): how a worker's
/// retained status says which slots it serves.
public enum SlotRanges {
    public static func text(_ slots: [Int]) -> String {
        var parts: [String] = []
        var i = 0
        let sorted = slots.sorted()
        while i < sorted.count {
            var j = i
            while j + 1 < sorted.count, sorted[j + 1] == sorted[j] + 1 { j += 1 }
            parts.append(i == j ? "\(sorted[i])" : "\(sorted[i])-\(sorted[j])")
            i = j + 1
        }
        return parts.joined(separator: ",")
    }

    /// The slots of `text`, or nil when it is not ranges of slots below `count`, or `count` is not
    /// a number of slots a store may have (so the array has 65,536 elements at most).
    public static func slots(_ text: String, count: Int) -> [Int]? {
        guard SlotOwnership.slotCounts.contains(count) else { return nil }
        guard !text.isEmpty else { return [] }
        var slots: [Int] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false).map { Int($0) }
            guard bounds.count <= 2, let low = bounds.first ?? nil, let high = bounds.last ?? nil,
                0 <= low, low <= high, high < count, slots.last.map({ $0 < low }) ?? true
            else { return nil }
            slots += low...high
        }
        return slots
    }
}
