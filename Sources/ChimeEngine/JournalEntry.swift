import ChimeProtocol

/// A change to the engine's durable state, as the journal stores it.
///
/// Every change goes through ``Engine/apply(_:)``, live and during recovery alike, so replay
/// rebuilds exactly the state the live worker had. Entries carry everything replay needs
/// (receive times, generated ids, seeds, the ids a selector resolved to) and never depend on the
/// clock or on randomness.
public enum JournalEntry: Hashable, Sendable {
    /// Schedules `notifications` (resolved) after removing `replaced`.
    case schedule(deviceId: String, at: Instant, replaced: [String], notifications: [ResolvedNotification])
    /// Replaces the fields of an existing notification by `notification` (the fields it keeps and
    /// the ones `update` changed), keeping its state: see ``Engine/apply(_:key:)``.
    /// Boxed (`indirect`), as `device` is, so that every entry (and every action that carries one)
    /// is not as large as a notification.
    indirect case update(deviceId: String, at: Instant, notification: ResolvedNotification)
    case cancel(deviceId: String, at: Instant, ids: [String])
    case setEnabled(deviceId: String, at: Instant, ids: [String], enabled: Bool)
    indirect case device(deviceId: String, at: Instant, update: DeviceUpdate)
    case snooze(deviceId: String, at: Instant, id: String, due: Instant)
    /// An occurrence the broker acknowledged.
    case delivered(OccurrenceRecord)
    /// An occurrence passed over: expired, or missed under `misfire: skip`.
    case dropped(OccurrenceRecord)
    /// The device acknowledged deliveries (receipts); `badge` applies if any was new.
    case ack(deviceId: String, at: Instant, fireIds: [String], badge: Badge?)
    /// The rules of these zones are now those with these fingerprints (a tzdata upgrade, noticed live
    /// or at start, or zones recorded for the first time): every notification whose wall-clock times
    /// depend on one of them is computed again. Belongs to no device.
    case zoneRules(at: Instant, zones: [ZoneRulesRecord])
    /// A push ended: accepted, refused or expired (PROTOCOL.md section 3.11).
    case pushed(PushRecord)

    /// When the worker received the command, for command entries; nil for delivery records.
    public var commandTime: Instant? {
        switch self {
        case .schedule(_, let at, _, _), .update(_, let at, _), .cancel(_, let at, _), .setEnabled(_, let at, _, _),
            .device(_, let at, _), .snooze(_, let at, _, _), .ack(_, let at, _, _):
            return at
        case .delivered, .dropped, .zoneRules, .pushed: return nil
        }
    }

    /// The device the entry is about; empty for ``zoneRules(at:zones:)``.
    public var deviceId: String {
        switch self {
        case .schedule(let d, _, _, _), .update(let d, _, _), .cancel(let d, _, _), .setEnabled(let d, _, _, _),
            .device(let d, _, _), .snooze(let d, _, _, _), .ack(let d, _, _, _):
            return d
        case .delivered(let r), .dropped(let r): return r.deviceId
        case .zoneRules: return ""
        case .pushed(let r): return r.key.deviceId
        }
    }
}

/// A zone and the fingerprint of its rules (``Zone/rulesFingerprint``), as journal entries and
/// snapshots record them.
public struct ZoneRulesRecord: Hashable, Sendable {
    public var zone: String
    public var fingerprint: UInt64

    public init(zone: String, fingerprint: UInt64) {
        self.zone = zone
        self.fingerprint = fingerprint
    }

    /// The fingerprint as 16 hex digits, as the journal writes it.
    public static func hex(_ fingerprint: UInt64) -> String {
        let digits = String(fingerprint, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}

/// What the journal records of one occurrence delivered or passed over.
public struct OccurrenceRecord: Hashable, Sendable {
    public var deviceId: String
    public var id: String
    public var version: UInt64
    public var index: Int
    public var occurrence: Instant
    /// When it was sent (or dropped).
    public var at: Instant
    /// No occurrence follows it.
    public var last: Bool
    /// The badge change it carried, applied to the device's counter.
    public var badge: Badge?
    /// For a device with receipts or history, what its inbox and history keep.
    public var receipt: ReceiptCapture?
    /// For a device with push registrations, what its pushes are made of.
    public var push: PushCapture?

    public init(
        deviceId: String,
        id: String,
        version: UInt64,
        index: Int,
        occurrence: Instant,
        at: Instant,
        last: Bool,
        badge: Badge? = nil,
        receipt: ReceiptCapture? = nil,
        push: PushCapture? = nil
    ) {
        self.deviceId = deviceId
        self.id = id
        self.version = version
        self.index = index
        self.occurrence = occurrence
        self.at = at
        self.last = last
        self.badge = badge
        self.receipt = receipt
        self.push = push
    }
}

/// Why a journal entry could not be read.
public struct JournalEntryError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
}

extension JournalEntry {
    /// The record type byte in the journal.
    public enum Kind: UInt8, CaseIterable, Sendable {
        case schedule = 1
        case cancel = 2
        case setEnabled = 3
        case device = 4
        case snooze = 5
        case delivered = 6
        case dropped = 7
        case ack = 8
        case update = 9
        case zoneRules = 10
        case pushed = 11

        public var name: String { "\(self)" }
    }

    public var kind: Kind {
        switch self {
        case .schedule: return .schedule
        case .cancel: return .cancel
        case .setEnabled: return .setEnabled
        case .device: return .device
        case .snooze: return .snooze
        case .delivered: return .delivered
        case .dropped: return .dropped
        case .ack: return .ack
        case .update: return .update
        case .zoneRules: return .zoneRules
        case .pushed: return .pushed
        }
    }

    /// The entry as a JSON object (what `chime journal dump` prints): the record payload without
    /// its key, read back.
    public var json: JSONObject {
        guard case .object(let o)? = try? JSON(parsing: encode()) else {
            preconditionFailure("a journal entry encodes to a JSON object")
        }
        return o
    }

    /// The record payload; `key`, the command's ``CommandKey``, goes in it as `"key"`.
    public func encode(key: CommandKey? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(key: key, to: &out)
        return out
    }

    /// Writes the record payload: a JSON object, straight into bytes (every notification
    /// scheduled is written here once).
    func write(key: CommandKey?, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        var first = true
        func strings(_ key: StaticString, _ values: [String]) {
            out.appendMember(key, .array(values.map(JSON.string)), first: &first)
        }
        func badge(_ badge: Badge?) {
            switch badge {
            case .absolute(let n): out.appendMember("badge", .int(Int64(n)), first: &first)
            case .delta(let n): out.appendMember("badgeDelta", .int(Int64(n)), first: &first)
            case nil: break
            }
        }
        switch self {
        case .schedule(let d, let at, let replaced, let notifications):
            out.appendMember("device", .string(d), first: &first)
            out.appendMember("at", .int(at.milliseconds), first: &first)
            if !replaced.isEmpty { strings("replaced", replaced) }
            out.appendKey("notifications", first: &first)
            out.append(UInt8(ascii: "["))
            for (i, n) in notifications.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                NotificationCoding.writeRecord(n, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .update(let d, let at, let notification):
            out.appendMember("device", .string(d), first: &first)
            out.appendMember("at", .int(at.milliseconds), first: &first)
            out.appendKey("notification", first: &first)
            NotificationCoding.write(notification.spec, internal: true, to: &out)
        case .cancel(let d, let at, let ids):
            out.appendMember("device", .string(d), first: &first)
            out.appendMember("at", .int(at.milliseconds), first: &first)
            strings("ids", ids)
        case .setEnabled(let d, let at, let ids, let enabled):
            out.appendMember("device", .string(d), first: &first)
            out.appendMember("at", .int(at.milliseconds), first: &first)
            strings("ids", ids)
            out.appendMember("enabled", .bool(enabled), first: &first)
        case .device(let d, let at, let update):
            out.appendMember("device", .string(d), first: &first)
            out.appendMember("at", .int(at.milliseconds), first: &first)
            if let zone = update.timeZone { out.appendMember("timeZone", .string(zone.identifier), first: &first) }
            if let badge = update.badge { out.appendMember("badge", .int(Int64(badge)), first: &first) }
            if let quiet = update.quietHours {
                out.appendMember("quietHours", Replies.quietHours(quiet), first: &first)
            }
            if let receipts = update.receipts { out.appendMember("receipts", .bool(receipts), first: &first) }
            if let history = update.history { out.appendMember("history", .bool(history), first: &first) }
            if let push = update.push?.member { out.appendMember(push.name, push.value, first: &first) }
        case .ack(let d, let at, let fireIds, let change):
            out.appendMember("device", .string(d), first: &first)
            out.appendMember("at", .int(at.milliseconds), first: &first)
            strings("fireIds", fireIds)
            badge(change)
        case .snooze(let d, let at, let id, let due):
            out.appendMember("device", .string(d), first: &first)
            out.appendMember("at", .int(at.milliseconds), first: &first)
            out.appendMember("id", .string(id), first: &first)
            out.appendMember("due", .int(due.milliseconds), first: &first)
        case .zoneRules(let at, let zones):
            out.appendMember("at", .int(at.milliseconds), first: &first)
            out.appendMember(
                "zones",
                .array(
                    zones.map {
                        .object(["zone": .string($0.zone), "fingerprint": .string(ZoneRulesRecord.hex($0.fingerprint))])
                    }
                ),
                first: &first
            )
        case .delivered(let r), .dropped(let r):
            out.appendMember("device", .string(r.deviceId), first: &first)
            out.appendMember("id", .string(r.id), first: &first)
            out.appendMember("version", .int(Int64(bitPattern: r.version)), first: &first)
            out.appendMember("index", .int(Int64(r.index)), first: &first)
            out.appendMember("occurrence", .int(r.occurrence.milliseconds), first: &first)
            out.appendMember("at", .int(r.at.milliseconds), first: &first)
            if r.last { out.appendMember("last", true, first: &first) }
            badge(r.badge)
            if let receipt = r.receipt {
                // The delivery as published, as a string: its bytes come back exactly.
                if let payload = receipt.payload {
                    out.appendMember("inbox", .string(String(decoding: payload, as: UTF8.self)), first: &first)
                }
                // History only: no inbox expiry to write (one written before 2026-12 has one).
                if receipt.payload == nil && receipt.expiresAt == 0 {
                    out.appendMember("history", true, first: &first)
                } else {
                    out.appendMember("expires", .int(receipt.expiresAt), first: &first)
                }
                if receipt.late { out.appendMember("late", true, first: &first) }
                if receipt.lead != 0 { out.appendMember("lead", .int(receipt.lead), first: &first) }
                if !receipt.mqtt { out.appendMember("mqtt", false, first: &first) }
            }
            if let push = r.push {
                out.appendMember("push", .string(String(decoding: push.payload, as: UTF8.self)), first: &first)
                out.appendMember("pushExpires", .int(push.expiresAt), first: &first)
            }
        case .pushed(let r):
            out.appendMember("device", .string(r.key.deviceId), first: &first)
            out.appendMember("fireId", .string(r.key.fireId), first: &first)
            out.appendMember("registration", .string(r.key.registration), first: &first)
            out.appendMember("at", .int(r.at.milliseconds), first: &first)
            out.appendMember("outcome", .string(r.outcome.rawValue), first: &first)
            if let reason = r.reason { out.appendMember("reason", .string(reason), first: &first) }
        }
        if let key { out.appendMember("key", .string(key.description), first: &first) }
        out.append(UInt8(ascii: "}"))
    }

    public static func decode(kind rawKind: UInt8, payload: [UInt8]) throws(JournalEntryError) -> JournalEntry {
        try decodeRecord(kind: rawKind, payload: payload).entry
    }

    /// The entry and the command key a record holds.
    public static func decodeRecord(
        kind rawKind: UInt8,
        payload: [UInt8]
    ) throws(JournalEntryError) -> (entry: JournalEntry, key: CommandKey?) {
        guard let kind = Kind(rawValue: rawKind) else {
            throw JournalEntryError(description: "unknown record type \(rawKind)")
        }
        let object: JSONObject
        do {
            guard case .object(let o) = try JSON(parsing: payload) else {
                throw JournalEntryError(description: "\(kind.name) record is not a JSON object")
            }
            object = o
        } catch let error as JournalEntryError {
            throw error
        } catch {
            throw JournalEntryError(description: "\(kind.name) record: \(error)")
        }
        do throws(ChimeError) {
            var key: CommandKey?
            if let hex = try FieldReader(object).string("key") {
                guard let k = CommandKey(hex: hex) else { throw .invalid("key", "not 16 hex digits") }
                key = k
            }
            return (try decode(kind, FieldReader(object)), key)
        } catch {
            throw JournalEntryError(description: "\(kind.name) record: \(error.message)")
        }
    }

    private static func decode(_ kind: Kind, _ r: FieldReader) throws(ChimeError) -> JournalEntry {
        func required<T>(_ value: T?, _ key: String) throws(ChimeError) -> T {
            guard let value else { throw .invalid(key, "missing") }
            return value
        }
        let limits = Int64.min...Int64.max
        if kind == .zoneRules {
            let at = Instant(milliseconds: try required(try r.integer("at", in: limits), "at"))
            let items = try required(try r.array("zones", maxCount: .max), "zones")
            var zones: [ZoneRulesRecord] = []
            for (i, item) in items.enumerated() {
                let z = FieldReader(try required(item.objectValue, "zones[\(i)]"), path: "zones[\(i)].")
                let hex = try required(try z.string("fingerprint"), "fingerprint")
                guard hex.utf8.count == 16, let fingerprint = UInt64(hex, radix: 16) else {
                    throw .invalid("zones[\(i)].fingerprint", "not 16 hex digits")
                }
                zones.append(
                    ZoneRulesRecord(zone: try required(try z.string("zone"), "zone"), fingerprint: fingerprint)
                )
            }
            return .zoneRules(at: at, zones: zones)
        }
        let device = try required(try r.string("device"), "device")
        switch kind {
        case .schedule:
            let at = Instant(milliseconds: try required(try r.integer("at", in: limits), "at"))
            let replaced = try r.strings("replaced", maxCount: .max, maxLength: .max) ?? []
            let items = try required(try r.array("notifications", maxCount: .max), "notifications")
            var specs: [ResolvedNotification] = []
            for (i, item) in items.enumerated() {
                guard case .object(let o) = item else { throw .invalid("notifications[\(i)]", "not an object") }
                let spec = try NotificationCoding.decode(FieldReader(o, path: "notifications[\(i)]."), limits: nil)
                guard let resolved = ResolvedNotification(resolved: spec) else {
                    throw .invalid("notifications[\(i)]", "not resolved (an id and a fireDate)")
                }
                specs.append(resolved)
            }
            return .schedule(deviceId: device, at: at, replaced: replaced, notifications: specs)
        case .update:
            let at = Instant(milliseconds: try required(try r.integer("at", in: limits), "at"))
            let o = try required(try r.object("notification"), "notification")
            let spec = try NotificationCoding.decode(FieldReader(o, path: "notification."), limits: nil)
            guard let resolved = ResolvedNotification(resolved: spec) else {
                throw .invalid("notification", "not resolved (an id and a fireDate)")
            }
            return .update(deviceId: device, at: at, notification: resolved)
        case .cancel, .setEnabled:
            let at = Instant(milliseconds: try required(try r.integer("at", in: limits), "at"))
            let ids = try required(try r.strings("ids", maxCount: .max, maxLength: .max), "ids")
            if kind == .cancel { return .cancel(deviceId: device, at: at, ids: ids) }
            return .setEnabled(
                deviceId: device,
                at: at,
                ids: ids,
                enabled: try required(try r.bool("enabled"), "enabled")
            )
        case .device:
            let at = Instant(milliseconds: try required(try r.integer("at", in: limits), "at"))
            var update = DeviceUpdate()
            // Accepted once: a zone this machine cannot resolve is read all the same (Zone(recorded:)).
            if let name = try r.string("timeZone") { update.timeZone = Zone(recorded: name) }
            if let badge = try r.integer("badge", in: 0...Int64(Int32.max)) { update.badge = Int(badge) }
            update.receipts = try r.bool("receipts")
            update.history = try r.bool("history")
            update.push = try PushChange.decode(r)
            if let value = r.object["quietHours"] {
                if case .object(let q) = value {
                    let qr = FieldReader(q, path: "quietHours.")
                    let start = try required(TimeOfDay(parsing: try required(try qr.string("start"), "start")), "start")
                    let end = try required(TimeOfDay(parsing: try required(try qr.string("end"), "end")), "end")
                    update.quietHours = .some(QuietHours(start: start, end: end))
                } else {
                    update.quietHours = .some(nil)
                }
            }
            return .device(deviceId: device, at: at, update: update)
        case .snooze:
            let at = Instant(milliseconds: try required(try r.integer("at", in: limits), "at"))
            let id = try required(try r.string("id"), "id")
            let due = Instant(milliseconds: try required(try r.integer("due", in: limits), "due"))
            return .snooze(deviceId: device, at: at, id: id, due: due)
        case .delivered, .dropped:
            var record = OccurrenceRecord(
                deviceId: device,
                id: try required(try r.string("id"), "id"),
                version: UInt64(bitPattern: try required(try r.integer("version", in: limits), "version")),
                index: Int(try required(try r.integer("index", in: 0...Int64(Int32.max)), "index")),
                occurrence: Instant(milliseconds: try required(try r.integer("occurrence", in: limits), "occurrence")),
                at: Instant(milliseconds: try required(try r.integer("at", in: limits), "at")),
                last: try r.bool("last") ?? false
            )
            record.badge = try badge(r)
            let expires = try r.integer("expires", in: limits)
            let historyOnly = try r.bool("history") ?? false
            if expires != nil || historyOnly {
                record.receipt = ReceiptCapture(
                    payload: try r.string("inbox", maxLength: .max).map { Array($0.utf8) },
                    expiresAt: expires ?? 0,
                    late: try r.bool("late") ?? false,
                    lead: try r.integer("lead", in: limits) ?? 0,
                    mqtt: try r.bool("mqtt") ?? true
                )
            }
            if let push = try r.string("push", maxLength: .max) {
                record.push = PushCapture(
                    payload: Array(push.utf8),
                    expiresAt: try required(try r.integer("pushExpires", in: limits), "pushExpires")
                )
            }
            return kind == .delivered ? .delivered(record) : .dropped(record)
        case .pushed:
            let outcome = try required(try r.string("outcome"), "outcome")
            return .pushed(
                PushRecord(
                    key: PushJobKey(
                        deviceId: device,
                        fireId: try required(try r.string("fireId"), "fireId"),
                        registration: try required(try r.string("registration"), "registration")
                    ),
                    at: Instant(milliseconds: try required(try r.integer("at", in: limits), "at")),
                    outcome: try required(PushOutcome(rawValue: outcome), "outcome"),
                    reason: try r.string("reason")
                )
            )
        case .ack:
            return .ack(
                deviceId: device,
                at: Instant(milliseconds: try required(try r.integer("at", in: limits), "at")),
                fireIds: try required(try r.strings("fireIds", maxCount: .max, maxLength: .max), "fireIds"),
                badge: try badge(r)
            )
        case .zoneRules:
            preconditionFailure("decoded above")
        }
    }

    /// A badge change as records write it: `badge` (absolute) or `badgeDelta`.
    private static func badge(_ r: FieldReader) throws(ChimeError) -> Badge? {
        if let n = try r.integer("badge", in: 0...Int64(Int32.max)) { return .absolute(Int(n)) }
        if let d = try r.integer("badgeDelta", in: Int64(Int32.min)...Int64(Int32.max)) { return .delta(Int(d)) }
        return nil
    }
}
