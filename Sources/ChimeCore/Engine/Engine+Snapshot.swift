/// The engine's durable state frozen at one moment, to be written as a snapshot, possibly on
/// another thread (the dictionaries are copy-on-write, so taking one is cheap).
public struct EngineSnapshot: Sendable {
    let devices: [String: DeviceState]
    let nextVersion: UInt64

    /// The current snapshot format. Readers accept this and every earlier one.
    public static let format: Int64 = 1

    /// Calls `body` with each snapshot entry: a header, then each device, then each of its
    /// notifications. Entries are JSON objects.
    public func forEachEntry<E: Error>(_ body: ([UInt8]) throws(E) -> Void) throws(E) {
        try body(JSON.object(["format": .int(Self.format), "nextVersion": .int(Int64(bitPattern: nextVersion))]).bytes)
        for (deviceId, device) in devices {
            var d = JSONObject()
            d.append("device", .string(deviceId))
            if let zone = device.timeZone { d.append("timeZone", .string(zone.identifier)) }
            if device.badge != 0 { d.append("badge", .int(Int64(device.badge))) }
            if let quiet = device.quietHours { d.append("quietHours", Replies.quietHours(quiet)) }
            try body(JSON.object(d).bytes)
            for n in device.notifications.values {
                var o = JSONObject()
                o.append("device", .string(deviceId))
                o.append("n", .object(NotificationCoding.encode(n.spec, internal: true)))
                o.append("version", .int(Int64(bitPattern: n.version)))
                if !n.enabled { o.append("enabled", false) }
                if n.firedCount != 0 { o.append("firedCount", .int(Int64(n.firedCount))) }
                if let last = n.lastFiredAt { o.append("lastFiredAt", .int(last.milliseconds)) }
                o.append("createdAt", .int(n.createdAt.milliseconds))
                o.append("updatedAt", .int(n.updatedAt.milliseconds))
                o.append("pendingFrom", .int(n.pendingFrom.milliseconds))
                if n.done { o.append("done", true) }
                if let of = n.snoozeOf { o.append("snoozeOf", .string(of)) }
                try body(JSON.object(o).bytes)
            }
        }
    }
}

/// Why recovery could not read the snapshot or the journal.
public struct RecoveryError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
}

extension Engine {
    /// The durable state as of now.
    public var snapshot: EngineSnapshot { EngineSnapshot(devices: devices, nextVersion: nextVersion) }

    /// Starts recovery: state is rebuilt with ``restore(snapshotEntry:)`` and ``apply(_:)``, then
    /// ``finishRecovery()``.
    public mutating func beginRecovery() {
        replaying = true
        devices = [:]
        heap.removeAll()
        inflight = [:]
        pendingCount = 0
    }

    /// Reads one snapshot entry, as ``EngineSnapshot/forEachEntry(_:)`` wrote it.
    public mutating func restore(snapshotEntry bytes: [UInt8]) throws(RecoveryError) {
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
            var device = devices[deviceId] ?? DeviceState()
            if let o = try r.object("n") {
                let spec = try NotificationCoding.decode(FieldReader(o, path: "n."), limits: nil)
                func instant(_ key: String) throws(ChimeError) -> Instant? {
                    try r.integer(key, in: all).map { Instant(milliseconds: $0) }
                }
                let n = StoredNotification(
                    spec: spec,
                    version: UInt64(bitPattern: try r.integer("version", in: all) ?? 0),
                    enabled: try r.bool("enabled") ?? true,
                    firedCount: Int(try r.integer("firedCount", in: 0...Int64(Int32.max)) ?? 0),
                    lastFiredAt: try instant("lastFiredAt"),
                    createdAt: try instant("createdAt") ?? Instant(milliseconds: 0),
                    updatedAt: try instant("updatedAt") ?? Instant(milliseconds: 0),
                    pendingFrom: try instant("pendingFrom") ?? Instant(milliseconds: 0),
                    done: try r.bool("done") ?? false,
                    snoozeOf: try r.string("snoozeOf")
                )
                device.notifications[n.id] = n
                if n.isListed { device.listedCount += 1 }
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
            store(device, deviceId)
        } catch {
            throw RecoveryError(description: "snapshot entry: \(error.message)")
        }
    }

    /// Ends recovery: computes every notification's next occurrence and sets the timers.
    public mutating func finishRecovery() {
        replaying = false
        for (deviceId, var device) in devices {
            for (id, var n) in device.notifications {
                arm(&n, deviceId: deviceId, zone: device.timeZone)
                device.notifications[id] = n
            }
            devices[deviceId] = device
        }
    }
}
