import CCurl

#if canImport(Glibc)
import Glibc
#endif

/// `curl_global_init` runs exactly once per process: a global `let` is initialised lazily and
/// thread-safely (swift_once). `curl_global_cleanup` is never called; the process exit frees it all.
let curlGlobalInitialization: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

/// The one checker for libcurl's easy return codes: returns on `CURLE_OK`, throws otherwise.
/// - Parameter what: the call or option, for the error's message.
func check(_ code: CURLcode, _ what: String) throws(HTTPClientError) {
    guard code != CURLE_OK else { return }
    throw HTTPClientError(
        .other,
        "\(what): \(String(cString: curl_easy_strerror(code)))",
        curlCode: Int32(code.rawValue)
    )
}

/// The one owner of a request's easy handle and of everything libcurl reads or writes through it:
/// the parsed URL, the header list, the error buffer, the body being sent and the response being
/// received. libcurl's callbacks reach it through the user-data pointers (`Unmanaged`, unretained:
/// the client's thread keeps the transfer alive until libcurl has let go of its handle).
///
/// Thread-confined to the client's thread, like the easy handle.
final class Transfer {
    /// The caller's request id.
    let id: UInt64
    /// The easy handle (`CURL *`), added to the client's multi handle while the request runs.
    let easy: UnsafeMutableRawPointer
    private let url: OpaquePointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let body: [UInt8]
    private var bodyOffset = 0
    private let policy: AddressPolicy
    private let maxResponseBytes: Int
    /// Why the policy refused a connection, if it did.
    private var refusal: HTTPClientError?
    /// Why a callback stopped the transfer for the response's size, if one did.
    private var tooLarge: String?
    private var responseHeaders: [HTTPHeader] = []
    private var responseHeaderBytes = 0
    private var responseBody: [UInt8] = []

    /// Prepares the easy handle; nothing is sent before it is added to a multi handle.
    /// - Throws: `.invalidRequest` (method, header, URL), `.protocolRefused` (not https),
    ///   `.addressRefused` (a literal address the policy refuses), `.other` (libcurl failed).
    init(_ request: HTTPRequest, configuration: HTTPClientConfiguration) throws(HTTPClientError) {
        if let why = request.invalidity {
            throw HTTPClientError(.invalidRequest, why)
        }
        let url = try Self.parse(request.url, policy: configuration.addressPolicy)
        guard let easy = curl_easy_init() else {
            curl_url_cleanup(url)
            throw HTTPClientError(.other, "curl_easy_init failed")
        }
        self.id = request.id
        self.easy = easy
        self.url = url
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        self.errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        self.body = request.body
        self.policy = configuration.addressPolicy
        self.maxResponseBytes = configuration.maxResponseBytes
        // From here on `self` is fully initialised: if a call throws, deinit frees it all.
        try configure(request, configuration)
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_url_cleanup(url)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    private var context: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private static func from(_ context: UnsafeMutableRawPointer?) -> Transfer {
        Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
    }

    // MARK: Setting up

    /// Parses the URL with libcurl's own parser, which the transfer then uses as it is
    /// (`CURLOPT_CURLU`: no second parse that could read it differently), and refuses what may not
    /// be connected to before anything is.
    private static func parse(_ text: String, policy: AddressPolicy) throws(HTTPClientError) -> OpaquePointer {
        guard let url = curl_url() else { throw HTTPClientError(.other, "curl_url failed") }
        do throws(HTTPClientError) {
            let parsed = curl_url_set(url, CURLUPART_URL, text, UInt32(CURLU_NON_SUPPORT_SCHEME))
            guard parsed == CURLUE_OK else {
                throw HTTPClientError(
                    .invalidRequest,
                    "the URL does not parse: \(String(cString: curl_url_strerror(parsed)))"
                )
            }
            guard part(CURLUPART_SCHEME, of: url) == "https" else {
                throw HTTPClientError(.protocolRefused, "only https URLs are allowed")
            }
            var host = part(CURLUPART_HOST, of: url) ?? ""
            if host.hasPrefix("[") && host.hasSuffix("]") {
                host = String(host.dropFirst().dropLast())
            }
            if let address = IPAddress(host), !policy.allows(address) {
                throw refusal(of: address)
            }
            return url
        } catch {
            curl_url_cleanup(url)
            throw error
        }
    }

    private static func part(_ part: CURLUPart, of url: OpaquePointer) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(url, part, &value, 0) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }

    private static func refusal(of address: IPAddress) -> HTTPClientError {
        HTTPClientError(
            .addressRefused,
            "the address \(address) (\(address.category)) is refused by the address policy"
        )
    }

    private func configure(_ request: HTTPRequest, _ configuration: HTTPClientConfiguration) throws(HTTPClientError) {
        try set(CURLOPT_CURLU, UnsafeMutableRawPointer(url), "CURLOPT_CURLU")
        // Only https, also after a redirect (which is never followed anyway), no proxy from the
        // environment (http_proxy, https_proxy), no signals (timeouts run on the multi handle).
        try set(CURLOPT_PROTOCOLS_STR, "https", "CURLOPT_PROTOCOLS_STR")
        try set(CURLOPT_REDIR_PROTOCOLS_STR, "https", "CURLOPT_REDIR_PROTOCOLS_STR")
        try set(CURLOPT_FOLLOWLOCATION, 0, "CURLOPT_FOLLOWLOCATION")
        try set(CURLOPT_PROXY, "", "CURLOPT_PROXY")
        try set(CURLOPT_NOSIGNAL, 1, "CURLOPT_NOSIGNAL")
        // A name lookup still running when the transfer ends is left to finish on its own thread
        // rather than waited for, so that cancelling never blocks the client's thread.
        try set(CURLOPT_QUICK_EXIT, 1, "CURLOPT_QUICK_EXIT")
        try set(CURLOPT_SSL_VERIFYPEER, 1, "CURLOPT_SSL_VERIFYPEER")
        try set(CURLOPT_SSL_VERIFYHOST, 2, "CURLOPT_SSL_VERIFYHOST")
        try set(CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2, "CURLOPT_SSLVERSION")
        if let caFile = configuration.caFile {
            try set(CURLOPT_CAINFO, caFile, "CURLOPT_CAINFO")
            try set(CURLOPT_CAPATH, nil as String?, "CURLOPT_CAPATH")  // the file's CAs only
        }
        // HTTP/2 when the server offers it in ALPN, else HTTP/1.1; wait for a connection that is
        // being made rather than open another, so that requests multiplex over one connection.
        try set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS, "CURLOPT_HTTP_VERSION")
        try set(CURLOPT_PIPEWAIT, 1, "CURLOPT_PIPEWAIT")
        try set(CURLOPT_TCP_KEEPALIVE, 1, "CURLOPT_TCP_KEEPALIVE")
        try set(CURLOPT_TIMEOUT_MS, milliseconds(request.timeout ?? configuration.defaultTimeout), "CURLOPT_TIMEOUT_MS")
        try set(CURLOPT_CONNECTTIMEOUT_MS, milliseconds(configuration.connectTimeout), "CURLOPT_CONNECTTIMEOUT_MS")
        try check(
            chime_easy_setopt_off(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxResponseBytes)),
            "CURLOPT_MAXFILESIZE_LARGE"
        )
        try set(CURLOPT_USERAGENT, configuration.userAgent, "CURLOPT_USERAGENT")
        try set(CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errorBuffer), "CURLOPT_ERRORBUFFER")
        try setCallbacks()
        try setMethod(request)
        try setHeaders(request.headers)
    }

    private func set(_ option: CURLoption, _ value: Int, _ name: String) throws(HTTPClientError) {
        try check(chime_easy_setopt_long(easy, option, value), name)
    }

    private func set(_ option: CURLoption, _ value: String?, _ name: String) throws(HTTPClientError) {
        try check(chime_easy_setopt_string(easy, option, value), name)
    }

    private func set(_ option: CURLoption, _ value: UnsafeMutableRawPointer?, _ name: String) throws(HTTPClientError) {
        try check(chime_easy_setopt_pointer(easy, option, value), name)
    }

    private func setCallbacks() throws(HTTPClientError) {
        try check(
            chime_easy_setopt_write_function(easy, CURLOPT_WRITEFUNCTION) { data, size, count, context in
                Transfer.from(context).receiveBody(UnsafeRawBufferPointer(start: data, count: size * count))
            },
            "CURLOPT_WRITEFUNCTION"
        )
        try set(CURLOPT_WRITEDATA, context, "CURLOPT_WRITEDATA")
        try check(
            chime_easy_setopt_write_function(easy, CURLOPT_HEADERFUNCTION) { data, size, count, context in
                Transfer.from(context).receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: size * count))
            },
            "CURLOPT_HEADERFUNCTION"
        )
        try set(CURLOPT_HEADERDATA, context, "CURLOPT_HEADERDATA")
        try check(
            chime_easy_setopt_read_function(easy) { buffer, size, count, context in
                Transfer.from(context).sendBody(into: UnsafeMutableRawBufferPointer(start: buffer, count: size * count))
            },
            "CURLOPT_READFUNCTION"
        )
        try set(CURLOPT_READDATA, context, "CURLOPT_READDATA")
        try check(
            chime_easy_setopt_seek_function(easy) { context, offset, origin in
                Transfer.from(context).rewindBody(to: offset, origin: origin)
            },
            "CURLOPT_SEEKFUNCTION"
        )
        try set(CURLOPT_SEEKDATA, context, "CURLOPT_SEEKDATA")
        try check(
            chime_easy_setopt_opensocket_function(easy) { context, _, address in
                guard let address else { return CURL_SOCKET_BAD }
                return Transfer.from(context).openSocket(address)
            },
            "CURLOPT_OPENSOCKETFUNCTION"
        )
        try set(CURLOPT_OPENSOCKETDATA, context, "CURLOPT_OPENSOCKETDATA")
    }

    /// The body goes through the read callback, straight from the request's array: no copy of
    /// ours, and libcurl can rewind it (the seek callback) to send it again on a new connection when
    /// a reused one turns out to be closed.
    private func setMethod(_ request: HTTPRequest) throws(HTTPClientError) {
        switch request.method {
        case "GET" where body.isEmpty:
            try set(CURLOPT_HTTPGET, 1, "CURLOPT_HTTPGET")
        case "HEAD" where body.isEmpty:
            try set(CURLOPT_NOBODY, 1, "CURLOPT_NOBODY")
        default:
            try set(CURLOPT_POST, 1, "CURLOPT_POST")
            try check(
                chime_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)),
                "CURLOPT_POSTFIELDSIZE_LARGE"
            )
            if request.method != "POST" {
                try set(CURLOPT_CUSTOMREQUEST, request.method, "CURLOPT_CUSTOMREQUEST")
            }
        }
    }

    private func setHeaders(_ headers: [HTTPHeader]) throws(HTTPClientError) {
        // `Expect:` with no value stops libcurl's `expect: 100-continue` (a round trip of waiting);
        // `name;` is how libcurl is told to send a header with an empty value.
        let lines = headers.map { $0.value.isEmpty ? "\($0.name);" : "\($0.name): \($0.value)" } + ["Expect:"]
        for line in lines {
            guard let appended = curl_slist_append(headerList, line) else {
                throw HTTPClientError(.other, "curl_slist_append failed")
            }
            headerList = appended
        }
        try set(CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(headerList), "CURLOPT_HTTPHEADER")
    }

    // MARK: libcurl's callbacks (the client's thread, inside curl_multi_perform)

    /// Keeps a piece of the body; returns 0 (libcurl then fails the transfer) past the limit.
    private func receiveBody(_ data: UnsafeRawBufferPointer) -> Int {
        guard responseBody.count + data.count <= maxResponseBytes else {
            tooLarge = "the response's body is larger than maxResponseBytes (\(maxResponseBytes))"
            return 0
        }
        responseBody.append(contentsOf: data)
        return data.count
    }

    /// Keeps one header line (with its CRLF); returns 0 (libcurl then fails the transfer) past the
    /// limits. A status line starts a new response: the fields of an interim 1xx one are dropped.
    private func receiveHeaderLine(_ data: UnsafeRawBufferPointer) -> Int {
        responseHeaderBytes += data.count
        guard responseHeaderBytes <= HTTPResponse.maxHeaderBytes else {
            tooLarge = "the response's header is larger than \(HTTPResponse.maxHeaderBytes) bytes"
            return 0
        }
        var line = data[...]
        while let last = line.last, last == 13 || last == 10 { line = line.dropLast() }
        if line.starts(with: "HTTP/".utf8) {
            responseHeaders.removeAll()
        } else if let first = line.first, first == 32 || first == 9, !responseHeaders.isEmpty {
            // An obsolete line folding (HTTP/1.1 only): the previous field's value goes on.
            responseHeaders[responseHeaders.count - 1].value += " " + trimmed(line)
        } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            guard responseHeaders.count < HTTPResponse.maxHeaderCount else {
                tooLarge = "the response has more than \(HTTPResponse.maxHeaderCount) header fields"
                return 0
            }
            let name = lowercasedASCII(String(decoding: line[..<colon], as: UTF8.self))
            responseHeaders.append(HTTPHeader(name, trimmed(line[(colon + 1)...])))
        }
        return data.count
    }

    private func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        let isSpace = { (byte: UInt8) in byte == 32 || byte == 9 }
        guard let start = bytes.firstIndex(where: { !isSpace($0) }) else { return "" }
        let end = bytes.lastIndex(where: { !isSpace($0) })!
        return String(decoding: bytes[start...end], as: UTF8.self)
    }

    /// Copies the next part of the request's body into libcurl's buffer; 0 at the end.
    private func sendBody(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let count = min(buffer.count, body.count - bodyOffset)
        guard count > 0 else { return 0 }
        body.withUnsafeBytes { bytes in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[bodyOffset..<bodyOffset + count]))
        }
        bodyOffset += count
        return count
    }

    /// Moves to `offset` in the body, for sending it again.
    private func rewindBody(to offset: curl_off_t, origin: Int32) -> Int32 {
        guard origin == SEEK_SET, (0...curl_off_t(body.count)).contains(offset) else {
            return Int32(CURL_SEEKFUNC_CANTSEEK)
        }
        bodyOffset = Int(offset)
        return Int32(CURL_SEEKFUNC_OK)
    }

    /// Opens the socket for a connection, if the policy allows the address libcurl resolved;
    /// otherwise remembers the refusal and returns `CURL_SOCKET_BAD` (libcurl then tries the
    /// host's next address, and fails with `CURLE_COULDNT_CONNECT` when none is left).
    private func openSocket(_ address: UnsafeMutablePointer<curl_sockaddr>) -> curl_socket_t {
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = chime_curl_sockaddr_address(address, &bytes)
        guard let ip = IPAddress(bytes: bytes.prefix(count)) else {
            refusal = refusal ?? HTTPClientError(.addressRefused, "an address of family \(address.pointee.family)")
            return CURL_SOCKET_BAD
        }
        guard policy.allows(ip) else {
            refusal = refusal ?? Self.refusal(of: ip)
            return CURL_SOCKET_BAD
        }
        let socketType = address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue)
        return socket(address.pointee.family, socketType, address.pointee.protocol)
    }

    // MARK: The result

    /// The result of the finished transfer, from libcurl's result code and what was received.
    func result(_ code: CURLcode) -> Result<HTTPResponse, HTTPClientError> {
        guard code == CURLE_OK else { return .failure(error(code)) }
        var status = 0
        var version = 0
        _ = chime_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        _ = chime_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        let major = version == CURL_HTTP_VERSION_2_0 ? 2 : 1
        return .success(HTTPResponse(status: status, headers: responseHeaders, body: responseBody, httpVersion: major))
    }

    private func error(_ code: CURLcode) -> HTTPClientError {
        let detail = String(cString: errorBuffer)
        let text = String(cString: curl_easy_strerror(code)) + (detail.isEmpty ? "" : ": \(detail)")
        let curlCode = Int32(code.rawValue)
        switch code {
        case CURLE_COULDNT_CONNECT where refusal != nil:
            return refusal!
        case CURLE_WRITE_ERROR where tooLarge != nil:
            return HTTPClientError(.responseTooLarge, tooLarge!, curlCode: curlCode)
        case CURLE_FILESIZE_EXCEEDED:
            let why = "the response's content-length is larger than maxResponseBytes (\(maxResponseBytes))"
            return HTTPClientError(.responseTooLarge, why, curlCode: curlCode)
        case CURLE_OPERATION_TIMEDOUT:
            return HTTPClientError(.timeout, text, curlCode: curlCode)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT:
            return HTTPClientError(.connectFailed, text, curlCode: curlCode)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
            CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE, CURLE_SSL_CLIENTCERT, CURLE_USE_SSL_FAILED:
            return HTTPClientError(.tls, text, curlCode: curlCode)
        default:
            return HTTPClientError(.other, text, curlCode: curlCode)
        }
    }
}

/// A duration in whole milliseconds for libcurl, 1 at least (0 would mean "no limit") and about
/// 24 days at most (libcurl keeps some timeouts in an `int`).
func milliseconds(_ duration: Duration) -> Int {
    let (seconds, attoseconds) = duration.components
    let most = Int64(Int32.max)
    let whole = seconds >= most / 1000 ? most : seconds * 1000 + attoseconds / 1_000_000_000_000_000
    return Int(max(1, whole))
}
