import ChimeTime
import Testing

/// Wall-clock times in spring-forward gaps and fall-back overlaps, both directions, in zones with
/// 1-hour, 30-minute, southern-hemisphere, no DST, and a skipped day. Expected instants were computed with
/// Python `zoneinfo` (fold=0).
@Suite struct DSTTransitionTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var zone: String
        var start: String
        var pattern: String
        var expected: [String]
        var testDescription: String { "\(zone) \(start) \(pattern)" }
    }

    static let dailyKeepsWallClock: [Case] = [
        // New York: 2026-03-08 02:00 EST -> 03:00 EDT; 2026-11-01 02:00 EDT -> 01:00 EST.
        Case(
            zone: "America/New_York",
            start: "2026-03-07T02:30",
            pattern: "day",
            expected: ["#1 2026-03-07T07:30:00Z", "#2 2026-03-08T07:30:00Z", "#3 2026-03-09T06:30:00Z"]
        ),
        Case(
            zone: "America/New_York",
            start: "2026-10-31T01:30",
            pattern: "day",
            expected: ["#1 2026-10-31T05:30:00Z", "#2 2026-11-01T05:30:00Z", "#3 2026-11-02T06:30:00Z"]
        ),
        // Paris: 2026-03-29 02:00 -> 03:00; 2026-10-25 03:00 -> 02:00.
        Case(
            zone: "Europe/Paris",
            start: "2026-03-28T02:30",
            pattern: "day",
            expected: ["#1 2026-03-28T01:30:00Z", "#2 2026-03-29T01:30:00Z", "#3 2026-03-30T00:30:00Z"]
        ),
        Case(
            zone: "Europe/Paris",
            start: "2026-10-24T02:30",
            pattern: "weekday",
            expected: ["#1 2026-10-24T00:30:00Z", "#2 2026-10-25T00:30:00Z", "#3 2026-10-26T01:30:00Z"]
        ),
        // Lord Howe moves by 30 minutes: 2026-10-04 02:00 -> 02:30; 2026-04-05 02:00 -> 01:30.
        Case(
            zone: "Australia/Lord_Howe",
            start: "2026-10-03T02:15",
            pattern: "day",
            expected: ["#1 2026-10-02T15:45:00Z", "#2 2026-10-03T15:45:00Z", "#3 2026-10-04T15:15:00Z"]
        ),
        Case(
            zone: "Australia/Lord_Howe",
            start: "2026-04-04T01:45",
            pattern: "day",
            expected: ["#1 2026-04-03T14:45:00Z", "#2 2026-04-04T14:45:00Z", "#3 2026-04-05T15:15:00Z"]
        ),
        // Southern hemisphere: Sydney springs forward in October, Santiago at midnight in September.
        Case(
            zone: "Australia/Sydney",
            start: "2026-10-03T02:30",
            pattern: "day",
            expected: ["#1 2026-10-02T16:30:00Z", "#2 2026-10-03T16:30:00Z", "#3 2026-10-04T15:30:00Z"]
        ),
        Case(
            zone: "Australia/Sydney",
            start: "2026-04-04T02:30",
            pattern: "day",
            expected: ["#1 2026-04-03T15:30:00Z", "#2 2026-04-04T15:30:00Z", "#3 2026-04-05T16:30:00Z"]
        ),
        Case(
            zone: "America/Santiago",
            start: "2026-09-05T00:30",
            pattern: "day",
            expected: ["#1 2026-09-05T04:30:00Z", "#2 2026-09-06T04:30:00Z", "#3 2026-09-07T03:30:00Z"]
        ),
        Case(
            zone: "America/Santiago",
            start: "2026-04-03T23:30",
            pattern: "day",
            expected: ["#1 2026-04-04T02:30:00Z", "#2 2026-04-05T02:30:00Z", "#3 2026-04-06T03:30:00Z"]
        ),
        // No DST: the same UTC time every day.
        Case(
            zone: "Asia/Shanghai",
            start: "2026-03-07T02:30",
            pattern: "day",
            expected: ["#1 2026-03-06T18:30:00Z", "#2 2026-03-07T18:30:00Z", "#3 2026-03-08T18:30:00Z"]
        ),
        // Apia skipped 2011-12-30: its 10:00 moves a whole day forward, onto the 31st's, and counts once.
        Case(
            zone: "Pacific/Apia",
            start: "2011-12-29T10:00",
            pattern: "day",
            expected: ["#1 2011-12-29T20:00:00Z", "#2 2011-12-30T20:00:00Z", "#4 2011-12-31T20:00:00Z"]
        ),
        // Weekly and monthly keep the wall clock across the change.
        Case(
            zone: "America/New_York",
            start: "2026-03-01T09:00",
            pattern: "weekOfYear",
            expected: ["#1 2026-03-01T14:00:00Z", "#2 2026-03-08T13:00:00Z", "#3 2026-03-15T13:00:00Z"]
        ),
        Case(
            zone: "America/New_York",
            start: "2026-02-15T09:00",
            pattern: "month",
            expected: ["#1 2026-02-15T14:00:00Z", "#2 2026-03-15T13:00:00Z", "#3 2026-04-15T13:00:00Z"]
        ),
        // Hourly is elapsed time: it does not skip or repeat an hour of real time.
        Case(
            zone: "America/New_York",
            start: "2026-03-08T00:30",
            pattern: "hour",
            expected: ["#1 2026-03-08T05:30:00Z", "#2 2026-03-08T06:30:00Z", "#3 2026-03-08T07:30:00Z"]
        ),
        Case(
            zone: "America/New_York",
            start: "2026-11-01T00:30",
            pattern: "hour",
            expected: ["#1 2026-11-01T04:30:00Z", "#2 2026-11-01T05:30:00Z", "#3 2026-11-01T06:30:00Z"]
        ),
        // A wall-clock start inside the gap fires moved forward, and keeps its wall-clock time after.
        Case(
            zone: "America/New_York",
            start: "2026-03-08T02:30",
            pattern: "day",
            expected: ["#1 2026-03-08T07:30:00Z", "#2 2026-03-09T06:30:00Z", "#3 2026-03-10T06:30:00Z"]
        ),
        // A start inside the gap is itself moved forward.
        Case(
            zone: "Europe/Paris",
            start: "2026-03-29T02:30",
            pattern: "hour",
            expected: ["#1 2026-03-29T01:30:00Z", "#2 2026-03-29T02:30:00Z", "#3 2026-03-29T03:30:00Z"]
        ),
    ]

    @Test(arguments: dailyKeepsWallClock)
    func repeatInterval(_ c: Case) throws {
        let unit = try #require(RepeatUnit(parsing: c.pattern))
        let recurrence = try Recurrence(start: wall(c.start), zone: zone(c.zone), pattern: .interval(unit))
        #expect(try listing(recurrence, limit: c.expected.count) == c.expected)
    }

    static let rules: [Case] = [
        Case(
            zone: "America/New_York",
            start: "2026-03-07T02:30",
            pattern: "FREQ=DAILY;COUNT=3",
            expected: ["#1 2026-03-07T07:30:00Z", "#2 2026-03-08T07:30:00Z", "#3 2026-03-09T06:30:00Z"]
        ),
        Case(
            zone: "Europe/Paris",
            start: "2026-10-24T02:30",
            pattern: "FREQ=DAILY;COUNT=3",
            expected: ["#1 2026-10-24T00:30:00Z", "#2 2026-10-25T00:30:00Z", "#3 2026-10-26T01:30:00Z"]
        ),
        // Wall-clock hours: 02:00 does not exist and becomes 03:00, which is also the 4th candidate's
        // instant: delivered once; the duplicate keeps its number and its COUNT slot.
        Case(
            zone: "America/New_York",
            start: "2026-03-08T00:00",
            pattern: "FREQ=HOURLY;COUNT=5",
            expected: [
                "#1 2026-03-08T05:00:00Z", "#2 2026-03-08T06:00:00Z", "#3 2026-03-08T07:00:00Z",
                "#5 2026-03-08T08:00:00Z",
            ]
        ),
        // Wall-clock hours in a fall-back: 01:00 means its first instant; the repeated hour is not visited.
        Case(
            zone: "America/New_York",
            start: "2026-11-01T00:00",
            pattern: "FREQ=HOURLY;COUNT=4",
            expected: [
                "#1 2026-11-01T04:00:00Z", "#2 2026-11-01T05:00:00Z", "#3 2026-11-01T07:00:00Z",
                "#4 2026-11-01T08:00:00Z",
            ]
        ),
        // Times moved out of the gap overtake later wall-clock times: delivered in time order.
        Case(
            zone: "America/New_York",
            start: "2026-03-08T01:00",
            pattern: "FREQ=MINUTELY;INTERVAL=25;COUNT=8",
            expected: [
                "#1 2026-03-08T06:00:00Z", "#2 2026-03-08T06:25:00Z", "#3 2026-03-08T06:50:00Z",
                "#6 2026-03-08T07:05:00Z", "#4 2026-03-08T07:15:00Z", "#7 2026-03-08T07:30:00Z",
                "#5 2026-03-08T07:40:00Z", "#8 2026-03-08T07:55:00Z",
            ]
        ),
        // Lord Howe's 30-minute gap: 02:00 and 02:15 become 02:30 and 02:45, which come again.
        Case(
            zone: "Australia/Lord_Howe",
            start: "2026-10-04T01:00",
            pattern: "FREQ=MINUTELY;INTERVAL=15;COUNT=8",
            expected: [
                "#1 2026-10-03T14:30:00Z", "#2 2026-10-03T14:45:00Z", "#3 2026-10-03T15:00:00Z",
                "#4 2026-10-03T15:15:00Z", "#5 2026-10-03T15:30:00Z", "#6 2026-10-03T15:45:00Z",
            ]
        ),
        Case(
            zone: "Pacific/Apia",
            start: "2011-12-29T10:00",
            pattern: "FREQ=DAILY;COUNT=4",
            expected: ["#1 2011-12-29T20:00:00Z", "#2 2011-12-30T20:00:00Z", "#4 2011-12-31T20:00:00Z"]
        ),
        Case(
            zone: "Australia/Sydney",
            start: "2026-10-03T02:30",
            pattern: "FREQ=DAILY;BYHOUR=2;BYMINUTE=30;COUNT=3",
            expected: ["#1 2026-10-02T16:30:00Z", "#2 2026-10-03T16:30:00Z", "#3 2026-10-04T15:30:00Z"]
        ),
        Case(
            zone: "America/Santiago",
            start: "2026-09-05T00:30",
            pattern: "FREQ=DAILY;COUNT=3",
            expected: ["#1 2026-09-05T04:30:00Z", "#2 2026-09-06T04:30:00Z", "#3 2026-09-07T03:30:00Z"]
        ),
        Case(
            zone: "Asia/Shanghai",
            start: "2026-03-07T02:30",
            pattern: "FREQ=DAILY;COUNT=3",
            expected: ["#1 2026-03-06T18:30:00Z", "#2 2026-03-07T18:30:00Z", "#3 2026-03-08T18:30:00Z"]
        ),
    ]

    @Test(arguments: rules)
    func rrule(_ c: Case) throws {
        let recurrence = try Recurrence(start: wall(c.start), zone: zone(c.zone), pattern: rule(c.pattern))
        let got = try listing(recurrence, limit: 20)
        #expect(got == c.expected)
        // Each is found again directly, and next(after:) from it agrees with the listing.
        for (n, line) in c.expected.enumerated() {
            let instant = at(String(line.split(separator: " ")[1]))
            let found = try recurrence.first(atOrAfter: instant)
            #expect(found.map { "#\($0.index) \($0.instant)" } == line)
            if let found, n + 1 < c.expected.count {
                #expect(try recurrence.next(after: found).map { "#\($0.index) \($0.instant)" } == c.expected[n + 1])
            }
        }
    }

    @Test func secondlyThroughAGap() throws {
        // 02:00:00...02:59:59 become 03:00:00...03:59:59 EDT; the real 03:xx:xx candidates repeat them.
        let ny = zone("America/New_York")
        let recurrence = try Recurrence(start: wall("2026-03-08T01:59:58"), zone: ny, pattern: rule("FREQ=SECONDLY"))
        let third = try #require(try recurrence.first(atOrAfter: at("2026-03-08T07:00:00Z")))
        #expect(third.index == 3)
        #expect(try recurrence.first(atOrAfter: at("2026-03-08T07:30:00Z"))?.index == 1803)
        let last = Occurrence(index: 3602, instant: at("2026-03-08T07:59:59Z"))
        #expect(try recurrence.first(atOrAfter: last.instant) == last)
        #expect(try recurrence.next(after: last) == Occurrence(index: 7203, instant: at("2026-03-08T08:00:00Z")))
        #expect(try recurrence.smallestSpacing() == 1)
    }

    @Test func firstAtOrAfterInsideAnOverlap() throws {
        // 01:30 happens twice on 2026-11-01 in New York; a daily 01:30 fires at the first one only.
        let ny = zone("America/New_York")
        let recurrence = try Recurrence(start: wall("2026-10-30T01:30"), zone: ny, pattern: rule("FREQ=DAILY"))
        let second = at("2026-11-01T06:30:00Z")  // the second 01:30 (EST)
        #expect(try recurrence.first(atOrAfter: second)?.instant == at("2026-11-02T06:30:00Z"))
        #expect(try recurrence.first(atOrAfter: at("2026-11-01T05:30:00Z"))?.index == 3)
    }
}
