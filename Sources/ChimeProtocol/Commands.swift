/// A decoded command: what a client asked of a device, before the engine looks at any state.
public enum Command: Hashable, Sendable {
    /// `notifications` in the order given; `batch` when the client sent `{"notifications": [...]}`.
    case schedule(notifications: [NotificationSpec], replace: Selector?, batch: Bool)
    /// Changes the fields of notification `id` that `patch` holds (each checked already): a member
    /// whose value is `null` clears that field.
    case update(id: String, patch: JSONObject)
    case cancel(Selector)
    case pause(Selector)
    case resume(Selector)
    case list(match: JSONObject?, limit: Int, cursor: String?)
    /// Boxed (`indirect`), as `device` is: a notification held inline made every `Command`, and every
    /// `Request` the worker copies on the hot path, as large as one (hundreds of bytes).
    indirect case preview(PreviewTarget, count: Int, from: Instant?)
    indirect case device(DeviceUpdate)
    /// `after` in milliseconds.
    case snooze(id: String, after: Int64)
    /// Deliveries the device has (receipts); `badge` applies only if one of them was new.
    case ack(fireIds: [String], badge: Badge?)
    /// The unacknowledged deliveries, oldest first, from after the fireId `cursor`.
    case inbox(limit: Int, cursor: String?)
    /// Recent deliveries, newest first, fired at `since` or later.
    case history(since: Instant?, limit: Int)
}

public enum PreviewTarget: Hashable, Sendable {
    case id(String)
    case notification(NotificationSpec)
}

/// The fields a `device` command sets; nil members are left as they are.
public struct DeviceUpdate: Hashable, Sendable {
    public var timeZone: Zone?
    public var badge: Int?
    /// `.some(nil)` clears the quiet hours.
    public var quietHours: QuietHours??
    /// Keep each delivery in the inbox until the device acknowledges it (`ack`).
    public var receipts: Bool?
    /// Keep the recent deliveries for `history` (always, with receipts).
    public var history: Bool?
    /// Its push registrations (`push`, `addPush` or `removePush`).
    public var push: PushChange?

    public init(
        timeZone: Zone? = nil,
        badge: Int? = nil,
        quietHours: QuietHours?? = nil,
        receipts: Bool? = nil,
        history: Bool? = nil,
        push: PushChange? = nil
    ) {
        self.timeZone = timeZone
        self.badge = badge
        self.quietHours = quietHours
        self.receipts = receipts
        self.history = history
        self.push = push
    }

    public var isEmpty: Bool {
        timeZone == nil && badge == nil && quietHours == nil && receipts == nil && history == nil && push == nil
    }
}

/// A command with its address and the id to echo in the reply.
public struct Request: Hashable, Sendable {
    public var deviceId: String
    public var op: Operation
    public var requestId: String?
    public var command: Command
    /// What tells a redelivery of this command from a new one (set by the worker from the MQTT
    /// message); nil: it cannot be told.
    public var key: CommandKey?

    public init(deviceId: String, op: Operation, requestId: String? = nil, command: Command, key: CommandKey? = nil) {
        self.deviceId = deviceId
        self.op = op
        self.requestId = requestId
        self.command = command
        self.key = key
    }
}

/// Limits a command is checked against before it reaches the engine.
public struct CommandLimits: Hashable, Sendable {
    /// `--max-command-bytes`.
    public var maxCommandBytes: Int = 262_144
    /// `--max-userinfo-bytes`.
    public var maxUserInfoBytes: Int = 4096

    /// How deeply a `userInfo` object may nest (itself counting as 1). Journal records, snapshots,
    /// `list` replies and deliveries put it at most 5 levels inside their own objects, so with this
    /// bound everything Chime accepts it can also read back within ``JSON/maximumDepth``.
    public static let maximumUserInfoDepth = 32

    /// The largest `--max-command-bytes` and `--max-userinfo-bytes` (1 MiB, as the deploy broker's
    /// `max_packet_size`): the costliest command of that size (a million bytes of small members)
    /// holds the worker's loop about 30 ms on the benchmark's machine (`chime-bench maxima`).
    public static let largestCommandBytes = 1 << 20

    public init(maxCommandBytes: Int = 262_144, maxUserInfoBytes: Int = 4096) {
        self.maxCommandBytes = maxCommandBytes
        self.maxUserInfoBytes = maxUserInfoBytes
    }
}

/// Turns command payloads into ``Request`` values, or into the error their reply carries.
public struct CommandDecoder: Sendable {
    public var limits: CommandLimits

    public static let maxBatch = 1000
    public static let maxIdLength = 128
    /// A fireId is an id, `@` and an RFC 3339 instant with milliseconds.
    public static let maxFireIdLength = maxIdLength + 32

    public init(limits: CommandLimits = CommandLimits()) {
        self.limits = limits
    }

    /// The outcome of decoding: the request, or an error with whatever `requestId` could be read.
    public struct Failure: Error, Hashable, Sendable {
        public var requestId: String?
        public var error: ChimeError
    }

    public func decode(deviceId: String, op: Operation, payload: [UInt8]) -> Result<Request, Failure> {
        decodeObject(payload) { reader, requestId throws(ChimeError) in
            Request(deviceId: deviceId, op: op, requestId: requestId, command: try decodeCommand(op, reader))
        }
    }

    /// What every message to the worker shares (a command, a `find`): at most
    /// `--max-command-bytes`, a JSON object, its `requestId` read first so that every error can
    /// carry it. `body` reads the rest.
    func decodeObject<T>(
        _ payload: [UInt8],
        _ body: (FieldReader, _ requestId: String?) throws(ChimeError) -> T
    ) -> Result<T, Failure> {
        guard payload.count <= limits.maxCommandBytes else {
            return .failure(
                Failure(
                    requestId: nil,
                    error: ChimeError(
                        .payloadTooLarge,
                        "the command is \(payload.count) bytes, more than --max-command-bytes \(limits.maxCommandBytes)"
                    )
                )
            )
        }
        let json: JSON
        do {
            json = try JSON(parsing: payload)
        } catch  where error.code == .inexactNumber {
            return .failure(Failure(requestId: nil, error: ChimeError(.invalidArgument, "\(error)")))
        } catch {
            return .failure(Failure(requestId: nil, error: ChimeError(.malformedJSON, "not valid JSON: \(error)")))
        }
        guard case .object(let object) = json else {
            return .failure(
                Failure(
                    requestId: nil,
                    error: ChimeError(.malformedJSON, "a command is a JSON object, got \(json.typeDescription)")
                )
            )
        }
        var requestId: String?
        if case .string(let s)? = object["requestId"], s.count <= 128 { requestId = s }
        do throws(ChimeError) {
            let reader = FieldReader(object)
            _ = try reader.string("requestId", maxLength: 128)
            return .success(try body(reader, requestId))
        } catch {
            return .failure(Failure(requestId: requestId, error: error))
        }
    }

    func decodeCommand(_ op: Operation, _ r: FieldReader) throws(ChimeError) -> Command {
        switch op {
        case .schedule:
            if r.has("notifications") {
                try r.checkKnown(["requestId", "notifications", "replace"])
                guard let items = try r.array("notifications", maxCount: Self.maxBatch) else {
                    throw .invalid("notifications", "missing")
                }
                guard !items.isEmpty else { throw .invalid("notifications", "must hold at least one notification") }
                var specs: [NotificationSpec] = []
                specs.reserveCapacity(items.count)
                for (i, item) in items.enumerated() {
                    guard case .object(let o) = item else {
                        throw .invalid("notifications[\(i)]", "expected an object, got \(item.typeDescription)")
                    }
                    specs.append(try decodeNotification(FieldReader(o, path: "notifications[\(i)].")))
                }
                var seen = Set<String>(minimumCapacity: specs.count)
                for i in specs.indices {
                    if let id = specs[i].id, !seen.insert(id).inserted {
                        throw .invalid("notifications[\(i)].id", "\(quoted(id)) appears twice in the batch")
                    }
                }
                let replace = try r.object("replace").map { o throws(ChimeError) in
                    try decodeSelector(FieldReader(o, path: "replace."), allowed: [])
                }
                return .schedule(notifications: specs, replace: replace, batch: true)
            }
            if r.has("replace") {
                throw .invalid("replace", "only a batch ({\"notifications\": [...]}) may carry replace")
            }
            return .schedule(
                notifications: [try decodeNotification(r, allowed: NotificationCoding.fieldsAndRequestId)],
                replace: nil,
                batch: false
            )
        case .update:
            let r = try knownNotificationMembers(r, allowed: NotificationCoding.fieldsAndRequestId)
            guard let id = try r.string("id", maxLength: Self.maxIdLength, allowEmpty: false) else {
                throw .invalid("id", "missing")
            }
            // Each field is checked on its own here; together with the fields the notification
            // keeps, by the engine.
            var patch = JSONObject()
            var checked = NotificationSpec()
            for field in NotificationField.allCases where field != .id {
                guard let value = r.object[field.wireName] else { continue }
                if !value.isNull { try field.decode(r, into: &checked, from: .client(limits)) }
                patch.append(field.wireName, value)
            }
            guard !patch.isEmpty else {
                throw ChimeError(.invalidArgument, "update: give at least one field to change besides id")
            }
            return .update(id: id, patch: patch)
        case .cancel:
            return .cancel(try decodeSelector(r, allowed: ["requestId"]))
        case .pause:
            return .pause(try decodeSelector(r, allowed: ["requestId"]))
        case .resume:
            return .resume(try decodeSelector(r, allowed: ["requestId"]))
        case .list:
            try r.checkKnown(["requestId", "match", "limit", "cursor"])
            let match = try r.object("match").map { o throws(ChimeError) in
                try decodeMatch(FieldReader(o, path: "match."))
            }
            let limit = try r.integer("limit", in: 1...1000) ?? 100
            let cursor = try r.string("cursor", maxLength: 256)
            return .list(match: match, limit: Int(limit), cursor: cursor)
        case .preview:
            try r.checkKnown(["requestId", "id", "ids", "notification", "count", "from"])
            let count = Int(try r.integer("count", in: 1...1000) ?? 10)
            var from: Instant?
            if let value = try r.dateTime("from") {
                guard case .instant(let instant) = value else {
                    throw .invalid("from", "expected an absolute instant with Z or an offset")
                }
                from = instant
            }
            let id = try singleId(r)
            let notification = try r.object("notification")
            switch (id, notification) {
            case (let id?, nil):
                return .preview(.id(id), count: count, from: from)
            case (nil, let o?):
                let spec = try decodeNotification(FieldReader(o, path: "notification."))
                return .preview(.notification(spec), count: count, from: from)
            default:
                throw ChimeError(.invalidArgument, field: "id", "preview takes exactly one of id or notification")
            }
        case .device:
            try r.checkKnown(
                Set(["requestId", "timeZone", "badge", "quietHours", "receipts", "history"] + PushChange.members)
            )
            var update = DeviceUpdate()
            update.push = try PushChange.decode(r)
            update.receipts = try r.bool("receipts")
            update.history = try r.bool("history")
            if let name = try r.string("timeZone", maxLength: 64) {
                guard let zone = Zone(identifier: name) else {
                    throw .invalid("timeZone", "\(quoted(name)) is not an IANA time zone such as Europe/Paris")
                }
                update.timeZone = zone
            }
            if let badge = try r.integer("badge", in: 0...Int64(Badge.maximum)) { update.badge = Int(badge) }
            if let value = r.object["quietHours"] {
                switch value {
                case .null: update.quietHours = .some(nil)
                case .object(let o):
                    let q = FieldReader(o, path: "quietHours.")
                    try q.checkKnown(["start", "end"])
                    update.quietHours = .some(
                        QuietHours(start: try timeOfDay(q, "start"), end: try timeOfDay(q, "end"))
                    )
                default:
                    throw r.wrongType("quietHours", "an object or null", value)
                }
            }
            return .device(update)
        case .ack:
            try r.checkKnown(["requestId", "fireIds", "badge"])
            guard let ids = try r.strings("fireIds", maxCount: Self.maxBatch, maxLength: Self.maxFireIdLength) else {
                throw .invalid("fireIds", "missing")
            }
            guard !ids.isEmpty else { throw .invalid("fireIds", "must hold at least one fireId") }
            return .ack(fireIds: ids, badge: try NotificationCoding.decodeBadge(r))
        case .inbox:
            try r.checkKnown(["requestId", "limit", "cursor"])
            let limit = try r.integer("limit", in: 1...1000) ?? 100
            return .inbox(limit: Int(limit), cursor: try r.string("cursor", maxLength: Self.maxFireIdLength))
        case .history:
            try r.checkKnown(["requestId", "since", "limit"])
            var since: Instant?
            if let value = try r.dateTime("since") {
                guard case .instant(let instant) = value else {
                    throw .invalid("since", "expected an absolute instant with Z or an offset")
                }
                since = instant
            }
            return .history(since: since, limit: Int(try r.integer("limit", in: 1...1000) ?? 100))
        case .snooze:
            try r.checkKnown(["requestId", "id", "ids", "after"])
            guard let id = try singleId(r) else {
                throw .invalid("id", "missing")
            }
            guard let after = try r.seconds("after", min: 0, minInclusive: false, max: 315_360_000) else {
                throw .invalid("after", "missing")
            }
            return .snooze(id: id, after: after)
        }
    }

    /// The one notification a command is about: `id`, or `ids` naming exactly one (the selectors'
    /// spelling, accepted so that either works everywhere).
    func singleId(_ r: FieldReader) throws(ChimeError) -> String? {
        let id = try r.string("id", maxLength: Self.maxIdLength, allowEmpty: false)
        guard let ids = try r.strings("ids", maxCount: Self.maxBatch, maxLength: Self.maxIdLength) else { return id }
        guard id == nil else { throw .invalid("ids", "give either id or ids, not both") }
        guard ids.count == 1, let only = ids.first else {
            throw .invalid("ids", "this command takes one notification: give id (or ids with one id)")
        }
        return only
    }

    func timeOfDay(_ r: FieldReader, _ key: String) throws(ChimeError) -> TimeOfDay {
        guard let text = try r.string(key, maxLength: 8) else { throw .invalid(r.name(key), "missing") }
        guard let t = TimeOfDay(parsing: text) else {
            throw .invalid(r.name(key), "expected HH:MM or HH:MM:SS, got \(quoted(text))")
        }
        return t
    }

    /// Exactly one of `ids`, `match` or `all`, beside the `allowed` other members.
    func decodeSelector(_ r: FieldReader, allowed: Set<String>) throws(ChimeError) -> Selector {
        try r.checkKnown(allowed.union(["ids", "id", "match", "all"]))
        let given = ["ids", "id", "match", "all"].filter(r.has)
        guard given.count == 1 else {
            throw ChimeError(
                .invalidArgument,
                field: r.name("ids"),
                "\(r.path.isEmpty ? "a selector" : String(r.path.dropLast())) takes exactly one of ids (or id), match or all"
            )
        }
        if let id = try r.string("id", maxLength: Self.maxIdLength, allowEmpty: false) { return .ids([id]) }
        if let ids = try r.strings("ids", maxCount: Self.maxBatch, maxLength: Self.maxIdLength) {
            guard !ids.isEmpty else { throw .invalid(r.name("ids"), "must name at least one id") }
            return .ids(ids)
        }
        if let o = try r.object("match") {
            return .match(userInfo: try decodeMatch(FieldReader(o, path: r.name("match."))))
        }
        guard try r.bool("all") == true else { throw .invalid(r.name("all"), "must be true") }
        return .all
    }

    /// `{"userInfo": {...}}` with at least one key.
    func decodeMatch(_ r: FieldReader) throws(ChimeError) -> JSONObject {
        try r.checkKnown(["userInfo"])
        guard let userInfo = try r.object("userInfo") else { throw .invalid(r.name("userInfo"), "missing") }
        guard !userInfo.isEmpty else {
            throw .invalid(r.name("userInfo"), "must name at least one key (use {\"all\": true} for everything)")
        }
        try NotificationCoding.checkUserInfo(userInfo, at: r.name("userInfo"), limits: limits)
        return userInfo
    }

    func decodeNotification(
        _ r: FieldReader,
        allowed: Set<String> = NotificationCoding.fields
    ) throws(ChimeError) -> NotificationSpec {
        try NotificationCoding.decode(knownNotificationMembers(r, allowed: allowed), limits: limits)
    }

    /// A notification object's members as the decoder reads them (``NotificationCoding/canonical(_:)``),
    /// each one of `allowed`: else `unknown_field`, with a hint when another API's name was given.
    func knownNotificationMembers(_ r: FieldReader, allowed: Set<String>) throws(ChimeError) -> FieldReader {
        // The common case: each is one of `allowed`, none to rename or drop. Every `allowed` holds
        // the fields, whose names are found without hashing them.
        if r.object.members.allSatisfy({ NotificationCoding.fieldBit($0.key) != nil || allowed.contains($0.key) }) {
            return r
        }
        let r = try NotificationCoding.canonical(r)
        try r.checkKnown(allowed, hints: NotificationCoding.portingHints)
        return r
    }
}
