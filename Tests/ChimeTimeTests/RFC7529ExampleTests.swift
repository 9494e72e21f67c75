import ChimeTime
import Testing

/// RFC 7529's examples that Chime's calendars can express (section 4.3: the Chinese New Year, February 29
/// with `SKIP=FORWARD`; the Ethiopic and Hebrew ones are refused), and the month-end cases its `SKIP` section
/// describes (the 31st of every month, February 29 every year, with each `SKIP`), with their dates typed in.
/// DTSTART is a date in the RFC; here it is 09:00 in UTC.
@Suite struct RFC7529ExampleTests {
    struct Example: Sendable, CustomTestStringConvertible {
        var title: String
        var start: String
        var rule: String
        /// The first dates, `YYYY-MM-DD`, separated by spaces.
        var expected: String
        var testDescription: String { title }
    }

    static let examples: [Example] = [
        Example(
            title: "4.3.1 Chinese New Year",
            start: "2013-02-10",
            rule: "RSCALE=CHINESE;FREQ=YEARLY",
            expected: """
                2013-02-10 2014-01-31 2015-02-19 2016-02-08 2017-01-28 2018-02-16 2019-02-05 2020-01-25
                2021-02-12 2022-02-01
                """
        ),
        Example(
            title: "4.3.4 February 29, SKIP=FORWARD",
            start: "2012-02-29",
            rule: "RSCALE=GREGORIAN;FREQ=YEARLY;SKIP=FORWARD",
            expected: """
                2012-02-29 2013-03-01 2014-03-01 2015-03-01 2016-02-29 2017-03-01 2018-03-01 2019-03-01
                2020-02-29 2021-03-01
                """
        ),
        Example(
            title: "February 29, SKIP=BACKWARD",
            start: "2012-02-29",
            rule: "RSCALE=GREGORIAN;FREQ=YEARLY;SKIP=BACKWARD",
            expected: "2012-02-29 2013-02-28 2014-02-28 2015-02-28 2016-02-29 2017-02-28"
        ),
        Example(
            title: "February 29, SKIP=OMIT (RFC 5545's behaviour)",
            start: "2012-02-29",
            rule: "RSCALE=GREGORIAN;FREQ=YEARLY;SKIP=OMIT",
            expected: "2012-02-29 2016-02-29 2020-02-29 2024-02-29"
        ),
        Example(
            title: "the 31st of every month, SKIP=OMIT",
            start: "2014-01-31",
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;COUNT=4",
            expected: "2014-01-31 2014-03-31 2014-05-31 2014-07-31"
        ),
        Example(
            title: "the 31st of every month, SKIP=BACKWARD",
            start: "2014-01-31",
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;SKIP=BACKWARD;COUNT=4",
            expected: "2014-01-31 2014-02-28 2014-03-31 2014-04-30"
        ),
        Example(
            title: "the 31st of every month, SKIP=FORWARD",
            start: "2014-01-31",
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;SKIP=FORWARD;COUNT=4",
            expected: "2014-01-31 2014-03-01 2014-03-31 2014-05-01"
        ),
        Example(
            title: "the 31st of every third month, SKIP=FORWARD",
            start: "2014-01-31",
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;INTERVAL=3;SKIP=FORWARD;COUNT=4",
            expected: "2014-01-31 2014-05-01 2014-07-31 2014-10-31"
        ),
        Example(
            title: "BYMONTHDAY=31 with SKIP=BACKWARD: the last day of every month",
            start: "2024-01-01",
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=BACKWARD;COUNT=6",
            expected: "2024-01-31 2024-02-29 2024-03-31 2024-04-30 2024-05-31 2024-06-30"
        ),
        Example(
            title: "February 28 and 29 forward: March 1 once in a common year",
            start: "2015-02-01",
            rule: "RSCALE=GREGORIAN;FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=28,29;SKIP=FORWARD;COUNT=5",
            expected: "2015-02-28 2015-03-01 2016-02-28 2016-02-29 2017-02-28"
        ),
        Example(
            title: "the 30th and 31st backward: February 28 once",
            start: "2025-01-01",
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=30,31;SKIP=BACKWARD;COUNT=5",
            expected: "2025-01-30 2025-01-31 2025-02-28 2025-03-30 2025-03-31"
        ),
        Example(
            title: "the 1st and 31st forward: March 1 once",
            start: "2026-01-31",
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=1,31;SKIP=FORWARD;COUNT=5",
            expected: "2026-01-31 2026-02-01 2026-03-01 2026-03-31 2026-04-01"
        ),
        Example(
            title: "SKIP before BYDAY: the 31st or the month's end, on a Saturday",
            start: "2026-01-31",
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;BYDAY=SA;SKIP=BACKWARD;COUNT=4",
            expected: "2026-01-31 2026-02-28 2026-10-31 2027-07-31"
        ),
    ]

    @Test(arguments: examples)
    func example(_ e: Example) throws {
        let recurrence = try Recurrence(start: wall(e.start + "T09:00"), zone: .utc, pattern: rule(e.rule))
        let expected = e.expected.split(whereSeparator: \.isWhitespace).map(String.init)
        var got: [String] = []
        var occurrence = try recurrence.first(atOrAfter: .distantPast)
        while let current = occurrence, got.count < expected.count + 1 {
            got.append(String(Zone.utc.localDateTime(at: current.instant).description.prefix(10)))
            occurrence = try recurrence.next(after: current)
        }
        if e.rule.contains("COUNT=") {
            #expect(got == expected)
        } else {
            #expect(Array(got.prefix(expected.count)) == expected)
        }
    }

    /// Searching from a time finds what counting from DTSTART finds, with its index, also when
    /// `SKIP=FORWARD` moves a missing day into the next month (the 31st of April on May 1, before
    /// May's own 2nd), or a year's last missing day into the next year.
    @Test(arguments: [
        ("2026-01-31", "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=2,31;SKIP=FORWARD"),
        ("2026-01-31", "RSCALE=GREGORIAN;FREQ=MONTHLY;SKIP=FORWARD"),
        ("2012-02-29", "RSCALE=GREGORIAN;FREQ=YEARLY;SKIP=FORWARD"),
        ("2014-01-31", "RSCALE=GREGORIAN;FREQ=MONTHLY;INTERVAL=3;SKIP=FORWARD"),
        ("2025-12-31", "RSCALE=GREGORIAN;FREQ=YEARLY;BYMONTH=2,12;BYMONTHDAY=31;SKIP=FORWARD"),
        ("2025-01-30", "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=30,31;SKIP=BACKWARD"),
    ])
    func aSearchFromAnyTimeFindsWhatCountingFinds(_ start: String, _ text: String) throws {
        let recurrence = try Recurrence(start: wall(start + "T02:30"), zone: .utc, pattern: rule(text))
        var counted: [Occurrence] = []
        var occurrence = try recurrence.first(atOrAfter: .distantPast)
        while let current = occurrence, counted.count < 40 {
            counted.append(current)
            occurrence = try recurrence.next(after: current)
        }
        #expect(counted.count == 40)
        for (previous, current) in zip([nil] + counted.map(Optional.some), counted) {
            #expect(try recurrence.first(atOrAfter: current.instant) == current, "at \(current.instant)")
            // Just after the previous one: the same, not one further on.
            if let previous {
                let justAfter = Instant(milliseconds: previous.instant.milliseconds + 1)
                #expect(try recurrence.first(atOrAfter: justAfter) == current, "after \(previous.instant)")
            }
        }
    }

    /// Section 4.3.2 (Ethiopic) and 4.3.3 (Hebrew) use calendars Chime does not support: refused, naming them.
    @Test(arguments: [
        "RSCALE=ETHIOPIC;FREQ=MONTHLY;BYMONTH=13",
        "RSCALE=HEBREW;FREQ=YEARLY;BYMONTH=5L;BYMONTHDAY=8;SKIP=FORWARD",
    ])
    func otherCalendarsAreRefused(_ text: String) {
        #expect(throws: RecurrenceError(.invalidRule)) { try RecurrenceRule(parsing: text) }
        do {
            _ = try RecurrenceRule(parsing: text)
        } catch {
            #expect(error.message.contains("is not supported (supported: GREGORIAN, CHINESE)"))
        }
    }

    /// `RSCALE=GREGORIAN` without `SKIP` (or with `SKIP=OMIT`) is plain RFC 5545: the same dates as the rule
    /// without it.
    @Test(arguments: [
        "FREQ=MONTHLY;BYMONTHDAY=31", "FREQ=YEARLY", "FREQ=MONTHLY;BYDAY=-1FR", "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO",
        "FREQ=DAILY;BYMONTH=2",
    ])
    func gregorianWithoutSkipIsRFC5545(_ text: String) throws {
        for start in ["2012-02-29T09:00", "2014-01-31T09:00"] {
            let plain = try Recurrence(start: wall(start), zone: .utc, pattern: rule(text))
            for prefix in ["RSCALE=GREGORIAN;", "RSCALE=GREGORIAN;SKIP=OMIT;"] {
                let scaled = try Recurrence(start: wall(start), zone: .utc, pattern: rule(prefix + text))
                #expect(try listing(scaled, limit: 12) == listing(plain, limit: 12))
            }
        }
    }

    /// A wall-clock time in a spring-forward gap moves forward, as for any rule: a Chinese rule at 02:30 in
    /// New York on the night the clocks go forward fires at 03:30.
    @Test func dstGapFollowsTheUsualRule() throws {
        // 2026-03-08 is the 20th of the 1st Chinese month of 2026 (New Year was 2026-02-17).
        let recurrence = try Recurrence(
            start: wall("2026-03-08T02:30"),
            zone: zone("America/New_York"),
            pattern: rule("RSCALE=CHINESE;FREQ=YEARLY")
        )
        let first = try #require(try recurrence.first(atOrAfter: .distantPast))
        #expect(first.instant == at("2026-03-08T07:30:00Z"))  // 03:30 EDT
        #expect(recurrence.calendarDate(of: first) == "1-20")
    }

    @Test func calendarDateIsOnlyForOtherCalendars() throws {
        let gregorian = try Recurrence(
            start: wall("2026-01-31T09:00"),
            zone: .utc,
            pattern: rule("RSCALE=GREGORIAN;FREQ=MONTHLY;SKIP=BACKWARD")
        )
        let first = try #require(try gregorian.first(atOrAfter: .distantPast))
        #expect(gregorian.calendarDate(of: first) == nil)
    }

    /// DTSTART outside the Chinese calendar's table is refused, naming the range.
    @Test func chineseStartOutsideTheTableIsRefused() throws {
        for start in ["1901-02-18T09:00", "2100-02-09T09:00", "0001-01-01T00:00"] {
            let pattern = try rule("RSCALE=CHINESE;FREQ=YEARLY")
            do throws(RecurrenceError) {
                _ = try Recurrence(start: wall(start), zone: .utc, pattern: pattern)
                Issue.record("\(start) should be refused")
            } catch {
                #expect(error.code == .invalidRule)
                #expect(error.message.contains("RSCALE=CHINESE covers the Chinese years 1901...2099"))
            }
        }
        #expect(
            try Recurrence(start: wall("1901-02-19T00:00"), zone: .utc, pattern: rule("RSCALE=CHINESE;FREQ=YEARLY"))
                .first(atOrAfter: .distantPast) != nil
        )
    }

    /// The series ends with the table: the last Spring Festival is 2099's.
    @Test func chineseSeriesEndsWithTheTable() throws {
        let recurrence = try Recurrence(
            start: wall("2099-01-21T09:00"),
            zone: .utc,
            pattern: rule("RSCALE=CHINESE;FREQ=YEARLY")
        )
        let first = try #require(try recurrence.first(atOrAfter: .distantPast))
        #expect(first.instant == at("2099-01-21T09:00:00Z"))
        #expect(try recurrence.next(after: first) == nil)
        #expect(try recurrence.first(atOrAfter: at("2200-01-01T00:00:00Z")) == nil)
    }
}
