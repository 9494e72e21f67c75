@_exported import ChimeClient
import ChimeMQTT

/// The package's `ChimeTransport`: MQTT 5 over ChimeMQTT's `MQTTRequester` (libmosquitto).
///
/// It reconnects by itself and subscribes again after a reconnect. A center or backend made with
/// a `brokerURL:` or `mqtt:` initializer uses one of its own.
public final class MQTTChimeTransport: ChimeTransport {
    /// The requester underneath, for anything else the app wants of the connection.
    public let requester: MQTTRequester
    /// The messages of the transport's subscriptions, in arrival order; it finishes with
    /// ``disconnect()``.
    public let incoming: AsyncStream<ChimeTransportMessage>
    private let forwarding: Task<Void, Never>

    /// A transport with these options; nothing connects before ``connect(timeout:)``.
    ///
    /// For a persistent session (deliveries queued by the broker while the app is away), set a
    /// stable `clientId`, `cleanStart = false` and a `sessionExpiryInterval`.
    ///
    /// - Parameter options: The broker, the account and the session; `protocolVersion` must be
    ///   `.v5`.
    /// - Throws: `invalidArgument` for MQTT 3.1.1 (replies need a Response Topic) or options the
    ///   client refuses.
    public init(options: MQTTOptions) throws(ChimeClientError) {
        guard options.protocolVersion == .v5 else {
            throw ChimeClientError(.invalidArgument, field: "protocolVersion", "Chime's client needs MQTT 5")
        }
        do {
            requester = try MQTTRequester(options: options)
        } catch {
            throw ChimeClientError(.invalidArgument, "\(error.message)")
        }
        let (stream, continuation) = AsyncStream.makeStream(of: ChimeTransportMessage.self)
        incoming = stream
        let messages = requester.messages
        forwarding = Task {
            for await message in messages {
                continuation.yield(
                    ChimeTransportMessage(
                        topic: message.topic,
                        payload: message.payload,
                        correlationData: message.correlationData
                    )
                )
            }
            continuation.finish()
        }
    }

    /// A transport to `mqtt://[user:password@]host[:port]` or `mqtts://...`.
    ///
    /// - Parameters:
    ///   - brokerURL: The broker's URL, with the account's user name and password in it; `mqtts://`
    ///     for TLS (port 8883 unless given).
    ///   - clientId: The MQTT client id; nil lets the broker assign one.
    /// - Throws: `invalidArgument` with the field `brokerURL` for a URL that is not one of these.
    public convenience init(brokerURL: String, clientId: String? = nil) throws(ChimeClientError) {
        var options: MQTTOptions
        do {
            options = try MQTTOptions(url: brokerURL)
        } catch {
            throw ChimeClientError(.invalidArgument, field: "brokerURL", error.message)
        }
        options.clientId = clientId
        try self.init(options: options)
    }

    deinit {
        requester.stop()
        forwarding.cancel()
    }

    /// Starts the client if needed and waits until the broker accepts the connection.
    ///
    /// - Parameter timeout: How long to wait.
    /// - Throws: `MQTTError` `.timeout` when not connected in time; the client keeps trying until
    ///   ``disconnect()``.
    public func connect(timeout: Duration) async throws {
        try await requester.connect(timeout: timeout)
    }

    /// Subscribes to `filter` at QoS 1 and waits for the broker's SUBACK.
    ///
    /// A granted filter is subscribed again after every reconnect.
    ///
    /// - Parameters:
    ///   - filter: The topic filter.
    ///   - timeout: How long to wait for the SUBACK.
    /// - Throws: `ChimeClientError` `.transport` when the broker refuses the subscription (a
    ///   reason code of 0x80 or above); `MQTTError` `.noConnection` when not connected, `.timeout`
    ///   without a SUBACK in time.
    public func subscribe(_ filter: String, timeout: Duration) async throws {
        let code = try await requester.subscribe(filter, qos: 1, timeout: timeout)
        if code >= 0x80 {
            throw ChimeClientError(.transport, "the broker refused the subscription to \(filter) (reason code \(code))")
        }
    }

    /// Publishes a message with its MQTT 5 Response Topic and Correlation Data, as JSON, and waits
    /// for the broker's PUBACK (at QoS 1 or 2).
    ///
    /// - Parameters:
    ///   - topic: The topic to publish to.
    ///   - payload: The message's payload.
    ///   - qos: The MQTT QoS.
    ///   - responseTopic: The MQTT 5 Response Topic, or nil.
    ///   - correlationData: The MQTT 5 Correlation Data, or nil.
    ///   - timeout: How long to wait for the PUBACK.
    /// - Throws: `ChimeClientError` `.transport` when the broker refuses the message (a reason
    ///   code of 0x80 or above); `MQTTError` `.noConnection` when not connected, `.timeout` without
    ///   a PUBACK in time.
    public func publish(
        topic: String,
        payload: [UInt8],
        qos: Int,
        responseTopic: String?,
        correlationData: [UInt8]?,
        timeout: Duration
    ) async throws {
        let code = try await requester.publish(
            topic: topic,
            payload: payload,
            qos: qos,
            properties: Self.properties(responseTopic, correlationData),
            timeout: timeout
        )
        if code >= 0x80 { throw ChimeClientError(.transport, Self.refusal(topic, code)) }
    }

    /// Hands the command to libmosquitto at QoS 1 and returns, without waiting for the PUBACK.
    ///
    /// The caller waits for the reply, not for the PUBACK, which only calls `refused` when it
    /// refuses the command. libmosquitto sends the command again after a reconnect.
    ///
    /// - Parameters:
    ///   - topic: The command's topic, `P/{deviceId}/cmd/{op}`.
    ///   - payload: The command.
    ///   - responseTopic: Where chimed is to answer.
    ///   - correlationData: What chimed copies into the reply.
    ///   - timeout: Not used: nothing is waited for.
    ///   - refused: Called on libmosquitto's network thread with a description of the refusal when
    ///     the broker's PUBACK refuses the command (a reason code of 0x80 or above).
    /// - Throws: `MQTTError` `.noConnection` when not connected.
    public func publishCommand(
        topic: String,
        payload: [UInt8],
        responseTopic: String,
        correlationData: [UInt8],
        timeout: Duration,
        refused: @escaping @Sendable (String) -> Void
    ) async throws {
        let properties = Self.properties(responseTopic, correlationData)
        try requester.publish(topic: topic, payload: payload, qos: 1, properties: properties) { code in
            if code >= 0x80 { refused(Self.refusal(topic, code)) }
        }
    }

    /// A command's properties: its reply's topic and correlation, and JSON content.
    private static func properties(_ responseTopic: String?, _ correlationData: [UInt8]?) -> MQTTPublishProperties {
        MQTTPublishProperties(
            responseTopic: responseTopic,
            correlationData: correlationData,
            contentType: "application/json"
        )
    }

    private static func refusal(_ topic: String, _ code: Int32) -> String {
        "the broker refused the message on \(topic) (reason code \(code))"
    }

    /// Stops the client, fails the requester's waits in progress and finishes ``incoming``.
    public func disconnect() async {
        requester.stop()
    }
}

extension ChimeNotificationCenter {
    /// A center for `deviceId` over its own ``MQTTChimeTransport`` to `brokerURL`.
    ///
    /// Nothing connects before the first call.
    ///
    /// - Parameters:
    ///   - deviceId: The device, 1 to 128 characters of `A-Z a-z 0-9 _ . : @ -`.
    ///   - brokerURL: `mqtt://[user:password@]host[:port]` or `mqtts://...`
    ///     (`mqtt://127.0.0.1:1883`), with the device account's credentials in it.
    ///   - clientId: The MQTT client id; nil lets the broker assign one.
    ///   - configuration: How to address chimed and wait for it.
    /// - Throws: `invalidArgument` for an invalid device id, broker URL or configuration.
    public convenience init(
        deviceId: String,
        brokerURL: String,
        clientId: String? = nil,
        configuration: Configuration = Configuration()
    ) throws(ChimeClientError) {
        try self.init(
            deviceId: deviceId,
            transport: try MQTTChimeTransport(brokerURL: brokerURL, clientId: clientId),
            configuration: configuration
        )
    }

    /// A center for `deviceId` over its own ``MQTTChimeTransport`` with these options.
    ///
    /// Nothing connects before the first call.
    ///
    /// - Parameters:
    ///   - deviceId: The device, 1 to 128 characters of `A-Z a-z 0-9 _ . : @ -`.
    ///   - options: The broker, the account and the session (MQTT 5).
    ///   - configuration: How to address chimed and wait for it.
    /// - Throws: `invalidArgument` for an invalid device id, options or configuration.
    public convenience init(
        deviceId: String,
        mqtt options: MQTTOptions,
        configuration: Configuration = Configuration()
    ) throws(ChimeClientError) {
        try self.init(
            deviceId: deviceId,
            transport: try MQTTChimeTransport(options: options),
            configuration: configuration
        )
    }
}

extension ChimeBackend {
    /// A backend over its own ``MQTTChimeTransport`` to `brokerURL`.
    ///
    /// Nothing connects before the first call.
    ///
    /// - Parameters:
    ///   - brokerURL: The URL with the backend account's credentials in it
    ///     (`mqtt://backend:secret@127.0.0.1:1883`).
    ///   - clientId: The MQTT client id; nil lets the broker assign one.
    ///   - configuration: How to address chimed and wait for it, with no `replyTopic`.
    /// - Throws: `invalidArgument` for an invalid broker URL or configuration.
    public convenience init(
        brokerURL: String,
        clientId: String? = nil,
        configuration: Configuration = Configuration()
    ) throws(ChimeClientError) {
        try self.init(
            transport: try MQTTChimeTransport(brokerURL: brokerURL, clientId: clientId),
            configuration: configuration
        )
    }

    /// A backend over its own ``MQTTChimeTransport`` with these options.
    ///
    /// Nothing connects before the first call.
    ///
    /// - Parameters:
    ///   - options: The broker, the backend account and the session (MQTT 5).
    ///   - configuration: How to address chimed and wait for it, with no `replyTopic`.
    /// - Throws: `invalidArgument` for invalid options or configuration.
    public convenience init(
        mqtt options: MQTTOptions,
        configuration: Configuration = Configuration()
    )
        throws(ChimeClientError)
    {
        try self.init(transport: try MQTTChimeTransport(options: options), configuration: configuration)
    }
}
