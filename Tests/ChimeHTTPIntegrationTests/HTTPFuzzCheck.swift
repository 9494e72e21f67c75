import ChimeHTTP
import Foundation

/// The properties the `http` fuzz target (`Fuzz/FuzzHTTP.swift`) checks, shared with
/// `HTTPServerTests`, which checks every seed in `Fuzz/corpus/http/` with them so that `make test`
/// keeps checking what the fuzzer was given. `scripts/fuzz` compiles this file into the target with
/// ChimeHTTP; it must import nothing else.
enum HTTPFuzzCheck {
    /// A short request time, so that an input that leaves its request unfinished costs little, and
    /// the least memory per connection, so that inputs of the fuzzer's length reach its end.
    static let limits = {
        var limits = HTTPServer.Limits()
        limits.requestTime = .milliseconds(250)
        limits.bytesPerConnection = HTTPServer.Limits.bytesPerConnectionRange.lowerBound
        return limits
    }()

    /// How long past its request time a connection may take to be closed: the server's thread may
    /// wait for a core on a loaded machine, and runs slower under AddressSanitizer.
    static let margin: Duration = .seconds(5)

    /// One server for every input, as a worker has one for its life: the metrics endpoint's
    /// (`GET` and `HEAD`, no body).
    static let server = makeServer(methods: ["GET", "HEAD"], maxBodyBytes: 0)

    /// The console's kind (`POST` too, with bodies that fill its memory), whose handler reads the
    /// body as a form.
    static let formServer = makeServer(methods: ["GET", "HEAD", "POST"], maxBodyBytes: 4096)

    static func makeServer(methods: [String], maxBodyBytes: Int) -> HTTPServer {
        var limits = limits
        limits.maxBodyBytes = maxBodyBytes
        do {
            return try HTTPServer(listen: "127.0.0.1:0", limits: limits, methods: methods) { request in
                switch request.path {
                case "/livez": return HTTPResponse(status: 200, "ok\n")
                case "/form":
                    let fields = request.form ?? []
                    return .redirect(
                        to: "/",
                        headers: [("Set-Cookie", "n=\(fields.count)"), ("X-Query", request.query)]
                    )
                default: return HTTPResponse(status: 404, "not found\n")
                }
            }
        } catch {
            fatalError("the fuzz target's server: \(error)")
        }
    }

    /// One input, sent to each server in turn: its first byte says how the client ends (odd: it
    /// ends its side of the connection once it has sent the rest; even: it leaves the connection
    /// open, for the server's request time to close); the rest is sent to the server as it is, as
    /// a request.
    ///
    /// Properties: whatever it is sent, each server closes the connection within its request time
    /// (and ``margin``), having sent nothing or what begins as an HTTP/1 response; and then it
    /// still answers `GET /livez` with 200. Returns the first violated, or nil.
    static func check(_ input: [UInt8]) -> String? {
        for (name, server) in [("metrics", server), ("form", formServer)] {
            if let problem = check(input, on: server) { return "\(name) server: \(problem)" }
        }
        return nil
    }

    static func check(_ input: [UInt8], on server: HTTPServer) -> String? {
        guard let mode = input.first else { return nil }
        let started = ContinuousClock.now
        guard let socket = connect(port: server.port) else {
            return "cannot connect: \(String(cString: strerror(errno)))"
        }
        defer { close(socket) }
        send(Array(input.dropFirst()), on: socket)
        if mode & 1 == 1 { shutdown(socket, Int32(SHUT_WR)) }
        let bound = limits.requestTime + margin
        let (answer, closed) = receiveUntilClosed(socket, before: started + bound)
        guard closed else {
            return "a connection sent \(input.count - 1) bytes was still open \(bound) later"
        }
        guard answer.isEmpty || answer.starts(with: Array("HTTP/1.".utf8)) else {
            return "not an HTTP response: \(String(decoding: answer.prefix(100), as: UTF8.self))"
        }

        let probeStarted = ContinuousClock.now
        guard let probe = connect(port: server.port) else {
            return "the server no longer accepts: \(String(cString: strerror(errno)))"
        }
        defer { close(probe) }
        send(Array("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n".utf8), on: probe)
        let (livez, _) = receiveUntilClosed(probe, before: probeStarted + bound)
        guard livez.starts(with: Array("HTTP/1.1 200".utf8)) else {
            return "then /livez was answered \(String(decoding: livez.prefix(100), as: UTF8.self).debugDescription)"
        }
        return nil
    }

    static func connect(port: UInt16) -> Int32? {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Foundation.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(socket)
            return nil
        }
        return socket
    }

    /// Sends what the server takes: it may close before the end.
    static func send(_ bytes: [UInt8], on socket: Int32) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes {
                Foundation.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard n > 0 else { return }
            sent += n
        }
    }

    /// What the server sends until it closes the connection (or resets it); `closed` is false if
    /// `deadline` came first.
    static func receiveUntilClosed(
        _ socket: Int32,
        before deadline: ContinuousClock.Instant
    ) -> (bytes: [UInt8], closed: Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let (seconds, attoseconds) = max(.zero, deadline - .now).components
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return (received, false) }
            let n = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                received += buffer[..<n]
            } else if n == 0 || (errno != EAGAIN && errno != EINTR) {
                return (received, true)
            }
        }
    }
}
