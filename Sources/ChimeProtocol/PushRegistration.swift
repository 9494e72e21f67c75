/// Where a device's deliveries are also pushed while its app holds no MQTT connection: an APNs
/// device token, an FCM registration token or a Web Push subscription (PROTOCOL.md section 3.11).
public struct PushRegistration: Hashable, Sendable {
    /// The push service a registration is for.
    public enum Provider: String, CaseIterable, Hashable, Sendable {
        case apns, fcm, webpush
    }

    /// The address itself, as the platform gave it to the app.
    public enum Target: Hashable, Sendable {
        /// An APNs device token (hex), the app's bundle id (`apns-topic`), and whether the app was
        /// built for the sandbox (development) environment.
        case apns(token: String, topic: String, sandbox: Bool)
        /// An FCM registration token.
        case fcm(token: String)
        /// A browser's `PushSubscription`: the push service URL and the keys of RFC 8291.
        case webPush(endpoint: String, p256dh: String, auth: String)
    }

    public let target: Target

    public init(_ target: Target) { self.target = target }

    public var provider: Provider {
        switch target {
        case .apns: return .apns
        case .fcm: return .fcm
        case .webPush: return .webpush
        }
    }

    /// What tells two registrations of the provider apart: the token or the endpoint.
    var address: String {
        switch target {
        case .apns(let token, _, _): return token.lowercased()
        case .fcm(let token): return token
        case .webPush(let endpoint, _, _): return endpoint
        }
    }

    /// A short name of the registration that never shows its secret: the provider and eight hex
    /// digits of a hash of its token or endpoint (`apns-1a2b3c4d`). `removePush`, `history` and the
    /// logs name a registration by it.
    public var id: String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in address.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        let digits = String(hash >> 32, radix: 16)
        return "\(provider.rawValue)-" + String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// At most this many registrations per device.
    public static let maximumPerDevice = 10
    /// An APNs token: 32 bytes today, as 64 hex digits; Apple says tokens may grow, so up to 200.
    public static let apnsTokenLength = 64...200
    /// An APNs topic (bundle id, with a suffix such as `.voip`).
    public static let maxTopicLength = 255
    /// An FCM registration token (about 160 characters today).
    public static let maxFCMTokenLength = 4096
    /// A Web Push endpoint URL.
    public static let maxEndpointLength = 2048
}

/// What a `device` command changes of the device's push registrations.
public enum PushChange: Hashable, Sendable {
    /// `push`: these, and no others.
    case replace([PushRegistration])
    /// `addPush`: these besides the others (one with the same id replaces it).
    case add([PushRegistration])
    /// `removePush`: the registrations with these ids.
    case remove([String])

    /// The registrations after the change, in the order given, or `quota_exceeded` past
    /// ``PushRegistration/maximumPerDevice``.
    public func applied(to current: [PushRegistration]) -> [PushRegistration] {
        switch self {
        case .replace(let registrations): return registrations
        case .add(let added):
            let ids = Set(added.map(\.id))
            return current.filter { !ids.contains($0.id) } + added
        case .remove(let ids):
            let gone = Set(ids)
            return current.filter { !gone.contains($0.id) }
        }
    }
}

/// Which Web Push endpoints a device may register: the worker calls the URL a device gives it,
/// so a registration whose endpoint fails this policy is refused at `device` and never called
/// (PROTOCOL.md section 3.11). The addresses a host name resolves to are checked again when the
/// worker connects (ChimeHTTPClient's address policy).
public struct PushEndpointPolicy: Hashable, Sendable {
    /// Host names allowed: `fcm.googleapis.com` exactly, `*.push.apple.com` for any name under it.
    public var allowedHosts: [String]
    /// An IP literal of the loopback range is allowed (tests and a push service on the same host).
    public var allowLoopback: Bool
    /// An IP literal of a private range is allowed.
    public var allowPrivate: Bool

    /// The browsers' push services: Chrome and Edge (FCM), Firefox (Mozilla autopush), Safari
    /// (Apple's `web.push.apple.com`, not its APNs hosts), and Windows (WNS).
    public static let browsers: [String] = [
        "fcm.googleapis.com", "*.push.services.mozilla.com", "push.services.mozilla.com", "web.push.apple.com",
        "*.notify.windows.com",
    ]

    public init(allowedHosts: [String] = Self.browsers, allowLoopback: Bool = false, allowPrivate: Bool = false) {
        self.allowedHosts = allowedHosts
        self.allowLoopback = allowLoopback
        self.allowPrivate = allowPrivate
    }

    /// Why `endpoint` may not be called, or nil when it may.
    public func refusal(_ endpoint: String) -> String? {
        guard let url = PushEndpointURL(endpoint) else {
            return "is not an https URL with a host (https://push.example.com/...)"
        }
        guard !url.hasUserInfo else { return "must not carry a user name or password" }
        if let kind = IPLiteral(url.host)?.kind {
            switch kind {
            case .loopback where allowLoopback, .privateRange where allowPrivate: break
            case .loopback: return "points at a loopback address, which this worker does not call"
            case .privateRange: return "points at a private address, which this worker does not call"
            case .reserved: return "points at a link-local, multicast or unspecified address"
            case .public: break
            }
            // A public address must be named in the list, as a host name must.
            if kind == .public && !matches(url.host) {
                return "host \(quoted(url.host)) is not among the push services this worker calls"
            }
            return nil
        }
        guard matches(url.host) else {
            return "host \(quoted(url.host)) is not among the push services this worker calls"
        }
        return nil
    }

    private func matches(_ host: String) -> Bool {
        allowedHosts.contains { pattern in
            let pattern = pattern.lowercased()
            if pattern.hasPrefix("*.") { return host.hasSuffix(pattern.dropFirst()) && host.count > pattern.count - 1 }
            return host == pattern
        }
    }
}

/// The parts of an https URL that the endpoint policy reads, parsed strictly: scheme `https`, an
/// authority of a host (a name of letters, digits, hyphens and dots, an IPv4 literal, or a
/// bracketed IPv6 literal) and an optional port of digits. What libcurl would read otherwise
/// (other characters in a name, a sign in a port) is not a URL here.
public struct PushEndpointURL: Sendable {
    /// Lowercased, without brackets.
    public let host: String
    public let port: Int?
    let hasUserInfo: Bool

    public init?(_ text: String) {
        guard text.utf8.count <= PushRegistration.maxEndpointLength,
            text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }),
            text.lowercased().hasPrefix("https://")
        else { return nil }
        let rest = text.dropFirst("https://".count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        hasUserInfo = authority.contains("@")
        var hostPart = Substring(authority.split(separator: "@", omittingEmptySubsequences: false).last ?? "")
        var portText: Substring = ""
        var bracketed = false
        if hostPart.hasPrefix("[") {
            guard let close = hostPart.firstIndex(of: "]") else { return nil }
            let after = hostPart[hostPart.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
            hostPart = hostPart[hostPart.index(after: hostPart.startIndex)..<close]
            bracketed = true
        } else if let colon = hostPart.lastIndex(of: ":") {
            portText = hostPart[hostPart.index(after: colon)...]
            hostPart = hostPart[..<colon]
        }
        if portText.isEmpty {
            port = nil
        } else {
            guard portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let p = Int(portText),
                (1...65535).contains(p)
            else { return nil }
            port = p
        }
        let host = hostPart.lowercased()
        if bracketed {
            guard host.contains(":"), host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
        } else {
            let labels = host.split(separator: ".", omittingEmptySubsequences: false)
            // A trailing dot names the same host: refused rather than let it slip past the list.
            guard !labels.isEmpty,
                labels.allSatisfy({ label in
                    !label.isEmpty && label.count <= 63 && label.first != "-" && label.last != "-"
                        && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
                }), host.count <= 253
            else { return nil }
        }
        self.host = host
    }

    /// `https://host[:port]`: the origin a VAPID token names as its audience (RFC 8292), the
    /// default port left out.
    public var origin: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return "https://" + name + (port.map { $0 == 443 ? "" : ":\($0)" } ?? "")
    }
}

/// An IP address written as a URL host, and what kind of address it is.
struct IPLiteral {
    enum Kind: Equatable { case loopback, privateRange, reserved, `public` }
    var kind: Kind

    init?(_ host: String) {
        if let v4 = Self.ipv4(host) {
            kind = Self.kind(v4)
        } else if host.contains(":"), let v6 = Self.ipv6(host) {
            kind = Self.kind(v6)
        } else {
            return nil
        }
    }

    /// Four decimal octets only: the other forms libraries accept (`127.1`, `0x7f.1`, `2130706433`)
    /// are refused as hosts by being no name in the list, and as literals here by not parsing.
    static func ipv4(_ s: String) -> [UInt8]? {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else {
            // Numbers that are not four decimal octets (`127.1`, `0x7f.1`, `2130706433`): an address
            // in another notation, read as none that may be called.
            let numeric = parts.allSatisfy { p in
                p.allSatisfy(\.isNumber) && !p.isEmpty
                    || p.lowercased().hasPrefix("0x") && p.dropFirst(2).allSatisfy(\.isHexDigit)
            }
            return numeric ? [0, 0, 0, 0] : nil
        }
        var bytes: [UInt8] = []
        for p in parts {
            // A leading zero is octal to libcurl (`010.0.0.1` is 8.0.0.1): another notation.
            if p.count > 1, p.first == "0", p.allSatisfy(\.isNumber) { return [0, 0, 0, 0] }
            guard !p.isEmpty, p.count <= 3, p.allSatisfy(\.isNumber), let n = UInt8(p) else { return nil }
            bytes.append(n)
        }
        return bytes
    }

    static func ipv6(_ s: String) -> [UInt16]? {
        let halves = s.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String) -> [UInt16]? {
            if part.isEmpty { return [] }
            var out: [UInt16] = []
            let items = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, item) in items.enumerated() {
                if i == items.count - 1, item.contains("."), let v4 = ipv4(String(item)) {
                    out.append(UInt16(v4[0]) << 8 | UInt16(v4[1]))
                    out.append(UInt16(v4[2]) << 8 | UInt16(v4[3]))
                } else {
                    guard item.count >= 1, item.count <= 4, let g = UInt16(item, radix: 16) else { return nil }
                    out.append(g)
                }
            }
            return out
        }
        guard let head = groups(halves[0]) else { return nil }
        if halves.count == 1 { return head.count == 8 ? head : nil }
        guard let tail = groups(halves[1]), head.count + tail.count < 8 else { return nil }
        return head + Array(repeating: 0, count: 8 - head.count - tail.count) + tail
    }

    static func kind(_ b: [UInt8]) -> Kind {
        switch (b[0], b[1]) {
        case (127, _): return .loopback
        case (10, _), (172, 16...31), (192, 168), (100, 64...127): return .privateRange
        case (0, _), (169, 254), (224...255, _): return .reserved
        default: return .public
        }
    }

    static func kind(_ g: [UInt16]) -> Kind {
        if g[0..<7].allSatisfy({ $0 == 0 }) && g[7] == 1 { return .loopback }
        if g.allSatisfy({ $0 == 0 }) { return .reserved }
        // IPv4-mapped (::ffff:a.b.c.d): the IPv4 address's kind.
        if g[0..<5].allSatisfy({ $0 == 0 }) && g[5] == 0xffff {
            return kind([UInt8(g[6] >> 8), UInt8(g[6] & 0xff), UInt8(g[7] >> 8), UInt8(g[7] & 0xff)])
        }
        if g[0] & 0xfe00 == 0xfc00 { return .privateRange }
        if g[0] & 0xffc0 == 0xfe80 || g[0] & 0xff00 == 0xff00 { return .reserved }
        return .public
    }
}

/// What became of a push, as its record and `history` say.
public enum PushOutcome: String, CaseIterable, Hashable, Sendable {
    /// The push service took it (APNs 200, FCM 200, Web Push 201).
    case accepted
    /// Refused for good, for this push only (a payload the service would never take).
    case refused
    /// The registration is no longer valid (APNs 410 or BadDeviceToken, FCM UNREGISTERED, Web
    /// Push 404 or 410): the registration is removed.
    case unregistered
    /// It expired before any push service took it.
    case expired
}

/// How the pushes of one delivery went, in one word, as `history`'s `pushOutcome` says it.
public enum PushSummary: String, CaseIterable, Hashable, Sendable {
    /// At least one push service took it.
    case accepted
    /// None has yet, and at least one push is still being tried.
    case pending
    /// Every push ended without being taken; the last one ended so.
    case refused, unregistered, expired
}

/// How one push of a delivery ended, as a `history` row shows it.
public struct PushResult: Hashable, Sendable {
    /// The registration's id (``PushRegistration/id``).
    public var registration: String
    public var outcome: PushOutcome
    public var at: Instant
    /// The push service's reason, if it gave one.
    public var reason: String?

    public init(registration: String, outcome: PushOutcome, at: Instant, reason: String? = nil) {
        self.registration = registration
        self.outcome = outcome
        self.at = at
        self.reason = reason
    }

    var json: JSONObject {
        var o: JSONObject = [
            "registration": .string(registration), "outcome": .string(outcome.rawValue),
            "at": .string(at.rfc3339(fractional: true)),
        ]
        if let reason { o.append("reason", .string(reason)) }
        return o
    }

    init(_ r: FieldReader) throws(ChimeError) {
        let outcome = try r.required(try r.string("outcome"), "outcome")
        self.init(
            registration: try r.required(try r.string("registration"), "registration"),
            outcome: try r.required(PushOutcome(rawValue: outcome), "outcome"),
            at: try Replies.instant(try r.required(try r.string("at"), "at"), field: r.name("at")),
            reason: try r.string("reason")
        )
    }
}

// MARK: - JSON

extension PushRegistration {
    /// Reads one element of `push` or `addPush`: an object with one member naming the provider
    /// (PROTOCOL.md section 3.11). `path` names it in errors (`push[0].`).
    package static func decode(_ value: JSON, path: String) throws(ChimeError) -> PushRegistration {
        guard case .object(let o) = value, o.count == 1, let (name, body) = o.first(where: { _ in true }) else {
            throw ChimeError.invalid(
                String(path.dropLast()),
                "expected an object with one of apns, fcm or webpush"
            )
        }
        let r = FieldReader(o, path: path)
        try r.checkKnown(Set(Provider.allCases.map(\.rawValue)))
        guard case .object(let inner) = body else { throw r.wrongType(name, "an object", body) }
        let b = FieldReader(inner, path: path + name + ".")
        switch Provider(rawValue: name) {
        case .apns:
            try b.checkKnown(["token", "topic", "environment"])
            let token = try b.required(try b.string("token", maxLength: apnsTokenLength.upperBound), "token")
            guard apnsTokenLength.contains(token.utf8.count), token.utf8.allSatisfy(\.isHexDigit) else {
                throw .invalid(b.name("token"), "expected the device token as \(apnsTokenLength) hex digits")
            }
            let topic = try b.required(try b.string("topic", maxLength: maxTopicLength, allowEmpty: false), "topic")
            guard topic.utf8.allSatisfy({ $0.isBundleCharacter }) else {
                throw .invalid(b.name("topic"), "expected the app's bundle id, such as com.example.pills")
            }
            let environment = try b.string("environment", maxLength: 16) ?? "production"
            guard environment == "production" || environment == "sandbox" else {
                throw .invalid(b.name("environment"), "expected \"production\" or \"sandbox\"")
            }
            return PushRegistration(.apns(token: token.lowercased(), topic: topic, sandbox: environment == "sandbox"))
        case .fcm:
            try b.checkKnown(["token"])
            let token = try b.required(try b.string("token", maxLength: maxFCMTokenLength, allowEmpty: false), "token")
            guard token.utf8.allSatisfy({ $0.isTokenCharacter }) else {
                throw .invalid(b.name("token"), "expected the FCM registration token as the app got it")
            }
            return PushRegistration(.fcm(token: token))
        case .webpush:
            // A PushSubscription's toJSON(): expirationTime is accepted and not kept.
            try b.checkKnown(["endpoint", "expirationTime", "keys"])
            let endpoint = try b.required(try b.string("endpoint", maxLength: maxEndpointLength), "endpoint")
            let keys = FieldReader(try b.required(try b.object("keys"), "keys"), path: b.name("keys."))
            try keys.checkKnown(["p256dh", "auth"])
            let p256dh = try keys.required(try keys.string("p256dh", maxLength: 100), "p256dh")
            // 65 bytes (an uncompressed P-256 point, so its first byte, 4, is the letter B).
            guard Self.isBase64URL(p256dh, bytes: 65), p256dh.hasPrefix("B") else {
                throw .invalid(keys.name("p256dh"), "expected the subscription's P-256 public key, base64url")
            }
            let auth = try keys.required(try keys.string("auth", maxLength: 32), "auth")
            guard Self.isBase64URL(auth, bytes: 16) else {
                throw .invalid(keys.name("auth"), "expected the subscription's 16-byte auth secret, base64url")
            }
            return PushRegistration(
                .webPush(endpoint: endpoint, p256dh: p256dh.trimmingPadding, auth: auth.trimmingPadding)
            )
        case nil:
            preconditionFailure("checked above")
        }
    }

    /// Whether `text` is the base64url of exactly `bytes` bytes (with or without its padding).
    static func isBase64URL(_ text: String, bytes: Int) -> Bool {
        let body = text.trimmingPadding
        guard body.utf8.allSatisfy({ $0.isBase64URLCharacter }) else { return false }
        return body.utf8.count == (bytes * 8 + 5) / 6 && text.utf8.count - body.utf8.count <= 2
    }

    /// The registration as the journal and snapshots keep it, secrets included.
    public var json: JSONObject {
        switch target {
        case .apns(let token, let topic, let sandbox):
            return [
                "apns": .object([
                    "token": .string(token), "topic": .string(topic),
                    "environment": .string(sandbox ? "sandbox" : "production"),
                ])
            ]
        case .fcm(let token):
            return ["fcm": .object(["token": .string(token)])]
        case .webPush(let endpoint, let p256dh, let auth):
            return [
                "webpush": .object([
                    "endpoint": .string(endpoint),
                    "keys": .object(["p256dh": .string(p256dh), "auth": .string(auth)]),
                ])
            ]
        }
    }

    /// The registration as replies show it: its id and provider, a token cut to its ends, an
    /// endpoint to its origin, and no keys.
    public var redacted: JSONObject {
        var o: JSONObject = ["id": .string(id), "provider": .string(provider.rawValue)]
        switch target {
        case .apns(let token, let topic, let sandbox):
            o.append("token", .string(Self.cut(token)))
            o.append("topic", .string(topic))
            o.append("environment", .string(sandbox ? "sandbox" : "production"))
        case .fcm(let token):
            o.append("token", .string(Self.cut(token)))
        case .webPush(let endpoint, _, _):
            o.append("endpoint", .string((PushEndpointURL(endpoint)?.origin ?? "https://?") + "/…"))
        }
        return o
    }

    private static func cut(_ token: String) -> String {
        token.count <= 12 ? "…" : "\(token.prefix(6))…\(token.suffix(4))"
    }
}

extension String {
    fileprivate var trimmingPadding: String {
        var s = Substring(self)
        while s.hasSuffix("=") { s = s.dropLast() }
        return String(s)
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
    fileprivate var isAlphanumeric: Bool {
        (0x30...0x39).contains(self) || (0x41...0x5a).contains(self) || (0x61...0x7a).contains(self)
    }
    fileprivate var isBase64URLCharacter: Bool {
        isAlphanumeric || self == UInt8(ascii: "-") || self == UInt8(ascii: "_")
    }
    fileprivate var isBundleCharacter: Bool { isAlphanumeric || self == UInt8(ascii: ".") || self == UInt8(ascii: "-") }
    fileprivate var isTokenCharacter: Bool {
        isBase64URLCharacter || self == UInt8(ascii: ":") || self == UInt8(ascii: ".")
    }
}

extension PushChange {
    /// The member of a `device` command (and of its journal record) that says the change.
    package static let members = ["push", "addPush", "removePush"]

    /// Reads the change of a `device` command or record: at most one of ``members``.
    package static func decode(_ r: FieldReader) throws(ChimeError) -> PushChange? {
        let given = members.filter { r.has($0) }
        guard given.count <= 1 else {
            throw .invalid(given[1], "give at most one of push, addPush and removePush")
        }
        guard let name = given.first else { return nil }
        if name == "removePush" {
            let ids = try r.strings(name, maxCount: PushRegistration.maximumPerDevice, maxLength: 16) ?? []
            return .remove(ids)
        }
        // `push: null` clears, as `push: []` does.
        if r.object[name] == .null, name == "push" { return .replace([]) }
        let items = try r.required(try r.array(name, maxCount: PushRegistration.maximumPerDevice), name)
        var registrations: [PushRegistration] = []
        for (i, item) in items.enumerated() {
            let registration = try PushRegistration.decode(item, path: "\(name)[\(i)].")
            if registrations.contains(where: { $0.id == registration.id }) {
                throw .invalid("\(name)[\(i)]", "the same registration twice")
            }
            registrations.append(registration)
        }
        return name == "push" ? .replace(registrations) : .add(registrations)
    }

    /// The member that says the change, as ``decode(_:)`` reads it.
    package var member: (name: StaticString, value: JSON) {
        switch self {
        case .replace(let r): return ("push", .array(r.map { .object($0.json) }))
        case .add(let r): return ("addPush", .array(r.map { .object($0.json) }))
        case .remove(let ids): return ("removePush", .array(ids.map(JSON.string)))
        }
    }
}
