import CMicroHTTPD
import Foundation
import Synchronization

/// Why the server could not start.
public struct HTTPError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable {
        private enum Value { case badAddress, cannotListen, badLimits, badMethods, badTLS }
        private let value: Value
        /// The listen address is not `HOST:PORT`, or the host does not resolve.
        public static let badAddress = Code(value: .badAddress)
        /// The port is taken, or the address is not local.
        public static let cannotListen = Code(value: .cannotListen)
        /// A limit is out of its range (``HTTPServer/Limits``).
        public static let badLimits = Code(value: .badLimits)
        /// The methods are none, repeated, or not upper-case tokens.
        public static let badMethods = Code(value: .badMethods)
        /// TLS was asked for, and this libmicrohttpd has none, or a file cannot be read, or
        /// GnuTLS refuses the certificate or key (``HTTPServer/TLS``).
        public static let badTLS = Code(value: .badTLS)
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

/// A small HTTP/1.1 responder on libmicrohttpd (Debian's `libmicrohttpd`), answering its methods
/// (`GET` and `HEAD` unless told) with what `handler` returns, on a thread of its own, in plain
/// HTTP or, given ``TLS``, HTTPS only. The only code that imports the library.
///
/// Bounded against clients that misbehave (``Limits``, ``ConnectionTable``): one request per
/// connection (every answer says `Connection: close`, so pipelined requests after the first are
/// not answered: the connection is closed), a time for the whole request from accept (the TLS
/// handshake, the headers and the body alike), not from the last byte, and caps on connections
/// that close the oldest rather than refuse the newest, so that a probe always gets in.
///
/// Answered without the handler, and without reading a body: a method not among the server's,
/// 405 with `Allow`; a body declared longer than ``Limits/maxBodyBytes``, 413; a body in chunks
/// (`Transfer-Encoding`, whose length is not known before it is read), 411. Each closes the
/// connection. The body of a `GET` or `HEAD` is not read: the handler is called at once, with an
/// empty ``HTTPRequest/body``. Any other method's body is read whole, within the request time,
/// before the handler is called.
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
        /// The longest body a request may have (``bodyBytesRange``), held whole until the handler
        /// has answered: about ``connections`` times this at most, besides
        /// ``bytesPerConnection``. 0: no body; one declared longer is answered 413 without being
        /// read. Not for `GET` and `HEAD`, whose bodies are never read.
        public var maxBodyBytes = 0

        public static let maxConnections = 256
        public static let maxRequestTime: Duration = .seconds(60)
        public static let bytesPerConnectionRange = 4096...(1024 * 1024)
        public static let bodyBytesRange = 0...(1024 * 1024)

        /// Each limit at the largest value it may take.
        public static let largest = {
            var limits = Limits()
            limits.connections = maxConnections
            limits.connectionsPerAddress = maxConnections
            limits.requestTime = maxRequestTime
            limits.bytesPerConnection = bytesPerConnectionRange.upperBound
            limits.maxBodyBytes = bodyBytesRange.upperBound
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
            guard Self.bodyBytesRange.contains(maxBodyBytes) else {
                throw HTTPError(
                    .badLimits,
                    "the largest body must be \(Self.bodyBytesRange) bytes, not \(maxBodyBytes)"
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

    /// A certificate and its key, for HTTPS: the server then speaks TLS 1.2 or 1.3 only
    /// (GnuTLS's `NORMAL` set otherwise), and the handshake counts in the request time.
    ///
    /// Its ``description`` leaves the key out, so that a configuration can be logged.
    public struct TLS: Hashable, Sendable, CustomStringConvertible {
        /// The certificate chain in PEM, the server's certificate first.
        public var certificate: String
        /// The certificate's private key in PEM, not encrypted.
        public var key: String

        public init(certificate: String, key: String) {
            self.certificate = certificate
            self.key = key
        }

        /// Reads the certificate chain and its key from PEM files.
        ///
        /// The key file must not be readable by others (`mode & 0o007 == 0`, as `chmod 600` or, for
        /// a group such as Debian's `ssl-cert`, `chmod 640` leave it), as OpenSSH and PostgreSQL
        /// require of theirs: a key anyone on the machine can read is not private.
        /// - Throws: ``HTTPError`` with `.badTLS` if a file cannot be read or the key file is open
        ///   to others (the message says how to mend it).
        public init(certificateFile: String, keyFile: String) throws(HTTPError) {
            let attributes = try? FileManager.default.attributesOfItem(atPath: keyFile)
            if let mode = (attributes?[.posixPermissions] as? NSNumber)?.uint16Value, mode & 0o007 != 0 {
                let octal = String(mode & 0o777, radix: 8)
                throw HTTPError(
                    .badTLS,
                    "the key file \(keyFile) may be read by others (mode 0\(octal)): chmod 600 \(keyFile), "
                        + "or 640 with a group allowed to read it"
                )
            }
            func read(_ path: String, _ what: String) throws(HTTPError) -> String {
                do {
                    return String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
                } catch {
                    throw HTTPError(.badTLS, "cannot read the \(what) file \(path): \(error.localizedDescription)")
                }
            }
            self.init(certificate: try read(certificateFile, "certificate"), key: try read(keyFile, "key"))
        }

        /// Whether this libmicrohttpd was built with TLS (Debian's is, with GnuTLS).
        public static var isAvailable: Bool { chime_mhd_has_tls() != 0 }

        public var description: String {
            "TLS(certificate: \(certificate.utf8.count) bytes, key: \(key.utf8.count) bytes)"
        }

        func check() throws(HTTPError) {
            guard Self.isAvailable else { throw HTTPError(.badTLS, "this libmicrohttpd was built without TLS") }
            guard !certificate.utf8.contains(0), !key.utf8.contains(0),
                chime_mhd_tls_accepts(certificate, key, handleRequest) != 0
            else {
                throw HTTPError(.badTLS, "GnuTLS refuses the certificate or its key (PEM, the key not encrypted)")
            }
        }
    }

    /// What the C callbacks reach through their context pointer, on the server's thread (and,
    /// once it has ended, on the one that stops the daemon).
    final class Context: Sendable {
        let handler: @Sendable (HTTPRequest) -> HTTPResponse
        let rules: RequestRules
        /// The most bytes of header fields a response may have (``Limits/bytesPerConnection``
        /// halved: libmicrohttpd writes them in what the request left of the connection's memory).
        let maxResponseHeaderBytes: Int
        /// Behind a lock so that the context is Sendable; never contended.
        let table: Mutex<ConnectionTable>
        /// Each connection's request while it is read (one a connection), by connection: from its
        /// target until it is answered or the connection closes.
        let requests: Mutex<[UInt: PendingRequest]>

        init(limits: Limits, rules: RequestRules, handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) {
            self.handler = handler
            self.rules = rules
            self.maxResponseHeaderBytes = limits.bytesPerConnection / 2
            self.table = Mutex(ConnectionTable(limits: limits))
            self.requests = Mutex([:])
        }
    }

    /// A request being read.
    struct PendingRequest: Sendable {
        /// The request target as sent, path and query.
        var target: String
        /// Once its headers are in, while its body is read.
        var request: HTTPRequest?
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
    /// - Parameters:
    ///   - limits: what clients can hold; the defaults take no body.
    ///   - methods: the methods answered, upper case, in the order `Allow` names them: `GET` and
    ///     `HEAD` for an endpoint that is only read, with `POST` for forms (and
    ///     ``Limits/maxBodyBytes`` above 0). `HEAD` is answered as `GET` without the body.
    ///   - tls: a certificate and key to speak HTTPS only; nil for plain HTTP.
    ///   - handler: called on the server's thread with each request, read whole; it must not block.
    /// - Throws: ``HTTPError`` with `.badAddress`, `.cannotListen`, `.badLimits`, `.badMethods` or
    ///   `.badTLS`.
    public init(
        listen address: String,
        limits: Limits = Limits(),
        methods: [String] = ["GET", "HEAD"],
        tls: TLS? = nil,
        handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) throws(HTTPError) {
        try limits.check()
        let rules = try RequestRules(methods: methods, maxBodyBytes: limits.maxBodyBytes)
        try tls?.check()
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
        let context = Unmanaged.passRetained(Context(limits: limits, rules: rules, handler: handler))
        let started = withCString(tls?.certificate) { certificate in
            withCString(tls?.key) { key in
                chime_mhd_start(
                    info.pointee.ai_addr,
                    info.pointee.ai_family == AF_INET6 ? 1 : 0,
                    limits.daemonConnections,
                    limits.idleSeconds,
                    limits.bytesPerConnection,
                    certificate,
                    key,
                    handleRequest,
                    notifyConnection,
                    receiveTarget,
                    context.toOpaque()
                )
            }
        }
        guard let daemon = started else {
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

/// `text` as a C string for `body`, or nil.
private func withCString<R>(_ text: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let text else { return body(nil) }
    return text.withCString { body($0) }
}

/// libmicrohttpd's access handler, called on the server's thread: once the headers are in (with
/// `*requestContext` nil, which it then sets), then with each part of the body, then once the
/// body is in (with no data). Each step is the context's.
private let handleRequest: MHD_AccessHandlerCallback = {
    context,
    connection,
    url,
    method,
    _,
    data,
    dataSize,
    requestContext in
    guard let context, let connection else { return .NO }
    let server = Unmanaged<HTTPServer.Context>.fromOpaque(context).takeUnretainedValue()
    let id = UInt(bitPattern: Int(bitPattern: connection))
    if requestContext?.pointee == nil {
        requestContext?.pointee = context
        return server.headersArrived(
            on: connection,
            id: id,
            method: method.map { String(cString: $0) } ?? "",
            path: url.map { String(cString: $0) } ?? "/"
        )
    }
    if let dataSize, dataSize.pointee > 0 {
        let part = UnsafeRawBufferPointer(start: data, count: dataSize.pointee)
        dataSize.pointee = 0
        return server.bodyArrived(part, id: id) ? .YES : .NO
    }
    return server.bodyEnded(on: connection, id: id)
}

/// libmicrohttpd's URI log callback, on the server's thread: each request's target as sent, before
/// the library splits off and decodes the query, which the handler is then given as it was sent.
private let receiveTarget: chime_mhd_target_callback = { context, target, connection in
    guard let context, let connection else { return nil }
    let server = Unmanaged<HTTPServer.Context>.fromOpaque(context).takeUnretainedValue()
    let id = UInt(bitPattern: Int(bitPattern: connection))
    let target = target.map { String(cString: $0) } ?? ""
    server.requests.withLock { $0[id] = HTTPServer.PendingRequest(target: target) }
    // The request's context stays nil, so that the access handler knows its first call.
    return nil
}

extension HTTPServer.Context {
    /// The request's line and headers are in: answer it, or read its body.
    func headersArrived(on connection: OpaquePointer, id: UInt, method: String, path: String) -> MHD_Result {
        let target = requests.withLock { $0[id]?.target } ?? path
        let query = target.firstIndex(of: "?").map { String(target[target.index(after: $0)...]) } ?? ""
        let request = HTTPRequest(
            method: method,
            path: path,
            query: query,
            headers: headers(of: connection),
            remoteAddress: remoteAddress(of: connection)
        )
        switch rules.decide(request) {
        case .answer(let response):
            requests.withLock { $0[id] = nil }
            return respond(on: connection, response)
        case .handle:
            requests.withLock { $0[id] = nil }
            return respond(on: connection, handler(request))
        case .readBody:
            // Grown as it arrives, not reserved as declared: a client that declares a body and
            // sends nothing holds no more than its headers.
            requests.withLock { $0[id] = HTTPServer.PendingRequest(target: target, request: request) }
            return .YES
        }
    }

    /// A part of the body arrived; false (close the connection) if the body would pass its bound,
    /// which libmicrohttpd's reading to `Content-Length` should never let happen.
    func bodyArrived(_ part: UnsafeRawBufferPointer, id: UInt) -> Bool {
        requests.withLock { requests in
            guard let count = requests[id]?.request?.body.count, count + part.count <= rules.maxBodyBytes else {
                requests[id] = nil
                return false
            }
            // In place: the buffer is not copied.
            requests[id]?.request?.body.append(contentsOf: part)
            return true
        }
    }

    /// The body is in: answer the request.
    func bodyEnded(on connection: OpaquePointer, id: UInt) -> MHD_Result {
        guard let request = requests.withLock({ $0.removeValue(forKey: id)?.request }) else { return .NO }
        return respond(on: connection, handler(request))
    }

    /// Queues `response`, or a 500 if its headers would not fit (libmicrohttpd would close the
    /// connection without an answer); the connection closes once it is sent.
    func respond(on connection: OpaquePointer, _ response: HTTPResponse) -> MHD_Result {
        var response = response
        var headers = response.headersToSend()
        let size = headers.reduce(response.contentType.utf8.count) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 }
        if size > maxResponseHeaderBytes {
            response = HTTPResponse(status: 500, "the response's headers are too large\n")
            headers = response.headersToSend()
        }
        // Each name and value NUL-terminated, one after the other, as chime_mhd_respond reads them.
        let block = headers.flatMap { $0.0.utf8CString + $0.1.utf8CString }
        return response.body.withUnsafeBytes { body in
            block.withUnsafeBufferPointer { block in
                withCString(response.contentTypeToSend) { type in
                    chime_mhd_respond(
                        connection,
                        UInt32(response.statusToSend),
                        type,
                        block.baseAddress,
                        headers.count,
                        body.baseAddress,
                        body.count
                    )
                }
            }
        }
    }

    /// The request's header fields in the order they arrived.
    func headers(of connection: OpaquePointer) -> [(String, String)] {
        var headers: [(String, String)] = []
        withUnsafeMutablePointer(to: &headers) { headers in
            _ = MHD_get_connection_values_n(
                connection,
                .HEADER_KIND,
                { headers, _, name, nameLength, value, valueLength in
                    guard let headers, let name else { return .YES }
                    // Without the spaces and tabs around it (libmicrohttpd leaves those after it).
                    func text(_ pointer: UnsafePointer<CChar>?, _ length: Int) -> String {
                        guard let pointer else { return "" }
                        return pointer.withMemoryRebound(to: UInt8.self, capacity: length) {
                            let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
                            let bytes = UnsafeBufferPointer(start: $0, count: length)
                            let start = bytes.firstIndex { !blank($0) } ?? bytes.endIndex
                            let end = bytes.lastIndex { !blank($0) }.map { $0 + 1 } ?? start
                            return String(decoding: bytes[start..<max(start, end)], as: UTF8.self)
                        }
                    }
                    headers.assumingMemoryBound(to: [(String, String)].self).pointee.append(
                        (text(name, nameLength), text(value, valueLength))
                    )
                    return .YES
                },
                headers
            )
        }
        return headers
    }

    /// The client's address as text; an IPv4 address mapped into IPv6 as IPv4.
    func remoteAddress(of connection: OpaquePointer) -> String {
        var address = [UInt8](repeating: 0, count: 16)
        let length = chime_mhd_client_address(connection, &address)
        let mapped: [UInt8] = Array(repeating: 0, count: 10) + [0xFF, 0xFF]
        if length == 16 && address.starts(with: mapped) {
            return address[12...].map(String.init).joined(separator: ".")
        }
        guard length == 4 || length == 16 else { return "" }
        var text = [UInt8](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let written = text.withUnsafeMutableBufferPointer {
            $0.withMemoryRebound(to: CChar.self) {
                inet_ntop(length == 4 ? AF_INET : AF_INET6, address, $0.baseAddress, socklen_t($0.count)) != nil
            }
        }
        return written ? String(decoding: text.prefix { $0 != 0 }, as: UTF8.self) : ""
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
        // A request cut off (its time was up, or its client left) before it was answered.
        server.requests.withLock { $0[id] = nil }
    }
}
