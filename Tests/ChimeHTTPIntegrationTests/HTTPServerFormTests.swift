import ChimeHTTP
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// The server as the console uses it (`GET`, `HEAD` and `POST`, bodies up to 64 KiB), on a free
/// loopback port, sent requests as they are by raw sockets: what reaches the handler, what never
/// does, and what is sent back.
@Suite struct HTTPServerFormTests {
    /// The requests that reached the handler.
    final class Recorder: Sendable {
        let requests = Mutex<[HTTPRequest]>([])
        var count: Int { requests.withLock { $0.count } }
        var last: HTTPRequest? { requests.withLock { $0.last } }
    }

    static let maxBody = 64 * 1024

    static func limits(requestTime: Duration = .seconds(10)) -> HTTPServer.Limits {
        var limits = HTTPServer.Limits()
        limits.maxBodyBytes = maxBody
        limits.requestTime = requestTime
        return limits
    }

    /// A console's server: `/form` answers a form with a redirect and cookies, `/headers` with
    /// headers safe and not, `/big-header` with a header of the size its query asks, anything else
    /// with 200 and the body's length.
    static func server(
        _ recorder: Recorder,
        limits: HTTPServer.Limits = limits(),
        methods: [String] = ["GET", "HEAD", "POST"],
        tls: HTTPServer.TLS? = nil
    ) throws -> HTTPServer {
        try HTTPServer(listen: "127.0.0.1:0", limits: limits, methods: methods, tls: tls) { request in
            recorder.requests.withLock { $0.append(request) }
            switch request.path {
            case "/form":
                guard let form = request.form else { return HTTPResponse(status: 415, "a form, please\n") }
                // What the form held, in short: a long Location would not fit in the server's memory.
                let first = String((form.first?.1 ?? "").prefix(20))
                return .redirect(
                    to: "/done?" + HTTPForm.encode([("fields", "\(form.count)"), ("first", first)]),
                    headers: [("Set-Cookie", "session=abc; HttpOnly; SameSite=Strict"), ("Set-Cookie", "flash=1")]
                )
            case "/headers":
                return HTTPResponse(
                    status: 200,
                    contentType: "text/html; charset=utf-8",
                    headers: [
                        ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"),
                        ("X-Frame-Options", "DENY"), ("X-Split", "a\r\nX-Injected: 1"), ("X-LF", "a\nX-Injected: 2"),
                        ("X-Injected: 3\r\nX-Name", "a"), ("Content-Length", "9999"),
                        ("X-Content-Type-Options", "nosniff"),
                    ],
                    "<p>ok</p>\n"
                )
            case "/big-header":
                let size = Int(request.query) ?? 0
                return HTTPResponse(status: 200, headers: [("X-Big", String(repeating: "b", count: size))], "big\n")
            default:
                return HTTPResponse(status: 200, "\(request.method) \(request.body.count) bytes\n")
            }
        }
    }

    /// Each header line of a raw response, as sent (repeated names kept).
    static func headerLines(_ answer: [UInt8]) -> [String] {
        let text = String(decoding: answer, as: UTF8.self)
        let head = text.range(of: "\r\n\r\n").map { text[..<$0.lowerBound] } ?? text[...]
        return head.components(separatedBy: "\r\n").dropFirst().map { $0 }
    }

    static func post(_ path: String, _ body: String, type: String = HTTPForm.contentType) -> [UInt8] {
        Array(
            "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                .utf8
        )
    }

    @Test func theQueryHeadersAndAddressReachTheHandler() throws {
        let recorder = Recorder()
        let server = try Self.server(recorder)
        let port = Int(server.port)
        let request =
            "GET /echo?a=1&b=x+y%21&a=2 HTTP/1.1\r\nHost: console.example\r\nX-Custom:  One \r\n"
            + "x-custom: two\r\nCookie: session=abc\r\nOrigin: http://console.example\r\n\r\n"
        let answer = try HTTPProbe.parse(HTTPProbe.exchange(port: port, Array(request.utf8)))
        #expect(answer.status == 200)
        let seen = try #require(recorder.last)
        #expect(seen.method == "GET")
        #expect(seen.path == "/echo")
        #expect(seen.query == "a=1&b=x+y%21&a=2")
        #expect(formText(seen.queryItems) == ["a=1", "b=x y!", "a=2"])
        #expect(seen.header("x-CUSTOM") == "One")
        #expect(seen.headerValues("X-Custom") == ["One", "two"])
        #expect(seen.header("cookie") == "session=abc")
        #expect(seen.header("Origin") == "http://console.example")
        #expect(seen.headers.map(\.0) == ["Host", "X-Custom", "x-custom", "Cookie", "Origin"])
        #expect(seen.remoteAddress == "127.0.0.1")
        #expect(seen.body.isEmpty)

        // Without a query, and from another loopback address.
        _ = try HTTPProbe.get(port: port, "/plain", from: "127.0.0.2")
        let plain = try #require(recorder.last)
        #expect(plain.path == "/plain")
        #expect(plain.query == "")
        #expect(plain.queryItems?.isEmpty == true)
        #expect(plain.remoteAddress == "127.0.0.2")
    }

    /// curl's exit status and what it printed (`-i`: the status line and headers, then the body).
    static func curl(_ arguments: [String]) async throws -> (status: ChildProcess.Termination?, output: [String]) {
        let curl = try ChildProcess("curl", arguments: ["-sS", "-i", "--max-time", "10"] + arguments)
        try curl.start()
        let status = await curl.waitForExit(timeout: .seconds(30))
        return (status, curl.standardOutputLines.map { $0.trimmingCharacters(in: .newlines) })
    }

    /// Whether this machine has `::1` (a container may have no IPv6 at all).
    static let hasIPv6Loopback: Bool = {
        let probe = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(probe, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0
            }
        }
    }()

    @Test(.enabled(if: hasIPv6Loopback, "this machine has no ::1"))
    func anIPv6ClientsAddressReachesTheHandler() async throws {
        let recorder = HTTPServerFormTests.Recorder()
        let server = try HTTPServer(listen: "[::1]:0") { request in
            recorder.requests.withLock { $0.append(request) }
            return HTTPResponse(status: 200, "ok\n")
        }
        let page = try await Self.curl(["-g", "http://[::1]:\(server.port)/page?v=6"])
        #expect(page.status == .exited(0), "\(page.output)")
        #expect(recorder.last?.remoteAddress == "::1")
        #expect(recorder.last?.query == "v=6")
    }

    @Test func aFormPostRoundTrips() throws {
        let recorder = Recorder()
        let server = try Self.server(recorder)
        let body = "name=J%C3%BCrgen+M&csrf=abc%2B%2F&note=line1%0D%0Aline2"
        let answer = try HTTPProbe.exchange(port: Int(server.port), Self.post("/form", body))
        let response = try HTTPProbe.parse(answer)
        let seen = try #require(recorder.last)
        #expect(seen.method == "POST")
        #expect(seen.body == Array(body.utf8))
        #expect(formText(seen.form) == ["name=Jürgen M", "csrf=abc+/", "note=line1\r\nline2"])
        // A 303 to where the handler said, with both cookies.
        #expect(response.status == 303)
        #expect(response.headers["location"] == "/done?fields=3&first=J%C3%BCrgen+M")
        let cookies = Self.headerLines(answer).filter { $0.lowercased().hasPrefix("set-cookie:") }
        #expect(cookies == ["Set-Cookie: session=abc; HttpOnly; SameSite=Strict", "Set-Cookie: flash=1"])

        // As a browser sends a larger one: waiting for 100 Continue, then the body.
        let large = "text=" + String(repeating: "a", count: Self.maxBody - 5)
        let connection = try HTTPProbe.Connection(port: Int(server.port))
        let head =
            "POST /form HTTP/1.1\r\nHost: x\r\nContent-Type: \(HTTPForm.contentType)\r\n"
            + "Content-Length: \(large.utf8.count)\r\nExpect: 100-continue\r\n\r\n"
        try connection.send(Array(head.utf8))
        var interim: [UInt8] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while !String(decoding: interim, as: UTF8.self).contains("\r\n\r\n") && ContinuousClock.now < deadline {
            interim += connection.receive(timeout: .seconds(1))
        }
        #expect(String(decoding: interim, as: UTF8.self).hasPrefix("HTTP/1.1 100"))
        try connection.send(Array(large.utf8))
        let (rest, closed) = connection.receiveUntilClosed(timeout: .seconds(10))
        #expect(closed)
        #expect(try HTTPProbe.parse(rest).status == 303)
        #expect(recorder.last?.body.count == Self.maxBody)
        #expect(recorder.count == 2)
    }

    @Test func aBodyOverTheBoundIs413AndNeverReachesTheHandler() throws {
        let recorder = Recorder()
        let server = try Self.server(recorder)
        let port = Int(server.port)
        // The first kilobyte of a body one byte too long, as sent at once: the rest is not awaited.
        let over = Self.maxBody + 1
        let head =
            "POST /form HTTP/1.1\r\nHost: x\r\nContent-Type: \(HTTPForm.contentType)\r\nContent-Length: \(over)\r\n\r\n"
        let answer = try HTTPProbe.exchange(
            port: port,
            Array(head.utf8) + Array(repeating: UInt8(ascii: "a"), count: 1024)
        )
        #expect(try HTTPProbe.parse(answer).status == 413)
        #expect(Self.headerLines(answer).contains { $0.lowercased() == "connection: close" })
        // Asked first with Expect: 100-continue: refused without a 100 Continue.
        let expecting = head.replacingOccurrences(of: "\r\n\r\n", with: "\r\nExpect: 100-continue\r\n\r\n")
        let refused = try HTTPProbe.exchange(port: port, Array(expecting.utf8))
        #expect(String(decoding: refused, as: UTF8.self).hasPrefix("HTTP/1.1 413"))
        // Larger than any buffer, sent whole: refused, or cut off mid-send; never handled.
        let huge = try HTTPProbe.exchange(port: port, Self.post("/form", String(repeating: "a", count: 4 << 20)))
        if !huge.isEmpty { #expect(try HTTPProbe.parse(huge).status == 413) }
        #expect(recorder.count == 0)
        // The positive control: one byte fewer is taken.
        let exact = "a=" + String(repeating: "b", count: Self.maxBody - 2)
        #expect(try HTTPProbe.parse(HTTPProbe.exchange(port: port, Self.post("/form", exact))).status == 303)
        #expect(recorder.last?.body.count == Self.maxBody)
    }

    /// A body sent a byte a second is cut at the request time, counted from accept, like a slow
    /// request line or header.
    @Test func aSlowBodyIsCutAtTheRequestTime() throws {
        let recorder = Recorder()
        let limits = Self.limits(requestTime: .seconds(2))
        let server = try Self.server(recorder, limits: limits)
        let started = ContinuousClock.now
        let connection = try HTTPProbe.Connection(port: Int(server.port))
        let head =
            "POST /form HTTP/1.1\r\nHost: x\r\nContent-Type: \(HTTPForm.contentType)\r\nContent-Length: 100\r\n\r\n"
        try connection.send(Array(head.utf8))
        var closed = false
        var sent = 0
        // A byte, then a second's wait for the server to close, until it does (or 20 s pass).
        while !closed && ContinuousClock.now - started < .seconds(20) {
            try? connection.send([UInt8(ascii: "a")])
            sent += 1
            closed = !HTTPProbe.Connection.closed([connection], waitingUpTo: .seconds(1)).isEmpty
        }
        let elapsed = ContinuousClock.now - started
        #expect(closed, "still open after 20 s and \(sent) bytes")
        #expect(elapsed >= limits.requestTime, "closed after \(elapsed)")
        #expect(sent < 100)
        #expect(recorder.count == 0)
        // The positive control: a body sent at once is handled.
        #expect(
            try HTTPProbe.parse(HTTPProbe.exchange(port: Int(server.port), Self.post("/form", "a=1"))).status == 303
        )
        #expect(recorder.count == 1)
    }

    @Test func otherMethodsAre405WithAllowAndNeverHandled() throws {
        let recorder = Recorder()
        let server = try Self.server(recorder)
        for method in ["PUT", "DELETE", "PATCH", "OPTIONS"] {
            let request = "\(method) /form HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\na=1"
            let response = try HTTPProbe.parse(HTTPProbe.exchange(port: Int(server.port), Array(request.utf8)))
            #expect(response.status == 405, "\(method)")
            #expect(response.headers["allow"] == "GET, HEAD, POST", "\(method)")
        }
        // A body in chunks: its length is not known before it is read.
        let chunked = "POST /form HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na=1\r\n0\r\n\r\n"
        #expect(try HTTPProbe.parse(HTTPProbe.exchange(port: Int(server.port), Array(chunked.utf8))).status == 411)
        #expect(recorder.count == 0)
        // The positive control: a POST is handled, a HEAD too (without the body).
        #expect(try HTTPProbe.parse(HTTPProbe.exchange(port: Int(server.port), Self.post("/other", ""))).status == 200)
        let head = try HTTPProbe.exchange(port: Int(server.port), Array("HEAD /other HTTP/1.0\r\n\r\n".utf8))
        #expect(try HTTPProbe.parse(head).status == 200)
        #expect(try HTTPProbe.parse(head).body.isEmpty)
        #expect(recorder.requests.withLock { $0.map(\.method) } == ["POST", "HEAD"])
    }

    /// The metrics endpoint's configuration, whatever the body limit: a POST is 405, as before.
    @Test func aGetOnlyServerStill405sAPost() throws {
        let recorder = Recorder()
        let server = try Self.server(recorder, methods: ["GET", "HEAD"])
        for body in ["", "a=1"] {
            let response = try HTTPProbe.parse(HTTPProbe.exchange(port: Int(server.port), Self.post("/form", body)))
            #expect(response.status == 405)
            #expect(response.headers["allow"] == "GET, HEAD")
        }
        #expect(recorder.count == 0)
        #expect(try HTTPProbe.get(port: Int(server.port), "/other").status == 200)
        #expect(recorder.count == 1)
    }

    @Test func extraHeadersAreSentAndNoneWithCRorLF() throws {
        let recorder = Recorder()
        let server = try Self.server(recorder)
        let answer = try HTTPProbe.exchange(port: Int(server.port), Array("GET /headers HTTP/1.0\r\n\r\n".utf8))
        let response = try HTTPProbe.parse(answer)
        #expect(response.status == 200)
        #expect(response.body == "<p>ok</p>\n")
        let lines = Self.headerLines(answer)
        #expect(lines.contains("Content-Security-Policy: default-src 'self'; frame-ancestors 'none'"))
        #expect(lines.contains("X-Frame-Options: DENY"))
        #expect(lines.contains("X-Content-Type-Options: nosniff"))
        #expect(lines.contains("Cache-Control: no-store"))
        #expect(response.headers["content-type"] == "text/html; charset=utf-8")
        // The server's length, not the handler's; nothing injected, nothing of the refused fields.
        #expect(response.headers["content-length"] == "10")
        #expect(
            !lines.contains { $0.lowercased().hasPrefix("x-injected") || $0.contains("X-Split") || $0.contains("X-LF") }
        )
        #expect(lines.count(where: { $0.lowercased().hasPrefix("content-length") }) == 1)
        // And the server goes on.
        #expect(try HTTPProbe.get(port: Int(server.port), "/other").status == 200)
    }

    /// libmicrohttpd writes the headers in what the request left of the connection's memory (32 KiB
    /// by default): a response whose headers pass half of it is a 500, not a connection closed
    /// without an answer.
    @Test func headersTooLargeToSendAreA500() throws {
        let server = try Self.server(Recorder())
        let fits = try HTTPProbe.get(port: Int(server.port), "/big-header?8000")
        #expect(fits.status == 200)
        #expect(fits.headers["x-big"]?.count == 8000)
        let tooLarge = try HTTPProbe.get(port: Int(server.port), "/big-header?40000")
        #expect(tooLarge.status == 500)
        #expect(tooLarge.headers["x-big"] == nil)
    }
}
