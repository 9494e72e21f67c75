import ChimeProtocol

/// Why a call failed: an error reply of chimed, carrying the protocol's `code` (PROTOCOL.md
/// section 4), its `field` and `message`; a request the client refused before sending it (with the
/// same codes chimed would have used); or a failure of the transport or the wait for the reply.
///
/// Equality is on the code, so tests can write `#expect(throws: ChimeClientError(.notFound))`.
public struct ChimeClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The protocol's error codes, and the client's own.
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

        /// The code of an error reply, as written on the wire (`invalid_argument`). Codes a newer
        /// chimed may add are kept as they are.
        public init(wireName: String) { self.init(.reply(wireName)) }

        private init(_ code: ChimeError.Code) { self.init(.reply(code.wireName)) }

        /// The payload is not JSON, or not a JSON object.
        public static let malformedJSON = Code(ChimeError.Code.malformedJSON)
        /// A field has the wrong type or value, or fields contradict each other.
        public static let invalidArgument = Code(ChimeError.Code.invalidArgument)
        /// A field the protocol does not define.
        public static let unknownField = Code(ChimeError.Code.unknownField)
        /// The command or its `userInfo` is larger than the worker takes.
        public static let payloadTooLarge = Code(ChimeError.Code.payloadTooLarge)
        /// A wall-clock time follows the device's zone, and the device has none: set one with
        /// ``ChimeNotificationCenter/setDeviceSettings(timeZone:badge:quietHours:receipts:history:)``.
        public static let timezoneRequired = Code(ChimeError.Code.timezoneRequired)
        /// The schedule has no occurrence now or later.
        public static let neverFires = Code(ChimeError.Code.neverFires)
        /// The id names no notification of the device.
        public static let notFound = Code(ChimeError.Code.notFound)
        /// The device would hold more notifications, or more bytes of them, than the worker allows.
        public static let quotaExceeded = Code(ChimeError.Code.quotaExceeded)
        /// The device used up its share of the worker; the message says when to try again.
        public static let rateLimited = Code(ChimeError.Code.rateLimited)
        /// The worker's journal cannot take writes; nothing was changed.
        public static let unavailable = Code(ChimeError.Code.unavailable)
        /// A bug in the worker.
        public static let `internal` = Code(ChimeError.Code.internal)

        /// No reply came within the timeout, after every attempt. The command may or may not have
        /// been applied; calling again is safe (see ``ChimeNotificationCenter/Configuration/attempts``).
        public static let timeout = Code(.timeout)
        /// The transport could not connect, subscribe or publish.
        public static let transport = Code(.transport)
        /// A reply or a delivery that this client cannot read.
        public static let invalidReply = Code(.invalidReply)
        /// The calling task was cancelled, or the center disconnected, while waiting.
        public static let cancelled = Code(.cancelled)

        /// The code as an error reply writes it; nil for the client's own codes.
        public var wireName: String? {
            if case .reply(let name) = base { return name }
            return nil
        }

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

    public var code: Code
    /// The offending field, where there is one (`fireDate`, `notifications[2].rrule`).
    public var field: String?
    /// What went wrong, for a person.
    public var message: String

    public init(_ code: Code, field: String? = nil, _ message: String = "") {
        self.code = code
        self.field = field
        self.message = message
    }

    public static func == (lhs: ChimeClientError, rhs: ChimeClientError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String { message.isEmpty ? "\(code)" : "\(code): \(message)" }

    /// A request the client refuses before sending it, worded as chimed words its own.
    static func invalid(_ field: String, _ message: String) -> ChimeClientError {
        ChimeClientError(.invalidArgument, field: field, "\(field): \(message)")
    }
}
