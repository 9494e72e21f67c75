/// A request as the handler sees it, read whole before the handler is called.
///
/// Equal when every field is equal, headers compared in order and as spelt.
public struct HTTPRequest: Hashable, Sendable {
    /// The method as sent (`GET`, `HEAD`, `POST`): one of the server's methods
    /// (``HTTPServer/init(listen:limits:methods:tls:handler:)``), which refuses the others.
    public var method: String
    /// The path without the query, percent-decoded by libmicrohttpd (`/metrics`).
    public var path: String
    /// The query as sent: what follows the first `?` of the request target, not decoded; empty
    /// without one. ``queryItems`` decodes it.
    public var query: String
    /// The header fields in the order they arrived, each name as the client spelt it, each value
    /// without the whitespace around it (bytes that are not UTF-8 read as U+FFFD). ``header(_:)``
    /// looks one up by name, in any case.
    public var headers: [(String, String)]
    /// The client's IP address as text (`127.0.0.1`, `::1`; an IPv4 client of an IPv6 socket as
    /// IPv4), empty if unknown: the peer of the TCP connection, so behind a reverse proxy the
    /// proxy's.
    public var remoteAddress: String
    /// The body, at most ``HTTPServer/Limits/maxBodyBytes``; always empty for `GET` and `HEAD`,
    /// whose bodies the server does not read.
    public var body: [UInt8]

    public init(
        method: String,
        path: String,
        query: String = "",
        headers: [(String, String)] = [],
        remoteAddress: String = "",
        body: [UInt8] = []
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.remoteAddress = remoteAddress
        self.body = body
    }

    /// The value of the first header field named `name` (compared without regard to ASCII case),
    /// or nil. Where a repeated field matters (a second `Origin`, say), ``headerValues(_:)`` has
    /// them all.
    public func header(_ name: String) -> String? {
        headers.first { HTTPHeaderName.equal($0.0, name) }?.1
    }

    /// The values of every header field named `name` (in any case), in the order they arrived.
    public func headerValues(_ name: String) -> [String] {
        headers.filter { HTTPHeaderName.equal($0.0, name) }.map(\.1)
    }

    /// The query's name and value pairs, decoded as a form (``HTTPForm/decode(_:maxFields:)``);
    /// nil if it is malformed or has more than ``HTTPForm/maxFields`` fields.
    public var queryItems: [(String, String)]? { HTTPForm.decode(Array(query.utf8)) }

    /// The body's name and value pairs when the request says it is a form
    /// (`Content-Type: application/x-www-form-urlencoded`, parameters aside); nil if it does not,
    /// or if the body is malformed or has more than ``HTTPForm/maxFields`` fields
    /// (``HTTPForm/decode(_:maxFields:)``). A handler that takes forms only answers nil with 415 or
    /// 400.
    public var form: [(String, String)]? { form(maxFields: HTTPForm.maxFields) }

    /// ``form``, taking up to `maxFields` fields.
    public func form(maxFields: Int) -> [(String, String)]? {
        guard let type = header("Content-Type") else { return nil }
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        let essence = type.prefix { $0 != ";" }.drop(while: blank).reversed().drop(while: blank).reversed()
        guard HTTPHeaderName.equal(String(essence), HTTPForm.contentType) else { return nil }
        return HTTPForm.decode(body, maxFields: maxFields)
    }

    public static func == (a: HTTPRequest, b: HTTPRequest) -> Bool {
        a.method == b.method && a.path == b.path && a.query == b.query && a.remoteAddress == b.remoteAddress
            && a.body == b.body && HTTPHeaderName.sameFields(a.headers, b.headers)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(method)
        hasher.combine(path)
        hasher.combine(query)
        HTTPHeaderName.hashFields(headers, into: &hasher)
        hasher.combine(remoteAddress)
        hasher.combine(body)
    }
}

/// What the handler answers. The server adds `Connection: close`, `Cache-Control: no-store` (unless
/// ``headers`` has a `Cache-Control`), `Content-Length` and `Date`.
///
/// Equal when every field is equal, headers compared in order and as spelt.
public struct HTTPResponse: Hashable, Sendable {
    /// The status code, 200 to 599; any other is sent as 500.
    public var status: Int
    /// The `Content-Type` header's value; not sent if it holds a control character.
    public var contentType: String
    /// Header fields to send besides those the server sets (`Set-Cookie`, `Location`,
    /// `Content-Security-Policy`...), in this order. A field that could not be sent as it is, is
    /// dropped rather than sent: a name that is not an HTTP token, a value with CR, LF or another
    /// control character but tab, or a name the server sets itself (``reservedHeaders``). A
    /// response whose headers together pass half of ``HTTPServer/Limits/bytesPerConnection`` is
    /// sent as a 500 instead.
    public var headers: [(String, String)]
    public var body: [UInt8]

    /// Header names the server sets itself: a response's own ``headers`` with these names are
    /// dropped (`Content-Type` is ``contentType``).
    public static let reservedHeaders = ["Connection", "Content-Length", "Content-Type", "Date", "Transfer-Encoding"]

    public init(
        status: Int,
        contentType: String = "text/plain; charset=utf-8",
        headers: [(String, String)] = [],
        body: [UInt8]
    ) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.body = body
    }

    public init(
        status: Int,
        contentType: String = "text/plain; charset=utf-8",
        headers: [(String, String)] = [],
        _ text: String
    ) {
        self.init(status: status, contentType: contentType, headers: headers, body: Array(text.utf8))
    }

    /// A redirect to `location` (a path such as `/login`, or a URL): by default 303 See Other, which
    /// browsers follow with a `GET`, as after a form's `POST`.
    public static func redirect(
        to location: String,
        status: Int = 303,
        headers: [(String, String)] = []
    ) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Location", location)] + headers, "see \(location)\n")
    }

    public static func == (a: HTTPResponse, b: HTTPResponse) -> Bool {
        a.status == b.status && a.contentType == b.contentType && a.body == b.body
            && HTTPHeaderName.sameFields(a.headers, b.headers)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(status)
        hasher.combine(contentType)
        HTTPHeaderName.hashFields(headers, into: &hasher)
        hasher.combine(body)
    }

    /// The header fields the server sends besides `Content-Type` and `Connection`: ``headers``
    /// that may be sent, then `extra` (the server's own, such as `Allow`), then
    /// `Cache-Control: no-store` unless there is one already.
    func headersToSend(adding extra: [(String, String)] = []) -> [(String, String)] {
        var sent = headers.filter { name, value in
            HTTPHeaderName.isToken(name) && HTTPHeaderName.isValue(value)
                && !Self.reservedHeaders.contains { HTTPHeaderName.equal($0, name) }
        }
        sent += extra
        if !sent.contains(where: { HTTPHeaderName.equal($0.0, "Cache-Control") }) {
            sent.append(("Cache-Control", "no-store"))
        }
        return sent
    }

    /// ``status`` if HTTP has it (200 to 599: the server sends no informational answers), else 500.
    var statusToSend: Int { (200...599).contains(status) ? status : 500 }

    /// ``contentType`` if it may be sent as a header value, else nil.
    var contentTypeToSend: String? { HTTPHeaderName.isValue(contentType) ? contentType : nil }
}

/// The checks on header names and values, and the comparison of header lists.
enum HTTPHeaderName {
    /// The same fields in the same order, each spelt the same: what makes requests and responses
    /// equal (tuples are not Equatable).
    static func sameFields(_ a: [(String, String)], _ b: [(String, String)]) -> Bool {
        a.elementsEqual(b) { $0 == $1 }
    }

    static func hashFields(_ fields: [(String, String)], into hasher: inout Hasher) {
        hasher.combine(fields.count)
        for (name, value) in fields {
            hasher.combine(name)
            hasher.combine(value)
        }
    }

    /// Equal without regard to ASCII case, as header names compare.
    static func equal(_ a: String, _ b: String) -> Bool {
        a.utf8.elementsEqual(b.utf8) { lower($0) == lower($1) }
    }

    private static func lower(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
    }

    /// An RFC 9110 token: one or more of letters, digits and ``!#$%&'*+-.^_`|~``.
    static func isToken(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"):
                    return true
                default: return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
                }
            }
    }

    /// A value that can be sent as it is: no control character (CR, LF, NUL...) but tab.
    static func isValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }
}
