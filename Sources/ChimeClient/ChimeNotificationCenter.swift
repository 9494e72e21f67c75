import ChimeProtocol
import Foundation

/// One device's notifications on a Chime worker, with the calls of `UNUserNotificationCenter`:
/// add requests, list and remove the pending ones, pause and resume them, edit them in place,
/// ask when they will fire, and receive the deliveries.
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
/// **Connection.** ``connect()`` connects the transport and subscribes to the replies and to
/// `P/{deviceId}/notifications`; every call connects first if needed. ``disconnect()`` ends the
/// center: create a new one to connect again.
public final class ChimeNotificationCenter: Sendable {
    /// How the center addresses chimed and waits for it.
    public struct Configuration: Sendable, Hashable {
        /// The `P` of every topic (chimed's `--topic-prefix`). Default `chime`.
        public var topicPrefix: String
        /// How long each attempt of a command waits for its reply. Default 10 s.
        public var timeout: Duration
        /// How many times a command without a reply is sent, the same bytes each time (at least 1).
        /// Default 2.
        public var attempts: Int
        /// Notifications (or inbox deliveries) asked for per page, 1 to 1000. Default 100.
        public var pageSize: Int
        /// The Response Topic of the commands; nil: `P/{deviceId}/replies/client-<random>`. Under
        /// `P/` chimed honours only the device's own reply space (PROTOCOL.md section 4). A
        /// ``ChimeBackend`` chooses its own and refuses one set here.
        public var replyTopic: String?
        /// At most this many commands wait for their reply at once, 1 to 1000 (mosquitto's
        /// default `max_queued_messages`: the replies it queues for one client before it drops
        /// them); a call beyond waits for one of them to end (back-pressure). Default 256.
        public var window: Int

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

    /// The device whose notifications these are.
    public let deviceId: String
    public let configuration: Configuration
    /// Where the replies to this center's commands come.
    public let replyTopic: String
    /// Where chimed publishes the device's deliveries.
    public let notificationsTopic: String
    private let connection: ChimeConnection
    /// Whether the connection is this center's own (not a ``ChimeBackend``'s).
    private let ownsConnection: Bool

    /// A center for `deviceId` over `transport`; nothing is sent before the first call.
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

    /// Connects the transport and subscribes to the replies and the deliveries. Every call
    /// connects first; call it to receive ``deliveries`` before sending anything. (A center of a
    /// ``ChimeBackend`` subscribes to its device's deliveries here, and only here.)
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
    /// `.cancelled`. The center cannot connect again. A center of a ``ChimeBackend`` shares the
    /// backend's connection: this does nothing to it (``ChimeBackend/disconnect()`` ends it).
    public func disconnect() async {
        if ownsConnection { await connection.disconnect() }
    }

    /// The deliveries that arrive from now on, live, in order. Each access is a sequence of its
    /// own; it ends with ``disconnect()``. Deliveries arrive once connected (``connect()``), and at
    /// least once: deduplicate by ``ChimeDelivery/fireId``. A device that was offline finds what it
    /// missed in ``inbox()`` (with receipts) or through a persistent MQTT session.
    public var deliveries: AsyncStream<ChimeDelivery> {
        connection.deliveries(of: [deviceId])
    }

    // MARK: - Scheduling

    /// Schedules a notification, replacing one with the same identifier
    /// (`UNUserNotificationCenter.add(_:)`).
    /// - Returns: when its first delivery is due; nil when it is stored paused (or see
    ///   ``ScheduledNotification/nextFireDate``).
    /// - Throws: the error chimed answers (`invalid_argument`, `never_fires`, `timezone_required`,
    ///   `quota_exceeded`, ...), or one of the client's own codes.
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

    /// Schedules several notifications at once, atomically: all or none. With `replacing`, the
    /// notifications it selects are removed first, in the same step ("cancel every recall
    /// reminder and add these three" cannot half-happen).
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

    /// Every notification the device holds, ordered by identifier, following `list`'s cursor
    /// through all pages (``Configuration/pageSize`` a page)
    /// (`UNUserNotificationCenter.pendingNotificationRequests()`).
    /// - Parameter userInfo: only those whose `userInfo` has each of these keys, with equal values.
    /// - Throws: `.invalidReply` when a page's cursor repeats an earlier one, or more pages come
    ///   than a device can fill (100001): the pages would never end.
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

    /// Removes these notifications (and their snoozes). Ids the device does not hold are ignored.
    public func removePendingNotificationRequests(withIdentifiers identifiers: [String]) async throws(ChimeClientError)
    {
        try await select(.cancel, .identifiers(identifiers))
    }

    /// Removes the notifications whose `userInfo` has each of these keys with an equal value.
    public func removePendingNotificationRequests(matchingUserInfo userInfo: JSONObject) async throws(ChimeClientError)
    {
        try await select(.cancel, .userInfo(userInfo))
    }

    /// Removes every notification of the device.
    public func removeAllPendingNotificationRequests() async throws(ChimeClientError) {
        try await select(.cancel, .all)
    }

    /// Keeps the selected notifications but stops them firing.
    public func pause(_ selector: NotificationSelector) async throws(ChimeClientError) {
        try await select(.pause, selector)
    }

    /// Lets paused notifications fire again, from their next occurrence after now (a one-shot
    /// whose time passed meanwhile fires at once).
    public func resume(_ selector: NotificationSelector) async throws(ChimeClientError) {
        try await select(.resume, selector)
    }

    private func select(_ op: ChimeProtocol.Operation, _ selector: NotificationSelector) async throws(ChimeClientError)
    {
        _ = try await send(op.rawValue, selector.json)
    }

    /// Changes some fields of a notification and keeps the others, its on/off state and its
    /// counters (chimed's `update`).
    /// - Parameters:
    ///   - content: the fields it sets replace those of the notification; its nil ones are kept.
    ///   - trigger: a new schedule, as a whole (the schedule fields it does not set are cleared);
    ///     nil keeps the schedule.
    ///   - clearing: fields to set back to absent, their default (`.badge`, `.soundName`, ...).
    /// - Returns: when its next delivery is due; nil when paused or finished (or see
    ///   ``ScheduledNotification/nextFireDate``).
    /// - Throws: `not_found` when the device has no such notification.
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

    /// Delivers a notification's content once more, `seconds` from now, as the one-shot
    /// `"{identifier}~snooze"` (replacing an earlier snooze of it). Its own schedule is unchanged.
    /// - Returns: when the snooze is due.
    /// - Throws: `not_found` when the device has no such notification.
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

    /// The next instants at which a request's deliveries would be sent, at or after `from` (lead
    /// time applied, quiet hours not), as if it were added at `from`. Changes nothing.
    /// - Parameters:
    ///   - count: at most this many, 1 to 1000.
    ///   - from: default now.
    public func preview(
        _ request: NotificationRequest,
        count: Int = 10,
        from: Date? = nil
    ) async throws(ChimeClientError) -> [Date] {
        let (object, firstOnly) = try request.notificationObject(now: from ?? Date())
        return try await previewDates(["notification": .object(object)], count: firstOnly ? 1 : count, from: from)
    }

    /// The next instants at which a scheduled notification's deliveries will be sent.
    /// - Throws: `not_found` when the device has no such notification.
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

    /// The device's zone, badge, quiet hours and receipts, and how many notifications it holds.
    public func deviceSettings() async throws(ChimeClientError) -> DeviceSettings {
        try await device([:])
    }

    /// Changes what is given of the device's settings and returns them all.
    /// - Parameters:
    ///   - timeZone: an IANA zone (`TimeZone.current.identifier`); the notifications that follow
    ///     the device's zone are recomputed.
    ///   - badge: the badge counter.
    ///   - quietHours: `.set(QuietHours(...))` or `.clear`.
    ///   - receipts: keep each delivery in the inbox until ``ack(fireIds:badge:)``.
    ///   - history: keep a delivery history (receipts imply it).
    @discardableResult
    public func setDeviceSettings(
        timeZone: String? = nil,
        badge: Int? = nil,
        quietHours: QuietHoursChange? = nil,
        receipts: Bool? = nil,
        history: Bool? = nil
    ) async throws(ChimeClientError) -> DeviceSettings {
        var payload = JSONObject()
        if let timeZone { payload["timeZone"] = .string(timeZone) }
        if let badge { payload["badge"] = try Badge.absolute(badge).json() }
        if let quietHours { payload["quietHours"] = quietHours.json }
        if let receipts { payload["receipts"] = .bool(receipts) }
        if let history { payload["history"] = .bool(history) }
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

    /// Acknowledges deliveries: takes them out of the inbox, and changes the badge (once, however
    /// often the same ack is sent) if at least one was new.
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

    /// The deliveries the device has not acknowledged, oldest first, following `inbox`'s cursor
    /// through all pages. Empty for a device without receipts.
    /// - Throws: `.invalidReply` when a page's cursor repeats an earlier one, or more pages come
    ///   than an inbox can fill (100001): the pages would never end.
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

    /// The device's recent deliveries, newest first, and whether each was acknowledged.
    /// - Parameters:
    ///   - since: only those fired at or after it.
    ///   - limit: at most this many (1 to 1000; chimed's default 100).
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

    /// Sends any command to `P/{deviceId}/cmd/{op}` and returns its reply's `result` as it is
    /// (`{"duplicate": true}` for a retry chimed recognised): for what the calls above do not
    /// cover. The `requestId` is the center's; retries and errors are as for every call.
    /// - Throws: the error reply as ``ChimeClientError``, or one of the client's own codes.
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
