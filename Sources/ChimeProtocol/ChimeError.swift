/// An error reply's content: a protocol code, the offending field where there is one, and a
/// message a person can act on. Equality is on the code, so tests can build the expected error.
public struct ChimeError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The error codes of PROTOCOL.md section 4.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case malformedJSON = "malformed_json"
            case invalidArgument = "invalid_argument"
            case unknownField = "unknown_field"
            case payloadTooLarge = "payload_too_large"
            case timezoneRequired = "timezone_required"
            case neverFires = "never_fires"
            case notFound = "not_found"
            case quotaExceeded = "quota_exceeded"
            case rateLimited = "rate_limited"
            case unavailable = "unavailable"
            case `internal` = "internal"
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The payload is not JSON, or not a JSON object.
        public static let malformedJSON = Code(.malformedJSON)
        /// A field has the wrong type or value, or fields contradict each other.
        public static let invalidArgument = Code(.invalidArgument)
        /// A field the protocol does not define (typos never pass silently).
        public static let unknownField = Code(.unknownField)
        /// The payload is over `--max-command-bytes`, or `userInfo` over `--max-userinfo-bytes`.
        public static let payloadTooLarge = Code(.payloadTooLarge)
        /// A wall-clock time follows the device's zone, and the device has none.
        public static let timezoneRequired = Code(.timezoneRequired)
        /// The schedule has no occurrence now or later.
        public static let neverFires = Code(.neverFires)
        /// `snooze` or `preview` named an id the device does not have.
        public static let notFound = Code(.notFound)
        /// The device would hold more than `--max-pending-per-device` notifications.
        public static let quotaExceeded = Code(.quotaExceeded)
        /// The device used up its share of the worker (`--device-rate`); the message says when to
        /// try again. Nothing was changed.
        public static let rateLimited = Code(.rateLimited)
        /// The journal cannot take writes; nothing was changed.
        public static let unavailable = Code(.unavailable)
        /// A bug: the worker could not handle a valid command.
        public static let `internal` = Code(.internal)

        /// The code as it appears on the wire (`invalid_argument`).
        public var wireName: String { base.rawValue }
        public var description: String { base.rawValue }
    }

    public var code: Code
    public var field: String?
    public var message: String

    public init(_ code: Code, field: String? = nil, _ message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    public static func == (lhs: ChimeError, rhs: ChimeError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String { "\(code): \(message)" }

    package static func invalid(_ field: String, _ message: String) -> ChimeError {
        ChimeError(.invalidArgument, field: field, "\(field): \(message)")
    }
}
