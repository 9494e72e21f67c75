/// A message the transport received on one of its subscriptions.
///
/// A ``ChimeTransport`` makes one of every MQTT message that arrives, a reply or a delivery, and
/// yields it on ``ChimeTransport/incoming``.
public struct ChimeTransportMessage: Sendable, Hashable {
    /// The topic the message was published to.
    public var topic: String
    /// The payload as received: a reply or a delivery is a JSON object in UTF-8.
    public var payload: [UInt8]
    /// The message's MQTT 5 Correlation Data; nil when it has none.
    ///
    /// chimed copies a command's Correlation Data into its reply (PROTOCOL.md section 4): it is
    /// what matches a reply to its command.
    public var correlationData: [UInt8]?

    /// A message as the transport received it.
    ///
    /// - Parameters:
    ///   - topic: The topic it was published to.
    ///   - payload: Its payload.
    ///   - correlationData: Its MQTT 5 Correlation Data, or nil.
    public init(topic: String, payload: [UInt8], correlationData: [UInt8]? = nil) {
        self.topic = topic
        self.payload = payload
        self.correlationData = correlationData
    }
}

/// The MQTT connection underneath a ``ChimeNotificationCenter`` or a ``ChimeBackend``.
///
/// It is the few things a center needs of MQTT, so that an app can plug in the MQTT stack it
/// already has (the package's own is `MQTTChimeTransport` in `ChimeClientMQTT`, over libmosquitto).
///
/// A transport must speak MQTT 5: commands carry a Response Topic and Correlation Data (PROTOCOL.md
/// section 4), and the replies must come back with their Correlation Data. It should keep itself
/// connected, and subscribe again to its filters after a reconnect.
///
/// Errors a transport throws reach the caller as ``ChimeClientError`` with code `.transport` and the
/// error's description as the message.
public protocol ChimeTransport: Sendable {
    /// Every message arriving on the transport's subscriptions, in order.
    ///
    /// The center (or backend) reads it once, from its first connect, until it finishes.
    var incoming: AsyncStream<ChimeTransportMessage> { get }

    /// Connects, and returns once the broker has accepted the connection.
    ///
    /// Called again after a failure; a connected transport returns at once.
    ///
    /// - Parameter timeout: How long to wait for the broker: ``ChimeNotificationCenter/Configuration/timeout``.
    /// - Throws: Any error when the broker cannot be reached in time or refuses the connection.
    func connect(timeout: Duration) async throws

    /// Subscribes to a topic filter at QoS 1 and returns once the broker granted it.
    ///
    /// - Parameters:
    ///   - filter: The topic filter: a reply topic, `P/{deviceId}/notifications`, or a filter with
    ///     `+` for a backend (`P/+/replies/backend-<random>`, `P/+/notifications`).
    ///   - timeout: How long to wait for the broker's SUBACK.
    /// - Throws: Any error when the subscription is not granted in time, or the broker refuses it
    ///   (a SUBACK reason code of 0x80 or above).
    func subscribe(_ filter: String, timeout: Duration) async throws

    /// Publishes a message with the MQTT 5 Response Topic and Correlation Data given, and returns
    /// once the broker has it (its PUBACK, for QoS 1).
    ///
    /// - Parameters:
    ///   - topic: The topic to publish to, `P/{deviceId}/cmd/{op}` for a command.
    ///   - payload: The message's payload.
    ///   - qos: The MQTT QoS; the center uses 1.
    ///   - responseTopic: The MQTT 5 Response Topic, or nil for none.
    ///   - correlationData: The MQTT 5 Correlation Data, or nil for none.
    ///   - timeout: How long to wait for the broker's acknowledgement.
    /// - Throws: Any error when the message cannot be published, the broker refuses it (a PUBACK
    ///   reason code of 0x80 or above), or does not acknowledge it in time.
    func publish(
        topic: String,
        payload: [UInt8],
        qos: Int,
        responseTopic: String?,
        correlationData: [UInt8]?,
        timeout: Duration
    ) async throws

    /// Publishes a command at QoS 1 with its Response Topic and Correlation Data, and may return
    /// as soon as the connection has taken it, before the broker's PUBACK.
    ///
    /// The command's reply is the acknowledgement that matters, and a command without one is sent
    /// again. A transport that returns early calls `refused` with a message if the broker's PUBACK
    /// refuses the command (reason code 0x80 or above: not authorized, ...), so that the call fails
    /// at once instead of waiting for a reply that cannot come. The default calls
    /// ``publish(topic:payload:qos:responseTopic:correlationData:timeout:)`` and waits.
    ///
    /// - Parameters:
    ///   - topic: The command's topic, `P/{deviceId}/cmd/{op}`.
    ///   - payload: The command, a JSON object with its `requestId`.
    ///   - responseTopic: Where chimed is to answer: the center's reply topic.
    ///   - correlationData: What chimed copies into the reply: the `requestId`'s bytes.
    ///   - timeout: How long a transport that waits for the PUBACK may wait.
    ///   - refused: Called, from any thread, with a description of the refusal when the broker's
    ///     PUBACK refuses a command this call did not wait for.
    /// - Throws: Any error when the command cannot be published; the center reports it as
    ///   ``ChimeClientError/Code/transport``.
    func publishCommand(
        topic: String,
        payload: [UInt8],
        responseTopic: String,
        correlationData: [UInt8],
        timeout: Duration,
        refused: @escaping @Sendable (String) -> Void
    ) async throws

    /// Disconnects cleanly and finishes ``incoming``.
    func disconnect() async
}

extension ChimeTransport {
    /// Publishes the command with ``publish(topic:payload:qos:responseTopic:correlationData:timeout:)``
    /// at QoS 1, and returns once the broker's PUBACK accepted it.
    ///
    /// It never calls `refused`: a refusing PUBACK is the error `publish` throws.
    ///
    /// - Parameters:
    ///   - topic: The command's topic, `P/{deviceId}/cmd/{op}`.
    ///   - payload: The command, a JSON object with its `requestId`.
    ///   - responseTopic: Where chimed is to answer.
    ///   - correlationData: What chimed copies into the reply.
    ///   - timeout: How long to wait for the broker's PUBACK.
    ///   - refused: Not called.
    /// - Throws: What ``publish(topic:payload:qos:responseTopic:correlationData:timeout:)`` throws.
    public func publishCommand(
        topic: String,
        payload: [UInt8],
        responseTopic: String,
        correlationData: [UInt8],
        timeout: Duration,
        refused: @escaping @Sendable (String) -> Void
    ) async throws {
        try await publish(
            topic: topic,
            payload: payload,
            qos: 1,
            responseTopic: responseTopic,
            correlationData: correlationData,
            timeout: timeout
        )
    }
}
