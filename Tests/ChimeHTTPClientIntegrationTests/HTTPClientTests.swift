import ChimeHTTPClient
import ChimeTestSupport
import Foundation
import Testing

/// The client against real servers on loopback: nghttpd (HTTP/2), openssl s_server (HTTP/1 with
/// canned responses), and TCP listeners that never answer, close or reset.
@Suite("HTTPClient against real servers")
struct HTTPClientTests {
    @Test("a POST over HTTP/2 returns the status, the headers and the body")
    func postOverHTTP2() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http2Server(["--echo-upload"])
        let completions = world.completions
        let client = try world.client()
        let body = Array(#"{"aps":{"alert":"hello"}}"#.utf8)
        let request = HTTPRequest(
            id: 1,
            url: server.url("/3/device/abc"),
            headers: [HTTPHeader("apns-topic", "com.example.app"), HTTPHeader("Content-Type", "application/json")],
            body: body
        )
        #expect(client.submit(request))
        let response = try await completions.response(for: 1)
        #expect(response.status == 200)
        #expect(response.httpVersion == 2)
        #expect(response.body == body)
        #expect(response.header("Content-Length") == String(body.count))
        #expect(response.headers.allSatisfy { $0.name == $0.name.lowercased() })
        #expect(response.header("server")?.hasPrefix("nghttpd") == true)
        // The request's own fields reached the server (its log shows the HEADERS frame).
        #expect(server.log.contains { $0.contains("apns-topic: com.example.app") })
        #expect(server.log.contains { $0.contains(":method: POST") })
        #expect(server.log.contains { $0.contains("user-agent: Chime") })
        #expect(client.inFlight == 0)
    }

    @Test("a PUT of 1 MiB over HTTP/2 arrives whole (the body is read in pieces, straight from the array)")
    func largeBodyPut() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http2Server(["--echo-upload"])
        let completions = world.completions
        let client = try world.client() { $0.maxResponseBytes = 2 << 20 }
        var random = SplitMix64(seed: 42)
        let body = (0..<(1 << 20)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        #expect(client.submit(HTTPRequest(id: 1, method: "PUT", url: server.url("/upload"), body: body)))
        let response = try await completions.response(for: 1)
        #expect(response.status == 200)
        #expect(response.body == body)
        #expect(server.log.contains { $0.contains(":method: PUT") })
    }

    @Test("100 concurrent requests, then 10 one after another, share one HTTP/2 connection")
    func connectionReuse() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http2Server()
        let completions = world.completions
        let client = try world.client()
        for id in 1...100 {
            #expect(client.submit(HTTPRequest(id: UInt64(id), method: "GET", url: server.url("/ok"))))
        }
        for id in 1...100 {
            let response = try await completions.response(for: UInt64(id))
            #expect(response.status == 200 && response.body == Array("ok".utf8) && response.httpVersion == 2)
        }
        for id in 101...110 {
            #expect(client.submit(HTTPRequest(id: UInt64(id), method: "GET", url: server.url("/ok"))))
            #expect(try await completions.response(for: UInt64(id)).status == 200)
        }
        #expect(completions.callCount == 110)
        #expect(completions.repeated.isEmpty)
        #expect(server.requestCount == 110)
        #expect(server.connectionCount == 1)
    }

    @Test("an HTTP/1-only TLS server (no ALPN) still works")
    func http1Server() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http1Server()
        try server.respond(
            to: "hello",
            head: "HTTP/1.1 200 OK\nContent-Length: 6\nX-Test:  spaced value \n\n",
            body: Array("hello\n".utf8)
        )
        let completions = world.completions
        let client = try world.client()
        #expect(client.submit(HTTPRequest(id: 1, method: "GET", url: server.url("/hello"))))
        let response = try await completions.response(for: 1)
        #expect(response.status == 200)
        #expect(response.httpVersion == 1)
        #expect(response.body == Array("hello\n".utf8))
        #expect(response.header("x-test") == "spaced value")
        #expect(response.headers.map(\.name) == ["content-length", "x-test"])
    }

    @Test("a redirect is returned as it is, not followed")
    func redirectNotFollowed() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http1Server()
        try server.respond(to: "target", head: "HTTP/1.1 200 OK\nContent-Length: 6\n\n", body: Array("target".utf8))
        try server.respond(
            to: "moved",
            head: "HTTP/1.1 301 Moved Permanently\nLocation: \(server.url("/target"))\nContent-Length: 0\n\n"
        )
        let completions = world.completions
        let client = try world.client()
        // The target answers (positive control), then the redirect to it is returned, not followed.
        #expect(client.submit(HTTPRequest(id: 1, method: "GET", url: server.url("/target"))))
        #expect(try await completions.response(for: 1).status == 200)
        #expect(client.submit(HTTPRequest(id: 2, method: "GET", url: server.url("/moved"))))
        let response = try await completions.response(for: 2)
        #expect(response.status == 301)
        #expect(response.header("location") == server.url("/target"))
        #expect(response.body.isEmpty)
    }

    @Test("an HTTP/2 redirect (nghttpd's 301 for a directory) is returned too")
    func redirectOverHTTP2() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http2Server()
        try FileManager.default.createDirectory(
            atPath: server.documents.appending("folder"),
            withIntermediateDirectories: false
        )
        try server.serve("folder/index.html", Array("index".utf8))
        let completions = world.completions
        let client = try world.client()
        #expect(client.submit(HTTPRequest(id: 1, method: "GET", url: server.url("/folder"))))
        let response = try await completions.response(for: 1)
        #expect(response.status == 301)
        #expect(response.header("location") == server.url("/folder/"))
        #expect(server.requestCount == 1)
    }

    @Test("http:// and other schemes are refused before any connection")
    func protocolRefused() async throws {
        let listener = try TestTCPServer(.close)
        let completions = Completions()
        let client = try makeClient(completions, caFile: nil)
        #expect(client.submit(HTTPRequest(id: 1, url: listener.url(scheme: "http"))))
        #expect(client.submit(HTTPRequest(id: 2, url: listener.url(scheme: "ftp"))))
        #expect(client.submit(HTTPRequest(id: 3, url: listener.url(scheme: "gopher"))))
        #expect(client.submit(HTTPRequest(id: 4, url: listener.url(scheme: "HTTP"))))
        for id: UInt64 in 1...4 {
            #expect(try await completions.error(for: id).code == .protocolRefused)
        }
        #expect(listener.acceptedCount == 0)
        // Positive control: the same listener over https is connected to.
        #expect(client.submit(HTTPRequest(id: 5, url: listener.url(scheme: "https"))))
        _ = try await completions.error(for: 5)
        #expect(listener.acceptedCount == 1)
    }

    @Test("loopback is refused when not allowed, by literal address and by name, with no connection made")
    func loopbackRefused() async throws {
        let listener = try TestTCPServer(.close)
        let completions = Completions()
        let client = try makeClient(completions, caFile: nil, policy: .publicOnly)
        let urls = [
            listener.url(host: "127.0.0.1"), listener.url(host: "localhost"), listener.url(host: "LocalHost"),
            listener.url(host: "[::1]"), listener.url(host: "[::ffff:127.0.0.1]"), listener.url(host: "2130706433"),
            listener.url(host: "127.1"), listener.url(host: "0x7f000001"), listener.url(host: "0.0.0.0"),
        ]
        for (index, url) in urls.enumerated() {
            #expect(client.submit(HTTPRequest(id: UInt64(index), url: url)))
        }
        for (index, url) in urls.enumerated() {
            let error = try await completions.error(for: UInt64(index))
            #expect(error.code == .addressRefused, "\(url): \(error)")
        }
        #expect(listener.acceptedCount == 0)
        // Positive control: a client that allows loopback connects to the same listener by name.
        let allowing = try makeClient(completions, caFile: nil, policy: AddressPolicy(allowLoopback: true))
        #expect(allowing.submit(HTTPRequest(id: 100, url: listener.url(host: "localhost"))))
        let control = try await completions.error(for: 100)
        #expect(control.code != .addressRefused)
        #expect(listener.acceptedCount == 1)
    }

    @Test("a black-holed server times out within its timeout while other requests complete meanwhile")
    func blackHoleTimesOut() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http2Server()
        let blackHole = try TestTCPServer(.silent)
        let completions = world.completions
        let client = try world.client()
        let timeout = Duration.seconds(3)
        let started = ContinuousClock.now
        #expect(client.submit(HTTPRequest(id: 1, method: "GET", url: blackHole.url(), timeout: timeout)))
        let connected = await eventually { blackHole.acceptedCount == 1 }
        #expect(connected)
        #expect(client.submit(HTTPRequest(id: 2, method: "GET", url: server.url("/ok"))))
        #expect(try await completions.response(for: 2).status == 200)
        #expect(completions.result(1) == nil, "the good request completed while the black hole was pending")
        let error = try await completions.error(for: 1)
        let elapsed = ContinuousClock.now - started
        #expect(error.code == .timeout, "\(error)")
        #expect(elapsed >= timeout - .milliseconds(50), "timed out early: \(elapsed)")
        #expect(elapsed < timeout + .seconds(5), "timed out late: \(elapsed)")
    }

    @Test("the connect timeout bounds a TLS handshake that never completes")
    func connectTimeout() async throws {
        let blackHole = try TestTCPServer(.silent)
        let completions = Completions()
        let client = try makeClient(completions, caFile: nil) { $0.connectTimeout = .seconds(1) }
        let started = ContinuousClock.now
        #expect(client.submit(HTTPRequest(id: 1, url: blackHole.url(), timeout: .seconds(60))))
        let error = try await completions.error(for: 1)
        #expect(error.code == .timeout, "\(error)")
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test("a body larger than maxResponseBytes is responseTooLarge; one of exactly that size is whole")
    func responseTooLarge() async throws {
        let world = try await ClientWorld.make()
        let limit = 65536
        let withLength = try await world.http2Server()
        let withoutLength = try await world.http2Server(["--no-content-length"])
        let http1 = try await world.http1Server()
        let exact = [UInt8](repeating: UInt8(ascii: "a"), count: limit)
        let over = exact + [UInt8(ascii: "b")]
        for server in [withLength, withoutLength] {
            try server.serve("exact", exact)
            try server.serve("over", over)
        }
        // HTTP/1.0 style: no content-length, the body runs to the connection's close.
        try http1.respond(to: "exact", head: "HTTP/1.0 200 OK\n\n", body: exact)
        try http1.respond(to: "over", head: "HTTP/1.0 200 OK\n\n", body: over)
        let completions = world.completions
        let client = try world.client() { $0.maxResponseBytes = limit }
        let urls = [withLength.url("/"), withoutLength.url("/"), http1.url("/")]
        for (index, base) in urls.enumerated() {
            #expect(client.submit(HTTPRequest(id: UInt64(2 * index), method: "GET", url: base + "exact")))
            #expect(try await completions.response(for: UInt64(2 * index)).body == exact, "\(base)exact")
            #expect(client.submit(HTTPRequest(id: UInt64(2 * index + 1), method: "GET", url: base + "over")))
            let error = try await completions.error(for: UInt64(2 * index + 1))
            #expect(error.code == .responseTooLarge, "\(base)over: \(error)")
        }
    }

    @Test("a header block over 100 fields or 16 KiB is responseTooLarge; one at the limits is whole")
    func headersTooLarge() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http1Server()
        func fields(_ count: Int) -> String {
            (1...count).map { "X-Field-\($0): \($0)\n" }.joined()
        }
        let statusLine = "HTTP/1.1 200 OK\n"
        try server.respond(to: "hundred", head: statusLine + fields(99) + "Content-Length: 0\n\n")
        try server.respond(to: "more", head: statusLine + fields(100) + "Content-Length: 0\n\n")
        // Status line (17 bytes with CRLF), one big field, the blank line (2): exactly the limit.
        let big = HTTPResponse.maxHeaderBytes - 17 - 2 - "X-Big: \r\n".utf8.count
        try server.respond(to: "full", head: statusLine + "X-Big: \(String(repeating: "b", count: big))\n\n")
        try server.respond(to: "bigger", head: statusLine + "X-Big: \(String(repeating: "b", count: big + 1))\n\n")
        let completions = world.completions
        let client = try world.client()
        #expect(client.submit(HTTPRequest(id: 1, method: "GET", url: server.url("/hundred"))))
        #expect(try await completions.response(for: 1).headers.count == 100)
        #expect(client.submit(HTTPRequest(id: 2, method: "GET", url: server.url("/more"))))
        #expect(try await completions.error(for: 2).code == .responseTooLarge)
        #expect(client.submit(HTTPRequest(id: 3, method: "GET", url: server.url("/full"))))
        #expect(try await completions.response(for: 3).header("x-big")?.count == big)
        #expect(client.submit(HTTPRequest(id: 4, method: "GET", url: server.url("/bigger"))))
        #expect(try await completions.error(for: 4).code == .responseTooLarge)
    }

    @Test("a certificate the client does not trust is a tls error")
    func untrustedCertificate() async throws {
        let world = try await ClientWorld.make()
        let other = try await ClientWorld.make()
        let server = try await world.http2Server()
        let completions = world.completions
        let systemStore = try makeClient(completions, caFile: nil)
        let otherCA = try makeClient(completions, caFile: other.certificates.caFile)
        let trusting = try world.client()
        #expect(systemStore.submit(HTTPRequest(id: 1, method: "GET", url: server.url("/ok"))))
        #expect(otherCA.submit(HTTPRequest(id: 2, method: "GET", url: server.url("/ok"))))
        #expect(try await completions.error(for: 1).code == .tls)
        #expect(try await completions.error(for: 2).code == .tls)
        // Positive control: the CA that signed it is trusted, by IP address and by name.
        #expect(trusting.submit(HTTPRequest(id: 3, method: "GET", url: server.url("/ok"))))
        #expect(try await completions.response(for: 3).status == 200)
        #expect(trusting.submit(HTTPRequest(id: 4, method: "GET", url: server.url("/ok", host: "localhost"))))
        #expect(try await completions.response(for: 4).status == 200)
    }

    @Test("shutdown completes the requests in flight and queued as cancelled, and refuses new ones")
    func shutdownCancels() async throws {
        let blackHole = try TestTCPServer(.silent)
        let completions = Completions()
        let client = try makeClient(completions, caFile: nil)
        for id: UInt64 in 1...5 {
            #expect(client.submit(HTTPRequest(id: id, url: blackHole.url(), timeout: .seconds(60))))
        }
        #expect(await eventually { blackHole.acceptedCount >= 1 })
        #expect(client.inFlight == 5)
        client.shutdown()
        // shutdown() waited for the thread: every result is in already.
        for id: UInt64 in 1...5 {
            #expect(completions.errorCode(id) == .cancelled)
        }
        #expect(completions.callCount == 5)
        #expect(client.inFlight == 0)
        #expect(!client.submit(HTTPRequest(id: 6, url: blackHole.url())))
        client.shutdown()  // idempotent
        #expect(completions.callCount == 5)
    }

    @Test("submit refuses beyond maxInFlight, and accepts again once requests complete")
    func maxInFlight() async throws {
        let blackHole = try TestTCPServer(.silent)
        let completions = Completions()
        let client = try makeClient(completions, caFile: nil) { $0.maxInFlight = 2 }
        #expect(client.submit(HTTPRequest(id: 1, url: blackHole.url(), timeout: .milliseconds(500))))
        #expect(client.submit(HTTPRequest(id: 2, url: blackHole.url(), timeout: .milliseconds(500))))
        #expect(!client.submit(HTTPRequest(id: 3, url: blackHole.url())))
        #expect(client.inFlight == 2)
        #expect(try await completions.error(for: 1).code == .timeout)
        #expect(try await completions.error(for: 2).code == .timeout)
        #expect(client.inFlight == 0)
        #expect(client.submit(HTTPRequest(id: 4, url: "https://127.0.0.1:1/", timeout: .milliseconds(500))))
        _ = try await completions.error(for: 4)
        #expect(completions.result(3) == nil)
    }

    @Test("a request that cannot be sent as it is completes as invalidRequest")
    func invalidRequests() async throws {
        let listener = try TestTCPServer(.close)
        let completions = Completions()
        let client = try makeClient(completions, caFile: nil)
        let url = listener.url()
        let requests = [
            HTTPRequest(id: 1, url: url, headers: [HTTPHeader("x-a", "b\r\nx-injected: 1")]),
            HTTPRequest(id: 2, url: url, headers: [HTTPHeader("x-a", "b\nc")]),
            HTTPRequest(id: 3, url: url, headers: [HTTPHeader("x-a", "b\u{0}c")]),
            HTTPRequest(id: 4, url: url, headers: [HTTPHeader("x a", "b")]),
            HTTPRequest(id: 5, url: url, headers: [HTTPHeader("", "b")]),
            HTTPRequest(id: 6, url: url, headers: [HTTPHeader("x-a:", "b")]),
            HTTPRequest(id: 7, url: url, headers: [HTTPHeader("Host", "evil.example")]),
            HTTPRequest(id: 8, url: url, headers: [HTTPHeader("content-length", "0")]),
            HTTPRequest(id: 9, url: url, headers: [HTTPHeader("Transfer-Encoding", "chunked")]),
            HTTPRequest(id: 10, method: "PO ST", url: url),
            HTTPRequest(id: 11, method: "", url: url),
            HTTPRequest(id: 12, method: "GET\r\n", url: url),
            HTTPRequest(id: 13, url: "not a url"),
            HTTPRequest(id: 14, url: "https://"),
            HTTPRequest(id: 15, url: "https://exa mple.com/"),
        ]
        for request in requests {
            #expect(client.submit(request))
        }
        for request in requests {
            let error = try await completions.error(for: request.id)
            #expect(error.code == .invalidRequest, "request \(request.id): \(error)")
        }
        #expect(listener.acceptedCount == 0)
    }

    /// Responses that break HTTP in one way or another, over TLS, and what each must become.
    static let hostileResponses: [(name: String, response: String, code: HTTPClientError.Code)] = [
        ("garbage", "this is not HTTP at all\r\n\r\n", .other),
        ("truncated", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", .other),
        ("bad-length", "HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n", .other),
        ("empty", "", .other),
        ("bad-chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", .other),
        ("endless-1xx", String(repeating: "HTTP/1.1 100 Continue\r\n\r\n", count: 2000), .responseTooLarge),
    ]

    @Test("a server that breaks HTTP yields an error, never a crash")
    func hostileHTTP() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http1Server()
        for hostile in Self.hostileResponses {
            try server.respond(to: hostile.name, with: Array(hostile.response.utf8))
        }
        let completions = world.completions
        let client = try world.client()
        for (index, hostile) in Self.hostileResponses.enumerated() {
            #expect(client.submit(HTTPRequest(id: UInt64(index), method: "GET", url: server.url("/\(hostile.name)"))))
            let error = try await completions.error(for: UInt64(index))
            #expect(error.code == hostile.code, "\(hostile.name): \(error)")
        }
    }

    @Test(
        "a server that closes, resets or answers in clear text yields an error, never a crash",
        arguments: [
            TestTCPServer.Behaviour.close, .reset, .send(Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".utf8)),
            .send([UInt8](repeating: 0x16, count: 5000)),
        ]
    )
    func hostileTCP(_ behaviour: TestTCPServer.Behaviour) async throws {
        let listener = try TestTCPServer(behaviour)
        let completions = Completions()
        let client = try makeClient(completions, caFile: nil)
        #expect(client.submit(HTTPRequest(id: 1, url: listener.url())))
        let error = try await completions.error(for: 1)
        #expect([.tls, .other, .connectFailed].contains(error.code), "\(error)")
        #expect(listener.acceptedCount == 1)
    }

    /// (A name that does not resolve is connectFailed too, but how long that takes is the
    /// machine's resolver's business, so it is not tested here.)
    @Test("a closed port is connectFailed")
    func connectFailed() async throws {
        let port = try TestBroker.freePort()  // nothing listens there
        let completions = Completions()
        let client = try makeClient(completions, caFile: nil)
        #expect(client.submit(HTTPRequest(id: 1, url: "https://127.0.0.1:\(port)/")))
        #expect(try await completions.error(for: 1).code == .connectFailed)
    }
}
