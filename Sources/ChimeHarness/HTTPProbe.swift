import Foundation

/// A blocking HTTP/1.1 client over a plain socket, for tests of HTTP endpoints: it sends exactly
/// the bytes it is given, so tests can also send what a misbehaving client would.
public enum HTTPProbe {
    public struct Response: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: String
    }

    /// `GET path` on 127.0.0.1:port, in HTTP/1.0 so that the answer comes whole (not chunked).
    public static func get(port: Int, _ path: String) throws -> Response {
        try parse(
            exchange(port: port, Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        )
    }

    /// An open connection that sends what it is told and is closed when released.
    public final class Connection {
        let fd: Int32

        public init(port: Int) throws {
            fd = try HTTPProbe.connect(port: port, timeout: 10)
        }

        deinit { close(fd) }

        public func send(_ bytes: [UInt8]) throws {
            let n = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n == bytes.count else { throw HarnessError("send: \(String(cString: strerror(errno)))") }
        }
    }

    static func connect(port: Int, timeout: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let connected = withLoopback(port: port) { Foundation.connect(fd, $0, $1) == 0 }
        guard connected else {
            close(fd)
            throw HarnessError("connect to port \(port): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// Sends `request` as it is and returns everything the server sent until it closed (or
    /// `timeout` seconds passed without a byte).
    public static func exchange(port: Int, _ request: [UInt8], timeout: Int = 10) throws -> [UInt8] {
        let fd = try connect(port: port, timeout: timeout)
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

/// 127.0.0.1:`port` as a socket address, for `body`.
func withLoopback<R>(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            body($0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
}
