import CMicroHTTPD
import Foundation
import Synchronization

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
        private enum Value { case badAddress, cannotListen, badLimits }
        private let value: Value
        /// The listen address is not `HOST:PORT`, or the host does not resolve.
        public static let badAddress = Code(value: .badAddress)
        /// The port is taken, or the address is not local.
        public static let cannotListen = Code(value: .cannotListen)
        /// A limit is out of its range (``HTTPServer/Limits``).
        public static let badLimits = Code(value: .badLimits)
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
/// Bounded against clients that misbehave (``Limits``, ``ConnectionTable``): one request per
/// connection (every answer says `Connection: close`, so pipelined requests after the first are
/// not answered: the connection is closed), a time for the whole request from accept, not from the
/// last byte, and caps on connections that close the oldest rather than refuse the newest, so that
/// a probe always gets in. A request with a body, or a method other than `GET` and `HEAD`, is
/// answered 405 without reading it.
public final class HTTPServer: Sendable {
    /// What clients can hold. The defaults are what `chimed --metrics-listen` uses.
    public struct Limits: Hashable, Sendable {
        /// Connections open at once (1 to ``maxConnections``). One more closes the oldest.
        public var connections = 32
        /// Connections open at once from one address (1 to ``connections``). One more from that
        /// address closes its oldest.
        public var connectionsPerAddress = 16
        /// The time from accept within which a connection must send its request and take its
        /// answer (more than 0, up to ``maxRequestTime``); then it is closed, however steadily it
        /// sends.
        public var requestTime: Duration = .seconds(10)
        /// Bytes of memory per connection (``bytesPerConnectionRange``), which bounds the request
        /// line and headers (past it the answer is 431 or 414 and the connection is closed).
        public var bytesPerConnection = 32 * 1024

        public static let maxConnections = 256
        public static let maxRequestTime: Duration = .seconds(60)
        public static let bytesPerConnectionRange = 4096...(1024 * 1024)

        /// Each limit at the largest value it may take.
        public static let largest = {
            var limits = Limits()
            limits.connections = maxConnections
            limits.connectionsPerAddress = maxConnections
            limits.requestTime = maxRequestTime
            limits.bytesPerConnection = bytesPerConnectionRange.upperBound
            return limits
        }()

        public init() {}

        func check() throws(HTTPError) {
            guard (1...Self.maxConnections).contains(connections) else {
                throw HTTPError(.badLimits, "connections must be 1 to \(Self.maxConnections), not \(connections)")
            }
            guard (1...connections).contains(connectionsPerAddress) else {
                throw HTTPError(
                    .badLimits,
                    "connections per address must be 1 to \(connections), not \(connectionsPerAddress)"
                )
            }
            guard requestTime > .zero && requestTime <= Self.maxRequestTime else {
                throw HTTPError(.badLimits, "the request time must be more than 0, up to \(Self.maxRequestTime)")
            }
            guard Self.bytesPerConnectionRange.contains(bytesPerConnection) else {
                throw HTTPError(
                    .badLimits,
                    "bytes per connection must be \(Self.bytesPerConnectionRange), not \(bytesPerConnection)"
                )
            }
        }

        /// libmicrohttpd's own limit: room for ``connections`` and for those being closed, which
        /// it counts until its next turn: every one whose time was up (at most ``connections``)
        /// and one for each it accepted in its turn (at most 11 in 0.9.75).
        var daemonConnections: UInt32 { UInt32(2 * connections + 16) }

        /// libmicrohttpd's idle timeout, in whole seconds: never before ``requestTime`` (it counts
        /// from the last byte, so it is a backstop only).
        var idleSeconds: UInt32 {
            let (seconds, attoseconds) = requestTime.components
            return UInt32(seconds) + (attoseconds > 0 ? 1 : 0)
        }
    }

    /// What the C callbacks reach through their context pointer, on the server's thread (and,
    /// once it has ended, on the one that stops the daemon).
    final class Context: Sendable {
        let handler: @Sendable (HTTPRequest) -> HTTPResponse
        /// Behind a lock so that the context is Sendable; never contended.
        let table: Mutex<ConnectionTable>

        init(limits: Limits, handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
            self.handler = handler
            self.table = Mutex(ConnectionTable(limits: limits))
        }
    }

    /// The daemon and the thread that runs it.
    final class Runner: Sendable {
        // Used by the runner's thread only, until `stop()` has seen that thread end.
        nonisolated(unsafe) let daemon: OpaquePointer
        let context: Context
        let epoll: Int32
        /// A pipe whose write end `stop()` writes to, to wake the thread.
        let wake: (read: Int32, write: Int32)
        let stopping = Atomic(false)
        let finished = DispatchSemaphore(value: 0)

        init(daemon: OpaquePointer, context: Context, wake: (Int32, Int32)) {
            self.daemon = daemon
            self.context = context
            self.epoll = chime_mhd_epoll_fd(daemon)
            self.wake = wake
        }

        /// Waits for the daemon's sockets (or the wake-up) no longer than the daemon and the table
        /// allow, runs the daemon, closes the connections whose time is up; until `stop()`.
        func run() {
            defer { finished.signal() }
            var fds = [
                pollfd(fd: epoll, events: Int16(POLLIN), revents: 0),
                pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0),
            ]
            while !stopping.load(ordering: .acquiring) {
                _ = poll(&fds, nfds_t(fds.count), waitMilliseconds())
                if stopping.load(ordering: .acquiring) { break }
                MHD_run(daemon)
                // Shut, not closed: libmicrohttpd owns the socket, and closes it on its next turn
                // (the shutdown wakes its epoll).
                for connection in context.table.withLock({ $0.expired(at: .now) }) {
                    shutdown(connection.socket, Int32(SHUT_RDWR))
                }
            }
        }

        func waitMilliseconds() -> Int32 {
            var wait = chime_mhd_wait_ms(daemon)
            if let deadline = context.table.withLock({ $0.nextDeadline }) {
                // In whole milliseconds rounded up, so as not to wake just before it.
                let (seconds, attoseconds) = max(.zero, deadline - .now).components
                let left = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
                wait = wait < 0 ? left : min(wait, left)
            }
            return Int32(clamping: wait)
        }

        /// Ends the thread and waits for it; then the daemon is the caller's.
        func stop() {
            stopping.store(true, ordering: .releasing)
            var byte: UInt8 = 1
            _ = write(wake.write, &byte, 1)
            finished.wait()
        }
    }

    private let runner: Runner
    private let context: Unmanaged<Context>
    /// The port it listens on (the one the system chose when asked for port 0).
    public let port: UInt16

    /// Listens on `address`, `HOST:PORT` (`127.0.0.1:9464`, `[::1]:9464`, `0.0.0.0:9464`).
    /// - Throws: ``HTTPError`` with `.badAddress`, `.cannotListen` or `.badLimits`.
    public init(
        listen address: String,
        limits: Limits = Limits(),
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) throws(HTTPError) {
        try limits.check()
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
        var wake: [Int32] = [-1, -1]
        guard pipe(&wake) == 0 else {
            throw HTTPError(.cannotListen, "cannot listen on \(address): \(String(cString: strerror(errno)))")
        }
        let context = Unmanaged.passRetained(Context(limits: limits, handler: handler))
        guard
            let daemon = chime_mhd_start(
                info.pointee.ai_addr,
                info.pointee.ai_family == AF_INET6 ? 1 : 0,
                limits.daemonConnections,
                limits.idleSeconds,
                limits.bytesPerConnection,
                handleRequest,
                notifyConnection,
                context.toOpaque()
            )
        else {
            let error = HTTPError(.cannotListen, "cannot listen on \(address): \(String(cString: strerror(errno)))")
            context.release()
            close(wake[0])
            close(wake[1])
            throw error
        }
        self.context = context
        self.runner = Runner(daemon: daemon, context: context.takeUnretainedValue(), wake: (wake[0], wake[1]))
        self.port = chime_mhd_port(daemon)
        let runner = runner
        let thread = Thread { runner.run() }
        thread.name = "chime-http"
        thread.start()
    }

    deinit {
        runner.stop()
        MHD_stop_daemon(runner.daemon)
        close(runner.wake.read)
        close(runner.wake.write)
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

/// libmicrohttpd's connection notifications, on the server's thread: a new connection enters the
/// table (closing the one it makes room for), a closed one leaves it.
private let notifyConnection: MHD_NotifyConnectionCallback = { context, connection, _, event in
    guard let context, let connection else { return }
    let server = Unmanaged<HTTPServer.Context>.fromOpaque(context).takeUnretainedValue()
    let id = UInt(bitPattern: Int(bitPattern: connection))
    if event == .CONNECTION_NOTIFY_STARTED {
        var address = [UInt8](repeating: 0, count: 16)
        let length = chime_mhd_client_address(connection, &address)
        let socket = chime_mhd_connection_fd(connection)
        let evicted = server.table.withLock {
            $0.accepted(id: id, socket: socket, address: Array(address.prefix(length)), at: .now)
        }
        // Open until libmicrohttpd tells of its close, which it has not: its socket is still its.
        if let evicted { shutdown(evicted.socket, Int32(SHUT_RDWR)) }
    } else if event == .CONNECTION_NOTIFY_CLOSED {
        server.table.withLock { $0.closed(id: id) }
    }
}
