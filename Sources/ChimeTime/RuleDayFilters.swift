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
            guard yearDays.contains(yearDay) || yearDays.contains(yearDay - length - 1) else { return false }
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
        return nthWeekdays.contains { $0.weekday == weekday && ($0.ordinal == forward || $0.ordinal == backward) }
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
        return weekNumbers.contains(number) || weekNumbers.contains(number - weeks - 1)
    }

    /// A day at or after `day` worth testing next: `day` itself when it matches, else the first day of the
    /// next allowed month when its month is filtered out, else the next day.
    @inline(__always)
    func nextDayToTry(after day: Int64) -> (day: Int64, matches: Bool) {
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

    /// Appends the candidates of the days of `year` (of one `month` of it when given, else of the months
    /// BYMONTH allows) that pass the day filters. The days tried are generated from the most selective part
    /// (BYYEARDAY, BYMONTHDAY, BYWEEKNO, ordinal BYDAY) so that a year is not walked day by day; they are a
    /// superset that ``dayMatches(_:)`` then filters.
    func appendDays(of year: Int, month: Int?, into out: inout [Int64]) {
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

}
