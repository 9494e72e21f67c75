/// `find` across the fleet (PROTOCOL.md section 3.12): devices by id prefix and by a `userInfo` tag
/// of their notifications, asked of every worker at once on `P/$fleet/find`, which only backends
/// may write. Each worker answers for the devices it serves, in device id order, a page at a time;
/// the asker merges the pages (``FindPage/merged(_:limit:)``).
public enum FleetFind {
    /// The op name in replies.
    public static let op = "find"
    /// Devices a page holds when the query does not say (`limit`).
    public static let defaultLimit = 50
    /// Devices a page holds at most (`limit`).
    public static let maximumLimit = 500
    /// Devices one worker examines for one query, at most: past it the page ends early, with
    /// `next` where the walk stopped. Bounds what one query holds the worker's loop for.
    public static let maximumDevicesExamined = 10_000
    /// Notifications one worker reads for one query's tag, at most (a device's, once begun, are
    /// all read): past it the page ends early, as past ``maximumDevicesExamined``.
    public static let maximumNotificationsExamined = 100_000
    /// Matching notification ids a device lists, at most (`matchingCount` counts them all).
    public static let maximumMatchingIds = 10
}

/// A `find` query (PROTOCOL.md section 3.12).
public struct FindQuery: Hashable, Sendable {
    /// Devices whose id starts with this (byte for byte); nil: any.
    public var prefix: String?
    /// Devices with at least one notification whose `userInfo` has every member of this, as
    /// `cancel`'s `match` selects; nil: any device, with or without notifications.
    public var match: JSONObject?
    /// Only devices whose id sorts after this one (the `next` of the previous page).
    public var after: String?
    /// Devices a page holds at most.
    public var limit: Int
    public var requestId: String?

    public init(
        prefix: String? = nil,
        match: JSONObject? = nil,
        after: String? = nil,
        limit: Int = FleetFind.defaultLimit,
        requestId: String? = nil
    ) {
        self.prefix = prefix
        self.match = match
        self.after = after
        self.limit = limit
        self.requestId = requestId
    }

    /// The command's payload.
    public var json: JSONObject {
        var o = JSONObject()
        if let requestId { o.append("requestId", .string(requestId)) }
        if let prefix { o.append("prefix", .string(prefix)) }
        if let match { o.append("match", .object(["userInfo": .object(match)])) }
        if let after { o.append("after", .string(after)) }
        o.append("limit", .int(Int64(limit)))
        return o
    }
}

/// A device found: its id, how many notifications it holds and, for a query with a tag, those
/// that have it.
public struct FoundDevice: Hashable, Sendable {
    public var deviceId: String
    /// Its notifications (snoozes not counted), as `device`'s `pending`.
    public var pending: Int
    /// The ids of its notifications that have the tag, in id order, at most
    /// ``FleetFind/maximumMatchingIds``; nil for a query without a tag.
    public var matching: [String]?
    /// How many of its notifications have the tag; nil for a query without one.
    public var matchingCount: Int?

    public init(deviceId: String, pending: Int, matching: [String]? = nil, matchingCount: Int? = nil) {
        self.deviceId = deviceId
        self.pending = pending
        self.matching = matching
        self.matchingCount = matchingCount
    }

    public var json: JSONObject {
        var o = JSONObject()
        o.append("deviceId", .string(deviceId))
        o.append("pending", .int(Int64(pending)))
        if let matching { o.append("matching", .array(matching.map(JSON.string))) }
        if let matchingCount { o.append("matchingCount", .int(Int64(matchingCount))) }
        return o
    }

    /// A row of a reply, as ``json`` writes it; nil when it is not one.
    public init?(json o: JSONObject) {
        guard let id = o["deviceId"]?.stringValue, DeviceID.isValid(id), case .int(let pending)? = o["pending"] else {
            return nil
        }
        self.init(deviceId: id, pending: Int(clamping: pending))
        if case .array(let ids)? = o["matching"] { matching = ids.compactMap(\.stringValue) }
        if case .int(let count)? = o["matchingCount"] { matchingCount = Int(clamping: count) }
    }
}

/// One page of `find`'s answer: one worker's, or the fleet's once merged.
public struct FindPage: Hashable, Sendable {
    /// In device id order, each after the query's `after`.
    public var devices: [FoundDevice]
    /// nil: nothing after the last device listed matches. Else the device id up to which the
    /// answer is complete (every matching device up to it, itself included, is listed): ask again
    /// with it as `after` for the rest. A page ends early, with `next`, when it is full or its
    /// worker examined as many devices or notifications as one query may.
    public var next: String?
    /// Devices the worker examined for it (summed over the workers, once merged).
    public var examined: Int

    public init(devices: [FoundDevice], next: String?, examined: Int = 0) {
        self.devices = devices
        self.next = next
        self.examined = examined
    }

    /// The `result` of a worker's reply: `{"devices": [...], "next", "examined"}`.
    public var json: JSONObject {
        var o = JSONObject()
        o.append("devices", .array(devices.map { .object($0.json) }))
        o.append("next", next.map(JSON.string) ?? .null)
        o.append("examined", .int(Int64(examined)))
        return o
    }

    /// A worker's `result`, as ``json`` writes it; nil when it is not one.
    public init?(result o: JSONObject) {
        guard case .array(let rows)? = o["devices"] else { return nil }
        var devices: [FoundDevice] = []
        for row in rows {
            guard let object = row.objectValue, let device = FoundDevice(json: object) else { return nil }
            devices.append(device)
        }
        let next: String?
        switch o["next"] {
        case .string(let id)?: next = id
        case .null?, nil: next = nil
        default: return nil
        }
        var examined = 0
        if case .int(let n)? = o["examined"] { examined = Int(clamping: n) }
        self.init(devices: devices, next: next, examined: examined)
    }

    /// A worker's reply: `{"ok": true, "op": "find", "workerId", "requestId"?, "result"}`, or with
    /// `"ok": false` and `"error"` as every error reply has it (PROTOCOL.md section 4).
    public static func reply(
        _ outcome: Result<FindPage, ChimeError>,
        workerId: String,
        requestId: String?
    ) -> [UInt8] {
        var o = JSONObject()
        o.append("ok", .bool((try? outcome.get()) != nil))
        o.append("op", .string(FleetFind.op))
        o.append("workerId", .string(workerId))
        if let requestId { o.append("requestId", .string(requestId)) }
        switch outcome {
        case .success(let page):
            o.append("result", .object(page.json))
        case .failure(let error):
            if case .object(let e)? = Reply(op: FleetFind.op, requestId: nil, outcome: .failure(error)).json["error"] {
                o.append("error", .object(e))
            }
        }
        return JSON.object(o).bytes
    }

    /// The fleet's page from its workers' pages for one query: every device up to the smallest
    /// `next` of them (all of them, when none has one), in id order, the first `limit`. So nothing
    /// past where one worker stopped is listed before that worker has looked there, and each
    /// device is listed once (each worker answers only for the devices it serves).
    public static func merged(_ pages: [FindPage], limit: Int) -> FindPage {
        let bound = pages.compactMap(\.next).min()
        var devices = pages.flatMap(\.devices)
        if let bound { devices.removeAll { $0.deviceId > bound } }
        devices.sort { $0.deviceId < $1.deviceId }
        var next = bound
        if devices.count > limit {
            devices.removeSubrange(limit...)
            next = devices.last?.deviceId
        }
        return FindPage(devices: devices, next: next, examined: pages.reduce(0) { $0 + $1.examined })
    }
}

extension Topics {
    /// `P/$fleet/find`: the `find` queries every worker subscribes to (PROTOCOL.md section 3.12).
    /// No device may write it (a device writes only `P/{its id}/cmd/#`, and no device id starts
    /// with `$`); the deploy ACL lets backends write it and workers read it.
    public var fleetFind: String { "\(prefix)/$fleet/find" }

    /// Whether a `find`'s reply may go to the Response Topic `topic`: a topic below
    /// `P/$reply/{name}/`, the reply space of a backend account, and no wildcard. Any other is
    /// refused and the query dropped: `find` has no reply topic of its own to fall back to, and a
    /// worker must not be made to publish into a device's topics or a worker's status.
    public func acceptsFindResponseTopic(_ topic: String) -> Bool {
        let base = prefix + "/$reply/"
        guard topic.hasPrefix(base), !Self.hasWildcard(topic) else { return false }
        let rest = topic.dropFirst(base.count).split(separator: "/", omittingEmptySubsequences: false)
        return rest.count >= 2 && !rest[0].isEmpty
    }
}

extension CommandDecoder {
    /// Decodes a `find` query: `{"prefix"?, "match": {"userInfo": {...}}?, "after"?, "limit"?,
    /// "requestId"?}`, each bounded as PROTOCOL.md section 3.12 says.
    public func decodeFind(_ payload: [UInt8]) -> Result<FindQuery, Failure> {
        decodeObject(payload) { r, requestId throws(ChimeError) in
            try r.checkKnown(["requestId", "prefix", "match", "after", "limit"])
            var query = FindQuery(requestId: requestId)
            if let prefix = try r.string("prefix", maxLength: 128) {
                guard prefix.isEmpty || DeviceID.isValid(prefix) else {
                    throw .invalid(
                        "prefix",
                        "\(quoted(prefix)) is not the beginning of a device id (A-Z a-z 0-9 _ . : @ -)"
                    )
                }
                query.prefix = prefix.isEmpty ? nil : prefix
            }
            if let after = try r.string("after", maxLength: 128) {
                guard DeviceID.isValid(after) else { throw .invalid("after", "\(quoted(after)) is not a device id") }
                query.after = after
            }
            query.match = try r.object("match").map { o throws(ChimeError) in
                try decodeMatch(FieldReader(o, path: "match."))
            }
            let limit = try r.integer("limit", in: 1...Int64(FleetFind.maximumLimit))
            query.limit = limit.map { Int($0) } ?? FleetFind.defaultLimit
            return query
        }
    }
}
