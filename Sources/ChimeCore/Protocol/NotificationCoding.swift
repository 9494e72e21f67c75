/// Reads and writes a notification object (PROTOCOL.md section 2).
///
/// The same code decodes what clients send and what the journal stored, so a replayed
/// notification is the one that was accepted; `list` and the journal use ``encode(_:internal:)``.
enum NotificationCoding {
    static let fields: Set<String> = [
        "id", "fireDate", "after", "alignTo", "timeZone", "repeatInterval", "rrule", "count", "until", "exdates",
        "leadTime", "alertTitle", "alertBody", "alertBodies", "alertAction", "hasAction", "soundName", "category",
        "badge", "userInfo", "expiresAfter", "misfire", "ignoreQuietHours", "enabled", "keepAfterFiring",
    ]

    /// A single `schedule` command's members: the fields and `requestId`.
    static let fieldsAndRequestId = fields.union(["requestId"])

    static let maxSeconds: Double = 315_360_000

    /// Checks the limits on a client's `userInfo` (in a notification or a `match` selector):
    /// its serialized size and its nesting.
    static func checkUserInfo(_ userInfo: JSONObject, at field: String, limits: CommandLimits) throws(ChimeError) {
        let size = JSON.object(userInfo).bytes.count
        guard size <= limits.maxUserInfoBytes else {
            throw ChimeError(
                .payloadTooLarge,
                field: field,
                "\(field): \(size) bytes serialized, more than --max-userinfo-bytes \(limits.maxUserInfoBytes)"
            )
        }
        let depth = JSON.object(userInfo).depth
        guard depth <= CommandLimits.maximumUserInfoDepth else {
            throw .invalid(field, "nested \(depth) levels deep, more than \(CommandLimits.maximumUserInfoDepth)")
        }
    }
    static let snoozeSuffix = "~snooze"

    /// Decodes a notification. `limits` nil means the object comes from the journal: limits that
    /// may have changed since it was accepted are not applied again, and `seed` is read.
    static func decode(_ r: FieldReader, limits: CommandLimits?) throws(ChimeError) -> NotificationSpec {
        var spec = NotificationSpec()
        // The journal and snapshots also hold snoozes, whose id is a client's id plus the suffix.
        let fromClient = limits != nil
        spec.id = try r.string(
            "id",
            maxLength: CommandDecoder.maxIdLength + (fromClient ? 0 : snoozeSuffix.count),
            allowEmpty: false
        )
        // Clients may not use the suffix; snapshots store snoozes under it (`Engine.restore`).
        if fromClient, let id = spec.id, id.hasSuffix(snoozeSuffix) {
            throw .invalid(r.name("id"), "ids ending in \(snoozeSuffix) are reserved for snoozes")
        }

        spec.fireDate = try r.dateTime("fireDate")
        spec.after = try r.seconds("after", min: 0, minInclusive: false, max: maxSeconds)
        if let text = try r.string("alignTo", maxLength: 8) {
            guard let t = TimeOfDay(parsing: text) else {
                throw .invalid(r.name("alignTo"), "expected HH:MM or HH:MM:SS, got \(quoted(text))")
            }
            spec.alignTo = t
        }
        switch (spec.fireDate, spec.after) {
        case (nil, nil):
            throw ChimeError(
                .invalidArgument,
                field: r.name("fireDate"),
                "\(r.name("fireDate")): missing (give fireDate or after)"
            )
        case (.some, .some): throw .invalid(r.name("after"), "give either fireDate or after, not both")
        default: break
        }
        if spec.alignTo != nil && spec.after == nil {
            throw .invalid(r.name("alignTo"), "alignTo goes with after")
        }

        if let name = try r.string("timeZone", maxLength: 64) {
            if name == "device" {
                spec.timeZone = .device
            } else if let zone = Zone(identifier: name) {
                spec.timeZone = .named(zone)
            } else {
                throw .invalid(
                    r.name("timeZone"),
                    "\(quoted(name)) is not an IANA time zone (such as Asia/Shanghai) or \"device\""
                )
            }
        }

        if let text = try r.string("repeatInterval", maxLength: 32), text != "none" {
            guard let unit = RepeatUnit(parsing: text) else {
                let units = ["none"] + RepeatUnit.allCases.map(\.rawValue) + ["week"]
                throw .invalid(
                    r.name("repeatInterval"),
                    "\(quoted(text)) is not one of \(units.joined(separator: ", "))"
                )
            }
            spec.repeatInterval = unit
        }
        if let text = try r.string("rrule", maxLength: 1024) {
            do {
                spec.rrule = try RecurrenceRule(parsing: text)
            } catch {
                throw .invalid(r.name("rrule"), "\(error)")
            }
        }
        if spec.rrule != nil && spec.repeatInterval != nil {
            throw .invalid(r.name("rrule"), "give either repeatInterval or rrule, not both")
        }
        if let count = try r.integer("count", in: 1...1_000_000_000) { spec.count = Int(count) }
        spec.until = try r.dateTime("until")
        for key in ["count", "until"] where r.has(key) && spec.repeatInterval == nil {
            throw .invalid(
                r.name(key),
                spec.rrule != nil ? "goes inside the rrule (COUNT=, UNTIL=)" : "goes with a repeatInterval"
            )
        }
        if let values = try r.strings("exdates", maxCount: 1000, maxLength: 64) {
            var dates: [DateTimeValue] = []
            for (i, text) in values.enumerated() {
                guard let value = DateTimeValue(iso8601: text) else {
                    throw ChimeError.badDate(r.name("exdates[\(i)]"), text)
                }
                dates.append(value)
            }
            spec.exdates = dates
        }
        spec.leadTime = try r.seconds("leadTime", min: 0, minInclusive: true, max: maxSeconds)

        spec.alertTitle = try r.string("alertTitle")
        spec.alertBody = try r.string("alertBody")
        spec.alertBodies = try r.strings("alertBodies", maxCount: 1000, maxLength: 65_536)
        if spec.alertBody != nil && spec.alertBodies != nil {
            throw .invalid(r.name("alertBodies"), "give either alertBody or alertBodies, not both")
        }
        if let bodies = spec.alertBodies, bodies.isEmpty {
            throw .invalid(r.name("alertBodies"), "must hold at least one body")
        }
        spec.alertAction = try r.string("alertAction")
        spec.hasAction = try r.bool("hasAction")
        spec.soundName = try r.string("soundName")
        spec.category = try r.string("category")
        spec.badge = try decodeBadge(r)
        if let userInfo = try r.object("userInfo") {
            if let limits { try checkUserInfo(userInfo, at: r.name("userInfo"), limits: limits) }
            spec.userInfo = userInfo
        }
        spec.expiresAfter = try r.seconds("expiresAfter", min: 0, minInclusive: false, max: maxSeconds)
        if let text = try r.string("misfire", maxLength: 16) {
            guard let m = Misfire(rawValue: text) else {
                throw .invalid(r.name("misfire"), "\(quoted(text)) is not one of coalesce, skip, all")
            }
            spec.misfire = m
        }
        spec.ignoreQuietHours = try r.bool("ignoreQuietHours")
        spec.enabled = try r.bool("enabled")
        spec.keepAfterFiring = try r.bool("keepAfterFiring")
        if limits == nil, case .int(let seed)? = r.object["seed"] {
            spec.seed = UInt64(bitPattern: seed)
        }
        return spec
    }

    static func decodeBadge(_ r: FieldReader) throws(ChimeError) -> Badge? {
        guard let value = r.object["badge"] else { return nil }
        let problem = "expected an integer >= 0 or a string \"+N\" / \"-N\""
        switch value {
        case .int(let n):
            guard (0...1_000_000).contains(n) else { throw .invalid(r.name("badge"), "\(problem), got \(n)") }
            return .absolute(Int(n))
        case .string(let s):
            guard let sign = s.first, sign == "+" || sign == "-", s.count >= 2, s.count <= 8,
                s.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(s.dropFirst())
            else { throw .invalid(r.name("badge"), "\(problem), got \(quoted(s))") }
            return .delta(sign == "-" ? -n : n)
        default:
            throw .invalid(r.name("badge"), "\(problem), got \(value.typeDescription)")
        }
    }

    /// The notification as an object, fields in a fixed order, only those that are set.
    /// `internal` adds what only the journal needs (`seed`).
    static func encode(_ spec: NotificationSpec, internal: Bool = false) -> JSONObject {
        var o = JSONObject()
        if let id = spec.id { o.append("id", .string(id)) }
        if let fireDate = spec.fireDate { o.append("fireDate", .string(fireDate.description)) }
        if let after = spec.after { o.append("after", seconds(after)) }
        if let alignTo = spec.alignTo { o.append("alignTo", .string(alignTo.description)) }
        switch spec.timeZone {
        case .device: o.append("timeZone", "device")
        case .named(let zone): o.append("timeZone", .string(zone.identifier))
        case nil: break
        }
        if let unit = spec.repeatInterval { o.append("repeatInterval", .string(unit.rawValue)) }
        if let rrule = spec.rrule { o.append("rrule", .string(rrule.description)) }
        if let count = spec.count { o.append("count", .int(Int64(count))) }
        if let until = spec.until { o.append("until", .string(until.description)) }
        if let exdates = spec.exdates { o.append("exdates", .array(exdates.map { .string($0.description) })) }
        if let leadTime = spec.leadTime { o.append("leadTime", seconds(leadTime)) }
        if let v = spec.alertTitle { o.append("alertTitle", .string(v)) }
        if let v = spec.alertBody { o.append("alertBody", .string(v)) }
        if let v = spec.alertBodies { o.append("alertBodies", .array(v.map(JSON.string))) }
        if let v = spec.alertAction { o.append("alertAction", .string(v)) }
        if let v = spec.hasAction { o.append("hasAction", .bool(v)) }
        if let v = spec.soundName { o.append("soundName", .string(v)) }
        if let v = spec.category { o.append("category", .string(v)) }
        switch spec.badge {
        case .absolute(let n): o.append("badge", .int(Int64(n)))
        case .delta(let d): o.append("badge", .string(d < 0 ? "-\(-d)" : "+\(d)"))
        case nil: break
        }
        if let v = spec.userInfo { o.append("userInfo", .object(v)) }
        if let v = spec.expiresAfter { o.append("expiresAfter", seconds(v)) }
        if let v = spec.misfire { o.append("misfire", .string(v.rawValue)) }
        if let v = spec.ignoreQuietHours { o.append("ignoreQuietHours", .bool(v)) }
        if let v = spec.enabled { o.append("enabled", .bool(v)) }
        if let v = spec.keepAfterFiring { o.append("keepAfterFiring", .bool(v)) }
        if `internal` { o.append("seed", .int(Int64(bitPattern: spec.seed))) }
        return o
    }

    /// Milliseconds shown as seconds: an integer when whole.
    static func seconds(_ milliseconds: Int64) -> JSON {
        milliseconds % 1000 == 0 ? .int(milliseconds / 1000) : .double(Double(milliseconds) / 1000)
    }
}
