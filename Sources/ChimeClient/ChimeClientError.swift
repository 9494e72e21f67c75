import ChimeProtocol

/// Why a call of the client failed.
///
/// It is one of three things: an error reply of chimed, carrying the protocol's `code`
/// (PROTOCOL.md section 4), its `field` and `message`; a request the client refused before sending
/// it (with the same codes chimed would have used); or a failure of the transport or of the wait
/// for the reply (``Code/timeout``, ``Code/transport``, ``Code/invalidReply``, ``Code/cancelled``).
///
/// Equality is on the code, so tests can write `#expect(throws: ChimeClientError(.notFound))`.
public struct ChimeClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The protocol's error codes, and the client's own.
    ///
    /// Compare a code with `==` or `switch` over the constants below; ``wireName`` is the code as
    /// an error reply writes it.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            /// A code of an error reply, as written on the wire.
            case reply(String)
            case timeout
            case transport
            case invalidReply
            case cancelled
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The code of an error reply, as written on the wire (`invalid_argument`).
        ///
        /// Codes a newer chimed may add are kept as they are.
        ///
        /// - Parameter wireName: The reply's `error.code`.
        public init(wireName: String) { self.init(.reply(wireName)) }

        private init(_ code: ChimeError.Code) { self.init(.reply(code.wireName)) }

        /// The payload is not JSON, or not a JSON object (`malformed_json`).
        public static let malformedJSON = Code(ChimeError.Code.malformedJSON)
        /// A field has the wrong type or value, or fields contradict each other (`invalid_argument`).
        public static let invalidArgument = Code(ChimeError.Code.invalidArgument)
        /// A field the protocol does not define (`unknown_field`).
        public static let unknownField = Code(ChimeError.Code.unknownField)
        /// The command or its `userInfo` is larger than the worker takes (`payload_too_large`).
        public static let payloadTooLarge = Code(ChimeError.Code.payloadTooLarge)
        /// A wall-clock time follows the device's zone, and the device has none (`timezone_required`).
        ///
        /// Set one with
        /// ``ChimeNotificationCenter/setDeviceSettings(timeZone:badge:quietHours:receipts:history:)``.
        public static let timezoneRequired = Code(ChimeError.Code.timezoneRequired)
        /// The schedule has no occurrence now or later (`never_fires`).
        public static let neverFires = Code(ChimeError.Code.neverFires)
        /// The id names no notification of the device (`not_found`).
        public static let notFound = Code(ChimeError.Code.notFound)
        /// The device would hold more notifications, or more bytes of them, than the worker allows
        /// (`quota_exceeded`).
        public static let quotaExceeded = Code(ChimeError.Code.quotaExceeded)
        /// The device used up its share of the worker (`rate_limited`); the message says when to try
        /// again.
        public static let rateLimited = Code(ChimeError.Code.rateLimited)
        /// The worker's journal cannot take writes; nothing was changed (`unavailable`).
        public static let unavailable = Code(ChimeError.Code.unavailable)
        /// A bug in the worker (`internal`).
        public static let `internal` = Code(ChimeError.Code.internal)

        /// No reply came within the timeout, after every attempt.
        ///
        /// The command may or may not have been applied; calling again is safe (see
        /// ``ChimeNotificationCenter/Configuration/attempts``).
        public static let timeout = Code(.timeout)
        /// The transport could not connect, subscribe or publish.
        public static let transport = Code(.transport)
        /// A reply or a delivery that this client cannot read.
        public static let invalidReply = Code(.invalidReply)
        /// The calling task was cancelled, or the center disconnected, while waiting.
        public static let cancelled = Code(.cancelled)

        /// The code as an error reply writes it (`not_found`); nil for the client's own codes.
        public var wireName: String? {
            if case .reply(let name) = base { return name }
            return nil
        }

        /// The code as an error reply writes it, or the client's own code's name: `timeout`,
        /// `transport`, `invalid_reply`, `cancelled`.
        public var description: String {
            switch base {
            case .reply(let name): return name
            case .timeout: return "timeout"
            case .transport: return "transport"
            case .invalidReply: return "invalid_reply"
            case .cancelled: return "cancelled"
            }
        }
    }

    /// What went wrong, as a code to compare or switch on.
    public var code: Code
    /// The offending field, where there is one (`fireDate`, `notifications[2].rrule`).
    public var field: String?
    /// What went wrong, for a person.
    public var message: String

    /// An error with a code, and the field and message where there are some.
    ///
    /// - Parameters:
    ///   - code: The error's code.
    ///   - field: The offending field, or nil.
    ///   - message: What went wrong, for a person.
    public init(_ code: Code, field: String? = nil, _ message: String = "") {
        self.code = code
        self.field = field
        self.message = message
    }

    /// Whether two errors have the same code; their fields and messages are not compared.
    public static func == (lhs: ChimeClientError, rhs: ChimeClientError) -> Bool { lhs.code == rhs.code }
    /// Hashes the code alone, as `==` compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// The code, then the message when there is one: `not_found: ...`.
    public var description: String { message.isEmpty ? "\(code)" : "\(code): \(message)" }

    /// A request the client refuses before sending it, worded as chimed words its own.
    static func invalid(_ field: String, _ message: String) -> ChimeClientError {
        ChimeClientError(.invalidArgument, field: field, "\(field): \(message)")
    }
}
