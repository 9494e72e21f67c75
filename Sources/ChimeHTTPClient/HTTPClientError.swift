/// Why a request did not get a response: a code to decide on, a message for people, and libcurl's
/// result code when the error came from libcurl.
///
/// Two errors are equal when their codes are equal, so tests can write
/// `#expect(error == HTTPClientError(.timeout))`. The message never holds a header value or a
/// request body (they carry credentials); it may name the host.
public struct HTTPClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure, as a small closed set the caller can switch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Hashable, Sendable {
            case timeout, connectFailed, tls, addressRefused, responseTooLarge, protocolRefused, cancelled
            case invalidRequest, invalidConfiguration, other
        }

        private let value: Value

        private init(_ value: Value) {
            self.value = value
        }

        /// The request's overall time (`HTTPRequest.timeout`, else the configuration's
        /// `defaultTimeout`) or the connect time (`connectTimeout`) ran out (`CURLE_OPERATION_TIMEDOUT`).
        public static let timeout = Code(.timeout)
        /// The host could not be resolved or no connection could be made to it
        /// (`CURLE_COULDNT_RESOLVE_HOST`, `CURLE_COULDNT_CONNECT`).
        public static let connectFailed = Code(.connectFailed)
        /// The TLS handshake failed: an untrusted or mismatched certificate, no common protocol
        /// version, an unreadable CA file (`CURLE_SSL_*`, `CURLE_PEER_FAILED_VERIFICATION`).
        public static let tls = Code(.tls)
        /// The address the host name resolved to (or the literal address in the URL) is one the
        /// configuration's `AddressPolicy` refuses; no connection was made to it.
        public static let addressRefused = Code(.addressRefused)
        /// The response's body exceeded `maxResponseBytes`, or its header block exceeded
        /// `HTTPResponse.maxHeaderCount` fields or `HTTPResponse.maxHeaderBytes` bytes.
        public static let responseTooLarge = Code(.responseTooLarge)
        /// The URL's scheme is not `https` (nothing is sent in clear text); no connection was made.
        public static let protocolRefused = Code(.protocolRefused)
        /// The client was shut down before the request completed.
        public static let cancelled = Code(.cancelled)
        /// The request cannot be sent as it is: a URL that does not parse, a method that is not an
        /// HTTP token, a header name or value with a character it may not hold, or a header the
        /// client sets itself. Nothing was sent.
        public static let invalidRequest = Code(.invalidRequest)
        /// `HTTPClient.init` refused the configuration (the message names the setting), or libcurl
        /// lacks what the client needs (HTTP/2, asynchronous name resolution).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// Anything else: the connection was reset, the server broke the HTTP protocol, libcurl ran
        /// out of memory. `curlCode` and the message say which.
        public static let other = Code(.other)

        /// The code's Swift name, such as `addressRefused`.
        public var description: String { value.rawValue }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence for people: what failed, with libcurl's own text when it has one.
    public let message: String
    /// libcurl's result code (`CURLcode`) when the error came from a transfer, for logs.
    public let curlCode: Int32?

    /// Creates an error; the message defaults to the code's name.
    public init(_ code: Code, _ message: String? = nil, curlCode: Int32? = nil) {
        self.code = code
        self.message = message ?? code.description
        self.curlCode = curlCode
    }

    public static func == (lhs: HTTPClientError, rhs: HTTPClientError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    public var description: String {
        let curl = curlCode.map { ", CURLcode \($0)" } ?? ""
        return "\(message) (\(code)\(curl))"
    }
}
