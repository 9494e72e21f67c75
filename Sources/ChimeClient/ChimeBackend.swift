import ChimeProtocol

/// An app's backend on Chime: one MQTT connection, under one backend account, for any number of
/// devices.
///
/// Each device's calls are those of a ``ChimeNotificationCenter``, made over the backend's
/// connection; a campaign schedules the same requests for many devices, and one stream receives
/// the deliveries of all of them.
///
/// ```swift
/// import ChimeClientMQTT
///
/// let backend = try ChimeBackend(brokerURL: "mqtt://backend:secret@127.0.0.1:1883")
/// try await backend.device("phone-1").add(request)             // every call of a device's center
/// let outcomes = await backend.add([request], toEach: userDevices)  // a campaign, one batch a device
/// for await delivery in try await backend.deliveries() { print(delivery.deviceId, delivery.fireId) }
/// ```
///
/// **Devices.** ``device(_:)`` gives a ``ChimeNotificationCenter`` for a device on the backend's
/// connection: all of a device's calls, for any device, made at once from as many tasks as
/// wanted. Each command is answered on `P/{deviceId}/replies/backend-<random>` (the reply space
/// chimed honours for a device, PROTOCOL.md section 4, which the deploy ACL lets a backend read),
/// which the backend reads through one subscription, `P/+/replies/backend-<random>`, and matches to
/// its command by Correlation Data.
///
/// **Back-pressure.** At most ``ChimeNotificationCenter/Configuration/window`` commands wait for
/// their reply at once, over all devices; a call beyond that waits for a place, in order, and gives
/// up with `.cancelled` if its task is cancelled meanwhile. Retries and timeouts are a center's
/// (``ChimeNotificationCenter``).
///
/// **Deliveries.** ``deliveries(of:)`` subscribes to the deliveries of the devices given (or of
/// every device) and streams them; the deploy ACL lets a backend read `P/+/notifications`.
public final class ChimeBackend: Sendable {
    /// A backend's settings are a center's; ``ChimeNotificationCenter/Configuration/replyTopic``
    /// must be nil (the backend names its own reply space).
    public typealias Configuration = ChimeNotificationCenter.Configuration

    /// The settings the backend was made with, shared by the centers of its devices.
    public let configuration: Configuration
    /// The filter the replies to the backend's commands arrive on, `P/+/replies/backend-<random>`.
    public var replyFilter: String { connection.replies.filter }
    private let connection: ChimeConnection

    /// A backend over `transport`.
    ///
    /// Nothing is sent before the first call. ``disconnect()`` ends the connection.
    ///
    /// - Parameters:
    ///   - transport: The MQTT connection to use, under a backend account; the backend owns it from
    ///     now on.
    ///   - configuration: How to address chimed and wait for it, for every device.
    /// - Throws: `invalidArgument` for a configuration out of range or with a `replyTopic`.
    public init(
        transport: any ChimeTransport,
        configuration: Configuration = Configuration()
    )
        throws(ChimeClientError)
    {
        let configuration = try configuration.validated()
        guard configuration.replyTopic == nil else {
            throw .invalid("replyTopic", "a backend names its own reply space: leave it nil")
        }
        self.configuration = configuration
        connection = ChimeConnection(
            transport: transport,
            configuration: configuration,
            replies: .perDevice(
                prefix: configuration.topicPrefix + "/",
                suffix: "/replies/backend-\(ChimeConnection.randomToken())"
            ),
            deliveriesOf: nil
        )
    }

    /// Connects the transport and subscribes to the replies.
    ///
    /// Every call, of every device's center, does this first.
    ///
    /// - Throws: `.transport` when the broker cannot be reached or refuses the subscription (a
    ///   later call tries again), `.cancelled` after ``disconnect()``.
    public func connect() async throws(ChimeClientError) {
        try await connection.connect()
    }

    /// Disconnects the transport, ends every delivery stream and fails the calls in progress, of
    /// every device, with `.cancelled`.
    ///
    /// The backend cannot connect again, and neither can the centers of its devices.
    public func disconnect() async {
        await connection.disconnect()
    }

    /// How many commands are waiting for their reply now, over all devices (at most
    /// ``ChimeNotificationCenter/Configuration/window``).
    public var commandsInFlight: Int { connection.inFlight }

    /// The center of `deviceId` on this backend's connection.
    ///
    /// Cheap: make one per call or keep it. Its ``ChimeNotificationCenter/disconnect()`` does
    /// nothing to the backend's connection.
    ///
    /// - Parameter deviceId: The device, 1 to 128 characters of `A-Z a-z 0-9 _ . : @ -`.
    /// - Returns: A center whose commands go over the backend's connection, answered in its reply
    ///   space.
    /// - Throws: `invalidArgument` for a device id that is not 1 to 128 characters of
    ///   `A-Z a-z 0-9 _ . : @ -` or starts with `$`.
    public func device(_ deviceId: String) throws(ChimeClientError) -> ChimeNotificationCenter {
        try ChimeNotificationCenter.check(deviceId)
        return ChimeNotificationCenter(deviceId: deviceId, connection: connection, owned: false)
    }

    /// The deliveries that arrive from now on for `devices`, live, in order.
    ///
    /// It subscribes to `P/{deviceId}/notifications` for each device given (once per device over
    /// the backend's life), or to `P/+/notifications`, before it returns; the stream ends with
    /// ``disconnect()``. Deliveries are at least once: deduplicate by ``ChimeDelivery/fireId``.
    ///
    /// - Parameter devices: The devices whose deliveries to receive; nil for every device the
    ///   backend's account may read.
    /// - Returns: A stream of the deliveries, each with its ``ChimeDelivery/deviceId``.
    /// - Throws: `invalidArgument` for an invalid device id, `.transport` when a subscription fails,
    ///   `.cancelled` after ``disconnect()``.
    public func deliveries(
        of devices: Set<String>? = nil
    ) async throws(ChimeClientError) -> AsyncStream<
        ChimeDelivery
    > {
        if let devices {
            for device in devices { try ChimeNotificationCenter.check(device) }
        }
        // The stream first, so that nothing arriving once subscribed is missed.
        let stream = connection.deliveries(of: devices)
        if let devices {
            for device in devices { try await connection.subscribeDeliveries(of: device) }
        } else {
            try await connection.subscribeDeliveries(of: nil)
        }
        return stream
    }

    /// Schedules the same requests for each device, one atomic batch a device: a campaign.
    ///
    /// Each device gets a `schedule` batch, as ``ChimeNotificationCenter/add(contentsOf:replacing:)``
    /// sends it, keeping up to ``ChimeNotificationCenter/Configuration/window`` commands in flight.
    /// One device's failure does not stop the others.
    ///
    /// - Parameters:
    ///   - requests: 1 to 1000 (a batch's bound, PROTOCOL.md section 3.1).
    ///   - devices: Each device once; a repeated id is scheduled once.
    ///   - selector: What each device's batch replaces, in the same step; nil replaces nothing.
    /// - Returns: Each device's outcome: what it scheduled, or why not (an invalid device id is
    ///   `invalidArgument` there, not a thrown error; so is a number of requests out of range, for
    ///   every device).
    public func add(
        _ requests: [NotificationRequest],
        toEach devices: some Sequence<String>,
        replacing selector: NotificationSelector? = nil
    ) async -> [String: Result<[ScheduledNotification], ChimeClientError>] {
        var outcomes: [String: Result<[ScheduledNotification], ChimeClientError>] = [:]
        guard (1...1000).contains(requests.count) else {
            let error = ChimeClientError.invalid("requests", "1 to 1000 requests a batch, not \(requests.count)")
            for device in devices { outcomes[device] = .failure(error) }
            return outcomes
        }
        // As many tasks as the window has places: each takes the next device when it is done.
        var pending = devices.makeIterator()
        var started = Set<String>()
        func next() -> String? {
            while let device = pending.next() {
                if started.insert(device).inserted { return device }
            }
            return nil
        }
        await withTaskGroup(of: (String, Result<[ScheduledNotification], ChimeClientError>).self) { group in
            func start(_ device: String) {
                group.addTask {
                    do throws(ChimeClientError) {
                        return (
                            device,
                            .success(try await self.device(device).add(contentsOf: requests, replacing: selector))
                        )
                    } catch {
                        return (device, .failure(error))
                    }
                }
            }
            for _ in 0..<configuration.window {
                guard let device = next() else { break }
                start(device)
            }
            for await (device, outcome) in group {
                outcomes[device] = outcome
                if let device = next() { start(device) }
            }
        }
        return outcomes
    }
}
