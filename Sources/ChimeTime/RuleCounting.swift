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
    /// the first non-empty period. A rule that never fires is walked once, through one calendar cycle.
    func provesLaterPeriodsEmpty() -> Bool {
        if frequency <= .daily {
            let perPeriod = frequency == .daily ? timesOfDay.count : offsets.count
            if setPositions.isEmpty ? perPeriod == 0 : !setPositions.contains(where: { abs($0) <= perPeriod }) {
                return true
            }
        }
        if frequency < .daily && !subDailyTimesCanAlign() { return true }
        if let cycle { return cycle.candidates == 0 }
        var budget = Budget(Budget.perProof)
        guard let limit = emptyRunLimit else {
            // Sub-daily with calendar filters: empty when no day of a 400-year cycle passes them.
            var day = startDay
            while day < startDay + 146_097 && day <= lastDay {
                let next = nextDayToTry(after: day)
                if next.matches { return false }
                day = next.day
            }
            return true
        }
        var p: Int64 = 1
        var buffer: [Int64] = []
        do {
            while p <= limit {
                p = try skipEmpty(from: p, budget: &budget)
                guard p <= limit else { break }
                try budget.spend(frequency == .yearly ? 12 : 1)
                buffer.removeAll(keepingCapacity: true)
                guard candidates(period: p, into: &buffer) else { return true }
                if !buffer.isEmpty { return false }
                p += 1
            }
        } catch {
            return false
        }
        return true
    }

    /// The number of candidates at or after DTSTART in the periods before `period`: the 1-based index of the
    /// first candidate of `period` is this plus one. Whole cycles are counted arithmetically when the rule
    /// has one (``cycle``); otherwise periods are visited, skipping empty runs, within the budget.
    func count(before period: Int64, budget: inout Budget) throws(RecurrenceError) -> Int64 {
        guard period > 0 else { return 0 }
        var buffer: [Int64] = []
        _ = candidates(period: 0, into: &buffer)
        var total = Int64(buffer.lazy.filter { $0 >= start }.count)
        if laterPeriodsEmpty { return total }
        if let shapeCounts { return try total + countByShape(from: 1, to: period, cache: shapeCounts, budget: &budget) }
        var p: Int64 = 1
        if let cycle {
            let whole = (period - 1) / cycle.periods
            total += whole * cycle.candidates
            p += whole * cycle.periods
        }
        while p < period {
            p = try skipEmpty(from: p, budget: &budget)
            guard p < period else { break }
            try budget.spend(frequency == .yearly ? 12 : 1)
            buffer.removeAll(keepingCapacity: true)
            guard candidates(period: p, into: &buffer) else { break }
            total += Int64(buffer.count)
            p += 1
        }
        return total
    }

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

    /// The candidates in periods `from..<to` of a YEARLY or MONTHLY rule, expanding each calendar shape once
    /// (at most 56 or 168 of them, ever, per rule) and looking the others up.
    func countByShape(
        from: Int64,
        to: Int64,
        cache: ShapeCountCache,
        budget: inout Budget
    ) throws(RecurrenceError) -> Int64 {
        try budget.spend(Int((to - from) / 64) + 1)
        return cache.counts.withLock { counts in
            var total: Int64 = 0
            var buffer: [Int64] = []
            var p = from
            while p < to, let shape = shape(ofPeriod: p) {
                if counts[shape] < 0 {
                    buffer.removeAll(keepingCapacity: true)
                    _ = candidates(period: p, into: &buffer)
                    counts[shape] = Int32(buffer.count)
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
    func periodicCycle() -> (periods: Int64, candidates: Int64)? {
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
        var buffer: [Int64] = []
        for p in 1...periods {
            buffer.removeAll(keepingCapacity: true)
            _ = candidates(period: p, into: &buffer)
            total += Int64(buffer.count)
        }
        return (periods, total)
    }
}

/// Candidate counts of YEARLY or MONTHLY periods by calendar shape (see `RuleExpansion.shape(ofPeriod:)`),
/// -1 until computed. Shared by the copies of a recurrence and filled lazily, so only the first count over
/// many years pays for expansions; the counts depend on the rule alone, so sharing them is safe.
final class ShapeCountCache: Sendable {
    let counts: Mutex<[Int32]>

    init(shapes: Int) {
        counts = Mutex([Int32](repeating: -1, count: shapes))
    }
}
