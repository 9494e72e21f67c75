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

    /// The current snapshot format. Readers accept this and every earlier one.
    public static let format: Int64 = 1

    /// How many entries ``forEachEntry(_:)`` produces.
    public var entryCount: Int { 1 + devices.count + notifications.count }

    /// Calls `body` with each snapshot entry: a header, then each device, then each
    /// notification. Entries are JSON objects.
    public func forEachEntry<E: Error>(_ body: ([UInt8]) throws(E) -> Void) throws(E) {
        try body(JSON.object(["format": .int(Self.format), "nextVersion": .int(Int64(bitPattern: nextVersion))]).bytes)
        for device in devices {
            var d = JSONObject()
            d.append("device", .string(device.id))
            if let zone = device.timeZone { d.append("timeZone", .string(zone.identifier)) }
            if device.badge != 0 { d.append("badge", .int(Int64(device.badge))) }
            if let quiet = device.quietHours { d.append("quietHours", Replies.quietHours(quiet)) }
            try body(JSON.object(d).bytes)
        }
        for (n, state) in notifications {
            var o = JSONObject()
            o.append("device", .string(n.deviceId))
            o.append("n", .object(NotificationCoding.encode(n.spec, internal: true)))
            o.append("version", .int(Int64(bitPattern: state.version)))
            if !state.enabled { o.append("enabled", false) }
            if state.firedCount != 0 { o.append("firedCount", .int(Int64(state.firedCount))) }
            if let last = state.lastFiredAt { o.append("lastFiredAt", .int(last)) }
            o.append("createdAt", .int(state.createdAt))
            o.append("updatedAt", .int(state.updatedAt))
            o.append("pendingFrom", .int(state.pendingFrom))
            if state.done { o.append("done", true) }
            try body(JSON.object(o).bytes)
        }
    }
}

/// Why recovery could not read the snapshot or the journal.
public struct RecoveryError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
}

extension Engine {
    /// The durable state as of now.
    public var snapshot: EngineSnapshot {
        var list: [EngineSnapshot.Device] = []
        list.reserveCapacity(devices.count)
        var notifications: [(notification: StoredNotification, state: DurableState)] = []
        notifications.reserveCapacity(devices.values.reduce(0) { $0 + $1.notifications.count })
        for device in devices.values {
            list.append(
                .init(id: device.id, timeZone: device.timeZone, badge: device.badge, quietHours: device.quietHours)
            )
            for n in device.notifications.values { notifications.append((n, n.durable)) }
        }
        return EngineSnapshot(devices: list, notifications: notifications, nextVersion: nextVersion)
    }

    /// Starts recovery: state is rebuilt with ``restore(snapshotEntry:)`` and ``apply(_:)``, then
    /// ``finishRecovery()``.
    public func beginRecovery() {
        replaying = true
        devices = [:]
        heap.removeAll()
        inflight = [:]
        pendingCount = 0
    }

    /// Reads one snapshot entry, as ``EngineSnapshot/forEachEntry(_:)`` wrote it.
    public func restore(snapshotEntry bytes: [UInt8]) throws(RecoveryError) {
        let object: JSONObject
        do {
            guard case .object(let o) = try JSON(parsing: bytes) else {
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
                let spec = try NotificationCoding.decode(FieldReader(o, path: "n."), limits: nil)
                func millis(_ key: String) throws(ChimeError) -> Int64? { try r.integer(key, in: all) }
                let createdAt = try millis("createdAt") ?? 0
                let n = StoredNotification(
                    spec: spec,
                    deviceId: device.id,
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
            } else {
                if let name = try r.string("timeZone") {
                    guard let zone = Zone(identifier: name) else { throw .invalid("timeZone", "unknown zone \(name)") }
                    device.timeZone = zone
                }
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

    /// Ends recovery: computes every notification's next occurrence and sets the timers.
    public func finishRecovery() {
        replaying = false
        for device in devices.values {
            for n in device.notifications.values { arm(n, device) }
            dropIfEmpty(device)
        }
    }
}
