/// A message the transport received on one of the center's subscriptions.
public struct ChimeTransportMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    /// MQTT 5 Correlation Data: chimed copies the command's into its reply.
    public var correlationData: [UInt8]?

    public init(topic: String, payload: [UInt8], correlationData: [UInt8]? = nil) {
        self.topic = topic
        self.payload = payload
        self.correlationData = correlationData
    }
}

/// The MQTT connection underneath a ``ChimeNotificationCenter``: the few things it needs, so that
/// an app can plug in the MQTT stack it already has (the package's own is `MQTTChimeTransport` in
/// `ChimeClientMQTT`, over libmosquitto).
///
/// A transport must speak MQTT 5: commands carry a Response Topic and Correlation Data (PROTOCOL.md
/// section 4), and the replies must come back with their Correlation Data. It should keep itself
/// connected, and subscribe again to its filters after a reconnect.
///
/// Errors a transport throws reach the caller as ``ChimeClientError`` with code `.transport` and the
/// error's description as the message.
public protocol ChimeTransport: Sendable {
    /// Every message arriving on the transport's subscriptions, in order. The center reads it once,
    /// from its first ``ChimeNotificationCenter/connect()``, until it finishes.
    var incoming: AsyncStream<ChimeTransportMessage> { get }

    /// Connects, and returns once the broker has accepted the connection. Called again after a
    /// failure; a connected transport returns at once.
    func connect(timeout: Duration) async throws

    /// Subscribes to a topic filter at QoS 1 and returns once the broker granted it.
    func subscribe(_ filter: String, timeout: Duration) async throws

    /// Publishes a message (the center uses QoS 1) with the MQTT 5 Response Topic and Correlation
    /// Data given, and returns once the broker has it (its PUBACK, for QoS 1).
    func publish(
        topic: String,
        payload: [UInt8],
        qos: Int,
        responseTopic: String?,
        correlationData: [UInt8]?,
        timeout: Duration
    ) async throws

    /// Publishes a command at QoS 1 with its Response Topic and Correlation Data, and may return
    /// as soon as the connection has taken it, before the broker's PUBACK: the command's reply is
    /// the acknowledgement that matters, and a command without one is sent again. A transport
    /// that returns early calls `refused` with a message if the broker's PUBACK refuses the
    /// command (reason code 0x80 or above: not authorized, ...), so that the call fails at once
    /// instead of waiting for a reply that cannot come. The default calls
    /// ``publish(topic:payload:qos:responseTopic:correlationData:timeout:)`` and waits.
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
