import ChimeProtocol

/// Receipts, the inbox and delivery history (PROTOCOL.md section 3.9).
///
/// A device with receipts keeps each delivery, exactly as it was published, in its inbox until
/// it acknowledges it (`ack`), the notification's `expiresAfter` passes, `--inbox-ttl` passes,
/// or the inbox is past `--max-inbox-per-device` or `--max-inbox-bytes-per-device` (the oldest go
/// first). Every device keeps its last `--history-per-device` deliveries and what became of each
/// on MQTT and on push (``HistoryEntry``), unless it said `history: false` (and has no
/// receipts) or the worker runs with `--history false` and it did not say `history: true`.
///
/// What goes into the inbox and history is decided when a delivery is published, and journaled
/// with its `delivered` record (``ReceiptCapture``), so that replay rebuilds them exactly
/// whatever the worker's flags are on a later start. Time-based expiry is computed from the
/// instants recorded, never from the clock: the inbox shows what has not expired at the time of
/// the read, and entries are removed from memory by the next record or acknowledgement of the
/// device whose time is past them.

/// What a delivery of a device with receipts or history keeps, from publication to record.
public struct ReceiptCapture: Hashable, Sendable {
    /// The delivery as published, for the inbox (nil: history only).
    public var payload: [UInt8]?
    /// When it leaves the inbox unacknowledged (milliseconds); 0 for history only.
    public var expiresAt: Int64
    /// The occurrence minus when it was due (the notification's `leadTime` then), milliseconds.
    public var lead: Int64
    /// It was published a second or more after it was due.
    public var late: Bool
    /// It was published over MQTT (false: `channels: "push"`, pushed only).
    public var mqtt: Bool

    public init(payload: [UInt8]?, expiresAt: Int64, late: Bool, lead: Int64 = 0, mqtt: Bool = true) {
        self.payload = payload
        self.expiresAt = expiresAt
        self.late = late
        self.lead = lead
        self.mqtt = mqtt
    }
}

/// A device's receipts settings, inbox and history. Only devices that use them have one.
final class DeviceReceipts {
    /// The `device` command's `receipts` and `history`; nil: the worker's default.
    var receipts: Bool?
    var history: Bool?
    var inbox = Inbox()
    /// At most `--history-per-device`. Its ``DeliveryHistory/nextSeq`` numbers the next delivery
    /// kept, in the history and in the inbox alike.
    var log = DeliveryHistory()
    /// Deliveries dropped from the inbox to make room, in all.
    var dropped = 0

    var isEmpty: Bool { receipts == nil && history == nil && inbox.isEmpty && log.isEmpty && dropped == 0 }
}

extension EngineConfiguration {
    /// The receipts flags: `--receipts`, `--history`, `--inbox-ttl`, `--max-inbox-per-device`,
    /// `--max-inbox-bytes-per-device`, `--history-per-device`.
    public struct Receipts: Hashable, Sendable {
        /// Receipts for devices that did not choose.
        public var byDefault = false
        /// History for devices that did not choose (`--history`).
        public var historyByDefault = true
        /// Milliseconds an unacknowledged delivery stays in the inbox.
        public var inboxTTL: Int64 = 7 * 86_400_000
        public var maxInboxPerDevice = 100
        public var maxInboxBytesPerDevice = 1_048_576
        /// Within ``historyBytesPerDevice`` by default (PROTOCOL.md section 3.9, "Memory").
        public var historyPerDevice = Self.defaultHistoryPerDevice

        /// The memory a device's history takes at the default `--history-per-device`, at most,
        /// with no receipts or push: ``historyEntryBytes`` an entry and ``historyDeviceBytes``.
        public static let historyBytesPerDevice = 1536
        /// An entry (``HistoryEntry``'s stride); `chime-bench history` measures it.
        public static let historyEntryBytes = 48
        /// What a device with a history holds besides its entries: its ``DeviceReceipts`` and the
        /// array's header, as the allocator rounds them.
        public static let historyDeviceBytes = 192
        public static let defaultHistoryPerDevice = (historyBytesPerDevice - historyDeviceBytes) / historyEntryBytes

        public init() {}
    }
}

extension Engine {
    /// Whether deliveries to `device` go to its inbox, and whether they are kept in its history.
    func receiptsMode(_ device: DeviceState) -> (inbox: Bool, history: Bool) {
        let inbox = device.receipts?.receipts ?? configuration.receipts.byDefault
        return (inbox, inbox || (device.receipts?.history ?? configuration.receipts.historyByDefault))
    }

    /// What a delivery being published keeps, if its device uses receipts or history.
    func capture(
        _ device: DeviceState,
        payload: [UInt8],
        occurrence: Int64,
        due: Int64,
        expiresAfter: Int64?,
        mqtt: Bool,
        now: Instant
    )
        -> ReceiptCapture?
    {
        let mode = receiptsMode(device)
        guard mode.history else { return nil }
        var expires: Int64 = 0
        if mode.inbox {
            expires = now.milliseconds + configuration.receipts.inboxTTL
            if let expiresAfter { expires = min(expires, due + expiresAfter) }
        }
        return ReceiptCapture(
            payload: mode.inbox ? payload : nil,
            expiresAt: expires,
            late: now.milliseconds - due >= configuration.lateThreshold,
            lead: occurrence - due,
            mqtt: mqtt
        )
    }

    /// A delivery was recorded: into the device's history, and its inbox with receipts. Costs
    /// O(log n) amortised whatever the caps are (``Inbox``, ``DeliveryHistory``).
    /// - Parameter id: the notification's id, shared with the notification when it is still held.
    /// - Returns: the history entry's number, for its pushes (``keepPush(_:fireId:at:in:entry:)``).
    @discardableResult
    func keep(
        _ capture: ReceiptCapture,
        of record: OccurrenceRecord,
        id: String,
        fireId: @autoclosure () -> String,
        in device: DeviceState
    ) -> UInt64 {
        let r: DeviceReceipts
        if let kept = device.receipts {
            r = kept
        } else {
            r = DeviceReceipts()
            device.receipts = r
        }
        let now = record.at.milliseconds
        if !r.inbox.isEmpty { expire(r, at: now) }
        let limits = configuration.receipts
        let seq = r.log.nextSeq
        r.log.append(
            HistoryEntry(
                id: id,
                occurrence: record.occurrence.milliseconds,
                firedAt: now,
                late: capture.late,
                lead: capture.lead,
                mqtt: capture.mqtt,
                expiresAt: capture.payload == nil ? nil : capture.expiresAt
            ),
            limit: limits.historyPerDevice
        )
        guard let payload = capture.payload else { return seq }
        let fireId = fireId()
        r.inbox.append(
            InboxEntry(seq: seq, fireId: fireId, payload: payload, expiresAt: capture.expiresAt, historySeq: seq)
        )
        while r.inbox.count > limits.maxInboxPerDevice || r.inbox.bytes > limits.maxInboxBytesPerDevice,
            let gone = r.inbox.removeOldest()
        {
            r.dropped += 1
            setLeft(r, gone, as: .dropped)
        }
        return seq
    }

    /// Removes from the inbox what expired by `now` (history keeps saying so).
    func expire(_ r: DeviceReceipts, at now: Int64) {
        for gone in r.inbox.removeExpired(at: now) { setLeft(r, gone, as: .expired) }
    }

    private func setLeft(_ r: DeviceReceipts, _ entry: InboxEntry, as state: DeliveryState) {
        guard let seq = entry.historySeq else { return }
        r.log.update(seq) { if $0.leftAs == nil { $0.leftAs = state } }
    }

    /// Which of `fireIds` an `ack` at `now` would acknowledge for the first time, and which the
    /// device does not know (neither in its inbox nor in its history). Costs O(log n) per fireId.
    func ackOutcome(_ deviceId: String, _ fireIds: [String], now: Int64) -> (new: [String], unknown: [String]) {
        guard let r = devices[deviceId]?.receipts else { return ([], fireIds) }
        var new: [String] = []
        var unknown: [String] = []
        var seen = Set<String>()
        for id in fireIds where seen.insert(id).inserted {
            if r.inbox.holds(id, at: now) {
                new.append(id)
            } else if let seq = r.log.seqs(of: id).last, let h = r.log[seq: seq] {
                // Known: acknowledged already, left the inbox, or history only (recorded once).
                if h.acknowledgedAt == nil && h.expiresAt == nil && h.leftAs == nil { new.append(id) }
            } else {
                unknown.append(id)
            }
        }
        return (new, unknown)
    }

    /// Applies an `ack`: what it acknowledges leaves the inbox; the badge changes if anything did.
    func applyAck(_ deviceId: String, at: Instant, fireIds: [String], badge: Badge?) -> ReplyResult {
        let (new, unknown) = ackOutcome(deviceId, fireIds, now: at.milliseconds)
        let device = device(deviceId)
        willChange(device)
        if let r = device.receipts {
            for id in new {
                _ = r.inbox.remove(fireId: id)
                for seq in r.log.seqs(of: id) { r.log.update(seq) { $0.acknowledgedAt = at.milliseconds } }
            }
            expire(r, at: at.milliseconds)
        }
        if !new.isEmpty, let badge { device.badge = badge.applied(to: device.badge) }
        dropIfEmpty(device)
        return .acknowledged(count: new.count, unknown: unknown)
    }

    /// One page of the inbox at `now`: what has not expired, oldest first, after `cursor` (the
    /// sequence number of the last entry of the page before; a `fireId`, as chimed gave before
    /// version 2 of the inbox, is read as its newest entry's). Costs the entries it passes.
    func inboxPage(_ deviceId: String, limit: Int, cursor: String?, now: Instant) throws(ChimeError) -> ReplyResult {
        guard let r = devices[deviceId]?.receipts else {
            return .inbox(ReplyResult.InboxPage(deliveries: [], cursor: nil, dropped: 0))
        }
        var after: UInt64?
        if let cursor {
            if cursor.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                let seq = UInt64(cursor), seq < r.log.nextSeq
            {
                after = seq
            } else if let seq = r.inbox.newestSeq(of: cursor) {
                after = seq
            } else {
                throw ChimeError(
                    .invalidArgument,
                    field: "cursor",
                    "cursor: \(quoted(cursor)) is not one this inbox gave (pass the previous page's cursor)"
                )
            }
        }
        var page: [JSON] = []
        var bytes = 0
        var last: UInt64?
        let more = r.inbox.visit(after: after, at: now.milliseconds) { entry in
            // A page also ends by size, like `list`'s.
            if page.count == limit || (!page.isEmpty && bytes + entry.payload.count > Self.maxListBytes) {
                return false
            }
            last = entry.seq
            // Written by the engine itself, so always JSON; one that were not is passed over.
            if let delivery = try? JSON(parsing: entry.payload) {
                page.append(delivery)
                bytes += entry.payload.count
            }
            return true
        }
        let next = more ? last.map { String($0) } : nil
        return .inbox(ReplyResult.InboxPage(deliveries: page, cursor: next, dropped: r.dropped))
    }

    /// The device's recent deliveries, newest first.
    func historyPage(_ deviceId: String, since: Instant?, limit: Int, now: Instant) -> ReplyResult {
        guard let r = devices[deviceId]?.receipts else { return .history([]) }
        var rows: [ReplyResult.HistoryRow] = []
        for offset in stride(from: r.log.count - 1, through: 0, by: -1) {
            let entry = r.log[offset: offset]
            if let since, entry.firedAt < since.milliseconds { break }
            rows.append(
                ReplyResult.HistoryRow(
                    fireId: fireId(entry.id, Instant(milliseconds: entry.occurrence)),
                    id: entry.id,
                    occurrenceDate: Instant(milliseconds: entry.occurrence),
                    fireDate: Instant(milliseconds: entry.due),
                    firedAt: Instant(milliseconds: entry.firedAt),
                    late: entry.late,
                    acknowledgedAt: entry.acknowledgedAt.map { Instant(milliseconds: $0) },
                    state: entry.state(at: now.milliseconds),
                    mqtt: entry.mqtt ? .acknowledged : .none,
                    pushOutcome: entry.pushOutcome,
                    push: entry.push.map {
                        PushResult(
                            registration: $0.registration,
                            outcome: $0.outcome,
                            at: Instant(milliseconds: $0.at),
                            reason: $0.reason
                        )
                    }
                )
            )
            if rows.count == limit { break }
        }
        return .history(rows)
    }
}

extension Engine {
    /// Reads a snapshot's `R` entry (``SnapshotCoding/encode(_:)``). One written before the inbox
    /// was numbered (no `historyFirst`) is numbered here: its inbox from 1, its history after it,
    /// each inbox entry kept with the newest history entry of its `fireId`.
    func restoreReceipts(_ r: FieldReader) throws(ChimeError) {
        let all = Int64.min...Int64.max
        let device = device(try r.required(try r.string("device"), "device"))
        let receipts = DeviceReceipts()
        receipts.receipts = try r.bool("receipts")
        receipts.history = try r.bool("history")
        receipts.dropped = Int(try r.integer("dropped", in: 0...Int64.max) ?? 0)
        let numbered = try r.integer("historyFirst", in: 1...Int64.max)
        var inbox: [InboxEntry] = []
        for (i, item) in (try r.array("inbox", maxCount: .max) ?? []).enumerated() {
            guard case .object(let o) = item else { throw .invalid("inbox[\(i)]", "not an object") }
            let e = FieldReader(o, path: "inbox[\(i)].")
            var seq = UInt64(i + 1)
            if numbered != nil { seq = UInt64(try e.required(try e.integer("seq", in: 1...Int64.max), "seq")) }
            inbox.append(
                InboxEntry(
                    seq: seq,
                    fireId: try e.required(try e.string("fireId", maxLength: .max), "fireId"),
                    payload: Array(try e.required(try e.string("payload", maxLength: .max), "payload").utf8),
                    expiresAt: try e.required(try e.integer("expires", in: all), "expires"),
                    historySeq: try e.integer("history", in: 1...Int64.max).map { UInt64($0) }
                )
            )
            if i > 0, inbox[i].seq <= inbox[i - 1].seq { throw .invalid("inbox[\(i)].seq", "not above the one before") }
        }
        receipts.log = DeliveryHistory(firstSeq: numbered.map { UInt64($0) } ?? UInt64(inbox.count + 1))
        for (i, item) in (try r.array("deliveries", maxCount: .max) ?? []).enumerated() {
            guard case .object(let o) = item else { throw .invalid("deliveries[\(i)]", "not an object") }
            let e = FieldReader(o, path: "deliveries[\(i)].")
            var left: DeliveryState?
            if let name = try e.string("left") { left = try e.required(DeliveryState(rawValue: name), "left") }
            // Its fireId is the id and the occurrence's: not kept.
            _ = try e.required(try e.string("fireId", maxLength: .max), "fireId")
            receipts.log.append(
                HistoryEntry(
                    id: try e.required(try e.string("id", maxLength: .max), "id"),
                    occurrence: try e.required(try e.integer("occurrence", in: all), "occurrence"),
                    firedAt: try e.required(try e.integer("firedAt", in: all), "firedAt"),
                    late: try e.bool("late") ?? false,
                    acknowledgedAt: try e.integer("acknowledgedAt", in: all),
                    leftAs: left,
                    expiresAt: try e.integer("expires", in: all),
                    push: try PushTrail.decode(e)
                ),
                limit: .max
            )
        }
        if let last = inbox.last, last.seq >= receipts.log.nextSeq {
            throw .invalid("inbox", "numbered past the history's next number \(receipts.log.nextSeq)")
        }
        for var entry in inbox {
            if numbered == nil { entry.historySeq = receipts.log.seqs(of: entry.fireId).last }
            receipts.inbox.append(entry)
        }
        device.receipts = receipts
    }
}
