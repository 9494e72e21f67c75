import Testing

@testable import ChimeHTTP

/// What the server decides from a request's line and headers, and which of a response's headers it
/// sends: without a server.
@Suite struct RequestRulesTests {
    static let metrics = try! RequestRules(methods: ["GET", "HEAD"], maxBodyBytes: 0)
    static let console = try! RequestRules(methods: ["GET", "HEAD", "POST"], maxBodyBytes: 100)

    static func post(_ headers: [(String, String)]) -> HTTPRequest {
        HTTPRequest(method: "POST", path: "/login", headers: headers)
    }

    /// The status and `Allow` of an answer given without the handler, or nil.
    static func answered(_ decision: RequestRules.Decision) -> (status: Int, allow: String?)? {
        guard case .answer(let response) = decision else { return nil }
        return (response.status, response.headers.first { $0.0 == "Allow" }?.1)
    }

    @Test func aMethodNotAmongTheServersIs405WithAllow() {
        let post = Self.metrics.decide(Self.post([("Content-Length", "5")]))
        #expect(Self.answered(post)?.status == 405)
        #expect(Self.answered(post)?.allow == "GET, HEAD")
        if case .answer(let response) = post { #expect(response.body == Array("only GET and HEAD\n".utf8)) }
        for method in ["PUT", "DELETE", "OPTIONS", "get", "PATCH"] {
            let decision = Self.console.decide(HTTPRequest(method: method, path: "/"))
            #expect(Self.answered(decision)?.status == 405, "\(method)")
            #expect(Self.answered(decision)?.allow == "GET, HEAD, POST", "\(method)")
        }
    }

    @Test func getAndHeadAreHandledAtOnceTheirBodiesUnread() {
        for method in ["GET", "HEAD"] {
            for rules in [Self.metrics, Self.console] {
                let request = HTTPRequest(method: method, path: "/", headers: [("Content-Length", "100000")])
                #expect(rules.decide(request) == .handle)
            }
        }
    }

    /// The status a POST with `headers` is answered without the handler, or nil if its body is read.
    static func refusal(_ headers: [(String, String)], by rules: RequestRules = console) -> Int? {
        answered(rules.decide(post(headers)))?.status
    }

    @Test func aPostsBodyIsReadUpToTheBound() {
        #expect(Self.console.decide(Self.post([])) == .readBody(length: 0))
        #expect(Self.console.decide(Self.post([("content-length", "100")])) == .readBody(length: 100))
        #expect(Self.refusal([("Content-Length", "101")]) == 413)
        // Two lengths: the larger counts (libmicrohttpd reads the first).
        #expect(Self.refusal([("Content-Length", "5"), ("Content-Length", "500")]) == 413)
        #expect(Self.refusal([("Content-Length", "5"), ("Content-Length", "x")]) == 400)
        // Chunks: the length is not known before the body is read.
        #expect(Self.refusal([("Transfer-Encoding", "chunked")]) == 411)
        // No body may be read when the bound is 0.
        let none = try! RequestRules(methods: ["GET", "HEAD", "POST"], maxBodyBytes: 0)
        #expect(none.decide(Self.post([("Content-Length", "0")])) == .readBody(length: 0))
        #expect(Self.refusal([("Content-Length", "1")], by: none) == 413)
    }

    @Test func methodsMustBeDistinctUpperCaseTokens() {
        for bad in [[], ["GET", "GET"], ["get"], ["GET", ""], ["PO ST"], ["GET\r\n"]] {
            #expect(throws: HTTPError(.badMethods, ""), "\(bad)") { try RequestRules(methods: bad, maxBodyBytes: 0) }
        }
    }

    @Test func headersThatCannotBeSentAsTheyAreAreDropped() {
        let response = HTTPResponse(
            status: 200,
            headers: [
                ("Set-Cookie", "a=1; HttpOnly"), ("X-Split", "x\r\nX-Injected: 1"), ("X-LF", "x\ny"),
                ("X-CR", "x\ry"), ("X-NUL", "x\u{0}y"), ("Bad Name", "v"), ("Bad:Name", "v"), ("", "v"),
                ("X-Name\r\nX-Injected", "v"), ("content-length", "0"), ("Connection", "keep-alive"),
                ("Transfer-Encoding", "chunked"), ("Content-Type", "text/html"), ("Date", "never"),
                ("Set-Cookie", "b=2"), ("X-Tab", "a\tb"), ("X-Unicode", "é"),
            ],
            "ok"
        )
        let sent = response.headersToSend().map { "\($0): \($1)" }
        #expect(
            sent == [
                "Set-Cookie: a=1; HttpOnly", "Set-Cookie: b=2", "X-Tab: a\tb", "X-Unicode: é",
                "Cache-Control: no-store",
            ]
        )
        // A response's own Cache-Control replaces the default.
        let cached = HTTPResponse(status: 200, headers: [("cache-control", "max-age=60")], "ok")
        #expect(cached.headersToSend().map(\.1) == ["max-age=60"])
        #expect(HTTPResponse(status: 200, contentType: "text/html\r\nX-Injected: 1", "").contentTypeToSend == nil)
        #expect(HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", "").contentTypeToSend != nil)
        #expect(HTTPResponse(status: 99, "").statusToSend == 500)
        #expect(HTTPResponse(status: 600, "").statusToSend == 500)
        #expect(HTTPResponse(status: 303, "").statusToSend == 303)
    }

    @Test func aRedirectSaysWhereAndSeeOtherByDefault() {
        let redirect = HTTPResponse.redirect(to: "/notifications?page=2", headers: [("Set-Cookie", "s=1")])
        #expect(redirect.status == 303)
        #expect(redirect.headers.map { "\($0): \($1)" } == ["Location: /notifications?page=2", "Set-Cookie: s=1"])
        #expect(HTTPResponse.redirect(to: "/", status: 302).status == 302)
    }

    @Test func headersAreLookedUpInAnyCase() {
        let request = HTTPRequest(
            method: "GET",
            path: "/",
            headers: [("Origin", "https://a.example"), ("X-Custom", "one"), ("origin", "https://b.example")]
        )
        #expect(request.header("ORIGIN") == "https://a.example")
        #expect(request.headerValues("origin") == ["https://a.example", "https://b.example"])
        #expect(request.header("Cookie") == nil)
        #expect(request.headerValues("Cookie").isEmpty)
        // Equal by every field, headers in order.
        var other = request
        #expect(other == request)
        other.headers.reverse()
        #expect(other != request)
    }
}
