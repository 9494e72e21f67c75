import Synchronization

/// The wall-clock side of an RRULE: which civil date-times it selects, period by period, from DTSTART.
///
/// Times are "wall seconds": a civil date-time read as if it were UTC (``LocalDateTime/secondsSinceEpoch``),
/// so that calendar arithmetic is integer arithmetic; the zone is applied later, by ``RuleSeries``.
///
/// Each `FREQ` has fixed periods counted from DTSTART's: period `p` is the year `startYear + p × INTERVAL`,
/// the month, the week (starting on `WKST`) or the day `p × INTERVAL` after DTSTART's, or for the sub-daily
/// frequencies the hour, minute or second `p × INTERVAL` units after DTSTART floored to the unit. Within a
/// period the BY parts are applied as RFC 5545's table on page 44 says: the parts finer than `FREQ` expand
/// (every listed hour of the day, ...), the coarser ones limit. In practice every day-level part is a filter
/// on the days of the period (their intersection), which is also python-dateutil's reading; `BYSETPOS` then
/// picks from the period's sorted candidates. Missing parts default from DTSTART the way dateutil does
/// (a `MONTHLY` rule without day parts fires on DTSTART's day of the month, at DTSTART's time, ...).
struct RuleExpansion: Sendable {
    typealias Frequency = RecurrenceRule.Frequency

    let frequency: Frequency
    let interval: Int64
    /// DTSTART in wall seconds, its day, year and month number (`year × 12 + month - 1`).
    let start: Int64
    let startDay: Int64
    let startYear: Int64
    let startMonthIndex: Int64
    /// The first day of DTSTART's week (by `WKST`), for `WEEKLY`.
    let weekStart0: Int64
    /// Sub-daily: DTSTART floored to the unit, and the period length in seconds.
    let base: Int64
    let step: Int64

    // Day filters. A zero mask or an empty list means "no filter".
    let monthMask: UInt16
    let weekdayMask: UInt8
    let nthWeekdays: [RecurrenceRule.WeekdayNum]
    /// `BYDAY` ordinals count within the year (YEARLY without BYMONTH) rather than the month.
    let nthInYear: Bool
    let monthDayPositive: UInt32
    let monthDayNegative: UInt32
    let yearDays: [Int]
    let weekNumbers: [Int]
    let weekStart: Int
    /// Whether any day filter is calendar-dependent (not just a weekday), which defeats the periodic count.
    let hasCalendarFilter: Bool

    // Time of day.
    /// Sub-daily limits (0: no limit): bit n set when hour / minute / second n is allowed.
    let hourMask: UInt32
    let minuteMask: UInt64
    let secondMask: UInt64
    /// DAILY and coarser: the seconds of the day every selected day fires at, ascending.
    let timesOfDay: [Int64]
    /// Sub-daily: the offsets from a period's start that it expands to, ascending, before BYSETPOS.
    let offsets: [Int64]
    let setPositions: [Int]

    /// For rules whose periods after the first all repeat with a short cycle: its length and the number of
    /// candidates in one cycle. Lets ``count(before:budget:)`` skip whole cycles.
    private(set) var cycle: (periods: Int64, candidates: Int64)?
    /// After this many consecutive periods without a candidate, none will ever come (the 400-year Gregorian
    /// cycle has been walked). Nil for the sub-daily frequencies, bounded by year 9999 and the budget.
    let emptyRunLimit: Int64?
    /// Proven at construction: no period after the first has a candidate, ever (the rule's BY parts never
    /// meet its periods, like `FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30`). Searches then stop after period 0
    /// instead of walking to year 9999 on every call.
    private(set) var laterPeriodsEmpty = false
    /// YEARLY and MONTHLY: candidate counts per calendar shape of a period, filled as periods are counted.
    let shapeCounts: ShapeCountCache?

    init(rule: RecurrenceRule, start local: LocalDateTime) {
        frequency = rule.frequency
        interval = Int64(rule.interval)
        start = local.secondsSinceEpoch
        startDay = floorDiv(start, 86_400)
        startYear = Int64(local.year)
        startMonthIndex = Int64(local.year) * 12 + Int64(local.month - 1)
        weekStart = rule.weekStart
        weekStart0 = startDay - Int64((local.weekday - rule.weekStart + 7) % 7)

        // Defaults from DTSTART (RFC 5545 leaves them implied; these are dateutil's).
        var byMonth = rule.byMonth
        var byMonthDay = rule.byMonthDay
        var plainDays = rule.byDay.filter { $0.ordinal == 0 }.map(\.weekday)
        let noDayParts =
            rule.byDay.isEmpty && rule.byMonthDay.isEmpty && rule.byYearDay.isEmpty && rule.byWeekNo.isEmpty
        if noDayParts {
            switch rule.frequency {
            case .yearly:
                byMonthDay = [local.day]
                if byMonth.isEmpty { byMonth = [local.month] }
            case .monthly: byMonthDay = [local.day]
            case .weekly: plainDays = [local.weekday]
            default: break
            }
        }
        monthMask = byMonth.reduce(0) { $0 | UInt16(1) << $1 }
        weekdayMask = plainDays.reduce(0) { $0 | UInt8(1) << $1 }
        nthWeekdays = rule.byDay.filter { $0.ordinal != 0 }
        nthInYear = rule.frequency == .yearly && byMonth.isEmpty
        monthDayPositive = byMonthDay.filter { $0 > 0 }.reduce(0) { $0 | UInt32(1) << $1 }
        monthDayNegative = byMonthDay.filter { $0 < 0 }.reduce(0) { $0 | UInt32(1) << -$1 }
        yearDays = rule.byYearDay
        weekNumbers = rule.byWeekNo
        hasCalendarFilter =
            monthMask != 0 || !nthWeekdays.isEmpty || !byMonthDay.isEmpty || !yearDays.isEmpty
            || !weekNumbers.isEmpty

        // Times: finer parts than FREQ expand (defaulting to DTSTART's), the others limit.
        let f = rule.frequency
        let hours = rule.byHour.isEmpty ? (f > .hourly ? [local.hour] : []) : rule.byHour
        let minutes = rule.byMinute.isEmpty ? (f > .minutely ? [local.minute] : []) : rule.byMinute
        let seconds = rule.bySecond.isEmpty ? (f > .secondly ? [local.second] : []) : rule.bySecond
        hourMask = f <= .hourly ? hours.reduce(0) { $0 | UInt32(1) << $1 } : 0
        minuteMask = f <= .minutely ? minutes.reduce(0) { $0 | UInt64(1) << $1 } : 0
        secondMask = f == .secondly ? seconds.reduce(0) { $0 | UInt64(1) << $1 } : 0
        var times: [Int64] = []
        var offsets: [Int64] = [0]
        switch f {
        case .hourly:
            offsets = minutes.flatMap { m in seconds.map { s in Int64(m * 60 + s) } }.sorted()
        case .minutely:
            offsets = seconds.map { Int64($0) }.sorted()
        case .secondly:
            break
        default:
            for h in hours { for m in minutes { for s in seconds { times.append(Int64(h * 3600 + m * 60 + s)) } } }
            times.sort()
        }
        timesOfDay = times
        self.offsets = offsets
        setPositions = rule.bySetPos

        let unit: Int64
        switch f {
        case .hourly: unit = 3600
        case .minutely: unit = 60
        case .secondly: unit = 1
        case .daily: unit = 86_400
        default: unit = 0
        }
        base = unit > 0 && f < .daily ? floorDiv(start, unit) * unit : start
        step = unit * Int64(rule.interval)

        // 400 Gregorian years are 4800 months, 20871 weeks, 146097 days: the calendar repeats exactly.
        switch f {
        case .yearly: emptyRunLimit = 400 / gcd(interval, 400) + 1
        case .monthly: emptyRunLimit = 4800 / gcd(interval, 4800) + 1
        case .weekly: emptyRunLimit = 20_871 / gcd(interval, 20_871) + 1
        case .daily: emptyRunLimit = 146_097 / gcd(interval, 146_097) + 1
        default: emptyRunLimit = nil
        }
        shapeCounts = f == .yearly ? ShapeCountCache(shapes: 56) : (f == .monthly ? ShapeCountCache(shapes: 168) : nil)
        cycle = nil
        cycle = periodicCycle()
        laterPeriodsEmpty = provesLaterPeriodsEmpty()
    }

    /// Whether some allowed time of day τ (passing BYHOUR/BYMINUTE/BYSECOND) can start a sub-daily period:
    /// a period starts at `D × 86400 + τ` on day `D` when that is `base` modulo the period length, which has
    /// a solution `D` exactly when `gcd(86400, step)` divides `base - τ`. When the rule's only day filter is
    /// the weekday, the solutions `D` (an arithmetic progression) must also reach an allowed weekday.
    private func subDailyTimesCanAlign() -> Bool {
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
    private func solveDay(tau: Int64, g: Int64, modulus: Int64) -> Int64 {
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
    private func provesLaterPeriodsEmpty() -> Bool {
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

    // MARK: Days

    /// Whether `day` (days since 1970-01-01) passes every day-level filter.
    @inline(__always)
    func dayMatches(_ day: Int64) -> Bool {
        let (y, m, d) = civilFromDays(day)
        if monthMask != 0 && monthMask & (UInt16(1) << m) == 0 { return false }
        if monthDayPositive != 0 || monthDayNegative != 0 {
            let length = daysInMonth(year: y, month: m)
            guard monthDayPositive & (UInt32(1) << d) != 0 || monthDayNegative & (UInt32(1) << (length - d + 1)) != 0
            else { return false }
        }
        if weekdayMask != 0 || !nthWeekdays.isEmpty {
            let weekday = isoWeekday(daysSinceEpoch: day)
            if weekdayMask & (UInt8(1) << weekday) == 0 {
                guard !nthWeekdays.isEmpty, nthMatches(day: day, weekday: weekday, year: y, month: m, dayOfMonth: d)
                else { return false }
            }
        }
        if !yearDays.isEmpty {
            let yearDay = Int(day - daysFromCivil(year: y, month: 1, day: 1)) + 1
            let length = isLeapYear(y) ? 366 : 365
            guard yearDays.contains(yearDay) || yearDays.contains(yearDay - length - 1) else { return false }
        }
        if !weekNumbers.isEmpty && !weekNumberMatches(day: day, year: y) { return false }
        return true
    }

    private func nthMatches(day: Int64, weekday: Int, year: Int, month: Int, dayOfMonth: Int) -> Bool {
        let position: Int
        let length: Int
        if nthInYear {
            position = Int(day - daysFromCivil(year: year, month: 1, day: 1)) + 1
            length = isLeapYear(year) ? 366 : 365
        } else {
            position = dayOfMonth
            length = daysInMonth(year: year, month: month)
        }
        let forward = (position - 1) / 7 + 1
        let backward = -((length - position) / 7 + 1)
        return nthWeekdays.contains { $0.weekday == weekday && ($0.ordinal == forward || $0.ordinal == backward) }
    }

    /// The first day of week 1 of `year`: the `WKST` week holding January 4 (so at least 4 days of it are in
    /// the year), as RFC 5545 defines week numbers.
    private func week1Start(_ year: Int) -> Int64 {
        let jan4 = daysFromCivil(year: year, month: 1, day: 4)
        return jan4 - Int64((isoWeekday(daysSinceEpoch: jan4) - weekStart + 7) % 7)
    }

    private func weekNumberMatches(day: Int64, year: Int) -> Bool {
        let thisStart = week1Start(year)
        let nextStart = week1Start(year + 1)
        let number: Int
        let weeks: Int
        if day >= nextStart {
            number = 1
            weeks = Int((week1Start(year + 2) - nextStart) / 7)
        } else if day < thisStart {
            weeks = Int((thisStart - week1Start(year - 1)) / 7)
            number = weeks
        } else {
            number = Int((day - thisStart) / 7) + 1
            weeks = Int((nextStart - thisStart) / 7)
        }
        return weekNumbers.contains(number) || weekNumbers.contains(number - weeks - 1)
    }

    /// A day at or after `day` worth testing next: `day` itself when it matches, else the first day of the
    /// next allowed month when its month is filtered out, else the next day.
    @inline(__always)
    private func nextDayToTry(after day: Int64) -> (day: Int64, matches: Bool) {
        if dayMatches(day) { return (day, true) }
        if monthMask != 0 {
            let (y, m, _) = civilFromDays(day)
            if monthMask & (UInt16(1) << m) == 0 {
                var (ny, nm) = (y, m)
                repeat {
                    nm += 1
                    if nm > 12 { (ny, nm) = (ny + 1, 1) }
                } while monthMask & (UInt16(1) << nm) == 0
                return (daysFromCivil(year: ny, month: nm, day: 1), false)
            }
        }
        return (day + 1, false)
    }

    // MARK: Periods

    /// The period that contains wall time `wall` (negative before DTSTART's).
    func period(containing wall: Int64) -> Int64 {
        let day = floorDiv(wall, 86_400)
        switch frequency {
        case .yearly: return floorDiv(Int64(civilFromDays(day).year) - startYear, interval)
        case .monthly:
            let (y, m, _) = civilFromDays(day)
            return floorDiv(Int64(y) * 12 + Int64(m - 1) - startMonthIndex, interval)
        case .weekly: return floorDiv(day - weekStart0, 7 * interval)
        case .daily: return floorDiv(day - startDay, interval)
        default: return floorDiv(wall - base, step)
        }
    }

    /// Appends period `p`'s candidates (wall seconds, ascending, after BYSETPOS, not yet compared with
    /// DTSTART) to `out`, which must be empty. Returns false when the period lies past 9999-12-31.
    func candidates(period p: Int64, into out: inout [Int64]) -> Bool {
        switch frequency {
        case .yearly:
            let year = startYear + p * interval
            guard year <= 9999 else { return false }
            appendDays(of: Int(year), month: nil, into: &out)
        case .monthly:
            let index = startMonthIndex + p * interval
            guard index / 12 <= 9999 else { return false }
            appendDays(of: Int(index / 12), month: Int(index % 12) + 1, into: &out)
        case .weekly:
            let first = weekStart0 + p * 7 * interval
            guard first <= lastDay else { return false }
            for day in first..<(first + 7) where day <= lastDay && dayMatches(day) {
                for t in timesOfDay { out.append(day * 86_400 + t) }
            }
        case .daily:
            let day = startDay + p * interval
            guard day <= lastDay else { return false }
            if dayMatches(day) { for t in timesOfDay { out.append(day * 86_400 + t) } }
        case .hourly, .minutely, .secondly:
            let t = base + p * step
            guard t <= lastWallSecond else { return false }
            if subDailyPeriodMatches(t) {
                for o in offsets where t + o <= lastWallSecond { out.append(t + o) }
            }
        }
        if !setPositions.isEmpty && !out.isEmpty { selectSetPositions(&out) }
        return true
    }

    /// Appends the candidates of the days of `year` (of one `month` of it when given, else of the months
    /// BYMONTH allows) that pass the day filters. The days tried are generated from the most selective part
    /// (BYYEARDAY, BYMONTHDAY, BYWEEKNO, ordinal BYDAY) so that a year is not walked day by day; they are a
    /// superset that ``dayMatches(_:)`` then filters.
    private func appendDays(of year: Int, month: Int?, into out: inout [Int64]) {
        let yearStart = daysFromCivil(year: year, month: 1, day: 1)
        let yearLength = isLeapYear(year) ? 366 : 365
        var ranges: [(first: Int64, length: Int)] = []
        for m in 1...12 where month.map({ $0 == m }) ?? (monthMask == 0 || monthMask & (UInt16(1) << m) != 0) {
            ranges.append((daysFromCivil(year: year, month: m, day: 1), daysInMonth(year: year, month: m)))
        }
        var days: [Int64] = []
        if !yearDays.isEmpty {
            for n in yearDays {
                let d = n > 0 ? n : yearLength + n + 1
                if d >= 1 && d <= yearLength { days.append(yearStart + Int64(d - 1)) }
            }
        } else if monthDayPositive != 0 || monthDayNegative != 0 {
            for range in ranges {
                for n in 1...31 where n <= range.length {
                    if monthDayPositive & (UInt32(1) << n) != 0 { days.append(range.first + Int64(n - 1)) }
                    if monthDayNegative & (UInt32(1) << n) != 0 { days.append(range.first + Int64(range.length - n)) }
                }
            }
        } else if !weekNumbers.isEmpty {
            let yearEnd = yearStart + Int64(yearLength)
            for weekYear in (year - 1)...(year + 1) {
                let first = week1Start(weekYear)
                let weeks = Int((week1Start(weekYear + 1) - first) / 7)
                for n in weekNumbers {
                    let w = n > 0 ? n : weeks + n + 1
                    guard w >= 1 && w <= weeks else { continue }
                    let monday = first + Int64(w - 1) * 7
                    for day in monday..<(monday + 7) where day >= yearStart && day < yearEnd { days.append(day) }
                }
            }
        } else if !nthWeekdays.isEmpty && weekdayMask == 0 {
            let nthRanges = nthInYear ? [(first: yearStart, length: yearLength)] : ranges
            for range in nthRanges {
                let last = range.first + Int64(range.length - 1)
                for nth in nthWeekdays {
                    let day: Int64
                    if nth.ordinal > 0 {
                        let ahead = (nth.weekday - isoWeekday(daysSinceEpoch: range.first) + 7) % 7
                        day = range.first + Int64(ahead + (nth.ordinal - 1) * 7)
                    } else {
                        let back = (isoWeekday(daysSinceEpoch: last) - nth.weekday + 7) % 7
                        day = last - Int64(back + (-nth.ordinal - 1) * 7)
                    }
                    if day >= range.first && day <= last { days.append(day) }
                }
            }
        } else {
            for range in ranges {
                for day in range.first..<(range.first + Int64(range.length)) where dayMatches(day) {
                    for t in timesOfDay { out.append(day * 86_400 + t) }
                }
            }
            return
        }
        days.sort()
        var previous: Int64?
        for day in days where day != previous {
            previous = day
            guard dayMatches(day) else { continue }
            for t in timesOfDay { out.append(day * 86_400 + t) }
        }
    }

    /// Whether the sub-daily period starting at wall `t` passes the day filters and the time limits.
    @inline(__always)
    private func subDailyPeriodMatches(_ t: Int64) -> Bool {
        let day = floorDiv(t, 86_400)
        let second = Int(t - day * 86_400)
        if hourMask != 0 && hourMask & (UInt32(1) << (second / 3600)) == 0 { return false }
        if minuteMask != 0 && minuteMask & (UInt64(1) << (second / 60 % 60)) == 0 { return false }
        if secondMask != 0 && secondMask & (UInt64(1) << (second % 60)) == 0 { return false }
        return dayMatches(day)
    }

    private func selectSetPositions(_ list: inout [Int64]) {
        let count = list.count
        var picked: [Int64] = []
        picked.reserveCapacity(setPositions.count)
        for position in setPositions {
            let i = position > 0 ? position - 1 : count + position
            if i >= 0 && i < count { picked.append(list[i]) }
        }
        picked.sort()
        list.removeAll(keepingCapacity: true)
        var last: Int64?
        for t in picked where t != last {
            list.append(t)
            last = t
        }
    }

    /// The first period at or after `p` that can have candidates, skipping the days that fail the day
    /// filters and (sub-daily) the times that fail BYHOUR/BYMINUTE/BYSECOND without visiting every period.
    func skipEmpty(from p: Int64, budget: inout Budget) throws(RecurrenceError) -> Int64 {
        var p = p
        switch frequency {
        case .daily:
            while true {
                let day = startDay + p * interval
                if day > lastDay { return p }
                let next = nextDayToTry(after: day)
                if next.matches { return p }
                try budget.spend()
                p = max(p + 1, ceilDiv(next.day - startDay, interval))
            }
        case .hourly, .minutely, .secondly:
            while true {
                let t = base + p * step
                if t > lastWallSecond { return p }
                let day = floorDiv(t, 86_400)
                let target: Int64
                let next = nextDayToTry(after: day)
                if next.day != day {
                    target = next.day * 86_400
                } else {
                    let wanted = nextAllowedTime(from: t, day: day)
                    if wanted == t { return p }
                    target = wanted
                }
                try budget.spend()
                p = max(p + 1, ceilDiv(target - base, step))
            }
        default:
            return p
        }
    }

    /// The first wall second at or after `t` (on `day`) whose hour, minute and second pass the limits,
    /// or the start of the next day when none is left on this one. Bit scans, not a walk over seconds.
    private func nextAllowedTime(from t: Int64, day: Int64) -> Int64 {
        let dayStart = day * 86_400
        let nextDay = dayStart + 86_400
        let second = Int(t - dayStart)
        var (h, m, s) = (second / 3600, second / 60 % 60, second % 60)
        while true {
            if hourMask != 0 {
                guard let allowed = nextSetBit(UInt64(hourMask), from: h) else { return nextDay }
                if allowed != h { (h, m, s) = (allowed, 0, 0) }
            }
            if minuteMask != 0 {
                guard let allowed = nextSetBit(minuteMask, from: m) else {
                    (h, m, s) = (h + 1, 0, 0)
                    if h == 24 { return nextDay }
                    continue
                }
                if allowed != m { (m, s) = (allowed, 0) }
            }
            if secondMask != 0 {
                guard let allowed = nextSetBit(secondMask, from: s) else {
                    (m, s) = (m + 1, 0)
                    if m == 60 { (h, m) = (h + 1, 0) }
                    if h == 24 { return nextDay }
                    continue
                }
                s = allowed
            }
            return dayStart + Int64(h * 3600 + m * 60 + s)
        }
    }

    // MARK: Counting

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
    private func shape(ofPeriod p: Int64) -> Int? {
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
    private func countByShape(
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
    private func periodicCycle() -> (periods: Int64, candidates: Int64)? {
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
