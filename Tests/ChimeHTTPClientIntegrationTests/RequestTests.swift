import ChimeHTTPClient
import ChimeTestSupport
import Testing

@Suite("HTTPClient's configuration, requests and errors, without a server")
struct RequestTests {
    /// The default configuration with one change.
    static func changed(_ change: (inout HTTPClientConfiguration) -> Void) -> HTTPClientConfiguration {
        var configuration = HTTPClientConfiguration()
        change(&configuration)
        return configuration
    }

    /// Each setting out of range, and its name, which the error must give.
    static let invalid: [(String, HTTPClientConfiguration)] = [
        ("maxResponseBytes", changed { $0.maxResponseBytes = -1 }),
        ("connectTimeout", changed { $0.connectTimeout = .zero }),
        ("defaultTimeout", changed { $0.defaultTimeout = .milliseconds(-5) }),
        ("maxConnectionsPerHost", changed { $0.maxConnectionsPerHost = 0 }),
        ("maxTotalConnections", changed { $0.maxTotalConnections = 3 }),
        ("maxInFlight", changed { $0.maxInFlight = 0 }),
        ("userAgent", changed { $0.userAgent = "a\r\nx-injected: 1" }),
        ("caFile", changed { $0.caFile = "/nonexistent/ca.pem" }),
    ]

    @Test("a configuration out of range is refused at init, naming the setting", arguments: invalid)
    func invalidConfiguration(_ setting: String, _ configuration: HTTPClientConfiguration) {
        let error = #expect(throws: HTTPClientError.self) {
            _ = try HTTPClient(configuration: configuration) { _, _ in }
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains(setting) == true, "\(String(describing: error))")
    }

    @Test("a valid configuration starts a client, which shuts down")
    func validConfiguration() throws {
        let client = try HTTPClient(configuration: HTTPClientConfiguration()) { _, _ in }
        #expect(client.inFlight == 0)
        client.shutdown()
        #expect(!client.submit(HTTPRequest(id: 1, url: "https://example.com/")))
    }

    @Test("the defaults are the documented ones")
    func defaults() {
        let configuration = HTTPClientConfiguration()
        #expect(configuration.caFile == nil)
        #expect(configuration.maxResponseBytes == 65536)
        #expect(configuration.connectTimeout == .seconds(10))
        #expect(configuration.defaultTimeout == .seconds(30))
        #expect(configuration.maxConnectionsPerHost == 4)
        #expect(configuration.maxTotalConnections == 64)
        #expect(configuration.maxInFlight == 10_000)
        #expect(configuration.addressPolicy == .publicOnly)
        #expect(HTTPRequest(id: 1, url: "https://example.com/").method == "POST")
    }

    @Test("header values are never printed: not by a header, a request, nor dump")
    func headerValuesRedacted() {
        let secret = "bearer eyJhbGciOiJFUzI1NiJ9.secret"
        let header = HTTPHeader("authorization", secret)
        let request = HTTPRequest(id: 7, url: "https://api.push.apple.com/3/device/x", headers: [header])
        var dumped = ""
        dump(request, to: &dumped)
        let renderings = [
            "\(header)", String(describing: header), String(reflecting: header), "\(request)",
            String(reflecting: request), "\([header])", dumped,
        ]
        for rendering in renderings {
            #expect(!rendering.contains("secret"), "\(rendering)")
        }
        #expect("\(header)".contains("authorization"))
    }

    @Test("a response's header lookup ignores case and returns the first")
    func headerLookup() {
        let response = HTTPResponse(
            status: 200,
            headers: [HTTPHeader("apns-id", "a"), HTTPHeader("x", "1"), HTTPHeader("x", "2")],
            httpVersion: 2
        )
        #expect(response.header("APNS-ID") == "a")
        #expect(response.header("x") == "1")
        #expect(response.header("missing") == nil)
    }

    @Test("errors are equal by code, and describe themselves with the message and the CURLcode")
    func errors() {
        #expect(HTTPClientError(.timeout, "one") == HTTPClientError(.timeout, "two"))
        #expect(HTTPClientError(.timeout) != HTTPClientError(.tls))
        let error = HTTPClientError(.tls, "SSL peer certificate was not OK", curlCode: 60)
        #expect(error.description == "SSL peer certificate was not OK (tls, CURLcode 60)")
        #expect(HTTPClientError.Code.addressRefused.description == "addressRefused")
    }
}
