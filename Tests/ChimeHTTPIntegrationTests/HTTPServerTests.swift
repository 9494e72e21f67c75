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

    @Test func aConnectionThatSendsNothingIsClosedAfterTheRequestTime() throws {
        var limits = HTTPServer.Limits()
        limits.requestTime = .seconds(1)
        let server = try server(limits: limits)
        // Half a request, then nothing: the server closes it (recv returns before our 10 s).
        let started = ContinuousClock.now
        let answer = try HTTPProbe.exchange(port: Int(server.port), Array("GET /hello HTTP/1.1\r\n".utf8))
        #expect(answer.isEmpty)
        #expect(ContinuousClock.now - started < .seconds(9))
        #expect(try HTTPProbe.get(port: Int(server.port), "/hello").status == 200)
    }

    /// Half a request, which holds a connection until the server closes it.
    static let head = Array("GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8)

    /// Slowloris: clients that send a header byte far more often than any idle timeout, and never
    /// end their headers, are closed at their request time all the same.
    @Test func slowClientsAreClosedAtTheirRequestTimeHoweverSteadilyTheySend() throws {
        var limits = HTTPServer.Limits()
        limits.requestTime = .seconds(1)
        let server = try server(limits: limits)
        let port = Int(server.port)
        let started = ContinuousClock.now
        // 16 clients, 8 from each of two addresses: under both caps, so none is closed to make room.
        let slow = try (0..<16).map { try HTTPProbe.Connection(port: port, from: "127.0.0.\(2 + $0 % 2)") }
        for connection in slow { try connection.send(Self.head) }
        // Answered meanwhile, from another connection.
        #expect(try HTTPProbe.get(port: port, "/hello").status == 200)

        // A byte on each every 100 ms, or sooner when one of them is closed, for at most 20 s.
        var open = Array(slow.indices)
        var closedAt: [ContinuousClock.Instant] = []
        while !open.isEmpty && ContinuousClock.now - started < .seconds(20) {
            let closed = HTTPProbe.Connection.closed(open.map { slow[$0] }, waitingUpTo: .milliseconds(100))
            closedAt += closed.map { _ in ContinuousClock.now }
            open = open.enumerated().filter { !closed.contains($0.offset) }.map(\.element)
            // A send that fails (the server closed it) is seen closed on the next turn.
            for i in open { try? slow[i].send([UInt8(ascii: "a")]) }
        }
        #expect(open.isEmpty, "\(open.count) of 16 still open after 20 s of sending")
        // None before its time, which started after `started`.
        #expect(closedAt.allSatisfy { $0 - started >= limits.requestTime }, "\(closedAt.map { $0 - started })")
        #expect(try HTTPProbe.get(port: port, "/hello").status == 200)
    }

    /// Past a cap a new connection is not refused: the oldest (of its address, or of all) is
    /// closed to make room for it.
    @Test func theOldestConnectionMakesRoomPerAddressAndInAll() throws {
        var limits = HTTPServer.Limits()
        limits.connections = 8
        limits.connectionsPerAddress = 4
        limits.requestTime = .seconds(60)
        let server = try server(limits: limits)
        let port = Int(server.port)
        func connect(_ count: Int, from source: String) throws -> [HTTPProbe.Connection] {
            let connections = try (0..<count).map { _ in try HTTPProbe.Connection(port: port, from: source) }
            for connection in connections { try connection.send(Self.head) }
            return connections
        }
        func expectOpen(_ connections: [HTTPProbe.Connection], sourceLocation: SourceLocation = #_sourceLocation) {
            let closed = HTTPProbe.Connection.closed(connections, waitingUpTo: .zero)
            #expect(closed.isEmpty, "closed: \(closed.sorted())", sourceLocation: sourceLocation)
        }

        // Six from one address: the fifth and sixth close the first and second.
        let a = try connect(6, from: "127.0.0.2")
        #expect(a[0].receiveUntilClosed(timeout: .seconds(10)).closed)
        #expect(a[1].receiveUntilClosed(timeout: .seconds(10)).closed)
        // The positive control: 4 open of 8, so a probe takes no one's place; the others stay.
        #expect(try HTTPProbe.get(port: port, "/hello").status == 200)
        expectOpen(Array(a[2...]))

        // Four from a second address fill the 8; one from a third closes the oldest of all.
        let b = try connect(4, from: "127.0.0.3")
        let c = try connect(1, from: "127.0.0.4")
        #expect(a[2].receiveUntilClosed(timeout: .seconds(10)).closed)
        // A probe takes the place of the next oldest.
        #expect(try HTTPProbe.get(port: port, "/hello").status == 200)
        #expect(a[3].receiveUntilClosed(timeout: .seconds(10)).closed)
        expectOpen(Array(a[4...]) + b + c)
    }

    /// `/livez` and `/readyz` stay answerable while an attacker holds all the connections it may,
    /// and opens more: with the default limits, and with each at the largest value it may take.
    @Test(arguments: ["default", "largest"])
    func probesAreAnsweredWhileSlowClientsHoldAllTheyMay(limitsNamed name: String) throws {
        let limits = name == "largest" ? HTTPServer.Limits.largest : HTTPServer.Limits()
        // The attacker's sockets and the server's: more than the 1024 a process may open on some
        // systems by default.
        var files = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &files) == 0 && files.rlim_cur < 4096 {
            files.rlim_cur = min(4096, files.rlim_max)
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &files)
        }
        let server = try server(limits: limits)
        let port = Int(server.port)
        // The positive control: answered before.
        #expect(try HTTPProbe.get(port: port, "/hello").status == 200)

        // As many as each address may hold, from as many addresses as it takes to hold them all,
        // then as many again from the first address.
        let perAddress = limits.connectionsPerAddress
        let sources =
            (0..<limits.connections).map { "127.0.0.\(2 + $0 / perAddress)" }
            + Array(repeating: "127.0.0.2", count: perAddress)
        var attacker: [HTTPProbe.Connection] = []
        for source in sources {
            let connection = try HTTPProbe.Connection(port: port, from: source)
            try connection.send(Self.head)
            attacker.append(connection)
        }
        // Probes from an address of their own, and from the attacker's.
        for source in ["127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.3"] {
            #expect(try HTTPProbe.get(port: port, "/hello", from: source).status == 200, "from \(source)")
        }

        // The caps held: of the attacker's, at most `connections` stay open, `connectionsPerAddress`
        // from each address (waiting for the server to close the others).
        var closed: Set<Int> = []
        let deadline = ContinuousClock.now + .seconds(20)
        while attacker.count - closed.count > limits.connections && ContinuousClock.now < deadline {
            let open = attacker.indices.filter { !closed.contains($0) }
            let found = HTTPProbe.Connection.closed(open.map { attacker[$0] }, waitingUpTo: .milliseconds(100))
            closed.formUnion(found.map { open[$0] })
        }
        closed.formUnion(HTTPProbe.Connection.closed(attacker, waitingUpTo: .zero))
        #expect(attacker.count - closed.count <= limits.connections)
        let openSources = attacker.indices.filter { !closed.contains($0) }.map { sources[$0] }
        for source in Set(sources) {
            #expect(openSources.count(where: { $0 == source }) <= perAddress, "\(source)")
        }
    }

    /// Every connection carries one request: pipelined ones after it are not left waiting, the
    /// connection is closed once the first is answered.
    @Test func pipelinedRequestsAreAnsweredOrTheConnectionClosed() throws {
        let server = try server()
        let port = Int(server.port)
        let request = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
        // The positive control: one request, answered, and the connection closed.
        for count in [1, 3] {
            let connection = try HTTPProbe.Connection(port: port)
            try connection.send(Array(String(repeating: request, count: count).utf8))
            // Well before the request time (10 s), which would close it anyway.
            let (bytes, closed) = connection.receiveUntilClosed(timeout: .seconds(5))
            #expect(closed, "\(count) requests")
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200"), "\(text)")
            #expect(text.hasSuffix("hello GET\n"), "\(text)")
            #expect(text.lowercased().contains("connection: close"), "\(text)")
        }
    }

    @Test func aLimitOutOfItsRangeIsAClearError() throws {
        func limits(_ change: (inout HTTPServer.Limits) -> Void) -> HTTPServer.Limits {
            var limits = HTTPServer.Limits()
            change(&limits)
            return limits
        }
        for bad in [
            limits { $0.connections = 0 }, limits { $0.connections = HTTPServer.Limits.maxConnections + 1 },
            limits { $0.connectionsPerAddress = 0 }, limits { $0.connectionsPerAddress = $0.connections + 1 },
            limits { $0.requestTime = .zero }, limits { $0.requestTime = HTTPServer.Limits.maxRequestTime * 2 },
            limits { $0.bytesPerConnection = HTTPServer.Limits.bytesPerConnectionRange.lowerBound - 1 },
            limits { $0.bytesPerConnection = HTTPServer.Limits.bytesPerConnectionRange.upperBound + 1 },
        ] {
            #expect(throws: HTTPError(.badLimits, ""), "\(bad)") { try server(limits: bad) }
        }
        // The positive control: each end of each range serves.
        let smallest = limits {
            $0.connections = 1
            $0.connectionsPerAddress = 1
            $0.requestTime = .milliseconds(1)
            $0.bytesPerConnection = HTTPServer.Limits.bytesPerConnectionRange.lowerBound
        }
        for good in [smallest, .largest] {
            let server = try server(limits: good)
            // The smallest request time closes connections before they ask: try until one is answered.
            let deadline = ContinuousClock.now + .seconds(10)
            var status = 0
            while status != 200 && ContinuousClock.now < deadline {
                status = (try? HTTPProbe.get(port: Int(server.port), "/hello").status) ?? 0
            }
            #expect(status == 200, "\(good)")
        }
    }

    /// Every seed of the `http` fuzz target (`Fuzz/corpus/http/`) holds its properties
    /// (``HTTPFuzzCheck``): answered or closed within the request time, and the server still answers.
    @Test func everyFuzzSeedHoldsTheProperties() throws {
        let seeds = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/corpus/http").standardized.path
        let names = try FileManager.default.contentsOfDirectory(atPath: seeds).filter { !$0.hasPrefix(".") }.sorted()
        #expect(names.count >= 20)
        for name in names {
            let input = Array(try Data(contentsOf: URL(fileURLWithPath: seeds + "/" + name)))
            let problem = HTTPFuzzCheck.check(input)
            #expect(problem == nil, "\(name): \(problem ?? "")")
        }
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
