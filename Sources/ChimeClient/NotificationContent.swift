import ChimeProtocol
import Foundation

/// What a notification shows and how it is delivered: the `UNMutableNotificationContent` (and
/// `UILocalNotification`) properties, and Chime's delivery options. Every property is optional:
/// what is nil is not sent, and takes the protocol's default (PROTOCOL.md section 2, "What").
public struct NotificationContent: Sendable, Hashable {
    /// `alertTitle`.
    public var title: String?
    /// `alertBody`: the text shown.
    public var body: String?
    /// `alertBodies`: instead of ``body``, one picked at random for each delivery.
    public var alertBodies: [String]?
    /// `alertAction`: the action button's text.
    public var action: String?
    /// `hasAction` (true unless given).
    public var hasAction: Bool?
    /// `soundName`; `"default"` for the default sound.
    public var sound: String?
    /// `category` (`categoryIdentifier`).
    public var category: String?
    /// `threadId` (`threadIdentifier`): groups notifications on the device (APNs `thread-id`).
    public var threadIdentifier: String?
    /// `interruptionLevel`: how a push may interrupt (APNs `interruption-level`, FCM and Web Push
    /// priority).
    public var interruptionLevel: InterruptionLevel?
    /// `badge`: `.absolute(n)` sets the device's badge; `.increment(n)` / `.decrement(n)` change its
    /// counter when the notification fires (never below 0).
    public var badge: Badge?
    /// `userInfo`: any JSON object; what the selectors of remove, pause, resume and list match.
    public var userInfo: JSONObject?
    /// `expiresAfter`: a delivery more than this many seconds late is dropped, not sent.
    public var expiresAfter: TimeInterval?
    /// `misfire`: what happens to occurrences missed while the worker or broker was down.
    public var misfire: Misfire?
    /// `ignoreQuietHours`: deliver even inside the device's quiet hours.
    public var ignoreQuietHours: Bool?
    /// `enabled`: false stores the notification paused (a reminder list's on/off switch).
    public var enabled: Bool?
    /// `keepAfterFiring`: a one-shot that has fired stays listed, paused, until removed.
    public var keepAfterFiring: Bool?
    /// `channels`: MQTT and push (nil), MQTT only, or push only.
    public var channels: Channels?

    public init(
        title: String? = nil,
        body: String? = nil,
        alertBodies: [String]? = nil,
        action: String? = nil,
        hasAction: Bool? = nil,
        sound: String? = nil,
        category: String? = nil,
        badge: Badge? = nil,
        userInfo: JSONObject? = nil,
        expiresAfter: TimeInterval? = nil,
        misfire: Misfire? = nil,
        ignoreQuietHours: Bool? = nil,
        enabled: Bool? = nil,
        keepAfterFiring: Bool? = nil,
        threadIdentifier: String? = nil,
        interruptionLevel: InterruptionLevel? = nil,
        channels: Channels? = nil
    ) {
        self.threadIdentifier = threadIdentifier
        self.interruptionLevel = interruptionLevel
        self.channels = channels
        self.title = title
        self.body = body
        self.alertBodies = alertBodies
        self.action = action
        self.hasAction = hasAction
        self.sound = sound
        self.category = category
        self.badge = badge
        self.userInfo = userInfo
        self.expiresAfter = expiresAfter
        self.misfire = misfire
        self.ignoreQuietHours = ignoreQuietHours
        self.enabled = enabled
        self.keepAfterFiring = keepAfterFiring
    }
}

extension Badge {
    /// Adds `n` to the device's badge counter when the notification fires (`"+n"`).
    public static func increment(_ n: Int = 1) -> Badge { .delta(n) }
    /// Takes `n` off the device's badge counter, never below 0 (`"-n"`).
    public static func decrement(_ n: Int = 1) -> Badge { .delta(-n) }

    /// The wire form: an integer, or `"+N"` / `"-N"`.
    /// - Throws: `.invalidArgument` past ``Badge/maximum`` (or an absolute one below 0), as
    ///   chimed would answer.
    func json() throws(ChimeClientError) -> JSON {
        switch self {
        case .absolute(let n):
            try Self.check(n, 0...Self.maximum)
            return .int(Int64(n))
        case .delta(let d):
            try Self.check(d, -Self.maximum...Self.maximum)
            return .string(d < 0 ? "-\(-d)" : "+\(d)")
        }
    }

    static func check(_ n: Int, _ range: ClosedRange<Int>) throws(ChimeClientError) {
        guard range.contains(n) else {
            throw .invalid("badge", "\(n) is past \(range.lowerBound)...\(range.upperBound) (Badge.maximum)")
        }
    }
}

extension NotificationField {
    /// The fields a trigger sets (``isTrigger``), in the protocol's order.
    static let schedule = allCases.filter(\.isTrigger)
}

extension NotificationContent {
    /// The content's value for `field`, nil when it is not set or is not a content field. One
    /// exhaustive switch: a field added to the protocol does not compile until it is mapped here.
    func value(of field: NotificationField) throws(ChimeClientError) -> JSON? {
        switch field {
        case .alertTitle: return title.map(JSON.string)
        case .alertBody: return body.map(JSON.string)
        case .alertBodies: return alertBodies.map { .array($0.map(JSON.string)) }
        case .alertAction: return action.map(JSON.string)
        case .hasAction: return hasAction.map(JSON.bool)
        case .soundName: return sound.map(JSON.string)
        case .category: return category.map(JSON.string)
        case .threadId: return threadIdentifier.map(JSON.string)
        case .interruptionLevel: return interruptionLevel.map { .string($0.rawValue) }
        case .channels: return channels.map { .string($0.rawValue) }
        case .badge: return try badge?.json()
        case .userInfo: return userInfo.map(JSON.object)
        case .expiresAfter:
            guard let expiresAfter else { return nil }
            return try Wire.seconds(expiresAfter, field: field.wireName)
        case .misfire: return misfire.map { .string($0.rawValue) }
        case .ignoreQuietHours: return ignoreQuietHours.map(JSON.bool)
        case .enabled: return enabled.map(JSON.bool)
        case .keepAfterFiring: return keepAfterFiring.map(JSON.bool)
        case .id, .fireDate, .after, .alignTo, .timeZone, .repeatInterval, .rrule, .count, .until, .exdates,
            .leadTime:
            return nil
        }
    }

    /// The content of a notification as chimed stored it.
    init(_ spec: NotificationSpec) {
        self.init(
            title: spec.alertTitle,
            body: spec.alertBody,
            alertBodies: spec.alertBodies,
            action: spec.alertAction,
            hasAction: spec.hasAction,
            sound: spec.soundName,
            category: spec.category,
            badge: spec.badge,
            userInfo: spec.userInfo,
            expiresAfter: spec.expiresAfter.map(Wire.timeInterval(milliseconds:)),
            misfire: spec.misfire,
            ignoreQuietHours: spec.ignoreQuietHours,
            enabled: spec.enabled,
            keepAfterFiring: spec.keepAfterFiring,
            threadIdentifier: spec.threadId,
            interruptionLevel: spec.interruptionLevel,
            channels: spec.channels
        )
    }
}
