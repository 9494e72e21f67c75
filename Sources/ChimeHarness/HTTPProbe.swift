import Foundation

/// A blocking HTTP/1.1 client over a plain socket, for tests of HTTP endpoints: it sends exactly
/// the bytes it is given, so tests can also send what a misbehaving client would.
public enum HTTPProbe {
    public struct Response: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: String
    }

    /// `GET path` on 127.0.0.1:port, in HTTP/1.0 so that the answer comes whole (not chunked);
    /// from the loopback address `source` when given (see ``Connection/init(port:from:)``).
    public static func get(port: Int, _ path: String, from source: String? = nil) throws -> Response {
        try parse(
            exchange(port: port, Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8), from: source)
        )
    }

    /// An open connection that sends what it is told and is closed when released.
    public final class Connection {
        let fd: Int32

        /// Connects to 127.0.0.1:`port` from `source`, a loopback address such as `127.0.0.2`
        /// (any of 127.0.0.0/8 on Linux), so that tests can be several clients; from 127.0.0.1
        /// when nil.
        public init(port: Int, from source: String? = nil) throws {
            fd = try HTTPProbe.connect(port: port, timeout: 10, from: source)
        }

        deinit { close(fd) }

        public func send(_ bytes: [UInt8]) throws {
            let n = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n == bytes.count else { throw HarnessError("send: \(String(cString: strerror(errno)))") }
        }

        /// The bytes that arrive first, waiting at most `timeout` for them: an interim answer
        /// (`100 Continue`) before the request is all sent. Empty if none came, or the server closed.
        public func receive(timeout: Duration) -> [UInt8] {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, milliseconds(timeout)) > 0 else { return [] }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            return n > 0 ? Array(buffer[..<n]) : []
        }

        /// Reads what the server sends until it closes the connection (or resets it), waiting at
        /// most `timeout` in all; `closed` is false if the time ran out first.
        public func receiveUntilClosed(timeout: Duration) -> (bytes: [UInt8], closed: Bool) {
            let deadline = ContinuousClock.now + timeout
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, milliseconds(deadline - .now)) > 0 else { return (received, false) }
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n > 0 {
                    received += buffer[..<n]
                } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                    return (received, true)
                }
            }
        }

        /// The indices of `connections` that the server has closed, waiting at most `timeout` for
        /// one to close if none has yet. What the server sent on them is read and dropped.
        public static func closed(_ connections: [Connection], waitingUpTo timeout: Duration) -> Set<Int> {
            var descriptors = connections.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            guard poll(&descriptors, nfds_t(descriptors.count), milliseconds(timeout)) > 0 else { return [] }
            var closed: Set<Int> = []
            for (i, descriptor) in descriptors.enumerated() where descriptor.revents != 0 {
                if connections[i].receiveUntilClosed(timeout: .zero).closed { closed.insert(i) }
            }
            return closed
        }
    }

    static func connect(port: Int, timeout: Int, from source: String? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            let bound = withLoopback(port: 0, address: source) { bind(fd, $0, $1) == 0 }
            guard bound else {
                close(fd)
                throw HarnessError("bind to \(source): \(String(cString: strerror(errno)))")
            }
        }
        let connected = withLoopback(port: port) { Foundation.connect(fd, $0, $1) == 0 }
        guard connected else {
            close(fd)
            throw HarnessError("connect to port \(port): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// Sends `request` as it is and returns everything the server sent until it closed (or
    /// `timeout` seconds passed without a byte).
    public static func exchange(
        port: Int,
        _ request: [UInt8],
        timeout: Int = 10,
        from source: String? = nil
    ) throws -> [UInt8] {
        let fd = try connect(port: port, timeout: timeout, from: source)
        defer { close(fd) }
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            // The server may stop reading (and close) before the request ends: keep what it answered.
            guard n > 0 else { break }
            sent += n
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            received += buffer[..<n]
        }
        return received
    }

    /// Status, headers and body of a response (the body as sent: no chunked transfer coding).
    public static func parse(_ bytes: [UInt8]) throws -> Response {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else {
            throw HarnessError("not an HTTP response: \(text.prefix(200))")
        }
        let head = text[..<end.lowerBound].components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw HarnessError("bad status line: \(head[0])")
        }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces
            )
        }
        return Response(status: status, headers: headers, body: String(text[end.upperBound...]))
    }
}

/// `duration` in whole milliseconds for poll(), at least 0.
private func milliseconds(_ duration: Duration) -> Int32 {
    let (seconds, attoseconds) = max(.zero, duration).components
    return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
}

/// `address`:`port` (127.0.0.1 unless told) as a socket address, for `body`.
func withLoopback<R>(
    port: Int,
    address text: String = "127.0.0.1",
    _ body: (UnsafePointer<sockaddr>, socklen_t) -> R
) -> R {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr(text)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            body($0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
}
