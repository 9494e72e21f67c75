import ChimeProtocol

/// A zone shared by every notification that names it: a `Zone` value is 24 bytes, a reference 8.
///
/// `@unchecked Sendable`: `zone` changes only on the engine's owner thread (new rules after a tzdata
/// upgrade, ``Engine/applyZoneRules(_:)``), which is also the only one to read it; a snapshot thread
/// reads only `identifier`, which never changes.
final class ZoneBox: @unchecked Sendable {
    let identifier: String
    private(set) var zone: Zone
    init(_ zone: Zone) {
        self.identifier = zone.identifier
        self.zone = zone
    }

    func replace(_ zone: Zone) {
        precondition(zone.identifier == identifier, "a zone box holds one zone")
        self.zone = zone
    }
}

/// The fields of a notification that few notifications set (``NotificationField/Storage/extras``),
/// kept out of line so that the common one stays small.
final class SpecExtras: Sendable {
    let rrule: RecurrenceRule?
    let count: Int?
    let until: DateTimeValue?
    let exdates: [DateTimeValue]?
    let alertBodies: [String]?
    let expiresAfter: Int64?
    let misfire: Misfire?
    let ignoreQuietHours: Bool?
    let enabled: Bool?
    let keepAfterFiring: Bool?
    let channels: Channels?
    let seed: UInt64
    /// `rrule != nil`, asked on every arming: reading the optional rule itself copies it.
    let hasRule: Bool

    init(_ spec: NotificationSpec) {
        rrule = spec.rrule
        hasRule = spec.rrule != nil
        count = spec.count
        until = spec.until
        exdates = spec.exdates
        alertBodies = spec.alertBodies
        expiresAfter = spec.expiresAfter
        misfire = spec.misfire
        ignoreQuietHours = spec.ignoreQuietHours
        enabled = spec.enabled
        keepAfterFiring = spec.keepAfterFiring
        channels = spec.channels
        seed = spec.seed
    }

    /// Sets the fields in a spec: what ``init(_:)`` took from it.
    func fill(_ spec: inout NotificationSpec) {
        spec.rrule = rrule
        spec.count = count
        spec.until = until
        spec.exdates = exdates
        spec.alertBodies = alertBodies
        spec.expiresAfter = expiresAfter
        spec.misfire = misfire
        spec.ignoreQuietHours = ignoreQuietHours
        spec.enabled = enabled
        spec.keepAfterFiring = keepAfterFiring
        spec.channels = channels
        spec.seed = seed
    }

    /// Whether a spec needs extras at all.
    static func needed(_ s: NotificationSpec) -> Bool {
        s.rrule != nil || s.count != nil || s.until != nil || s.exdates != nil || s.alertBodies != nil
            || s.expiresAfter != nil || s.misfire != nil || s.ignoreQuietHours != nil || s.enabled != nil
            || s.keepAfterFiring != nil || s.channels != nil || s.seed != 0
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
    // Fields are ordered, and optional integers kept as sentinels, so that the object stays
    // small: a million of them are pending on a busy worker.

    // The spec, resolved: `after` and `alignTo` became the fire date.
    let id: String
    /// Its device. (The device holds it only while it is attached, so this makes no cycle that
    /// outlives a removal.)
    let device: DeviceState
    /// Milliseconds since the epoch when absolute; the wall-clock time read as UTC, in seconds,
    /// when `fireIsLocal`.
    let fire: Int64
    /// Milliseconds; -1 when not given.
    let leadTimeGiven: Int64
    /// The zone named by `timeZone`, when it names one.
    let zone: ZoneBox?
    /// The content fields that were given (`alertTitle`, `alertBody`, `alertAction`,
    /// `hasAction`, `soundName`, `category`, then `userInfo`) as the members of a JSON object
    /// written out, each preceded by a comma, copied into deliveries as it is (``withContent(_:)``).
    ///
    /// One block of its own, freed with the object: a `UInt32` count, then the bytes. An array
    /// would add its 32-byte header and, with malloc's rounding, 32 bytes a notification.
    private let contentBlock: UnsafeMutableRawPointer
    let extras: SpecExtras?
    /// Where the `userInfo` value starts in `content`; -1 when there is none.
    let userInfoStart: Int32
    let badgeValue: Int32
    /// 0: none, 1: absolute, 2: a change.
    let badgeKind: UInt8
    let repeatUnit: RepeatUnit?
    /// `fireIsLocal`, `zoneIsDevice`, `isSnooze` and ``snapshotMark`` in one byte: with one byte
    /// fewer the object packs into 168 bytes, one malloc size class (16 bytes) below.
    private var kindBits: UInt8
    var fireIsLocal: Bool { kindBits & 1 != 0 }
    /// `timeZone: "device"` was given.
    var zoneIsDevice: Bool { kindBits & 2 != 0 }
    var isSnooze: Bool { kindBits & 4 != 0 }
    /// Whether the snapshot being taken holds this notification's durable state already: it does
    /// when this equals the engine's ``Engine/snapshotParity`` (see ``Engine/beginSnapshot()``).
    var snapshotMark: Bool {
        get { kindBits & 8 != 0 }
        set { kindBits = newValue ? kindBits | 8 : kindBits & ~8 }
    }

    // State. `enabled` to `pendingFrom` are durable; the rest is derived and rebuilt after
    // recovery.
    var enabled: Bool
    var done = false
    /// Held by the device's quiet hours; delivered with `deferred: true` when they end.
    var deferred = false
    /// Removed from its device: timers and deliveries in flight that still refer to it ignore it.
    var removed = false
    var firedCount: Int32 = 0
    private var nextIndex: Int32 = 0
    var version: UInt64
    var lastFiredRaw = Int64.min
    var createdAt: Int64
    var updatedAt: Int64
    /// Occurrences at or after this instant (ms) are still to be delivered. Set to the time of
    /// scheduling (or resuming) plus the lead time, and past each acknowledged occurrence.
    var pendingFrom: Int64
    private var nextInstant = Int64.min
    private var armedRaw = Int64.min
    private var sentRaw = Int64.min

    var lastFiredAt: Int64? {
        get { lastFiredRaw == .min ? nil : lastFiredRaw }
        set { lastFiredRaw = newValue ?? .min }
    }

    /// The next occurrence to deliver that is not already in flight.
    var next: Occurrence? {
        get {
            nextInstant == .min ? nil : Occurrence(index: Int(nextIndex), instant: Instant(milliseconds: nextInstant))
        }
        set {
            nextInstant = newValue?.instant.milliseconds ?? .min
            nextIndex = Int32(clamping: newValue?.index ?? 0)
        }
    }

    /// The due time the timer heap holds for this notification; nil when not armed. A heap
    /// entry whose due time is not this one is stale.
    var armedDue: Int64? {
        get { armedRaw == .min ? nil : armedRaw }
        set { armedRaw = newValue ?? .min }
    }

    /// The latest occurrence published in this run, so that re-arming never sends it twice.
    var sentThrough: Int64? {
        get { sentRaw == .min ? nil : sentRaw }
        set { sentRaw = newValue ?? .min }
    }

    var badge: Badge? {
        switch badgeKind {
        case 1: return .absolute(Int(badgeValue))
        case 2: return .delta(Int(badgeValue))
        default: return nil
        }
    }

    /// Every spec field as stored; the state starts at the given version and times.
    init(
        id: String,
        device: DeviceState,
        fire: Int64,
        fireIsLocal: Bool,
        zone: ZoneBox?,
        zoneIsDevice: Bool,
        repeatUnit: RepeatUnit?,
        leadTimeGiven: Int64,
        content: ArraySlice<UInt8>,
        userInfoStart: Int32,
        badgeKind: UInt8,
        badgeValue: Int32,
        extras: SpecExtras?,
        version: UInt64,
        enabled: Bool,
        createdAt: Int64,
        updatedAt: Int64,
        pendingFrom: Int64
    ) {
        self.id = id
        self.device = device
        self.fire = fire
        self.zone = zone
        self.repeatUnit = repeatUnit
        self.leadTimeGiven = leadTimeGiven
        let block = UnsafeMutableRawPointer.allocate(byteCount: 4 + content.count, alignment: 4)
        block.storeBytes(of: UInt32(content.count), as: UInt32.self)
        content.withUnsafeBytes { bytes in
            if let from = bytes.baseAddress { (block + 4).copyMemory(from: from, byteCount: bytes.count) }
        }
        contentBlock = block
        self.userInfoStart = userInfoStart
        self.badgeKind = badgeKind
        self.badgeValue = badgeValue
        self.extras = extras
        self.kindBits =
            (fireIsLocal ? 1 : 0) | (zoneIsDevice ? 2 : 0) | (id.hasSuffix(NotificationCoding.snoozeSuffix) ? 4 : 0)
        self.version = version
        self.enabled = enabled
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.pendingFrom = pendingFrom
    }

    /// A notification as scheduled at `at`.
    convenience init(
        spec resolved: ResolvedNotification,
        device: DeviceState,
        zones: inout ZoneInterner,
        version: UInt64,
        at: Instant,
        createdAt: Instant
    ) {
        let spec = resolved.spec
        let fire: Int64
        let fireIsLocal: Bool
        switch resolved.fireDate {
        case .local(let local):
            fire = local.secondsSinceEpoch
            fireIsLocal = true
        case .instant(let instant):
            fire = instant.milliseconds
            fireIsLocal = false
        }
        var zone: ZoneBox?
        if case .named(let z)? = spec.timeZone { zone = zones.box(z) }
        // Written when it was scheduled (``ResolvedNotification/encoded``), else into a reused
        // scratch buffer; then copied into an exactly sized block: growing one in place would leave
        // a trail of freed buffers among long-lived objects. The scratch buffer is taken out, so
        // that it is the only reference and clearing it keeps its buffer.
        var scratch: [UInt8] = []
        let content: [UInt8]
        let userInfoStart: Int32
        if let encoded = resolved.encoded {
            content = encoded.content
            userInfoStart = encoded.userInfoStart
        } else {
            swap(&scratch, &zones.scratch)
            scratch.removeAll(keepingCapacity: true)
            userInfoStart = NotificationCoding.writeContent(spec, to: &scratch)
            content = scratch
        }
        defer { if resolved.encoded == nil { zones.scratch = scratch } }
        var badgeKind: UInt8 = 0
        var badgeValue: Int32 = 0
        switch spec.badge {
        case .absolute(let v)?:
            badgeKind = 1
            badgeValue = Int32(clamping: v)
        case .delta(let v)?:
            badgeKind = 2
            badgeValue = Int32(clamping: v)
        case nil:
            break
        }
        self.init(
            id: resolved.id,
            device: device,
            fire: fire,
            fireIsLocal: fireIsLocal,
            zone: zone,
            zoneIsDevice: spec.timeZone == .device,
            repeatUnit: spec.repeatInterval,
            leadTimeGiven: spec.leadTime ?? -1,
            content: content[...],
            userInfoStart: userInfoStart,
            badgeKind: badgeKind,
            badgeValue: badgeValue,
            extras: SpecExtras.needed(spec) ? SpecExtras(spec) : nil,
            version: version,
            enabled: spec.enabled ?? true,
            createdAt: createdAt.milliseconds,
            updatedAt: at.milliseconds,
            pendingFrom: at.milliseconds + max(0, spec.leadTime ?? 0)
        )
    }

    var deviceId: String { device.id }
    var leadTime: Int64 { max(0, leadTimeGiven) }

    deinit { contentBlock.deallocate() }

    /// How many bytes ``withContent(_:)`` passes.
    var contentCount: Int { Int(contentBlock.load(as: UInt32.self)) }

    /// Calls `body` with the content bytes, which live as long as this object.
    func withContent<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try withExtendedLifetime(self) { () throws(E) -> R in
            try body(UnsafeRawBufferPointer(start: contentBlock + 4, count: contentCount))
        }
    }

    /// The content fields as an object.
    var contentObject: JSONObject {
        withContent { content in
            guard !content.isEmpty,
                case .object(let o)? = try? JSON(
                    parsing: [UInt8(ascii: "{")] + content.dropFirst() + [UInt8(ascii: "}")]
                )
            else { return [:] }
            return o
        }
    }

    /// `userInfo`, as the JSON text it was stored as.
    var userInfoBytes: [UInt8]? {
        userInfoStart < 0 ? nil : withContent { Array($0[Int(userInfoStart)...]) }
    }

    /// `alertBody`, for tests and logs.
    var alertBody: String? { contentObject["alertBody"]?.stringValue }
    var isListed: Bool { !isSnooze }
    /// What the notification counts against `--max-bytes-per-device`: its id, its content
    /// (texts and userInfo, as delivered) and its schedule's extras (rule, exdates, ...),
    /// serialized. Computed, not stored, to keep the object small; the same at attach and detach.
    var storedBytes: Int { id.utf8.count + contentCount + (extras.map { JSON.object($0.json).bytes.count } ?? 0) }
    var isRepeating: Bool { repeatUnit != nil || extras?.hasRule == true }

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

    /// The notification as the client gave it (resolved), for `list`, `preview` and snoozes.
    var spec: ResolvedNotification {
        var s = NotificationSpec()
        if let zone {
            s.timeZone = .named(zone.zone)
        } else if zoneIsDevice {
            s.timeZone = .device
        }
        s.repeatInterval = repeatUnit
        s.leadTime = leadTimeGiven >= 0 ? leadTimeGiven : nil
        // The content was written from these fields, so it reads back without errors.
        let content = FieldReader(contentObject)
        for field in NotificationField.content { try? field.decode(content, into: &s, from: .journal) }
        s.badge = badge
        extras?.fill(&s)
        return ResolvedNotification(id: id, fireDate: fireDate, s)
    }

    /// The userInfo as an object, for selectors.
    var userInfoObject: JSONObject? {
        guard let bytes = userInfoBytes, case .object(let o)? = try? JSON(parsing: bytes) else { return nil }
        return o
    }
}

/// A copy of `bytes` in an array of exactly their size (copies of an array share its buffer,
/// capacity included).
func exactCopy<C: Collection<UInt8>>(_ bytes: C) -> [UInt8] {
    [UInt8](unsafeUninitializedCapacity: bytes.count) { buffer, count in
        count = buffer.initialize(fromContentsOf: bytes)
    }
}

/// Shares one ``ZoneBox`` per zone identifier, and lends a scratch buffer to whoever builds a
/// stored notification. Every zone the engine has come to use has a box (devices' zones too), so
/// the boxes are the zones whose rules matter to it.
struct ZoneInterner: Sendable {
    private(set) var boxes: [String: ZoneBox] = [:]
    /// The boxes whose zone is not resolved (``Zone/isResolved``): few, and asked for by every
    /// metrics export.
    private(set) var unresolved: Set<String> = []
    var scratch: [UInt8] = []

    /// The shared box of `zone`. A box made with other rules of the same zone keeps its own: rules
    /// change only through ``Engine/applyZoneRules(_:)``.
    mutating func box(_ zone: Zone) -> ZoneBox {
        if let box = boxes[zone.identifier] { return box }
        let box = ZoneBox(zone)
        boxes[zone.identifier] = box
        if !zone.isResolved { unresolved.insert(zone.identifier) }
        return box
    }

    /// `zone` with the rules the engine computes with (those of its box), registering it if new.
    mutating func held(_ zone: Zone) -> Zone { box(zone).zone }

    /// Puts new rules for a zone in its box (``Engine/applyZoneRules(_:)``).
    mutating func replace(_ box: ZoneBox, with zone: Zone) {
        box.replace(zone)
        if zone.isResolved { unresolved.remove(zone.identifier) }
    }
}

/// What the engine holds for one device.
final class DeviceState {
    let id: String
    var timeZone: Zone?
    /// What computing each of its rules (`rrule`) again cost when it was last armed, in candidate
    /// date-times, and their sum (``EngineConfiguration/maxRuleWorkPerDevice``).
    var ruleWork: [String: Int] = [:]
    var ruleWorkTotal = 0
    /// The badge counter as acknowledged deliveries and `device` commands left it.
    var badge = 0
    var quietHours: QuietHours?
    var notifications = NotificationTable()
    /// For a device with at least ``orderedFrom`` notifications: each of them in the order it was
    /// attached, a detached one left in place (marked `removed`) until they are half the list.
    /// Unlike the table's, these positions stay put as notifications come and go, so a snapshot
    /// walks a large device a part at a time (``Engine/continueSnapshot(budget:)``).
    var order: [StoredNotification]?
    /// How many in ``order`` are detached.
    var orderRemoved = 0
    /// Devices with this many notifications keep an ``order``; smaller ones are copied into a
    /// snapshot in one go.
    static let orderedFrom = 4096
    /// How many listed (non-snooze) notifications the device holds, for the quota.
    var listedCount = 0
    /// The ``StoredNotification/storedBytes`` of those, for `--max-bytes-per-device`: summed by the
    /// first schedule that needs it (``totalStoredBytes``) and kept up to date from then on, so that
    /// recovery does not measure every notification it restores.
    var storedBytes: Int?

    /// ``storedBytes``, summed now if it was not yet.
    var totalStoredBytes: Int {
        if let storedBytes { return storedBytes }
        let total = notifications.values.reduce(0) { $0 + ($1.isListed ? $1.storedBytes : 0) }
        storedBytes = total
        return total
    }
    /// Badge changes of deliveries sent and not yet acknowledged, oldest first.
    var inflightBadges: [(token: UInt64, badge: Badge)] = []
    /// The listed ids in order, kept while nothing is added or removed (for `list` paging).
    var sortedIds: [String]?
    /// For devices with many notifications: userInfo members to the notifications that have them
    /// (see `Engine.matching`).
    var index: UserInfoIndex?
    /// Receipts settings, inbox and history; nil for a device that uses none.
    var receipts: DeviceReceipts?
    /// Push registrations and outbox; nil for a device that uses none.
    var push: DevicePush?
    /// Whether the snapshot being taken holds this device's own state already (see
    /// ``StoredNotification/snapshotMark``).
    var snapshotMark = false
    /// Taken out of the engine's table (``Engine/dropIfEmpty(_:)``); a device is never put back.
    var dropped = false

    init(id: String) { self.id = id }

    /// The counter as the device has been told: acknowledged changes, then those in flight.
    var currentBadge: Int {
        inflightBadges.reduce(badge) { $1.badge.applied(to: $0) }
    }

    var isEmpty: Bool {
        notifications.isEmpty && timeZone == nil && badge == 0 && quietHours == nil && inflightBadges.isEmpty
            && receipts?.isEmpty != false && push == nil
    }
}

/// userInfo members (key and value, as JSON) to the notifications that carry them, so that a
/// selector on a device with many notifications does not scan them all. Adding or removing one
/// notification costs the same however many share a member.
struct UserInfoIndex {
    /// Devices with more listed notifications than this are matched through an index.
    static let threshold = 1024

    /// Each userInfo member's notifications, in the order they were added. Taking one out is
    /// lazy: it stays in its lists, marked `removed`, until the lists hold more removed ones than
    /// live ones and the device rebuilds its index. (A notification is never attached again once
    /// removed: a change makes a new object.) Appending to a list is much cheaper than inserting
    /// into a set, at recovery above all, and takes a pointer's room.
    private var table: [Member: [StoredNotification]] = [:]
    /// Members that more than half of the device's notifications had when their list passed
    /// ``threshold``: not listed, as a match on them alone returns most of the device anyway
    /// (it reads the whole device instead), and their lists would be most of the index.
    private var common: Set<Member> = []
    /// Notifications removed since the index was built.
    private var removed = 0
    /// Listed notifications when the index was built, plus those inserted since.
    private var inserted = 0

    struct Member: Hashable {
        var key: String
        var value: JSON
    }

    init<S: Sequence>(_ notifications: S) where S.Element == StoredNotification {
        for n in notifications where !n.removed { insert(n) }
    }

    mutating func insert(_ n: StoredNotification) {
        guard n.isListed else { return }
        inserted += 1
        guard let info = n.userInfoObject else { return }
        for (key, value) in info {
            let member = Member(key: key, value: value)
            if let i = table.index(forKey: member) {
                table.values[i].append(n)
                let count = table.values[i].count
                if count > Self.threshold && 2 * count > inserted - removed {
                    table.remove(at: i)
                    common.insert(member)
                }
            } else if !common.contains(member) {
                table[member] = [n]
            }
        }
    }

    /// Counts a listed notification taken out of the device; true when the index should be
    /// rebuilt, holding more removed notifications than live ones.
    mutating func noteRemoved() -> Bool {
        removed += 1
        return removed > inserted - removed
    }

    /// Candidates for a match: the live notifications carrying its rarest listed member (to be
    /// checked against all of it); nil when all of its members are common, for a scan.
    func candidates(_ wanted: JSONObject) -> [StoredNotification]? {
        var best: [StoredNotification]?
        for (key, value) in wanted {
            let member = Member(key: key, value: value)
            if let list = table[member] {
                if best == nil || list.count < best!.count { best = list }
            } else if !common.contains(member) {
                return []  // no notification has this member
            }
        }
        return best?.filter { !$0.removed }
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
    /// What the device's inbox and history keep of it (receipts or history only).
    var capture: ReceiptCapture?
    /// What its pushes are made of (devices with push registrations only).
    var push: PushCapture?
}
