/// The console's protections at the HTTP level: the session cookie, the `Origin` check of
/// state-changing requests, and the headers every answer carries.
extension ConsoleSessions {
    /// The session cookie's name. The `__Host-` prefix makes browsers take it only when it is
    /// `Secure`, has `Path=/` and no `Domain`, from the console's own origin: a page of a sibling
    /// domain, or one served over plain HTTP on the network, cannot set a cookie of this name to
    /// plant a session of its own.
    public static let cookieName = "__Host-chime_console"

    /// The most bytes of a `Cookie` header that ``sessionIds(fromCookieHeader:)`` reads.
    public static let maximumCookieHeaderBytes = 4096

    /// The most session cookies of one request that are looked up.
    public static let maximumSessionCandidates = 8

    /// The `Set-Cookie` value that gives the browser `session`'s id: `HttpOnly` (no script reads
    /// it), `Secure` (only over HTTPS, or to loopback), `SameSite=Strict` (no other site's page
    /// sends it), `Path=/` and no `Domain` (as the `__Host-` prefix requires), for the session's
    /// absolute lifetime (``absoluteTimeoutMilliseconds``).
    public static func setCookie(_ session: Session) -> String {
        "\(cookieName)=\(session.id); \(cookieAttributes); Max-Age=\(absoluteTimeoutMilliseconds / 1000)"
    }

    /// The `Set-Cookie` value that makes the browser forget the session cookie (at sign-out).
    public static let clearCookie = "\(cookieName)=; \(cookieAttributes); Max-Age=0"

    private static let cookieAttributes = "Path=/; HttpOnly; Secure; SameSite=Strict"

    /// The session ids in a request's `Cookie` header, in order: the values of its ``cookieName``
    /// cookies that have the shape of an id (43 characters of base64url, or the same in double
    /// quotes), at most ``maximumSessionCandidates`` of them. A browser may send several cookies of
    /// one name (set for other paths, or left over), so each is tried until one is a live session
    /// (``session(id:now:)``). Reads at most ``maximumCookieHeaderBytes`` bytes of the header;
    /// pairs without `=`, other cookies, and session cookies of another shape are passed over.
    public static func sessionIds(fromCookieHeader header: String?) -> [String] {
        guard let header else { return [] }
        let bytes = Array(header.utf8.prefix(maximumCookieHeaderBytes))
        var ids: [String] = []
        for pair in bytes.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: true) {
            guard ids.count < maximumSessionCandidates else { break }
            guard let equals = pair.firstIndex(of: UInt8(ascii: "=")) else { continue }
            guard pair[..<equals].trimmingBlanks.elementsEqual(cookieName.utf8) else { continue }
            var value = pair[pair.index(after: equals)...].trimmingBlanks
            if value.count >= 2, value.first == UInt8(ascii: "\""), value.last == UInt8(ascii: "\"") {
                value = value.dropFirst().dropLast()
            }
            let text = String(decoding: value, as: UTF8.self)
            if isToken(text) { ids.append(text) }
        }
        return ids
    }

    /// Whether a state-changing request comes from the console's own pages, by where the browser
    /// says it comes from: the `Origin` header's host and port must be the `Host` header's; without
    /// an `Origin`, the `Referer`'s origin must; without either, or with `Origin: null` (a sandboxed
    /// frame, a redirect across origins), it does not. `SameSite=Strict` cookies and the CSRF token
    /// are the other two locks.
    ///
    /// An origin is `http` or `https`, a host name or an IP address (IPv6 in brackets), and a port
    /// (the scheme's default when absent); a `Host` without a port has the origin's scheme's
    /// default. Host names compare without regard to case. User information (`user@`) is refused.
    /// - Parameters:
    ///   - origin: the `Origin` header, nil when absent.
    ///   - referer: the `Referer` header, nil when absent.
    ///   - host: the `Host` header, nil when absent.
    public static func originAllowed(origin: String?, referer: String?, host: String?) -> Bool {
        guard let host, let expected = WebOrigin.authority(Substring(host)),
            let source = WebOrigin.source(origin: origin, referer: referer)
        else { return false }
        return source.host == expected.host && source.port == (expected.port ?? source.defaultPort)
    }

    /// The headers every answer of the console carries: a Content-Security-Policy that allows no
    /// script at all and styles and images from the console only, no framing, no MIME sniffing, no
    /// referrer to other sites, and no caching of pages that show devices.
    public static let securityHeaders: [(String, String)] = [
        (
            "Content-Security-Policy",
            "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
                + "frame-ancestors 'none'; base-uri 'none'"
        ),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "same-origin"),
        ("X-Frame-Options", "DENY"),
        ("Cache-Control", "no-store"),
    ]
}

/// A web origin's scheme, host and port, as ``ConsoleSessions/originAllowed(origin:referer:host:)``
/// compares them.
struct WebOrigin: Hashable, Sendable {
    /// `http` or `https`.
    var scheme: String
    /// The host in lower case; an IPv6 address with its brackets.
    var host: String
    /// The port, the scheme's default when none was written.
    var port: Int

    /// The port of the scheme when none is written.
    var defaultPort: Int { scheme == "https" ? 443 : 80 }

    init(scheme: String, host: String, port: Int) {
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    /// Where a request says it comes from: its `Origin`, or without one its `Referer`'s origin;
    /// nil without either, for `Origin: null`, and for what is not an origin.
    static func source(origin: String?, referer: String?) -> WebOrigin? {
        if let origin { return WebOrigin(origin: origin) }
        if let referer { return WebOrigin(url: referer) }
        return nil
    }

    /// An `Origin` header's value: `scheme://host[:port]` and nothing more (not `null`).
    init?(origin: String) {
        guard let (scheme, rest) = Self.scheme(Substring(origin)) else { return nil }
        self.init(scheme: scheme, authority: rest)
    }

    /// The origin of a `Referer` URL: its scheme and authority, before the first `/`, `?` or `#`.
    init?(url: String) {
        guard let (scheme, rest) = Self.scheme(Substring(url)) else { return nil }
        let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        self.init(scheme: scheme, authority: rest[..<end])
    }

    private init?(scheme: String, authority: Substring) {
        guard let (host, port) = Self.authority(authority) else { return nil }
        self.scheme = scheme
        self.host = host
        self.port = port ?? (scheme == "https" ? 443 : 80)
    }

    /// `http` or `https` (any case) and what follows `://`.
    private static func scheme(_ text: Substring) -> (String, Substring)? {
        guard let separator = text.firstRange(of: "://") else { return nil }
        let scheme = text[..<separator.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { return nil }
        return (scheme, text[separator.upperBound...])
    }

    /// `host[:port]`, as a `Host` header or a URL's authority writes it: a host name of letters,
    /// digits, `-` and `.`, or an IPv6 address in brackets; a port of 1 to 5 digits up to 65535.
    /// - Returns: the host in lower case and the port if one was written, or nil.
    static func authority(_ text: Substring) -> (host: String, port: Int?)? {
        guard !text.isEmpty, text.utf8.count <= 300 else { return nil }
        let host: Substring
        var rest: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[...close]
            rest = text[text.index(after: close)...]
            guard host.dropFirst().dropLast().allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                return nil
            }
        } else {
            let colon = text.firstIndex(of: ":") ?? text.endIndex
            host = text[..<colon]
            rest = text[colon...]
            guard host.allSatisfy({ ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "-" || $0 == "." }) else {
                return nil
            }
        }
        guard host.count >= (host.hasPrefix("[") ? 3 : 1) else { return nil }
        var port: Int?
        if !rest.isEmpty {
            guard rest.first == ":" else { return nil }
            rest = rest.dropFirst()
            guard (1...5).contains(rest.count), rest.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(rest),
                (1...65535).contains(value)
            else { return nil }
            port = value
        }
        return (host.lowercased(), port)
    }
}

extension ArraySlice<UInt8> {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingBlanks: ArraySlice<UInt8> {
        let blank: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
        guard let first = firstIndex(where: { !blank($0) }) else { return [] }
        return self[first...lastIndex(where: { !blank($0) })!]
    }
}
