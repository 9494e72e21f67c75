import ChimeTime
import Testing

/// Apple's `repeatInterval` units: occurrence k is the start plus k units, computed from the start.
@Suite struct RepeatIntervalTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var unit: RepeatUnit
        var start: String
        var zone = "UTC"
        var count: Int?
        var until: String?
        var exdates: [String] = []
        var expected: [String]
        var testDescription: String { "\(unit) from \(start) in \(zone)" }
    }

    static let cases: [Case] = [
        Case(
            unit: .year,
            start: "2024-02-29T08:00",
            expected: [
                "#1 2024-02-29T08:00:00Z", "#2 2025-02-28T08:00:00Z", "#3 2026-02-28T08:00:00Z",
                "#4 2027-02-28T08:00:00Z", "#5 2028-02-29T08:00:00Z",
            ]
        ),
        Case(
            unit: .quarter,
            start: "2025-11-30T12:00",
            expected: [
                "#1 2025-11-30T12:00:00Z", "#2 2026-02-28T12:00:00Z", "#3 2026-05-30T12:00:00Z",
                "#4 2026-08-30T12:00:00Z",
            ]
        ),
        Case(
            unit: .month,
            start: "2025-01-31T09:30",
            expected: [
                "#1 2025-01-31T09:30:00Z", "#2 2025-02-28T09:30:00Z", "#3 2025-03-31T09:30:00Z",
                "#4 2025-04-30T09:30:00Z", "#5 2025-05-31T09:30:00Z",
            ]
        ),
        Case(
            unit: .month,
            start: "2024-01-31T09:30",
            expected: ["#1 2024-01-31T09:30:00Z", "#2 2024-02-29T09:30:00Z", "#3 2024-03-31T09:30:00Z"]
        ),
        Case(
            unit: .weekOfYear,
            start: "2026-12-28T07:00",
            expected: ["#1 2026-12-28T07:00:00Z", "#2 2027-01-04T07:00:00Z", "#3 2027-01-11T07:00:00Z"]
        ),
        Case(
            unit: .day,
            start: "2026-02-27T23:59:59",
            expected: ["#1 2026-02-27T23:59:59Z", "#2 2026-02-28T23:59:59Z", "#3 2026-03-01T23:59:59Z"]
        ),
        Case(
            unit: .weekday,
            start: "2026-12-04T18:00",  // a Friday: Apple's weekday means every day
            expected: ["#1 2026-12-04T18:00:00Z", "#2 2026-12-05T18:00:00Z", "#3 2026-12-06T18:00:00Z"]
        ),
        Case(
            unit: .hour,
            start: "2026-12-31T22:30",
            expected: ["#1 2026-12-31T22:30:00Z", "#2 2026-12-31T23:30:00Z", "#3 2027-01-01T00:30:00Z"]
        ),
        Case(
            unit: .minute,
            start: "2026-06-01T10:59",
            expected: ["#1 2026-06-01T10:59:00Z", "#2 2026-06-01T11:00:00Z", "#3 2026-06-01T11:01:00Z"]
        ),
        Case(
            unit: .second,
            start: "2026-06-01T10:59:59",
            expected: ["#1 2026-06-01T10:59:59Z", "#2 2026-06-01T11:00:00Z", "#3 2026-06-01T11:00:01Z"]
        ),
        Case(
            unit: .day,
            start: "2026-06-01T08:00",
            count: 3,
            expected: ["#1 2026-06-01T08:00:00Z", "#2 2026-06-02T08:00:00Z", "#3 2026-06-03T08:00:00Z"]
        ),
        Case(
            unit: .day,
            start: "2026-06-01T08:00",
            until: "2026-06-03T08:00",
            expected: ["#1 2026-06-01T08:00:00Z", "#2 2026-06-02T08:00:00Z", "#3 2026-06-03T08:00:00Z"]
        ),
        Case(
            unit: .day,
            start: "2026-06-01T08:00",
            until: "2026-06-03T07:59:59Z",
            expected: ["#1 2026-06-01T08:00:00Z", "#2 2026-06-02T08:00:00Z"]
        ),
        // Exdates are skipped but keep their number and their place in the count.
        Case(
            unit: .day,
            start: "2026-06-01T08:00",
            count: 4,
            exdates: ["2026-06-02T08:00", "2026-06-04T08:00:00Z"],
            expected: ["#1 2026-06-01T08:00:00Z", "#3 2026-06-03T08:00:00Z"]
        ),
        Case(
            unit: .month,
            start: "2026-01-31T09:00",
            zone: "Europe/Paris",
            count: 4,
            expected: [
                "#1 2026-01-31T08:00:00Z", "#2 2026-02-28T08:00:00Z", "#3 2026-03-31T07:00:00Z",
                "#4 2026-04-30T07:00:00Z",
            ]
        ),
    ]

    @Test(arguments: cases)
    func table(_ c: Case) throws {
        let recurrence = try Recurrence(
            start: wall(c.start),
            zone: zone(c.zone),
            pattern: .interval(c.unit),
            count: c.count,
            until: c.until.map { try #require(DateTimeValue(iso8601: $0)) },
            exdates: c.exdates.map { try #require(DateTimeValue(iso8601: $0)) }
        )
        let got = try listing(recurrence, limit: c.expected.count + 1)
        if c.count != nil || c.until != nil {
            #expect(got == c.expected, "the series must end there")
        } else {
            #expect(Array(got.prefix(c.expected.count)) == c.expected)
        }
    }

    @Test func firstAtOrAfterJumpsAndNumbers() throws {
        let paris = zone("Europe/Paris")
        let monthly = try Recurrence(start: wall("2000-01-31T09:00"), zone: paris, pattern: .interval(.month))
        let found = try #require(try monthly.first(atOrAfter: at("2026-02-15T00:00:00Z")))
        #expect(found.index == 26 * 12 + 2)
        #expect(found.instant == at("2026-02-28T08:00:00Z"))
        let hourly = try Recurrence(start: wall("2020-01-01T00:00"), zone: paris, pattern: .interval(.hour))
        let h = try #require(try hourly.first(atOrAfter: at("2020-01-02T00:00:00.001Z")))
        // The start is 2019-12-31T23:00:00Z; 2020-01-02T00:00:00Z is occurrence 26, just missed.
        #expect(h.index == 27)
        #expect(h.instant == at("2020-01-02T01:00:00Z"))
        #expect(try hourly.first(atOrAfter: at("2019-12-31T22:59:59Z"))?.index == 1)
        #expect(try hourly.first(atOrAfter: at("2019-12-31T23:00:00.001Z"))?.index == 2)
    }

    @Test func instantStartKeepsItsMilliseconds() throws {
        let start = try #require(DateTimeValue(iso8601: "2026-12-01T09:45:00.004Z"))
        let daily = try Recurrence(start: start, zone: .utc, pattern: .interval(.day))
        #expect(try listing(daily, limit: 2) == ["#1 2026-12-01T09:45:00.004Z", "#2 2026-12-02T09:45:00.004Z"])
        let once = try Recurrence(start: start, zone: .utc, pattern: .once)
        #expect(try listing(once) == ["#1 2026-12-01T09:45:00.004Z"])
        #expect(try once.first(atOrAfter: at("2026-12-01T09:45:00.005Z")) == nil)
    }

    @Test func smallestSpacing() throws {
        let utc = Zone.utc
        func spacing(_ pattern: Recurrence.Pattern, count: Int? = nil, zone: Zone = utc) throws -> Int64? {
            try Recurrence(start: wall("2026-01-31T10:00"), zone: zone, pattern: pattern, count: count)
                .smallestSpacing()
        }
        #expect(try spacing(.once) == nil)
        #expect(try spacing(.interval(.second)) == 1)
        #expect(try spacing(.interval(.minute)) == 60)
        #expect(try spacing(.interval(.hour)) == 3600)
        #expect(try spacing(.interval(.day)) == 86_400)
        #expect(try spacing(.interval(.day), zone: zone("Europe/Paris")) == 82_800)  // the short day in March
        #expect(try spacing(.interval(.weekOfYear)) == 7 * 86_400)
        #expect(try spacing(.interval(.month)) == 28 * 86_400)
        #expect(try spacing(.interval(.day), count: 1) == nil)
        #expect(try spacing(try rule("FREQ=MINUTELY;INTERVAL=5;BYHOUR=9")) == 300)
        #expect(try spacing(try rule("FREQ=DAILY;BYHOUR=9,10;BYMINUTE=0,1")) == 60)
        #expect(try spacing(try rule("FREQ=YEARLY;COUNT=1")) == nil)
    }

    @Test func unitNames() {
        #expect(RepeatUnit(parsing: "week") == .weekOfYear)
        #expect(RepeatUnit(parsing: "weekOfYear") == .weekOfYear)
        #expect(RepeatUnit(parsing: "quarter") == .quarter)
        #expect(RepeatUnit(parsing: "none") == nil)
        #expect(RepeatUnit(parsing: "Day") == nil)
        #expect(RepeatUnit.allCases.count == 9)
    }

    @Test func invalidCombinations() throws {
        let start = wall("2026-01-01T10:00")
        #expect(throws: RecurrenceError(.invalidCombination)) {
            try Recurrence(start: start, zone: .utc, pattern: rule("FREQ=DAILY"), count: 3)
        }
        #expect(throws: RecurrenceError(.invalidCombination)) {
            try Recurrence(start: start, zone: .utc, pattern: rule("FREQ=DAILY"), until: start)
        }
        #expect(throws: RecurrenceError(.invalidCombination)) {
            try Recurrence(start: start, zone: .utc, pattern: .interval(.day), count: 0)
        }
    }
}
