import Testing

@testable import ChimeTime

/// Pathological rules: each call returns (an occurrence, nil, or `.searchLimit`) within a fixed budget.
/// The time limits are generous because tests run unoptimised on a shared machine; the release benchmark
/// measures the real cost.
@Suite struct NeverHangsTests {
    enum Outcome: Sendable, Equatable {
        /// The first occurrence at or after the start's instant, as RFC 3339.
        case fires(String)
        case never
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var rule: String
        var start = "2026-01-01T09:15:30"
        /// Where the search starts (RFC 3339), when not at the start.
        var from: String?
        var outcome: Outcome
        var testDescription: String { "\(rule) from \(start)" }
    }

    static let cases: [Case] = [
        Case(rule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", outcome: .never),
        Case(rule: "FREQ=MONTHLY;BYMONTH=4,6,9,11;BYMONTHDAY=31", outcome: .never),
        Case(rule: "FREQ=YEARLY;BYWEEKNO=53;BYMONTH=6", outcome: .never),
        Case(rule: "FREQ=YEARLY;BYYEARDAY=366;BYMONTH=1", outcome: .never),
        Case(rule: "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=7", outcome: .never),
        Case(rule: "FREQ=DAILY;BYSECOND=44;BYSETPOS=-2", outcome: .never),
        Case(rule: "FREQ=WEEKLY;INTERVAL=20871;BYMONTH=2", start: "2026-06-01T10:00:00", outcome: .never),
        Case(rule: "FREQ=DAILY;INTERVAL=146097;BYMONTH=2", start: "2026-06-01T10:00:00", outcome: .never),
        Case(rule: "FREQ=DAILY;INTERVAL=7;BYDAY=SU,WE", start: "2023-04-10T00:00:00", outcome: .never),
        Case(rule: "FREQ=MONTHLY;INTERVAL=12;BYMONTHDAY=30", start: "2026-02-01T10:00:00", outcome: .never),
        Case(rule: "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30", outcome: .never),
        Case(rule: "FREQ=HOURLY;BYMONTH=4;BYMONTHDAY=31;BYHOUR=9", outcome: .never),
        // Sub-daily periods that never line up with the allowed times of day (proven by a congruence).
        Case(rule: "FREQ=SECONDLY;INTERVAL=2;BYSECOND=1", start: "2026-01-01T09:15:30", outcome: .never),
        Case(rule: "FREQ=HOURLY;INTERVAL=48;BYHOUR=5", start: "2026-01-01T04:00:00", outcome: .never),
        Case(rule: "FREQ=MINUTELY;INTERVAL=120;BYMINUTE=1", start: "2026-01-01T04:00:00", outcome: .never),
        Case(rule: "FREQ=HOURLY;INTERVAL=168;BYDAY=TU", start: "2026-01-05T04:00:00", outcome: .never),
        Case(
            rule: "FREQ=SECONDLY;INTERVAL=86401;BYSECOND=7;BYMONTH=2;BYMONTHDAY=29",
            outcome: .fires("2480-02-29T07:20:07Z")
        ),
        // COUNT used up, UNTIL before the start.
        Case(rule: "FREQ=DAILY;COUNT=3", start: "2000-01-01T10:00:00", from: "2026-01-01T00:00:00Z", outcome: .never),
        Case(rule: "FREQ=DAILY;UNTIL=20000101T000000Z", outcome: .never),
        Case(rule: "FREQ=DAILY;UNTIL=20251231", outcome: .never),
        // Rare but real: February 29 on a Monday comes every 28 years or so.
        Case(rule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", outcome: .fires("2044-02-29T09:15:30Z")),
        Case(rule: "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", outcome: .fires("2044-02-29T09:15:30Z")),
        Case(rule: "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=9", outcome: .fires("2044-02-29T09:15:30Z")),
        Case(
            rule: "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=9;BYMINUTE=15",
            outcome: .fires("2044-02-29T09:15:30Z")
        ),
        Case(
            rule: "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=9;BYMINUTE=15;BYSECOND=30",
            outcome: .fires("2044-02-29T09:15:30Z")
        ),
        Case(rule: "FREQ=MONTHLY;BYDAY=5FR;BYMONTH=2", outcome: .fires("2036-02-29T09:15:30Z")),
        Case(rule: "FREQ=YEARLY;BYDAY=53FR", outcome: .fires("2027-12-31T09:15:30Z")),
        Case(rule: "FREQ=MINUTELY;INTERVAL=7;BYHOUR=3;BYMINUTE=1", outcome: .fires("2026-01-03T03:01:30Z")),
        // Huge numbers.
        Case(rule: "FREQ=YEARLY;INTERVAL=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        Case(rule: "FREQ=SECONDLY;INTERVAL=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        Case(rule: "FREQ=DAILY;COUNT=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        Case(rule: "FREQ=SECONDLY;COUNT=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        // The end of the calendar.
        Case(rule: "FREQ=HOURLY", start: "9999-12-31T23:00:00", outcome: .fires("9999-12-31T23:00:00Z")),
        Case(rule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", start: "9999-01-01T00:00:00", outcome: .never),
        Case(rule: "FREQ=MONTHLY;BYMONTHDAY=31", start: "9999-12-01T00:00:00", outcome: .fires("9999-12-31T00:00:00Z")),
        Case(rule: "FREQ=WEEKLY;BYDAY=SU", start: "9999-12-31T00:00:00", outcome: .never),
        Case(rule: "FREQ=DAILY", start: "0001-01-01T00:00:00", outcome: .fires("0001-01-01T00:00:00Z")),
    ]

    @Test(arguments: cases)
    func bounded(_ c: Case) throws {
        let start = wall(c.start)
        let recurrence = try Recurrence(start: start, zone: .utc, pattern: rule(c.rule))
        let clock = ContinuousClock()
        let began = clock.now
        var first: Occurrence?
        var limited = false
        do {
            first = try recurrence.first(atOrAfter: c.from.map(at) ?? start.resolved(in: .utc))
        } catch {
            #expect(error.code == .searchLimit)
            limited = true
        }
        switch c.outcome {
        case .fires(let text):
            #expect(first?.instant == at(text))
            if let first { _ = try? recurrence.next(after: first) }
            _ = try? recurrence.first(atOrAfter: at("2999-06-01T00:00:00Z"))
        case .never:
            #expect(first == nil && !limited)
            if c.from == nil { #expect(try recurrence.smallestSpacing() == nil) }
        }
        _ = try? recurrence.smallestSpacing()
        _ = try? recurrence.first(atOrAfter: at("9999-12-31T23:59:59Z"))
        #expect(clock.now - began < .seconds(20), "took \(clock.now - began)")
    }

    @Test func searchLimitIsAnErrorWithAMessage() throws {
        let recurrence = try Recurrence(
            start: wall("2026-01-01T09:15:30"),
            zone: .utc,
            pattern: rule("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO")
        )
        let from = at("2026-01-01T00:00:00Z")
        do {
            _ = try recurrence.first(atOrAfter: from, budgetSteps: 50)
            Issue.record("the search should have run out of budget")
        } catch {
            #expect(error == RecurrenceError(.searchLimit))
            #expect(error.message.contains("budget"))
        }
        #expect(try recurrence.first(atOrAfter: from)?.instant == at("2044-02-29T09:15:30Z"))
    }
}
