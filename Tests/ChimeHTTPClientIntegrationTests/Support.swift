import ChimeHTTPClient
import ChimeTestSupport
import Synchronization
import Testing

/// Records every result an `HTTPClient` reports, and how many times each id was reported.
final class Completions: Sendable {
    private let state = Mutex(State())

    private struct State {
        var results: [UInt64: Result<HTTPResponse, HTTPClientError>] = [:]
        var calls: [UInt64: Int] = [:]
    }

    /// The handler to give the client.
    var handler: @Sendable (UInt64, Result<HTTPResponse, HTTPClientError>) -> Void {
        { [self] id, result in
            state.withLock { state in
                state.results[id] = result
                state.calls[id, default: 0] += 1
            }
        }
    }

    /// The result for `id`, if it has come.
    func result(_ id: UInt64) -> Result<HTTPResponse, HTTPClientError>? {
        state.withLock { $0.results[id] }
    }

    /// The error's code for `id`, if an error has come.
    func errorCode(_ id: UInt64) -> HTTPClientError.Code? {
        guard case .failure(let error) = result(id) else { return nil }
        return error.code
    }

    /// How many times `onCompletion` was called, for any id.
    var callCount: Int {
        state.withLock { $0.calls.values.reduce(0, +) }
    }

    /// The ids reported more than once (none, for a correct client).
    var repeated: [UInt64] {
        state.withLock { $0.calls.filter { $0.value > 1 }.map(\.key) }
    }

    /// Waits for the result of `id`; fails the test and throws if none comes within `timeout`.
    func wait(
        for id: UInt64,
        timeout: Duration = .seconds(30),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> Result<HTTPResponse, HTTPClientError> {
        _ = await eventually(timeout: timeout, every: .milliseconds(5)) { result(id) != nil }
        return try #require(result(id), "no result for request \(id)", sourceLocation: sourceLocation)
    }

    /// Waits for the response to `id`; fails the test and throws if none, or an error, comes.
    func response(
        for id: UInt64,
        timeout: Duration = .seconds(30),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> HTTPResponse {
        let result = try await wait(for: id, timeout: timeout, sourceLocation: sourceLocation)
        switch result {
        case .success(let response): return response
        case .failure(let error):
            Issue.record("request \(id) failed: \(error)", sourceLocation: sourceLocation)
            throw error
        }
    }

    /// Waits for the error of `id`; fails the test and throws if none, or a response, comes.
    func error(
        for id: UInt64,
        timeout: Duration = .seconds(30),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> HTTPClientError {
        let result = try await wait(for: id, timeout: timeout, sourceLocation: sourceLocation)
        switch result {
        case .success(let response):
            Issue.record("request \(id) got status \(response.status), not an error", sourceLocation: sourceLocation)
            throw HarnessError("unexpected response")
        case .failure(let error): return error
        }
    }
}

/// A client for the tests: loopback allowed (the test servers' address) unless `policy` says
/// otherwise, trusting `caFile`.
func makeClient(
    _ completions: Completions,
    caFile: String?,
    policy: AddressPolicy = AddressPolicy(allowLoopback: true),
    configure: (inout HTTPClientConfiguration) -> Void = { _ in }
) throws -> HTTPClient {
    var configuration = HTTPClientConfiguration(caFile: caFile, addressPolicy: policy)
    configure(&configuration)
    return try HTTPClient(configuration: configuration, onCompletion: completions.handler)
}

/// What a test against TLS servers needs: a fresh CA and server certificate for `localhost` and
/// `127.0.0.1` (their directory removed with the world), and the completions of its clients.
final class ClientWorld: Sendable {
    let completions = Completions()
    let certificates: TestCertificates
    private let directory: TemporaryDirectory

    static func make() async throws -> ClientWorld {
        let directory = try TemporaryDirectory(prefix: "chime-http-client")
        return ClientWorld(certificates: try await TestCertificates.make(in: directory), directory: directory)
    }

    private init(certificates: TestCertificates, directory: TemporaryDirectory) {
        self.certificates = certificates
        self.directory = directory
    }

    /// An nghttpd with this world's certificate, serving `/ok` (the body `ok`).
    func http2Server(_ arguments: [String] = []) async throws -> TestHTTP2Server {
        let server = try await TestHTTP2Server.start(certificates: certificates, arguments: arguments)
        try server.serve("ok", Array("ok".utf8))
        return server
    }

    /// An openssl s_server with this world's certificate.
    func http1Server() async throws -> TestHTTP1Server {
        try await TestHTTP1Server.start(certificates: certificates)
    }

    /// A client trusting this world's CA, recording into `completions`.
    func client(
        policy: AddressPolicy = AddressPolicy(allowLoopback: true),
        configure: (inout HTTPClientConfiguration) -> Void = { _ in }
    ) throws -> HTTPClient {
        try makeClient(completions, caFile: certificates.caFile, policy: policy, configure: configure)
    }
}
