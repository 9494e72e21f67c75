/// The years and months of a rule in its own calendar, with RFC 7529's `SKIP`: how ``RuleExpansion`` builds
/// the periods of a `YEARLY` or `MONTHLY` rule with `RSCALE=CHINESE`, or with a `SKIP` that moves dates.
///
/// A period is a year or a month of the rule's calendar (Chinese years and months from ``ChineseCalendar``,
/// leap months counted as months of their own). Within it, as RFC 7529 orders the parts:
/// 1. `BYMONTH` expands a `YEARLY` period into its months (limits a `MONTHLY` one). A leap month the year
///    lacks (`4L` in a year without a leap fourth month) is omitted, or with `SKIP=BACKWARD` taken as the
///    month of that number (4), with `SKIP=FORWARD` as the month after it (5).
/// 2. `BYMONTHDAY` (or DTSTART's day of the month) expands each month into days. A positive day past the
///    month's end (the 30th of a 29-day month) is omitted, or moved to the month's last day (`BACKWARD`)
///    or to the first day of the next month (`FORWARD`). A negative day that reaches before the first
///    (`-30` in a 29-day month) is always omitted.
/// 3. A plain weekday `BYDAY` then filters the days, moved ones included; `BYHOUR`, `BYMINUTE`, `BYSECOND`
///    give each its times and `BYSETPOS` picks from them, as for any rule.
///
/// Dates that coincide count once: two days moved onto one (`BYMONTHDAY=30,31;SKIP=BACKWARD` in
/// February), or a day moved forward onto the first of the next month when the next period names that day
/// itself (`BYMONTHDAY=1,31;SKIP=FORWARD`), which then gives it.
final class CalendarPath: Sendable {
    /// The Chinese calendar's table, or nil for the Gregorian calendar.
    let chinese: ChineseCalendar?
    let skip: RecurrenceRule.Skip
    /// The months `BYMONTH` (or DTSTART) names as codes (`number << 1 | leap`), ascending; empty for all.
    let months: [UInt8]
    /// The same as bits, for testing a month.
    let monthMask: UInt32
    /// `BYMONTHDAY` (or DTSTART's day); empty for every day of the month.
    let monthDays: [Int]
    /// DTSTART's year (a table index for the Chinese calendar) and month (`year × 12 + month - 1`, or a table
    /// index).
    let startYear: Int64
    let startMonthIndex: Int64

    init(rule: RecurrenceRule, start local: LocalDateTime, chinese: ChineseCalendar?) {
        self.chinese = chinese
        skip = rule.skip
        let startDay = daysFromCivil(year: local.year, month: local.month, day: local.day)
        var startCode: UInt8
        var startDayOfMonth: Int
        if let chinese {
            let index = chinese.monthIndex(containing: startDay)
            let month = chinese.month(index)
            startCode = UInt8(month.number << 1 | (month.isLeap ? 1 : 0))
            startDayOfMonth = Int(startDay - month.firstDay) + 1
            startYear = Int64(chinese.yearIndex(ofMonth: index))
            startMonthIndex = Int64(index)
        } else {
            startCode = UInt8(local.month << 1)
            startDayOfMonth = local.day
            startYear = Int64(local.year)
            startMonthIndex = Int64(local.year) * 12 + Int64(local.month - 1)
        }
        var codes = rule.byMonth.map { UInt8($0 << 1) } + rule.byLeapMonth.map { UInt8($0 << 1 | 1) }
        var days = rule.byMonthDay
        if rule.byDay.isEmpty && rule.byMonthDay.isEmpty {
            days = [startDayOfMonth]
            if rule.frequency == .yearly && codes.isEmpty { codes = [startCode] }
        }
        months = codes.sorted()
        monthMask = codes.reduce(0) { $0 | UInt32(1) << $1 }
        monthDays = days
    }

    /// The months of year `year` (a Gregorian year, or a table index), nil outside the calendar's years.
    func months(ofYear year: Int64) -> [CalendarMonth]? {
        if let chinese {
            guard year >= 0 && year < Int64(ChineseCalendar.years.count) else { return nil }
            return chinese.months(ofYear: Int(year)).map(chinese.month)
        }
        guard year >= 1 && year <= 9999 else { return nil }
        let y = Int(year)
        return (1...12).map {
            CalendarMonth(
                number: $0,
                isLeap: false,
                firstDay: daysFromCivil(year: y, month: $0, day: 1),
                length: daysInMonth(year: y, month: $0)
            )
        }
    }

    /// Month `index` (`year × 12 + month - 1`, or a table index), nil outside the calendar's years.
    func month(at index: Int64) -> CalendarMonth? {
        if let chinese {
            guard index >= 0 && index < Int64(chinese.monthCount) else { return nil }
            return chinese.month(Int(index))
        }
        guard index >= 12 && index / 12 <= 9999 else { return nil }
        let (y, m) = (Int(index / 12), Int(index % 12) + 1)
        return CalendarMonth(
            number: m,
            isLeap: false,
            firstDay: daysFromCivil(year: y, month: m, day: 1),
            length: daysInMonth(year: y, month: m)
        )
    }

    /// The year (as ``months(ofYear:)`` numbers it) and the month index holding `day`.
    func position(ofDay day: Int64) -> (year: Int64, month: Int64) {
        if let chinese {
            if day < chinese.firstDay { return (-1, -1) }
            if day >= chinese.endDay { return (Int64(ChineseCalendar.years.count), Int64(chinese.monthCount)) }
            let index = chinese.monthIndex(containing: day)
            return (Int64(chinese.yearIndex(ofMonth: index)), Int64(index))
        }
        let (y, m, _) = civilFromDays(day)
        return (Int64(y), Int64(y) * 12 + Int64(m - 1))
    }

    /// How many periods the calendar has at most: past them a search stops (the Chinese table's years or
    /// months; nil for the Gregorian calendar, whose 400-year cycle bounds a search instead).
    func periodLimit(_ frequency: RecurrenceRule.Frequency, interval: Int64) -> Int64? {
        guard let chinese else { return nil }
        let periods = frequency == .yearly ? Int64(ChineseCalendar.years.count) : Int64(chinese.monthCount)
        return periods / interval + 2
    }

    @inline(__always)
    func code(_ month: CalendarMonth) -> UInt8 { UInt8(month.number << 1 | (month.isLeap ? 1 : 0)) }

    /// The days `BYMONTHDAY` names in `month`, before `SKIP` moves the ones it lacks: each positive day past
    /// the end is handed to `moved` with the day SKIP makes of it (none for `OMIT`).
    @inline(__always)
    func forEachDay(of month: CalendarMonth, _ body: (Int64) -> Void, moved: (Int64) -> Void) {
        if monthDays.isEmpty {
            for day in month.firstDay..<(month.firstDay + Int64(month.length)) { body(day) }
            return
        }
        for n in monthDays {
            if n > 0 {
                if n <= month.length {
                    body(month.firstDay + Int64(n - 1))
                } else if skip == .backward {
                    moved(month.firstDay + Int64(month.length - 1))
                } else if skip == .forward {
                    moved(month.firstDay + Int64(month.length))
                }
            } else if -n <= month.length {
                body(month.firstDay + Int64(month.length + n))
            }
        }
    }

    /// Whether `month`'s first day is one of its days by `BYMONTHDAY` alone (no move needed).
    func namesFirstDay(of month: CalendarMonth) -> Bool {
        monthDays.isEmpty || monthDays.contains(1) || monthDays.contains(-month.length)
    }
}

extension RuleExpansion {
    /// The days of period `p` of a calendar-path rule (``CalendarPath``), ascending, distinct, weekday-filtered;
    /// nil past the calendar's last year. Each month set up is paid as a period, each day as a day.
    func calendarDays(_ path: CalendarPath, period p: Int64, budget: inout Budget) throws(RecurrenceError) -> [Int64]? {
        var selected: [CalendarMonth] = []
        /// The first day of the next period when it names it itself (a day moved onto it is then dropped).
        var nextPeriodFirst: Int64?
        switch frequency {
        case .yearly:
            let year = path.startYear + p * interval
            guard let months = path.months(ofYear: year) else { return nil }
            try budget.spend(months.count)
            if path.months.isEmpty {
                selected = months
            } else {
                for code in path.months {
                    if let month = months.first(where: { path.code($0) == code }) {
                        selected.append(month)
                        continue
                    }
                    // A leap month this year lacks.
                    guard path.skip != .omit, let namesake = months.firstIndex(where: { path.code($0) == code & ~1 })
                    else { continue }
                    if path.skip == .backward {
                        selected.append(months[namesake])
                    } else if namesake + 1 < months.count {
                        selected.append(months[namesake + 1])
                    } else if let next = path.months(ofYear: year + 1)?.first {
                        selected.append(next)
                    }
                }
            }
            if path.skip == .forward && interval == 1, let next = path.months(ofYear: year + 1)?.first,
                path.months.isEmpty || path.monthMask & (UInt32(1) << path.code(next)) != 0,
                path.namesFirstDay(of: next)
            {
                nextPeriodFirst = next.firstDay
            }
        case .monthly:
            let index = path.startMonthIndex + p * interval
            guard let month = path.month(at: index) else { return nil }
            if path.monthMask == 0 || path.monthMask & (UInt32(1) << path.code(month)) != 0 { selected = [month] }
            if path.skip == .forward && interval == 1, let next = path.month(at: index + 1),
                path.monthMask == 0 || path.monthMask & (UInt32(1) << path.code(next)) != 0,
                path.namesFirstDay(of: next)
            {
                nextPeriodFirst = next.firstDay
            }
        default:
            preconditionFailure("the calendar path is for YEARLY and MONTHLY rules")
        }
        var days: [Int64] = []
        for month in selected {
            path.forEachDay(of: month) {
                days.append($0)
            } moved: { day in
                if day != nextPeriodFirst { days.append(day) }
            }
        }
        try budget.spend(days.count * Budget.Cost.day)
        if weekdayMask != 0 {
            days.removeAll { weekdayMask & (UInt8(1) << isoWeekday(daysSinceEpoch: $0)) == 0 }
        }
        days.sort()
        var previous: Int64?
        days.removeAll { day in
            defer { previous = day }
            return day == previous || day > lastDay
        }
        return days
    }
}
