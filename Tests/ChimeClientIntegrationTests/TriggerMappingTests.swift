import ChimeCore
import Foundation
import Testing

@testable import ChimeClient

/// A calendar trigger's components, and the schedule fields they are sent as.
struct CalendarCase: Sendable, CustomTestStringConvertible {
    var name: String
    var components: DateComponents
    var fireDate: String
    var rrule: String?

    var testDescription: String { name }
}

/// What each trigger is sent as, without a broker: the mapping of `UNCalendarNotificationTrigger`'s
/// components to RRULEs, intervals, dates and rules, and the request's notification object.
@Suite struct TriggerMappingTests {
    /// 2026-12-03T15:00:00Z: a calendar rule's DTSTART is midnight UTC two days before.
    static let now = Date(timeIntervalSince1970: 1_796_310_000)
    static let recent = "2026-12-01T00:00:00"

    static let calendarCases: [CalendarCase] = [
        CalendarCase(
            name: "hour and minute: daily",
            components: DateComponents(hour: 18, minute: 0),
            fireDate: recent,
            rrule: "FREQ=DAILY;BYSECOND=0;BYMINUTE=0;BYHOUR=18"
        ),
        CalendarCase(
            name: "weekday, hour and minute: weekly",
            components: DateComponents(hour: 8, minute: 30, weekday: 2),
            fireDate: recent,
            rrule: "FREQ=WEEKLY;BYSECOND=0;BYMINUTE=30;BYHOUR=8;BYDAY=MO"
        ),
        CalendarCase(
            name: "weekday alone: Sundays at midnight",
            components: DateComponents(weekday: 1),
            fireDate: recent,
            rrule: "FREQ=WEEKLY;BYSECOND=0;BYMINUTE=0;BYHOUR=0;BYDAY=SU"
        ),
        CalendarCase(
            name: "minute alone: hourly",
            components: DateComponents(minute: 30),
            fireDate: recent,
            rrule: "FREQ=HOURLY;BYSECOND=0;BYMINUTE=30"
        ),
        CalendarCase(
            name: "second alone: every minute",
            components: DateComponents(second: 15),
            fireDate: recent,
            rrule: "FREQ=MINUTELY;BYSECOND=15"
        ),
        CalendarCase(
            name: "day and hour: monthly",
            components: DateComponents(day: 1, hour: 9),
            fireDate: recent,
            rrule: "FREQ=MONTHLY;BYSECOND=0;BYMINUTE=0;BYHOUR=9;BYMONTHDAY=1"
        ),
        CalendarCase(
            name: "month, day and time: yearly",
            components: DateComponents(month: 12, day: 25, hour: 7, minute: 15),
            fireDate: recent,
            rrule: "FREQ=YEARLY;BYSECOND=0;BYMINUTE=15;BYHOUR=7;BYMONTHDAY=25;BYMONTH=12"
        ),
        CalendarCase(
            name: "month alone: its first day at midnight",
            components: DateComponents(month: 3),
            fireDate: recent,
            rrule: "FREQ=YEARLY;BYSECOND=0;BYMINUTE=0;BYHOUR=0;BYMONTHDAY=1;BYMONTH=3"
        ),
        CalendarCase(
            name: "weekday and day: Friday the 13th",
            components: DateComponents(day: 13, weekday: 6),
            fireDate: recent,
            rrule: "FREQ=MONTHLY;BYSECOND=0;BYMINUTE=0;BYHOUR=0;BYDAY=FR;BYMONTHDAY=13"
        ),
        CalendarCase(
            name: "hour and minute on a weekday of a month: every hour and minute listed",
            components: DateComponents(minute: 0, weekday: 3, weekdayOrdinal: 2),
            fireDate: recent,
            rrule:
                "FREQ=MONTHLY;BYSECOND=0;BYMINUTE=0;BYHOUR=\((0...23).map(String.init).joined(separator: ","));BYDAY=2TU"
        ),
        CalendarCase(
            name: "ordinal weekday: the second Tuesday of each month",
            components: DateComponents(hour: 10, weekday: 3, weekdayOrdinal: 2),
            fireDate: recent,
            rrule: "FREQ=MONTHLY;BYSECOND=0;BYMINUTE=0;BYHOUR=10;BYDAY=2TU"
        ),
        CalendarCase(
            name: "ordinal weekday of a month: the fourth Thursday of November",
            components: DateComponents(month: 11, hour: 12, weekday: 5, weekdayOrdinal: 4),
            fireDate: recent,
            rrule: "FREQ=YEARLY;BYSECOND=0;BYMINUTE=0;BYHOUR=12;BYDAY=4TH;BYMONTH=11"
        ),
        CalendarCase(
            name: "last Friday of the month",
            components: DateComponents(hour: 17, weekday: 6, weekdayOrdinal: -1),
            fireDate: recent,
            rrule: "FREQ=MONTHLY;BYSECOND=0;BYMINUTE=0;BYHOUR=17;BYDAY=-1FR"
        ),
        CalendarCase(
            name: "a whole date: one wall-clock time",
            components: DateComponents(year: 2027, month: 3, day: 14, hour: 9, minute: 30),
            fireDate: "2027-03-14T09:30:00",
            rrule: nil
        ),
        CalendarCase(
            name: "a year alone: its first instant",
            components: DateComponents(year: 2028),
            fireDate: "2028-01-01T00:00:00",
            rrule: nil
        ),
        CalendarCase(
            name: "a later year and a time: daily within that year",
            components: DateComponents(year: 2030, hour: 9),
            fireDate: "2030-01-01T00:00:00",
            rrule: "FREQ=DAILY;UNTIL=20301231T235959;BYSECOND=0;BYMINUTE=0;BYHOUR=9"
        ),
        CalendarCase(
            name: "this year and a time: daily from now to its end",
            components: DateComponents(year: 2026, month: 12, hour: 9),
            fireDate: recent,
            rrule: "FREQ=DAILY;UNTIL=20261231T235959;BYSECOND=0;BYMINUTE=0;BYHOUR=9;BYMONTH=12"
        ),
    ]

    @Test(arguments: calendarCases)
    func calendarComponentsBecomeRules(_ c: CalendarCase) throws {
        let repeating = try NotificationTrigger.calendar(matching: c.components, repeats: true)
            .scheduleFields(now: Self.now)
        var expected: JSONObject = ["fireDate": .string(c.fireDate)]
        if let rrule = c.rrule { expected["rrule"] = .string(rrule) }
        #expect(repeating.object == expected)
        #expect(repeating.object.keys == expected.keys)
        #expect(!repeating.firstOccurrenceOnly)

        // Without repeats, the same rule, of which only the first date is scheduled; a whole date
        // is that date either way.
        let once = try NotificationTrigger.calendar(matching: c.components, repeats: false)
            .scheduleFields(now: Self.now)
        #expect(once.object == expected)
        #expect(once.firstOccurrenceOnly == (c.rrule != nil))
    }

    /// A set of weekdays is one rule, Monday to Friday as `chime schedule --on mon-fri` sends it.
    @Test(
        arguments: [
            (
                Set<Weekday>.weekdays, DateComponents(hour: 18, minute: 0),
                "FREQ=WEEKLY;BYSECOND=0;BYMINUTE=0;BYHOUR=18;BYDAY=MO,TU,WE,TH,FR"
            ),
            (
                Set<Weekday>.weekends, DateComponents(hour: 9, minute: 30),
                "FREQ=WEEKLY;BYSECOND=0;BYMINUTE=30;BYHOUR=9;BYDAY=SA,SU"
            ),
            ([.sunday, .wednesday], DateComponents(hour: 7), "FREQ=WEEKLY;BYSECOND=0;BYMINUTE=0;BYHOUR=7;BYDAY=WE,SU"),
            ([.friday], DateComponents(day: 13), "FREQ=MONTHLY;BYSECOND=0;BYMINUTE=0;BYHOUR=0;BYDAY=FR;BYMONTHDAY=13"),
            (
                Set(Weekday.allCases), DateComponents(hour: 6),
                "FREQ=WEEKLY;BYSECOND=0;BYMINUTE=0;BYHOUR=6;BYDAY=MO,TU,WE,TH,FR,SA,SU"
            ),
        ] as [(Set<Weekday>, DateComponents, String)]
    )
    func aSetOfWeekdaysIsOneWeeklyRule(_ days: Set<Weekday>, _ components: DateComponents, _ rrule: String) throws {
        let fields = try NotificationTrigger.calendar(matching: components, on: days, repeats: true, timeZone: .device)
            .scheduleFields(now: Self.now)
        #expect(fields.object == ["fireDate": .string(Self.recent), "rrule": .string(rrule), "timeZone": "device"])
        #expect(!fields.firstOccurrenceOnly)
        let once = try NotificationTrigger.calendar(matching: components, on: days, repeats: false)
            .scheduleFields(now: Self.now)
        #expect(once.object["rrule"] == .string(rrule))
        #expect(once.firstOccurrenceOnly)
        // The same rule as one weekday when the set has one.
        if days.count == 1, let day = days.first {
            var single = components
            single.weekday = day.rawValue
            let one = try NotificationTrigger.calendar(matching: single, repeats: true).scheduleFields(now: Self.now)
            #expect(one.object["rrule"] == .string(rrule))
        }
    }

    @Test func aWeekdayAndASetOfWeekdaysAreNotBothGiven() {
        let error = #expect(throws: ChimeClientError.self) {
            try NotificationTrigger.calendar(
                matching: DateComponents(hour: 9, weekday: 2),
                on: .weekends,
                repeats: true
            )
            .scheduleFields(now: Self.now)
        }
        #expect(error?.code == .invalidArgument)
        #expect(error?.field == "dateMatching")
    }

    @Test func calendarZoneComesFromTheTriggerOrTheComponents() throws {
        var components = DateComponents(hour: 7, minute: 0)
        components.timeZone = TimeZone(identifier: "Asia/Shanghai")
        let fromComponents = try NotificationTrigger.calendar(matching: components, repeats: true)
            .scheduleFields(now: Self.now)
        #expect(fromComponents.object["timeZone"] == "Asia/Shanghai")
        let given = try NotificationTrigger.calendar(matching: components, repeats: true, timeZone: .device)
            .scheduleFields(now: Self.now)
        #expect(given.object["timeZone"] == "device")
    }

    @Test(arguments: [
        DateComponents(),
        DateComponents(hour: 24),
        DateComponents(month: 13),
        DateComponents(weekday: 8),
        DateComponents(weekdayOrdinal: 2),
        DateComponents(weekday: 2, weekdayOrdinal: 0),
        DateComponents(weekOfYear: 3),
        DateComponents(year: 2027, month: 2, day: 30),
        DateComponents(hour: 9, nanosecond: 5),
    ])
    func calendarComponentsThatCannotBeSentAreRefused(_ components: DateComponents) {
        #expect(throws: ChimeClientError(.invalidArgument)) {
            try NotificationTrigger.calendar(matching: components, repeats: true).scheduleFields(now: Self.now)
        }
        let error = #expect(throws: ChimeClientError.self) {
            try NotificationTrigger.calendar(matching: components, repeats: true).scheduleFields(now: Self.now)
        }
        #expect(error?.field == "dateMatching")
    }

    @Test func timeIntervals() throws {
        #expect(try NotificationTrigger.timeInterval(8).scheduleFields(now: Self.now).object == ["after": 8])
        #expect(try NotificationTrigger.timeInterval(0.25).scheduleFields(now: Self.now).object == ["after": 0.25])
        #expect(
            try NotificationTrigger.timeInterval(90, repeats: true).scheduleFields(now: Self.now).object
                == ["after": 90, "rrule": "FREQ=SECONDLY;INTERVAL=90"]
        )
        let comeBack = try NotificationTrigger.timeInterval(86_400, alignedTo: TimeOfDay(hour: 12, minute: 0))
            .scheduleFields(now: Self.now).object
        #expect(comeBack == ["after": 86_400, "alignTo": "12:00"])
        #expect(comeBack.keys == ["after", "alignTo"])
        for bad in [NotificationTrigger.timeInterval(0), .timeInterval(-1), .timeInterval(1.5, repeats: true)] {
            #expect(throws: ChimeClientError(.invalidArgument)) { try bad.scheduleFields(now: Self.now) }
        }
    }

    @Test func datesRepeatIntervalsAndRules() throws {
        let instant = Date(timeIntervalSince1970: 1_796_205_600.12)
        #expect(
            try NotificationTrigger.date(instant).scheduleFields(now: Self.now).object
                == ["fireDate": "2026-12-02T10:00:00.120Z"]
        )
        let exam = DateComponents(year: 2026, month: 12, day: 1, hour: 7, minute: 0)
        var trigger = NotificationTrigger.date(
            .wallClock(exam),
            timeZone: .named("Asia/Shanghai"),
            repeatInterval: .day,
            count: 3,
            until: .instant(instant)
        )
        trigger.leadTime = 900
        trigger.exdates = [.wallClock(DateComponents(year: 2026, month: 12, day: 2, hour: 7, minute: 0))]
        let fields = try trigger.scheduleFields(now: Self.now).object
        #expect(fields.keys == ["fireDate", "timeZone", "repeatInterval", "count", "until", "exdates", "leadTime"])
        #expect(
            fields == [
                "fireDate": "2026-12-01T07:00:00", "timeZone": "Asia/Shanghai", "repeatInterval": "day", "count": 3,
                "until": "2026-12-02T10:00:00.120Z", "exdates": ["2026-12-02T07:00:00"], "leadTime": 900,
            ]
        )
        let rule = NotificationTrigger.rule(
            "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
            startingAt: .wallClock(DateComponents(year: 2026, month: 12, day: 1, hour: 18, minute: 0)),
            timeZone: .device
        )
        #expect(
            try rule.scheduleFields(now: Self.now).object
                == [
                    "fireDate": "2026-12-01T18:00:00", "timeZone": "device",
                    "rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
                ]
        )
        let incomplete = NotificationTrigger.date(.wallClock(DateComponents(year: 2026, month: 12, day: 1)))
        #expect(throws: ChimeClientError(.invalidArgument)) { try incomplete.scheduleFields(now: Self.now) }
    }

    /// Every field of the protocol is reachable from a request, with its wire name, in the
    /// protocol's order: `id`, then each schedule field from the trigger and each content field
    /// from the content. A field the protocol gains fails to compile in the client's mapping;
    /// this test fails when one is mapped to the wrong member.
    @Test func aRequestIsSentWithEveryFieldInTheProtocolsOrder() throws {
        let content = NotificationContent.everyField
        let request = NotificationRequest(identifier: "med", content: content, trigger: .timeInterval(60))
        let (object, firstOnly) = try request.notificationObject(now: Self.now)
        #expect(!firstOnly)
        #expect(
            object.keys == [
                "id", "after", "alertTitle", "alertBody", "alertAction", "hasAction", "soundName", "category",
                "badge", "userInfo", "expiresAfter", "misfire", "ignoreQuietHours", "enabled", "keepAfterFiring",
            ]
        )
        #expect(object["badge"] == "+1")
        #expect(object["misfire"] == "skip")
        #expect(object["userInfo"] == ["kind": "med", "dose": 2])
        let keys = Set(object.keys)
        #expect(keys.isSubset(of: Set(NotificationField.allCases.map(\.wireName))))

        var bodies = content
        bodies.body = nil
        bodies.alertBodies = ["a", "b"]
        let withBodies = try NotificationRequest(identifier: "med", content: bodies, trigger: .timeInterval(60))
            .notificationObject(now: Self.now).object
        #expect(withBodies["alertBodies"] == ["a", "b"])

        // Each field is either the trigger's or the content's, never both.
        let scheduleFields = Set(NotificationField.schedule.map(\.wireName))
        #expect(
            scheduleFields == [
                "fireDate", "after", "alignTo", "timeZone", "repeatInterval", "rrule", "count",
                "until", "exdates", "leadTime",
            ]
        )
        #expect(scheduleFields.isDisjoint(with: keys.subtracting(["after"])))
    }

    @Test func badges() throws {
        #expect(try Badge.increment(1).json() == "+1")
        #expect(try Badge.increment().json() == "+1")
        #expect(try Badge.decrement(2).json() == "-2")
        #expect(try Badge.absolute(3).json() == 3)
        #expect(try Badge.absolute(0).json() == 0)
        #expect(try Badge.increment(Badge.maximum).json() == .string("+\(Badge.maximum)"))
        // Past the maximum, or below 0, is refused before it is sent, as chimed would.
        for past in [Badge.increment(Badge.maximum + 1), .decrement(Badge.maximum + 1), .absolute(-1)] {
            #expect(throws: ChimeClientError(.invalidArgument)) { try past.json() }
        }
        #expect(throws: ChimeClientError(.invalidArgument)) {
            try NotificationContent(body: "b", badge: .absolute(Badge.maximum + 1)).value(of: .badge)
        }
    }

    @Test func selectors() {
        #expect(NotificationSelector.identifiers(["a", "b"]).json == ["ids": ["a", "b"]])
        #expect(NotificationSelector.userInfo(["kind": "med"]).json == ["match": ["userInfo": ["kind": "med"]]])
        #expect(NotificationSelector.all.json == ["all": true])
        #expect(QuietHoursChange.clear.json == .null)
        let quiet = QuietHoursChange.set(
            QuietHours(start: TimeOfDay(hour: 22, minute: 0), end: TimeOfDay(hour: 7, minute: 0))
        )
        #expect(quiet.json == ["start": "22:00", "end": "07:00"])
    }

    /// PROTOCOL.md section 5's delivery, read.
    @Test func aDeliveryIsRead() throws {
        let text = """
            {"deviceId": "d1", "id": "med", "fireId": "med@2026-12-01T10:00:00Z",
             "occurrenceDate": "2026-12-01T10:00:00Z", "fireDate": "2026-12-01T09:45:00Z",
             "firedAt": "2026-12-01T09:45:00.004Z", "occurrence": 3, "last": false,
             "late": false, "missed": 0, "deferred": false,
             "alertTitle": "T", "alertBody": "B", "alertAction": "A", "hasAction": true,
             "soundName": "default", "category": "C", "badge": 4, "userInfo": {"tag": "med"}}
            """
        let delivery = try ChimeDelivery(payload: Array(text.utf8))
        #expect(delivery.deviceId == "d1")
        #expect(delivery.identifier == "med")
        #expect(delivery.fireId == "med@2026-12-01T10:00:00Z")
        #expect(delivery.occurrenceDate == Date(timeIntervalSince1970: 1_796_119_200))
        #expect(delivery.fireDate == Date(timeIntervalSince1970: 1_796_118_300))
        #expect(delivery.firedAt == Date(timeIntervalSince1970: 1_796_118_300.004))
        #expect(delivery.occurrence == 3)
        #expect(!delivery.isLast && !delivery.isLate && !delivery.isDeferred && delivery.missed == 0)
        #expect(delivery.content.title == "T")
        #expect(delivery.content.body == "B")
        #expect(delivery.content.action == "A")
        #expect(delivery.content.hasAction == true)
        #expect(delivery.content.sound == "default")
        #expect(delivery.content.category == "C")
        #expect(delivery.badge == 4)
        #expect(delivery.userInfo == ["tag": "med"])

        #expect(throws: ChimeClientError(.invalidReply)) { try ChimeDelivery(payload: Array("[]".utf8)) }
        #expect(throws: ChimeClientError(.invalidReply)) { try ChimeDelivery(json: ["id": "med"]) }
    }

    @Test func errorCodes() {
        #expect(ChimeClientError.Code(wireName: "not_found") == .notFound)
        #expect(ChimeClientError.Code.unknownField.wireName == "unknown_field")
        #expect(ChimeClientError.Code.timeout.wireName == nil)
        #expect(ChimeClientError(.notFound, field: "id", "id: no such notification") == ChimeClientError(.notFound))
        #expect("\(ChimeClientError(.timeout, "no reply"))" == "timeout: no reply")
        #expect(ChimeClientError.Code(wireName: "something_new").description == "something_new")
    }
}
