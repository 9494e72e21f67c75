/// An error from ChimePostgres: what failed (a ``Code``), the server's SQLSTATE when the server
/// reported it, a message, and whether the connection can still be used.
///
/// Two errors are equal when their codes are equal, so tests can write
/// `#expect(throws: PostgresError(.connectionFailed))`; compare ``sqlState`` for the server's reason.
public struct PostgresError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure it is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case connectionFailed
            case connectionLost
            case queryFailed
            case timeout
            case invalidParameter
            case unexpectedResult
            case closed
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// No connection could be made (`PQconnectdbParams` gave `CONNECTION_BAD`): a bad URI, a
        /// refused port, no host that matches `target_session_attrs`, authentication, the timeout.
        public static let connectionFailed = Code(.connectionFailed)
        /// The connection broke during a statement (the server died, the network went away): the
        /// statement's outcome is unknown, and the connection cannot be used again.
        public static let connectionLost = Code(.connectionLost)
        /// The server refused the statement (`PGRES_FATAL_ERROR`): see ``PostgresError/sqlState``.
        public static let queryFailed = Code(.queryFailed)
        /// The server did not answer within the statement timeout. Its outcome is unknown, and the
        /// connection cannot be used again.
        public static let timeout = Code(.timeout)
        /// A parameter cannot be sent: text with a NUL character, more than 65535 parameters.
        public static let invalidParameter = Code(.invalidParameter)
        /// The result is not what the caller asked for: a NULL, a column of another kind or of a
        /// type this wrapper does not decode, text that is not a number.
        public static let unexpectedResult = Code(.unexpectedResult)
        /// The connection was closed with ``PostgresConnection/close()``.
        public static let closed = Code(.closed)

        public var description: String {
            switch kind {
            case .connectionFailed: "connectionFailed"
            case .connectionLost: "connectionLost"
            case .queryFailed: "queryFailed"
            case .timeout: "timeout"
            case .invalidParameter: "invalidParameter"
            case .unexpectedResult: "unexpectedResult"
            case .closed: "closed"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence for people: libpq's or the server's message, or ours.
    public let message: String
    /// The server's five-character SQLSTATE (`PG_DIAG_SQLSTATE`), such as `23505` for a unique
    /// violation; nil when the error did not come from the server.
    public let sqlState: String?
    /// The server's detail line (`PG_DIAG_MESSAGE_DETAIL`), when it sent one.
    public let detail: String?
    /// Whether the connection still works after the error (`PQstatus` is `CONNECTION_OK`). After a
    /// failed statement inside a transaction it works, but only for `ROLLBACK`.
    public let isConnectionUsable: Bool

    /// Creates an error; `message` defaults to the code's name.
    public init(
        _ code: Code,
        _ message: String? = nil,
        sqlState: String? = nil,
        detail: String? = nil,
        isConnectionUsable: Bool = true
    ) {
        self.code = code
        self.message = message ?? code.description
        self.sqlState = sqlState
        self.detail = detail
        self.isConnectionUsable = isConnectionUsable
    }

    public static func == (lhs: PostgresError, rhs: PostgresError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    public var description: String {
        var text = message
        if let sqlState { text += " (SQLSTATE \(sqlState))" }
        if let detail { text += ": \(detail)" }
        return text + " [\(code)]"
    }
}

/// Well-known SQLSTATE values (PostgreSQL's Appendix A), for comparing with ``PostgresError/sqlState``.
public enum SQLState {
    /// `23505 unique_violation`.
    public static let uniqueViolation = "23505"
    /// `42P01 undefined_table`.
    public static let undefinedTable = "42P01"
    /// `42601 syntax_error`.
    public static let syntaxError = "42601"
    /// `25P02 in_failed_sql_transaction`: a statement after an error, before `ROLLBACK`.
    public static let inFailedTransaction = "25P02"
    /// `40001 serialization_failure`.
    public static let serializationFailure = "40001"
    /// `57P01 admin_shutdown`: the server is shutting down, or the backend was terminated.
    public static let adminShutdown = "57P01"
    /// `22021 character_not_in_repertoire`: text that is not valid in the database encoding.
    public static let characterNotInRepertoire = "22021"
}
