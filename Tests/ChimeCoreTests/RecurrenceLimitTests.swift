import ChimeCore
import ChimeTestSupport
import Testing

/// How the recurrence limits reach a client: a rule too costly to expand or to search is the client's to
/// simplify (`invalid_argument` on `rrule`, naming the limit), not a schedule that never fires.
@Suite struct RecurrenceLimitTests {
    func error(
        _ h: inout Harness,
        _ op: Operation,
        _ payload: String
    ) -> (code: String?, field: String?, message: String?) {
        let error = h.send("d1", op, payload)["error"]?.objectValue
        return (error?["code"]?.stringValue, error?["field"]?.stringValue, error?["message"]?.stringValue)
    }

    @Test func ruleOverThePerPeriodLimitIsInvalid() {
        var h = Harness()
        let payload = #"{"fireDate":"2026-12-01T09:15:30Z","rrule":"\#(HostileRules.finding)"}"#
        for op in [Operation.schedule, .preview] {
            let body = op == .preview ? #"{"notification":\#(payload)}"# : payload
            let e = error(&h, op, body)
            #expect(e.code == "invalid_argument")
            #expect(e.field == (op == .preview ? "notification.rrule" : "rrule"))
            #expect(
                e.message?.hasPrefix(
                    "\(e.field ?? ""): expands to up to 31622400 candidate date-times per period (FREQ=YEARLY), "
                        + "more than the \(RecurrenceRule.maximumCandidatesPerPeriod) allowed"
                ) == true,
                "\(e.message ?? "")"
            )
        }
        #expect(h.journal.isEmpty)
    }

    @Test func ruleThatExhaustsItsBudgetIsInvalidNotNeverFiring() {
        var h = Harness()
        // One date-time a day picked from 86,400: checking the spacing of 1000 of them is over budget.
        let rule = HostileRules.all.first { $0.name == "daily-setpos-86400" }!.rule
        let e = error(&h, .schedule, #"{"fireDate":"2026-12-01T09:15:30Z","rrule":"\#(rule)"}"#)
        #expect(e.code == "invalid_argument")
        #expect(e.field == "rrule")
        #expect(
            e.message
                == "rrule: needs more than \(Recurrence.maximumCandidatesPerSpacingCheck) candidate date-times to "
                + "check the spacing of its first 1000 occurrences; simplify the rule"
        )
        // A rule that provably never fires still says so.
        let never = error(
            &h,
            .schedule,
            #"{"fireDate":"2026-12-01T09:15:30Z","rrule":"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}"#
        )
        #expect(never.code == "never_fires")
        #expect(h.journal.isEmpty)
    }

    @Test func dateTimesOutsideTheYearsOneToNineNineNineNineAreRefused() {
        var h = Harness()
        let cases = [
            (#"{"fireDate":"0001-01-01T00:30:00+01:00"}"#, "fireDate"),
            (#"{"fireDate":"9999-12-31T23:30:00-01:00"}"#, "fireDate"),
            (
                #"{"fireDate":"2026-12-02T00:00:00Z","repeatInterval":"day","until":"9999-12-31T23:00:00-02:00"}"#,
                "until"
            ),
            (
                #"{"fireDate":"2026-12-02T00:00:00Z","rrule":"FREQ=DAILY","exdates":["0000-12-31T23:00:00Z"]}"#,
                "exdates[0]"
            ),
            (#"{"fireDate":"2026-12-02T00:00:00Z","rrule":"FREQ=DAILY;UNTIL=00001231T000000Z"}"#, "rrule"),
        ]
        for (payload, field) in cases {
            let e = error(&h, .schedule, payload)
            #expect(e.code == "invalid_argument", "\(payload)")
            #expect(e.field == field, "\(payload)")
        }
        let from = error(&h, .preview, #"{"notification":{"after":60},"from":"0000-12-31T23:59:59Z"}"#)
        #expect(from.code == "invalid_argument")
        #expect(from.field == "from")
        #expect(h.journal.isEmpty)
    }
}
