/// The fields of a notification object (PROTOCOL.md section 2): the one declaration of them.
///
/// Why a descriptor enum: its cases are the wire names, in the order in which notifications are
/// written and read, and each per-field property below is an exhaustive `switch`, so a new case
/// does not compile until every place that handles fields says what to do with it. (A table of
/// key paths or closures would say the same, but each field's type differs and the content and
/// decoder run for every notification recovered; a `switch` costs nothing.) Derived from it:
///
/// - the decoder: the members a notification may have (`unknown_field` otherwise), and the order
///   in which they are read and checked (``NotificationCoding/decode(_:limits:)``);
/// - the encoder that `list`, the journal and the byte quota use (``NotificationCoding/encode(_:internal:)``);
/// - the stored form's content bytes, which deliveries carry as they are (``storage``), the
///   fields a snooze keeps (``keptBySnooze``) and the snapshot codec of the rarely set fields
///   (`SpecExtras.json`).
///
/// Where deriving is awkward a test checks instead (`Tests/ChimeProtocolTests/NotificationFieldTests.swift`):
/// the compact ``StoredNotification`` and its `SpecExtras` (a million of them are held on a busy
/// worker, so their layout is written by hand), and the delivery payload (written straight into
/// bytes). The test sets each field, alone and all at once, and follows it from the decoder
/// through the journal, the stored form, a snapshot and `list` to the delivery; it also fails
/// when ``NotificationSpec`` gains a property that is not a case here. The CLI maps every case
/// (`ListCommand.column(for:)`, `NotificationFlags.flag(for:)`), checked by the CLI's tests.
public enum NotificationField: String, CaseIterable, Hashable, Sendable {
    case id, fireDate, after, alignTo, timeZone, repeatInterval, rrule, count, until, exdates, leadTime
    case alertTitle, alertBody, alertBodies, alertAction, hasAction, soundName, category, threadId, interruptionLevel
    case badge, userInfo
    case expiresAfter, misfire, ignoreQuietHours, enabled, keepAfterFiring, channels

    /// The member's name in a notification object.
    public var wireName: String { rawValue }

    /// Where the engine's stored form keeps a field once the notification is accepted.
    package enum Storage: Hashable, Sendable {
        case id
        case fireDate
        /// `after` and `alignTo`: resolved into the fire date, not kept.
        case resolvedIntoFireDate
        case zone
        case repeatUnit
        case leadTime
        /// In the content bytes that deliveries carry as they are, in ``allCases`` order
        /// (`userInfo` last, so that its text is the tail of the bytes).
        case content
        case badge
        /// In the out-of-line extras, which snapshots store as a JSON object.
        case extras
    }

    package var storage: Storage {
        switch self {
        case .id: return .id
        case .fireDate: return .fireDate
        case .after, .alignTo: return .resolvedIntoFireDate
        case .timeZone: return .zone
        case .repeatInterval: return .repeatUnit
        case .leadTime: return .leadTime
        case .alertTitle, .alertBody, .alertAction, .hasAction, .soundName, .category, .threadId, .interruptionLevel,
            .userInfo:
            return .content
        case .badge: return .badge
        case .rrule, .count, .until, .exdates, .alertBodies, .expiresAfter, .misfire, .ignoreQuietHours, .enabled,
            .keepAfterFiring, .channels:
            return .extras
        }
    }

    /// The fields in the content bytes, in their order.
    package static let content = allCases.filter { $0.storage == .content }
    /// The fields in the extras.
    package static let extras = allCases.filter { $0.storage == .extras }

    /// Whether a snooze (PROTOCOL.md section 3.6) keeps the field of the notification it repeats:
    /// it keeps what is delivered and how, and drops the schedule (its id and fire date are its own).
    package var keptBySnooze: Bool {
        switch self {
        case .alertTitle, .alertBody, .alertBodies, .alertAction, .hasAction, .soundName, .category, .threadId,
            .interruptionLevel, .badge, .userInfo, .expiresAfter, .misfire, .ignoreQuietHours, .channels:
            return true
        case .id, .fireDate, .after, .alignTo, .timeZone, .repeatInterval, .rrule, .count, .until, .exdates,
            .leadTime, .enabled, .keepAfterFiring:
            return false
        }
    }

    /// Whether the field says when occurrences are (a trigger's, in Apple's terms) rather than
    /// what is shown and how: changing it (`update`) starts the schedule again from the time of the
    /// change; changing any other field keeps its place in the series.
    public var isTrigger: Bool {
        switch self {
        case .fireDate, .after, .alignTo, .timeZone, .repeatInterval, .rrule, .count, .until, .exdates, .leadTime:
            return true
        case .id, .alertTitle, .alertBody, .alertBodies, .alertAction, .hasAction, .soundName, .category, .threadId,
            .interruptionLevel, .badge, .userInfo, .expiresAfter, .misfire, .ignoreQuietHours, .enabled,
            .keepAfterFiring, .channels:
            return false
        }
    }

    /// The fields that cannot be given with this one: an `update` that sets this field drops them
    /// from the notification.
    package var excludes: [NotificationField] {
        switch self {
        case .fireDate: return [.after, .alignTo]
        case .after: return [.fireDate]
        case .repeatInterval: return [.rrule]
        case .rrule: return [.repeatInterval, .count, .until]
        case .alertBody: return [.alertBodies]
        case .alertBodies: return [.alertBody]
        case .id, .alignTo, .timeZone, .count, .until, .exdates, .leadTime, .alertTitle, .alertAction, .hasAction,
            .soundName, .category, .threadId, .interruptionLevel, .badge, .userInfo, .expiresAfter, .misfire,
            .ignoreQuietHours, .enabled, .keepAfterFiring, .channels:
            return []
        }
    }

    /// The member a delivery (PROTOCOL.md section 5) carries for the field, if any: the content
    /// fields as given, one of `alertBodies` as `alertBody`, and `badge` as the device's counter.
    public var deliveredAs: String? {
        switch self {
        // `badge` is delivered as the counter it leaves, not as given.
        case .id, .alertTitle, .alertBody, .alertAction, .hasAction, .soundName, .category, .threadId,
            .interruptionLevel, .badge, .userInfo:
            return wireName
        case .alertBodies: return NotificationField.alertBody.wireName
        case .fireDate, .after, .alignTo, .timeZone, .repeatInterval, .rrule, .count, .until, .exdates, .leadTime,
            .expiresAfter, .misfire, .ignoreQuietHours, .enabled, .keepAfterFiring, .channels:
            return nil
        }
    }

    /// The field's value as a notification object shows it; nil when it is not set.
    package func value(of spec: NotificationSpec) -> JSON? {
        switch self {
        case .id: return spec.id.map(JSON.string)
        case .fireDate: return spec.fireDate.map { .string($0.description) }
        case .after: return spec.after.map(NotificationCoding.seconds)
        case .alignTo: return spec.alignTo.map { .string($0.description) }
        case .timeZone:
            switch spec.timeZone {
            case .device: return "device"
            case .named(let zone): return .string(zone.identifier)
            case nil: return nil
            }
        case .repeatInterval: return spec.repeatInterval.map { .string($0.rawValue) }
        case .rrule: return spec.rrule.map { .string($0.description) }
        case .count: return spec.count.map { .int(Int64($0)) }
        case .until: return spec.until.map { .string($0.description) }
        case .exdates: return spec.exdates.map { .array($0.map { .string($0.description) }) }
        case .leadTime: return spec.leadTime.map(NotificationCoding.seconds)
        case .alertTitle: return spec.alertTitle.map(JSON.string)
        case .alertBody: return spec.alertBody.map(JSON.string)
        case .alertBodies: return spec.alertBodies.map { .array($0.map(JSON.string)) }
        case .alertAction: return spec.alertAction.map(JSON.string)
        case .hasAction: return spec.hasAction.map(JSON.bool)
        case .soundName: return spec.soundName.map(JSON.string)
        case .category: return spec.category.map(JSON.string)
        case .threadId: return spec.threadId.map(JSON.string)
        case .interruptionLevel: return spec.interruptionLevel.map { .string($0.rawValue) }
        case .badge:
            switch spec.badge {
            case .absolute(let n): return .int(Int64(n))
            case .delta(let d): return .string(d < 0 ? "-\(-d)" : "+\(d)")
            case nil: return nil
            }
        case .userInfo: return spec.userInfo.map(JSON.object)
        case .expiresAfter: return spec.expiresAfter.map(NotificationCoding.seconds)
        case .misfire: return spec.misfire.map { .string($0.rawValue) }
        case .ignoreQuietHours: return spec.ignoreQuietHours.map(JSON.bool)
        case .enabled: return spec.enabled.map(JSON.bool)
        case .keepAfterFiring: return spec.keepAfterFiring.map(JSON.bool)
        case .channels: return spec.channels.map { .string($0.rawValue) }
        }
    }

    /// Unsets the field.
    package func clear(in spec: inout NotificationSpec) {
        switch self {
        case .id: spec.id = nil
        case .fireDate: spec.fireDate = nil
        case .after: spec.after = nil
        case .alignTo: spec.alignTo = nil
        case .timeZone: spec.timeZone = nil
        case .repeatInterval: spec.repeatInterval = nil
        case .rrule: spec.rrule = nil
        case .count: spec.count = nil
        case .until: spec.until = nil
        case .exdates: spec.exdates = nil
        case .leadTime: spec.leadTime = nil
        case .alertTitle: spec.alertTitle = nil
        case .alertBody: spec.alertBody = nil
        case .alertBodies: spec.alertBodies = nil
        case .alertAction: spec.alertAction = nil
        case .hasAction: spec.hasAction = nil
        case .soundName: spec.soundName = nil
        case .category: spec.category = nil
        case .threadId: spec.threadId = nil
        case .interruptionLevel: spec.interruptionLevel = nil
        case .badge: spec.badge = nil
        case .userInfo: spec.userInfo = nil
        case .expiresAfter: spec.expiresAfter = nil
        case .misfire: spec.misfire = nil
        case .ignoreQuietHours: spec.ignoreQuietHours = nil
        case .enabled: spec.enabled = nil
        case .keepAfterFiring: spec.keepAfterFiring = nil
        case .channels: spec.channels = nil
        }
    }

    /// Where a notification object being read comes from: what differs is which bounds apply.
    package enum Source {
        /// A client's command: every limit applies.
        case client(CommandLimits)
        /// A journal record or the content a stored notification keeps: it was accepted once, so
        /// the limits that may have changed since (`--max-userinfo-bytes`) are not applied again.
        case journal
        /// The extras of a snapshot entry: `expiresAfter` in milliseconds, and no bounds beyond
        /// what the stored form holds, so that whatever an earlier chimed stored still reads.
        case snapshot

        package var limits: CommandLimits? {
            if case .client(let limits) = self { return limits }
            return nil
        }
    }

    static let maxSeconds: Double = 315_360_000

    /// Reads the field into `spec`: its type and its own bounds. What involves other fields is
    /// checked by ``NotificationCoding/decode(_:limits:)``.
    package func decode(_ r: FieldReader, into spec: inout NotificationSpec, from source: Source) throws(ChimeError) {
        let snapshot: Bool
        if case .snapshot = source { snapshot = true } else { snapshot = false }
        switch self {
        case .id:
            // The journal and snapshots also hold snoozes, whose id is a client's id plus the suffix.
            let fromClient = source.limits != nil
            spec.id = try r.string(
                "id",
                maxLength: CommandDecoder.maxIdLength + (fromClient ? 0 : NotificationCoding.snoozeSuffix.count),
                allowEmpty: false
            )
            // Clients may not use the suffix; snapshots store snoozes under it (`Engine.restore`).
            if fromClient, let id = spec.id, id.hasSuffix(NotificationCoding.snoozeSuffix) {
                throw .invalid(
                    r.name("id"),
                    "ids ending in \(NotificationCoding.snoozeSuffix) are reserved for snoozes"
                )
            }
        case .fireDate:
            spec.fireDate = try r.dateTime("fireDate")
        case .after:
            spec.after = try r.seconds("after", min: 0, minInclusive: false, max: Self.maxSeconds)
        case .alignTo:
            if let text = try r.string("alignTo", maxLength: 8) {
                guard let t = TimeOfDay(parsing: text) else {
                    throw .invalid(r.name("alignTo"), "expected HH:MM or HH:MM:SS, got \(quoted(text))")
                }
                spec.alignTo = t
            }
        case .timeZone:
            if let name = try r.string("timeZone", maxLength: 64) {
                if name == "device" {
                    spec.timeZone = .device
                } else if source.limits == nil {
                    // Recorded: accepted once, so read whatever this machine's zones are.
                    spec.timeZone = .named(Zone(recorded: name))
                } else if let zone = Zone(identifier: name) {
                    spec.timeZone = .named(zone)
                } else {
                    throw .invalid(
                        r.name("timeZone"),
                        "\(quoted(name)) is not an IANA time zone (such as Asia/Shanghai) or \"device\""
                    )
                }
            }
        case .repeatInterval:
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
        case .rrule:
            if let text = try r.string("rrule", maxLength: snapshot ? 65_536 : 1024) {
                do {
                    spec.rrule = try RecurrenceRule(parsing: text)
                } catch {
                    throw .invalid(r.name("rrule"), "\(error)")
                }
            }
        case .count:
            let most: Int64 = snapshot ? Int64(Int32.max) : 1_000_000_000
            if let count = try r.integer("count", in: 1...most) { spec.count = Int(count) }
        case .until:
            spec.until = try r.dateTime("until")
        case .exdates:
            if let values = try r.strings("exdates", maxCount: snapshot ? .max : 1000, maxLength: 64) {
                var dates: [DateTimeValue] = []
                dates.reserveCapacity(values.count)
                for (i, text) in values.enumerated() {
                    guard let value = DateTimeValue(iso8601: text) else {
                        throw ChimeError.badDate(r.name("exdates[\(i)]"), text)
                    }
                    dates.append(value)
                }
                spec.exdates = dates
            }
        case .leadTime:
            spec.leadTime = try r.seconds("leadTime", min: 0, minInclusive: true, max: Self.maxSeconds)
        case .alertTitle:
            spec.alertTitle = try r.string("alertTitle")
        case .alertBody:
            spec.alertBody = try r.string("alertBody")
        case .alertBodies:
            spec.alertBodies = try r.strings(
                "alertBodies",
                maxCount: snapshot ? .max : 1000,
                maxLength: snapshot ? .max : 65_536
            )
        case .alertAction:
            spec.alertAction = try r.string("alertAction")
        case .hasAction:
            spec.hasAction = try r.bool("hasAction")
        case .soundName:
            spec.soundName = try r.string("soundName")
        case .category:
            spec.category = try r.string("category")
        case .threadId:
            spec.threadId = try r.string("threadId", maxLength: 256)
        case .interruptionLevel:
            if let text = try r.string("interruptionLevel", maxLength: 32) {
                guard let level = InterruptionLevel(rawValue: text) else {
                    let names = InterruptionLevel.allCases.map(\.rawValue).joined(separator: ", ")
                    throw .invalid(r.name("interruptionLevel"), "\(quoted(text)) is not one of \(names)")
                }
                spec.interruptionLevel = level
            }
        case .badge:
            spec.badge = try NotificationCoding.decodeBadge(r)
        case .userInfo:
            if let userInfo = try r.object("userInfo") {
                if let limits = source.limits {
                    try NotificationCoding.checkUserInfo(userInfo, at: r.name("userInfo"), limits: limits)
                }
                spec.userInfo = userInfo
            }
        case .expiresAfter:
            if snapshot {
                spec.expiresAfter = try r.integer("expiresAfter", in: 1...Int64.max)
            } else {
                spec.expiresAfter = try r.seconds("expiresAfter", min: 0, minInclusive: false, max: Self.maxSeconds)
            }
        case .misfire:
            if let text = try r.string("misfire", maxLength: 16) {
                guard let m = Misfire(rawValue: text) else {
                    throw .invalid(r.name("misfire"), "\(quoted(text)) is not one of coalesce, skip, all")
                }
                spec.misfire = m
            }
        case .ignoreQuietHours:
            spec.ignoreQuietHours = try r.bool("ignoreQuietHours")
        case .enabled:
            spec.enabled = try r.bool("enabled")
        case .keepAfterFiring:
            spec.keepAfterFiring = try r.bool("keepAfterFiring")
        case .channels:
            if let text = try r.string("channels", maxLength: 16) {
                guard let channels = Channels(rawValue: text) else {
                    throw .invalid(r.name("channels"), "\(quoted(text)) is not one of all, mqtt, push")
                }
                spec.channels = channels
            }
        }
    }
}
