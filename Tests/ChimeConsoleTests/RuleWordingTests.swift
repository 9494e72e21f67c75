import ChimeConsole
import ChimeProtocol
import Testing

@Suite("Rules in words")
struct RuleWordingTests {
    /// A notification from a fireDate, a zone and the rest.
    static func n(_ fireDate: String, _ zone: String?, _ more: [(String, JSON)] = []) -> JSONObject {
        var o: JSONObject = ["fireDate": .string(fireDate)]
        if let zone { o["timeZone"] = .string(zone) }
        for (k, v) in more { o[k] = v }
        return o
    }

    static func rule(_ rrule: String, _ fireDate: String = "2026-12-07T09:00:00", _ zone: String? = nil) -> JSONObject {
        n(fireDate, zone, [("rrule", .string(rrule))])
    }

    static let cases: [(JSONObject, String)] = [
        // One-shots, in each way a zone is given.
        (n("2026-12-05T07:00:00", "Europe/Paris"), "Once, 5 Dec 2026 at 07:00, Europe/Paris"),
        (n("2026-12-05T07:00:00", nil), "Once, 5 Dec 2026 at 07:00 (device's zone)"),
        (n("2026-12-05T07:00:00", "device"), "Once, 5 Dec 2026 at 07:00 (device's zone)"),
        (n("2026-12-05T06:00:00Z", nil), "Once, 5 Dec 2026 at 06:00 UTC"),
        (n("2026-12-05T06:00:00Z", "Europe/Paris"), "Once, 5 Dec 2026 at 07:00, Europe/Paris"),
        (n("2026-12-05T06:00:30Z", "Asia/Shanghai"), "Once, 5 Dec 2026 at 14:00:30, Asia/Shanghai"),
        (
            n("2026-12-05T07:00:00", "Europe/Paris", [("repeatInterval", "none")]),
            "Once, 5 Dec 2026 at 07:00, Europe/Paris"
        ),
        // repeatInterval.
        (n("2026-12-01T08:30:00", nil, [("repeatInterval", "day")]), "Every day at 08:30 (device's zone)"),
        (
            n("2026-12-01T08:30:00", nil, [("repeatInterval", "NSCalendarUnitDay")]),
            "Every day at 08:30 (device's zone)"
        ),
        (
            n("2026-12-01T08:30:00", nil, [("repeatInterval", "weekday")]),
            "Every day, weekends included, at 08:30 (device's zone)"
        ),
        (n("2026-12-07T09:00:00", "UTC", [("repeatInterval", "week")]), "Every Monday at 09:00, UTC"),
        (n("2026-01-31T09:00:00", "UTC", [("repeatInterval", "month")]), "Every month on the 31st at 09:00, UTC"),
        (n("2026-01-02T09:00:00", "UTC", [("repeatInterval", "quarter")]), "Every quarter on the 2nd at 09:00, UTC"),
        (n("2026-12-25T07:00:00", "UTC", [("repeatInterval", "year")]), "Every year on 25 Dec at 07:00, UTC"),
        (
            n("2026-12-01T08:00:00", "UTC", [("repeatInterval", "hour"), ("count", 3)]),
            "Every hour, from 1 Dec 2026 at 08:00, UTC, 3 times"
        ),
        (
            n("2026-12-01T08:00:00", "UTC", [("repeatInterval", "day"), ("until", "2026-12-31T08:00:00")]),
            "Every day at 08:00, UTC, until 31 Dec 2026 at 08:00"
        ),
        (
            n("2026-12-01T08:00:00", "UTC", [("repeatInterval", "day"), ("count", 1)]),
            "Every day at 08:00, UTC, once"
        ),
        (
            n("2026-12-01T08:00:00", "UTC", [("repeatInterval", "fortnight")]),
            "repeatInterval fortnight from 1 Dec 2026 at 08:00, UTC"
        ),
        // RRULEs.
        (
            rule("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "2026-12-01T18:00:00", "Asia/Shanghai"),
            "Monday to Friday at 18:00, Asia/Shanghai"
        ),
        (
            rule("RRULE:FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR", "2026-12-01T18:00:00"),
            "Monday to Friday at 18:00 (device's zone)"
        ),
        (rule("FREQ=DAILY"), "Every day at 09:00 (device's zone)"),
        (rule("FREQ=DAILY;INTERVAL=3"), "Every 3 days at 09:00 (device's zone)"),
        (rule("FREQ=DAILY;BYHOUR=8,12,18;BYMINUTE=0"), "Every day at 08:00, 12:00 and 18:00 (device's zone)"),
        (rule("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO"), "Every 2 weeks on Monday at 09:00 (device's zone)"),
        (rule("FREQ=WEEKLY;INTERVAL=2"), "Every 2 weeks on Monday at 09:00 (device's zone)"),
        (rule("FREQ=WEEKLY;BYDAY=MO,TH"), "Every Monday and Thursday at 09:00 (device's zone)"),
        (rule("FREQ=WEEKLY;BYDAY=SA,SU"), "Every Saturday and Sunday at 09:00 (device's zone)"),
        (rule("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR,SA,SU"), "Every day at 09:00 (device's zone)"),
        (rule("FREQ=WEEKLY"), "Every Monday at 09:00 (device's zone)"),
        (rule("FREQ=MONTHLY"), "Every month on the 7th at 09:00 (device's zone)"),
        (rule("FREQ=MONTHLY;BYMONTHDAY=1,15"), "Every month on the 1st and 15th at 09:00 (device's zone)"),
        (rule("FREQ=MONTHLY;BYMONTHDAY=-1"), "Every month on the last day at 09:00 (device's zone)"),
        (rule("FREQ=MONTHLY;BYMONTHDAY=-2"), "Every month on the 2nd-to-last day at 09:00 (device's zone)"),
        (rule("FREQ=MONTHLY;BYDAY=-1FR;COUNT=6"), "Every month on the last Friday at 09:00 (device's zone), 6 times"),
        (rule("FREQ=MONTHLY;INTERVAL=3;BYDAY=1MO"), "Every 3 months on the first Monday at 09:00 (device's zone)"),
        (rule("FREQ=YEARLY"), "Every year on 7 Dec at 09:00 (device's zone)"),
        (rule("FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=25"), "Every year on 25 Dec at 09:00 (device's zone)"),
        (
            rule("FREQ=YEARLY;BYMONTH=11;BYDAY=4TH"),
            "Every year on the fourth Thursday of November at 09:00 (device's zone)"
        ),
        (rule("FREQ=YEARLY;BYMONTH=1,7"), "Every year on the 7th of January and July at 09:00 (device's zone)"),
        (rule("FREQ=DAILY;UNTIL=20261231"), "Every day at 09:00 (device's zone), until 31 Dec 2026"),
        (
            rule("FREQ=DAILY;UNTIL=20261231T170000Z"),
            "Every day at 09:00 (device's zone), until 31 Dec 2026 at 17:00 UTC"
        ),
        (
            rule("FREQ=HOURLY;INTERVAL=2", "2026-12-07T09:00:00", "Europe/Paris"),
            "Every 2 hours, from 7 Dec 2026 at 09:00, Europe/Paris"
        ),
        (rule("FREQ=MINUTELY;INTERVAL=15"), "Every 15 minutes, from 7 Dec 2026 at 09:00 (device's zone)"),
        (
            rule("RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=BACKWARD"),
            "Every month on the 31st at 09:00 (device's zone) (or the day before, when a month lacks that date)"
        ),
        (
            rule("RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=8;BYMONTHDAY=15", "2026-12-01T09:00:00", "Asia/Shanghai"),
            "Every year on day 15 of the 8th Chinese month at 09:00, Asia/Shanghai"
        ),
        (
            rule("RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=4L;BYMONTHDAY=3;SKIP=BACKWARD"),
            "Every year on day 3 of the leap 4th Chinese month at 09:00 (device's zone) (or the day before, when a month lacks that date)"
        ),
        (
            rule("RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=-1"),
            "Every year on the last day of the 12th Chinese month at 09:00 (device's zone)"
        ),
        (rule("RSCALE=CHINESE;FREQ=MONTHLY;BYMONTHDAY=1"), "Every Chinese month on day 1 at 09:00 (device's zone)"),
        // What cannot be worded is shown as written.
        (
            rule("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1", "2026-12-07T09:00:00", "Europe/Paris"),
            "RRULE FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1 from 7 Dec 2026 at 09:00, Europe/Paris"
        ),
        (
            rule("FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO"),
            "RRULE FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO from 7 Dec 2026 at 09:00 (device's zone)"
        ),
        (
            rule("FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=FR"),
            "RRULE FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=FR from 7 Dec 2026 at 09:00 (device's zone)"
        ),
        (rule("FREQ=HOURLY;BYMINUTE=0,30"), "RRULE FREQ=HOURLY;BYMINUTE=0,30 from 7 Dec 2026 at 09:00 (device's zone)"),
        (rule("FREQ=NEVER"), "RRULE FREQ=NEVER from 7 Dec 2026 at 09:00 (device's zone)"),
        // Lead times, exdates, after, and no time at all.
        (
            n("2026-12-01T18:00:00", nil, [("repeatInterval", "day"), ("leadTime", 900)]),
            "Every day at 18:00 (device's zone), delivered 15 minutes before"
        ),
        (
            n(
                "2026-12-01T18:00:00",
                nil,
                [("rrule", "FREQ=DAILY"), ("leadTime", 5400), ("exdates", ["2026-12-25T18:00:00"])]
            ),
            "Every day at 18:00 (device's zone), delivered 1 hour 30 minutes before, except 1 date"
        ),
        (["after": 86400, "alignTo": "12:00"], "Once, at the first 12:00 at least 1 day after it was scheduled"),
        (["after": 90], "Once, 1 minute 30 seconds after it was scheduled"),
        (["fireDate": "tomorrow"], "No readable time (fireDate tomorrow)"),
    ]

    @Test("Schedules in words", arguments: cases)
    func wording(_ notification: JSONObject, _ expected: String) {
        #expect(RuleWording.describe(notification) == expected)
    }

    @Test("An absolute fireDate that follows the device's zone is read in that zone")
    func deviceZone() {
        let n = Self.n("2026-12-01T10:00:00Z", "device", [("repeatInterval", "day")])
        #expect(RuleWording.describe(n, deviceZone: "Asia/Shanghai") == "Every day at 18:00 (device's zone)")
        #expect(RuleWording.describe(n) == "Every day at 10:00 UTC")
    }
}
