/// The origins the console is served at, against DNS rebinding: a page of `evil.example` whose name
/// the attacker points at the console's address makes the browser send `Host: evil.example:8080`
/// and `Origin: http://evil.example:8080`, which agree with each other, so comparing them is not
/// enough. The console answers only requests whose `Host` is one of these origins' (else 421), and
/// takes a `POST` only from one of these origins, scheme included.
///
/// By default they are the `--listen` address's, and when it listens on loopback (or on every
/// address) `localhost`, `127.0.0.1` and `[::1]` on the same port; `--origin` adds the public
/// origin a proxy serves it at (``adding(origin:)``).
public struct ConsoleOrigins: Sendable, Hashable {
    /// The allowed origins, the listen address's first.
    private(set) var origins: [WebOrigin]

    /// The origins of a console served on `listenHost`:`port`.
    /// - Parameters:
    ///   - listenHost: the host of `--listen`: a name, an IPv4 address, or an IPv6 address with or
    ///     without brackets; empty, `0.0.0.0` or `::` for every address.
    ///   - port: the port served on (the one bound, when `--listen` asked for 0).
    ///   - secure: whether it serves HTTPS.
    public init(listenHost: String, port: Int, secure: Bool) {
        let scheme = secure ? "https" : "http"
        var host = listenHost.lowercased()
        if host.contains(":") && !host.hasPrefix("[") { host = "[\(host)]" }
        var hosts: [String] = []
        let everyAddress = ["", "0.0.0.0", "[::]"].contains(host)
        if !everyAddress { hosts.append(host) }
        if everyAddress || Self.isLoopback(host) {
            for name in ["localhost", "127.0.0.1", "[::1]"] where !hosts.contains(name) { hosts.append(name) }
        }
        origins = hosts.map { WebOrigin(scheme: scheme, host: $0, port: port) }
    }

    /// These origins and `origin`, such as `https://console.example.com`: a scheme (`http` or
    /// `https`), a host and a port when it is not the scheme's default, and nothing after them
    /// but an optional `/`.
    /// - Returns: nil when `origin` is not one.
    public func adding(origin text: String) -> ConsoleOrigins? {
        guard let origin = Self.origin(text) else { return nil }
        var copy = self
        if !copy.origins.contains(origin) { copy.origins.append(origin) }
        return copy
    }

    /// Whether `text` is an origin that ``adding(origin:)`` takes.
    public static func isOrigin(_ text: String) -> Bool { origin(text) != nil }

    private static func origin(_ text: String) -> WebOrigin? {
        WebOrigin(origin: text.hasSuffix("/") ? String(text.dropLast()) : text)
    }

    /// The origins, as `scheme://host:port`.
    public var allowed: [String] { origins.map { "\($0.scheme)://\($0.host):\($0.port)" } }

    /// Whether a request's `Host` header names one of the origins: its host, and its port (the
    /// origin's scheme's default when the header has none). False without a `Host`.
    public func allowsHost(_ header: String?) -> Bool {
        guard let header, let (host, port) = WebOrigin.authority(Substring(header)) else { return false }
        return origins.contains { $0.host == host && (port ?? $0.defaultPort) == $0.port }
    }

    /// Whether a state-changing request comes from one of the origins, scheme, host and port
    /// alike: its `Origin` header, or without one its `Referer`'s origin. False without either,
    /// and for `Origin: null`.
    public func allowsSource(origin: String?, referer: String?) -> Bool {
        guard let source = WebOrigin.source(origin: origin, referer: referer) else { return false }
        return origins.contains(source)
    }

    /// `127.x.x.x`, `[::1]` and `localhost`.
    private static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "[::1]" || (host.hasPrefix("127.") && host.split(separator: ".").count == 4)
    }
}
