#if canImport(Glibc)
import Glibc
#endif

/// How an `HTTPClient` connects and what it accepts; validated once, by `HTTPClient.init`.
public struct HTTPClientConfiguration: Sendable {
    /// The CA certificates (a PEM file) that servers' certificates must chain to, and the only
    /// ones; nil: the system's store (Debian: `/etc/ssl/certs`). Peer and host name are always
    /// verified.
    public var caFile: String?
    /// The most bytes of a response's body; a larger one completes as `responseTooLarge`, whether
    /// its `content-length` says so up front or it just keeps coming. Default 65,536.
    public var maxResponseBytes: Int
    /// The most a connection (TCP and TLS handshake) may take. Default 10 s.
    public var connectTimeout: Duration
    /// The most a request may take when it sets no `timeout` of its own. Default 30 s.
    public var defaultTimeout: Duration
    /// The most connections to one host and port (`CURLMOPT_MAX_HOST_CONNECTIONS`); over HTTP/2 each
    /// carries up to the server's limit of concurrent streams (APNs: 1,000; libcurl's cap: 100)
    /// before another is opened. Requests beyond wait. Default 4.
    public var maxConnectionsPerHost: Int
    /// The most connections in all (`CURLMOPT_MAX_TOTAL_CONNECTIONS`), also the number of idle ones
    /// kept for reuse. Default 64.
    public var maxTotalConnections: Int
    /// The most requests submitted and not yet completed; `submit` returns false beyond.
    /// Default 10,000.
    public var maxInFlight: Int
    /// Which addresses the client may connect to. Default `.publicOnly`.
    public var addressPolicy: AddressPolicy
    /// The `user-agent` header. Default `Chime`.
    public var userAgent: String

    public init(
        caFile: String? = nil,
        maxResponseBytes: Int = 65536,
        connectTimeout: Duration = .seconds(10),
        defaultTimeout: Duration = .seconds(30),
        maxConnectionsPerHost: Int = 4,
        maxTotalConnections: Int = 64,
        maxInFlight: Int = 10_000,
        addressPolicy: AddressPolicy = .publicOnly,
        userAgent: String = "Chime"
    ) {
        self.caFile = caFile
        self.maxResponseBytes = maxResponseBytes
        self.connectTimeout = connectTimeout
        self.defaultTimeout = defaultTimeout
        self.maxConnectionsPerHost = maxConnectionsPerHost
        self.maxTotalConnections = maxTotalConnections
        self.maxInFlight = maxInFlight
        self.addressPolicy = addressPolicy
        self.userAgent = userAgent
    }

    /// Throws for the first setting out of range, naming it.
    func validate() throws(HTTPClientError) {
        func invalid(_ why: String) -> HTTPClientError {
            HTTPClientError(.invalidConfiguration, why)
        }
        guard maxResponseBytes >= 0 else {
            throw invalid("maxResponseBytes must be 0 or more, got \(maxResponseBytes)")
        }
        guard connectTimeout >= .milliseconds(1) else { throw invalid("connectTimeout must be 1 ms or more") }
        guard defaultTimeout >= .milliseconds(1) else { throw invalid("defaultTimeout must be 1 ms or more") }
        guard maxConnectionsPerHost >= 1 else {
            throw invalid("maxConnectionsPerHost must be 1 or more, got \(maxConnectionsPerHost)")
        }
        guard maxTotalConnections >= maxConnectionsPerHost else {
            throw invalid("maxTotalConnections must be maxConnectionsPerHost or more, got \(maxTotalConnections)")
        }
        guard maxInFlight >= 1 else { throw invalid("maxInFlight must be 1 or more, got \(maxInFlight)") }
        guard HTTPHeader("user-agent", userAgent).isSendable else {
            throw invalid("userAgent must not hold CR, LF or NUL")
        }
        if let caFile, access(caFile, R_OK) != 0 {
            throw invalid("caFile \(caFile) cannot be read")
        }
    }
}
