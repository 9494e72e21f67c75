import Synchronization

/// Counting candidates without visiting every period, and proving that a rule never fires again.
extension RuleExpansion {
    /// Whether some allowed time of day τ (passing BYHOUR/BYMINUTE/BYSECOND) can start a sub-daily period:
    /// a period starts at `D × 86400 + τ` on day `D` when that is `base` modulo the period length, which has
    /// a solution `D` exactly when `gcd(86400, step)` divides `base - τ`. When the rule's only day filter is
    /// the weekday, the solutions `D` (an arithmetic progression) must also reach an allowed weekday.
    func subDailyTimesCanAlign() -> Bool {
        guard hourMask != 0 || minuteMask != 0 || secondMask != 0 else { return true }
        let unit: Int64 = frequency == .hourly ? 3600 : (frequency == .minutely ? 60 : 1)
        let g = gcd(86_400, step)
        let modulus = step / g
        let checkWeekday = weekdayMask != 0 && !hasCalendarFilter
        var tau: Int64 = 0
        while tau < 86_400 {
            let second = Int(tau)
            let (h, m, s) = (second / 3600, second / 60 % 60, second % 60)
            if (hourMask == 0 || hourMask & (UInt32(1) << h) != 0)
                && (minuteMask == 0 || minuteMask & (UInt64(1) << m) != 0)
                && (secondMask == 0 || secondMask & (UInt64(1) << s) != 0) && floorMod(base - tau, g) == 0
            {
                guard checkWeekday else { return true }
                // D ≡ D0 (mod modulus): try seven consecutive solutions, which cover every reachable weekday.
                let d0 = solveDay(tau: tau, g: g, modulus: modulus)
                for j in Int64(0)..<7 {
                    let (weekday, overflow) = d0.addingReportingOverflow(
                        j.multipliedReportingOverflow(by: modulus).partialValue
                    )
                    if !overflow && weekdayMask & (UInt8(1) << isoWeekday(daysSinceEpoch: weekday)) != 0 { return true }
                }
            }
            tau += unit
        }
        return false
    }

    /// A day `D` with `D × 86400 + tau ≡ base (mod step)`, given that `g = gcd(86400, step)` divides
    /// `base - tau`; `modulus` is `step / g`.
    func solveDay(tau: Int64, g: Int64, modulus: Int64) -> Int64 {
        guard modulus > 1 else { return 0 }
        let a = floorMod(86_400 / g, modulus)
        let b = floorMod((base - tau) / g, modulus)
        // a is invertible modulo `modulus`; extended Euclid, then a full-width product to avoid overflow.
        var (r0, r1) = (a, modulus)
        var (s0, s1): (Int64, Int64) = (1, 0)
        while r1 != 0 {
            let q = r0 / r1
            (r0, r1) = (r1, r0 - q * r1)
            (s0, s1) = (s1, s0 - q * s1)
        }
        let inverse = floorMod(s0, modulus)
        let product = inverse.multipliedFullWidth(by: b)
        return modulus.dividingFullWidth(product).remainder
    }

    /// Whether no period after the first can have a candidate. Cheap for a rule that fires: it stops at
    /// the first non-empty period. A rule that never fires is walked once, through one calendar cycle,
    /// counting periods rather than expanding them; false (not proven) when `budget` runs out first.
    func provesLaterPeriodsEmpty(budget: inout Budget) -> Bool {
        if frequency <= .daily {
            let perPeriod = frequency == .daily ? timesOfDay.count : offsets.count
            if setPositions.isEmpty ? perPeriod == 0 : !setPositions.contains(where: { abs($0) <= perPeriod }) {
                return true
            }
        }
        if frequency < .daily && !subDailyTimesCanAlign() { return true }
        if let cycle { return cycle.candidates == 0 }
        do {
            guard let limit = emptyRunLimit else {
                // Sub-daily with calendar filters: empty when no day of a 400-year cycle passes them.
                var day = startDay
                while day < startDay + 146_097 && day <= lastDay {
                    try budget.spend(Budget.Cost.day)
                    let next = nextDayToTry(after: day)
                    if next.matches { return false }
                    day = next.day
                }
                return true
            }
            var p: Int64 = 1
            while p <= limit {
                p = try skipEmpty(from: p, budget: &budget)
                guard p <= limit else { break }
                guard let count = try candidateCount(period: p, budget: &budget) else { return true }
                if count > 0 { return false }
                p += 1
            }
        } catch {
            return false
        }
        return true
    }

    /// The number of candidates at or after DTSTART in the periods before `period`: the 1-based index of the
    /// first candidate of `period` is this plus one. Whole cycles are counted arithmetically when the rule
    /// has one (``cycle``); otherwise periods are counted (not expanded), skipping empty runs, within the
    /// budget. Only period 0, where DTSTART cuts, is expanded. A walk stops once it has counted `limit`
    /// (a rule's COUNT: past it the exact number no longer matters), so the result is then at least `limit`.
    func count(
        before period: Int64,
        limit: Int64 = .max,
        budget: inout Budget
    ) throws(RecurrenceError) -> Int64 {
        guard period > 0 else { return 0 }
        var buffer: [Int64] = []
        _ = try candidates(period: 0, into: &buffer, budget: &budget)
        var total = Int64(buffer.lazy.filter { $0 >= start }.count)
        if laterPeriodsEmpty { return total }
        if let shapeCounts { return try total + countByShape(from: 1, to: period, cache: shapeCounts, budget: &budget) }
        var p: Int64 = 1
        if let cycle {
            let whole = (period - 1) / cycle.periods
            total += whole * cycle.candidates
            p += whole * cycle.periods
        } else if let dayCounts {
            return try total + countByDays(from: 1, to: period, cache: dayCounts, budget: &budget)
        }
        return try total + countByWalking(from: p, to: period, limit: limit - total, budget: &budget)
    }

    /// The candidates in periods `from..<to`, visiting each period that can have some; at least `limit`
    /// when it stops early, having counted that many.
    func countByWalking(
        from: Int64,
        to: Int64,
        limit: Int64 = .max,
        budget: inout Budget
    ) throws(RecurrenceError) -> Int64 {
        var total: Int64 = 0
        var p = from
        while p < to && total < limit {
            p = try skipEmpty(from: p, budget: &budget)
            guard p < to else { break }
            guard let count = try candidateCount(period: p, budget: &budget) else { break }
            total += count
            p += 1
        }
        return total
    }

    /// The first sub-daily period that starts on `day` or later.
    @inline(__always)
    func firstPeriod(onDay day: Int64) -> Int64 { ceilDiv(day * 86_400 - base, step) }

    /// The candidates in the sub-daily periods `from..<to`, counted day by day rather than period by period
    /// (a rule created years ago, every minute in October, has millions of periods before today but
    /// thousands of days): the first and last days are counted period by period with the time test alone,
    /// the days between, which either fail the day filters or hold a whole day's periods, by ``dayCounts``.
    func countByDays(
        from: Int64,
        to: Int64,
        cache: CountCache,
        budget: inout Budget
    ) throws(RecurrenceError) -> Int64 {
        guard from < to else { return 0 }
        let firstDay = floorDiv(base + from * step, 86_400)
        let endDay = floorDiv(base + to * step, 86_400)
        if firstDay == endDay { return try countWithinDay(firstDay, from: from, to: to, budget: &budget) }
        var total = try countWithinDay(firstDay, from: from, to: firstPeriod(onDay: firstDay + 1), budget: &budget)
        var day = firstDay + 1
        if !hasCalendarFilter {
            // Only the weekday filters days: the days repeat with the week and the phase, so whole blocks
            // of both count the same. Count one, multiply, and walk the rest.
            let block = 7 * dayPhases / gcd(7, dayPhases)
            let blocks = (endDay - day) / block
            if blocks >= 2 {
                let perBlock = try countWholeDays(from: day, to: day + block, cache: cache, budget: &budget)
                total += perBlock * blocks
                day += blocks * block
            }
        }
        return try total + countWholeDays(from: day, to: endDay, cache: cache, budget: &budget)
            + countWithinDay(endDay, from: firstPeriod(onDay: endDay), to: to, budget: &budget)
    }

    /// The candidates in the sub-daily periods of the days `from..<to`, none of them the last day.
    func countWholeDays(
        from: Int64,
        to: Int64,
        cache: CountCache,
        budget: inout Budget
    ) throws(RecurrenceError) -> Int64 {
        var total: Int64 = 0
        var day = from
        while day < to {
            try budget.spend(Budget.Cost.day)
            let next = nextDayToTry(after: day)
            guard next.matches else {
                day = next.day
                continue
            }
            total += try wholeDayCount(day, cache: cache, budget: &budget)
            day += 1
        }
        return total
    }

    /// The candidates in the sub-daily periods `from..<to`, all of which start on `day`.
    func countWithinDay(_ day: Int64, from: Int64, to: Int64, budget: inout Budget) throws(RecurrenceError) -> Int64 {
        guard from < to else { return 0 }
        // The last day may be cut short by 9999-12-31T23:59:59: count it the long way.
        guard day < lastDay else { return try countByWalking(from: from, to: to, budget: &budget) }
        try budget.spend(Budget.Cost.day)
        guard dayMatches(day) else { return 0 }
        return try Int64(allowedPeriods(from: from, to: to, budget: &budget) * keptPerPeriod)
    }

    /// The candidates in a whole day that passes the day filters, from the cache by the day's phase.
    func wholeDayCount(_ day: Int64, cache: CountCache, budget: inout Budget) throws(RecurrenceError) -> Int64 {
        let phase = Int(floorMod(day - startDay, dayPhases))
        if let known = cache.counts.withLock({ $0[phase] >= 0 ? $0[phase] : nil }) { return Int64(known) }
        let count = try allowedPeriods(from: firstPeriod(onDay: day), to: firstPeriod(onDay: day + 1), budget: &budget)
        let total = Int32(count * keptPerPeriod)
        cache.counts.withLock { $0[phase] = total }
        return Int64(total)
    }

    /// How many of the sub-daily periods `from..<to` (on one day) start at a time BYHOUR, BYMINUTE and
    /// BYSECOND allow, each test paid for as one candidate.
    func allowedPeriods(from: Int64, to: Int64, budget: inout Budget) throws(RecurrenceError) -> Int {
        try budget.spend(Int(to - from))
        var allowed = 0
        for p in from..<to {
            let t = base + p * step
            if timeMatches(secondOfDay: Int(t - floorDiv(t, 86_400) * 86_400)) { allowed += 1 }
        }
        return allowed
    }

    /// The candidates a sub-daily period that passes the day and time filters has (away from 9999-12-31).
    var keptPerPeriod: Int { setPositions.isEmpty ? offsets.count : selectedCount(of: offsets.count) }

    /// The calendar shape of a YEARLY or MONTHLY period, which decides its candidates up to a shift of days:
    /// for a year, the weekday of January 1 and whether it and its neighbours are leap years (BYWEEKNO's
    /// first and last weeks depend on the neighbours); for a month, the month, the leap year and the weekday
    /// of the 1st. Nil past year 9999.
    func shape(ofPeriod p: Int64) -> Int? {
        if frequency == .yearly {
            let year = startYear + p * interval
            guard year <= 9999 else { return nil }
            let y = Int(year)
            let weekday = isoWeekday(daysSinceEpoch: daysFromCivil(year: y, month: 1, day: 1)) - 1
            let leaps = (isLeapYear(y - 1) ? 4 : 0) + (isLeapYear(y) ? 2 : 0) + (isLeapYear(y + 1) ? 1 : 0)
            return leaps * 7 + weekday
        }
        let index = startMonthIndex + p * interval
        guard index / 12 <= 9999 else { return nil }
        let (y, m) = (Int(index / 12), Int(index % 12) + 1)
        let weekday = isoWeekday(daysSinceEpoch: daysFromCivil(year: y, month: m, day: 1)) - 1
        return ((m - 1) * 2 + (isLeapYear(y) ? 1 : 0)) * 7 + weekday
    }

    /// The candidates in periods `from..<to` of a YEARLY or MONTHLY rule, counting each calendar shape once
    /// (at most 56 or 168 of them, ever, per rule) and looking the others up (a lookup costs as much as
    /// two candidate date-times).
    func countByShape(
        from: Int64,
        to: Int64,
        cache: CountCache,
        budget: inout Budget
    ) throws(RecurrenceError) -> Int64 {
        try budget.spend(Int(to - from) * 2 + 1)
        return try cache.counts.withLock { (counts) throws(RecurrenceError) -> Int64 in
            var total: Int64 = 0
            var p = from
            while p < to, let shape = shape(ofPeriod: p) {
                if counts[shape] < 0 {
                    counts[shape] = Int32(try candidateCount(period: p, budget: &budget) ?? 0)
                }
                total += Int64(counts[shape])
                p += 1
            }
            return total
        }
    }

    /// The cycle of the per-period candidate count, when it is short: a weekly rule without BYMONTH has the
    /// same candidates every week; a daily or sub-daily one whose only day filter is the weekday repeats
    /// every 7 days (every day without one) and so every `7 days / gcd(7 days, period length)` periods.
    /// Nil when there is none, or when counting one cycle would cost more than `budget` has.
    func periodicCycle(budget: inout Budget) -> (periods: Int64, candidates: Int64)? {
        let periods: Int64
        switch frequency {
        case .yearly, .monthly:
            return nil
        case .weekly:
            guard monthMask == 0 else { return nil }
            periods = 1
        case .daily, .hourly, .minutely, .secondly:
            guard !hasCalendarFilter else { return nil }
            let stepSeconds = frequency == .daily ? interval * 86_400 : step
            let hasTimeLimit = hourMask != 0 || minuteMask != 0 || secondMask != 0
            let repeatSeconds: Int64 = weekdayMask != 0 ? 7 * 86_400 : (hasTimeLimit ? 86_400 : stepSeconds)
            periods = repeatSeconds / gcd(stepSeconds, repeatSeconds)
        }
        guard periods <= 20_160 else { return nil }
        var total: Int64 = 0
        do {
            for p in 1...periods { total += try candidateCount(period: p, budget: &budget) ?? 0 }
        } catch {
            return nil
        }
        return (periods, total)
    }
}

/// Candidate counts by calendar shape (YEARLY and MONTHLY periods, see `RuleExpansion.shape(ofPeriod:)`) or
/// by day phase (sub-daily days, see `RuleExpansion.dayCounts`), -1 until computed. Shared by the copies of a
/// recurrence and filled lazily, so only the first count over many periods pays for them; the counts depend
/// on the rule alone, so sharing them is safe.
final class CountCache: Sendable {
    let counts: Mutex<[Int32]>

    init(size: Int) {
        counts = Mutex([Int32](repeating: -1, count: size))
    }
}
