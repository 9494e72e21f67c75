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
    /// The fields, in one object shared by every copy until one of them changes: a spec passes
    /// from the decoder to the engine, the journal and the reply by value, and copying its thirty
    /// fields, each retained, cost some 900 instructions a copy, eleven copies a `schedule`
    /// (`valgrind --tool=callgrind` on `chime-bench hot-path`).
    private final class Storage: @unchecked Sendable {
        // Changed only through `unique()`, on an object no other copy holds.
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private struct Fields: Hashable, Sendable {
        var id: String?
        var fireDate: DateTimeValue?
        var after: Int64?
        var alignTo: TimeOfDay?
        var timeZone: TimeZoneSetting?
        var repeatInterval: RepeatUnit?
        var rrule: RecurrenceRule?
        var count: Int?
        var until: DateTimeValue?
        var exdates: [DateTimeValue]?
        var leadTime: Int64?
        var alertTitle: String?
        var alertBody: String?
        var alertBodies: [String]?
        var alertAction: String?
        var hasAction: Bool?
        var soundName: String?
        var category: String?
        var threadId: String?
        var interruptionLevel: InterruptionLevel?
        var badge: Badge?
        var userInfo: JSONObject?
        var expiresAfter: Int64?
        var misfire: Misfire?
        var ignoreQuietHours: Bool?
        var enabled: Bool?
        var keepAfterFiring: Bool?
        var channels: Channels?
        var seed: UInt64 = 0
    }

    private var storage = Storage(Fields())

    /// The storage, copied first if another spec shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.fields) }
        return storage
    }

    public static func == (a: NotificationSpec, b: NotificationSpec) -> Bool {
        a.storage === b.storage || a.storage.fields == b.storage.fields
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(storage.fields) }

    public var id: String? {
        get { storage.fields.id }
        set { unique().fields.id = newValue }
    }
    public var fireDate: DateTimeValue? {
        get { storage.fields.fireDate }
        set { unique().fields.fireDate = newValue }
    }
    /// `after`, in milliseconds.
    public var after: Int64? {
        get { storage.fields.after }
        set { unique().fields.after = newValue }
    }
    public var alignTo: TimeOfDay? {
        get { storage.fields.alignTo }
        set { unique().fields.alignTo = newValue }
    }
    public var timeZone: TimeZoneSetting? {
        get { storage.fields.timeZone }
        set { unique().fields.timeZone = newValue }
    }
    public var repeatInterval: RepeatUnit? {
        get { storage.fields.repeatInterval }
        set { unique().fields.repeatInterval = newValue }
    }
    public var rrule: RecurrenceRule? {
        get { storage.fields.rrule }
        set { unique().fields.rrule = newValue }
    }
    public var count: Int? {
        get { storage.fields.count }
        set { unique().fields.count = newValue }
    }
    public var until: DateTimeValue? {
        get { storage.fields.until }
        set { unique().fields.until = newValue }
    }
    public var exdates: [DateTimeValue]? {
        get { storage.fields.exdates }
        set { unique().fields.exdates = newValue }
    }
    /// `leadTime`, in milliseconds.
    public var leadTime: Int64? {
        get { storage.fields.leadTime }
        set { unique().fields.leadTime = newValue }
    }
    public var alertTitle: String? {
        get { storage.fields.alertTitle }
        set { unique().fields.alertTitle = newValue }
    }
    public var alertBody: String? {
        get { storage.fields.alertBody }
        set { unique().fields.alertBody = newValue }
    }
    public var alertBodies: [String]? {
        get { storage.fields.alertBodies }
        set { unique().fields.alertBodies = newValue }
    }
    public var alertAction: String? {
        get { storage.fields.alertAction }
        set { unique().fields.alertAction = newValue }
    }
    public var hasAction: Bool? {
        get { storage.fields.hasAction }
        set { unique().fields.hasAction = newValue }
    }
    public var soundName: String? {
        get { storage.fields.soundName }
        set { unique().fields.soundName = newValue }
    }
    public var category: String? {
        get { storage.fields.category }
        set { unique().fields.category = newValue }
    }
    /// Groups notifications on the device (APNs `thread-id`).
    public var threadId: String? {
        get { storage.fields.threadId }
        set { unique().fields.threadId = newValue }
    }
    public var interruptionLevel: InterruptionLevel? {
        get { storage.fields.interruptionLevel }
        set { unique().fields.interruptionLevel = newValue }
    }
    public var badge: Badge? {
        get { storage.fields.badge }
        set { unique().fields.badge = newValue }
    }
    public var userInfo: JSONObject? {
        get { storage.fields.userInfo }
        set { unique().fields.userInfo = newValue }
    }
    /// `expiresAfter`, in milliseconds.
    public var expiresAfter: Int64? {
        get { storage.fields.expiresAfter }
        set { unique().fields.expiresAfter = newValue }
    }
    public var misfire: Misfire? {
        get { storage.fields.misfire }
        set { unique().fields.misfire = newValue }
    }
    public var ignoreQuietHours: Bool? {
        get { storage.fields.ignoreQuietHours }
        set { unique().fields.ignoreQuietHours = newValue }
    }
    public var enabled: Bool? {
        get { storage.fields.enabled }
        set { unique().fields.enabled = newValue }
    }
    public var keepAfterFiring: Bool? {
        get { storage.fields.keepAfterFiring }
        set { unique().fields.keepAfterFiring = newValue }
    }
    /// Where deliveries go: MQTT, the push registrations, or both (nil: both).
    public var channels: Channels? {
        get { storage.fields.channels }
        set { unique().fields.channels = newValue }
    }
    /// Seeds the pick among `alertBodies`, so that a replayed or re-sent delivery picks the same one.
    public var seed: UInt64 {
        get { storage.fields.seed }
        set { unique().fields.seed = newValue }
    }

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
    public let id: String
    public let fireDate: DateTimeValue
    /// The fields as given; `id` and `fireDate` are the ones above, `after` and `alignTo` unset.
    public let spec: NotificationSpec
    /// The spec written once when it is scheduled, for the byte quota, the journal and the engine
    /// (``NotificationCoding/encoded(_:)``); nil when read back. Not part of its value.
    package private(set) var encoded: EncodedNotification?

    /// - Parameters:
    ///   - spec: the fields as given; its `id`, `fireDate`, `after` and `alignTo` are replaced.
    public init(id: String, fireDate: DateTimeValue, _ spec: NotificationSpec) {
        self.id = id
        self.fireDate = fireDate
        var spec = spec
        spec.id = id
        spec.fireDate = fireDate
        spec.after = nil
        spec.alignTo = nil
        self.spec = spec
    }

    /// A spec that is already resolved (read from the journal); nil when its id or fire date is
    /// missing.
    public init?(resolved spec: NotificationSpec) {
        guard let id = spec.id, let fireDate = spec.fireDate, spec.after == nil else { return nil }
        self.init(id: id, fireDate: fireDate, spec)
    }

    /// A field of the spec. (The engine reads `spec.` fields: a key path costs more than a field.)
    public subscript<T>(dynamicMember path: KeyPath<NotificationSpec, T>) -> T { spec[keyPath: path] }

    public func effectiveZone(deviceZone: Zone?) -> Zone? { spec.effectiveZone(deviceZone: deviceZone) }

    /// This notification with its ``encoded`` form.
    package func encodedOnce() -> ResolvedNotification {
        var copy = self
        copy.encoded = NotificationCoding.encoded(spec)
        return copy
    }

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
