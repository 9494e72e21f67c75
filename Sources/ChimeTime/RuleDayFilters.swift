/// The day-level BY parts (BYMONTH, BYMONTHDAY, BYYEARDAY, BYWEEKNO, BYDAY with and without ordinals) of
/// an expansion, and the days of a year or month that may pass them.
extension RuleExpansion {

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
            guard yearDaySet.positive.contains(yearDay) || yearDaySet.negative.contains(length - yearDay + 1)
            else { return false }
        }
        if !weekNumbers.isEmpty && !weekNumberMatches(day: day, year: y) { return false }
        return true
    }

    func nthMatches(day: Int64, weekday: Int, year: Int, month: Int, dayOfMonth: Int) -> Bool {
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
        return nthSet.forward[weekday] & (UInt64(1) << forward) != 0
            || nthSet.backward[weekday] & (UInt64(1) << -backward) != 0
    }

    /// The first day of week 1 of `year`: the `WKST` week holding January 4 (so at least 4 days of it are in
    /// the year), as RFC 5545 defines week numbers.
    func week1Start(_ year: Int) -> Int64 {
        let jan4 = daysFromCivil(year: year, month: 1, day: 4)
        return jan4 - Int64((isoWeekday(daysSinceEpoch: jan4) - weekStart + 7) % 7)
    }

    func weekNumberMatches(day: Int64, year: Int) -> Bool {
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
        return weekNumberSet.positive & (UInt64(1) << number) != 0
            || weekNumberSet.negative & (UInt64(1) << (weeks - number + 1)) != 0
    }

    /// A day at or after `day` worth testing next: `day` itself when it matches, else the first day of the
    /// next allowed month when its month is filtered out, else the first later day that BYMONTHDAY,
    /// BYYEARDAY and a weekday-only BYDAY could each let through (every part must, so the latest of those
    /// days is a lower bound). A search for a rare day then tests a few days a month, not all of them.
    @inline(__always)
    func nextDayToTry(after day: Int64) -> (day: Int64, matches: Bool) {
        if dayMatches(day) { return (day, true) }
        let (y, m, d) = civilFromDays(day)
        if monthMask != 0 && monthMask & (UInt16(1) << m) == 0 {
            var (ny, nm) = (y, m)
            repeat {
                nm += 1
                if nm > 12 { (ny, nm) = (ny + 1, 1) }
            } while monthMask & (UInt16(1) << nm) == 0
            return (daysFromCivil(year: ny, month: nm, day: 1), false)
        }
        var next = day + 1
        if monthDayPositive != 0 || monthDayNegative != 0 {
            // BYMONTHDAY=n is day n; BYMONTHDAY=-k is day length + 1 - k, later than d when k < length + 1 - d.
            let length = daysInMonth(year: y, month: m)
            var first = length + 1
            if let n = nextSetBit(UInt64(monthDayPositive), from: d + 1), n <= length { first = n }
            let earlier = UInt64(monthDayNegative) & ((UInt64(1) << UInt64(length + 1 - d)) - 1)
            if earlier != 0 { first = min(first, length + 1 - (63 - earlier.leadingZeroBitCount)) }
            next = max(next, day + Int64(first - d))
        }
        if !yearDays.isEmpty {
            let yearDay = Int(day - daysFromCivil(year: y, month: 1, day: 1)) + 1
            let length = isLeapYear(y) ? 366 : 365
            var first = length + 1
            if let n = yearDaySet.positive.first(atOrAbove: yearDay + 1), n <= length { first = n }
            if let k = yearDaySet.negative.last(below: length + 1 - yearDay) { first = min(first, length + 1 - k) }
            next = max(next, day + Int64(first - yearDay))
        }
        if weekdayMask != 0 && nthWeekdays.isEmpty {
            let weekday = isoWeekday(daysSinceEpoch: day)
            var ahead = 1
            while weekdayMask & (UInt8(1) << ((weekday + ahead - 1) % 7 + 1)) == 0 { ahead += 1 }
            next = max(next, day + Int64(ahead))
        }
        return (next, false)
    }

    /// Calls `body` with the days of `year` (of one `month` of it when given, else of the months BYMONTH
    /// allows) that pass the day filters, in ascending order, paying for each day tested and `costPerDay`
    /// more before each call of `body`. The days tried are generated from the most selective
    /// part (BYYEARDAY, BYMONTHDAY, BYWEEKNO, ordinal BYDAY, weekday BYDAY) so that a year is not walked day
    /// by day; they are a superset that ``dayMatches(_:)`` filters.
    func forEachDay(
        of year: Int,
        month: Int?,
        costPerDay: Int,
        budget: inout Budget,
        _ body: (Int64) -> Void
    ) throws(RecurrenceError) {
        if let month, monthMask != 0, monthMask & (UInt16(1) << month) == 0 { return }
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
        } else if weekdayMask != 0 && nthWeekdays.isEmpty {
            // Plain weekdays alone: every 7th day from the first of each, not every day of the range.
            for range in ranges {
                let end = range.first + Int64(range.length)
                let firstWeekday = isoWeekday(daysSinceEpoch: range.first)
                for weekday in 1...7 where weekdayMask & (UInt8(1) << weekday) != 0 {
                    var day = range.first + Int64((weekday - firstWeekday + 7) % 7)
                    while day < end {
                        days.append(day)
                        day += 7
                    }
                }
            }
        } else {
            for range in ranges {
                try budget.spend(range.length * Budget.Cost.day)
                for day in range.first..<(range.first + Int64(range.length)) where dayMatches(day) {
                    try budget.spend(costPerDay)
                    body(day)
                }
            }
            return
        }
        try budget.spend(days.count * Budget.Cost.day)
        days.sort()
        var previous: Int64?
        for day in days where day != previous {
            previous = day
            guard dayMatches(day) else { continue }
            try budget.spend(costPerDay)
            body(day)
        }
    }
}

/// BYYEARDAY, BYWEEKNO and ordinal BYDAY as bit sets, so that a day is tested in constant time however long
/// the lists are (BYYEARDAY may list 732 values, BYDAY 742).
struct DayListSets: Sendable {
    /// BYYEARDAY: `positive` holds n for n > 0, `negative` holds -n for n < 0.
    struct YearDays: Sendable {
        var positive = SmallIntSet()
        var negative = SmallIntSet()
    }

    /// BYWEEKNO, bit n set for week n (`positive`) or week -n (`negative`).
    struct WeekNumbers: Sendable {
        var positive: UInt64 = 0
        var negative: UInt64 = 0
    }

    /// Ordinal BYDAY, indexed by ISO weekday: bit n set for the n-th (`forward`) or the n-th from the end
    /// (`backward`) such weekday of the month or year.
    struct NthWeekdays: Sendable {
        var forward = [UInt64](repeating: 0, count: 8)
        var backward = [UInt64](repeating: 0, count: 8)
    }

    static func yearDays(_ values: [Int]) -> YearDays {
        var set = YearDays()
        for v in values {
            if v > 0 { set.positive.insert(v) } else { set.negative.insert(-v) }
        }
        return set
    }

    static func weekNumbers(_ values: [Int]) -> WeekNumbers {
        var set = WeekNumbers()
        for v in values {
            if v > 0 { set.positive |= UInt64(1) << v } else { set.negative |= UInt64(1) << -v }
        }
        return set
    }

    static func nthWeekdays(_ values: [RecurrenceRule.WeekdayNum]) -> NthWeekdays {
        var set = NthWeekdays()
        for v in values where v.ordinal != 0 {
            if v.ordinal > 0 {
                set.forward[v.weekday] |= UInt64(1) << v.ordinal
            } else {
                set.backward[v.weekday] |= UInt64(1) << -v.ordinal
            }
        }
        return set
    }
}

/// A set of the integers 0..<384 in six words.
struct SmallIntSet: Sendable {
    private var words = [UInt64](repeating: 0, count: 6)

    mutating func insert(_ value: Int) {
        precondition((0..<384).contains(value))
        words[value >> 6] |= UInt64(1) << UInt64(value & 63)
    }

    @inline(__always)
    func contains(_ value: Int) -> Bool {
        value >= 0 && value < 384 && words[value >> 6] & (UInt64(1) << UInt64(value & 63)) != 0
    }

    /// The smallest member at or above `value`, if any.
    func first(atOrAbove value: Int) -> Int? {
        var i = max(value, 0)
        while i < 384 {
            let rest = words[i >> 6] >> UInt64(i & 63)
            if rest != 0 { return i + rest.trailingZeroBitCount }
            i = (i | 63) + 1
        }
        return nil
    }

    /// The largest member below `value`, if any.
    func last(below value: Int) -> Int? {
        var i = min(value, 384) - 1
        while i >= 0 {
            let rest = words[i >> 6] << UInt64(63 - (i & 63))
            if rest != 0 { return i - rest.leadingZeroBitCount }
            i = (i & ~63) - 1
        }
        return nil
    }
}
