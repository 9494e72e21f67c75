/// A reply (PROTOCOL.md section 4): exactly one per command.
public struct Reply: Hashable, Sendable {
    public var op: String
    public var requestId: String?
    public var outcome: Result<JSONObject, ChimeError>

    public init(op: String, requestId: String?, outcome: Result<JSONObject, ChimeError>) {
        self.op = op
        self.requestId = requestId
        self.outcome = outcome
    }

    public init(request: Request, result: JSONObject) {
        self.init(op: request.op.rawValue, requestId: request.requestId, outcome: .success(result))
    }

    public init(request: Request, error: ChimeError) {
        self.init(op: request.op.rawValue, requestId: request.requestId, outcome: .failure(error))
    }

    public var isOK: Bool {
        if case .success = outcome { return true }
        return false
    }

    public var json: JSONObject {
        var o = JSONObject()
        switch outcome {
        case .success(let result):
            o.append("ok", true)
            o.append("op", .string(op))
            if let requestId { o.append("requestId", .string(requestId)) }
            o.append("result", .object(result))
        case .failure(let error):
            o.append("ok", false)
            o.append("op", .string(op))
            if let requestId { o.append("requestId", .string(requestId)) }
            var e = JSONObject()
            e.append("code", .string(error.code.wireName))
            if let field = error.field { e.append("field", .string(field)) }
            e.append("message", .string(error.message))
            o.append("error", .object(e))
        }
        return o
    }

    public var bytes: [UInt8] { JSON.object(json).bytes }
}

/// The JSON forms of values that replies show.
enum Replies {
    static func quietHours(_ quiet: QuietHours?) -> JSON {
        guard let quiet else { return .null }
        return ["start": .string(quiet.start.description), "end": .string(quiet.end.description)]
    }

    static func instant(_ instant: Instant?) -> JSON {
        instant.map { .string($0.rfc3339()) } ?? .null
    }
}
