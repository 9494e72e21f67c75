import ChimeCore
import ChimeTestSupport
import Testing

/// Editing as apps do it (PROTOCOL.md sections 3.1 and 3.10): `update`, a `list` row sent back,
/// UILocalNotification's names, and `id`/`ids` wherever a command takes either.
@Suite struct EditingTests {
    /// A daily 18:00 reminder, fired twice, then switched off.
    func pausedDailyReminder() -> Harness {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        h.ok(
            "d1",
            .schedule,
            #"{"id":"med","fireDate":"2026-12-01T18:00:00","timeZone":"UTC","repeatInterval":"day","alertBody":"Take it","userInfo":{"k":1}}"#
        )
        #expect(h.advance(to: "2026-12-02T18:00:00Z").count == 2)
        h.ok("d1", .pause, #"{"ids":["med"]}"#)
        return h
    }

    @Test func updateChangesOnlyTheGivenFieldsAndKeepsTheSwitchAndCounters() throws {
        var h = pausedDailyReminder()
        let result = h.ok("d1", .update, #"{"id":"med","alertBody":"Take two"}"#)
        #expect(result["updated"] == ["id": "med", "nextFireDate": nil])
        let row = try #require(h.list("d1").first)
        #expect(row["alertBody"] == "Take two")
        #expect(row["userInfo"] == ["k": 1])
        #expect(row["repeatInterval"] == "day")
        #expect(row["enabled"] == false)
        #expect(row["firedCount"] == 2)
        #expect(row["createdAt"] == "2026-12-01T10:00:00Z")
        // Still off: nothing fires.
        #expect(h.advance(to: "2026-12-04T19:00:00Z").isEmpty)
        // Switched on by an update: from now on, as resume does.
        #expect(
            h.ok("d1", .update, #"{"id":"med","enabled":true}"#)["updated"]?.objectValue?["nextFireDate"]
                == "2026-12-05T18:00:00Z"
        )
    }

    @Test func aContentUpdateKeepsTheNotificationsPlaceInItsSeries() throws {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        h.ok(
            "d1",
            .schedule,
            #"{"id":"tick","fireDate":"2026-12-01T10:00:10Z","repeatInterval":"minute","alertBody":"a"}"#
        )
        #expect(h.advance(to: "2026-12-01T10:01:10Z").map { $0["occurrence"] } == [1, 2])
        h.ok("d1", .update, #"{"id":"tick","alertBody":"b"}"#)
        let next = h.advance(to: "2026-12-01T10:02:10Z")
        // The third occurrence, with the new text; not the series started again.
        #expect(next.map { $0["occurrence"] } == [3])
        #expect(next.first?["alertBody"] == "b")
        #expect(next.first?["fireId"] == "tick@2026-12-01T10:02:10Z")
        #expect(h.list("d1").first?["firedCount"] == 3)
    }

    @Test func aContentUpdateWhileADeliveryIsInFlightNeitherLosesNorRepeatsIt() throws {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        h.ok("d1", .schedule, #"{"id":"tick","fireDate":"2026-12-01T10:00:10Z","repeatInterval":"minute"}"#)
        h.autoAck = false
        #expect(h.advance(to: "2026-12-01T10:00:10Z").count == 1)
        h.ok("d1", .update, #"{"id":"tick","alertBody":"new"}"#)
        h.ackAll()
        #expect(h.list("d1").first?["firedCount"] == 1)
        h.autoAck = true
        let next = h.advance(to: "2026-12-01T10:01:10Z")
        #expect(next.map { $0["occurrence"] } == [2])
        // Replay gives the same state.
        #expect(h.list("d1", engine: h.replayed()) == h.list("d1"))
    }

    @Test func aTriggerUpdateStartsTheScheduleAgainFromNow() throws {
        var h = pausedDailyReminder()
        h.ok("d1", .resume, #"{"ids":["med"]}"#)
        let result = h.ok("d1", .update, #"{"id":"med","fireDate":"2026-12-01T07:30:00"}"#)
        #expect(result["updated"]?.objectValue?["nextFireDate"] == "2026-12-03T07:30:00Z")
        let row = try #require(h.list("d1").first)
        #expect(row["alertBody"] == "Take it")
        #expect(row["firedCount"] == 2)
        #expect(h.advance(to: "2026-12-03T07:30:00Z").map { $0["fireId"] } == ["med@2026-12-03T07:30:00Z"])
        #expect(h.list("d1", engine: h.replayed()) == h.list("d1"))
    }

    @Test func nullClearsAFieldAndAFieldReplacesTheOnesItExcludes() throws {
        var h = pausedDailyReminder()
        h.ok("d1", .update, #"{"id":"med","userInfo":null,"rrule":"FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"}"#)
        let row = try #require(h.list("d1").first)
        #expect(row["userInfo"] == nil)
        #expect(row["repeatInterval"] == nil)
        #expect(row["rrule"] == "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR")
        h.ok("d1", .update, #"{"id":"med","alertBodies":["a","b"]}"#)
        #expect(h.list("d1").first?["alertBody"] == nil)
        // A cleared field excludes nothing: the fireDate given stays.
        h.ok("d1", .update, #"{"id":"med","fireDate":"2026-12-03T09:00:00","after":null,"alignTo":null}"#)
        #expect(h.list("d1").first?["fireDate"] == "2026-12-03T09:00:00")
        h.ok("d1", .update, #"{"id":"med","after":60}"#)
        #expect(h.list("d1").first?["fireDate"] == "2026-12-02T18:01:00Z")
    }

    @Test func updateRefusesWhatScheduleWouldAndChangesNothing() {
        var h = pausedDailyReminder()
        let before = h.list("d1")
        #expect(h.errorCode("d1", .update, #"{"id":"nope","alertBody":"x"}"#) == "not_found")
        #expect(h.errorCode("d1", .update, #"{"id":"med"}"#) == "invalid_argument")
        #expect(h.errorCode("d1", .update, #"{"id":"med","alertBdy":"x"}"#) == "unknown_field")
        #expect(h.errorCode("d1", .update, #"{"id":"med","count":3,"rrule":"FREQ=DAILY"}"#) == "invalid_argument")
        #expect(h.errorCode("d1", .update, #"{"id":"med","fireDate":null}"#) == "invalid_argument")
        #expect(
            h.errorCode("d1", .update, #"{"id":"med","rrule":"FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"}"#) == "never_fires"
        )
        #expect(h.errorCode("d1", .update, #"{"id":"med","badge":"x"}"#) == "invalid_argument")
        #expect(h.list("d1") == before)
    }

    @Test func aListRowSentBackSchedulesTheSameNotification() throws {
        var h = pausedDailyReminder()
        let row = try #require(h.list("d1").first)
        let result = h.ok("d1", .schedule, JSON.object(row).text)
        #expect(result["replaced"] == 1)
        let again = try #require(h.list("d1").first)
        for key in ["alertBody", "userInfo", "repeatInterval", "fireDate", "timeZone", "enabled", "createdAt"] {
            #expect(again[key] == row[key], "\(key)")
        }
        // A batch takes rows too.
        let batch = h.ok("d1", .schedule, #"{"notifications":[\#(JSON.object(again).text)]}"#)
        #expect(batch["replaced"] == 1)
    }

    @Test func uiLocalNotificationNamesAreAccepted() throws {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        h.ok(
            "d1",
            .schedule,
            #"{"id":"a","fireDate":"2026-12-01T18:00:00Z","repeatInterval":"NSCalendarUnitWeekOfYear","applicationIconBadgeNumber":4}"#
        )
        let row = try #require(h.list("d1").first)
        #expect(row["badge"] == 4)
        #expect(row["repeatInterval"] == "weekOfYear")
        #expect(row["applicationIconBadgeNumber"] == nil)
        for (name, unit) in [
            ("kCFCalendarUnitDay", "day"), ("NSDayCalendarUnit", "day"), ("NSCalendarUnitMinute", "minute"),
            ("NSWeekdayCalendarUnit", "weekday"), ("kCFCalendarUnitMonth", "month"),
        ] {
            h.ok("d1", .update, #"{"id":"a","repeatInterval":"\#(name)"}"#)
            #expect(h.list("d1").first?["repeatInterval"] == .string(unit), "\(name)")
        }
        #expect(
            h.errorCode("d1", .schedule, #"{"fireDate":"2026-12-01T18:00:00Z","applicationIconBadgeNumber":"+1"}"#)
                == "invalid_argument"
        )
        #expect(
            h.errorCode(
                "d1",
                .schedule,
                #"{"fireDate":"2026-12-01T18:00:00Z","badge":1,"applicationIconBadgeNumber":1}"#
            )
                == "invalid_argument"
        )
    }

    @Test func idAndIdsAreBothAcceptedWhereACommandTakesEither() {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        h.ok("d1", .schedule, #"{"id":"a","fireDate":"2026-12-02T18:00:00Z"}"#)
        #expect(h.ok("d1", .pause, #"{"id":"a"}"#)["paused"] == ["a"])
        #expect(h.ok("d1", .resume, #"{"id":"a"}"#)["resumed"] == ["a"])
        #expect(h.ok("d1", .preview, #"{"ids":["a"]}"#)["fireDates"] == ["2026-12-02T18:00:00Z"])
        #expect(h.ok("d1", .snooze, #"{"ids":["a"],"after":60}"#)["id"] == "a")
        #expect(h.errorCode("d1", .preview, #"{"ids":["a","b"]}"#) == "invalid_argument")
        #expect(h.errorCode("d1", .preview, #"{"id":"a","ids":["a"]}"#) == "invalid_argument")
        #expect(h.errorCode("d1", .cancel, #"{"id":"a","ids":["a"]}"#) == "invalid_argument")
        #expect(h.ok("d1", .cancel, #"{"id":"a"}"#)["cancelled"] == ["a"])
    }

    @Test func rescheduleCountsTheNotificationItReplaced() {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        #expect(h.ok("d1", .schedule, #"{"id":"a","after":60,"requestId":"1"}"#)["replaced"] == 0)
        #expect(h.ok("d1", .schedule, #"{"id":"a","after":60,"requestId":"2"}"#)["replaced"] == 1)
        // Removed by `replace` and scheduled again counts once.
        let result = h.ok("d1", .schedule, #"{"notifications":[{"id":"a","after":60}],"replace":{"all":true}}"#)
        #expect(result["replaced"] == 1)
    }
}

@Suite struct UnknownFieldHintTests {
    func message(_ payload: String, _ op: Operation = .schedule) -> String? {
        var h = Harness()
        return h.send("d1", op, payload)["error"]?.objectValue?["message"]?.stringValue
    }

    @Test func aTypoOrAnotherAPIsNameGetsADidYouMean() {
        let due = #""fireDate":"2026-12-02T10:00:00Z""#
        #expect(message(#"{\#(due),"alertbody":"x"}"#) == "alertbody: unknown field (did you mean alertBody?)")
        #expect(message(#"{\#(due),"soundNme":"x"}"#) == "soundNme: unknown field (did you mean soundName?)")
        #expect(message(#"{\#(due),"body":"x"}"#) == "body: unknown field (did you mean alertBody?)")
        #expect(
            message(#"{"notifications":[{\#(due),"title":"x"}]}"#)
                == "notifications[0].title: unknown field (did you mean alertTitle?)"
        )
        #expect(message(#"{"id":"a","sound":"x"}"#, .update) == "sound: unknown field (did you mean soundName?)")
        #expect(message(#"{"idss":["a"]}"#, .cancel) == "idss: unknown field (did you mean ids?)")
        // Nothing close: no guess.
        #expect(message(#"{\#(due),"zzzzzzzz":1}"#) == "zzzzzzzz: unknown field")
    }
}
