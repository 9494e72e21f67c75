/// An MQTT 5 user property: a name and a value, both UTF-8. A message may carry several with the same name.
public struct MQTTUserProperty: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// A message received on a subscription, copied out of libmosquitto's buffers.
///
/// The MQTT 5 fields are nil (or empty) on MQTT 3.1.1 and when the sender did not set them.
public struct MQTTMessage: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: Int
    public var retain: Bool
    /// The packet identifier the broker sent it with (0 for QoS 0). A broker that sends a QoS 1
    /// message again (after a reconnection) uses the same identifier.
    public var messageId: Int32 = 0
    /// MQTT 5 Response Topic: where the sender wants the reply.
    public var responseTopic: String?
    /// MQTT 5 Correlation Data: opaque bytes to copy into the reply.
    public var correlationData: [UInt8]?
    /// MQTT 5 Content Type, such as `application/json`.
    public var contentType: String?
    /// MQTT 5 User Properties, in the order they were received.
    public var userProperties: [MQTTUserProperty]
    /// MQTT 5 Message Expiry Interval in seconds, as forwarded by the broker (the time left).
    public var messageExpiryInterval: UInt32?

    public init(
        topic: String,
        payload: [UInt8],
        qos: Int = 0,
        retain: Bool = false,
        responseTopic: String? = nil,
        correlationData: [UInt8]? = nil,
        contentType: String? = nil,
        userProperties: [MQTTUserProperty] = [],
        messageExpiryInterval: UInt32? = nil
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.contentType = contentType
        self.userProperties = userProperties
        self.messageExpiryInterval = messageExpiryInterval
    }

    /// The value of the first user property called `name`, if any.
    public func userProperty(_ name: String) -> String? {
        userProperties.first { $0.name == name }?.value
    }
}

/// The MQTT 5 properties a publish (or a will) may carry. All are ignored on MQTT 3.1.1.
public struct MQTTPublishProperties: Sendable, Hashable {
    public var responseTopic: String?
    public var correlationData: [UInt8]?
    public var contentType: String?
    public var userProperties: [MQTTUserProperty]
    /// Seconds after which the broker discards the message if it has not delivered it.
    public var messageExpiryInterval: UInt32?

    public init(
        responseTopic: String? = nil,
        correlationData: [UInt8]? = nil,
        contentType: String? = nil,
        userProperties: [MQTTUserProperty] = [],
        messageExpiryInterval: UInt32? = nil
    ) {
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.contentType = contentType
        self.userProperties = userProperties
        self.messageExpiryInterval = messageExpiryInterval
    }

    /// True when no property is set, so nothing needs to be built for libmosquitto.
    public var isEmpty: Bool {
        responseTopic == nil && correlationData == nil && contentType == nil && userProperties.isEmpty
            && messageExpiryInterval == nil
    }
}

/// The message the broker publishes for us when we vanish without a clean DISCONNECT
/// (network failure, crash, kill -9, keep-alive timeout). A clean `MQTTClient.stop()` does not send it.
public struct MQTTWill: Sendable, Hashable {
    public var topic: String
    public var payload: [UInt8]
    public var qos: Int
    public var retain: Bool
    /// MQTT 5 will properties (content type, message expiry, user properties, ...); ignored on MQTT 3.1.1.
    public var properties: MQTTPublishProperties

    public init(
        topic: String,
        payload: [UInt8],
        qos: Int = 1,
        retain: Bool = false,
        properties: MQTTPublishProperties = .init()
    ) {
        self.topic = topic
        self.payload = payload
        self.qos = qos
        self.retain = retain
        self.properties = properties
    }
}

/// What the network thread reports to `MQTTClient`'s event handler.
public enum MQTTEvent: Sendable {
    /// The broker accepted our CONNECT. `sessionPresent` is true when it resumed a stored session
    /// (subscriptions and queued messages kept). Emitted again after every automatic reconnect:
    /// subscribe again here, so subscriptions survive a broker that lost its sessions.
    case connected(sessionPresent: Bool)
    /// The connection ended. `reasonCode` is 0 when we asked for it (`stop()`); otherwise a libmosquitto
    /// code for a network failure (`MQTTError.Code`, such as 7 connection lost or 19 keep-alive), the
    /// reason code of an MQTT 5 DISCONNECT the broker sent (0x80 and above, such as 0x8E session taken
    /// over), or the refusal code of a CONNACK (1–5 on MQTT 3.1.1, 0x80 and above on MQTT 5).
    /// Emitted once per connection; failed reconnect attempts while the broker is down emit nothing.
    case disconnected(reasonCode: Int32)
    /// A message arrived on one of our subscriptions.
    case message(MQTTMessage)
    /// The broker acknowledged our QoS 1 publish `messageId` (PUBACK; `reasonCode` 0 or 0x10 "no matching
    /// subscribers" is success, 0x80 and above a refusal such as 0x87 not authorized). For QoS 0 it
    /// reports that the message was written to the socket, with reason 0.
    case published(messageId: Int32, reasonCode: Int32)
    /// The broker answered our SUBSCRIBE `messageId` (SUBACK): the QoS granted to each filter,
    /// in order, or a refusal code (0x80 and above, such as 0x87 not authorized).
    case subscribed(messageId: Int32, grantedQoS: [Int32])
}
