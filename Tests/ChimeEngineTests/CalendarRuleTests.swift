import ChimeCore
import ChimeTestSupport
import Testing

/// RFC 7529 rules (`RSCALE`, leap months, `SKIP`) through the protocol: schedule, update, preview with
/// `calendarDates`, deliveries, and a journal that replays them.
@Suite struct CalendarRuleTests {
    static let midAutumn =
        #"{"id":"moon","fireDate":"2026-12-01T09:00:00","timeZone":"Asia/Shanghai","rrule":"RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=8;BYMONTHDAY=15"}"#

    @Test func previewGivesTheDatesAndTheChineseDates() {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        let r = h.ok("d1", .preview, #"{"notification":\#(Self.midAutumn),"count":3}"#)
        #expect(r["fireDates"] == ["2027-09-15T01:00:00Z", "2028-10-03T01:00:00Z", "2029-09-22T01:00:00Z"])
        #expect(r["calendarDates"] == ["8-15", "8-15", "8-15"])
        // A leap-month birthday falling back to the regular month in years without it.
        let leap = h.ok(
            "d1",
            .preview,
            #"{"notification":{"fireDate":"2026-12-01T08:00:00","timeZone":"Asia/Shanghai","rrule":"RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=6L;BYMONTHDAY=30;SKIP=BACKWARD"},"count":2,"from":"2036-01-01T00:00:00Z"}"#
        )
        #expect(leap["calendarDates"]?.arrayValue?.count == 2)
        // Gregorian rules have no calendarDates.
        let gregorian = h.ok(
            "d1",
            .preview,
            #"{"notification":{"fireDate":"2027-01-31T09:00:00","timeZone":"UTC","rrule":"RSCALE=GREGORIAN;FREQ=MONTHLY;SKIP=BACKWARD"},"count":3}"#
        )
        #expect(gregorian["fireDates"] == ["2027-01-31T09:00:00Z", "2027-02-28T09:00:00Z", "2027-03-31T09:00:00Z"])
        #expect(gregorian["calendarDates"] == nil)
    }

    @Test func scheduleUpdateDeliverAndReplay() {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        let scheduled = h.ok("d1", .schedule, Self.midAutumn)
        #expect(scheduled["scheduled"]?.arrayValue?.first?.objectValue?["nextFireDate"] == "2027-09-15T01:00:00Z")
        // update: the month's last day in place of the 15th, from the 12th month.
        let updated = h.ok(
            "d1",
            .update,
            #"{"id":"moon","rrule":"RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=30;SKIP=BACKWARD"}"#
        )
        // The 12th month of the year that began 2026-02-17 starts 2027-01-08 and has 29 days.
        #expect(updated["updated"]?.objectValue?["nextFireDate"] == "2027-02-05T01:00:00Z")
        let delivered = h.advance(to: "2027-02-05T01:00:01Z")
        #expect(delivered.count == 1)
        #expect(delivered.first?["id"] == "moon")
        // The journal holds the rule's text: a fresh engine replayed from it has the same schedule.
        let replayed = h.replayed()
        let before = h.list("d1")
        let after = h.list("d1", engine: replayed)
        #expect(before == after)
        #expect(after.first?["rrule"] == "RSCALE=CHINESE;FREQ=YEARLY;BYMONTHDAY=30;BYMONTH=12;SKIP=BACKWARD")
        #expect(after.first?["nextFireDate"] == "2028-01-25T01:00:00Z")
    }

    /// The journal's records and a snapshot, as bytes (what the data directory and PostgreSQL hold), read
    /// back into a fresh engine: the RSCALE rules come back as they were, with the same next dates. The
    /// rule is stored as its text, so the record format does not change.
    @Test func journalRecordsAndSnapshotsReadBack() throws {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        h.ok("d1", .schedule, Self.midAutumn)
        h.ok(
            "d1",
            .schedule,
            #"{"id":"rent","fireDate":"2026-12-01T09:00:00","timeZone":"Europe/Paris","rrule":"RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=BACKWARD"}"#
        )
        h.ok(
            "d1",
            .schedule,
            #"{"id":"grandma","fireDate":"2026-12-01T08:00:00","timeZone":"Asia/Shanghai","rrule":"RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=4L;BYMONTHDAY=3;SKIP=BACKWARD"}"#
        )
        let fromRecordsRestorer = EngineRestorer(configuration: h.engine.configuration)
        for entry in h.journal {
            let bytes = entry.encode()
            #expect(String(decoding: bytes, as: UTF8.self).contains("RSCALE=") || entry.kind != .schedule)
            fromRecordsRestorer.apply(try JournalEntry.decode(kind: entry.kind.rawValue, payload: bytes))
        }
        let fromRecords = fromRecordsRestorer.finish()
        let fromSnapshotRestorer = EngineRestorer(configuration: h.engine.configuration)
        try h.engine.snapshot.forEachEntry { (bytes) throws(RecoveryError) in
            try fromSnapshotRestorer.restore(snapshotEntry: bytes)
        }
        let fromSnapshot = fromSnapshotRestorer.finish()
        let before = h.list("d1")
        #expect(before.count == 3)
        #expect(h.list("d1", engine: fromRecords) == before)
        #expect(h.list("d1", engine: fromSnapshot) == before)
        let next = Dictionary(uniqueKeysWithValues: before.map { ($0["id"]?.stringValue ?? "", $0["nextFireDate"]) })
        #expect(next["moon"] == "2027-09-15T01:00:00Z")
        #expect(next["rent"] == "2026-12-31T08:00:00Z")
        #expect(next["grandma"] == "2027-05-08T00:00:00Z")
    }

    /// Each rule error is `invalid_argument` on `rrule` with the parser's message.
    @Test(arguments: [
        ("FREQ=YEARLY;BYMONTH=4L", "rrule: BYMONTH: 4L is a leap month, which needs RSCALE=CHINESE"),
        ("FREQ=MONTHLY;SKIP=BACKWARD", "rrule: SKIP=BACKWARD: needs RSCALE (RFC 7529), e.g. RSCALE=GREGORIAN;..."),
        ("RSCALE=HEBREW;FREQ=YEARLY", "rrule: RSCALE: \"HEBREW\" is not supported (supported: GREGORIAN, CHINESE)"),
        ("RSCALE=CHINESE;FREQ=DAILY", "rrule: FREQ=DAILY: not supported with RSCALE=CHINESE (use MONTHLY or YEARLY)"),
    ])
    func errors(_ rule: String, _ message: String) {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        let reply = h.send("d1", .schedule, #"{"fireDate":"2026-12-01T09:00:00","timeZone":"UTC","rrule":"\#(rule)"}"#)
        let error = reply["error"]?.objectValue
        #expect(error?["code"] == "invalid_argument")
        #expect(error?["field"] == "rrule")
        #expect(error?["message"] == .string(message))
    }

    @Test func chineseStartOutsideTheTableIsInvalid() {
        var h = Harness(now: "2026-12-01T10:00:00Z")
        let reply = h.send(
            "d1",
            .schedule,
            #"{"fireDate":"1900-06-01T09:00:00","timeZone":"UTC","rrule":"RSCALE=CHINESE;FREQ=YEARLY"}"#
        )
        #expect(reply["error"]?.objectValue?["code"] == "invalid_argument")
        #expect(
            reply["error"]?.objectValue?["message"]
                == "rrule: RSCALE=CHINESE covers the Chinese years 1901...2099 (1901-02-19...2100-02-08); the start 1900-06-01T09:00:00 is outside them"
        )
    }
}
