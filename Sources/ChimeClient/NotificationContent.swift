import ChimeProtocol
import Foundation

/// What a notification shows and how it is delivered.
///
/// The `UNMutableNotificationContent` (and `UILocalNotification`) properties, and Chime's delivery
/// options, each a field of PROTOCOL.md section 2, "What". Every property is optional: what is nil
/// is not sent, and takes the protocol's default.
public struct NotificationContent: Sendable, Hashable {
    /// The title (`alertTitle`).
    public var title: String?
    /// The text shown (`alertBody`).
    public var body: String?
    /// Texts to pick from, one at random for each delivery, instead of ``body`` (`alertBodies`,
    /// at most 1000).
    public var alertBodies: [String]?
    /// The action button's text (`alertAction`).
    public var action: String?
    /// Whether the notification has an action button (`hasAction`, true unless given).
    public var hasAction: Bool?
    /// The sound's name, `"default"` for the default sound (`soundName`).
    public var sound: String?
    /// The category: `categoryIdentifier` (`category`).
    public var category: String?
    /// Groups notifications on the device: `threadIdentifier` (`threadId`, APNs `thread-id`, at
    /// most 256 characters).
    public var threadIdentifier: String?
    /// How a push may interrupt (`interruptionLevel`: APNs `interruption-level`, FCM and Web Push
    /// priority); nil reads as `.active`.
    public var interruptionLevel: InterruptionLevel?
    /// The badge (`badge`): `.absolute(n)` sets the device's badge; `.increment(n)` and
    /// `.decrement(n)` change its counter when the notification fires (never below 0).
    ///
    /// `n` is at most 1000000 (`Badge.maximum`), an absolute badge at least 0; a delivery carries
    /// the resulting number.
    public var badge: Badge?
    /// Any JSON object (`userInfo`): what the selectors of remove, pause, resume and list match.
    ///
    /// At most `--max-userinfo-bytes` serialized (4096 by default), nested at most 32 levels.
    public var userInfo: JSONObject?
    /// Seconds after which a late delivery is dropped, not sent (`expiresAfter`, more than 0, kept
    /// to the millisecond).
    ///
    /// Counted from when it was due; a delivery sent carries an MQTT 5 message expiry of the time
    /// left, and leaves the inbox when it passes.
    public var expiresAfter: TimeInterval?
    /// What happens to occurrences missed while the worker or broker was down (`misfire`,
    /// `.coalesce` unless given).
    public var misfire: Misfire?
    /// Deliver even inside the device's quiet hours (`ignoreQuietHours`).
    public var ignoreQuietHours: Bool?
    /// False stores the notification paused: a reminder list's on/off switch (`enabled`).
    public var enabled: Bool?
    /// A one-shot that has fired stays listed, paused, until removed (`keepAfterFiring`).
    public var keepAfterFiring: Bool?
    /// Where deliveries go (`channels`): MQTT and push (nil, `.all`), MQTT only, or push only.
    public var channels: Channels?

    /// Content with the fields given; the others are not sent, and take the protocol's defaults.
    ///
    /// - Parameters:
    ///   - title: The title (``title``).
    ///   - body: The text shown (``body``).
    ///   - alertBodies: Texts to pick one from for each delivery, instead of `body` (``alertBodies``).
    ///   - action: The action button's text (``action``).
    ///   - hasAction: Whether there is an action button (``hasAction``).
    ///   - sound: The sound's name (``sound``).
    ///   - category: The category (``category``).
    ///   - badge: The badge, or a change of the device's counter (``badge``).
    ///   - userInfo: Any JSON object (``userInfo``).
    ///   - expiresAfter: Seconds after which a late delivery is dropped (``expiresAfter``).
    ///   - misfire: What happens to missed occurrences (``misfire``).
    ///   - ignoreQuietHours: Deliver inside quiet hours (``ignoreQuietHours``).
    ///   - enabled: False stores it paused (``enabled``).
    ///   - keepAfterFiring: A fired one-shot stays listed (``keepAfterFiring``).
    ///   - threadIdentifier: Groups notifications on the device (``threadIdentifier``).
    ///   - interruptionLevel: How a push may interrupt (``interruptionLevel``).
    ///   - channels: Where deliveries go (``channels``).
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
    ///
    /// - Parameter n: How much to add, at most 1000000 (`Badge.maximum`).
    /// - Returns: The change `.delta(n)`.
    public static func increment(_ n: Int = 1) -> Badge { .delta(n) }
    /// Takes `n` off the device's badge counter, never below 0 (`"-n"`).
    ///
    /// - Parameter n: How much to take off, at most 1000000 (`Badge.maximum`).
    /// - Returns: The change `.delta(-n)`.
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
