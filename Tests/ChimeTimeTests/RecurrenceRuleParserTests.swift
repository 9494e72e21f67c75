import ChimeTime
import Testing

@Suite struct RecurrenceRuleParserTests {
    @Test(arguments: [
        ("FREQ=DAILY", "FREQ=DAILY"),
        ("RRULE:freq=weekly;byday=tu,th;wkst=su", "FREQ=WEEKLY;BYDAY=TU,TH;WKST=SU"),
        ("rrule:FREQ=MONTHLY;BYDAY=-1FR;COUNT=6", "FREQ=MONTHLY;COUNT=6;BYDAY=-1FR"),
        ("FREQ=YEARLY;BYMONTH=3,1,3;INTERVAL=1;WKST=MO", "FREQ=YEARLY;BYMONTH=1,3"),
        ("FREQ=MONTHLY;BYDAY=MO,1MO,+2TU", "FREQ=MONTHLY;BYDAY=MO,2TU"),
        ("FREQ=HOURLY;UNTIL=20261201T100000Z;BYMINUTE=0,30", "FREQ=HOURLY;UNTIL=20261201T100000Z;BYMINUTE=0,30"),
        ("FREQ=DAILY;UNTIL=20261201", "FREQ=DAILY;UNTIL=20261201"),
        ("FREQ=DAILY;UNTIL=20261201T235959", "FREQ=DAILY;UNTIL=20261201T235959"),
        (
            "FREQ=YEARLY;BYWEEKNO=-1,20;BYYEARDAY=-366,1;BYMONTHDAY=-31,31;BYSETPOS=-1",
            "FREQ=YEARLY;BYMONTHDAY=-31,31;BYYEARDAY=-366,1;BYWEEKNO=-1,20;BYSETPOS=-1"
        ),
        ("  FREQ=SECONDLY;BYSECOND=0,59;INTERVAL=1000000000 ", "FREQ=SECONDLY;INTERVAL=1000000000;BYSECOND=0,59"),
    ])
    func canonicalText(_ input: String, _ canonical: String) throws {
        let rule = try RecurrenceRule(parsing: input)
        #expect(rule.description == canonical)
        #expect(try RecurrenceRule(parsing: rule.description) == rule)
    }

    /// Malformed rules are rejected at parse time with the offending part named in the message.
    @Test(arguments: [
        ("", "empty"),
        ("RRULE:", "empty"),
        ("BYDAY=MO", "FREQ"),
        ("FREQ=FORTNIGHTLY", "FREQ"),
        ("FREQ=DAILY;FREQ=WEEKLY", "FREQ"),
        ("FREQ=DAILY;;COUNT=2", "empty part"),
        ("FREQ=DAILY;COUNT", "COUNT"),
        ("FREQ=DAILY;COUNT=", "COUNT"),
        ("FREQ=DAILY;COUNT=0", "COUNT"),
        ("FREQ=DAILY;COUNT=-1", "COUNT"),
        ("FREQ=DAILY;COUNT=99999999999", "COUNT"),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL"),
        ("FREQ=DAILY;INTERVAL=1000000001", "INTERVAL"),
        ("FREQ=DAILY;INTERVAL=two", "INTERVAL"),
        ("FREQ=DAILY;COUNT=2;UNTIL=20260101", "COUNT and UNTIL"),
        ("FREQ=DAILY;UNTIL=20260230", "UNTIL"),
        ("FREQ=DAILY;UNTIL=2026-01-01", "UNTIL"),
        ("FREQ=DAILY;UNTIL=20260101T250000Z", "UNTIL"),
        ("FREQ=DAILY;BYSECOND=60", "BYSECOND"),
        ("FREQ=DAILY;BYMINUTE=60", "BYMINUTE"),
        ("FREQ=DAILY;BYHOUR=24", "BYHOUR"),
        ("FREQ=DAILY;BYHOUR=1,,2", "BYHOUR"),
        ("FREQ=DAILY;BYHOUR=", "BYHOUR"),
        ("FREQ=MONTHLY;BYMONTHDAY=32", "BYMONTHDAY: expected integers in -31...31 without 0, got 32"),
        ("FREQ=MONTHLY;BYMONTHDAY=0", "BYMONTHDAY"),
        ("FREQ=MONTHLY;BYMONTHDAY=-32", "BYMONTHDAY"),
        ("FREQ=YEARLY;BYYEARDAY=367", "BYYEARDAY"),
        ("FREQ=YEARLY;BYWEEKNO=54", "BYWEEKNO"),
        ("FREQ=YEARLY;BYMONTH=13", "BYMONTH"),
        ("FREQ=YEARLY;BYMONTH=0", "BYMONTH"),
        ("FREQ=MONTHLY;BYDAY=1MO;BYSETPOS=0", "BYSETPOS"),
        ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=367", "BYSETPOS"),
        ("FREQ=MONTHLY;BYSETPOS=1", "BYSETPOS"),
        (
            "FREQ=WEEKLY;BYDAY=XX",
            #"BYDAY: expected a weekday (MO, TU, WE, TH, FR, SA, SU), with an ordinal or not (1MO, -1FR), got "XX""#
        ),
        ("FREQ=WEEKLY;BYDAY=1MO", "BYDAY: 1MO has an ordinal"),
        ("FREQ=DAILY;BYDAY=-1FR", "BYDAY"),
        ("FREQ=MONTHLY;BYDAY=6MO", "BYDAY"),
        ("FREQ=YEARLY;BYDAY=54MO", "BYDAY"),
        ("FREQ=YEARLY;BYDAY=0MO", "BYDAY"),
        ("FREQ=YEARLY;BYWEEKNO=1;BYDAY=1MO", "BYDAY"),
        ("FREQ=YEARLY;BYMONTH=1;BYDAY=10MO", "BYDAY"),
        ("FREQ=MONTHLY;BYWEEKNO=1", "BYWEEKNO"),
        ("FREQ=MONTHLY;BYYEARDAY=1", "BYYEARDAY"),
        ("FREQ=WEEKLY;BYMONTHDAY=1", "BYMONTHDAY"),
        ("FREQ=DAILY;WKST=XX", "WKST"),
        ("FREQ=DAILY;BYEASTER=0", "BYEASTER"),
        ("FREQ=DAILY;X-NAME=1", "X-NAME"),
        ("FREQ=DAILY;COUNT 2", "COUNT 2"),
    ])
    func rejected(_ input: String, _ named: String) {
        do {
            _ = try RecurrenceRule(parsing: input)
            Issue.record("\(input) was accepted")
        } catch {
            #expect(error.code == .invalidRule)
            #expect(error.message.contains(named), "\(error.message)")
        }
    }

    @Test func errorsCompareByCode() {
        #expect(RecurrenceError(.invalidRule, "a") == RecurrenceError(.invalidRule, "b"))
        #expect(RecurrenceError(.invalidRule) != RecurrenceError(.searchLimit))
        // What users see is the message alone: no Swift names.
        #expect(RecurrenceError(.invalidRule, "BYHOUR: x").description == "BYHOUR: x")
        #expect(RecurrenceError(.searchLimit).description == "the search for the next occurrence gave up")
    }
}
