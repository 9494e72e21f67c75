/// One occurrence of a series: its 1-based position from the series' start and its instant.
public struct Occurrence: Hashable, Sendable {
    /// 1-based position in the series from its start, counting exdated occurrences (and, for rules,
    /// candidates dropped as duplicates of an earlier one on the same instant).
    public var index: Int
    public var instant: Instant

    public init(index: Int, instant: Instant) {
        self.index = index
        self.instant = instant
    }
}

/// When a notification fires: a start, a zone, and how it repeats (PROTOCOL.md section 2, "When").
///
/// All searches are bounded: ``first(atOrAfter:)``, ``next(after:)`` and ``smallestSpacing()`` each do at
/// most a fixed amount of work (see `Budget`) and never look past 9999-12-31. A series that provably
/// has no more occurrences gives nil; one whose next occurrence could not be found within the budget
/// throws ``RecurrenceError/Code/searchLimit``.
///
/// Semantic choices, where PROTOCOL.md and RFC 5545 leave room:
/// - A rule's DTSTART is an occurrence only when it matches the rule (python-dateutil's reading);
///   COUNT counts from DTSTART either way, over the candidates at or after it.
/// - A rule's occurrences are numbered in wall-clock order (the RFC's recurrence set) and COUNT limits that
///   numbering. Two candidates on one instant (the spring-forward rule) are delivered once, as the first of
///   them; the other keeps its number and its COUNT slot, like an exdate. Delivery is in time order.
/// - Exdates skip the occurrence whose instant equals theirs; it keeps its index and its COUNT slot.
/// - `.once` and the elapsed units keep the start's milliseconds; rules work in whole seconds.
public struct Recurrence: Sendable {
    /// How the series repeats.
    public enum Pattern: Hashable, Sendable {
        case once
        case interval(RepeatUnit)
        case rule(RecurrenceRule)
    }

    public let start: DateTimeValue
    public let zone: Zone
    public let pattern: Pattern

    private enum Series: Sendable {
        case once
        case interval(IntervalSeries)
        case rule(RuleSeries)
    }

    private let series: Series
    private let startMilliseconds: Int64
    private let count: Int64?
    private let untilMilliseconds: Int64?
    private let exdates: Set<Int64>

    /// - Parameters:
    ///   - start: the first occurrence, or a rule's DTSTART. An absolute instant is read as the wall-clock
    ///     time it shows in `zone`.
    ///   - zone: where wall-clock times are read and where day-or-longer units keep their wall-clock time.
    ///   - pattern: once, an Apple `repeatInterval`, or an RRULE.
    ///   - count: with `.interval`, at most this many occurrences (exdated ones included); ignored by `.once`.
    ///   - until: with `.interval`, no occurrence after it; ignored by `.once`.
    ///   - exdates: occurrences to skip, matched by instant (wall-clock ones read in `zone`).
    /// - Throws: ``RecurrenceError/Code/invalidCombination`` for a rule given a separate `count` or `until`
    ///   (they belong in the RRULE), a `count` below 1, or a start outside the years 1...9999.
    public init(
        start: DateTimeValue,
        zone: Zone,
        pattern: Pattern,
        count: Int? = nil,
        until: DateTimeValue? = nil,
        exdates: [DateTimeValue] = []
    ) throws(RecurrenceError) {
        self.start = start
        self.zone = zone
        self.pattern = pattern
        let startInstant = start.resolved(in: zone)
        guard startInstant >= Instant.distantPast, startInstant <= Instant.distantFuture else {
            throw RecurrenceError(.invalidCombination, "start: outside the years 0001...9999")
        }
        startMilliseconds = startInstant.milliseconds
        self.exdates = Set(exdates.map { $0.resolved(in: zone).milliseconds })
        switch pattern {
        case .once:
            series = .once
            self.count = nil
            untilMilliseconds = nil
        case .interval(let unit):
            if let count, count < 1 { throw RecurrenceError(.invalidCombination, "count: must be at least 1") }
            series = .interval(IntervalSeries(unit: unit, zone: zone, start: start))
            self.count = count.map(Int64.init)
            untilMilliseconds = until?.resolved(in: zone).milliseconds
        case .rule(let rule):
            if count != nil {
                throw RecurrenceError(.invalidCombination, "count: not allowed with rrule (use COUNT in the rule)")
            }
            if until != nil {
                throw RecurrenceError(.invalidCombination, "until: not allowed with rrule (use UNTIL in the rule)")
            }
            let local: LocalDateTime
            switch start {
            case .local(let wall): local = wall
            case .instant(let instant): local = zone.localDateTime(at: instant)
            }
            guard local.isValid else {
                throw RecurrenceError(.invalidCombination, "start: outside the years 0001...9999")
            }
            let untilSeconds = rule.until.map { $0.resolved(in: zone).seconds }
            series = .rule(
                RuleSeries(
                    expansion: RuleExpansion(rule: rule, start: local),
                    zone: zone,
                    count: rule.count.map(Int64.init),
                    until: untilSeconds
                )
            )
            self.count = nil
            untilMilliseconds = untilSeconds.map { $0 * 1000 }
        }
    }

    /// The first occurrence whose instant is at or after `instant`; nil when the series has no more.
    ///
    /// A rule is not walked from DTSTART: the search starts in the period holding `instant` and the periods
    /// before it are counted (arithmetically when the rule repeats with a short cycle) to number it.
    /// - Throws: ``RecurrenceError/Code/searchLimit`` when the bounded search gave up.
    public func first(atOrAfter instant: Instant) throws(RecurrenceError) -> Occurrence? {
        var budget = Budget(Budget.perCall)
        return try first(atOrAfter: instant.milliseconds, budget: &budget)
    }

    /// ``first(atOrAfter:)`` with a given budget of steps, for tests of the limit.
    func first(atOrAfter instant: Instant, budgetSteps: Int) throws(RecurrenceError) -> Occurrence? {
        var budget = Budget(budgetSteps)
        return try first(atOrAfter: instant.milliseconds, budget: &budget)
    }

    /// The occurrence after `occurrence`, which this recurrence returned; nil when there is none.
    /// - Throws: ``RecurrenceError/Code/searchLimit`` when the bounded search gave up.
    public func next(after occurrence: Occurrence) throws(RecurrenceError) -> Occurrence? {
        var budget = Budget(Budget.perCall)
        let target = occurrence.instant.milliseconds + 1
        switch series {
        case .once:
            return nil
        case .interval(let s):
            let k = Int64(occurrence.index)
            guard k >= 1, s.instant(k - 1) == occurrence.instant.milliseconds else {
                return try first(atOrAfter: target, budget: &budget)
            }
            return try intervalOccurrence(s, from: k, after: target, budget: &budget)
        case .rule(let s):
            let ms = occurrence.instant.milliseconds
            // An index this large was not produced by this recurrence; counting from DTSTART avoids overflow.
            guard floorMod(ms, 1000) == 0, occurrence.index >= 1, occurrence.index < Int(Int32.max) * 1024 else {
                return try first(atOrAfter: target, budget: &budget)
            }
            let seconds = ms / 1000
            let wall = min(zone.wallSeconds(atSeconds: seconds), zone.wallSeconds(atSeconds: seconds + 1))
            let from = wall - zone.largestGap(from: seconds - 2 * 86_400, to: seconds + 1)
            var stream = s.stream(fromWall: from, anchor: .init(instant: seconds, index: Int64(occurrence.index)))
            if let found = try ruleOccurrence(s, &stream, atOrAfter: target, budget: &budget) {
                return found
            }
            if stream.indexOffset == nil { return try first(atOrAfter: target, budget: &budget) }
            return nil
        }
    }

    /// The smallest spacing in seconds between consecutive occurrences over at most the first 1000 (exdated
    /// ones included, so an exdate cannot hide how often a rule fires); nil for `.once` or a single
    /// occurrence. Used to enforce `--min-repeat-seconds`.
    /// - Throws: ``RecurrenceError/Code/searchLimit`` when the bounded search gave up.
    public func smallestSpacing() throws(RecurrenceError) -> Int64? {
        var budget = Budget(Budget.perSpacing)
        var instants: [Int64] = []
        switch series {
        case .once:
            return nil
        case .interval(let s):
            var k: Int64 = 0
            while instants.count < 1000 {
                if let count, k >= count { break }
                guard let value = s.instant(k) else { break }
                if let untilMilliseconds, value > untilMilliseconds { break }
                if !s.isDuplicate(k, instant: value) { instants.append(value) }
                try budget.spend()
                k += 1
            }
        case .rule(let s):
            var stream = s.streamFromStart()
            while instants.count < 1000, let item = try s.next(&stream, budget: &budget) {
                instants.append(item.instant * 1000)
            }
        }
        guard instants.count >= 2 else { return nil }
        var smallest = Int64.max
        for i in 1..<instants.count { smallest = min(smallest, instants[i] - instants[i - 1]) }
        return smallest / 1000
    }

    // MARK: -

    private func first(atOrAfter target: Int64, budget: inout Budget) throws(RecurrenceError) -> Occurrence? {
        guard target <= Instant.distantFuture.milliseconds else { return nil }
        switch series {
        case .once:
            guard startMilliseconds >= target, !exdates.contains(startMilliseconds) else { return nil }
            return Occurrence(index: 1, instant: Instant(milliseconds: startMilliseconds))
        case .interval(let s):
            guard let k = s.firstIndex(atOrAfter: target) else { return nil }
            return try intervalOccurrence(s, from: k, after: target, budget: &budget)
        case .rule(let s):
            let seconds = ceilDiv(max(target, Instant.distantPast.milliseconds), 1000)
            let from =
                zone.wallSeconds(atSeconds: seconds) - zone.largestGap(from: seconds - 2 * 86_400, to: seconds)
            guard var stream = try s.stream(fromWall: from, budget: &budget) else { return nil }
            return try ruleOccurrence(s, &stream, atOrAfter: target, budget: &budget)
        }
    }

    /// The first kept occurrence `k >= from` of an interval series at or after `target` (ms).
    private func intervalOccurrence(
        _ s: IntervalSeries,
        from: Int64,
        after target: Int64,
        budget: inout Budget
    ) throws(RecurrenceError) -> Occurrence? {
        var k = from
        while true {
            if let count, k >= count { return nil }
            guard let value = s.instant(k) else { return nil }
            if let untilMilliseconds, value > untilMilliseconds { return nil }
            if value >= target && !exdates.contains(value) && !s.isDuplicate(k, instant: value) {
                return Occurrence(index: Int(k + 1), instant: Instant(milliseconds: value))
            }
            try budget.spend()
            k += 1
        }
    }

    /// The first occurrence of `stream` at or after `target` (ms) that is not exdated. Nil at the end of the
    /// series, or when an anchored stream would produce one before it found its anchor (the caller then
    /// falls back to counting from DTSTART).
    private func ruleOccurrence(
        _ s: RuleSeries,
        _ stream: inout RuleSeries.Stream,
        atOrAfter target: Int64,
        budget: inout Budget
    ) throws(RecurrenceError) -> Occurrence? {
        while let item = try s.next(&stream, budget: &budget) {
            let ms = item.instant * 1000
            guard ms >= target else { continue }
            guard let offset = stream.indexOffset else { return nil }
            let index = item.index + offset
            if let count = s.count, index > count { continue }
            if exdates.contains(ms) { continue }
            guard index <= Int64(Int.max) else { return nil }
            return Occurrence(index: Int(index), instant: Instant(milliseconds: ms))
        }
        return nil
    }
}
