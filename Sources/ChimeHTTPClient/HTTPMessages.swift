/// One header field. Its value is never printed: `description`, `debugDescription` and the mirror
/// that `dump` and string interpolation use show the name and the value's length only, because
/// request headers carry credentials (`authorization`, APNs' JWT).
public struct HTTPHeader: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The field name; in a response, lowercased.
    public var name: String
    /// The field value; in a response, without the surrounding spaces.
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    public var description: String { "\(name): (\(value.utf8.count) bytes)" }

    public var debugDescription: String { description }

    public var customMirror: Mirror { Mirror(self, children: ["name": name], displayStyle: .struct) }
}

/// A request for `HTTPClient.submit(_:)`.
public struct HTTPRequest: Sendable {
    /// The caller's identifier, handed back with the result; the client does not interpret it.
    public var id: UInt64
    /// The method, an HTTP token such as `POST` (the default), `GET`, `PUT`, `DELETE`.
    public var method: String
    /// An absolute `https` URL; any other scheme completes as `protocolRefused`.
    public var url: String
    /// The header fields to send, in order. `host`, `content-length`, `transfer-encoding` and
    /// `connection` are the client's own (from the URL and the body) and make the request
    /// `invalidRequest`, as does a name that is not an HTTP token or a value with CR, LF or NUL.
    public var headers: [HTTPHeader]
    /// The body, sent with a `content-length` (also when empty, except for `GET` and `HEAD`). The
    /// client reads it in place, with no copy of its own.
    public var body: [UInt8]
    /// The most the whole request may take, from submission (waiting for a connection included)
    /// to the last byte of the response; nil: the configuration's `defaultTimeout`.
    public var timeout: Duration?

    public init(
        id: UInt64,
        method: String = "POST",
        url: String,
        headers: [HTTPHeader] = [],
        body: [UInt8] = [],
        timeout: Duration? = nil
    ) {
        self.id = id
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// A response, whatever its status: a 3xx is returned as it is (redirects are never followed), as
/// are 4xx and 5xx.
public struct HTTPResponse: Sendable {
    /// The most header fields a response may have (interim 1xx responses' fields are dropped, HTTP/2
    /// trailers count); more completes the request as `responseTooLarge`.
    public static let maxHeaderCount = 100
    /// The most bytes of header lines a response may have, status lines and interim responses
    /// included; more completes the request as `responseTooLarge`.
    public static let maxHeaderBytes = 16 * 1024

    /// The status code, such as 200.
    public var status: Int
    /// The header fields in the order received, names lowercased (then HTTP/2 trailers, if any).
    public var headers: [HTTPHeader]
    /// The body, at most the configuration's `maxResponseBytes`; never decompressed (the client
    /// sends no `accept-encoding`).
    public var body: [UInt8]
    /// The protocol's major version: 2 for HTTP/2, 1 for HTTP/1.1 and 1.0.
    public var httpVersion: Int

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = [], httpVersion: Int) {
        self.status = status
        self.headers = headers
        self.body = body
        self.httpVersion = httpVersion
    }

    /// The value of the first header field called `name` (compared without regard to ASCII case).
    public func header(_ name: String) -> String? {
        let wanted = lowercasedASCII(name)
        return headers.first { $0.name == wanted }?.value
    }
}

/// `text` with ASCII capitals lowered, and nothing else changed (header names are ASCII tokens).
func lowercasedASCII(_ text: some StringProtocol) -> String {
    String(decoding: text.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }, as: UTF8.self)
}

extension HTTPRequest {
    /// The header names the client writes itself, from the URL and the body.
    static let reservedHeaderNames: Set<String> = ["host", "content-length", "transfer-encoding", "connection"]

    /// Why the request cannot be sent as it is, or nil if it can (the URL is checked by libcurl).
    var invalidity: String? {
        guard isToken(method) else { return "the method is not an HTTP token" }
        for header in headers {
            guard isToken(header.name) else { return "a header name is not an HTTP token" }
            guard !Self.reservedHeaderNames.contains(lowercasedASCII(header.name)) else {
                return "the header \(header.name) is set by the client"
            }
            guard header.isSendable else { return "the value of the header \(header.name) holds CR, LF or NUL" }
        }
        return nil
    }
}

extension HTTPHeader {
    /// Whether the value can go on the wire as it is: no CR, LF or NUL, which would end the field
    /// (or the C string) early and let the rest be read as another field.
    var isSendable: Bool {
        !value.utf8.contains { $0 == 13 || $0 == 10 || $0 == 0 }
    }
}

/// Whether `text` is an HTTP token (RFC 9110 section 5.6.2): one or more of the visible ASCII
/// characters other than the delimiters.
func isToken(_ text: String) -> Bool {
    !text.isEmpty
        && text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "A")...UInt8(ascii: "Z"):
                true
            default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
}
