/// Which zone a notification's wall-clock times are read in.
public enum TimeZoneSetting: Hashable, Sendable {
    /// The device's zone (PROTOCOL.md 3.7), followed when it changes.
    case device
    case named(Zone)
}

/// `badge`: an absolute number, or a change to the device's counter applied when it fires.
public enum Badge: Hashable, Sendable {
    case absolute(Int)
    case delta(Int)

    /// The largest badge counter, and the largest number a badge sets or changes it by
    /// (PROTOCOL.md section 3.8): a counter saturates there, whatever is applied to it, so every
    /// client can hold it and no app icon shows more.
    public static let maximum = 1_000_000

    /// `n` brought into 0...``maximum``.
    public static func clamped(_ n: Int) -> Int { min(max(n, 0), maximum) }

    /// Applies this badge to a counter; the counter stays within 0...``maximum``.
    public func applied(to counter: Int) -> Int {
        switch self {
        case .absolute(let n): return Self.clamped(n)
        case .delta(let d): return Self.clamped(counter + d)
        }
    }
}

/// What happens to occurrences that were missed while the worker or the broker was down.
public enum Misfire: String, Hashable, Sendable, CaseIterable {
    case coalesce, skip, all
}

/// A time of day, to the second.
public struct TimeOfDay: Hashable, Sendable, CustomStringConvertible {
    public var hour: Int
    public var minute: Int
    public var second: Int

    public init(hour: Int, minute: Int, second: Int = 0) {
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// `HH:MM` or `HH:MM:SS`.
    public init?(parsing text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 3, parts.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
            let h = Int(parts[0]), let m = Int(parts[1]), (0...23).contains(h), (0...59).contains(m)
        else { return nil }
        var s = 0
        if parts.count == 3 {
            guard let value = Int(parts[2]), (0...59).contains(value) else { return nil }
            s = value
        }
        self.init(hour: h, minute: m, second: s)
    }

    public var secondOfDay: Int { hour * 3600 + minute * 60 + second }

    public var description: String {
        let hm = "\(hour < 10 ? "0" : "")\(hour):\(minute < 10 ? "0" : "")\(minute)"
        return second == 0 ? hm : hm + ":\(second < 10 ? "0" : "")\(second)"
    }
}

/// A device's quiet hours, in its zone. `start == end` means no quiet time; `start > end` spans midnight.
public struct QuietHours: Hashable, Sendable {
    public var start: TimeOfDay
    public var end: TimeOfDay

    public init(start: TimeOfDay, end: TimeOfDay) {
        self.start = start
        self.end = end
    }

    /// Whether a wall-clock time is inside the quiet hours (start inclusive, end exclusive).
    public func contains(_ local: LocalDateTime) -> Bool {
        let t = local.hour * 3600 + local.minute * 60 + local.second
        let s = start.secondOfDay
        let e = end.secondOfDay
        if s == e { return false }
        return s < e ? (t >= s && t < e) : (t >= s || t < e)
    }

    /// The first instant after `instant` at which the quiet hours that contain it end.
    public func end(after instant: Instant, in zone: Zone) -> Instant {
        let local = zone.localDateTime(at: instant)
        var day = LocalDateTime(
            year: local.year,
            month: local.month,
            day: local.day,
            hour: end.hour,
            minute: end.minute,
            second: end.second
        )
        var candidate = zone.instant(for: day)
        var guardCount = 0
        while candidate <= instant && guardCount < 4 {
            let days = daysFromCivil(year: day.year, month: day.month, day: day.day) + 1
            let next = civilFromDays(days)
            day.year = next.year
            day.month = next.month
            day.day = next.day
            candidate = zone.instant(for: day)
            guardCount += 1
        }
        return candidate
    }
}

/// How a notification may interrupt (Apple's `UNNotificationInterruptionLevel`), for the push
/// services that have a priority (PROTOCOL.md section 3.11).
public enum InterruptionLevel: String, CaseIterable, Hashable, Sendable {
    case passive, active, timeSensitive, critical
}

/// Where a notification's deliveries go (PROTOCOL.md section 2).
public enum Channels: String, CaseIterable, Hashable, Sendable {
    /// MQTT and every push registration of the device.
    case all
    /// MQTT only: silent data for a connected app.
    case mqtt
    /// Push only: nothing on the notifications topic.
    case push
}

/// A notification as a client described it (PROTOCOL.md section 2), validated.
///
/// Optional fields are nil when the client did not give them, so that `list` shows a
/// notification with the fields it was scheduled with. Once the engine has accepted it, `after`
/// and `alignTo` have been resolved into `fireDate`.
public struct NotificationSpec: Hashable, Sendable {
    public var id: String?
    public var fireDate: DateTimeValue?
    /// `after`, in milliseconds.
    public var after: Int64?
    public var alignTo: TimeOfDay?
    public var timeZone: TimeZoneSetting?
    public var repeatInterval: RepeatUnit?
    public var rrule: RecurrenceRule?
    public var count: Int?
    public var until: DateTimeValue?
    public var exdates: [DateTimeValue]?
    /// `leadTime`, in milliseconds.
    public var leadTime: Int64?

    public var alertTitle: String?
    public var alertBody: String?
    public var alertBodies: [String]?
    public var alertAction: String?
    public var hasAction: Bool?
    public var soundName: String?
    public var category: String?
    /// Groups notifications on the device (APNs `thread-id`).
    public var threadId: String?
    public var interruptionLevel: InterruptionLevel?
    public var badge: Badge?
    public var userInfo: JSONObject?
    /// `expiresAfter`, in milliseconds.
    public var expiresAfter: Int64?
    public var misfire: Misfire?
    public var ignoreQuietHours: Bool?
    public var enabled: Bool?
    public var keepAfterFiring: Bool?
    /// Where deliveries go: MQTT, the push registrations, or both (nil: both).
    public var channels: Channels?

    /// Seeds the pick among `alertBodies`, so that a replayed or re-sent delivery picks the same one.
    public var seed: UInt64 = 0

    public init() {}

    public var isRepeating: Bool { repeatInterval != nil || rrule != nil }

    public var pattern: Recurrence.Pattern {
        if let rrule { return .rule(rrule) }
        if let repeatInterval { return .interval(repeatInterval) }
        return .once
    }

    /// Whether wall-clock times follow the device's zone: an explicit `"device"`, or a wall-clock
    /// `fireDate` or `alignTo` without a zone.
    public var followsDeviceZone: Bool {
        switch timeZone {
        case .device: return true
        case .named: return false
        case nil:
            if alignTo != nil { return true }
            if case .local = fireDate { return true }
            return false
        }
    }

    /// The zone this notification's times are read in, given the device's zone; nil when it
    /// follows a device that has none.
    public func effectiveZone(deviceZone: Zone?) -> Zone? {
        if case .named(let zone) = timeZone { return zone }
        return followsDeviceZone ? deviceZone : .utc
    }
}

/// A notification as the engine accepted it: its id given or generated, `after` and `alignTo`
/// resolved into its fire date. What the journal's schedule entries hold and what a stored
/// notification is read back as.
///
/// The other fields are the spec's (``NotificationField``), read through it:
/// `resolved.rrule` is `resolved.spec.rrule`.
@dynamicMemberLookup
public struct ResolvedNotification: Hashable, Sendable {
    /// The fields in one shared, immutable object: a notification passes from the decision to the
    /// journal, the reply and the engine by value, and copying some thirty fields each time (seven
    /// copies a `schedule`) cost more instructions than encoding it, `valgrind --tool=callgrind`.
    private final class Storage: Sendable {
        let id: String
        let fireDate: DateTimeValue
        let spec: NotificationSpec
        let encoded: EncodedNotification?

        init(id: String, fireDate: DateTimeValue, spec: NotificationSpec, encoded: EncodedNotification?) {
            self.id = id
            self.fireDate = fireDate
            self.spec = spec
            self.encoded = encoded
        }
    }

    private let storage: Storage

    public var id: String { storage.id }
    public var fireDate: DateTimeValue { storage.fireDate }
    /// The fields as given; `id` and `fireDate` are the ones above, `after` and `alignTo` unset.
    /// (Read in place: a getter's copy of the spec retained each of its fields.)
    public var spec: NotificationSpec { _read { yield storage.spec } }
    /// The spec written once when it is scheduled, for the byte quota, the journal and the engine
    /// (``NotificationCoding/encoded(_:)``); nil when read back. Not part of its value.
    package var encoded: EncodedNotification? { storage.encoded }

    /// - Parameters:
    ///   - spec: the fields as given; its `id`, `fireDate`, `after` and `alignTo` are replaced.
    public init(id: String, fireDate: DateTimeValue, _ spec: NotificationSpec) {
        var spec = spec
        spec.id = id
        spec.fireDate = fireDate
        spec.after = nil
        spec.alignTo = nil
        storage = Storage(id: id, fireDate: fireDate, spec: spec, encoded: nil)
    }

    /// A spec that is already resolved (read from the journal); nil when its id or fire date is
    /// missing.
    public init?(resolved spec: NotificationSpec) {
        guard let id = spec.id, let fireDate = spec.fireDate, spec.after == nil else { return nil }
        self.init(id: id, fireDate: fireDate, spec)
    }

    /// A field of the spec. (The engine reads `spec.` fields instead: a key path's projection
    /// copied the whole spec, some 850 instructions a read.)
    public subscript<T>(dynamicMember path: KeyPath<NotificationSpec, T>) -> T { storage.spec[keyPath: path] }

    public func effectiveZone(deviceZone: Zone?) -> Zone? { spec.effectiveZone(deviceZone: deviceZone) }

    /// This notification with its ``encoded`` form.
    package func encodedOnce() -> ResolvedNotification {
        ResolvedNotification(
            storage: Storage(id: id, fireDate: fireDate, spec: spec, encoded: NotificationCoding.encoded(spec))
        )
    }

    private init(storage: Storage) { self.storage = storage }

    public static func == (a: ResolvedNotification, b: ResolvedNotification) -> Bool {
        a.id == b.id && a.fireDate == b.fireDate && a.spec == b.spec
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(fireDate)
        hasher.combine(spec)
    }
}

/// A selector (PROTOCOL.md section 3): which of a device's notifications a command acts on.
public enum Selector: Hashable, Sendable {
    case ids([String])
    case match(userInfo: JSONObject)
    case all

    /// Whether a notification with this id and userInfo is selected.
    public func selects(id: String, userInfo: JSONObject?) -> Bool {
        switch self {
        case .all: return true
        case .ids(let ids): return ids.contains(id)
        case .match(let wanted): return Selector.matches(wanted, userInfo)
        }
    }

    /// Every given key equal, as JSON, to the notification's userInfo value.
    public static func matches(_ wanted: JSONObject, _ userInfo: JSONObject?) -> Bool {
        guard let userInfo else { return wanted.isEmpty }
        for (key, value) in wanted {
            guard let actual = userInfo[key], actual == value else { return false }
        }
        return true
    }
}
