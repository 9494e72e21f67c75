import ChimeProtocol

/// The binary snapshot entries of format 2.
///
/// Format 1 wrote each entry as a JSON object; reading a million of them back took seconds, and
/// recovery has to be quick. Format 2 writes the stored fields as they are held in memory, little
/// endian, behind a one-byte kind: `H` header, `D` device, `N` notification. A JSON entry starts
/// with `{`, so readers tell the formats apart entry by entry and still read format 1.
///
/// Strings and byte strings are a `UInt32` length and the bytes. Optional integers use
/// `Int64.min` for nil, as the stored object does.
enum SnapshotCoding {
    static let header = UInt8(ascii: "H")
    static let device = UInt8(ascii: "D")
    static let notification = UInt8(ascii: "N")
    /// A device's recent command keys (format 3): the device id, a `UInt32` count, then each key
    /// as a `UInt64` and its receive time as an `Int64`, oldest first.
    static let commandKeys = UInt8(ascii: "K")
    /// A device's receipts settings, inbox and history (format 4): `R`, then a JSON object, as
    /// few devices have one. Since format 5 it numbers them (`historyFirst`, and each inbox
    /// entry's `seq` and `history`); one without is numbered as it is read.
    static let receipts = UInt8(ascii: "R")
    /// The rules the engine computed with (format 5): a `UInt32` count, then each zone's identifier
    /// and the `UInt64` fingerprint of its rules (``Zone/rulesFingerprint``), so that a restart after a
    /// tzdata upgrade notices which zones changed while chimed was stopped.
    static let zoneRules = UInt8(ascii: "Z")
    /// A device's push registrations and outbox (format 6): `P`, then a JSON object, as few
    /// devices have one.
    static let push = UInt8(ascii: "P")
    /// A device's receipts settings, inbox and history, binary (format 7, when every device keeps a
    /// history): `Y`, the device id, its settings, `dropped`, the history's first number, the inbox
    /// entries, then the history's (``encode(_:)``). Replaces `R`, which is still read.
    static let history = UInt8(ascii: "Y")

    static func encode(_ p: FrozenPush) -> [UInt8] {
        // Each delivery once, with the registrations it is still to be pushed to: its payload is
        // the same for all of them.
        struct Delivery: Hashable {
            var fireId: String
            var payload: [UInt8]
            var firedAt: Int64
            var expires: Int64
        }
        var deliveries: [(job: PushJob, to: [JSON])] = []
        var index: [Delivery: Int] = [:]
        for job in p.outbox {
            let d = Delivery(
                fireId: job.fireId,
                payload: job.payload,
                firedAt: job.firedAt.milliseconds,
                expires: job.expiresAt.milliseconds
            )
            if let i = index[d] {
                deliveries[i].to.append(.object(job.registration.json))
            } else {
                index[d] = deliveries.count
                deliveries.append((job, [.object(job.registration.json)]))
            }
        }
        let o: JSONObject = [
            "device": .string(p.deviceId),
            "registrations": .array(p.registrations.map { .object($0.json) }),
            "outbox": .array(
                deliveries.map { d in
                    .object([
                        "fireId": .string(d.job.fireId),
                        "payload": .string(String(decoding: d.job.payload, as: UTF8.self)),
                        "firedAt": .int(d.job.firedAt.milliseconds), "expires": .int(d.job.expiresAt.milliseconds),
                        "to": .array(d.to),
                    ])
                }
            ),
        ]
        return [push] + JSON.object(o).bytes
    }

    static func encode(zoneRules rules: [ZoneRulesRecord]) -> [UInt8] {
        var w = ByteWriter()
        w.u8(zoneRules)
        w.u32(UInt32(rules.count))
        for rule in rules {
            w.string(rule.zone)
            w.u64(rule.fingerprint)
        }
        return w.bytes
    }

    /// A setting that may be unset: 0 unset, 1 false, 2 true.
    static func setting(_ b: Bool?) -> UInt8 { b.map { $0 ? 2 : 1 } ?? 0 }

    /// `Y`: each history entry's id is written once per run of entries of the same notification
    /// (the length ``sameId`` says "the id of the entry before"), a missing time is `Int64.min`.
    static func encode(_ r: FrozenReceipts) -> [UInt8] {
        var w = ByteWriter()
        w.u8(history)
        w.string(r.deviceId)
        w.u8(setting(r.receipts) | setting(r.history) << 2)
        w.i64(Int64(r.dropped))
        w.u64(r.log.firstSeq)
        let inbox = r.inbox.entries
        w.u32(UInt32(inbox.count))
        for e in inbox {
            w.u64(e.seq)
            w.string(e.fireId)
            w.bytes(e.payload)
            w.i64(e.expiresAt)
            w.u64(e.historySeq ?? 0)
        }
        w.u32(UInt32(r.log.count))
        var previous: String?
        for i in 0..<r.log.count {
            let h = r.log[offset: i]
            if h.id == previous {
                w.u32(sameId)
            } else {
                w.string(h.id)
                previous = h.id
            }
            w.i64(h.occurrence)
            w.i64(h.firedAt)
            w.i64(h.lead)
            var flags: UInt8 = 0
            if h.late { flags |= 1 }
            if !h.mqtt { flags |= 2 }
            w.u8(flags)
            w.u8(h.leftAs.map { UInt8(DeliveryState.snapshotOrder.firstIndex(of: $0)! + 1) } ?? 0)
            w.u8(h.pushCount)
            w.i64(h.acknowledgedAt ?? .min)
            w.i64(h.expiresAt ?? .min)
            let push = h.push
            w.u32(UInt32(push.count))
            for t in push {
                w.string(t.registration)
                w.u8(UInt8(PushOutcome.allCases.firstIndex(of: t.outcome)!))
                w.i64(t.at)
                if let reason = t.reason {
                    w.u8(1)
                    w.string(reason)
                } else {
                    w.u8(0)
                }
            }
        }
        return w.bytes
    }

    /// The length that stands for the id of the history entry before (``encode(_:)``).
    static let sameId = UInt32.max

    static func encode(commandKeys keys: [(key: CommandKey, at: Int64)], of deviceId: String) -> [UInt8] {
        var w = ByteWriter()
        w.u8(commandKeys)
        w.string(deviceId)
        w.u32(UInt32(keys.count))
        for (key, at) in keys {
            w.u64(key.value)
            w.i64(at)
        }
        return w.bytes
    }

    static func encodeHeader(nextVersion: UInt64) -> [UInt8] {
        var w = ByteWriter()
        w.u8(header)
        w.u8(UInt8(EngineSnapshot.format))
        w.u64(nextVersion)
        return w.bytes
    }

    static func encode(_ d: EngineSnapshot.Device) -> [UInt8] {
        var w = ByteWriter()
        w.u8(device)
        w.string(d.id)
        w.string(d.timeZone?.identifier ?? "")
        w.i64(Int64(d.badge))
        if let q = d.quietHours {
            w.u8(1)
            for t in [q.start, q.end] {
                w.u8(UInt8(t.hour))
                w.u8(UInt8(t.minute))
                w.u8(UInt8(t.second))
            }
        } else {
            w.u8(0)
        }
        return w.bytes
    }

    static func encode(_ n: StoredNotification, _ state: DurableState, into w: inout ByteWriter) {
        w.u8(notification)
        w.string(n.deviceId)
        w.string(n.id)
        var flags: UInt8 = 0
        if n.fireIsLocal { flags |= 1 }
        if n.zoneIsDevice { flags |= 2 }
        if state.enabled { flags |= 4 }
        if state.done { flags |= 8 }
        if n.extras != nil { flags |= 16 }
        w.u8(flags)
        w.u8(n.repeatUnit.map { UInt8(RepeatUnit.allCases.firstIndex(of: $0)!) } ?? 0xFF)
        w.i64(n.fire)
        w.i64(n.leadTimeGiven)
        w.string(n.zone?.identifier ?? "")
        w.u8(n.badgeKind)
        w.i32(n.badgeValue)
        w.i32(n.userInfoStart)
        n.withContent { w.bytes($0) }
        w.u64(state.version)
        w.i32(state.firedCount)
        w.i64(state.lastFiredAt ?? .min)
        w.i64(state.createdAt)
        w.i64(state.updatedAt)
        w.i64(state.pendingFrom)
        if let e = n.extras { w.bytes(JSON.object(e.json).bytes) }
    }
}

/// How many notifications each larger device has in a snapshot, counted entry by entry before
/// it is restored (entries come device by device), so that the device's table is sized once
/// instead of growing again and again: see ``Engine/reserveCapacity(for:records:)``.
public struct SnapshotSizing: Hashable, Sendable {
    fileprivate var counts: [String: Int] = [:]
    fileprivate var all = 0
    private var run: [UInt8] = []
    private var runCount = 0

    public init() {}

    public init<S: Sequence<ArraySlice<UInt8>>>(_ entries: S) {
        for entry in entries { count(entry) }
    }

    /// Counts one entry; the bytes need not outlive the call.
    public mutating func count(_ entry: ArraySlice<UInt8>) {
        guard entry.first == SnapshotCoding.notification && entry.count >= 5 else { return }
        all += 1
        // The device id: a little-endian UInt32 length, then its bytes.
        let at = entry.startIndex
        let length = Int(entry[at + 1]) | Int(entry[at + 2]) << 8 | Int(entry[at + 3]) << 16 | Int(entry[at + 4]) << 24
        guard length <= entry.count - 5 else { return }
        let id = entry[(at + 5)..<(at + 5 + length)]
        if id.elementsEqual(run) {
            runCount += 1
        } else {
            endRun()
            run = Array(id)
            runCount = 1
        }
    }

    fileprivate mutating func endRun() {
        if runCount > 64 { counts[String(decoding: run, as: UTF8.self), default: 0] += runCount }
        runCount = 0
    }
}

extension Engine {
    /// Before the entries of a snapshot are restored: sizes each larger device's table for the
    /// notifications `sizing` counted, and the timer heap for all of them and `records` more.
    func reserveCapacity(for sizing: SnapshotSizing, records: Int = 0) {
        var sizing = sizing
        sizing.endRun()
        restoring?.reservations = sizing.counts
        heap.reserveCapacity(sizing.all + records)
    }

    /// Reads a format 2 entry (see ``SnapshotCoding``).
    func restoreBinary(_ bytes: ArraySlice<UInt8>) throws(RecoveryError) {
        var r = ByteReader(bytes)
        switch try r.u8() {
        case SnapshotCoding.header:
            let format = try r.u8()
            guard format <= EngineSnapshot.format else {
                throw RecoveryError(description: "snapshot format \(format) is newer than this chimed reads")
            }
            nextVersion = try r.u64()
        case SnapshotCoding.device:
            let device = device(try r.string())
            let zone = try r.string()
            if !zone.isEmpty { device.timeZone = zones.held(Zone(recorded: zone)) }
            // Saturated: a counter written before it was bounded may be past the maximum.
            device.badge = Badge.clamped(Int(clamping: try r.i64()))
            if try r.u8() == 1 {
                var times: [TimeOfDay] = []
                for _ in 0..<2 {
                    times.append(TimeOfDay(hour: Int(try r.u8()), minute: Int(try r.u8()), second: Int(try r.u8())))
                }
                device.quietHours = QuietHours(start: times[0], end: times[1])
            }
        case SnapshotCoding.receipts:
            do throws(ChimeError) {
                guard case .object(let o)? = try? JSON(parsing: Array(bytes.dropFirst())) else {
                    throw ChimeError(.invalidArgument, "receipts entry is not a JSON object")
                }
                try restoreReceipts(FieldReader(o))
            } catch {
                throw RecoveryError(description: "receipts: \(error.message)")
            }
            return
        case SnapshotCoding.history:
            try restoreHistory(&r)
        case SnapshotCoding.push:
            do throws(ChimeError) {
                guard case .object(let o)? = try? JSON(parsing: Array(bytes.dropFirst())) else {
                    throw ChimeError(.invalidArgument, "push entry is not a JSON object")
                }
                try restorePush(FieldReader(o))
            } catch {
                throw RecoveryError(description: "push: \(error.message)")
            }
            return
        case SnapshotCoding.zoneRules:
            let count = Int(try r.u32())
            guard count <= 10_000 else { throw RecoveryError(description: "\(count) zones in a snapshot") }
            for _ in 0..<count {
                let zone = try r.string()
                zoneFingerprints[zone] = try r.u64()
            }
        case SnapshotCoding.commandKeys:
            let deviceId = try r.string()
            let count = Int(try r.u32())
            guard count <= CommandKeyWindow.perDevice else {
                throw RecoveryError(description: "device \(deviceId): \(count) command keys, more than a window holds")
            }
            var keys: [(key: CommandKey, at: Int64)] = []
            for _ in 0..<count { keys.append((CommandKey(try r.u64()), try r.i64())) }
            commandKeys.restore(device: deviceId, keys: keys)
        case SnapshotCoding.notification:
            // Entries come device by device: look the device up once per run of them.
            let deviceId = try r.string()
            let device: DeviceState
            if let last = restoring?.lastDevice, last.id == deviceId {
                device = last
            } else {
                device = self.device(deviceId)
                restoring?.lastDevice = device
                if let count = restoring?.reservations.removeValue(forKey: deviceId) {
                    device.notifications.reserveCapacity(device.notifications.count + count)
                    if device.notifications.count + count >= DeviceState.orderedFrom {
                        if device.order == nil { device.order = Array(device.notifications.values) }
                        device.order!.reserveCapacity(device.notifications.count + count)
                    }
                }
            }
            let id = try r.string()
            let flags = try r.u8()
            let unit = try r.u8()
            guard unit == 0xFF || Int(unit) < RepeatUnit.allCases.count else {
                throw RecoveryError(description: "notification \(id): unknown repeat unit \(unit)")
            }
            let fire = try r.i64()
            let lead = try r.i64()
            let zoneName = try r.string()
            var zone: ZoneBox?
            if !zoneName.isEmpty { zone = zones.box(Zone(recorded: zoneName)) }
            let badgeKind = try r.u8()
            let badgeValue = try r.i32()
            let userInfoStart = try r.i32()
            let content = try r.byteSlice()
            let version = try r.u64()
            let firedCount = try r.i32()
            let lastFired = try r.i64()
            let createdAt = try r.i64()
            let updatedAt = try r.i64()
            let pendingFrom = try r.i64()
            var extras: SpecExtras?
            if flags & 16 != 0 {
                let text = try r.bytes()
                do throws(ChimeError) {
                    guard case .object(let o)? = try? JSON(parsing: text) else {
                        throw ChimeError(.invalidArgument, "extras are not a JSON object")
                    }
                    extras = try SpecExtras(FieldReader(o))
                } catch {
                    throw RecoveryError(description: "notification \(id): \(error.message)")
                }
            }
            guard userInfoStart < Int32(content.count) else {
                throw RecoveryError(description: "notification \(id): userInfo offset out of range")
            }
            let n = StoredNotification(
                id: id,
                device: device,
                fire: fire,
                fireIsLocal: flags & 1 != 0,
                zone: zone,
                zoneIsDevice: flags & 2 != 0,
                repeatUnit: unit == 0xFF ? nil : RepeatUnit.allCases[Int(unit)],
                leadTimeGiven: lead,
                content: content,
                userInfoStart: userInfoStart,
                badgeKind: badgeKind,
                badgeValue: badgeValue,
                extras: extras,
                version: version,
                enabled: flags & 4 != 0,
                createdAt: createdAt,
                updatedAt: updatedAt,
                pendingFrom: pendingFrom
            )
            n.done = flags & 8 != 0
            n.firedCount = firedCount
            n.lastFiredRaw = lastFired
            // One probe of a table that may hold millions: a snapshot holds each id once.
            if let old = device.notifications.insert(n) {
                // Written twice all the same: the later one stands, as a second schedule would
                // (detaching the earlier one takes the id out of the table, attaching puts it back).
                detach(old, from: device)
                attach(n, to: device)
            } else {
                attached(n, to: device)
            }
            armRestored(n, device)
        default:
            throw RecoveryError(description: "unknown snapshot entry kind \(bytes.first ?? 0)")
        }
        guard r.atEnd else { throw RecoveryError(description: "snapshot entry has \(r.remaining) extra bytes") }
    }
}

extension Engine {
    /// Reads a `Y` entry (``SnapshotCoding/encode(_:)``), its ids shared with the device's
    /// notifications where they are still held.
    private func restoreHistory(_ r: inout ByteReader) throws(RecoveryError) {
        let device = device(try r.string())
        func setting(_ bits: UInt8) throws(RecoveryError) -> Bool? {
            switch bits & 3 {
            case 0: return nil
            case 1: return false
            case 2: return true
            default: throw RecoveryError(description: "device \(device.id): history settings \(bits)")
            }
        }
        let receipts = DeviceReceipts()
        let settings = try r.u8()
        receipts.receipts = try setting(settings)
        receipts.history = try setting(settings >> 2)
        receipts.dropped = Int(clamping: try r.i64())
        let firstSeq = try r.u64()
        guard firstSeq >= 1 else { throw RecoveryError(description: "device \(device.id): history numbered from 0") }
        receipts.log = DeliveryHistory(firstSeq: firstSeq)
        var inbox: [InboxEntry] = []
        for _ in 0..<Int(try r.u32()) {
            let seq = try r.u64()
            let fireId = try r.string()
            let payload = try r.bytes()
            let expires = try r.i64()
            let historySeq = try r.u64()
            if let last = inbox.last, last.seq >= seq {
                throw RecoveryError(description: "device \(device.id): inbox entry \(seq) not above the one before")
            }
            inbox.append(
                InboxEntry(
                    seq: seq,
                    fireId: fireId,
                    payload: payload,
                    expiresAt: expires,
                    historySeq: historySeq == 0 ? nil : historySeq
                )
            )
        }
        var previous: String?
        for _ in 0..<Int(try r.u32()) {
            let id: String
            if r.peekU32() == SnapshotCoding.sameId, let previous {
                _ = try r.u32()
                id = previous
            } else {
                let read = try r.string()
                id = device.notifications[read]?.id ?? read
            }
            previous = id
            let occurrence = try r.i64()
            let firedAt = try r.i64()
            let lead = try r.i64()
            let flags = try r.u8()
            let left = Int(try r.u8())
            guard left <= DeliveryState.snapshotOrder.count else {
                throw RecoveryError(description: "device \(device.id): unknown history state \(left)")
            }
            let pushCount = try r.u8()
            let acknowledgedAt = try r.i64()
            let expiresAt = try r.i64()
            var push: [PushTrail] = []
            for _ in 0..<Int(try r.u32()) {
                let registration = try r.string()
                let outcome = Int(try r.u8())
                guard outcome < PushOutcome.allCases.count else {
                    throw RecoveryError(description: "device \(device.id): unknown push outcome \(outcome)")
                }
                let at = try r.i64()
                let reason = try r.u8() == 1 ? try r.string() : nil
                push.append(
                    PushTrail(
                        registration: registration,
                        outcome: PushOutcome.allCases[outcome],
                        at: at,
                        reason: reason
                    )
                )
            }
            receipts.log.append(
                HistoryEntry(
                    id: id,
                    occurrence: occurrence,
                    firedAt: firedAt,
                    late: flags & 1 != 0,
                    lead: lead,
                    mqtt: flags & 2 == 0,
                    acknowledgedAt: acknowledgedAt == .min ? nil : acknowledgedAt,
                    leftAs: left == 0 ? nil : DeliveryState.snapshotOrder[left - 1],
                    expiresAt: expiresAt == .min ? nil : expiresAt,
                    push: push,
                    pushCount: Int(pushCount)
                ),
                limit: .max
            )
        }
        if let last = inbox.last, last.seq >= receipts.log.nextSeq {
            throw RecoveryError(description: "device \(device.id): inbox numbered past the history's next number")
        }
        for entry in inbox { receipts.inbox.append(entry) }
        device.receipts = receipts
    }
}

extension SpecExtras {
    /// The fields as the JSON members a notification object has for them (`expiresAfter` in
    /// milliseconds here), in ``NotificationField`` order, then `seed` when not 0.
    var json: JSONObject {
        var spec = NotificationSpec()
        fill(&spec)
        var o = JSONObject()
        for field in NotificationField.extras {
            let value = field == .expiresAfter ? expiresAfter.map(JSON.int) : field.value(of: spec)
            if let value { o.append(field.wireName, value) }
        }
        if seed != 0 { o.append("seed", .int(Int64(bitPattern: seed))) }
        return o
    }

    /// Reads what ``json`` wrote.
    convenience init(_ r: FieldReader) throws(ChimeError) {
        var spec = NotificationSpec()
        for field in NotificationField.extras { try field.decode(r, into: &spec, from: .snapshot) }
        if case .int(let seed)? = r.object["seed"] { spec.seed = UInt64(bitPattern: seed) }
        self.init(spec)
    }
}

/// Appends fixed-width little-endian values.
struct ByteWriter {
    var bytes: [UInt8] = []

    mutating func u8(_ v: UInt8) { bytes.append(v) }

    mutating func u64(_ v: UInt64) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }

    mutating func i32(_ v: Int32) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func u32(_ v: UInt32) { i32(Int32(bitPattern: v)) }

    mutating func bytes<C: Collection<UInt8>>(_ b: C) {
        i32(Int32(b.count))
        bytes.append(contentsOf: b)
    }

    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { bytes($0) }
    }
}

/// Reads what ``ByteWriter`` wrote; running past the end is an error, never a crash.
struct ByteReader {
    let data: ArraySlice<UInt8>
    /// From the start of `data` (whose indices need not start at 0).
    var offset = 0

    init(_ data: ArraySlice<UInt8>) { self.data = data }

    var atEnd: Bool { offset == data.count }
    var remaining: Int { data.count - offset }

    private mutating func check(_ n: Int) throws(RecoveryError) {
        guard n >= 0, n <= remaining else { throw RecoveryError(description: "snapshot entry is truncated") }
    }

    private mutating func load<T: FixedWidthInteger>(_: T.Type) throws(RecoveryError) -> T {
        try check(MemoryLayout<T>.size)
        let v = data.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
        offset += MemoryLayout<T>.size
        return T(littleEndian: v)
    }

    mutating func u8() throws(RecoveryError) -> UInt8 { try load(UInt8.self) }
    mutating func u64() throws(RecoveryError) -> UInt64 { try load(UInt64.self) }
    mutating func i64() throws(RecoveryError) -> Int64 { try load(Int64.self) }
    mutating func i32() throws(RecoveryError) -> Int32 { try load(Int32.self) }
    mutating func u32() throws(RecoveryError) -> UInt32 { try load(UInt32.self) }

    /// The next `UInt32`, not read; nil at the end.
    func peekU32() -> UInt32? {
        var copy = self
        return try? copy.u32()
    }

    mutating func bytes() throws(RecoveryError) -> [UInt8] {
        exactCopy(try byteSlice())
    }

    /// What ``bytes()`` reads, not copied.
    mutating func byteSlice() throws(RecoveryError) -> ArraySlice<UInt8> {
        let n = Int(try i32())
        try check(n)
        defer { offset += n }
        let start = data.startIndex + offset
        return data[start..<(start + n)]
    }

    mutating func string() throws(RecoveryError) -> String {
        let n = Int(try i32())
        try check(n)
        defer { offset += n }
        return try data.withUnsafeBufferPointer { all throws(RecoveryError) -> String in
            let raw = UnsafeBufferPointer(rebasing: all[offset..<(offset + n)])
            // ASCII is valid UTF-8: skip the slower validating initializer.
            if raw.allSatisfy({ $0 < 0x80 }) { return String(decoding: raw, as: UTF8.self) }
            guard let s = String(validating: raw, as: UTF8.self) else {
                throw RecoveryError(description: "snapshot entry has invalid UTF-8")
            }
            return s
        }
    }
}
