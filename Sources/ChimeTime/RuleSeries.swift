/// An RRULE's occurrences as instants, in time order, with their 1-based indexes.
///
/// ``RuleExpansion`` yields wall-clock candidates in wall-clock order and numbers them (the index counts
/// every candidate at or after DTSTART, so it is the RFC's position in the recurrence set and what COUNT
/// limits). Each becomes an instant by ``Zone/instant(for:)``. That mapping is increasing except in a
/// spring-forward gap: a wall time in the gap moves forward by the gap's length, past candidates that come
/// after it on the wall clock (with `INTERVAL=25` minutes, 02:40 becomes 03:40 but the next candidate,
/// 03:05, is earlier). So candidates wait in a small buffer ordered by instant, and leave it once a
/// candidate that was not moved has been seen at or after them: every later candidate, moved or not,
/// lands strictly after a non-moved one. A candidate landing on an instant already waiting is the
/// duplicate of an earlier candidate (02:30 and 03:30 on a spring-forward night) and is dropped; it keeps
/// its index, like an exdate, so indexes stay those of the wall-clock recurrence set.
struct RuleSeries: Sendable {
    let expansion: RuleExpansion
    let zone: Zone
    let count: Int64?
    /// The RRULE's UNTIL as an instant (seconds).
    let until: Int64?

    struct Item {
        var instant: Int64
        var index: Int64
    }

    /// A position in the series: where the wall-clock walk is and what waits to be put in time order.
    struct Stream {
        var period: Int64
        var buffer: [Int64] = []
        var position = 0
        /// The index (absolute, or relative until ``indexOffset`` is known) of the next candidate.
        var nextIndex: Int64
        /// Candidates before this wall time are counted but not produced.
        var minimumWall: Int64
        var lastNonEmptyPeriod: Int64
        var wallDone = false
        /// Candidates waiting to be put in time order: `pending[pendingStart...]`, ascending by instant.
        var pending: [Item] = []
        var pendingStart = 0
        /// The latest instant of a candidate that the zone did not move: nothing later comes before it.
        var frontier = Int64.min
        /// Added to ``nextIndex`` numbering to get absolute indexes; nil while looking for the anchor.
        var indexOffset: Int64?
        var anchor: Item?

        init(period: Int64, firstIndex: Int64, minimumWall: Int64, indexOffset: Int64?, anchor: Item? = nil) {
            self.period = period
            self.nextIndex = firstIndex
            self.minimumWall = minimumWall
            self.lastNonEmptyPeriod = period - 1
            self.indexOffset = indexOffset
            self.anchor = anchor
        }
    }

    /// The first period whose candidates can fall at or after wall time `wall`: the one containing it,
    /// or with `SKIP=FORWARD` the one before, whose missing day or leap month moves into it (the 31st
    /// of April on the 1st of May, a leap month a year lacks into the next year).
    private func firstPeriod(reaching wall: Int64) -> Int64 {
        let period = expansion.period(containing: wall)
        return expansion.calendar?.skip == .forward ? max(0, period - 1) : period
    }

    /// A stream from the start of the series.
    func streamFromStart() -> Stream {
        Stream(period: 0, firstIndex: 1, minimumWall: expansion.start, indexOffset: 0)
    }

    /// A stream whose candidates begin at wall time `wall`, numbered from DTSTART (counting the periods
    /// before arithmetically where possible); nil when COUNT is used up before it.
    func stream(fromWall wall: Int64, budget: inout Budget) throws(RecurrenceError) -> Stream? {
        guard wall > expansion.start else { return streamFromStart() }
        let period = firstPeriod(reaching: wall)
        let before = try expansion.count(before: period, limit: count ?? .max, budget: &budget)
        if let count, before >= count { return nil }
        return Stream(period: period, firstIndex: before + 1, minimumWall: wall, indexOffset: 0)
    }

    /// A stream from wall time `wall` numbered relative to `anchor`, a known occurrence at or after it.
    func stream(fromWall wall: Int64, anchor: Item) -> Stream {
        guard wall > expansion.start else { return streamFromStart() }
        return Stream(
            period: firstPeriod(reaching: wall),
            firstIndex: 0,
            minimumWall: wall,
            indexOffset: nil,
            anchor: anchor
        )
    }

    /// The next candidate in wall-clock order, or nil at the end (COUNT, year 9999, or a rule whose
    /// calendar cycle has no more candidates).
    private func nextWall(
        _ s: inout Stream,
        budget: inout Budget
    ) throws(RecurrenceError) -> (wall: Int64, index: Int64)? {
        while true {
            if s.position < s.buffer.count {
                let wall = s.buffer[s.position]
                s.position += 1
                if wall < expansion.start { continue }
                let index = s.nextIndex
                s.nextIndex += 1
                if let count, let offset = s.indexOffset, index + offset > count {
                    s.wallDone = true
                    return nil
                }
                if wall < s.minimumWall { continue }
                return (wall, index)
            }
            if s.wallDone || (s.period >= 1 && expansion.laterPeriodsEmpty) { return nil }
            if !expansion.laterPeriodsEmpty { s.period = try expansion.skipEmpty(from: s.period, budget: &budget) }
            if let limit = expansion.emptyRunLimit, s.period - s.lastNonEmptyPeriod > limit {
                s.wallDone = true
                return nil
            }
            s.buffer.removeAll(keepingCapacity: true)
            s.position = 0
            guard try expansion.candidates(period: s.period, into: &s.buffer, budget: &budget) else {
                s.wallDone = true
                return nil
            }
            if !s.buffer.isEmpty { s.lastNonEmptyPeriod = s.period }
            s.period += 1
        }
    }

    /// The next occurrence in time order, de-duplicated, before UNTIL; its index is relative while the
    /// stream's anchor has not been met. Nil at the end of the series.
    func next(_ s: inout Stream, budget: inout Budget) throws(RecurrenceError) -> Item? {
        while true {
            if s.pendingStart < s.pending.count {
                let first = s.pending[s.pendingStart]
                if first.instant <= s.frontier || s.wallDone {
                    s.pendingStart += 1
                    if s.pendingStart == s.pending.count {
                        s.pending.removeAll(keepingCapacity: true)
                        s.pendingStart = 0
                    }
                    if let until, first.instant > until {
                        s.pending.removeAll()
                        s.pendingStart = 0
                        s.wallDone = true
                        return nil
                    }
                    return first
                }
            }
            if s.wallDone { return nil }
            guard let (wall, index) = try nextWall(&s, budget: &budget) else {
                s.wallDone = true
                continue
            }
            try budget.spend(zone.conversionCost(forWall: wall))
            let instant = zone.instantSeconds(forWall: wall)
            let moved = zone.wallSeconds(atSeconds: instant) != wall
            if s.indexOffset == nil, let anchor = s.anchor, anchor.instant == instant {
                s.indexOffset = anchor.index - index
            }
            var low = s.pendingStart
            var high = s.pending.count
            while low < high {
                let mid = (low + high) >> 1
                if s.pending[mid].instant < instant { low = mid + 1 } else { high = mid }
            }
            if low == s.pending.count || s.pending[low].instant != instant {
                s.pending.insert(Item(instant: instant, index: index), at: low)
            }
            if !moved {
                s.frontier = max(s.frontier, instant)
                // Every later candidate lands after this one, so past UNTIL nothing more can qualify.
                if let until, instant > until { s.wallDone = true }
            }
        }
    }
}
