import ChimeProtocol
import Foundation

/// A delivery chimed published to the device (PROTOCOL.md section 5), live or from its inbox.
public struct ChimeDelivery: Sendable, Hashable {
    public var deviceId: String
    /// The notification's id.
    public var identifier: String
    /// Unique per occurrence and the same on every retry of it: deduplicate by it, `ack` with it.
    public var fireId: String
    /// The occurrence's instant.
    public var occurrenceDate: Date
    /// When it was due: the occurrence less the lead time.
    public var fireDate: Date
    /// When it was sent.
    public var firedAt: Date
    /// The occurrence's 1-based position in its series.
    public var occurrence: Int
    /// No occurrence follows.
    public var isLast: Bool
    /// Sent 1 s or more after ``fireDate``.
    public var isLate: Bool
    /// Older missed occurrences this delivery stands for.
    public var missed: Int
    /// Held through the device's quiet hours.
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

    /// Reads a delivery payload.
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

/// The device's settings and state (PROTOCOL.md section 3.7).
public struct DeviceSettings: Sendable, Hashable {
    public var deviceId: String
    /// The IANA zone wall-clock times follow; nil until set.
    public var timeZoneIdentifier: String?
    /// The badge counter, with the changes of deliveries sent and not yet acknowledged.
    public var badge: Int
    public var quietHours: QuietHours?
    /// How many notifications it holds.
    public var pending: Int
    /// Deliveries wait in its inbox until acknowledged.
    public var receipts: Bool
    /// It keeps a delivery history.
    public var history: Bool

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

/// What an `ack` did.
public struct AckResult: Sendable, Hashable {
    /// The fireIds newly acknowledged (0 as well when the reply was lost and the retry was
    /// recognised as a duplicate: the first attempt acknowledged them).
    public var acknowledged: Int
    /// The fireIds the device has neither in its inbox nor in its history.
    public var unknown: [String]

    public init(acknowledged: Int, unknown: [String]) {
        self.acknowledged = acknowledged
        self.unknown = unknown
    }
}

/// The device's unacknowledged deliveries (PROTOCOL.md section 3.9).
public struct ChimeInbox: Sendable, Hashable {
    /// Oldest first, each as it was published.
    public var deliveries: [ChimeDelivery]
    /// Deliveries that ever left the inbox unacknowledged to make room.
    public var dropped: Int
}

/// One delivery in the device's history.
public struct DeliveryRecord: Sendable, Hashable {
    public var fireId: String
    /// The notification's id.
    public var identifier: String
    public var occurrenceDate: Date
    /// When it was due: the occurrence minus its lead time.
    public var fireDate: Date
    public var firedAt: Date
    public var isLate: Bool
    public var acknowledgedAt: Date?
    public var state: DeliveryState
    /// What became of it on MQTT: acknowledged by the broker, or not published (push only).
    public var mqtt: MQTTOutcome
    /// How its pushes went, in one word; nil when it was pushed nowhere.
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
