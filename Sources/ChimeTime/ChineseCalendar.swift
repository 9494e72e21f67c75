import Foundation

/// The Chinese lunisolar calendar's months from 1901 to 2099, read once from Foundation's
/// `Calendar(identifier: .chinese)` (ICU) and kept as a table, so that a rule's expansion never calls
/// Foundation per candidate (about 10 µs a call on Linux; the whole table takes a few milliseconds).
///
/// The table holds every month of the Chinese years whose New Year (month 1, day 1) falls in the Gregorian
/// years 1901...2099: from 1901-02-19 to 2100-02-08, 2,461 months. A Chinese year is numbered here by the
/// Gregorian year its New Year falls in (year 2026 starts on 2026-02-17). `Tests/ChimeTimeTests` checks the
/// table against two independent implementations (`Fixtures/generate_lunar_vectors.py`).
public final class ChineseCalendar: Sendable {
    /// The first and last Chinese years (by their New Year's Gregorian year) the table covers.
    public static let years = 1901...2099

    /// Days since 1970-01-01 of each month's first day, and one more: the day after the last month.
    let monthStarts: [Int32]
    /// Each month's number (1...12) shifted left by one, with bit 0 set for a leap month.
    let monthCodes: [UInt8]
    /// The index in ``monthStarts`` of month 1 of each year, and one more: ``monthStarts``' last index.
    let yearStarts: [Int32]

    /// The table, or nil when Foundation's calendar gave something a lunisolar calendar cannot be (it then
    /// refuses `RSCALE=CHINESE` rules rather than compute wrong dates).
    public static let shared: ChineseCalendar? = fromFoundation()

    /// Reads the months from Foundation: from each month's first day, the next starts 29 or 30 days later, on
    /// the first day Foundation gives another month (number or leap flag) than the day before. The month is
    /// what counts, not Foundation's day of the month: for 2057-09-28, where a new moon falls just before
    /// midnight in China, ICU gives "9th month, day 0"; read this way that day starts the 9th month, as
    /// lunardate and sxtwl have it (lunar-python starts it a day later).
    static func fromFoundation() -> ChineseCalendar? {
        var calendar = Calendar(identifier: .chinese)
        guard let utc = TimeZone(identifier: "UTC") else { return nil }
        calendar.timeZone = utc
        func date(_ day: Int64) -> (month: Int, day: Int, leap: Bool)? {
            let c = calendar.dateComponents(
                [.month, .day, .isLeapMonth],
                from: Date(timeIntervalSince1970: TimeInterval(day * 86_400 + 43_200))
            )
            guard let month = c.month, let d = c.day, let leap = c.isLeapMonth else { return nil }
            return (month, d, leap)
        }
        var day = daysFromCivil(year: years.lowerBound, month: 2, day: 19)
        guard let first = date(day), first == (1, 1, false) else { return nil }
        var starts: [Int32] = []
        var codes: [UInt8] = []
        var yearStarts: [Int32] = []
        while true {
            guard let here = date(day), (1...12).contains(here.month) else { return nil }
            if here.month == 1 && !here.leap {
                if civilFromDays(day).year > years.upperBound { break }
                yearStarts.append(Int32(starts.count))
            }
            starts.append(Int32(day))
            codes.append(UInt8(here.month << 1 | (here.leap ? 1 : 0)))
            guard let after29 = date(day + 29) else { return nil }
            if (after29.month, after29.leap) != (here.month, here.leap) {
                day += 29
            } else {
                guard let after30 = date(day + 30), (after30.month, after30.leap) != (here.month, here.leap)
                else { return nil }
                day += 30
            }
        }
        starts.append(Int32(day))
        yearStarts.append(Int32(codes.count))
        for corrected in reckonedInLocalTime {
            let day = Int32(daysFromCivil(year: corrected.year, month: corrected.month, day: corrected.day))
            guard let index = starts.firstIndex(of: day + 1) else { return nil }
            starts[index] = day
        }
        guard yearStarts.count == years.count + 1 else { return nil }
        // Every year has 12 or 13 months, numbered 1...12 in order with at most one leap month after its
        // namesake.
        for y in 0..<years.count {
            let months = codes[Int(yearStarts[y])..<Int(yearStarts[y + 1])]
            guard months.count == 12 || months.count == 13 else { return nil }
            var expected = 1
            var leaps = 0
            for code in months {
                if code & 1 == 1 {
                    guard Int(code >> 1) == expected - 1 else { return nil }
                    leaps += 1
                } else {
                    guard Int(code >> 1) == expected else { return nil }
                    expected += 1
                }
            }
            guard leaps == months.count - 12 else { return nil }
        }
        return ChineseCalendar(monthStarts: starts, monthCodes: codes, yearStarts: yearStarts)
    }

    init(monthStarts: [Int32], monthCodes: [UInt8], yearStarts: [Int32]) {
        self.monthStarts = monthStarts
        self.monthCodes = monthCodes
        self.yearStarts = yearStarts
    }

    /// Month starts that ICU puts a day late. ICU reckons every year at UTC+8; until 1929 the Chinese calendar
    /// was reckoned at Beijing's local mean time (UTC+7:46), and three new moons fall between the two
    /// midnights, so these months begin a day earlier than ICU says (lunardate, lunar-python and sxtwl all
    /// have these dates; `LunarOracleTests` checks every month against them).
    static let reckonedInLocalTime: [(year: Int, month: Int, day: Int)] = [
        (1914, 11, 17),  // 10th month of 1914
        (1916, 2, 3),  // 1st month of 1916 (New Year)
        (1920, 11, 10),  // 10th month of 1920
    ]

    /// The number of months in the table.
    var monthCount: Int { monthCodes.count }

    /// The first day the table covers and the day after the last.
    var firstDay: Int64 { Int64(monthStarts[0]) }
    var endDay: Int64 { Int64(monthStarts[monthStarts.count - 1]) }

    /// The index of the month holding `day`, which must be in `firstDay..<endDay`.
    func monthIndex(containing day: Int64) -> Int {
        var low = 0
        var high = monthCount - 1
        while low < high {
            let mid = (low + high + 1) >> 1
            if Int64(monthStarts[mid]) <= day { low = mid } else { high = mid - 1 }
        }
        return low
    }

    /// The index (0 for 1901) of the year holding month `index`.
    func yearIndex(ofMonth index: Int) -> Int {
        var low = 0
        var high = yearStarts.count - 2
        while low < high {
            let mid = (low + high + 1) >> 1
            if Int(yearStarts[mid]) <= index { low = mid } else { high = mid - 1 }
        }
        return low
    }

    /// Month `index`.
    func month(_ index: Int) -> CalendarMonth {
        let code = monthCodes[index]
        let first = Int64(monthStarts[index])
        return CalendarMonth(
            number: Int(code >> 1),
            isLeap: code & 1 == 1,
            firstDay: first,
            length: Int(Int64(monthStarts[index + 1]) - first)
        )
    }

    /// The month indexes of year `year` (an index, 0 for 1901).
    func months(ofYear year: Int) -> Range<Int> { Int(yearStarts[year])..<Int(yearStarts[year + 1]) }

    /// The Chinese date of `day` (days since 1970-01-01): its year (by New Year's Gregorian year), month,
    /// whether the month is a leap month, and day; nil outside the table.
    public func date(ofDay day: Int64) -> (year: Int, month: Int, isLeapMonth: Bool, day: Int)? {
        guard day >= firstDay && day < endDay else { return nil }
        let index = monthIndex(containing: day)
        let m = month(index)
        return (years.lowerBound + yearIndex(ofMonth: index), m.number, m.isLeap, Int(day - m.firstDay) + 1)
    }

    /// The Gregorian day (days since 1970-01-01) of a Chinese date, nil when that year has no such month or
    /// the month no such day.
    public func day(year: Int, month: Int, isLeapMonth: Bool, day: Int) -> Int64? {
        guard Self.years.contains(year) else { return nil }
        for index in months(ofYear: year - years.lowerBound) {
            let m = self.month(index)
            if m.number == month && m.isLeap == isLeapMonth {
                return day >= 1 && day <= m.length ? m.firstDay + Int64(day - 1) : nil
            }
        }
        return nil
    }

    private var years: ClosedRange<Int> { Self.years }
}

/// One month of a rule's calendar: its number (1...12), whether it is a leap month, its first day (days since
/// 1970-01-01) and its length in days.
struct CalendarMonth: Hashable, Sendable {
    var number: Int
    var isLeap: Bool
    var firstDay: Int64
    var length: Int
}
