@_exported import ChimeClient
import ChimeMQTT

/// ``ChimeTransport`` over ChimeMQTT's `MQTTRequester` (libmosquitto), MQTT 5: the transport of
/// this package. It reconnects by itself and subscribes again after a reconnect.
public final class MQTTChimeTransport: ChimeTransport {
    /// The requester underneath, for anything else the app wants of the connection.
    public let requester: MQTTRequester
    public let incoming: AsyncStream<ChimeTransportMessage>
    private let forwarding: Task<Void, Never>

    /// A transport with these options; nothing connects before ``connect(timeout:)``. For a
    /// persistent session (deliveries queued by the broker while the app is away), set a stable
    /// `clientId`, `cleanStart = false` and a `sessionExpiryInterval`.
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

    public func connect(timeout: Duration) async throws {
        try await requester.connect(timeout: timeout)
    }

    public func subscribe(_ filter: String, timeout: Duration) async throws {
        let code = try await requester.subscribe(filter, qos: 1, timeout: timeout)
        if code >= 0x80 {
            throw ChimeClientError(.transport, "the broker refused the subscription to \(filter) (reason code \(code))")
        }
    }

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

    /// Hands the command to libmosquitto and returns: the caller waits for the reply, not for the
    /// PUBACK, which only calls `refused` when it refuses the command.
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

    public func disconnect() async {
        requester.stop()
    }
}

extension ChimeNotificationCenter {
    /// A center for `deviceId` over its own ``MQTTChimeTransport`` to `brokerURL`
    /// (`mqtt://127.0.0.1:1883`).
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
    /// A backend over its own ``MQTTChimeTransport`` to `brokerURL`
    /// (`mqtt://backend:secret@127.0.0.1:1883`), the account's credentials in the URL.
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
    public convenience init(
        mqtt options: MQTTOptions,
        configuration: Configuration = Configuration()
    )
        throws(ChimeClientError)
    {
        try self.init(transport: try MQTTChimeTransport(options: options), configuration: configuration)
    }
}
