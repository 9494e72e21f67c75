import ChimeTime
import Testing

/// Random rule texts and forged occurrences: nothing may crash, and every call stays within its budget.
@Suite struct RobustnessTests {
    struct Random {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        mutating func pick<T>(_ values: [T]) -> T { values[next(values.count)] }
    }

    static let parts = [
        "INTERVAL", "COUNT", "UNTIL", "BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO",
        "BYMONTH", "BYSETPOS", "WKST",
    ]
    static let values = [
        "0", "1", "2", "-1", "7", "13", "31", "-31", "53", "-53", "59", "60", "366", "-366", "1000000000", "MO", "-1FR",
        "2TU,TH", "SU", "20261201", "20261201T100000Z", "99991231T235959", "1,,2", "", "x", "5,4,5",
    ]

    @Test func randomRulesNeverCrash() throws {
        var random = Random(state: 5545)
        let zones = ["UTC", "America/New_York", "Pacific/Apia", "Australia/Lord_Howe"].map(zone)
        var parsed = 0
        for _ in 0..<1500 {
            var text =
                "FREQ=" + random.pick(["SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"])
            for _ in 0..<random.next(4) {
                text += ";\(random.pick(Self.parts))=\(random.pick(Self.values))"
            }
            guard let rule = try? RecurrenceRule(parsing: text) else { continue }
            parsed += 1
            #expect(try RecurrenceRule(parsing: rule.description) == rule)
            let start = wall(
                random.pick(["2026-03-08T02:30", "9999-12-30T00:00", "0001-01-01T00:00", "2011-12-29T10:00"])
            )
            let recurrence: Recurrence
            do {
                recurrence = try Recurrence(start: start, zone: random.pick(zones), pattern: .rule(rule))
            } catch {
                // 0001-01-01T00:00 east of UTC is before the year 1.
                #expect(error.code == .invalidCombination)
                continue
            }
            do {
                var occurrence = try recurrence.first(atOrAfter: at("2026-06-01T00:00:00Z"))
                for _ in 0..<3 {
                    guard let current = occurrence else { break }
                    occurrence = try recurrence.next(after: current)
                    if let next = occurrence { #expect(next.instant > current.instant) }
                }
            } catch {
                #expect(error.code == .searchLimit)
            }
        }
        #expect(parsed > 200)
    }

    @Test func forgedOccurrences() throws {
        let rule = try Recurrence(
            start: wall("2026-01-01T09:00"),
            zone: zone("Europe/Paris"),
            pattern: rule("FREQ=DAILY")
        )
        let daily = try Recurrence(
            start: wall("2026-01-01T09:00"),
            zone: zone("Europe/Paris"),
            pattern: .interval(.day)
        )
        let instants = [
            at("2026-01-05T08:00:00Z"), at("2026-01-05T08:00:00.5Z"), Instant.distantFuture, Instant.distantPast,
        ]
        for recurrence in [rule, daily] {
            for index in [Int.min, -1, 0, 1, 5, 1_000_000, Int.max] {
                for instant in instants {
                    let next = try recurrence.next(after: Occurrence(index: index, instant: instant))
                    if let next { #expect(next.instant > instant) }
                }
            }
            #expect(try recurrence.first(atOrAfter: Instant(milliseconds: .max)) == nil)
            #expect(try recurrence.first(atOrAfter: Instant(milliseconds: .min))?.index == 1)
        }
        // The real successor of a real occurrence keeps its numbering.
        #expect(try rule.next(after: Occurrence(index: 5, instant: at("2026-01-05T08:00:00Z")))?.index == 6)
    }
}
