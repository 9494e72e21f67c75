/// Reads and writes a notification object (PROTOCOL.md section 2).
///
/// The same code decodes what clients send and what the journal stored, so a replayed
/// notification is the one that was accepted; `list` and the journal use ``encode(_:internal:)``.
package enum NotificationCoding {
    /// Every member a notification object may have (``NotificationField``).
    package static let fields = Set(NotificationField.allCases.map(\.wireName))

    /// Each field's bit in a mask of the fields an object has, by its member's name: nil for a
    /// member that is no field.
    ///
    /// The names are looked up by their length, then compared: a few comparisons of short strings
    /// cost less than hashing the name, which a dictionary or set would do for every member of
    /// every notification.
    @inline(__always)
    package static func fieldBit(_ name: String) -> UInt64? {
        let length = name.utf8.count
        guard length < fieldsByLength.count else { return nil }
        for (wireName, bit) in fieldsByLength[length] where wireName == name { return bit }
        return nil
    }

    private static let fieldsByLength: [[(String, UInt64)]] = {
        var table: [[(String, UInt64)]] = []
        for (i, field) in NotificationField.allCases.enumerated() {
            let length = field.wireName.utf8.count
            while table.count <= length { table.append([]) }
            table[length].append((field.wireName, 1 << UInt64(i)))
        }
        return table
    }()

    /// A single `schedule` command's members: the fields and `requestId`.
    package static let fieldsAndRequestId = fields.union(["requestId"])

    /// What a `list` row adds to the fields (the notification's state, PROTOCOL.md section 3.4):
    /// `schedule` and `update` accept and ignore these, so that a row sent back is read-modify-write.
    package static let listedState: Set<String> = [
        "nextFireDate", "firedCount", "lastFiredAt", "createdAt", "updatedAt",
    ]

    /// UILocalNotification's names accepted for Chime's own (PROTOCOL.md section 2, "Porting names").
    package static let aliases: [String: NotificationField] = ["applicationIconBadgeNumber": .badge]

    /// UNNotificationContent's and UNNotificationRequest's names, which are not accepted (their
    /// meaning differs a little, or there is no such field) but hinted at in `unknown_field`.
    package static let portingHints = [
        "title": "alertTitle", "body": "alertBody", "sound": "soundName", "categoryIdentifier": "category",
        "identifier": "id", "repeats": "repeatInterval", "timeInterval": "after",
    ]

    /// The members of a notification object as the decoder reads them: aliases renamed to Chime's
    /// names, and `list`'s state members left out.
    package static func canonical(_ r: FieldReader) throws(ChimeError) -> FieldReader {
        guard r.object.members.contains(where: { listedState.contains($0.key) || aliases[$0.key] != nil }) else {
            return r
        }
        var o = JSONObject()
        for (key, value) in r.object {
            if listedState.contains(key) { continue }
            guard let field = aliases[key] else {
                o.append(key, value)
                continue
            }
            if r.has(field.wireName) {
                throw .invalid(r.name(key), "give either \(field.wireName) or \(key), not both")
            }
            // Apple's property is the number itself; a change is Chime's "+N" / "-N".
            guard case .int(let n) = value, n >= 0 else {
                throw .invalid(
                    r.name(key),
                    "expected an integer >= 0 (the badge number; for a change give badge \"+N\" or \"-N\"), got \(value.typeDescription)"
                )
            }
            o.append(field.wireName, .int(n))
        }
        return FieldReader(o, path: r.path)
    }

    /// Checks the limits on a client's `userInfo` (in a notification or a `match` selector):
    /// its serialized size and its nesting.
    package static func checkUserInfo(
        _ userInfo: JSONObject,
        at field: String,
        limits: CommandLimits
    ) throws(ChimeError) {
        let size = JSON.object(userInfo).byteCount
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
    package static let snoozeSuffix = "~snooze"

    /// Decodes a notification. `limits` nil means the object comes from the journal: limits that
    /// may have changed since it was accepted are not applied again, and `seed` is read.
    ///
    /// Fields are read in ``NotificationField`` order; a rule that involves several fields is
    /// checked once the last of them is read, so that the first problem reported is the same
    /// whichever fields are wrong.
    package static func decode(_ r: FieldReader, limits: CommandLimits?) throws(ChimeError) -> NotificationSpec {
        var spec = NotificationSpec()
        let source: NotificationField.Source = limits.map { .client($0) } ?? .journal
        // Each field's decoder reads only its own member, and leaves the spec as it is without
        // one: which are there is found in one pass over the members, not one search a field.
        var present: UInt64 = 0
        for member in r.object.members {
            if let bit = fieldBit(member.key) { present |= bit }
        }
        for (i, field) in NotificationField.allCases.enumerated() {
            if present & (1 << UInt64(i)) != 0 { try field.decode(r, into: &spec, from: source) }
            switch field {
            case .alignTo, .rrule, .until, .alertBodies: try check(after: field, spec, r)
            default: break
            }
        }
        if limits == nil, case .int(let seed)? = r.object["seed"] {
            spec.seed = UInt64(bitPattern: seed)
        }
        return spec
    }

    /// The rules between fields that can be checked once `field` has been read (``decode(_:limits:)``
    /// calls it after the fields it names here).
    private static func check(
        after field: NotificationField,
        _ spec: borrowing NotificationSpec,
        _ r: FieldReader
    )
        throws(ChimeError)
    {
        switch field {
        case .alignTo:
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
        case .rrule:
            if spec.rrule != nil && spec.repeatInterval != nil {
                throw .invalid(r.name("rrule"), "give either repeatInterval or rrule, not both")
            }
        case .until:
            for key in ["count", "until"] where r.has(key) && spec.repeatInterval == nil {
                throw .invalid(
                    r.name(key),
                    spec.rrule != nil ? "goes inside the rrule (COUNT=, UNTIL=)" : "goes with a repeatInterval"
                )
            }
        case .alertBodies:
            if spec.alertBody != nil && spec.alertBodies != nil {
                throw .invalid(r.name("alertBodies"), "give either alertBody or alertBodies, not both")
            }
            if let bodies = spec.alertBodies, bodies.isEmpty {
                throw .invalid(r.name("alertBodies"), "must hold at least one body")
            }
        default:
            break
        }
    }

    package static func decodeBadge(_ r: FieldReader) throws(ChimeError) -> Badge? {
        guard let value = r.object["badge"] else { return nil }
        let problem = "expected an integer >= 0 or a string \"+N\" / \"-N\""
        switch value {
        case .int(let n):
            guard (0...Int64(Badge.maximum)).contains(n) else {
                throw .invalid(r.name("badge"), "\(problem) up to \(Badge.maximum), got \(n)")
            }
            return .absolute(Int(n))
        case .string(let s):
            guard let sign = s.first, sign == "+" || sign == "-", s.count >= 2, s.count <= 8,
                s.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(s.dropFirst()), n <= Badge.maximum
            else { throw .invalid(r.name("badge"), "\(problem) up to \(Badge.maximum), got \(quoted(s))") }
            return .delta(sign == "-" ? -n : n)
        default:
            throw .invalid(r.name("badge"), "\(problem), got \(value.typeDescription)")
        }
    }

    /// The notification as an object, fields in ``NotificationField`` order, only those that are
    /// set. `internal` adds what only the journal needs (`seed`).
    package static func encode(_ spec: NotificationSpec, internal: Bool = false) -> JSONObject {
        var o = JSONObject()
        for field in NotificationField.allCases {
            if let value = field.value(of: spec) { o.append(field.wireName, value) }
        }
        if `internal` { o.append("seed", .int(Int64(bitPattern: spec.seed))) }
        return o
    }

    /// ``encode(_:internal:)`` written straight into bytes, the same ones `JSON.object(encode(spec)).bytes`
    /// holds, without building the object: for the journal and the byte quota, which see every
    /// notification scheduled.
    package static func write(_ spec: NotificationSpec, internal: Bool = false, to out: inout some JSONOutput) {
        out.append(UInt8(ascii: "{"))
        var first = true
        for field in NotificationField.allCases {
            guard let value = field.value(of: spec) else { continue }
            if first { first = false } else { out.append(UInt8(ascii: ",")) }
            JSON.writeString(field.wireName, to: &out)
            out.append(UInt8(ascii: ":"))
            value.write(to: &out)
        }
        if `internal` { out.appendMember("seed", .int(Int64(bitPattern: spec.seed)), first: &first) }
        out.append(UInt8(ascii: "}"))
    }

    /// The content fields as a stored notification keeps them (``NotificationField/content``, each
    /// written `,"key":value`, `userInfo` last) appended to `out`.
    /// - Returns: where `userInfo`'s value starts in `out`; -1 without one.
    package static func writeContent(_ spec: NotificationSpec, to out: inout [UInt8]) -> Int32 {
        var userInfoStart: Int32 = -1
        for field in NotificationField.content {
            guard let value = field.value(of: spec) else { continue }
            out.append(UInt8(ascii: ","))
            JSON.writeString(field.wireName, to: &out)
            out.append(UInt8(ascii: ":"))
            if field == .userInfo { userInfoStart = Int32(out.count) }
            value.write(to: &out)
        }
        return userInfoStart
    }

    /// Writes `spec` once for everything that needs it when it is scheduled: its listed form (the
    /// byte quota counts it), which the journal record is with its seed added, and its content as
    /// the engine stores it. The same bytes as ``write(_:internal:to:)`` and ``writeContent(_:to:)``.
    package static func encoded(_ spec: NotificationSpec) -> EncodedNotification {
        var listed: [UInt8] = []
        listed.reserveCapacity(256)
        var content: [UInt8] = []
        var userInfoStart: Int32 = -1
        listed.append(UInt8(ascii: "{"))
        for field in NotificationField.allCases {
            // Every notification has a fireDate: written straight, the others through their value
            // (the same text: its description needs no escaping).
            let value = field == .fireDate ? nil : field.value(of: spec)
            guard value != nil || (field == .fireDate && spec.fireDate != nil) else { continue }
            if listed.count > 1 { listed.append(UInt8(ascii: ",")) }
            let member = listed.count
            JSON.writeString(field.wireName, to: &listed)
            listed.append(UInt8(ascii: ":"))
            let valueStart = listed.count
            if let value {
                value.write(to: &listed)
            } else if let date = spec.fireDate {
                listed.append(UInt8(ascii: "\""))
                date.write(into: &listed)
                listed.append(UInt8(ascii: "\""))
            }
            guard field.storage == .content else { continue }
            content.append(UInt8(ascii: ","))
            if field == .userInfo { userInfoStart = Int32(content.count + valueStart - member) }
            content.append(contentsOf: listed[member...])
        }
        listed.append(UInt8(ascii: "}"))
        return EncodedNotification(listed: listed, content: content, userInfoStart: userInfoStart)
    }

    /// The journal's form of a notification: ``write(_:internal:to:)`` with `internal`, from its
    /// encoding when it has one.
    package static func writeRecord(_ n: ResolvedNotification, to out: inout [UInt8]) {
        guard let encoded = n.encoded else {
            write(n.spec, internal: true, to: &out)
            return
        }
        out.append(contentsOf: encoded.listed.dropLast())
        var first = false
        out.appendMember("seed", .int(Int64(bitPattern: n.spec.seed)), first: &first)
        out.append(UInt8(ascii: "}"))
    }

    /// Milliseconds shown as seconds: an integer when whole.
    package static func seconds(_ milliseconds: Int64) -> JSON {
        milliseconds % 1000 == 0 ? .int(milliseconds / 1000) : .double(Double(milliseconds) / 1000)
    }
}

/// A notification written once when it is scheduled (``NotificationCoding/encoded(_:)``).
public struct EncodedNotification: Sendable {
    /// As `list` shows it: what `--max-bytes-per-device` counts.
    package let listed: [UInt8]
    /// The content fields as the engine stores them.
    package let content: [UInt8]
    /// Where `userInfo`'s value starts in `content`; -1 without one.
    package let userInfoStart: Int32
}
