import CMosquitto

#if canImport(Glibc)
import Glibc
#endif

/// An error from the MQTT layer: a libmosquitto return code, with the `errno` that came with it when
/// there is one, a message and the C function (or operation) that produced it.
///
/// Two errors are equal when their codes are equal, so tests can write `#expect(throws: MQTTError(.timeout))`.
public struct MQTTError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A libmosquitto result code (`enum mosq_err_t`), as swift-system's `Errno` wraps `errno`.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: Int32

        public init(rawValue: Int32) {
            self.rawValue = rawValue
        }

        private init(_ value: mosq_err_t) {
            self.rawValue = Int32(value.rawValue)
        }

        /// `MOSQ_ERR_AUTH_CONTINUE`: extended authentication continues.
        public static let authContinue = Code(MOSQ_ERR_AUTH_CONTINUE)
        /// `MOSQ_ERR_NO_SUBSCRIBERS`: the broker has no subscriber for the message.
        public static let noSubscribers = Code(MOSQ_ERR_NO_SUBSCRIBERS)
        /// `MOSQ_ERR_SUB_EXISTS`: the subscription exists already.
        public static let subscriptionExists = Code(MOSQ_ERR_SUB_EXISTS)
        /// `MOSQ_ERR_CONN_PENDING`: the connection is still being made.
        public static let connectionPending = Code(MOSQ_ERR_CONN_PENDING)
        /// `MOSQ_ERR_SUCCESS`: never thrown; here for completeness.
        public static let success = Code(MOSQ_ERR_SUCCESS)
        /// `MOSQ_ERR_NOMEM`: out of memory.
        public static let noMemory = Code(MOSQ_ERR_NOMEM)
        /// `MOSQ_ERR_PROTOCOL`: the peer broke the MQTT protocol (also a refused MQTT 5 CONNACK).
        public static let `protocol` = Code(MOSQ_ERR_PROTOCOL)
        /// `MOSQ_ERR_INVAL`: an invalid argument, option or URL.
        public static let invalidArgument = Code(MOSQ_ERR_INVAL)
        /// `MOSQ_ERR_NO_CONN`: not connected to the broker.
        public static let noConnection = Code(MOSQ_ERR_NO_CONN)
        /// `MOSQ_ERR_CONN_REFUSED`: the broker refused the connection (MQTT 3.1.1 CONNACK).
        public static let connectionRefused = Code(MOSQ_ERR_CONN_REFUSED)
        /// `MOSQ_ERR_NOT_FOUND`: not found.
        public static let notFound = Code(MOSQ_ERR_NOT_FOUND)
        /// `MOSQ_ERR_CONN_LOST`: the connection was lost.
        public static let connectionLost = Code(MOSQ_ERR_CONN_LOST)
        /// `MOSQ_ERR_TLS`: a TLS error.
        public static let tls = Code(MOSQ_ERR_TLS)
        /// `MOSQ_ERR_PAYLOAD_SIZE`: the payload is too large.
        public static let payloadSize = Code(MOSQ_ERR_PAYLOAD_SIZE)
        /// `MOSQ_ERR_NOT_SUPPORTED`: not supported (for example MQTT 5 properties on MQTT 3.1.1).
        public static let notSupported = Code(MOSQ_ERR_NOT_SUPPORTED)
        /// `MOSQ_ERR_AUTH`: authentication failed.
        public static let auth = Code(MOSQ_ERR_AUTH)
        /// `MOSQ_ERR_ACL_DENIED`: the broker's access control denied it.
        public static let aclDenied = Code(MOSQ_ERR_ACL_DENIED)
        /// `MOSQ_ERR_UNKNOWN`: an unknown error.
        public static let unknown = Code(MOSQ_ERR_UNKNOWN)
        /// `MOSQ_ERR_ERRNO`: a system call failed; `MQTTError.systemErrno` says why.
        public static let system = Code(MOSQ_ERR_ERRNO)
        /// `MOSQ_ERR_EAI`: the host name could not be resolved (`getaddrinfo`); `systemErrno` holds the `EAI_*` code.
        public static let hostLookup = Code(MOSQ_ERR_EAI)
        /// `MOSQ_ERR_PROXY`: a SOCKS proxy error.
        public static let proxy = Code(MOSQ_ERR_PROXY)
        /// `MOSQ_ERR_PLUGIN_DEFER`: a broker plugin deferred the decision.
        public static let pluginDefer = Code(MOSQ_ERR_PLUGIN_DEFER)
        /// `MOSQ_ERR_MALFORMED_UTF8`: a string is not valid UTF-8.
        public static let malformedUTF8 = Code(MOSQ_ERR_MALFORMED_UTF8)
        /// `MOSQ_ERR_KEEPALIVE`: the broker did not answer within the keep-alive interval.
        public static let keepAlive = Code(MOSQ_ERR_KEEPALIVE)
        /// `MOSQ_ERR_LOOKUP`: a DNS SRV lookup failed.
        public static let lookup = Code(MOSQ_ERR_LOOKUP)
        /// `MOSQ_ERR_MALFORMED_PACKET`: a malformed packet.
        public static let malformedPacket = Code(MOSQ_ERR_MALFORMED_PACKET)
        /// `MOSQ_ERR_DUPLICATE_PROPERTY`: an MQTT 5 property appears twice where it may not.
        public static let duplicateProperty = Code(MOSQ_ERR_DUPLICATE_PROPERTY)
        /// `MOSQ_ERR_TLS_HANDSHAKE`: the TLS handshake failed.
        public static let tlsHandshake = Code(MOSQ_ERR_TLS_HANDSHAKE)
        /// `MOSQ_ERR_QOS_NOT_SUPPORTED`: the broker does not support that QoS.
        public static let qosNotSupported = Code(MOSQ_ERR_QOS_NOT_SUPPORTED)
        /// `MOSQ_ERR_OVERSIZE_PACKET`: the packet is larger than the broker accepts.
        public static let oversizePacket = Code(MOSQ_ERR_OVERSIZE_PACKET)
        /// `MOSQ_ERR_OCSP`: OCSP stapling failed.
        public static let ocsp = Code(MOSQ_ERR_OCSP)
        /// `MOSQ_ERR_TIMEOUT`: something did not happen in time (also a cancelled wait in `MQTTRequester`).
        public static let timeout = Code(MOSQ_ERR_TIMEOUT)
        /// `MOSQ_ERR_RETAIN_NOT_SUPPORTED`: the broker does not support retained messages.
        public static let retainNotSupported = Code(MOSQ_ERR_RETAIN_NOT_SUPPORTED)
        /// `MOSQ_ERR_TOPIC_ALIAS_INVALID`: an invalid topic alias.
        public static let topicAliasInvalid = Code(MOSQ_ERR_TOPIC_ALIAS_INVALID)
        /// `MOSQ_ERR_ADMINISTRATIVE_ACTION`: the broker disconnected us by an administrative action.
        public static let administrativeAction = Code(MOSQ_ERR_ADMINISTRATIVE_ACTION)
        /// `MOSQ_ERR_ALREADY_EXISTS`: it exists already.
        public static let alreadyExists = Code(MOSQ_ERR_ALREADY_EXISTS)

        /// The C name of the code, such as `MOSQ_ERR_NO_CONN`.
        public var cName: String {
            switch self {
            case .authContinue: "MOSQ_ERR_AUTH_CONTINUE"
            case .noSubscribers: "MOSQ_ERR_NO_SUBSCRIBERS"
            case .subscriptionExists: "MOSQ_ERR_SUB_EXISTS"
            case .connectionPending: "MOSQ_ERR_CONN_PENDING"
            case .success: "MOSQ_ERR_SUCCESS"
            case .noMemory: "MOSQ_ERR_NOMEM"
            case .protocol: "MOSQ_ERR_PROTOCOL"
            case .invalidArgument: "MOSQ_ERR_INVAL"
            case .noConnection: "MOSQ_ERR_NO_CONN"
            case .connectionRefused: "MOSQ_ERR_CONN_REFUSED"
            case .notFound: "MOSQ_ERR_NOT_FOUND"
            case .connectionLost: "MOSQ_ERR_CONN_LOST"
            case .tls: "MOSQ_ERR_TLS"
            case .payloadSize: "MOSQ_ERR_PAYLOAD_SIZE"
            case .notSupported: "MOSQ_ERR_NOT_SUPPORTED"
            case .auth: "MOSQ_ERR_AUTH"
            case .aclDenied: "MOSQ_ERR_ACL_DENIED"
            case .unknown: "MOSQ_ERR_UNKNOWN"
            case .system: "MOSQ_ERR_ERRNO"
            case .hostLookup: "MOSQ_ERR_EAI"
            case .proxy: "MOSQ_ERR_PROXY"
            case .pluginDefer: "MOSQ_ERR_PLUGIN_DEFER"
            case .malformedUTF8: "MOSQ_ERR_MALFORMED_UTF8"
            case .keepAlive: "MOSQ_ERR_KEEPALIVE"
            case .lookup: "MOSQ_ERR_LOOKUP"
            case .malformedPacket: "MOSQ_ERR_MALFORMED_PACKET"
            case .duplicateProperty: "MOSQ_ERR_DUPLICATE_PROPERTY"
            case .tlsHandshake: "MOSQ_ERR_TLS_HANDSHAKE"
            case .qosNotSupported: "MOSQ_ERR_QOS_NOT_SUPPORTED"
            case .oversizePacket: "MOSQ_ERR_OVERSIZE_PACKET"
            case .ocsp: "MOSQ_ERR_OCSP"
            case .timeout: "MOSQ_ERR_TIMEOUT"
            case .retainNotSupported: "MOSQ_ERR_RETAIN_NOT_SUPPORTED"
            case .topicAliasInvalid: "MOSQ_ERR_TOPIC_ALIAS_INVALID"
            case .administrativeAction: "MOSQ_ERR_ADMINISTRATIVE_ACTION"
            case .alreadyExists: "MOSQ_ERR_ALREADY_EXISTS"
            default: "MOSQ_ERR(\(rawValue))"
            }
        }

        /// libmosquitto's own text for the code (`mosquitto_strerror`).
        public var text: String {
            String(cString: mosquitto_strerror(rawValue))
        }

        public var description: String { cName }
    }

    /// What went wrong, as a libmosquitto code.
    public let code: Code
    /// A sentence for people: what failed and why.
    public let message: String
    /// The `errno` for `.system`, the `EAI_*` code for `.hostLookup`; nil otherwise.
    public let systemErrno: Int32?
    /// The C function or the operation that failed, such as `mosquitto_publish_v5`.
    public let function: String?

    /// Creates an error; `message` defaults to libmosquitto's text for the code.
    public init(_ code: Code, _ message: String? = nil, systemErrno: Int32? = nil, function: String? = nil) {
        self.code = code
        self.message = message ?? code.text
        self.systemErrno = systemErrno
        self.function = function
    }

    public static func == (lhs: MQTTError, rhs: MQTTError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    public var description: String {
        let prefix = function.map { "\($0): " } ?? ""
        return "\(prefix)\(message) (\(code.cName))"
    }

    /// The one checker for libmosquitto return codes: returns on `MOSQ_ERR_SUCCESS`, throws otherwise.
    ///
    /// Call it straight after the C call, before anything else can change `errno`: for `MOSQ_ERR_ERRNO`
    /// it reads `errno` (and for `MOSQ_ERR_EAI` the `getaddrinfo` code libmosquitto leaves in `errno`).
    /// - Parameters:
    ///   - result: the C function's return value.
    ///   - function: the C function's name, for the error's `function` and description.
    /// - Throws: `MQTTError` with the code, unless `result` is `MOSQ_ERR_SUCCESS`.
    @inline(__always)
    static func check(_ result: Int32, _ function: String) throws(MQTTError) {
        if result == Code.success.rawValue { return }
        throw MQTTError(result: result, systemErrno: Glibc.errno, function: function)
    }

    /// The error for a libmosquitto result code, given the `errno` read right after the call.
    init(result: Int32, systemErrno: Int32, function: String) {
        let code = Code(rawValue: result)
        switch code {
        case .system:
            let text = String(cString: strerror(systemErrno))
            self.init(code, text, systemErrno: systemErrno, function: function)
        case .hostLookup:
            let text = String(cString: gai_strerror(systemErrno))
            self.init(code, "cannot resolve the host name: \(text)", systemErrno: systemErrno, function: function)
        default:
            self.init(code, nil, systemErrno: nil, function: function)
        }
    }
}
