import Foundation
import Testing

@testable import ChimeTime

/// Vectors from `Fixtures/generate_lunar_vectors.py` (lunardate, lunar-python, and sxtwl where the first two
/// disagree): the Chinese calendar's months for the years 1901...2099, and the dates of `RSCALE=CHINESE` rules
/// over all of them.
@Suite struct LunarOracleTests {
    struct Vectors: Decodable {
        struct Rule: Decodable {
            var label: String
            var rule: String
            var start: String?
            var zone: String
            var dates: [String]
        }
        struct Disagreement: Decodable {
            var year: Int
        }
        var years: [Int]
        var months: [[JSONNumberOrString]]
        var rules: [Rule]
        var disagreements: [Disagreement]
    }

    /// A row of "months": numbers and one date string.
    enum JSONNumberOrString: Decodable {
        case number(Int)
        case text(String)
        init(from decoder: any Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let n = try? c.decode(Int.self) { self = .number(n) } else { self = .text(try c.decode(String.self)) }
        }
        var int: Int? { if case .number(let n) = self { n } else { nil } }
        var text: String? { if case .text(let t) = self { t } else { nil } }
    }

    /// An oracle month: year, number, leap, first day (days since 1970), length.
    struct Month: Equatable, CustomStringConvertible {
        var year: Int
        var number: Int
        var isLeap: Bool
        var firstDay: Int64
        var length: Int
        var description: String {
            "\(year) \(number)\(isLeap ? "L" : "") from \(LocalDateTime(secondsSinceEpoch: firstDay * 86_400)), \(length) days"
        }
    }

    static func day(_ iso: String) -> Int64 {
        let p = iso.prefix(10).split(separator: "-").map { Int($0)! }
        return daysFromCivil(year: p[0], month: p[1], day: p[2])
    }

    static let vectors: Vectors = {
        do { return try loadFixture("lunar_vectors", as: Vectors.self) } catch { fatalError("lunar_vectors: \(error)") }
    }()

    static let oracleMonths: [Month] = vectors.months.map { row in
        Month(
            year: row[0].int!,
            number: row[1].int!,
            isLeap: row[2].int! == 1,
            firstDay: day(row[3].text!),
            length: row[4].int!
        )
    }

    /// The oracles' date of a day, as ``Recurrence/calendarDate(of:)`` writes it.
    static func oracleCalendarDate(_ day: Int64) -> String? {
        guard let month = oracleMonths.last(where: { $0.firstDay <= day }), day < month.firstDay + Int64(month.length)
        else { return nil }
        return "\(month.number)\(month.isLeap ? "L" : "")-\(day - month.firstDay + 1)"
    }

    @Test func theVectorsCoverEveryYear() {
        #expect(Self.vectors.years == [1901, 2099])
        #expect(Set(Self.oracleMonths.map(\.year)) == Set(1901...2099))
        #expect(Self.oracleMonths.count == 2461)
        // Years with a leap month have 13 months: 73 of the 199.
        let leapYears = Set(Self.oracleMonths.filter(\.isLeap).map(\.year))
        #expect(leapYears.count == 73)
        #expect(Self.vectors.disagreements.map(\.year) == [1933, 1954, 1978, 2057])
    }

    /// Every month of the table Chime reads from Foundation is the oracles' month: number, leap, first day and
    /// length, 1901...2099.
    @Test func foundationTableMatchesTheOracles() throws {
        let started = ContinuousClock.now
        let table = try #require(ChineseCalendar.fromFoundation())
        print("Chinese calendar table from Foundation: \(ContinuousClock.now - started)")
        var mismatches: [String] = []
        #expect(table.monthCount == Self.oracleMonths.count)
        for (index, want) in Self.oracleMonths.enumerated() where index < table.monthCount {
            let m = table.month(index)
            let got = Month(
                year: 1901 + table.yearIndex(ofMonth: index),
                number: m.number,
                isLeap: m.isLeap,
                firstDay: m.firstDay,
                length: m.length
            )
            if got != want { mismatches.append("got \(got), want \(want)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) months differ: \(mismatches.prefix(10))")
        #expect(table.firstDay == daysFromCivil(year: 1901, month: 2, day: 19))
        #expect(table.endDay == daysFromCivil(year: 2100, month: 2, day: 9))
    }

    /// The public conversions agree with the oracles on every day of the table.
    @Test func dayConversionsMatchTheOracles() throws {
        let table = try #require(ChineseCalendar.shared)
        var checked = 0
        for m in Self.oracleMonths {
            for d in 1...m.length {
                let day = m.firstDay + Int64(d - 1)
                let got = table.date(ofDay: day)
                #expect(got?.year == m.year && got?.month == m.number && got?.isLeapMonth == m.isLeap && got?.day == d)
                #expect(table.day(year: m.year, month: m.number, isLeapMonth: m.isLeap, day: d) == day)
                checked += 1
            }
            if m.length == 29 {
                #expect(table.day(year: m.year, month: m.number, isLeapMonth: m.isLeap, day: 30) == nil)
            }
        }
        #expect(checked > 72_000)
        #expect(table.date(ofDay: table.firstDay - 1) == nil && table.date(ofDay: table.endDay) == nil)
    }

    /// Each rule, from its first occurrence to the end of the table, fires on exactly the oracles' dates, at
    /// 09:00 in the zone, and its calendar date is the oracles' date of that day.
    @Test func rulesMatchTheOracles() throws {
        var failures: [String] = []
        var dates = 0
        for v in Self.vectors.rules {
            let rule = try RecurrenceRule(parsing: v.rule)
            let z = zone(v.zone)
            guard let start = v.start else {
                // No year of the table has the month it names: the rule never fires.
                let recurrence = try Recurrence(start: wall("2026-01-01T09:00"), zone: z, pattern: .rule(rule))
                #expect(try recurrence.first(atOrAfter: .distantPast) == nil, "\(v.label)")
                continue
            }
            let recurrence = try Recurrence(start: wall(start), zone: z, pattern: .rule(rule))
            var got: [String] = []
            var occurrence = try recurrence.first(atOrAfter: .distantPast)
            while let current = occurrence {
                let local = z.localDateTime(at: current.instant)
                got.append(String(local.description.prefix(10)))
                if local.hour != 9 || local.minute != 0 { failures.append("\(v.label): \(local) is not at 09:00") }
                let day = daysFromCivil(year: local.year, month: local.month, day: local.day)
                if recurrence.calendarDate(of: current) != Self.oracleCalendarDate(day) {
                    failures.append(
                        "\(v.label): calendarDate \(recurrence.calendarDate(of: current) ?? "nil") on \(local)"
                    )
                }
                #expect(current.index == got.count, "\(v.label)")
                occurrence = try recurrence.next(after: current)
            }
            if got != v.dates {
                let first = zip(got, v.dates).first { $0 != $1 }
                failures.append(
                    "\(v.label): \(got.count) dates, want \(v.dates.count); first difference \(String(describing: first))"
                )
            }
            dates += got.count
        }
        #expect(failures.isEmpty, "\(failures.count) failures: \(failures.prefix(10))")
        #expect(dates > 20_000)
    }

    /// Searching from any point finds the oracles' next date (the period jump counts the years before it).
    @Test func firstAtOrAfterMatchesTheOracles() throws {
        for v in Self.vectors.rules {
            guard let start = v.start, v.dates.count > 2 else { continue }
            let z = zone("Asia/Shanghai")
            let recurrence = try Recurrence(start: wall(start), zone: z, pattern: rule(v.rule))
            for (n, date) in v.dates.enumerated() where n % 7 == 3 {
                // The day before the oracles' n-th date, at noon: the next occurrence is that date.
                let from = z.instant(for: LocalDateTime(secondsSinceEpoch: (Self.day(date) - 1) * 86_400 + 43_200))
                let got = try recurrence.first(atOrAfter: from)
                #expect(got?.index == n + 1, "\(v.label) from \(from)")
                #expect(got.map { String(z.localDateTime(at: $0.instant).description.prefix(10)) } == date)
            }
        }
    }
}
