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
                + "check the spacing of its first \(Recurrence.spacingOccurrences) occurrences; simplify the rule"
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

    /// Each rule is bounded on its own, and a batch of them by one allowance: a thousand rules each
    /// near its own bounds once held chimed's loop for seconds.
    @Test func aBatchOfCostlyRulesIsBoundedByTheCommandsAllowance() {
        var h = Harness()
        // About 4.4 million candidates to check its spacing: one fits the allowance, three do not.
        let costly = HostileRules.all.first { $0.name == "monthly-setpos-89280" }!.rule
        let one = #"{"id":"c","fireDate":"2026-12-01T09:15:30Z","rrule":"\#(costly)"}"#
        #expect(h.send("d1", .schedule, one)["ok"] == true)
        let three = (0..<3).map { #"{"id":"c\#($0)","fireDate":"2026-12-01T09:15:30Z","rrule":"\#(costly)"}"# }
        let before = h.journal.count
        let e = error(&h, .schedule, #"{"notifications":[\#(three.joined(separator: ","))]}"#)
        #expect(e.code == "invalid_argument")
        #expect(e.field == "notifications[2].rrule")
        #expect(
            e.message
                == "notifications[2].rrule: the command's rules need more than \(RecurrenceAllowance.perCommand) "
                + "candidate date-times together to check; send them in smaller batches or simplify them"
        )
        #expect(h.journal.count == before)
    }

    /// The rules a device keeps are bounded all together: each is within its command's allowance,
    /// but a device gathering them over many commands would make a new zone, `resume` of all, or a
    /// start compute them all at once (a thousand costly ones held the loop 0.32 s).
    @Test func theRulesADeviceKeepsAreBoundedInWhatTheyCostAgain() {
        var configuration = EngineConfiguration()
        configuration.maxRuleWorkPerDevice = 2_000_000
        var h = Harness(configuration: configuration)
        // About 90,000 candidates to compute again from now: about twenty fit in two million.
        let costly = HostileRules.all.first { $0.name == "monthly-setpos-89280" }!.rule
        for (device, enabled) in [("d1", true), ("d2", false)] {
            var accepted = 0
            var refusal: (code: String?, field: String?, message: String?)?
            for i in 0..<40 {
                let payload =
                    #"{"id":"c\#(i)","fireDate":"2026-12-01T09:15:30Z","rrule":"\#(costly)","enabled":\#(enabled)}"#
                let reply = h.send(device, .schedule, payload)
                if reply["ok"] == true {
                    accepted += 1
                } else {
                    let e = reply["error"]?.objectValue
                    refusal = (e?["code"]?.stringValue, e?["field"]?.stringValue, e?["message"]?.stringValue)
                    break
                }
            }
            // Paused ones count as well: resuming them all computes them all.
            #expect((10...30).contains(accepted), "\(device): \(accepted) accepted")
            #expect(refusal?.code == "quota_exceeded", "\(device)")
            #expect(
                refusal?.message?.hasSuffix("more than the 2000000 a device may hold; cancel some or simplify them")
                    == true
            )
            // A rule replaced by id costs what it replaces; one-shots do not count.
            #expect(
                h.send(device, .schedule, #"{"id":"c0","fireDate":"2026-12-01T09:15:30Z","rrule":"\#(costly)"}"#)["ok"]
                    == true
            )
            #expect(h.send(device, .schedule, #"{"id":"one","after":60}"#)["ok"] == true)
            // Cancelled rules free what they cost.
            #expect(h.send(device, .cancel, #"{"all":true}"#)["ok"] == true)
            #expect(
                h.send(device, .schedule, #"{"id":"again","fireDate":"2026-12-01T09:15:30Z","rrule":"\#(costly)"}"#)[
                    "ok"
                ] == true
            )
        }
    }

    /// What apps schedule costs a few thousand candidates a rule: a thousand in one batch are well within
    /// the allowance.
    @Test func aBatchOfAThousandEverydayRulesIsAccepted() {
        var h = Harness()
        let rules = [
            "FREQ=DAILY", "FREQ=DAILY;BYHOUR=9,18", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "FREQ=MONTHLY;BYMONTHDAY=-1",
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO", "FREQ=HOURLY;BYMINUTE=0,30",
            "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=8;BYMONTHDAY=15", "FREQ=MONTHLY;BYDAY=-1FR",
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
        ]
        let items = (0..<1000).map { i in
            #"{"id":"n\#(i)","fireDate":"2026-12-02T18:00:00","timeZone":"Asia/Shanghai","rrule":"\#(rules[i % rules.count])"}"#
        }
        let reply = h.send("d1", .schedule, #"{"notifications":[\#(items.joined(separator: ","))]}"#)
        #expect(reply["ok"] == true, "\(reply)")
        #expect(reply["result"]?.objectValue?["scheduled"]?.arrayValue?.count == 1000)
    }

    /// `preview` takes its dates from one allowance too: past it, the dates found so far.
    @Test func aPreviewOfACostlyRuleEndsAtTheAllowance() {
        var h = Harness()
        // About 180,000 candidates an occurrence: a thousand would be 180 million.
        let costly = HostileRules.all.first { $0.name == "monthly-setpos-89280" }!.rule
        let reply = h.send(
            "d1",
            .preview,
            #"{"notification":{"fireDate":"2026-12-01T09:15:30Z","rrule":"\#(costly)"},"count":1000}"#
        )
        let dates = reply["result"]?.objectValue?["fireDates"]?.arrayValue ?? []
        #expect(reply["ok"] == true, "\(reply)")
        #expect(dates.count > 10 && dates.count < 1000, "\(dates.count) dates")
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
