/// A reply (PROTOCOL.md section 4): exactly one per command.
public struct Reply: Hashable, Sendable {
    public var op: String
    public var requestId: String?
    public var outcome: Result<ReplyResult, ChimeError>

    public init(op: String, requestId: String?, outcome: Result<ReplyResult, ChimeError>) {
        self.op = op
        self.requestId = requestId
        self.outcome = outcome
    }

    public init(request: Request, result: ReplyResult) {
        self.init(op: request.op.rawValue, requestId: request.requestId, outcome: .success(result))
    }

    public init(request: Request, error: ChimeError) {
        self.init(op: request.op.rawValue, requestId: request.requestId, outcome: .failure(error))
    }

    public var isOK: Bool {
        if case .success = outcome { return true }
        return false
    }

    /// The command was received again and not applied again (``ReplyResult/duplicate``).
    public var isDuplicate: Bool {
        if case .success(.duplicate) = outcome { return true }
        return false
    }

    public var json: JSONObject {
        var o = JSONObject()
        switch outcome {
        case .success(let result):
            o.append("ok", true)
            o.append("op", .string(op))
            if let requestId { o.append("requestId", .string(requestId)) }
            o.append("result", .object(result.json))
        case .failure(let error):
            o.append("ok", false)
            o.append("op", .string(op))
            if let requestId { o.append("requestId", .string(requestId)) }
            var e = JSONObject()
            e.append("code", .string(error.code.wireName))
            if let field = error.field { e.append("field", .string(field)) }
            e.append("message", .string(error.message))
            o.append("error", .object(e))
        }
        return o
    }

    /// ``json`` as bytes, written straight into them (the same bytes): every command has a reply.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160)
        var first = true
        out.append(UInt8(ascii: "{"))
        switch outcome {
        case .success(let result):
            out.appendMember("ok", true, first: &first)
            out.appendMember("op", .string(op), first: &first)
            if let requestId { out.appendMember("requestId", .string(requestId), first: &first) }
            out.appendKey("result", first: &first)
            result.write(to: &out)
        case .failure:
            // Rare, and never on the path every command takes: as ``json`` writes it.
            return JSON.object(json).bytes
        }
        out.append(UInt8(ascii: "}"))
        return out
    }
}

/// The `result` of an `ok` reply, one case per kind of answer (PROTOCOL.md section 3).
///
/// The engine builds these; ``json`` writes each exactly as the protocol shows it (members in
/// that order), and ``init(op:json:)`` reads it back, for the `chime` CLI.
public enum ReplyResult: Hashable, Sendable {
    /// `schedule`: `{"scheduled": [{"id", "nextFireDate"}...], "replaced": N}`.
    case scheduled(Scheduled)
    /// `update`: `{"updated": {"id", "nextFireDate"}}`.
    case updated(NextFire)
    /// `cancel`: `{"cancelled": [ids]}`.
    case cancelled(ids: [String])
    /// `pause`: `{"paused": [ids]}`.
    case paused(ids: [String])
    /// `resume`: `{"resumed": [ids]}`.
    case resumed(ids: [String])
    /// `device`: the device as it now is.
    case device(DeviceStatus)
    /// `snooze`: `{"id", "nextFireDate"}`, the id being the notification snoozed.
    case snoozed(NextFire)
    /// `list`: one page.
    case listed(ListPage)
    /// `preview`: `{"fireDates": [...]}`, and for a rule in another calendar than the Gregorian one
    /// (`RSCALE=CHINESE`) `"calendarDates": ["8-15", ...]`, each occurrence's date in that calendar.
    case previewed(fireDates: [Instant], calendarDates: [String]?)
    /// `ack`: `{"acknowledged": N, "unknown": [fireIds]}`.
    case acknowledged(count: Int, unknown: [String])
    /// `inbox`: `{"deliveries": [...], "cursor": c | null, "dropped": N}`.
    case inbox(InboxPage)
    /// `history`: `{"deliveries": [...]}`, newest first.
    case history([HistoryRow])
    /// A command that changes state, received again and not applied again: `{"duplicate": true}`.
    case duplicate

    public struct InboxPage: Hashable, Sendable {
        /// Each delivery exactly as it was published, oldest first.
        public var deliveries: [JSON]
        /// The fireId to pass as `cursor` for the next page; nil on the last page.
        public var cursor: String?
        /// Deliveries dropped from the inbox to make room, in all.
        public var dropped: Int

        public init(deliveries: [JSON], cursor: String?, dropped: Int) {
            self.deliveries = deliveries
            self.cursor = cursor
            self.dropped = dropped
        }
    }

    public struct HistoryRow: Hashable, Sendable {
        public var fireId: String
        public var id: String
        public var occurrenceDate: Instant
        /// When it was due: the occurrence minus the notification's `leadTime` (a reply of an
        /// older chimed has none: the occurrence).
        public var fireDate: Instant
        public var firedAt: Instant
        public var late: Bool
        public var acknowledgedAt: Instant?
        public var state: DeliveryState
        /// What became of it on MQTT.
        public var mqtt: MQTTOutcome
        /// How its pushes went, in one word (nil: pushed nowhere).
        public var pushOutcome: PushSummary?
        /// How its pushes ended (devices with push registrations; absent from the JSON when none).
        public var push: [PushResult]

        public init(
            fireId: String,
            id: String,
            occurrenceDate: Instant,
            fireDate: Instant? = nil,
            firedAt: Instant,
            late: Bool,
            acknowledgedAt: Instant?,
            state: DeliveryState,
            mqtt: MQTTOutcome = .acknowledged,
            pushOutcome: PushSummary? = nil,
            push: [PushResult] = []
        ) {
            self.push = push
            self.fireId = fireId
            self.id = id
            self.occurrenceDate = occurrenceDate
            self.fireDate = fireDate ?? occurrenceDate
            self.firedAt = firedAt
            self.late = late
            self.acknowledgedAt = acknowledgedAt
            self.state = state
            self.mqtt = mqtt
            self.pushOutcome = pushOutcome
        }

        var json: JSONObject {
            var o: JSONObject = [
                "fireId": .string(fireId),
                "id": .string(id),
                "occurrenceDate": .string(occurrenceDate.rfc3339(fractional: true)),
                "fireDate": .string(fireDate.rfc3339(fractional: true)),
                "firedAt": .string(firedAt.rfc3339(fractional: true)),
                "late": .bool(late),
                "acknowledgedAt": acknowledgedAt.map { .string($0.rfc3339(fractional: true)) } ?? .null,
                "state": .string(state.rawValue),
                "mqtt": .string(mqtt.rawValue),
                "pushOutcome": pushOutcome.map { .string($0.rawValue) } ?? .null,
            ]
            if !push.isEmpty { o.append("push", .array(push.map { .object($0.json) })) }
            return o
        }

        init(_ r: FieldReader) throws(ChimeError) {
            func instant(_ key: String) throws(ChimeError) -> Instant {
                try Replies.instant(try r.required(try r.string(key), key), field: r.name(key))
            }
            let stateName = try r.required(try r.string("state"), "state")
            let mqtt = try r.string("mqtt") ?? MQTTOutcome.acknowledged.rawValue
            var pushOutcome: PushSummary?
            if let value = r.object["pushOutcome"], value != .null {
                pushOutcome = try r.required(PushSummary(rawValue: try r.string("pushOutcome") ?? ""), "pushOutcome")
            }
            self.init(
                fireId: try r.required(try r.string("fireId", maxLength: .max), "fireId"),
                id: try r.required(try r.string("id", maxLength: .max), "id"),
                occurrenceDate: try instant("occurrenceDate"),
                fireDate: try Replies.optionalInstant(r, "fireDate"),
                firedAt: try instant("firedAt"),
                late: try r.required(try r.bool("late"), "late"),
                acknowledgedAt: try Replies.optionalInstant(r, "acknowledgedAt"),
                state: try r.required(DeliveryState(rawValue: stateName), "state"),
                mqtt: try r.required(MQTTOutcome(rawValue: mqtt), "mqtt"),
                pushOutcome: pushOutcome,
                push: try (r.array("push", maxCount: .max) ?? []).enumerated().map { (i, item) throws(ChimeError) in
                    guard case .object(let o) = item else { throw .invalid(r.name("push[\(i)]"), "expected an object") }
                    return try PushResult(FieldReader(o, path: r.name("push[\(i)].")))
                }
            )
        }
    }

    /// A notification's id and its next delivery (nil: paused or finished).
    public struct NextFire: Hashable, Sendable {
        public var id: String
        public var nextFireDate: Instant?

        public init(id: String, nextFireDate: Instant?) {
            self.id = id
            self.nextFireDate = nextFireDate
        }
    }

    public struct Scheduled: Hashable, Sendable {
        /// Each notification of the command, in its order.
        public var scheduled: [NextFire]
        /// How many notifications were there before: removed by `replace`, or replaced by one of the
        /// same id.
        public var replaced: Int

        public init(scheduled: [NextFire], replaced: Int) {
            self.scheduled = scheduled
            self.replaced = replaced
        }
    }

    public struct DeviceStatus: Hashable, Sendable {
        public var deviceId: String
        public var timeZone: Zone?
        /// The counter as the device has been told (changes in flight included).
        public var badge: Int
        public var quietHours: QuietHours?
        /// How many notifications it holds.
        public var pending: Int
        /// Deliveries wait in its inbox for an `ack`.
        public var receipts: Bool
        /// It keeps a delivery history (always with receipts).
        public var history: Bool
        /// Its push registrations as replies show them, without their secrets
        /// (``PushRegistration/redacted``).
        public var push: [JSONObject]

        public init(
            deviceId: String,
            timeZone: Zone?,
            badge: Int,
            quietHours: QuietHours?,
            pending: Int,
            receipts: Bool = false,
            history: Bool = false,
            push: [JSONObject] = []
        ) {
            self.push = push
            self.deviceId = deviceId
            self.timeZone = timeZone
            self.badge = badge
            self.quietHours = quietHours
            self.pending = pending
            self.receipts = receipts
            self.history = history
        }
    }

    public struct ListPage: Hashable, Sendable {
        public var notifications: [ListedNotification]
        /// Where the next page starts; nil on the last page.
        public var cursor: String?

        public init(notifications: [ListedNotification], cursor: String?) {
            self.notifications = notifications
            self.cursor = cursor
        }
    }

    /// Whether this is ``duplicate``.
    public var isDuplicate: Bool { self == .duplicate }

    /// Writes ``json`` into `out`: the result of a `schedule` straight into bytes (every command of
    /// the ingest path has one), the others through their object.
    func write(to out: inout [UInt8]) {
        guard case .scheduled(let s) = self else {
            JSON.object(json).write(to: &out)
            return
        }
        out.append(contentsOf: #"{"scheduled":["#.utf8)
        for (i, next) in s.scheduled.enumerated() {
            out.append(contentsOf: (i == 0 ? #"{"id":"# : #",{"id":"#).utf8)
            JSON.writeString(next.id, to: &out)
            out.append(contentsOf: #","nextFireDate":"#.utf8)
            if let date = next.nextFireDate {
                out.append(UInt8(ascii: "\""))
                date.writeRFC3339(into: &out)
                out.append(UInt8(ascii: "\""))
            } else {
                out.append(contentsOf: "null".utf8)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: #"],"replaced":"#.utf8)
        out.append(decimal: Int64(s.replaced))
        out.append(UInt8(ascii: "}"))
    }

    /// The `result` object.
    public var json: JSONObject {
        switch self {
        case .scheduled(let s):
            return [
                "scheduled": .array(s.scheduled.map { .object($0.json) }),
                "replaced": .int(Int64(s.replaced)),
            ]
        case .updated(let next): return ["updated": .object(next.json)]
        case .cancelled(let ids): return ["cancelled": .array(ids.map(JSON.string))]
        case .paused(let ids): return ["paused": .array(ids.map(JSON.string))]
        case .resumed(let ids): return ["resumed": .array(ids.map(JSON.string))]
        case .device(let d):
            var o: JSONObject = [
                "deviceId": .string(d.deviceId),
                "timeZone": d.timeZone.map { .string($0.identifier) } ?? .null,
                "badge": .int(Int64(d.badge)),
                "quietHours": Replies.quietHours(d.quietHours),
                "pending": .int(Int64(d.pending)),
                "receipts": .bool(d.receipts),
                "history": .bool(d.history),
            ]
            if !d.push.isEmpty { o.append("push", .array(d.push.map(JSON.object))) }
            return o
        case .snoozed(let next): return next.json
        case .listed(let page):
            return [
                "notifications": .array(page.notifications.map { .object($0.json) }),
                "cursor": page.cursor.map(JSON.string) ?? .null,
            ]
        case .previewed(let dates, let calendarDates):
            var o: JSONObject = ["fireDates": .array(dates.map { .string($0.rfc3339()) })]
            if let calendarDates { o["calendarDates"] = .array(calendarDates.map(JSON.string)) }
            return o
        case .acknowledged(let count, let unknown):
            return ["acknowledged": .int(Int64(count)), "unknown": .array(unknown.map(JSON.string))]
        case .inbox(let page):
            return [
                "deliveries": .array(page.deliveries),
                "cursor": page.cursor.map(JSON.string) ?? .null,
                "dropped": .int(Int64(page.dropped)),
            ]
        case .history(let rows): return ["deliveries": .array(rows.map { .object($0.json) })]
        case .duplicate: return ["duplicate": true]
        }
    }

    /// Reads the `result` of an `ok` reply to `op`.
    /// - Throws: ``ChimeError`` `invalid_argument`, naming the member that is missing or wrong.
    public init(op: Operation, json o: JSONObject) throws(ChimeError) {
        if o.count == 1, o["duplicate"] == true {
            self = .duplicate
            return
        }
        // `null` stands for a value that is not there (`cursor`, `timeZone`, `quietHours`).
        let r = FieldReader(JSONObject(o.members.filter { !$0.value.isNull }.map { ($0.key, $0.value) }))
        func strings(_ key: String) throws(ChimeError) -> [String] {
            try r.required(try r.strings(key, maxCount: .max, maxLength: .max), key)
        }
        switch op {
        case .schedule:
            var items: [NextFire] = []
            for (i, item) in try r.required(try r.array("scheduled", maxCount: .max), "scheduled").enumerated() {
                guard case .object(let row) = item else { throw .invalid("scheduled[\(i)]", "expected an object") }
                items.append(try NextFire(FieldReader(row, path: "scheduled[\(i)].")))
            }
            let replaced = try r.required(try r.integer("replaced", in: 0...Int64(Int32.max)), "replaced")
            self = .scheduled(Scheduled(scheduled: items, replaced: Int(replaced)))
        case .update:
            let row = try r.required(try r.object("updated"), "updated")
            self = .updated(try NextFire(FieldReader(row, path: "updated.")))
        case .cancel: self = .cancelled(ids: try strings("cancelled"))
        case .pause: self = .paused(ids: try strings("paused"))
        case .resume: self = .resumed(ids: try strings("resumed"))
        case .device:
            // The worker's zone database may have zones this one lacks.
            let zone = try r.string("timeZone").map { Zone(recorded: $0) }
            var quiet: QuietHours?
            if let q = try r.object("quietHours") {
                let qr = FieldReader(q, path: "quietHours.")
                func time(_ key: String) throws(ChimeError) -> TimeOfDay {
                    let text = try qr.required(try qr.string(key), key)
                    return try qr.required(TimeOfDay(parsing: text), key)
                }
                quiet = QuietHours(start: try time("start"), end: try time("end"))
            }
            self = .device(
                DeviceStatus(
                    deviceId: try r.required(try r.string("deviceId"), "deviceId"),
                    timeZone: zone,
                    // Saturated, as chimed does since it bounds the counter: an older one could send more.
                    badge: Badge.clamped(Int(try r.required(try r.integer("badge", in: 0...Int64.max), "badge"))),
                    quietHours: quiet,
                    pending: Int(try r.required(try r.integer("pending", in: 0...Int64(Int32.max)), "pending")),
                    receipts: try r.bool("receipts") ?? false,
                    history: try r.bool("history") ?? false,
                    push: try (r.array("push", maxCount: .max) ?? []).compactMap(\.objectValue)
                )
            )
        case .ack:
            let count = try r.required(try r.integer("acknowledged", in: 0...Int64(Int32.max)), "acknowledged")
            self = .acknowledged(count: Int(count), unknown: try strings("unknown"))
        case .inbox:
            self = .inbox(
                InboxPage(
                    deliveries: try r.required(try r.array("deliveries", maxCount: .max), "deliveries"),
                    cursor: try r.string("cursor", maxLength: .max),
                    dropped: Int(try r.required(try r.integer("dropped", in: 0...Int64.max), "dropped"))
                )
            )
        case .history:
            var rows: [HistoryRow] = []
            for (i, item) in try r.required(try r.array("deliveries", maxCount: .max), "deliveries").enumerated() {
                guard case .object(let row) = item else { throw .invalid("deliveries[\(i)]", "expected an object") }
                rows.append(try HistoryRow(FieldReader(row, path: "deliveries[\(i)].")))
            }
            self = .history(rows)
        case .snooze: self = .snoozed(try NextFire(r))
        case .list:
            var rows: [ListedNotification] = []
            let items = try r.required(try r.array("notifications", maxCount: .max), "notifications")
            for (i, item) in items.enumerated() {
                guard case .object(let row) = item else {
                    throw .invalid("notifications[\(i)]", "expected an object")
                }
                rows.append(try ListedNotification(FieldReader(row, path: "notifications[\(i)].")))
            }
            self = .listed(ListPage(notifications: rows, cursor: try r.string("cursor", maxLength: .max)))
        case .preview:
            var dates: [Instant] = []
            for (i, text) in try strings("fireDates").enumerated() {
                dates.append(try Replies.instant(text, field: "fireDates[\(i)]"))
            }
            let calendarDates = try r.strings("calendarDates", maxCount: .max, maxLength: .max)
            if let calendarDates, calendarDates.count != dates.count {
                throw .invalid("calendarDates", "expected as many as fireDates (\(dates.count))")
            }
            self = .previewed(fireDates: dates, calendarDates: calendarDates)
        }
    }
}

extension ReplyResult.NextFire {
    var json: JSONObject { ["id": .string(id), "nextFireDate": Replies.instant(nextFireDate)] }

    init(_ r: FieldReader) throws(ChimeError) {
        guard let id = try r.string("id") else { throw .invalid(r.name("id"), "missing") }
        self.init(id: id, nextFireDate: try Replies.optionalInstant(r, "nextFireDate"))
    }
}

/// A row of a `list` reply: the notification as scheduled (resolved), and its state.
public struct ListedNotification: Hashable, Sendable {
    /// The fields as scheduled. Read back from a reply, its `enabled` (when it was given) is the
    /// current state, which the row shows in the field's place.
    public var notification: ResolvedNotification
    /// Nil when paused or finished.
    public var nextFireDate: Instant?
    public var enabled: Bool
    public var firedCount: Int
    public var lastFiredAt: Instant?
    public var createdAt: Instant
    public var updatedAt: Instant

    public init(
        notification: ResolvedNotification,
        nextFireDate: Instant?,
        enabled: Bool,
        firedCount: Int,
        lastFiredAt: Instant?,
        createdAt: Instant,
        updatedAt: Instant
    ) {
        self.notification = notification
        self.nextFireDate = nextFireDate
        self.enabled = enabled
        self.firedCount = firedCount
        self.lastFiredAt = lastFiredAt
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// The notification's fields (``NotificationField`` order), then its state. `enabled` may be
    /// among the fields as scheduled: the current state replaces it there.
    public var json: JSONObject {
        var o = NotificationCoding.encode(notification.spec)
        o["nextFireDate"] = Replies.instant(nextFireDate)
        o["enabled"] = .bool(enabled)
        o["firedCount"] = .int(Int64(firedCount))
        o["lastFiredAt"] = Replies.instant(lastFiredAt)
        o["createdAt"] = .string(createdAt.rfc3339())
        o["updatedAt"] = .string(updatedAt.rfc3339())
        return o
    }

    init(_ r: FieldReader) throws(ChimeError) {
        var spec = try NotificationCoding.decode(r, limits: nil)
        // `enabled` after the state's first member was not among the fields as scheduled.
        let keys = r.object.keys
        if let at = keys.firstIndex(of: "enabled"), let state = keys.firstIndex(of: "nextFireDate"), at > state {
            spec.enabled = nil
        }
        guard let resolved = ResolvedNotification(resolved: spec) else {
            throw .invalid(r.name("id"), "missing (a listed notification has an id and a fireDate)")
        }
        self.init(
            notification: resolved,
            nextFireDate: try Replies.optionalInstant(r, "nextFireDate"),
            enabled: try r.required(try r.bool("enabled"), "enabled"),
            firedCount: Int(try r.required(try r.integer("firedCount", in: 0...Int64.max), "firedCount")),
            lastFiredAt: try Replies.optionalInstant(r, "lastFiredAt"),
            createdAt: try Replies.instant(
                try r.required(try r.string("createdAt"), "createdAt"),
                field: r.name("createdAt")
            ),
            updatedAt: try Replies.instant(
                try r.required(try r.string("updatedAt"), "updatedAt"),
                field: r.name("updatedAt")
            )
        )
    }
}

/// The JSON forms of values that replies show.
package enum Replies {
    package static func quietHours(_ quiet: QuietHours?) -> JSON {
        guard let quiet else { return .null }
        return ["start": .string(quiet.start.description), "end": .string(quiet.end.description)]
    }

    package static func instant(_ instant: Instant?) -> JSON {
        instant.map { .string($0.rfc3339()) } ?? .null
    }

    /// An RFC 3339 instant a reply shows.
    package static func instant(_ text: String, field: String) throws(ChimeError) -> Instant {
        guard case .instant(let instant)? = DateTimeValue(iso8601: text) else { throw ChimeError.badDate(field, text) }
        return instant
    }

    /// An instant or `null` (or absent).
    package static func optionalInstant(_ r: FieldReader, _ key: String) throws(ChimeError) -> Instant? {
        if r.object[key]?.isNull ?? true { return nil }
        return try instant(try r.string(key, maxLength: 64) ?? "", field: r.name(key))
    }
}
