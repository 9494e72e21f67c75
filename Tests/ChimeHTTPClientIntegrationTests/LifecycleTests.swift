import ChimeHTTPClient
import ChimeTestSupport
import Synchronization
import Testing

/// The client's own thread and its lifetime: deinit, shutdown from the handler, racing submitters.
@Suite("HTTPClient's lifetime")
struct LifecycleTests {
    @Test("releasing the client shuts it down: what was in flight completes as cancelled")
    func deinitShutsDown() async throws {
        let blackHole = try TestTCPServer(.silent)
        let completions = Completions()
        do {
            let client = try makeClient(completions, caFile: nil)
            #expect(client.submit(HTTPRequest(id: 1, url: blackHole.url(), timeout: .seconds(60))))
            #expect(client.submit(HTTPRequest(id: 2, url: blackHole.url(), timeout: .seconds(60))))
            #expect(await eventually { blackHole.acceptedCount >= 1 })
        }
        // The deinit waited for the client's thread.
        #expect(completions.errorCode(1) == .cancelled)
        #expect(completions.errorCode(2) == .cancelled)
    }

    @Test("shutdown() from onCompletion does not deadlock, and cancels the rest")
    func shutdownFromHandler() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http2Server()
        let blackHole = try TestTCPServer(.silent)
        let completions = world.completions
        let client = Mutex<HTTPClient?>(nil)
        let record = completions.handler
        let configuration = HTTPClientConfiguration(
            caFile: world.certificates.caFile,
            addressPolicy: AddressPolicy(allowLoopback: true)
        )
        let created = try HTTPClient(configuration: configuration) { id, result in
            record(id, result)
            if id == 1 {
                client.withLock { $0 }?.shutdown()
            }
        }
        client.withLock { $0 = created }
        #expect(created.submit(HTTPRequest(id: 2, url: blackHole.url(), timeout: .seconds(60))))
        #expect(await eventually { blackHole.acceptedCount >= 1 })
        #expect(created.submit(HTTPRequest(id: 1, method: "GET", url: server.url("/ok"))))
        #expect(try await completions.response(for: 1).status == 200)
        #expect(try await completions.error(for: 2).code == .cancelled)
        #expect(!created.submit(HTTPRequest(id: 3, method: "GET", url: server.url("/ok"))))
        client.withLock { $0 = nil }
    }

    @Test("shutdown() drops onCompletion, so a handler that captures the client is no leak")
    func handlerDropped() async throws {
        final class Canary: Sendable {}
        weak var weakCanary: Canary?
        let client: HTTPClient
        do {
            let canary = Canary()
            weakCanary = canary
            client = try HTTPClient(configuration: HTTPClientConfiguration()) { _, _ in _ = canary }
        }
        #expect(weakCanary != nil)
        client.shutdown()
        #expect(await eventually { weakCanary == nil })
    }

    @Test("submitters on many threads racing with shutdown: every accepted request completes exactly once")
    func racingSubmitters() async throws {
        let world = try await ClientWorld.make()
        let server = try await world.http2Server()
        let completions = world.completions
        let client = try world.client()
        final class Accepted: Sendable { let ids = Mutex<[UInt64]>([]) }
        let accepted = Accepted()
        let url = server.url("/ok")
        await withTaskGroup(of: Void.self) { group in
            for thread in 0..<8 {
                group.addTask {
                    for index in 0..<200 {
                        let id = UInt64(thread * 1000 + index)
                        if client.submit(HTTPRequest(id: id, method: "GET", url: url)) {
                            accepted.ids.withLock { $0.append(id) }
                        }
                        if thread == 0 && index == 100 {
                            client.shutdown()
                        }
                    }
                }
            }
        }
        client.shutdown()
        let ids = accepted.ids.withLock { $0 }
        #expect(!ids.isEmpty)
        #expect(completions.callCount == ids.count)
        #expect(completions.repeated.isEmpty)
        #expect(ids.allSatisfy { completions.result($0) != nil })
        #expect(client.inFlight == 0)
    }
}
