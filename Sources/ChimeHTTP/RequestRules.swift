/// Which requests reach the handler, decided once their line and headers are in, from the server's
/// methods and ``HTTPServer/Limits/maxBodyBytes``: pure, so that each answer is tested without a
/// server.
struct RequestRules: Sendable {
    enum Decision: Hashable, Sendable {
        /// Answered without the handler, and without reading the body.
        case answer(HTTPResponse)
        /// Handed to the handler now, its body (if any) not read.
        case handle
        /// Handed to the handler once its body, of the length it declared, is read.
        case readBody(length: Int)
    }

    /// The methods answered, in the order `Allow` names them.
    let methods: [String]
    let maxBodyBytes: Int

    /// - Throws: ``HTTPError`` with `.badMethods` if `methods` is empty, repeats one, or has one
    ///   that is not upper-case letters.
    init(methods: [String], maxBodyBytes: Int) throws(HTTPError) {
        guard !methods.isEmpty, Set(methods).count == methods.count,
            methods.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { (65...90).contains($0) } })
        else {
            throw HTTPError(
                .badMethods,
                "methods must be distinct and upper case, like GET, HEAD, POST; not \(methods)"
            )
        }
        self.methods = methods
        self.maxBodyBytes = maxBodyBytes
    }

    /// The value of `Allow`.
    var allow: String { methods.joined(separator: ", ") }

    func decide(_ request: HTTPRequest) -> Decision {
        guard methods.contains(request.method) else {
            let names =
                methods.count == 1 ? methods[0] : "\(methods.dropLast().joined(separator: ", ")) and \(methods.last!)"
            return .answer(HTTPResponse(status: 405, headers: [("Allow", allow)], "only \(names)\n"))
        }
        // Answered as they always were: a body is not theirs to have (libmicrohttpd discards it).
        if request.method == "GET" || request.method == "HEAD" { return .handle }
        // Its length is known only once read: refused before it is.
        if !request.headerValues("Transfer-Encoding").isEmpty {
            return .answer(HTTPResponse(status: 411, "a body needs a Content-Length, not chunks\n"))
        }
        // libmicrohttpd has checked that the first is a number; any other must be too.
        var length = 0
        for value in request.headerValues("Content-Length") {
            guard let number = Int(value), number >= 0 else {
                return .answer(HTTPResponse(status: 400, "a bad Content-Length\n"))
            }
            length = max(length, number)
        }
        guard length <= maxBodyBytes else {
            return .answer(HTTPResponse(status: 413, "a body may have at most \(maxBodyBytes) bytes\n"))
        }
        return .readBody(length: length)
    }
}
