import ChimeProtocol
import Foundation

/// One device's notifications on a Chime worker, with the calls of `UNUserNotificationCenter`.
///
/// Add requests, list and remove the pending ones, pause and resume them, edit them in place,
/// ask when they will fire, and receive the deliveries. Each call is a command of PROTOCOL.md
/// section 3 for the device ``deviceId``, and returns once chimed's reply came.
///
/// ```swift
/// import ChimeClientMQTT  // the package's transport; or bring your own ChimeTransport
///
/// let center = try ChimeNotificationCenter(deviceId: "phone-1", brokerURL: "mqtt://127.0.0.1:1883")
/// try await center.setDeviceSettings(timeZone: "Europe/Paris")
/// try await center.add(
///     NotificationRequest(
///         identifier: "medicine",
///         content: NotificationContent(title: "Medicine", body: "Take your pill", badge: .increment(1)),
///         trigger: .calendar(matching: DateComponents(hour: 18, minute: 0), repeats: true)
///     )
/// )
/// for await delivery in center.deliveries { print(delivery.content.body ?? "") }
/// ```
///
/// **Replies.** Every command goes to `P/{deviceId}/cmd/{op}` at QoS 1 with a fresh `requestId`,
/// the MQTT 5 Response Topic ``replyTopic`` (below `P/{deviceId}/replies/`, which the deploy ACL
/// lets the device and backends read) and the requestId as Correlation Data; its reply is the
/// message on ``replyTopic`` with the same Correlation Data (PROTOCOL.md section 4).
///
/// **Retries.** When no reply comes within ``Configuration/timeout``, the command is sent again,
/// the same bytes with the same Correlation Data, up to ``Configuration/attempts`` times in all:
/// chimed applies a command it sees twice only once (PROTOCOL.md, "Idempotency"). Then the call
/// throws `.timeout`, and may be called again.
///
/// **Errors.** Every call throws ``ChimeClientError``: chimed's error reply with its code, field
/// and message (`invalid_argument`, `not_found`, ...), a request the client refuses before sending
/// it (`invalid_argument`, as chimed would answer), or one of the client's own codes: `.timeout`
/// (no reply after every attempt), `.transport` (the broker cannot be reached, or refused a
/// subscription or a command), `.invalidReply` (a reply this client cannot read) and `.cancelled`
/// (the calling task was cancelled, or the center disconnected).
///
/// **Connection.** ``connect()`` connects the transport and subscribes to the replies and to
/// `P/{deviceId}/notifications`; every call connects first if needed. ``disconnect()`` ends the
/// center: create a new one to connect again. The center is `Sendable`: calls may run at once from
/// many tasks, at most ``Configuration/window`` of them waiting for their reply.
public final class ChimeNotificationCenter: Sendable {
    /// How the center addresses chimed and waits for it.
    ///
    /// A center or a backend checks its configuration when it is made, and throws
    /// `invalidArgument` naming the first setting out of range.
    public struct Configuration: Sendable, Hashable {
        /// The `P` of every topic: chimed's `--topic-prefix` (PROTOCOL.md section 1).
        ///
        /// Default `chime`. Not empty, without `+`, `#` or a trailing `/`.
        public var topicPrefix: String
        /// How long each attempt of a command waits for its reply.
        ///
        /// Default 10 s. Connecting and each subscription may take as long.
        public var timeout: Duration
        /// How many times a command without a reply is sent, the same bytes each time.
        ///
        /// At least 1. Default 2. chimed applies a command it receives twice only once
        /// (PROTOCOL.md section 4, "Idempotency").
        public var attempts: Int
        /// How many notifications (or inbox deliveries) each page asks for: `list`'s and `inbox`'s
        /// `limit`.
        ///
        /// 1 to 1000. Default 100.
        public var pageSize: Int
        /// The Response Topic of the commands; nil: `P/{deviceId}/replies/client-<random>`.
        ///
        /// Under `P/` chimed honours only the device's own reply space (PROTOCOL.md section 4). A
        /// ``ChimeBackend`` chooses its own and refuses one set here.
        public var replyTopic: String?
        /// At most this many commands wait for their reply at once.
        ///
        /// 1 to 1000 (mosquitto's default `max_queued_messages`: the replies it queues for one
        /// client before it drops them); a call beyond waits for one of them to end
        /// (back-pressure). Default 256.
        public var window: Int

        /// A configuration with the settings given, and the others at their defaults.
        ///
        /// - Parameters:
        ///   - topicPrefix: The `P` of every topic (``topicPrefix``).
        ///   - timeout: How long each attempt waits for its reply (``timeout``).
        ///   - attempts: How many times a command is sent (``attempts``).
        ///   - pageSize: The `limit` of each page (``pageSize``).
        ///   - replyTopic: The commands' Response Topic (``replyTopic``).
        ///   - window: How many commands may wait for their reply at once (``window``).
        public init(
            topicPrefix: String = "chime",
            timeout: Duration = .seconds(10),
            attempts: Int = 2,
            pageSize: Int = 100,
            replyTopic: String? = nil,
            window: Int = 256
        ) {
            self.topicPrefix = topicPrefix
            self.timeout = timeout
            self.attempts = attempts
            self.pageSize = pageSize
            self.replyTopic = replyTopic
            self.window = window
        }

        /// - Throws: `invalidArgument` naming the first setting out of range.
        func validated() throws(ChimeClientError) -> Configuration {
            let prefix = topicPrefix
            guard !prefix.isEmpty, !prefix.contains("+"), !prefix.contains("#"), !prefix.hasSuffix("/") else {
                throw .invalid("topicPrefix", "\"\(prefix)\" is not a topic without wildcards or a trailing /")
            }
            guard attempts >= 1 else { throw .invalid("attempts", "at least 1") }
            guard (1...1000).contains(pageSize) else { throw .invalid("pageSize", "1 to 1000") }
            guard (1...1000).contains(window) else { throw .invalid("window", "1 to 1000") }
            return self
        }
    }

    /// The device whose notifications these are: the `{deviceId}` of its topics.
    public let deviceId: String
    /// The settings the center was made with (its backend's, for a center of a ``ChimeBackend``).
    public let configuration: Configuration
    /// Where the replies to this center's commands come: their MQTT 5 Response Topic.
    public let replyTopic: String
    /// Where chimed publishes the device's deliveries: `P/{deviceId}/notifications`.
    public let notificationsTopic: String
    private let connection: ChimeConnection
    /// Whether the connection is this center's own (not a ``ChimeBackend``'s).
    private let ownsConnection: Bool

    /// A center for `deviceId` over a connection of its own.
    ///
    /// Nothing is sent before the first call. ``disconnect()`` ends the connection.
    ///
    /// - Parameters:
    ///   - deviceId: The device, 1 to 128 characters of `A-Z a-z 0-9 _ . : @ -`.
    ///   - transport: The MQTT connection to use; the center owns it from now on.
    ///   - configuration: How to address chimed and wait for it.
    /// - Throws: `invalidArgument` for a device id that is not 1 to 128 characters of
    ///   `A-Z a-z 0-9 _ . : @ -`, or a configuration out of range.
    public convenience init(
        deviceId: String,
        transport: any ChimeTransport,
        configuration: Configuration = Configuration()
    ) throws(ChimeClientError) {
        try Self.check(deviceId)
        let configuration = try configuration.validated()
        let replyTopic =
            configuration.replyTopic
            ?? "\(configuration.topicPrefix)/\(deviceId)/replies/client-\(ChimeConnection.randomToken())"
        self.init(
            deviceId: deviceId,
            connection: ChimeConnection(
                transport: transport,
                configuration: configuration,
                replies: .topic(replyTopic),
                deliveriesOf: deviceId
            ),
            owned: true
        )
    }

    /// A center on a connection checked already, its own or a backend's.
    init(deviceId: String, connection: ChimeConnection, owned: Bool) {
        self.deviceId = deviceId
        self.configuration = connection.configuration
        self.connection = connection
        self.ownsConnection = owned
        self.notificationsTopic = connection.notifications(of: deviceId)
        self.replyTopic = connection.replies.topic(for: deviceId)
    }

    /// - Throws: `invalidArgument` for a device id that is not 1 to 128 characters of
    ///   `A-Z a-z 0-9 _ . : @ -` or starts with `$`.
    static func check(_ deviceId: String) throws(ChimeClientError) {
        guard DeviceID.isValid(deviceId), deviceId.first != "$" else {
            throw .invalid("deviceId", "\"\(deviceId)\" is not 1 to 128 characters of A-Z a-z 0-9 _ . : @ -")
        }
    }

    // MARK: - Connection

    /// Connects the transport and subscribes to the replies and the deliveries.
    ///
    /// Every call connects first; call it to receive ``deliveries`` before sending anything. A
    /// center of a ``ChimeBackend`` subscribes to its device's deliveries here, and only here.
    ///
    /// - Throws: `.transport` when the broker cannot be reached or refuses a subscription (a later
    ///   call tries again), `.cancelled` after ``disconnect()``.
    public func connect() async throws(ChimeClientError) {
        if ownsConnection {
            try await connection.connect()
        } else {
            try await connection.subscribeDeliveries(of: deviceId)
        }
    }

    /// Disconnects the transport, ends ``deliveries`` and fails the calls in progress with
    /// `.cancelled`.
    ///
    /// The center cannot connect again. A center of a ``ChimeBackend`` shares the backend's
    /// connection: this does nothing to it (``ChimeBackend/disconnect()`` ends it).
    public func disconnect() async {
        if ownsConnection { await connection.disconnect() }
    }

    /// The deliveries that arrive from now on, live, in order.
    ///
    /// Each access is a sequence of its own; it ends with ``disconnect()`` (with
    /// ``ChimeBackend/disconnect()`` for a center of a ``ChimeBackend``). Deliveries arrive once
    /// connected (``connect()``; for a center of a backend, once its ``connect()`` or
    /// ``ChimeBackend/deliveries(of:)`` subscribed to them), and at least once: deduplicate by
    /// ``ChimeDelivery/fireId``. A device that was offline finds what it missed in ``inbox()``
    /// (with receipts) or through a persistent MQTT session (PROTOCOL.md section 3.9).
    public var deliveries: AsyncStream<ChimeDelivery> {
        connection.deliveries(of: [deviceId])
    }

    // MARK: - Scheduling

    /// Schedules a notification, replacing one with the same identifier, as
    /// `UNUserNotificationCenter.add(_:)` does.
    ///
    /// It sends `schedule` with one notification object (PROTOCOL.md sections 2 and 3.1). A
    /// calendar trigger that does not repeat is first asked of chimed with `preview`, and sent as a
    /// one-shot at the first date it matches.
    ///
    /// - Parameter request: The notification: its identifier, content and trigger.
    /// - Returns: When its first delivery is due (lead time applied); nil when it is stored paused,
    ///   or when the reply was lost and the retry was recognised as a duplicate (see
    ///   ``ScheduledNotification/nextFireDate``).
    /// - Throws: The error chimed answers (`invalid_argument` naming the field, `never_fires`,
    ///   `timezone_required`, `quota_exceeded`, `payload_too_large`, ...), `invalidArgument` for a
    ///   request the client refuses before sending it (a badge out of range, a trigger the protocol
    ///   cannot express), or one of the client's own codes.
    @discardableResult
    public func add(_ request: NotificationRequest) async throws(ChimeClientError) -> Date? {
        // One notification object rather than a batch of one, so that errors name `fireDate`,
        // not `notifications[0].fireDate`.
        guard
            let result = try await send(
                ChimeProtocol.Operation.schedule.rawValue,
                try await notificationObject(request)
            )
        else {
            return nil
        }
        guard case .scheduled(let scheduled) = try Self.typed(.schedule, result) else {
            throw Self.unexpected(.schedule)
        }
        return scheduled.scheduled.first?.nextFireDate.map(Wire.date)
    }

    /// Schedules several notifications at once, atomically: all or none.
    ///
    /// It sends `schedule` with a batch, `{"notifications": [...], "replace": ...}` (PROTOCOL.md
    /// section 3.1). With `replacing`, the notifications it selects are removed first, in the same
    /// step ("cancel every recall reminder and add these three" cannot half-happen).
    ///
    /// - Parameters:
    ///   - requests: 1 to 1000 notifications, each identifier once.
    ///   - selector: What to remove first, in the same step; nil removes nothing.
    /// - Returns: Each notification's identifier and when its first delivery is due, as chimed's
    ///   reply lists them; when the reply was lost and the retry was recognised as a duplicate,
    ///   the requests' identifiers with no date.
    /// - Throws: As ``add(_:)``; when one notification is refused, none is scheduled and nothing is
    ///   removed.
    @discardableResult
    public func add(
        contentsOf requests: [NotificationRequest],
        replacing selector: NotificationSelector? = nil
    ) async throws(ChimeClientError) -> [ScheduledNotification] {
        var objects: [JSON] = []
        for request in requests {
            objects.append(.object(try await notificationObject(request)))
        }
        var payload: JSONObject = ["notifications": .array(objects)]
        if let selector { payload["replace"] = .object(selector.json) }
        guard let result = try await send(ChimeProtocol.Operation.schedule.rawValue, payload) else {
            return requests.map { ScheduledNotification(identifier: $0.identifier, nextFireDate: nil) }
        }
        guard case .scheduled(let scheduled) = try Self.typed(.schedule, result) else {
            throw Self.unexpected(.schedule)
        }
        return scheduled.scheduled.map {
            ScheduledNotification(identifier: $0.id, nextFireDate: $0.nextFireDate.map(Wire.date))
        }
    }

    /// Every notification the device holds, as
    /// `UNUserNotificationCenter.pendingNotificationRequests()` gives them.
    ///
    /// It sends `list` (PROTOCOL.md section 3.4), and follows its cursor through all pages,
    /// ``Configuration/pageSize`` notifications a page.
    ///
    /// - Parameter userInfo: Only those whose `userInfo` has each of these keys with an equal JSON
    ///   value (`match`); nil for all.
    /// - Returns: The notifications, ordered by identifier, paused ones included.
    /// - Throws: The error chimed answers, one of the client's own codes, or `.invalidReply` when a
    ///   page's cursor repeats an earlier one, or more pages come than a device can fill (100001):
    ///   the pages would never end.
    public func pendingNotificationRequests(
        matchingUserInfo userInfo: JSONObject? = nil
    ) async throws(ChimeClientError) -> [PendingNotificationRequest] {
        var pending: [PendingNotificationRequest] = []
        var trail = PageTrail(.list)
        var cursor: String?
        repeat {
            var payload: JSONObject = ["limit": .int(Int64(configuration.pageSize))]
            if let userInfo { payload["match"] = ["userInfo": .object(userInfo)] }
            if let cursor { payload["cursor"] = .string(cursor) }
            guard let result = try await send(ChimeProtocol.Operation.list.rawValue, payload),
                case .listed(let page) = try Self.typed(.list, result)
            else { throw Self.unexpected(.list) }
            pending += page.notifications.map(PendingNotificationRequest.init)
            cursor = try Self.follow(&trail, page.cursor)
        } while cursor != nil
        return pending
    }

    private static func follow(_ trail: inout PageTrail, _ cursor: String?) throws(ChimeClientError) -> String? {
        do {
            return try trail.follow(cursor)
        } catch {
            throw ChimeClientError(.invalidReply, error.message)
        }
    }

    /// Removes these notifications, and their snoozes.
    ///
    /// It sends `cancel` with `ids` (PROTOCOL.md section 3.2). Ids the device does not hold are
    /// ignored.
    ///
    /// - Parameter identifiers: The notifications' identifiers, at most 1000.
    /// - Throws: The error chimed answers, or one of the client's own codes.
    public func removePendingNotificationRequests(withIdentifiers identifiers: [String]) async throws(ChimeClientError)
    {
        try await select(.cancel, .identifiers(identifiers))
    }

    /// Removes the notifications whose `userInfo` has each of these keys with an equal value.
    ///
    /// It sends `cancel` with `match` (PROTOCOL.md section 3.2).
    ///
    /// - Parameter userInfo: The keys and values to match, as JSON: `["kind": "med"]`.
    /// - Throws: The error chimed answers, or one of the client's own codes.
    public func removePendingNotificationRequests(matchingUserInfo userInfo: JSONObject) async throws(ChimeClientError)
    {
        try await select(.cancel, .userInfo(userInfo))
    }

    /// Removes every notification of the device.
    ///
    /// It sends `cancel` with `all` (PROTOCOL.md section 3.2).
    ///
    /// - Throws: The error chimed answers, or one of the client's own codes.
    public func removeAllPendingNotificationRequests() async throws(ChimeClientError) {
        try await select(.cancel, .all)
    }

    /// Keeps the selected notifications but stops them firing.
    ///
    /// It sends `pause` (PROTOCOL.md section 3.3). A paused notification is listed with
    /// ``PendingNotificationRequest/isEnabled`` false until ``resume(_:)``.
    ///
    /// - Parameter selector: The notifications to pause.
    /// - Throws: The error chimed answers, or one of the client's own codes.
    public func pause(_ selector: NotificationSelector) async throws(ChimeClientError) {
        try await select(.pause, selector)
    }

    /// Lets paused notifications fire again, from their next occurrence after now.
    ///
    /// It sends `resume` (PROTOCOL.md section 3.3). A one-shot whose time passed while it was
    /// paused fires at once.
    ///
    /// - Parameter selector: The notifications to resume.
    /// - Throws: The error chimed answers, or one of the client's own codes.
    public func resume(_ selector: NotificationSelector) async throws(ChimeClientError) {
        try await select(.resume, selector)
    }

    private func select(_ op: ChimeProtocol.Operation, _ selector: NotificationSelector) async throws(ChimeClientError)
    {
        _ = try await send(op.rawValue, selector.json)
    }

    /// Changes some fields of a notification and keeps the others, its on/off state and its
    /// counters.
    ///
    /// It sends `update` (PROTOCOL.md section 3.10). Changing when it fires starts its series
    /// again from now, as `schedule` would (a paused one stays paused); changing only its content
    /// keeps its place in the series. A calendar trigger that does not repeat is first asked of
    /// chimed with `preview`, as ``add(_:)`` does.
    ///
    /// - Parameters:
    ///   - identifier: The notification's identifier.
    ///   - content: The fields it sets replace those of the notification; its nil ones are kept.
    ///     `enabled: true` resumes a paused notification, `false` pauses it.
    ///   - trigger: A new schedule, as a whole (the schedule fields it does not set are cleared);
    ///     nil keeps the schedule.
    ///   - clearing: Fields to set back to absent, their default (`.badge`, `.soundName`, ...).
    /// - Returns: When its next delivery is due; nil when paused or finished, or when the reply was
    ///   lost and the retry was recognised as a duplicate (see
    ///   ``ScheduledNotification/nextFireDate``).
    /// - Throws: `not_found` when the device has no such notification; `invalid_argument` when
    ///   nothing is given besides the identifier, a field is both given and cleared, `.id` is
    ///   cleared, or the result would not be a valid `schedule`; or as ``add(_:)``.
    @discardableResult
    public func update(
        identifier: String,
        content: NotificationContent? = nil,
        trigger: NotificationTrigger? = nil,
        clearing: Set<NotificationField> = []
    ) async throws(ChimeClientError) -> Date? {
        var schedule: JSONObject?
        if let trigger {
            let fields = try trigger.scheduleFields(now: Date())
            schedule = fields.firstOccurrenceOnly ? try await firstOccurrence(of: fields.object) : fields.object
        }
        var payload: JSONObject = ["id": .string(identifier)]
        for field in NotificationField.allCases where field != .id {
            let value: JSON?
            if field.isTrigger {
                value = schedule.map { $0[field.wireName] ?? .null }
            } else {
                value = try content?.value(of: field)
            }
            if clearing.contains(field) {
                guard value == nil || value == .null else {
                    throw .invalid(field.wireName, "both given and cleared")
                }
                payload.append(field.wireName, .null)
            } else if let value {
                payload.append(field.wireName, value)
            }
        }
        if clearing.contains(.id) { throw .invalid("id", "cannot be cleared") }
        guard let result = try await send(ChimeProtocol.Operation.update.rawValue, payload) else { return nil }
        let updated = try WireReader(object: result, what: "update reply").object("updated")
        guard let updated else { throw Self.unexpected(ChimeProtocol.Operation.update.rawValue) }
        return try WireReader(object: updated, what: "update reply").date("nextFireDate")
    }

    /// Delivers a notification's content once more, `seconds` from now.
    ///
    /// It sends `snooze` (PROTOCOL.md section 3.6): the content comes again as the one-shot
    /// `"{identifier}~snooze"`, which replaces an earlier snooze of it, is not listed, and is
    /// removed with its notification. The notification's own schedule is unchanged.
    ///
    /// - Parameters:
    ///   - identifier: The notification's identifier.
    ///   - seconds: How long after chimed receives the command, in seconds, kept to the
    ///     millisecond (`after`: more than 0, at most 315360000).
    /// - Returns: When the snooze is due; nil when the reply was lost and the retry was recognised
    ///   as a duplicate.
    /// - Throws: `not_found` when the device has no such notification; `invalid_argument` for a
    ///   number of seconds out of range; or one of the client's own codes.
    @discardableResult
    public func snooze(identifier: String, for seconds: TimeInterval) async throws(ChimeClientError) -> Date? {
        let payload: JSONObject = [
            "id": .string(identifier), "after": try Wire.seconds(seconds, field: NotificationField.after.wireName),
        ]
        guard let result = try await send(ChimeProtocol.Operation.snooze.rawValue, payload) else { return nil }
        guard case .snoozed(let next) = try Self.typed(.snooze, result) else { throw Self.unexpected(.snooze) }
        return next.nextFireDate.map(Wire.date)
    }

    // MARK: - When will it fire?

    /// The next instants at which a request's deliveries would be sent, as if it were added at
    /// `from`.
    ///
    /// It sends `preview` with the notification (PROTOCOL.md section 3.5), and changes nothing.
    /// The instants are at or after `from`, with the lead time applied and quiet hours not; an
    /// `after` counts from `from`.
    ///
    /// - Parameters:
    ///   - request: The notification, as ``add(_:)`` would send it.
    ///   - count: At most this many, 1 to 1000; a calendar trigger that does not repeat gives one.
    ///   - from: The instant to start from; nil for now.
    /// - Returns: The instants, earliest first.
    /// - Throws: As ``add(_:)``, for a request chimed would not schedule.
    public func preview(
        _ request: NotificationRequest,
        count: Int = 10,
        from: Date? = nil
    ) async throws(ChimeClientError) -> [Date] {
        let (object, firstOnly) = try request.notificationObject(now: from ?? Date())
        return try await previewDates(["notification": .object(object)], count: firstOnly ? 1 : count, from: from)
    }

    /// The next instants at which a scheduled notification's deliveries will be sent.
    ///
    /// It sends `preview` with the notification's `id` (PROTOCOL.md section 3.5), and changes
    /// nothing. The instants are at or after `from`, with the lead time applied and quiet hours
    /// not.
    ///
    /// - Parameters:
    ///   - identifier: The notification's identifier.
    ///   - count: At most this many, 1 to 1000.
    ///   - from: The instant to start from; nil for now.
    /// - Returns: The instants, earliest first.
    /// - Throws: `not_found` when the device has no such notification, or one of the client's own
    ///   codes.
    public func preview(
        identifier: String,
        count: Int = 10,
        from: Date? = nil
    ) async throws(ChimeClientError) -> [Date] {
        try await previewDates(["id": .string(identifier)], count: count, from: from)
    }

    private func previewDates(_ target: JSONObject, count: Int, from: Date?) async throws(ChimeClientError) -> [Date] {
        var payload = target
        payload["count"] = .int(Int64(count))
        if let from { payload["from"] = .string(Wire.instant(from)) }
        guard let result = try await send(ChimeProtocol.Operation.preview.rawValue, payload),
            case .previewed(let dates, _) = try Self.typed(.preview, result)
        else { throw Self.unexpected(.preview) }
        return dates.map(Wire.date)
    }

    /// The object `add` sends for a request: a non-repeating calendar trigger becomes a one-shot
    /// at the first date its rule gives.
    private func notificationObject(_ request: NotificationRequest) async throws(ChimeClientError) -> JSONObject {
        let (object, firstOnly) = try request.notificationObject(now: Date())
        return firstOnly ? try await firstOccurrence(of: object) : object
    }

    /// `object` (a notification, or its schedule fields) with its rule replaced by its first
    /// occurrence from now, found with `preview` so that chimed's calendar arithmetic decides.
    private func firstOccurrence(of object: JSONObject) async throws(ChimeClientError) -> JSONObject {
        var rule = JSONObject()
        for field in NotificationField.schedule where field != .leadTime {
            if let value = object[field.wireName] { rule.append(field.wireName, value) }
        }
        guard let first = try await previewDates(["notification": .object(rule)], count: 1, from: nil).first else {
            throw ChimeClientError(.neverFires, field: "dateMatching", "dateMatching: no date matches the components")
        }
        var oneShot = object
        oneShot[NotificationField.fireDate.wireName] = .string(Wire.instant(first))
        oneShot[NotificationField.rrule.wireName] = nil
        oneShot[NotificationField.exdates.wireName] = nil
        return oneShot
    }

    // MARK: - The device

    /// The device's zone, badge, quiet hours, receipts and history, and how many notifications it
    /// holds.
    ///
    /// It sends `device` with nothing to change (PROTOCOL.md section 3.7).
    ///
    /// - Returns: The device's settings and state.
    /// - Throws: The error chimed answers, or one of the client's own codes.
    public func deviceSettings() async throws(ChimeClientError) -> DeviceSettings {
        try await device([:])
    }

    /// Changes what is given of the device's settings and returns them all.
    ///
    /// It sends `device` (PROTOCOL.md section 3.7); a setting left nil is not changed.
    ///
    /// - Parameters:
    ///   - timeZone: An IANA zone the worker knows (`TimeZone.current.identifier`); the
    ///     notifications that follow the device's zone are computed again.
    ///   - badge: The badge counter, 0 to 1000000 (`Badge.maximum`).
    ///   - quietHours: `.set(QuietHours(...))` or `.clear`.
    ///   - receipts: Keep each delivery in the inbox until ``ack(fireIds:badge:)`` (section 3.9).
    ///   - history: Keep a delivery history (receipts imply it).
    ///   - push: The device's push registrations (PROTOCOL.md section 3.11), so that deliveries
    ///     also reach it while its app is closed: `.replace([PushRegistration(.apns(token: hex,
    ///     topic: Bundle.main.bundleIdentifier!, sandbox: false))])` from
    ///     `didRegisterForRemoteNotificationsWithDeviceToken`.
    /// - Returns: Every setting of the device after the change.
    /// - Throws: `invalid_argument` for a zone the worker does not know, a badge out of range, or a
    ///   registration it refuses (malformed, or for a service it has no credentials for);
    ///   `quota_exceeded` past 10 registrations; or one of the client's own codes.
    @discardableResult
    public func setDeviceSettings(
        timeZone: String? = nil,
        badge: Int? = nil,
        quietHours: QuietHoursChange? = nil,
        receipts: Bool? = nil,
        history: Bool? = nil,
        push: PushRegistrationChange? = nil
    ) async throws(ChimeClientError) -> DeviceSettings {
        var payload = JSONObject()
        if let timeZone { payload["timeZone"] = .string(timeZone) }
        if let badge { payload["badge"] = try Badge.absolute(badge).json() }
        if let quietHours { payload["quietHours"] = quietHours.json }
        if let receipts { payload["receipts"] = .bool(receipts) }
        if let history { payload["history"] = .bool(history) }
        if let push { payload[push.member.key] = push.member.value }
        return try await device(payload)
    }

    private func device(_ payload: JSONObject) async throws(ChimeClientError) -> DeviceSettings {
        // A duplicate (a retry of a change already applied) is answered without the settings.
        guard let result = try await send(ChimeProtocol.Operation.device.rawValue, payload) else {
            return try await device([:])
        }
        guard case .device(let status) = try Self.typed(.device, result) else { throw Self.unexpected(.device) }
        return DeviceSettings(status)
    }

    // MARK: - Receipts

    /// Acknowledges deliveries: takes them out of the inbox, and changes the badge if at least one
    /// was new.
    ///
    /// It sends `ack` (PROTOCOL.md section 3.9). The badge changes once, however often the same
    /// acknowledgement is sent.
    ///
    /// - Parameters:
    ///   - fireIds: 1 to 1000 ``ChimeDelivery/fireId``s, each at most 160 characters.
    ///   - badge: A change of the device's badge counter in the same step (`.decrement(1)`,
    ///     `.absolute(0)`); nil leaves it.
    /// - Returns: How many were newly acknowledged, and which the device has neither in its inbox
    ///   nor in its history; 0 and none when the reply was lost and the retry was recognised as a
    ///   duplicate.
    /// - Throws: `invalid_argument` for fireIds or a badge out of range, or one of the client's own
    ///   codes.
    @discardableResult
    public func ack(fireIds: [String], badge: Badge? = nil) async throws(ChimeClientError) -> AckResult {
        var payload: JSONObject = ["fireIds": .array(fireIds.map(JSON.string))]
        if let badge { payload["badge"] = try badge.json() }
        guard let result = try await send(ChimeProtocol.Operation.ack.rawValue, payload) else {
            return AckResult(acknowledged: 0, unknown: [])
        }
        guard case .acknowledged(let count, let unknown) = try Self.typed(.ack, result) else {
            throw Self.unexpected(.ack)
        }
        return AckResult(acknowledged: count, unknown: unknown)
    }

    /// The deliveries the device has not acknowledged, oldest first.
    ///
    /// It sends `inbox` (PROTOCOL.md section 3.9) and follows its cursor through all pages,
    /// ``Configuration/pageSize`` deliveries a page. Empty for a device without receipts.
    ///
    /// - Returns: The deliveries, each as it was published, and how many ever left the inbox
    ///   unacknowledged to make room.
    /// - Throws: The error chimed answers, one of the client's own codes, or `.invalidReply` when a
    ///   page's cursor repeats an earlier one, or more pages come than an inbox can fill (100001):
    ///   the pages would never end.
    public func inbox() async throws(ChimeClientError) -> ChimeInbox {
        var deliveries: [ChimeDelivery] = []
        var dropped = 0
        var trail = PageTrail(.inbox)
        var cursor: String?
        repeat {
            var payload: JSONObject = ["limit": .int(Int64(configuration.pageSize))]
            if let cursor { payload["cursor"] = .string(cursor) }
            guard let result = try await send(ChimeProtocol.Operation.inbox.rawValue, payload),
                case .inbox(let page) = try Self.typed(.inbox, result)
            else { throw Self.unexpected(.inbox) }
            for delivery in page.deliveries {
                guard case .object(let object) = delivery else {
                    throw ChimeClientError(.invalidReply, "an inbox delivery that is not an object")
                }
                deliveries.append(try ChimeDelivery(json: object))
            }
            dropped = page.dropped
            cursor = try Self.follow(&trail, page.cursor)
        } while cursor != nil
        return ChimeInbox(deliveries: deliveries, dropped: dropped)
    }

    /// The device's recent deliveries, newest first, and what became of each.
    ///
    /// It sends `history` (PROTOCOL.md section 3.9). A device keeps its last
    /// `--history-per-device` deliveries (28 by default) unless it turned history off.
    ///
    /// - Parameters:
    ///   - since: Only those fired at or after it; nil for all.
    ///   - limit: At most this many, 1 to 1000; nil for chimed's default, 100.
    /// - Returns: The deliveries, newest first; empty for a device that keeps no history.
    /// - Throws: `invalid_argument` for a limit out of range, or one of the client's own codes.
    public func history(since: Date? = nil, limit: Int? = nil) async throws(ChimeClientError) -> [DeliveryRecord] {
        var payload = JSONObject()
        if let since { payload["since"] = .string(Wire.instant(since)) }
        if let limit { payload["limit"] = .int(Int64(limit)) }
        guard let result = try await send(ChimeProtocol.Operation.history.rawValue, payload),
            case .history(let rows) = try Self.typed(.history, result)
        else { throw Self.unexpected(.history) }
        return rows.map(DeliveryRecord.init)
    }

    // MARK: - Commands and replies

    /// Sends any command to `P/{deviceId}/cmd/{op}` and returns its reply's `result` as it is.
    ///
    /// For what the calls above do not cover (push registrations, PROTOCOL.md section 3.11). The
    /// `requestId` is the center's; retries and errors are as for every call.
    ///
    /// - Parameters:
    ///   - op: The operation, the last level of the topic (`device`, `list`, ...).
    ///   - payload: The command's JSON object; a `requestId` in it is replaced by the center's.
    /// - Returns: The reply's `result`; `{"duplicate": true}` for a retry chimed recognised.
    /// - Throws: The error reply as ``ChimeClientError``, or one of the client's own codes.
    public func command(_ op: String, _ payload: JSONObject) async throws(ChimeClientError) -> JSONObject {
        try await send(op, payload) ?? ["duplicate": true]
    }

    private func send(_ op: String, _ command: JSONObject) async throws(ChimeClientError) -> JSONObject? {
        try await connection.send(deviceId, op, command)
    }

    private static func typed(
        _ op: ChimeProtocol.Operation,
        _ result: JSONObject
    ) throws(ChimeClientError) -> ReplyResult {
        do throws(ChimeError) {
            return try ReplyResult(op: op, json: result)
        } catch {
            throw ChimeClientError(.invalidReply, field: error.field, "a \(op.rawValue) result: \(error.message)")
        }
    }

    private static func unexpected(_ op: ChimeProtocol.Operation) -> ChimeClientError { unexpected(op.rawValue) }

    private static func unexpected(_ op: String) -> ChimeClientError {
        ChimeClientError(.invalidReply, "a reply to \(op) that is not the result of \(op)")
    }
}
