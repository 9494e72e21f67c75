import ChimeHTTP
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

@Suite struct HTTPServerTests {
    /// Counts the requests that reached the handler.
    final class Calls: Sendable {
        let count = Mutex(0)
    }

    func server(_ calls: Calls = Calls(), limits: HTTPServer.Limits = .init()) throws -> HTTPServer {
        try HTTPServer(listen: "127.0.0.1:0", limits: limits) { request in
            calls.count.withLock { $0 += 1 }
            switch request.path {
            case "/hello":
                return HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4", "hello \(request.method)\n")
            default: return HTTPResponse(status: 404, "not found\n")
            }
        }
    }

    @Test func answersGetWithWhatTheHandlerReturns() throws {
        let server = try server()
        #expect(server.port > 0)
        let hello = try HTTPProbe.get(port: Int(server.port), "/hello")
        #expect(hello.status == 200)
        #expect(hello.body == "hello GET\n")
        #expect(hello.headers["content-type"] == "text/plain; version=0.0.4")
        #expect(try HTTPProbe.get(port: Int(server.port), "/nope?x=1").status == 404)
    }

    @Test func otherMethodsAreRefusedWithoutReachingTheHandler() throws {
        let calls = Calls()
        let server = try server(calls)
        let request = "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
        let response = try HTTPProbe.parse(HTTPProbe.exchange(port: Int(server.port), Array(request.utf8)))
        #expect(response.status == 405)
        #expect(response.headers["allow"] == "GET, HEAD")
        #expect(calls.count.withLock { $0 } == 0)
        // The positive control: a GET reaches it.
        #expect(try HTTPProbe.get(port: Int(server.port), "/hello").status == 200)
        #expect(calls.count.withLock { $0 } == 1)
    }

    @Test func anOversizedRequestIsRefusedAndTheServerGoesOn() throws {
        let calls = Calls()
        let server = try server(calls)
        let huge = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Filler: \(String(repeating: "a", count: 200_000))\r\n\r\n"
        let answer = try HTTPProbe.exchange(port: Int(server.port), Array(huge.utf8))
        // Refused with a 4xx status, or the connection is closed without an answer.
        if !answer.isEmpty {
            let status = try HTTPProbe.parse(answer).status
            #expect((400..<500).contains(status))
        }
        #expect(calls.count.withLock { $0 } == 0)
        #expect(try HTTPProbe.get(port: Int(server.port), "/hello").status == 200)
    }

    @Test func aConnectionThatSendsNothingIsClosedAfterTheIdleTime() throws {
        var limits = HTTPServer.Limits()
        limits.idleSeconds = 1
        let server = try server(limits: limits)
        // Half a request, then nothing: the server closes it (recv returns before our 10 s).
        let started = ContinuousClock.now
        let answer = try HTTPProbe.exchange(port: Int(server.port), Array("GET /hello HTTP/1.1\r\n".utf8))
        #expect(answer.isEmpty)
        #expect(ContinuousClock.now - started < .seconds(9))
        #expect(try HTTPProbe.get(port: Int(server.port), "/hello").status == 200)
    }

    @Test func connectionsBeyondTheLimitAreClosedAndServedAgainOnceTheOthersGo() throws {
        var limits = HTTPServer.Limits()
        limits.connectionsPerAddress = 4
        let server = try server(limits: limits)
        let port = Int(server.port)
        // Four connections that never finish their request hold every slot of this address.
        var holders = try (0..<4).map { _ in try HTTPProbe.Connection(port: port) }
        for holder in holders { try holder.send(Array("GET /hello HTTP/1.1\r\n".utf8)) }
        #expect(
            try HTTPProbe.exchange(port: port, Array("GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n".utf8)).isEmpty
        )
        holders.removeAll()
        // Served once they are gone (the server notices their close on its next poll).
        let deadline = ContinuousClock.now + .seconds(10)
        var status = 0
        while status != 200 && ContinuousClock.now < deadline {
            status = (try? HTTPProbe.get(port: port, "/hello").status) ?? 0
        }
        #expect(status == 200)
    }

    @Test func aResponseComesWithoutDelay() throws {
        let server = try server()
        let started = ContinuousClock.now
        for _ in 0..<20 { _ = try HTTPProbe.get(port: Int(server.port), "/hello") }
        // Not a speed test: twenty requests that each waited for a poll timeout would take seconds.
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    @Test func aBadOrTakenAddressIsAClearError() throws {
        #expect(throws: HTTPError(.badAddress, "")) {
            try HTTPServer(listen: "nonsense") { _ in .init(status: 200, "") }
        }
        #expect(throws: HTTPError(.badAddress, "")) {
            try HTTPServer(listen: "127.0.0.1:99999") { _ in .init(status: 200, "") }
        }
        let first = try server()
        #expect(throws: HTTPError(.cannotListen, "")) {
            try HTTPServer(listen: "127.0.0.1:\(first.port)") { _ in .init(status: 200, "") }
        }
    }
}
