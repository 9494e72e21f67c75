/// How `MQTTClient` connects. A plain value: build it from a URL or field by field, then hand it over.
public struct MQTTOptions: Sendable, Hashable {
    /// The MQTT protocol level of the CONNECT.
    public enum ProtocolVersion: Sendable, Hashable {
        /// MQTT 5.0: properties, session expiry, reason codes. The default.
        case v5
        /// MQTT 3.1.1: no properties; a persistent session never expires on its own.
        case v311
    }

    /// Broker host name or IP address. Default `127.0.0.1`.
    public var host: String
    /// Broker TCP port. Default 1883 (8883 for `mqtts://` URLs).
    public var port: Int
    /// TLS, verifying the broker's certificate and host name against the system's CA certificates
    /// (`MOSQ_OPT_TLS_USE_OS_CERTS`), or against `tlsCAFile` when set.
    public var useTLS: Bool = false
    /// With `useTLS`: a PEM file of CA certificates to trust instead of the system's (a private CA).
    public var tlsCAFile: String?
    public var username: String?
    public var password: String?
    /// Client identifier. Needed, and must be stable, for a persistent session (`cleanStart == false`);
    /// nil lets the broker assign one (MQTT 5) or libmosquitto generate one (MQTT 3.1.1).
    public var clientId: String?
    public var protocolVersion: ProtocolVersion = .v5
    /// True: start with a fresh session. False: resume the stored session of `clientId`, if any.
    public var cleanStart: Bool = true
    /// MQTT 5 Session Expiry Interval in seconds, sent in every CONNECT (first and automatic reconnects).
    /// Must be > 0 for a session to outlive a disconnect; `UInt32.max` never expires. Ignored on 3.1.1.
    public var sessionExpiryInterval: UInt32 = 0
    /// Keep-alive in seconds (5...65535). Default 30.
    public var keepAlive: Int = 30
    /// Published by the broker if we vanish without a clean DISCONNECT.
    public var will: MQTTWill?
    /// Delay before each reconnect attempt: starts at the lower bound, doubles after each failed
    /// attempt, capped at the upper bound, and restarts from the lower bound once a connection succeeds.
    public var reconnectDelay: ClosedRange<Duration> = .milliseconds(500) ... .seconds(5)
    /// How many outgoing QoS 1 messages may await their PUBACK at once (`MOSQ_OPT_SEND_MAXIMUM`, 1...65535).
    /// On MQTT 5 the broker's Receive Maximum caps it: mosquitto announces its `max_inflight_messages`
    /// (default 20; 0 announces none). Messages beyond the window wait in libmosquitto's queue.
    public var maxInflight: Int = 1000
    /// How many incoming QoS 1 messages the broker may send before our PUBACKs (MQTT 5 Receive Maximum,
    /// `MOSQ_OPT_RECEIVE_MAXIMUM`, 1...65535). The broker may apply a lower limit of its own.
    public var receiveMaximum: Int = 1000

    /// Options for `host:port`, everything else at its default.
    public init(host: String = "127.0.0.1", port: Int = 1883) {
        self.host = host
        self.port = port
    }

    /// Parses `mqtt://[user[:password]@]host[:port]` or `mqtts://...` (TLS). Default ports 1883 and 8883.
    ///
    /// The user name and password may be percent-encoded (`%40` for `@`); an IPv6 address goes in
    /// brackets (`mqtt://[::1]:1883`). A trailing `/` is allowed; a path, query or fragment is not.
    /// - Throws: `MQTTError` with code `.invalidArgument` and a message naming the problem.
    public init(url: String) throws(MQTTError) {
        func invalid(_ why: String) -> MQTTError {
            MQTTError(.invalidArgument, "invalid broker URL '\(url)': \(why)", function: "MQTTOptions(url:)")
        }
        guard let schemeEnd = url.firstRange(of: "://") else {
            throw invalid("expected mqtt://host[:port] or mqtts://host[:port]")
        }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        let useTLS: Bool
        switch scheme {
        case "mqtt": useTLS = false
        case "mqtts": useTLS = true
        default: throw invalid("unsupported scheme '\(scheme)', use mqtt:// or mqtts://")
        }
        var rest = url[schemeEnd.upperBound...]
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if let bad = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            throw invalid("unexpected '\(rest[bad...])' after the host; only mqtt://host[:port] is accepted")
        }

        var username: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user: Substring
            if let colon = userInfo.firstIndex(of: ":") {
                user = userInfo[..<colon]
                guard let decoded = Self.percentDecoded(userInfo[userInfo.index(after: colon)...]) else {
                    throw invalid("the password has an invalid percent escape")
                }
                password = decoded
            } else {
                user = userInfo
            }
            guard let decoded = Self.percentDecoded(user), !decoded.isEmpty else {
                throw invalid("the user name is empty or has an invalid percent escape")
            }
            username = decoded
        }

        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("unclosed '[' in the IPv6 address") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("expected ':port' after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw invalid("the host is empty") }
        if host.contains(where: { $0 == " " || $0 == "@" || $0 == "[" || $0 == "]" }) {
            throw invalid("'\(host)' is not a host name")
        }
        if host.contains(":") && !rest.hasPrefix("[") {
            throw invalid("an IPv6 address goes in brackets: mqtt://[::1]:1883")
        }

        var port = useTLS ? 8883 : 1883
        if let portText {
            guard let value = Int(portText), portText.allSatisfy(\.isASCII), (1...65535).contains(value) else {
                throw invalid("the port must be a number from 1 to 65535, got '\(portText)'")
            }
            port = value
        }

        self.init(host: String(host), port: port)
        self.useTLS = useTLS
        self.username = username
        self.password = password
    }

    /// Decodes `%XX` escapes; nil if an escape is malformed or the result is not UTF-8.
    private static func percentDecoded(_ text: Substring) -> String? {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        var utf8 = text.utf8[...]
        while let byte = utf8.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard utf8.count >= 2, let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
            else { return nil }
            bytes.append(value)
            utf8 = utf8.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}
