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
    /// The rule's own years and months, with `SKIP` (``RecurrenceRule/usesCalendarPath``); nil for the
    /// Gregorian arithmetic below. Its periods replace the Gregorian ones of `YEARLY` and `MONTHLY`.
    let calendar: CalendarPath?
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
    /// The lists above as bit sets, for ``dayMatches(_:)``.
    let yearDaySet: DayListSets.YearDays
    let weekNumberSet: DayListSets.WeekNumbers
    let nthSet: DayListSets.NthWeekdays
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
    /// The positive BYSETPOS values, for counting a period's selection without building it.
    let positiveSetPositions: SmallIntSet

    /// For rules whose periods after the first all repeat with a short cycle: its length and the number of
    /// candidates in one cycle. Lets ``count(before:limit:budget:)`` skip whole cycles.
    private(set) var cycle: (periods: Int64, candidates: Int64)?
    /// After this many consecutive periods without a candidate, none will ever come (the 400-year Gregorian
    /// cycle has been walked). Nil for the sub-daily frequencies, bounded by year 9999 and the budget.
    let emptyRunLimit: Int64?
    /// Proven at construction: no period after the first has a candidate, ever (the rule's BY parts never
    /// meet its periods, like `FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30`). Searches then stop after period 0
    /// instead of walking to year 9999 on every call.
    private(set) var laterPeriodsEmpty = false
    /// YEARLY and MONTHLY: candidate counts per calendar shape of a period, filled as periods are counted.
    let shapeCounts: CountCache?
    /// Sub-daily rules with periods at least daily: how the periods fall within a day repeats every
    /// `dayPhases` days, and ``dayCounts`` holds the candidates of a whole matching day per phase, filled
    /// as days are counted. Nil when there are more than 1440 phases (the periods are counted one by one).
    let dayPhases: Int64
    let dayCounts: CountCache?
    /// The candidates examined at construction, finding ``cycle`` and proving ``laterPeriodsEmpty``
    /// (at most ``Recurrence/maximumCandidatesPerProof``), for tests.
    private(set) var proofCandidates = 0

    /// - Parameters:
    ///   - rule: the rule; with `RSCALE=CHINESE`, `chinese` must be given and DTSTART within its years.
    ///   - local: DTSTART.
    ///   - chinese: the Chinese calendar's table, for `RSCALE=CHINESE`.
    init(rule: RecurrenceRule, start local: LocalDateTime, chinese: ChineseCalendar? = nil) {
        frequency = rule.frequency
        interval = Int64(rule.interval)
        start = local.secondsSinceEpoch
        startDay = floorDiv(start, 86_400)
        let path =
            rule.usesCalendarPath
            ? CalendarPath(rule: rule, start: local, chinese: rule.scale == .chinese ? chinese : nil) : nil
        calendar = path
        startYear = path?.startYear ?? Int64(local.year)
        startMonthIndex = path?.startMonthIndex ?? Int64(local.year) * 12 + Int64(local.month - 1)
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
        yearDaySet = DayListSets.yearDays(rule.byYearDay)
        weekNumberSet = DayListSets.weekNumbers(rule.byWeekNo)
        nthSet = DayListSets.nthWeekdays(nthWeekdays)
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
        var positives = SmallIntSet()
        for position in rule.bySetPos where position > 0 { positives.insert(position) }
        positiveSetPositions = positives

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
        let calendarLimit = path?.periodLimit(f, interval: interval)
        switch f {
        case .yearly: emptyRunLimit = calendarLimit ?? 400 / gcd(interval, 400) + 1
        case .monthly: emptyRunLimit = calendarLimit ?? 4800 / gcd(interval, 4800) + 1
        case .weekly: emptyRunLimit = 20_871 / gcd(interval, 20_871) + 1
        case .daily: emptyRunLimit = 146_097 / gcd(interval, 146_097) + 1
        default: emptyRunLimit = nil
        }
        if path?.chinese != nil {
            shapeCounts = nil
        } else {
            shapeCounts = f == .yearly ? CountCache(size: 56) : (f == .monthly ? CountCache(size: 168) : nil)
        }
        dayPhases = f < .daily && step <= 86_400 ? step / gcd(step, 86_400) : 0
        dayCounts = dayPhases >= 1 && dayPhases <= 1440 ? CountCache(size: Int(dayPhases)) : nil
        cycle = nil
        var proof = Budget(Budget.perProof, for: .proof)
        cycle = periodicCycle(budget: &proof)
        laterPeriodsEmpty = provesLaterPeriodsEmpty(budget: &proof)
        proofCandidates = proof.used
    }

    // MARK: Periods

    /// The period that contains wall time `wall` (negative before DTSTART's).
    func period(containing wall: Int64) -> Int64 {
        let day = floorDiv(wall, 86_400)
        if let calendar, frequency >= .monthly {
            let position = calendar.position(ofDay: day)
            let index = frequency == .yearly ? position.year - startYear : position.month - startMonthIndex
            return floorDiv(index, interval)
        }
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
    /// DTSTART) to `out`, which must be empty, paying for the period, each day tested and each date-time
    /// generated. Returns false when the period lies past 9999-12-31.
    func candidates(period p: Int64, into out: inout [Int64], budget: inout Budget) throws(RecurrenceError) -> Bool {
        try budget.spend(Budget.Cost.period)
        let times = timesOfDay
        if let calendar, frequency >= .monthly {
            guard let days = try calendarDays(calendar, period: p, budget: &budget) else { return false }
            try budget.spend(days.count * times.count)
            for day in days { for t in times { out.append(day * 86_400 + t) } }
            if !setPositions.isEmpty && !out.isEmpty {
                try budget.spend(setPositions.count)
                selectSetPositions(&out)
            }
            return true
        }
        switch frequency {
        case .yearly:
            let year = startYear + p * interval
            guard year <= 9999 else { return false }
            try forEachDay(of: Int(year), month: nil, costPerDay: times.count, budget: &budget) { day in
                for t in times { out.append(day * 86_400 + t) }
            }
        case .monthly:
            let index = startMonthIndex + p * interval
            guard index / 12 <= 9999 else { return false }
            try forEachDay(of: Int(index / 12), month: Int(index % 12) + 1, costPerDay: times.count, budget: &budget) {
                day in
                for t in times { out.append(day * 86_400 + t) }
            }
        case .weekly:
            let first = weekStart0 + p * 7 * interval
            guard first <= lastDay else { return false }
            try budget.spend(7 * Budget.Cost.day)
            for day in first..<(first + 7) where day <= lastDay && dayMatches(day) {
                try budget.spend(times.count)
                for t in times { out.append(day * 86_400 + t) }
            }
        case .daily:
            let day = startDay + p * interval
            guard day <= lastDay else { return false }
            if dayMatches(day) {
                try budget.spend(times.count)
                for t in times { out.append(day * 86_400 + t) }
            }
        case .hourly, .minutely, .secondly:
            let t = base + p * step
            guard t <= lastWallSecond else { return false }
            if subDailyPeriodMatches(t) {
                try budget.spend(offsets.count)
                for o in offsets where t + o <= lastWallSecond { out.append(t + o) }
            }
        }
        if !setPositions.isEmpty && !out.isEmpty {
            try budget.spend(setPositions.count)
            selectSetPositions(&out)
        }
        return true
    }

    /// The number of candidates ``candidates(period:into:budget:)`` gives for period `p`, without building
    /// them: the days are tested (and paid for) but not expanded, BYSETPOS is counted. Nil past 9999-12-31.
    func candidateCount(period p: Int64, budget: inout Budget) throws(RecurrenceError) -> Int64? {
        try budget.spend(Budget.Cost.period)
        var days = 0
        if let calendar, frequency >= .monthly {
            guard let list = try calendarDays(calendar, period: p, budget: &budget) else { return nil }
            let count = list.count * timesOfDay.count
            return Int64(setPositions.isEmpty ? count : selectedCount(of: count))
        }
        switch frequency {
        case .yearly:
            let year = startYear + p * interval
            guard year <= 9999 else { return nil }
            try forEachDay(of: Int(year), month: nil, costPerDay: 0, budget: &budget) { _ in days += 1 }
        case .monthly:
            let index = startMonthIndex + p * interval
            guard index / 12 <= 9999 else { return nil }
            try forEachDay(of: Int(index / 12), month: Int(index % 12) + 1, costPerDay: 0, budget: &budget) { _ in
                days += 1
            }
        case .weekly:
            let first = weekStart0 + p * 7 * interval
            guard first <= lastDay else { return nil }
            try budget.spend(7 * Budget.Cost.day)
            for day in first..<(first + 7) where day <= lastDay && dayMatches(day) { days += 1 }
        case .daily:
            let day = startDay + p * interval
            guard day <= lastDay else { return nil }
            if dayMatches(day) { days = 1 }
        case .hourly, .minutely, .secondly:
            let t = base + p * step
            guard t <= lastWallSecond else { return nil }
            guard subDailyPeriodMatches(t) else { return 0 }
            let count = offsets.lazy.filter { t + $0 <= lastWallSecond }.count
            return Int64(setPositions.isEmpty ? count : selectedCount(of: count))
        }
        let count = days * timesOfDay.count
        return Int64(setPositions.isEmpty ? count : selectedCount(of: count))
    }

    /// Whether the sub-daily period starting at wall `t` passes the day filters and the time limits.
    @inline(__always)
    func subDailyPeriodMatches(_ t: Int64) -> Bool {
        let day = floorDiv(t, 86_400)
        return timeMatches(secondOfDay: Int(t - day * 86_400)) && dayMatches(day)
    }

    /// Whether a time of day passes BYHOUR, BYMINUTE and BYSECOND where they limit (sub-daily rules).
    @inline(__always)
    func timeMatches(secondOfDay second: Int) -> Bool {
        if hourMask != 0 && hourMask & (UInt32(1) << (second / 3600)) == 0 { return false }
        if minuteMask != 0 && minuteMask & (UInt64(1) << (second / 60 % 60)) == 0 { return false }
        if secondMask != 0 && secondMask & (UInt64(1) << (second % 60)) == 0 { return false }
        return true
    }

    /// How many of `count` (distinct, sorted) candidates BYSETPOS keeps: those its positions name, each once.
    func selectedCount(of count: Int) -> Int {
        var kept = 0
        for position in setPositions {
            if position > 0 {
                if position <= count { kept += 1 }
            } else if -position <= count && !positiveSetPositions.contains(count + position + 1) {
                kept += 1
            }
        }
        return kept
    }

    func selectSetPositions(_ list: inout [Int64]) {
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
                try budget.spend(Budget.Cost.day)
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
                try budget.spend(Budget.Cost.day)
                p = max(p + 1, ceilDiv(target - base, step))
            }
        default:
            return p
        }
    }

    /// The first wall second at or after `t` (on `day`) whose hour, minute and second pass the limits,
    /// or the start of the next day when none is left on this one. Bit scans, not a walk over seconds.
    func nextAllowedTime(from t: Int64, day: Int64) -> Int64 {
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

}
