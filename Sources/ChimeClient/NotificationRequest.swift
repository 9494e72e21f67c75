import ChimeProtocol
import Foundation

/// A notification to schedule, as `UNNotificationRequest`: an identifier, what it shows, and when.
///
/// It is sent as one notification object (PROTOCOL.md section 2). Adding a request whose
/// identifier exists replaces that notification.
public struct NotificationRequest: Sendable, Hashable {
    /// The notification's id on its device (`id`, 1 to 128 characters).
    public var identifier: String
    /// What it shows and how it is delivered.
    public var content: NotificationContent
    /// When it fires.
    public var trigger: NotificationTrigger

    /// A request to schedule.
    ///
    /// - Parameters:
    ///   - identifier: The notification's id on its device, 1 to 128 characters.
    ///   - content: What it shows and how it is delivered.
    ///   - trigger: When it fires.
    public init(identifier: String, content: NotificationContent, trigger: NotificationTrigger) {
        self.identifier = identifier
        self.content = content
        self.trigger = trigger
    }

    /// The notification object the request is sent as (PROTOCOL.md section 2), fields in the
    /// protocol's order. `now` only dates the DTSTART of a calendar trigger's rule.
    func notificationObject(now: Date) throws(ChimeClientError) -> (object: JSONObject, firstOccurrenceOnly: Bool) {
        let schedule = try trigger.scheduleFields(now: now)
        return (
            try Self.object(identifier: identifier, content: content, schedule: schedule.object),
            schedule.firstOccurrenceOnly
        )
    }

    /// `id`, then the schedule and content fields, in ``NotificationField`` order.
    static func object(
        identifier: String?,
        content: NotificationContent,
        schedule: JSONObject
    ) throws(ChimeClientError) -> JSONObject {
        var object = JSONObject()
        for field in NotificationField.allCases {
            let value: JSON?
            if field == .id {
                value = identifier.map(JSON.string)
            } else if field.isTrigger {
                value = schedule[field.wireName]
            } else {
                value = try content.value(of: field)
            }
            if let value { object.append(field.wireName, value) }
        }
        return object
    }
}

/// Which notifications of the device a call acts on: a selector of PROTOCOL.md section 3.
public enum NotificationSelector: Sendable, Hashable {
    /// These ids (`ids`, at most 1000).
    case identifiers([String])
    /// Those whose `userInfo` has every key given, with an equal JSON value (`match`).
    case userInfo(JSONObject)
    /// Every notification of the device (`all`).
    case all

    /// The selector's members in a command.
    var json: JSONObject {
        switch self {
        case .identifiers(let ids): return ["ids": .array(ids.map(JSON.string))]
        case .userInfo(let userInfo): return ["match": ["userInfo": .object(userInfo)]]
        case .all: return ["all": true]
        }
    }
}

/// A notification the device holds, as `list` shows it: the request as scheduled and its state.
public struct PendingNotificationRequest: Sendable, Hashable {
    /// The request as chimed keeps it.
    ///
    /// An `after` became the absolute date it resolved to, and a calendar trigger the rule it was
    /// sent as. Its content's `enabled` is false when the notification is paused, so that adding
    /// ``request`` again keeps it paused.
    public var request: NotificationRequest
    /// When the next delivery is due (lead time applied); nil when paused or finished
    /// (`nextFireDate`).
    public var nextFireDate: Date?
    /// False when paused (`enabled`).
    public var isEnabled: Bool
    /// How many deliveries it has had so far (`firedCount`).
    public var firedCount: Int
    /// When its last delivery was sent; nil before the first (`lastFiredAt`).
    public var lastFiredAt: Date?
    /// When it was first scheduled (`createdAt`); replacing or updating it keeps the date.
    public var createdAt: Date
    /// When it was last scheduled, updated, paused or resumed (`updatedAt`).
    public var updatedAt: Date

    /// The notification's identifier: ``request``'s.
    public var identifier: String { request.identifier }
    /// What it shows and how it is delivered: ``request``'s.
    public var content: NotificationContent { request.content }
    /// When it fires: ``request``'s, as chimed keeps it.
    public var trigger: NotificationTrigger { request.trigger }

    init(_ listed: ListedNotification) {
        let notification = listed.notification
        var content = NotificationContent(notification.spec)
        if !listed.enabled { content.enabled = false }
        request = NotificationRequest(
            identifier: notification.id,
            content: content,
            trigger: NotificationTrigger(notification.spec, fireDate: notification.fireDate)
        )
        nextFireDate = listed.nextFireDate.map(Wire.date)
        isEnabled = listed.enabled
        firedCount = listed.firedCount
        lastFiredAt = listed.lastFiredAt.map(Wire.date)
        createdAt = Wire.date(listed.createdAt)
        updatedAt = Wire.date(listed.updatedAt)
    }
}

/// A notification that was scheduled, and when it fires next: a row of `schedule`'s result.
public struct ScheduledNotification: Sendable, Hashable {
    /// The notification's identifier (`id`).
    public var identifier: String
    /// When its first delivery is due (lead time applied); nil when it is stored paused, or when
    /// the reply to the command was lost and its retry was recognised as a duplicate.
    ///
    /// The command was applied once either way; ``ChimeNotificationCenter/preview(identifier:count:from:)``
    /// tells when it fires.
    public var nextFireDate: Date?

    /// A scheduled notification.
    ///
    /// - Parameters:
    ///   - identifier: The notification's identifier.
    ///   - nextFireDate: When its first delivery is due, or nil.
    public init(identifier: String, nextFireDate: Date?) {
        self.identifier = identifier
        self.nextFireDate = nextFireDate
    }
}
