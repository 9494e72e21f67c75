/// A zone shared by every notification that names it: a `Zone` value is 40 bytes, a reference 8.
final class ZoneBox: Sendable {
    let zone: Zone
    init(_ zone: Zone) { self.zone = zone }
}

/// The fields of a notification that few notifications set, kept out of line so that the
/// common one stays small.
final class SpecExtras: Sendable {
    let rrule: RecurrenceRule?
    let count: Int?
    let until: DateTimeValue?
    let exdates: [DateTimeValue]?
    let alertBodies: [String]?
    let alertAction: String?
    let hasAction: Bool?
    let soundName: String?
    let category: String?
    let expiresAfter: Int64?
    let misfire: Misfire?
    let ignoreQuietHours: Bool?
    let enabled: Bool?
    let keepAfterFiring: Bool?
    let seed: UInt64

    init(_ spec: NotificationSpec) {
        rrule = spec.rrule
        count = spec.count
        until = spec.until
        exdates = spec.exdates
        alertBodies = spec.alertBodies
        alertAction = spec.alertAction
        hasAction = spec.hasAction
        soundName = spec.soundName
        category = spec.category
        expiresAfter = spec.expiresAfter
        misfire = spec.misfire
        ignoreQuietHours = spec.ignoreQuietHours
        enabled = spec.enabled
        keepAfterFiring = spec.keepAfterFiring
        seed = spec.seed
    }

    /// Whether a spec needs extras at all.
    static func needed(_ s: NotificationSpec) -> Bool {
        s.rrule != nil || s.count != nil || s.until != nil || s.exdates != nil || s.alertBodies != nil
            || s.alertAction != nil || s.hasAction != nil || s.soundName != nil || s.category != nil
            || s.expiresAfter != nil || s.misfire != nil || s.ignoreQuietHours != nil || s.enabled != nil
            || s.keepAfterFiring != nil || s.seed != 0
    }
}

/// The durable state of a notification beside its spec, copied out for a snapshot.
struct DurableState: Sendable {
    var version: UInt64
    var enabled: Bool
    var done: Bool
    var firedCount: Int32
    var lastFiredAt: Int64?
    var createdAt: Int64
    var updatedAt: Int64
    var pendingFrom: Int64
}

/// A notification the engine holds: what was scheduled (immutable, compact) and how far its
/// series has got.
///
/// One object per notification, shared by the device's table, the timer heap and the
/// deliveries in flight, so that none of them copies it. The spec fields are `let`; the state
/// fields are touched only by the engine's owner thread.
///
/// `@unchecked Sendable`: a snapshot thread reads the immutable spec fields of objects it holds
/// references to, while the owner thread keeps mutating their `var` state; the snapshot never
/// reads that state (it gets a copy, ``DurableState``), so no memory location is shared between
/// a writer and a reader.
final class StoredNotification: @unchecked Sendable {
    // The spec, resolved: `after` and `alignTo` became the fire date.
    let id: String
    let deviceId: String
    /// Milliseconds since the epoch when absolute; the wall-clock time read as UTC, in seconds,
    /// when `fireIsLocal`.
    let fire: Int64
    let fireIsLocal: Bool
    /// The zone named by `timeZone`, when it names one.
    let zone: ZoneBox?
    /// `timeZone: "device"` was given.
    let zoneIsDevice: Bool
    let repeatUnit: RepeatUnit?
    /// Milliseconds; -1 when not given.
    let leadTimeGiven: Int64
    let alertTitle: String?
    let alertBody: String?
    let badge: Badge?
    /// `userInfo` as compact JSON: deliveries copy it as it is.
    let userInfo: [UInt8]?
    let extras: SpecExtras?
    let isSnooze: Bool

    // Durable state.
    var version: UInt64
    var enabled: Bool
    var done = false
    var firedCount: Int32 = 0
    var lastFiredAt: Int64?
    var createdAt: Int64
    var updatedAt: Int64
    /// Occurrences at or after this instant (ms) are still to be delivered. Set to the time of
    /// scheduling (or resuming) plus the lead time, and past each acknowledged occurrence.
    var pendingFrom: Int64

    // Derived, rebuilt after recovery.
    /// The next occurrence to deliver that is not already in flight.
    var next: Occurrence?
    /// The due time the timer heap holds for this notification; nil when not armed. A heap
    /// entry whose due time is not this one is stale.
    var armedDue: Int64?
    /// Held by the device's quiet hours; delivered with `deferred: true` when they end.
    var deferred = false
    /// The latest occurrence published in this run, so that re-arming never sends it twice.
    var sentThrough: Int64?
    /// Removed from its device: timers and deliveries in flight that still refer to it ignore it.
    var removed = false

    init(
        spec: NotificationSpec,
        deviceId: String,
        zones: inout ZoneInterner,
        version: UInt64,
        at: Instant,
        createdAt: Instant
    ) {
        id = spec.id ?? ""
        self.deviceId = deviceId
        switch spec.fireDate {
        case .local(let local)?:
            fire = local.secondsSinceEpoch
            fireIsLocal = true
        case .instant(let instant)?:
            fire = instant.milliseconds
            fireIsLocal = false
        case nil:
            fire = at.milliseconds
            fireIsLocal = false
        }
        switch spec.timeZone {
        case .named(let z)?:
            zone = zones.box(z)
            zoneIsDevice = false
        case .device?:
            zone = nil
            zoneIsDevice = true
        case nil:
            zone = nil
            zoneIsDevice = false
        }
        repeatUnit = spec.repeatInterval
        leadTimeGiven = spec.leadTime ?? -1
        alertTitle = spec.alertTitle
        alertBody = spec.alertBody
        badge = spec.badge
        userInfo = spec.userInfo.map { JSON.object($0).bytes }
        extras = SpecExtras.needed(spec) ? SpecExtras(spec) : nil
        isSnooze = id.hasSuffix(NotificationCoding.snoozeSuffix)
        self.version = version
        enabled = spec.enabled ?? true
        self.createdAt = createdAt.milliseconds
        updatedAt = at.milliseconds
        pendingFrom = at.milliseconds + max(0, spec.leadTime ?? 0)
    }

    var leadTime: Int64 { max(0, leadTimeGiven) }
    var isListed: Bool { !isSnooze }
    var isRepeating: Bool { repeatUnit != nil || extras?.rrule != nil }

    var fireDate: DateTimeValue {
        fireIsLocal ? .local(LocalDateTime(secondsSinceEpoch: fire)) : .instant(Instant(milliseconds: fire))
    }

    var pattern: Recurrence.Pattern {
        if let rule = extras?.rrule { return .rule(rule) }
        if let unit = repeatUnit { return .interval(unit) }
        return .once
    }

    /// Whether wall-clock times follow the device's zone: `"device"`, or a wall-clock fire date
    /// without a zone.
    var followsDeviceZone: Bool { zoneIsDevice || (zone == nil && fireIsLocal) }

    func effectiveZone(deviceZone: Zone?) -> Zone? {
        if let zone { return zone.zone }
        return followsDeviceZone ? deviceZone : .utc
    }

    /// When an occurrence is due: the occurrence minus the lead time.
    func fireTime(_ occurrence: Occurrence) -> Instant { occurrence.instant.adding(milliseconds: -leadTime) }

    var nextFireDate: Instant? { enabled && !done ? next.map(fireTime) : nil }

    var durable: DurableState {
        DurableState(
            version: version,
            enabled: enabled,
            done: done,
            firedCount: firedCount,
            lastFiredAt: lastFiredAt,
            createdAt: createdAt,
            updatedAt: updatedAt,
            pendingFrom: pendingFrom
        )
    }

    /// The notification as the client gave it (resolved), for `list`, the journal and snapshots.
    var spec: NotificationSpec {
        var s = NotificationSpec()
        s.id = id
        s.fireDate = fireDate
        if let zone {
            s.timeZone = .named(zone.zone)
        } else if zoneIsDevice {
            s.timeZone = .device
        }
        s.repeatInterval = repeatUnit
        s.leadTime = leadTimeGiven >= 0 ? leadTimeGiven : nil
        s.alertTitle = alertTitle
        s.alertBody = alertBody
        s.badge = badge
        if let userInfo, case .object(let o)? = try? JSON(parsing: userInfo) { s.userInfo = o }
        if let e = extras {
            s.rrule = e.rrule
            s.count = e.count
            s.until = e.until
            s.exdates = e.exdates
            s.alertBodies = e.alertBodies
            s.alertAction = e.alertAction
            s.hasAction = e.hasAction
            s.soundName = e.soundName
            s.category = e.category
            s.expiresAfter = e.expiresAfter
            s.misfire = e.misfire
            s.ignoreQuietHours = e.ignoreQuietHours
            s.enabled = e.enabled
            s.keepAfterFiring = e.keepAfterFiring
            s.seed = e.seed
        }
        return s
    }

    /// The userInfo as an object, for selectors.
    var userInfoObject: JSONObject? {
        guard let userInfo, case .object(let o)? = try? JSON(parsing: userInfo) else { return nil }
        return o
    }
}

/// Shares one ``ZoneBox`` per zone identifier.
struct ZoneInterner: Sendable {
    private var boxes: [String: ZoneBox] = [:]

    mutating func box(_ zone: Zone) -> ZoneBox {
        if let box = boxes[zone.identifier] { return box }
        let box = ZoneBox(zone)
        boxes[zone.identifier] = box
        return box
    }
}

/// What the engine holds for one device.
final class DeviceState {
    let id: String
    var timeZone: Zone?
    /// The badge counter as acknowledged deliveries and `device` commands left it.
    var badge = 0
    var quietHours: QuietHours?
    var notifications: [String: StoredNotification] = [:]
    /// How many listed (non-snooze) notifications the device holds, for the quota.
    var listedCount = 0
    /// Badge changes of deliveries sent and not yet acknowledged, oldest first.
    var inflightBadges: [(token: UInt64, badge: Badge)] = []
    /// The listed ids in order, kept while nothing is added or removed (for `list` paging).
    var sortedIds: [String]?
    /// For devices with many notifications: userInfo members to the notifications that have them.
    var index: UserInfoIndex?

    init(id: String) { self.id = id }

    /// The counter as the device has been told: acknowledged changes, then those in flight.
    var currentBadge: Int {
        inflightBadges.reduce(badge) { $1.badge.applied(to: $0) }
    }

    var isEmpty: Bool {
        notifications.isEmpty && timeZone == nil && badge == 0 && quietHours == nil && inflightBadges.isEmpty
    }
}

/// userInfo members (key and value, as JSON) to the notifications that carry them, so that a
/// selector on a device with many notifications does not scan them all.
struct UserInfoIndex {
    /// Devices with more listed notifications than this get an index when first matched.
    static let threshold = 1024

    private var table: [Member: [StoredNotification]] = [:]

    struct Member: Hashable {
        var key: String
        var value: JSON
    }

    init<S: Sequence>(_ notifications: S) where S.Element == StoredNotification {
        for n in notifications { insert(n) }
    }

    mutating func insert(_ n: StoredNotification) {
        guard n.isListed, let info = n.userInfoObject else { return }
        for (key, value) in info { table[Member(key: key, value: value), default: []].append(n) }
    }

    mutating func remove(_ n: StoredNotification) {
        guard n.isListed, let info = n.userInfoObject else { return }
        for (key, value) in info {
            let member = Member(key: key, value: value)
            guard var list = table[member], let i = list.firstIndex(where: { $0 === n }) else { continue }
            list.swapAt(i, list.count - 1)
            list.removeLast()
            table[member] = list.isEmpty ? nil : list
        }
    }

    /// Candidates for a match: those carrying its rarest member (to be checked against all).
    func candidates(_ wanted: JSONObject) -> [StoredNotification] {
        var best: [StoredNotification]?
        for (key, value) in wanted {
            let list = table[Member(key: key, value: value)] ?? []
            if best == nil || list.count < best!.count { best = list }
        }
        return best ?? []
    }
}

/// A delivery published and not yet acknowledged.
struct InFlight: Sendable {
    var notification: StoredNotification
    var version: UInt64
    var occurrence: Occurrence
    var firedAt: Instant
    var last: Bool
    var badge: Badge?
}
