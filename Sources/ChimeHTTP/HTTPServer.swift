import CMicroHTTPD
import Foundation

/// A request as the handler sees it: only the method and the path (no query, no body).
public struct HTTPRequest: Hashable, Sendable {
    public var method: String
    public var path: String
}

public struct HTTPResponse: Hashable, Sendable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", _ text: String) {
        self.init(status: status, contentType: contentType, body: Array(text.utf8))
    }
}

/// Why the server could not start.
public struct HTTPError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable {
        private enum Value { case badAddress, cannotListen }
        private let value: Value
        /// The listen address is not `HOST:PORT`, or the host does not resolve.
        public static let badAddress = Code(value: .badAddress)
        /// The port is taken, or the address is not local.
        public static let cannotListen = Code(value: .cannotListen)
    }

    public var code: Code
    public var message: String
    public var description: String { message }

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func == (a: HTTPError, b: HTTPError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// A small HTTP/1.1 responder on libmicrohttpd (Debian's `libmicrohttpd`), answering `GET` and
/// `HEAD` with what `handler` returns, on a thread of its own. The only code that imports the
/// library.
///
/// Bounded against clients that misbehave (``Limits``). A request with a body, or a method other
/// than `GET` and `HEAD`, is answered 405 without reading it.
public final class HTTPServer: Sendable {
    /// What one client can hold.
    public struct Limits: Hashable, Sendable {
        /// Connections open at once; past it new ones are closed at once.
        public var connections: UInt32 = 32
        /// Connections open at once from one address.
        public var connectionsPerAddress: UInt32 = 16
        /// Seconds a connection may stay without progress before it is closed.
        public var idleSeconds: UInt32 = 10
        /// Bytes of memory per connection, which bounds the request line and headers (past it
        /// the answer is 431 or 414 and the connection is closed).
        public var bytesPerConnection = 32 * 1024

        public init() {}
    }

    /// What the C callback reaches through its context pointer.
    final class Context: Sendable {
        let handler: @Sendable (HTTPRequest) -> HTTPResponse
        init(_ handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) { self.handler = handler }
    }

    // The daemon is created in init and destroyed once, in deinit; libmicrohttpd is thread-safe
    // for MHD_stop_daemon.
    nonisolated(unsafe) private let daemon: OpaquePointer
    private let context: Unmanaged<Context>
    /// The port it listens on (the one the system chose when asked for port 0).
    public let port: UInt16

    /// Listens on `address`, `HOST:PORT` (`127.0.0.1:9464`, `[::1]:9464`, `0.0.0.0:9464`).
    /// - Throws: ``HTTPError`` with `.badAddress` or `.cannotListen`.
    public init(
        listen address: String,
        limits: Limits = Limits(),
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) throws(HTTPError) {
        let (host, service) = try Self.parse(listen: address)
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host.isEmpty ? nil : host, service, &hints, &found)
        guard status == 0, let info = found else {
            throw HTTPError(.badAddress, "cannot resolve \(address): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(found) }
        let context = Unmanaged.passRetained(Context(handler))
        guard
            let daemon = chime_mhd_start(
                info.pointee.ai_addr,
                info.pointee.ai_family == AF_INET6 ? 1 : 0,
                limits.connections,
                limits.connectionsPerAddress,
                limits.idleSeconds,
                limits.bytesPerConnection,
                handleRequest,
                context.toOpaque()
            )
        else {
            context.release()
            throw HTTPError(.cannotListen, "cannot listen on \(address): \(String(cString: strerror(errno)))")
        }
        self.daemon = daemon
        self.context = context
        self.port = chime_mhd_port(daemon)
    }

    deinit {
        MHD_stop_daemon(daemon)
        context.release()
    }

    /// `HOST:PORT` with the port a number in 0...65535; `[v6]:PORT` for an IPv6 address.
    public static func parse(listen address: String) throws(HTTPError) -> (host: String, port: String) {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...])
        else {
            throw HTTPError(.badAddress, "expected HOST:PORT, got \"\(address)\"")
        }
        var host = String(address[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host, String(port))
    }
}

/// libmicrohttpd's access handler: called on the daemon's thread for each request.
private let handleRequest: MHD_AccessHandlerCallback = {
    context,
    connection,
    url,
    method,
    _,
    _,
    uploadSize,
    _ in
    let server = Unmanaged<HTTPServer.Context>.fromOpaque(context!).takeUnretainedValue()
    let method = method.map { String(cString: $0) } ?? ""
    let response: HTTPResponse
    var allow: String?
    if method == "GET" || method == "HEAD", uploadSize?.pointee ?? 0 == 0 {
        response = server.handler(HTTPRequest(method: method, path: url.map { String(cString: $0) } ?? "/"))
    } else {
        response = HTTPResponse(status: 405, "only GET and HEAD\n")
        allow = "GET, HEAD"
    }
    uploadSize?.pointee = 0
    return response.body.withUnsafeBytes { body in
        response.contentType.withCString { type in
            if let allow {
                return allow.withCString {
                    chime_mhd_respond(connection, UInt32(response.status), type, $0, body.baseAddress, body.count)
                }
            }
            return chime_mhd_respond(connection, UInt32(response.status), type, nil, body.baseAddress, body.count)
        }
    }
}
