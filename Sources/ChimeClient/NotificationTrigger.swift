import ChimeProtocol
import ChimeTime
import Foundation

/// Which zone a trigger's wall-clock times are read in: the `timeZone` field of PROTOCOL.md
/// section 2.
public enum NotificationTimeZone: Sendable, Hashable {
    /// The device's zone (``ChimeNotificationCenter/setDeviceSettings(timeZone:badge:quietHours:receipts:history:)``),
    /// followed when it changes: what a phone's local notification does.
    case device
    /// An IANA zone such as `Europe/Paris`, which the worker's zone database has.
    case named(String)

    /// A Foundation zone, by its identifier.
    ///
    /// - Parameter timeZone: A zone whose identifier is an IANA zone (`TimeZone(identifier:)`).
    /// - Returns: `.named(timeZone.identifier)`.
    public static func zone(_ timeZone: TimeZone) -> NotificationTimeZone { .named(timeZone.identifier) }

    var json: JSON {
        switch self {
        case .device: return "device"
        case .named(let identifier): return .string(identifier)
        }
    }
}

/// A day of the week, numbered as `DateComponents.weekday` numbers it (1 is Sunday).
public enum Weekday: Int, Sendable, Hashable, CaseIterable, Comparable {
    /// Sunday (1) to Saturday (7).
    case sunday = 1, monday, tuesday, wednesday, thursday, friday, saturday

    /// Whether `a` comes before `b` in a week that starts on Sunday, as their numbers do.
    public static func < (a: Weekday, b: Weekday) -> Bool { a.rawValue < b.rawValue }
}

extension Set where Element == Weekday {
    /// Monday to Friday (`on: .weekdays`): `chime schedule --on weekdays` (`--on mon-fri`).
    public static var weekdays: Set<Weekday> { [.monday, .tuesday, .wednesday, .thursday, .friday] }
    /// Saturday and Sunday (`on: .weekends`): `chime schedule --on weekends`.
    public static var weekends: Set<Weekday> { [.saturday, .sunday] }
}

/// When a notification fires: the counterpart of `UNCalendarNotificationTrigger`,
/// `UNTimeIntervalNotificationTrigger` and `UILocalNotification`'s `fireDate` + `repeatInterval`.
///
/// Besides those it has RFC 5545 rules, lead times and skipped dates: the fields of PROTOCOL.md
/// section 2, "When".
///
/// ```swift
/// .calendar(matching: DateComponents(hour: 18, minute: 0), repeats: true)             // daily at 18:00
/// .calendar(matching: DateComponents(hour: 8, minute: 30, weekday: 2), repeats: true)  // Mondays 08:30
/// .calendar(matching: DateComponents(hour: 18, minute: 0), on: .weekdays, repeats: true) // Monday to Friday 18:00
/// .timeInterval(8)                                                                    // in 8 seconds
/// .timeInterval(86_400, alignedTo: TimeOfDay(hour: 12, minute: 0))                    // tomorrow or later, at noon
/// let exam = DateComponents(year: 2026, month: 12, day: 1, hour: 7, minute: 0)
/// .date(.wallClock(exam), timeZone: .named("Asia/Shanghai"))                          // once, 07:00 in Shanghai
/// .rule("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", startingAt: .wallClock(exam))             // weekdays 07:00, from then
/// ```
///
/// Wall-clock times without a ``timeZone`` are read in the device's zone (a device without one
/// fails with `timezone_required`); absolute instants without one repeat in UTC. A trigger the
/// protocol cannot express (an interval of 0 seconds or less, a wall-clock date without a minute)
/// fails the call that sends it with `invalidArgument`, before anything is sent.
public struct NotificationTrigger: Sendable, Hashable {
    /// A date-time: an absolute instant, or a wall-clock time read in the trigger's zone.
    public enum FireDate: Sendable, Hashable {
        /// An absolute instant, sent as RFC 3339 in UTC to the millisecond.
        case instant(Date)
        /// Year, month, day, hour and minute (and optionally second) of a wall-clock time.
        ///
        /// Whole seconds, in the years 1 to 9999; sent as `2026-12-01T18:00:00`.
        case wallClock(DateComponents)

        func json(field: String) throws(ChimeClientError) -> JSON {
            switch self {
            case .instant(let date): return .string(Wire.instant(date))
            case .wallClock(let components):
                return .string(try Wire.localDateTime(components, field: field).description)
            }
        }

        init(_ value: DateTimeValue) {
            switch value {
            case .instant(let instant): self = .instant(Wire.date(instant))
            case .local(let local): self = .wallClock(Wire.components(local))
            }
        }
    }

    /// What the trigger is.
    public enum Kind: Sendable, Hashable {
        /// Fires when the date matches every component given (year, month, day, weekday,
        /// weekdayOrdinal, hour, minute, second), as `UNCalendarNotificationTrigger(dateMatching:repeats:)`:
        /// components finer than the finest one given are 0 (or the first day, the first month),
        /// coarser ones not given match anything. Sent as an RRULE; without `repeats`, only its first
        /// occurrence is scheduled. `weekdays`, when not empty, is the weekday component as a set,
        /// for days a single `DateComponents` cannot name: Monday to Friday is one trigger (a rule
        /// `BYDAY=MO,TU,WE,TH,FR`, as `chime schedule --on mon-fri` sends), where iOS needs five.
        case calendar(DateComponents, weekdays: Set<Weekday> = [], repeats: Bool)
        /// Fires this many seconds after chimed receives the command (`after`), then every as many
        /// seconds if `repeats`: an RRULE `FREQ=SECONDLY;INTERVAL=n` from that moment, which works
        /// in whole seconds (so its occurrences, the first included, are on the second below), and
        /// repeats at most as often as the worker's `--min-repeat-seconds` (60 by default) allows.
        /// With `alignedTo`: at the first such wall-clock time at or after that moment (`alignTo`).
        case timeInterval(TimeInterval, repeats: Bool, alignedTo: TimeOfDay?)
        /// Fires at a date, repeating by a calendar unit as `UILocalNotification`'s `repeatInterval`
        /// does, at most `count` times or up to `until`.
        case date(FireDate, repeatInterval: RepeatUnit?, count: Int?, until: FireDate?)
        /// Fires at each occurrence of an RFC 5545 RRULE whose DTSTART is `start`.
        case rule(String, start: FireDate)
    }

    /// What the trigger is; the static functions below make each kind.
    public var kind: Kind
    /// The zone of wall-clock times and of repeats (`timeZone`); nil: the device's for wall-clock
    /// times, UTC for instants.
    public var timeZone: NotificationTimeZone?
    /// Fire each occurrence this many seconds earlier (`leadTime`: "remind me 15 minutes before").
    ///
    /// At least 0, kept to the millisecond.
    public var leadTime: TimeInterval?
    /// Occurrences to skip (`exdates`): wall-clock date-times in the trigger's zone, or instants.
    public var exdates: [FireDate]?

    /// A trigger of any kind, with the options every kind may have.
    ///
    /// - Parameters:
    ///   - kind: What the trigger is.
    ///   - timeZone: The zone of wall-clock times and repeats (``timeZone``).
    ///   - leadTime: Seconds to fire each occurrence earlier (``leadTime``).
    ///   - exdates: Occurrences to skip (``exdates``).
    public init(
        _ kind: Kind,
        timeZone: NotificationTimeZone? = nil,
        leadTime: TimeInterval? = nil,
        exdates: [FireDate]? = nil
    ) {
        self.kind = kind
        self.timeZone = timeZone
        self.leadTime = leadTime
        self.exdates = exdates
    }

    /// Fires when the date matches `components`, as `UNCalendarNotificationTrigger(dateMatching:repeats:)`.
    ///
    /// Components finer than the finest one given are 0, coarser ones not given match anything
    /// (see ``Kind/calendar(_:weekdays:repeats:)``): `DateComponents(hour: 18, minute: 0)` is every
    /// day at 18:00. It is sent as an RRULE; without `repeats`, only its first occurrence is
    /// scheduled.
    ///
    /// - Parameters:
    ///   - components: Any of year, month, day, weekday, weekdayOrdinal, hour, minute, second;
    ///     a zone set in them is the trigger's unless `timeZone` is given.
    ///   - repeats: Whether it fires at every matching date, or only at the first.
    ///   - timeZone: The zone the components are read in; nil for the device's.
    /// - Returns: A calendar trigger.
    public static func calendar(
        matching components: DateComponents,
        repeats: Bool,
        timeZone: NotificationTimeZone? = nil
    ) -> NotificationTrigger {
        NotificationTrigger(
            .calendar(components, repeats: repeats),
            timeZone: timeZone ?? components.timeZone.map(NotificationTimeZone.zone)
        )
    }

    /// Fires on each of `weekdays` at the time `components` give.
    ///
    /// Monday to Friday at 18:00 is
    /// `.calendar(matching: DateComponents(hour: 18, minute: 0), on: .weekdays, repeats: true)`:
    /// one rule, `BYDAY=MO,TU,WE,TH,FR`. `components` may narrow it further (`day: 13` with
    /// `[.friday]`: Friday the 13th), but not give a `weekday` of its own.
    ///
    /// - Parameters:
    ///   - components: The time of day, and any other components but `weekday`.
    ///   - weekdays: The days it fires on: `.weekdays`, `.weekends`, or any set.
    ///   - repeats: Whether it fires at every matching date, or only at the first.
    ///   - timeZone: The zone the components are read in; nil for the device's.
    /// - Returns: A calendar trigger.
    public static func calendar(
        matching components: DateComponents,
        on weekdays: Set<Weekday>,
        repeats: Bool,
        timeZone: NotificationTimeZone? = nil
    ) -> NotificationTrigger {
        NotificationTrigger(
            .calendar(components, weekdays: weekdays, repeats: repeats),
            timeZone: timeZone ?? components.timeZone.map(NotificationTimeZone.zone)
        )
    }

    /// Fires `seconds` after chimed receives the command, as
    /// `UNTimeIntervalNotificationTrigger(timeInterval:repeats:)`.
    ///
    /// It is sent as `after`; a repeating one also as the rule `FREQ=SECONDLY;INTERVAL=n` (see
    /// ``Kind/timeInterval(_:repeats:alignedTo:)``).
    ///
    /// - Parameters:
    ///   - seconds: More than 0, at most 315360000, kept to the millisecond; whole seconds, and at
    ///     least the worker's `--min-repeat-seconds` (60 by default), when it repeats.
    ///   - repeats: Whether it fires again every `seconds`.
    /// - Returns: A time-interval trigger.
    public static func timeInterval(_ seconds: TimeInterval, repeats: Bool = false) -> NotificationTrigger {
        NotificationTrigger(.timeInterval(seconds, repeats: repeats, alignedTo: nil))
    }

    /// Fires at the first wall-clock `time` at least `seconds` after chimed receives the command.
    ///
    /// "Come back tomorrow at noon" is `timeInterval(86_400, alignedTo: TimeOfDay(hour: 12, minute: 0))`;
    /// it is sent as `after` and `alignTo`.
    ///
    /// - Parameters:
    ///   - seconds: More than 0, at most 315360000.
    ///   - time: The wall-clock time it fires at (`alignTo`).
    ///   - timeZone: The zone of `time`; nil for the device's.
    /// - Returns: A time-interval trigger.
    public static func timeInterval(
        _ seconds: TimeInterval,
        alignedTo time: TimeOfDay,
        timeZone: NotificationTimeZone? = nil
    ) -> NotificationTrigger {
        NotificationTrigger(.timeInterval(seconds, repeats: false, alignedTo: time), timeZone: timeZone)
    }

    /// Fires at a date, and repeats as `UILocalNotification`'s `fireDate`, `timeZone` and
    /// `repeatInterval` do.
    ///
    /// Occurrence k is `date + k × repeatInterval` in the trigger's zone: a day or longer keeps the
    /// wall-clock time, an hour or shorter is elapsed time (PROTOCOL.md section 2).
    ///
    /// - Parameters:
    ///   - date: The first occurrence (`fireDate`).
    ///   - timeZone: The zone of a wall-clock date and of the repeats; nil: the device's for a
    ///     wall-clock date, UTC for an instant.
    ///   - repeatInterval: The calendar unit it repeats by; nil for once.
    ///   - count: With `repeatInterval`, at most this many occurrences (at least 1).
    ///   - until: With `repeatInterval`, no occurrence after this date.
    /// - Returns: A date trigger.
    public static func date(
        _ date: FireDate,
        timeZone: NotificationTimeZone? = nil,
        repeatInterval: RepeatUnit? = nil,
        count: Int? = nil,
        until: FireDate? = nil
    ) -> NotificationTrigger {
        NotificationTrigger(.date(date, repeatInterval: repeatInterval, count: count, until: until), timeZone: timeZone)
    }

    /// Fires at an absolute instant, repeating in UTC (or in `timeZone`) if `repeatInterval` is
    /// given.
    ///
    /// - Parameters:
    ///   - date: The first occurrence.
    ///   - timeZone: The zone of the repeats; nil for UTC.
    ///   - repeatInterval: The calendar unit it repeats by; nil for once.
    /// - Returns: A date trigger.
    public static func date(
        _ date: Date,
        timeZone: NotificationTimeZone? = nil,
        repeatInterval: RepeatUnit? = nil
    ) -> NotificationTrigger {
        .date(.instant(date), timeZone: timeZone, repeatInterval: repeatInterval)
    }

    /// Fires at each occurrence of an RFC 5545 RRULE.
    ///
    /// It is sent as `rrule`, with `start` as its DTSTART (`fireDate`); the parts chimed supports,
    /// RFC 7529's `RSCALE` and `SKIP` among them, are in PROTOCOL.md section 2.
    ///
    /// - Parameters:
    ///   - rrule: The rule (`FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR`), with or without the `RRULE:` prefix.
    ///   - start: Its DTSTART, read in the trigger's zone when it is a wall-clock time.
    ///   - timeZone: The zone of the rule; nil: the device's for a wall-clock start, UTC for an
    ///     instant.
    /// - Returns: A rule trigger.
    public static func rule(
        _ rrule: String,
        startingAt start: FireDate,
        timeZone: NotificationTimeZone? = nil
    ) -> NotificationTrigger {
        NotificationTrigger(.rule(rrule, start: start), timeZone: timeZone)
    }

    /// Whether the trigger fires more than once, as scheduled (a rule may still end after one).
    public var repeats: Bool {
        switch kind {
        case .calendar(_, _, let repeats), .timeInterval(_, let repeats, _): return repeats
        case .date(_, let repeatInterval, _, _): return repeatInterval != nil
        case .rule: return true
        }
    }
}

/// The schedule fields (PROTOCOL.md section 2, "When") a trigger sends.
struct ScheduleFields: Sendable, Hashable {
    /// The fields, in the protocol's order.
    var object: JSONObject
    /// A non-repeating calendar trigger: `object` is the repeating rule, and only its first
    /// occurrence is to be scheduled (found with `preview`).
    var firstOccurrenceOnly: Bool = false
}

extension NotificationTrigger {
    /// The trigger's schedule fields. `now` only dates the DTSTART of a calendar trigger's rule.
    /// - Throws: `invalid_argument` for a trigger the protocol cannot express.
    func scheduleFields(now: Date) throws(ChimeClientError) -> ScheduleFields {
        var values: [NotificationField: JSON] = [:]
        var firstOnly = false
        switch kind {
        case .calendar(let components, let weekdays, let repeats):
            let mapped = try CalendarRule(components, weekdays: weekdays, now: now)
            values[.fireDate] = .string(mapped.start.description)
            values[.rrule] = mapped.rrule.map(JSON.string)
            firstOnly = !repeats && mapped.rrule != nil
        case .timeInterval(let seconds, let repeats, let alignedTo):
            guard seconds.isFinite, seconds > 0 else {
                throw .invalid(NotificationField.after.wireName, "expected a number of seconds > 0, got \(seconds)")
            }
            values[.after] = try Wire.seconds(seconds, field: NotificationField.after.wireName)
            values[.alignTo] = alignedTo.map { .string($0.description) }
            if repeats {
                guard seconds.rounded() == seconds else {
                    throw .invalid(
                        NotificationField.rrule.wireName,
                        "a repeating interval is whole seconds, got \(seconds)"
                    )
                }
                values[.rrule] = .string("FREQ=SECONDLY;INTERVAL=\(Int64(seconds))")
            }
        case .date(let date, let repeatInterval, let count, let until):
            values[.fireDate] = try date.json(field: NotificationField.fireDate.wireName)
            values[.repeatInterval] = repeatInterval.map { .string($0.rawValue) }
            values[.count] = count.map { .int(Int64($0)) }
            values[.until] = try until?.json(field: NotificationField.until.wireName)
        case .rule(let rrule, let start):
            values[.fireDate] = try start.json(field: NotificationField.fireDate.wireName)
            values[.rrule] = .string(rrule)
        }
        values[.timeZone] = timeZone?.json
        if let leadTime {
            values[.leadTime] = try Wire.seconds(leadTime, field: NotificationField.leadTime.wireName)
        }
        if let exdates {
            var list: [JSON] = []
            for (index, date) in exdates.enumerated() {
                list.append(try date.json(field: "\(NotificationField.exdates.wireName)[\(index)]"))
            }
            values[.exdates] = .array(list)
        }
        var object = JSONObject()
        for field in NotificationField.schedule {
            if let value = values[field] { object.append(field.wireName, value) }
        }
        return ScheduleFields(object: object, firstOccurrenceOnly: firstOnly)
    }

    /// The trigger of a notification as chimed stored it: an `after` is listed as the absolute
    /// date it resolved to, and a calendar trigger as the rule it was sent as.
    init(_ spec: NotificationSpec, fireDate: DateTimeValue) {
        let start = FireDate(fireDate)
        let kind: Kind
        if let rrule = spec.rrule {
            kind = .rule(rrule.description, start: start)
        } else {
            kind = .date(
                start,
                repeatInterval: spec.repeatInterval,
                count: spec.count,
                until: spec.until.map(FireDate.init)
            )
        }
        let zone: NotificationTimeZone?
        switch spec.timeZone {
        case .device: zone = .device
        case .named(let named): zone = .named(named.identifier)
        case nil: zone = nil
        }
        self.init(
            kind,
            timeZone: zone,
            leadTime: spec.leadTime.map(Wire.timeInterval(milliseconds:)),
            exdates: spec.exdates.map { $0.map(FireDate.init) }
        )
    }
}
