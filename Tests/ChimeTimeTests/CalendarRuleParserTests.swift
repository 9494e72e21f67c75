import ChimeTime
import Testing

/// RFC 7529's parts: `RSCALE`, leap months in `BYMONTH`, `SKIP`, and Chime's limits on them.
@Suite struct CalendarRuleParserTests {
    @Test(arguments: [
        ("RSCALE=CHINESE;FREQ=YEARLY", "RSCALE=CHINESE;FREQ=YEARLY"),
        ("freq=yearly;rscale=chinese;bymonth=8;bymonthday=15", "RSCALE=CHINESE;FREQ=YEARLY;BYMONTHDAY=15;BYMONTH=8"),
        (
            "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=4L,4,3;BYMONTHDAY=3;SKIP=backward",
            "RSCALE=CHINESE;FREQ=YEARLY;BYMONTHDAY=3;BYMONTH=3,4,4L;SKIP=BACKWARD"
        ),
        ("RSCALE=CHINESE;FREQ=MONTHLY;BYMONTH=6l;SKIP=OMIT", "RSCALE=CHINESE;FREQ=MONTHLY;BYMONTH=6L"),
        (
            "RRULE:SKIP=BACKWARD;RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31",
            "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=BACKWARD"
        ),
        ("RSCALE=GREGORIAN;FREQ=DAILY;SKIP=FORWARD", "RSCALE=GREGORIAN;FREQ=DAILY;SKIP=FORWARD"),
    ])
    func canonicalText(_ input: String, _ canonical: String) throws {
        let rule = try RecurrenceRule(parsing: input)
        #expect(rule.description == canonical)
        #expect(try RecurrenceRule(parsing: rule.description) == rule)
    }

    @Test func partsAreRead() throws {
        let rule = try RecurrenceRule(parsing: "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=4L,5;BYMONTHDAY=30;SKIP=FORWARD")
        #expect(rule.scale == .chinese)
        #expect(rule.skip == .forward)
        #expect(rule.byMonth == [5] && rule.byLeapMonth == [4])
        let plain = try RecurrenceRule(parsing: "FREQ=YEARLY")
        #expect(plain.scale == nil && plain.skip == .omit && plain.byLeapMonth.isEmpty)
        // RSCALE=GREGORIAN is kept (it is what the client wrote), and differs from no RSCALE only in text.
        #expect(try RecurrenceRule(parsing: "RSCALE=GREGORIAN;FREQ=YEARLY") != plain)
    }

    /// Each malformed or unsupported use is refused at parse time, with this message.
    @Test(arguments: [
        ("FREQ=MONTHLY;SKIP=BACKWARD", "SKIP=BACKWARD: needs RSCALE (RFC 7529), e.g. RSCALE=GREGORIAN;..."),
        ("FREQ=YEARLY;BYMONTH=4L", "BYMONTH: 4L is a leap month, which needs RSCALE=CHINESE"),
        ("RSCALE=GREGORIAN;FREQ=YEARLY;BYMONTH=2L", "BYMONTH: 2L: RSCALE=GREGORIAN has no leap months"),
        ("RSCALE=JULIAN;FREQ=YEARLY", "RSCALE: \"JULIAN\" is not supported (supported: GREGORIAN, CHINESE)"),
        ("RSCALE=;FREQ=YEARLY", "RSCALE: empty value"),
        ("RSCALE=GREGORIAN;FREQ=YEARLY;SKIP=YES", "SKIP: expected OMIT, BACKWARD or FORWARD, got \"YES\""),
        ("RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=13L", "BYMONTH: expected integers in 1...12, got 13L"),
        ("RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=L", "BYMONTH: expected integers (a leap month with L: 4L), got \"L\""),
        ("RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=-4L", "BYMONTH: expected integers (a leap month with L: 4L), got \"-4L\""),
        ("RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=4LL", "BYMONTH: expected integers (a leap month with L: 4L), got \"4LL\""),
        ("RSCALE=CHINESE;FREQ=DAILY", "FREQ=DAILY: not supported with RSCALE=CHINESE (use MONTHLY or YEARLY)"),
        ("RSCALE=CHINESE;FREQ=WEEKLY", "FREQ=WEEKLY: not supported with RSCALE=CHINESE (use MONTHLY or YEARLY)"),
        ("RSCALE=CHINESE;FREQ=YEARLY;BYYEARDAY=1", "BYYEARDAY: not supported with RSCALE=CHINESE"),
        ("RSCALE=CHINESE;FREQ=YEARLY;BYWEEKNO=1", "BYWEEKNO: not supported with RSCALE=CHINESE"),
        (
            "RSCALE=CHINESE;FREQ=MONTHLY;BYDAY=1MO",
            "BYDAY: 1MO has an ordinal, not supported with RSCALE=CHINESE (plain weekdays are)"
        ),
        (
            "RSCALE=CHINESE;FREQ=MONTHLY;BYMONTHDAY=31",
            "BYMONTHDAY: 31: a Chinese month has at most 30 days (expected -30...30 without 0)"
        ),
        (
            "RSCALE=GREGORIAN;FREQ=MONTHLY;BYDAY=-1FR;SKIP=BACKWARD",
            "BYDAY: -1FR has an ordinal, not supported with SKIP=BACKWARD (plain weekdays are)"
        ),
        ("RSCALE=GREGORIAN;FREQ=YEARLY;BYYEARDAY=60;SKIP=FORWARD", "BYYEARDAY: not supported with SKIP=FORWARD"),
        ("FREQ=YEARLY;BYEASTER=0", "BYEASTER: not supported"),
    ])
    func refused(_ text: String, _ message: String) {
        do {
            _ = try RecurrenceRule(parsing: text)
            Issue.record("\(text) should be refused")
        } catch {
            #expect(error.code == .invalidRule)
            #expect(error.message == message)
        }
    }

    /// What `SKIP` does not touch is accepted as it is: a `DAILY` rule only filters days that exist, and an
    /// ordinal `BYDAY` without `SKIP` is plain RFC 5545.
    @Test(arguments: [
        "RSCALE=GREGORIAN;FREQ=DAILY;BYMONTHDAY=31;SKIP=BACKWARD",
        "RSCALE=GREGORIAN;FREQ=MONTHLY;BYDAY=-1FR",
        "RSCALE=GREGORIAN;FREQ=YEARLY;BYWEEKNO=10;SKIP=OMIT",
        "RSCALE=CHINESE;FREQ=MONTHLY;BYDAY=MO;BYMONTHDAY=1,2,3,4,5,6,7",
        "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1;BYHOUR=8,20;BYSETPOS=-1",
    ])
    func accepted(_ text: String) throws {
        _ = try RecurrenceRule(parsing: text)
    }
}
