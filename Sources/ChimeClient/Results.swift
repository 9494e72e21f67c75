import ChimeProtocol
import Foundation

/// A delivery chimed published to the device (PROTOCOL.md section 5), live or from its inbox.
public struct ChimeDelivery: Sendable, Hashable {
    /// The device it was published to (`deviceId`); empty when the payload has none.
    public var deviceId: String
    /// The notification's id (`id`).
    public var identifier: String
    /// Unique per occurrence and the same on every retry of it (`fireId`): deduplicate by it,
    /// `ack` with it.
    public var fireId: String
    /// The occurrence's instant (`occurrenceDate`).
    public var occurrenceDate: Date
    /// When it was due: the occurrence less the lead time (`fireDate`).
    public var fireDate: Date
    /// When it was sent (`firedAt`).
    public var firedAt: Date
    /// The occurrence's 1-based position in its series (`occurrence`).
    public var occurrence: Int
    /// No occurrence follows (`last`).
    public var isLast: Bool
    /// Sent 1 s or more after ``fireDate`` (`late`).
    public var isLate: Bool
    /// Older missed occurrences this delivery stands for (`missed`).
    public var missed: Int
    /// Held through the device's quiet hours (`deferred`).
    public var isDeferred: Bool
    /// What it shows: title, body (the one picked of `alertBodies`), action, hasAction, sound,
    /// category, userInfo, and the badge as the device's resulting number (`.absolute`).
    public var content: NotificationContent
    /// The payload as published.
    public var json: JSONObject

    /// The badge number the device should show, if the notification sets one.
    public var badge: Int? {
        if case .absolute(let n)? = content.badge { return n }
        return nil
    }

    /// The delivery's `userInfo`, if it has one.
    public var userInfo: JSONObject? { content.userInfo }

    /// Reads a delivery payload, as published to `P/{deviceId}/notifications` or listed by `inbox`.
    ///
    /// - Parameter json: The delivery object.
    /// - Throws: `invalidReply` naming the member that is missing or wrong.
    public init(json: JSONObject) throws(ChimeClientError) {
        let r = WireReader(object: json, what: "delivery")
        deviceId = try r.string("deviceId") ?? ""
        identifier = try r.requiredString("id")
        fireId = try r.requiredString("fireId")
        occurrenceDate = try r.requiredDate("occurrenceDate")
        fireDate = try r.requiredDate("fireDate")
        firedAt = try r.requiredDate("firedAt")
        occurrence = try r.int("occurrence") ?? 1
        isLast = try r.bool("last") ?? false
        isLate = try r.bool("late") ?? false
        missed = try r.int("missed") ?? 0
        isDeferred = try r.bool("deferred") ?? false
        let badge = try r.int("badge")
        content = NotificationContent(
            title: try r.string("alertTitle"),
            body: try r.string("alertBody"),
            action: try r.string("alertAction"),
            hasAction: try r.bool("hasAction"),
            sound: try r.string("soundName"),
            category: try r.string("category"),
            badge: badge.map(Badge.absolute),
            userInfo: try r.object("userInfo")
        )
        self.json = json
    }

    init(payload: [UInt8]) throws(ChimeClientError) {
        guard case .object(let object)? = try? JSON(parsing: payload) else {
            throw ChimeClientError(.invalidReply, "a delivery that is not a JSON object")
        }
        try self.init(json: object)
    }
}

/// The device's settings and state, as `device` answers (PROTOCOL.md section 3.7).
public struct DeviceSettings: Sendable, Hashable {
    /// The device (`deviceId`).
    public var deviceId: String
    /// The IANA zone wall-clock times follow (`timeZone`); nil until set.
    public var timeZoneIdentifier: String?
    /// The badge counter, with the changes of deliveries sent and not yet acknowledged (`badge`).
    public var badge: Int
    /// The hours, in the device's zone, during which deliveries are held until they end
    /// (`quietHours`); nil for none.
    public var quietHours: QuietHours?
    /// How many notifications it holds (`pending`).
    public var pending: Int
    /// Deliveries wait in its inbox until acknowledged (`receipts`): the device's choice, or the
    /// worker's `--receipts`.
    public var receipts: Bool
    /// It keeps a delivery history (`history`): the device's choice, or the worker's `--history`;
    /// receipts imply it.
    public var history: Bool
    /// Its push registrations, as replies show them: each one's `id` (what
    /// ``PushRegistrationChange/remove(ids:)`` takes), `provider`, and the rest without secrets.
    public var pushRegistrations: [JSONObject]

    /// ``timeZoneIdentifier`` as a Foundation zone, when Foundation knows it.
    public var timeZone: TimeZone? { timeZoneIdentifier.flatMap(TimeZone.init(identifier:)) }

    init(_ status: ReplyResult.DeviceStatus) {
        deviceId = status.deviceId
        timeZoneIdentifier = status.timeZone?.identifier
        badge = status.badge
        quietHours = status.quietHours
        pending = status.pending
        receipts = status.receipts
        history = status.history
        pushRegistrations = status.push
    }
}

/// A change to the device's quiet hours.
public enum QuietHoursChange: Sendable, Hashable {
    /// Hold deliveries due inside these hours (in the device's zone) until they end.
    case set(QuietHours)
    /// No quiet hours.
    case clear

    var json: JSON {
        switch self {
        case .set(let quiet): return ["start": .string(quiet.start.description), "end": .string(quiet.end.description)]
        case .clear: return .null
        }
    }
}

/// What an `ack` did (PROTOCOL.md section 3.9).
public struct AckResult: Sendable, Hashable {
    /// The fireIds newly acknowledged (0 as well when the reply was lost and the retry was
    /// recognised as a duplicate: the first attempt acknowledged them).
    public var acknowledged: Int
    /// The fireIds the device has neither in its inbox nor in its history.
    public var unknown: [String]

    /// An acknowledgement's outcome.
    ///
    /// - Parameters:
    ///   - acknowledged: How many fireIds were newly acknowledged.
    ///   - unknown: The fireIds the device has neither in its inbox nor in its history.
    public init(acknowledged: Int, unknown: [String]) {
        self.acknowledged = acknowledged
        self.unknown = unknown
    }
}

/// The device's unacknowledged deliveries, as `inbox` gives them (PROTOCOL.md section 3.9).
public struct ChimeInbox: Sendable, Hashable {
    /// Oldest first, each as it was published.
    public var deliveries: [ChimeDelivery]
    /// How many deliveries ever left the inbox unacknowledged to make room (`dropped`).
    public var dropped: Int
}

/// One delivery in the device's history: a row of `history` (PROTOCOL.md section 3.9).
public struct DeliveryRecord: Sendable, Hashable {
    /// The delivery's ``ChimeDelivery/fireId`` (`fireId`).
    public var fireId: String
    /// The notification's id (`id`).
    public var identifier: String
    /// The occurrence's instant (`occurrenceDate`).
    public var occurrenceDate: Date
    /// When it was due: the occurrence minus its lead time (`fireDate`).
    public var fireDate: Date
    /// When it was sent (`firedAt`).
    public var firedAt: Date
    /// Sent 1 s or more after ``fireDate`` (`late`).
    public var isLate: Bool
    /// When the device acknowledged it with `ack` (`acknowledgedAt`); nil until then.
    public var acknowledgedAt: Date?
    /// Whether it waits in the inbox, was acknowledged, expired, was dropped to make room, or
    /// went to a device without receipts (`state`).
    public var state: DeliveryState
    /// What became of it on MQTT: acknowledged by the broker, or not published (push only)
    /// (`mqtt`).
    public var mqtt: MQTTOutcome
    /// How its pushes went, in one word; nil when it was pushed nowhere (`pushOutcome`).
    public var pushOutcome: PushSummary?

    init(_ row: ReplyResult.HistoryRow) {
        fireId = row.fireId
        identifier = row.id
        occurrenceDate = Wire.date(row.occurrenceDate)
        fireDate = Wire.date(row.fireDate)
        firedAt = Wire.date(row.firedAt)
        isLate = row.late
        acknowledgedAt = row.acknowledgedAt.map(Wire.date)
        state = row.state
        mqtt = row.mqtt
        pushOutcome = row.pushOutcome
    }
}

/// A change of a device's push registrations (`device`'s `push`, `addPush` or `removePush`,
/// PROTOCOL.md section 3.11).
public enum PushRegistrationChange: Sendable, Hashable {
    /// These replace every registration: for a device id that is one phone or one browser, its
    /// current token, so that one its platform replaced goes at once.
    case replace([PushRegistration])
    /// These are added (a device id shared by several phones or browsers).
    case add([PushRegistration])
    /// The registrations with these ids (``DeviceSettings/pushRegistrations``) are removed.
    case remove(ids: [String])

    var member: (key: String, value: JSON) {
        switch self {
        case .replace(let registrations): ("push", .array(registrations.map { .object($0.json) }))
        case .add(let registrations): ("addPush", .array(registrations.map { .object($0.json) }))
        case .remove(let ids): ("removePush", .array(ids.map(JSON.string)))
        }
    }
}
