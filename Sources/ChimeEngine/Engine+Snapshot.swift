import ChimeProtocol

/// The engine's durable state frozen at one moment, to be written as a snapshot on another
/// thread. Taking one copies each notification's small durable state and keeps references to
/// the immutable specs, so the owner thread can go on changing the engine meanwhile.
public struct EngineSnapshot: Sendable {
    struct Device: Sendable {
        var id: String
        var timeZone: Zone?
        var badge: Int
        var quietHours: QuietHours?
    }

    let devices: [Device]
    let notifications: [(notification: StoredNotification, state: DurableState)]
    let nextVersion: UInt64
    /// Each device's recent command keys (``CommandKeyWindow``), in one table or several.
    let commandKeys: [[String: [(key: CommandKey, at: Int64)]]]
    /// The receipts, inboxes and histories of the devices that use them.
    let receipts: [FrozenReceipts]
    /// The rules of every zone the engine uses, as it computes with them.
    let zoneRules: [ZoneRulesRecord]
    /// The push registrations and outboxes of the devices that use push.
    let pushes: [FrozenPush]

    /// The current snapshot format (7: binary entries with command keys, receipts and histories,
    /// the zone rules computed with and push registrations, see ``SnapshotCoding``). Readers accept
    /// this and every earlier one (6: receipts and histories as JSON, 5: without push, 4: without
    /// zone rules, 3: without receipts, 2: without command keys, 1: JSON entries).
    public static let format: Int64 = 7

    /// How many entries ``forEachEntry(_:)`` produces.
    public var entryCount: Int {
        1 + devices.count + notifications.count + commandKeys.reduce(0) { $0 + $1.count } + receipts.count
            + (zoneRules.isEmpty ? 0 : 1) + pushes.count
    }

    /// Every entry ``forEachEntry(_:)`` produces, in order, copied into one array.
    public var entries: [[UInt8]] {
        var all: [[UInt8]] = []
        all.reserveCapacity(entryCount)
        forEachEntry { all.append($0) }
        return all
    }

    /// Calls `body` with each snapshot entry: a header, then each device, then each
    /// notification.
    public func forEachEntry<E: Error>(_ body: ([UInt8]) throws(E) -> Void) throws(E) {
        try body(SnapshotCoding.encodeHeader(nextVersion: nextVersion))
        for device in devices { try body(SnapshotCoding.encode(device)) }
        var w = ByteWriter()
        for (n, state) in notifications {
            w.bytes.removeAll(keepingCapacity: true)
            SnapshotCoding.encode(n, state, into: &w)
            try body(w.bytes)
        }
        for (device, keys) in commandKeys.joined() { try body(SnapshotCoding.encode(commandKeys: keys, of: device)) }
        for r in receipts { try body(SnapshotCoding.encode(r)) }
        if !zoneRules.isEmpty { try body(SnapshotCoding.encode(zoneRules: zoneRules)) }
        for p in pushes { try body(SnapshotCoding.encode(p)) }
    }
}

/// A device's ``DevicePush`` copied out for a snapshot.
struct FrozenPush: Sendable {
    var deviceId: String
    var registrations: [PushRegistration]
    var outbox: [PushJob]
}

/// A device's ``DeviceReceipts`` copied out for a snapshot.
struct FrozenReceipts: Sendable {
    var deviceId: String
    var receipts: Bool?
    var history: Bool?
    var inbox: Inbox
    var log: DeliveryHistory
    var dropped: Int
}

/// Why recovery could not read the snapshot or the journal.
public struct RecoveryError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
}

/// A snapshot being taken a part at a time (``Engine/beginSnapshot()``): what was frozen when it
/// began, and the devices and notifications copied so far.
struct SnapshotCapture {
    let nextVersion: UInt64
    let commandKeys: [[String: [(key: CommandKey, at: Int64)]]]
    let zoneRules: [ZoneRulesRecord]
    var devices: [EngineSnapshot.Device] = []
    var receipts: [FrozenReceipts] = []
    var pushes: [FrozenPush] = []
    var notifications: [(notification: StoredNotification, state: DurableState)] = []
    /// Where the walk is: the next device in ``Engine/deviceOrder``, and the position in its
    /// ``DeviceState/order`` when it has one.
    var nextDevice = 0
    var position = 0
}

extension Engine {
    /// The durable state as of now, copied in one go (for tools and tests; the worker takes its
    /// snapshots a part at a time, ``beginSnapshot()``).
    public var snapshot: EngineSnapshot {
        beginSnapshot()
        return continueSnapshot(budget: .max)!
    }

    /// The devices and notifications a turn of the worker's loop copies into a snapshot being
    /// taken: a few milliseconds of them on a small machine, so that taking one never holds the
    /// loop for long (`chime-bench snapshot-steps` measures it).
    public static let snapshotStep = 16_384

    /// Whether a snapshot is being taken (between ``beginSnapshot()`` and the
    /// ``continueSnapshot(budget:)`` that returns it).
    public var isTakingSnapshot: Bool { capture != nil }

    /// Begins a snapshot of the durable state as of now, to be finished by
    /// ``continueSnapshot(budget:)`` while the engine goes on.
    ///
    /// What costs little to freeze is frozen now: the next version, the zones' rules and the
    /// command keys (256 copy-on-write tables, of which a change after this copies one,
    /// ``CommandKeyWindow/shards``). The devices and their notifications are copied by
    /// ``continueSnapshot(budget:)`` a part at a time. One whose durable state changes, or that is
    /// removed, before the walk reaches it is copied first (``willChange(_:)``), as it was when the
    /// snapshot began. Those added later are marked as copied, so they stay out.
    public func beginSnapshot() {
        precondition(capture == nil, "one snapshot at a time")
        snapshotParity.toggle()
        capture = SnapshotCapture(
            nextVersion: nextVersion,
            commandKeys: commandKeys.shards,
            // An unresolved zone has no rules of its own: what was recorded for it stays.
            zoneRules: zonesInUse.compactMap { zone in
                let fingerprint = zone.isResolved ? zone.rulesFingerprint : zoneFingerprints[zone.identifier]
                return fingerprint.map { ZoneRulesRecord(zone: zone.identifier, fingerprint: $0) }
            }
        )
        // Sized once: growing a list of millions would copy it in one turn. (Pages not written to
        // cost no memory.)
        capture!.devices.reserveCapacity(devices.count)
        capture!.receipts.reserveCapacity(devices.count)
        capture!.notifications.reserveCapacity(heldCount)
    }

    /// Copies about `budget` more devices and notifications into the snapshot being taken (a
    /// device's notifications whole when it has fewer than ``DeviceState/orderedFrom``, else a part
    /// at a time).
    /// - Returns: the snapshot, once everything is in it; nil before that, and when none is
    ///   being taken.
    public func continueSnapshot(budget: Int) -> EngineSnapshot? {
        guard var c = capture else { return nil }
        capture = nil
        var left = budget
        while left > 0, c.nextDevice < deviceOrder.count {
            let device = deviceOrder[c.nextDevice]
            left -= 1
            // A dropped device, perhaps part way through its walk, was copied before it was dropped.
            if !device.dropped {
                take(device, into: &c)
                if let order = device.order {
                    let end = c.position + min(left, order.count - c.position)
                    for i in c.position..<end where !order[i].removed { take(order[i], into: &c.notifications) }
                    left -= end - c.position
                    c.position = end
                    guard end == order.count else { break }
                } else {
                    for n in device.notifications.values { take(n, into: &c.notifications) }
                    left -= device.notifications.count
                }
            }
            c.nextDevice += 1
            c.position = 0
        }
        guard c.nextDevice == deviceOrder.count else {
            capture = c
            return nil
        }
        return EngineSnapshot(
            devices: c.devices,
            notifications: c.notifications,
            nextVersion: c.nextVersion,
            commandKeys: c.commandKeys,
            receipts: c.receipts,
            zoneRules: c.zoneRules,
            pushes: c.pushes
        )
    }

    /// Copies a notification into a snapshot's list unless it is there already.
    private func take(
        _ n: StoredNotification,
        into list: inout [(notification: StoredNotification, state: DurableState)]
    ) {
        guard n.snapshotMark != snapshotParity else { return }
        n.snapshotMark = snapshotParity
        list.append((n, n.durable))
    }

    /// Copies a device's own state (its zone, badge, quiet hours and receipts) into a snapshot
    /// unless it is there already.
    private func take(_ device: DeviceState, into c: inout SnapshotCapture) {
        guard device.snapshotMark != snapshotParity else { return }
        device.snapshotMark = snapshotParity
        c.devices.append(
            .init(id: device.id, timeZone: device.timeZone, badge: device.badge, quietHours: device.quietHours)
        )
        if let r = device.receipts, !r.isEmpty {
            c.receipts.append(
                FrozenReceipts(
                    deviceId: device.id,
                    receipts: r.receipts,
                    history: r.history,
                    inbox: r.inbox,
                    log: r.log,
                    dropped: r.dropped
                )
            )
        }
        if let p = device.push {
            c.pushes.append(FrozenPush(deviceId: device.id, registrations: p.registrations, outbox: p.outbox.all))
        }
    }

    /// Called before an attached notification's durable state changes, or it is detached: while a
    /// snapshot is being taken, its state as it is now (as it was when the snapshot began, since
    /// nothing changed it before) goes into the snapshot unless it is there already.
    func willChange(_ n: StoredNotification) {
        guard capture != nil else { return }
        take(n, into: &capture!.notifications)
    }

    /// ``willChange(_:)`` for a device's own state, before it changes or the device is dropped.
    func willChange(_ device: DeviceState) {
        guard capture != nil else { return }
        take(device, into: &capture!)
    }

    /// Starts recovery (``EngineRestorer``): state is rebuilt with ``restore(snapshotEntry:)`` and
    /// ``apply(_:key:)``, then ``finishRecovery()``.
    func beginRecovery() {
        restoring = Restoring()
        arming = true
        capture = nil
        devices = [:]
        deviceOrder = []
        deviceOrderDropped = 0
        commandKeys.removeAll()
        heap.removeAll()
        inflight = [:]
        pendingCount = 0
        heldCount = 0
        zoneFingerprints = [:]
    }

    /// Reads one snapshot entry, as ``EngineSnapshot/forEachEntry(_:)`` wrote it (format 2) or
    /// an earlier chimed did (format 1, JSON).
    func restore(snapshotEntry bytes: ArraySlice<UInt8>) throws(RecoveryError) {
        guard bytes.first == UInt8(ascii: "{") else {
            try restoreBinary(bytes)
            return
        }
        let object: JSONObject
        do {
            guard case .object(let o) = try JSON(parsing: Array(bytes)) else {
                throw RecoveryError(description: "not an object")
            }
            object = o
        } catch let error as RecoveryError {
            throw error
        } catch {
            throw RecoveryError(description: "snapshot entry: \(error)")
        }
        do throws(ChimeError) {
            let r = FieldReader(object)
            let all = Int64.min...Int64.max
            if let format = try r.integer("format", in: all) {
                guard format <= EngineSnapshot.format else {
                    throw ChimeError(.invalidArgument, "snapshot format \(format) is newer than this chimed reads")
                }
                nextVersion = UInt64(bitPattern: try r.integer("nextVersion", in: all) ?? 1)
                return
            }
            guard let deviceId = try r.string("device") else { throw .invalid("device", "missing") }
            let device = device(deviceId)
            if let o = try r.object("n") {
                let decoded = try NotificationCoding.decode(FieldReader(o, path: "n."), limits: nil)
                guard let spec = ResolvedNotification(resolved: decoded) else {
                    throw .invalid("n", "not resolved (an id and a fireDate)")
                }
                func millis(_ key: String) throws(ChimeError) -> Int64? { try r.integer(key, in: all) }
                let createdAt = try millis("createdAt") ?? 0
                let n = StoredNotification(
                    spec: spec,
                    device: device,
                    zones: &zones,
                    version: UInt64(bitPattern: try r.integer("version", in: all) ?? 0),
                    at: Instant(milliseconds: try millis("updatedAt") ?? createdAt),
                    createdAt: Instant(milliseconds: createdAt)
                )
                n.enabled = try r.bool("enabled") ?? true
                n.firedCount = Int32(try r.integer("firedCount", in: 0...Int64(Int32.max)) ?? 0)
                n.lastFiredAt = try millis("lastFiredAt")
                n.pendingFrom = try millis("pendingFrom") ?? 0
                n.done = try r.bool("done") ?? false
                if let old = device.notifications[n.id] { detach(old, from: device) }
                attach(n, to: device)
                arm(n, device)
            } else {
                if let name = try r.string("timeZone") { device.timeZone = zones.held(Zone(recorded: name)) }
                device.badge = Int(try r.integer("badge", in: 0...Int64(Int32.max)) ?? 0)
                if let q = try r.object("quietHours") {
                    let qr = FieldReader(q)
                    guard let start = TimeOfDay(parsing: try qr.string("start") ?? ""),
                        let end = TimeOfDay(parsing: try qr.string("end") ?? "")
                    else { throw .invalid("quietHours", "invalid") }
                    device.quietHours = QuietHours(start: start, end: end)
                }
            }
        } catch {
            throw RecoveryError(description: "snapshot entry: \(error.message)")
        }
    }

    /// Ends recovery: computes the next occurrence of every notification that restoring did not
    /// already arm (see ``arm(_:_:)``) and orders the timers.
    func finishRecovery() {
        let toArm = restoring?.toArm ?? []
        restoring = nil
        // Every push the journal and snapshot left waiting, handed to the worker once.
        newPushJobs = pendingPushJobs
        var armed = Set<ObjectIdentifier>()
        for n in toArm where !n.removed && armed.insert(ObjectIdentifier(n)).inserted { arm(n, n.device) }
        for device in devices.values { dropIfEmpty(device) }
        arming = false
        heap.heapify()
    }
}
