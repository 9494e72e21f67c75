import CMosquitto

#if canImport(Glibc)
import Glibc
#endif

/// `mosquitto_lib_init` runs exactly once per process: a global `let` is initialised lazily and
/// thread-safely (swift_once). `mosquitto_lib_cleanup` is never called; the process exit frees it all.
private let libraryInitialization: Int32 = mosquitto_lib_init()

/// The one owner of a `struct mosquitto *`: creates it, registers the MQTT 5 callbacks with `self` as
/// the user-data pointer, and destroys it in `deinit`. Callbacks copy what they carry into Swift values
/// and hand them to `handler` at once; they never block (libmosquitto frees its buffers on return).
///
/// Threading: `handler` runs on whichever thread runs `loop()`. `loop`, `connect` and `reconnect`
/// must only be called from that one thread; the `set...` functions only before it starts.
///
/// `@unchecked Sendable` because the pointer is shared across threads, which is safe for the calls
/// that are made from other threads: Debian builds libmosquitto with threading, and `publish`,
/// `subscribe` and `disconnect` take its internal mutexes (they are meant to be called while
/// another thread runs the loop). `mosquitto_threaded_set(true)` stops them from writing to the
/// socket themselves. The object outlives the network thread because that thread holds a
/// strong reference to it.
final class Mosquitto: @unchecked Sendable {
    /// What the callbacks report, already copied into Swift values.
    enum Event: Sendable {
        /// CONNACK: `reasonCode` 0 is success; `sessionPresent` from its flags.
        case connect(reasonCode: Int32, sessionPresent: Bool)
        /// The socket closed: 0 after our DISCONNECT, else a MOSQ_ERR_* or the broker's DISCONNECT reason.
        case disconnect(reasonCode: Int32)
        case message(MQTTMessage)
        /// PUBACK for QoS 1 (or "written" for QoS 0).
        case publish(messageId: Int32, reasonCode: Int32)
        /// SUBACK with the granted QoS per filter (0x80 and above: refused).
        case subscribe(messageId: Int32, grantedQoS: [Int32])
    }

    typealias Handler = @Sendable (Event) -> Void

    private let handle: OpaquePointer
    private let handler: Handler
    let isV5: Bool

    /// Creates the client (`mosquitto_new`) and registers the callbacks.
    /// - Throws: `.invalidArgument` when `cleanStart` is false without a client id; `.noMemory`.
    init(
        clientId: String?,
        cleanStart: Bool,
        protocolVersion: MQTTOptions.ProtocolVersion,
        handler: @escaping Handler
    ) throws(MQTTError) {
        try MQTTError.check(libraryInitialization, "mosquitto_lib_init")
        guard let handle = mosquitto_new(clientId, cleanStart, nil) else {
            let code: MQTTError.Code = Glibc.errno == EINVAL ? .invalidArgument : .noMemory
            let why = code == .invalidArgument ? "a persistent session (cleanStart false) needs a client id" : nil
            throw MQTTError(code, why, function: "mosquitto_new")
        }
        self.handle = handle
        self.handler = handler
        self.isV5 = protocolVersion == .v5
        mosquitto_user_data_set(handle, Unmanaged.passUnretained(self).toOpaque())
        // From here on `self` is fully initialised: if a call throws, deinit destroys the handle.
        try setOption(MOSQ_OPT_PROTOCOL_VERSION, isV5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311)
        try MQTTError.check(mosquitto_threaded_set(handle, true), "mosquitto_threaded_set")
        registerCallbacks()
    }

    deinit {
        mosquitto_destroy(handle)
    }

    private static func owner(_ userData: UnsafeMutableRawPointer?) -> Mosquitto {
        Unmanaged<Mosquitto>.fromOpaque(userData!).takeUnretainedValue()
    }

    private func registerCallbacks() {
        mosquitto_connect_v5_callback_set(handle) { _, userData, reasonCode, flags, _ in
            Mosquitto.owner(userData).handler(.connect(reasonCode: reasonCode, sessionPresent: flags & 1 != 0))
        }
        mosquitto_disconnect_v5_callback_set(handle) { _, userData, reasonCode, _ in
            Mosquitto.owner(userData).handler(.disconnect(reasonCode: reasonCode))
        }
        mosquitto_publish_v5_callback_set(handle) { _, userData, messageId, reasonCode, _ in
            Mosquitto.owner(userData).handler(.publish(messageId: messageId, reasonCode: reasonCode))
        }
        mosquitto_subscribe_v5_callback_set(handle) { _, userData, messageId, count, granted, _ in
            let grantedQoS = Array(UnsafeBufferPointer(start: granted, count: Int(max(count, 0))))
            Mosquitto.owner(userData).handler(.subscribe(messageId: messageId, grantedQoS: grantedQoS))
        }
        mosquitto_message_v5_callback_set(handle) { _, userData, message, properties in
            guard let message else { return }
            Mosquitto.owner(userData).handler(.message(Mosquitto.copy(message.pointee, properties)))
        }
    }

    // MARK: Configuration (before the network thread starts)

    func setOption(_ option: mosq_opt_t, _ value: Int32) throws(MQTTError) {
        try MQTTError.check(mosquitto_int_option(handle, option, value), "mosquitto_int_option")
    }

    /// TLS, trusting the CA certificates in a PEM file (`mosquitto_tls_set`).
    func setTrustedCertificates(_ caFile: String) throws(MQTTError) {
        try MQTTError.check(mosquitto_tls_set(handle, caFile, nil, nil, nil, nil), "mosquitto_tls_set")
    }

    func setCredentials(username: String?, password: String?) throws(MQTTError) {
        try MQTTError.check(mosquitto_username_pw_set(handle, username, password), "mosquitto_username_pw_set")
    }

    func setWill(_ will: MQTTWill) throws(MQTTError) {
        var properties = try PropertyList(isV5 ? will.properties : .init())
        let result = will.payload.withUnsafeBytes { payload in
            mosquitto_will_set_v5(
                handle,
                will.topic,
                Int32(payload.count),
                payload.baseAddress,
                Int32(will.qos),
                will.retain,
                properties.head
            )
        }
        try MQTTError.check(result, "mosquitto_will_set_v5")
        properties.releaseOwnership()  // libmosquitto owns the list once the call succeeded
    }

    // MARK: Network thread only

    /// Connects (blocking TCP connect, then CONNECT is queued) and stores the host, port and the CONNECT
    /// properties, which libmosquitto 2.0 sends again on every `reconnect()`. Stores them even when the
    /// connect itself fails, so `reconnect()` can be used from then on.
    func connect(host: String, port: Int, keepAlive: Int, sessionExpiryInterval: UInt32) throws(MQTTError) {
        var properties = PropertyList()
        if isV5 && sessionExpiryInterval > 0 {
            try properties.add(sessionExpiryInterval, as: MQTT_PROP_SESSION_EXPIRY_INTERVAL)
        }
        let result = mosquitto_connect_bind_v5(handle, host, Int32(port), Int32(keepAlive), nil, properties.head)
        try MQTTError.check(result, "mosquitto_connect_bind_v5")
    }

    /// Reconnects (blocking TCP connect) with the host, port and properties of `connect`.
    func reconnect() throws(MQTTError) {
        try MQTTError.check(mosquitto_reconnect(handle), "mosquitto_reconnect")
    }

    /// One pass of the network loop: waits up to `timeoutMilliseconds` for the socket, reads, writes,
    /// keeps alive. Throws when the connection is gone (the disconnect callback has run by then).
    func loop(timeoutMilliseconds: Int32) throws(MQTTError) {
        try MQTTError.check(mosquitto_loop(handle, timeoutMilliseconds, 1), "mosquitto_loop")
    }

    // MARK: Any thread

    /// Queues a DISCONNECT (the will is not sent) and wakes the network loop.
    func disconnect() throws(MQTTError) {
        try MQTTError.check(mosquitto_disconnect(handle), "mosquitto_disconnect")
    }

    /// Queues a PUBLISH and returns its message id.
    ///
    /// libmosquitto returns `MOSQ_ERR_NO_CONN` for a QoS 1 or 2 message while the socket is down, but has
    /// queued it by then: it is sent when the next connection is accepted, and its PUBACK reported under
    /// this message id. That is success here. QoS 0 messages are not queued.
    func publish(
        topic: String,
        payload: [UInt8],
        qos: Int,
        retain: Bool,
        properties: MQTTPublishProperties
    ) throws(MQTTError) -> Int32 {
        var messageId: Int32 = 0
        let list = try PropertyList(isV5 ? properties : .init())
        let result = payload.withUnsafeBytes { payload in
            mosquitto_publish_v5(
                handle,
                &messageId,
                topic,
                Int32(payload.count),
                payload.baseAddress,
                Int32(qos),
                retain,
                list.head
            )
        }
        if result == MQTTError.Code.noConnection.rawValue && qos > 0 && messageId != 0 {
            return messageId
        }
        try MQTTError.check(result, "mosquitto_publish_v5")
        return messageId
    }

    /// Queues a SUBSCRIBE and returns its message id.
    func subscribe(_ filter: String, qos: Int) throws(MQTTError) -> Int32 {
        var messageId: Int32 = 0
        try MQTTError.check(mosquitto_subscribe(handle, &messageId, filter, Int32(qos)), "mosquitto_subscribe")
        return messageId
    }

    /// Queues an UNSUBSCRIBE.
    func unsubscribe(_ filter: String) throws(MQTTError) {
        try MQTTError.check(mosquitto_unsubscribe(handle, nil, filter), "mosquitto_unsubscribe")
    }

    /// For tests: cuts the TCP connection without a DISCONNECT, as a network failure or a crash would,
    /// so the broker publishes the will. The network loop then notices and reconnects.
    func simulateConnectionLoss() {
        let socket = mosquitto_socket(handle)
        if socket >= 0 {
            shutdown(socket, Int32(SHUT_RDWR))
        }
    }

    // MARK: Copying messages out of the callback

    private static let responseTopic = Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue)
    private static let correlationData = Int32(MQTT_PROP_CORRELATION_DATA.rawValue)
    private static let contentType = Int32(MQTT_PROP_CONTENT_TYPE.rawValue)
    private static let userProperty = Int32(MQTT_PROP_USER_PROPERTY.rawValue)
    private static let messageExpiryInterval = Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue)

    private static func copy(_ message: mosquitto_message, _ properties: OpaquePointer?) -> MQTTMessage {
        let payload: [UInt8]
        if let bytes = message.payload, message.payloadlen > 0 {
            payload = Array(UnsafeRawBufferPointer(start: bytes, count: Int(message.payloadlen)))
        } else {
            payload = []
        }
        var copy = MQTTMessage(
            topic: message.topic.map { String(cString: $0) } ?? "",
            payload: payload,
            qos: Int(message.qos),
            retain: message.retain
        )
        copy.messageId = message.mid
        var property = properties
        while let current = property {
            readProperty(current, into: &copy)
            property = mosquitto_property_next(current)
        }
        return copy
    }

    /// Copies one property we care about; the read functions return malloc'ed copies that we free.
    private static func readProperty(_ property: OpaquePointer, into message: inout MQTTMessage) {
        let identifier = mosquitto_property_identifier(property)
        switch identifier {
        case responseTopic, contentType:
            var value: UnsafeMutablePointer<CChar>?
            guard mosquitto_property_read_string(property, identifier, &value, false) != nil, let value else { return }
            defer { free(value) }
            if identifier == responseTopic {
                message.responseTopic = String(cString: value)
            } else {
                message.contentType = String(cString: value)
            }
        case correlationData:
            var value: UnsafeMutableRawPointer?
            var length: UInt16 = 0
            guard mosquitto_property_read_binary(property, identifier, &value, &length, false) != nil else { return }
            defer { free(value) }
            message.correlationData = value.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? []
        case userProperty:
            var name: UnsafeMutablePointer<CChar>?
            var value: UnsafeMutablePointer<CChar>?
            guard mosquitto_property_read_string_pair(property, identifier, &name, &value, false) != nil else {
                return
            }
            defer {
                free(name)
                free(value)
            }
            let pair = MQTTUserProperty(
                name.map { String(cString: $0) } ?? "",
                value.map { String(cString: $0) } ?? ""
            )
            message.userProperties.append(pair)
        case messageExpiryInterval:
            var value: UInt32 = 0
            if mosquitto_property_read_int32(property, identifier, &value, false) != nil {
                message.messageExpiryInterval = value
            }
        default:
            break
        }
    }
}

/// A libmosquitto property list that frees itself, unless its ownership was handed to libmosquitto.
struct PropertyList: ~Copyable {
    private(set) var head: OpaquePointer?

    init() {}

    /// Builds the list for the set MQTT 5 publish properties (nothing, and no allocation, when none is set).
    init(_ properties: MQTTPublishProperties) throws(MQTTError) {
        guard !properties.isEmpty else { return }
        var list = PropertyList()
        if let value = properties.contentType {
            try list.add(value, as: MQTT_PROP_CONTENT_TYPE)
        }
        if let value = properties.responseTopic {
            try list.add(value, as: MQTT_PROP_RESPONSE_TOPIC)
        }
        if let value = properties.correlationData {
            try list.add(value, as: MQTT_PROP_CORRELATION_DATA)
        }
        for property in properties.userProperties {
            let result = mosquitto_property_add_string_pair(
                &list.head,
                Int32(MQTT_PROP_USER_PROPERTY.rawValue),
                property.name,
                property.value
            )
            try MQTTError.check(result, "mosquitto_property_add_string_pair")
        }
        if let value = properties.messageExpiryInterval {
            try list.add(value, as: MQTT_PROP_MESSAGE_EXPIRY_INTERVAL)
        }
        self.head = list.head
        list.releaseOwnership()
    }

    mutating func add(_ value: String, as identifier: mqtt5_property) throws(MQTTError) {
        let result = mosquitto_property_add_string(&head, Int32(identifier.rawValue), value)
        try MQTTError.check(result, "mosquitto_property_add_string")
    }

    mutating func add(_ value: UInt32, as identifier: mqtt5_property) throws(MQTTError) {
        let result = mosquitto_property_add_int32(&head, Int32(identifier.rawValue), value)
        try MQTTError.check(result, "mosquitto_property_add_int32")
    }

    mutating func add(_ value: [UInt8], as identifier: mqtt5_property) throws(MQTTError) {
        guard value.count <= Int(UInt16.max) else {
            throw MQTTError(.invalidArgument, "binary property longer than 65535 bytes", function: "PropertyList")
        }
        let result = value.withUnsafeBytes { bytes in
            mosquitto_property_add_binary(&head, Int32(identifier.rawValue), bytes.baseAddress, UInt16(bytes.count))
        }
        try MQTTError.check(result, "mosquitto_property_add_binary")
    }

    /// Forgets the list without freeing it: libmosquitto (or another list) took it.
    mutating func releaseOwnership() {
        head = nil
    }

    deinit {
        var list = head
        if list != nil {
            mosquitto_property_free_all(&list)
        }
    }
}
