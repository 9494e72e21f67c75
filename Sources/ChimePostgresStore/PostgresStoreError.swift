import ChimePostgres

/// An error of the journal in PostgreSQL: a ``Code``, a message, and the database's error when
/// one caused it.
///
/// Two errors are equal when their codes are equal.
public struct PostgresStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure it is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case database
            case schemaTooNew
            case corrupt
            case invalidArgument
            case broken
            case slotCountMismatch
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// A statement failed or the connection broke: see ``PostgresStoreError/underlying``.
        public static let database = Code(.database)
        /// The database's schema is newer than this chimed knows: upgrade chimed.
        public static let schemaTooNew = Code(.schemaTooNew)
        /// What the database holds cannot be read back: a snapshot's chunks do not add up, a
        /// record's kind is out of range.
        public static let corrupt = Code(.corrupt)
        /// The caller asked for something that cannot be: a snapshot beyond what was committed, a
        /// slot outside `0..<slotCount`, a lease's time to live that is not positive.
        public static let invalidArgument = Code(.invalidArgument)
        /// A commit failed earlier, so what the database holds is not known here: open the journal again.
        public static let broken = Code(.broken)
        /// The store was created with another number of slots than the one given: devices map to
        /// slots by that number, so it cannot change while the store holds data.
        public static let slotCountMismatch = Code(.slotCountMismatch)

        public var description: String {
            switch kind {
            case .database: "database"
            case .schemaTooNew: "schemaTooNew"
            case .corrupt: "corrupt"
            case .invalidArgument: "invalidArgument"
            case .broken: "broken"
            case .slotCountMismatch: "slotCountMismatch"
            }
        }
    }

    public let code: Code
    public let message: String
    /// The database's error, for `.database` (and a failed commit behind `.broken`).
    public let underlying: PostgresError?

    /// Creates an error; `message` defaults to the code's name.
    public init(_ code: Code, _ message: String? = nil, underlying: PostgresError? = nil) {
        self.code = code
        self.message = message ?? code.description
        self.underlying = underlying
    }

    /// A database error, with what was being done.
    init(_ underlying: PostgresError, while doing: String) {
        self.init(.database, "\(doing): \(underlying)", underlying: underlying)
    }

    /// What a block that throws both kinds (the store's own checks and the database's errors)
    /// threw: the store's error as it is, the database's with what was being done.
    init(_ error: any Error, while doing: String) {
        switch error {
        case let error as PostgresStoreError: self = error
        case let error as PostgresError: self.init(error, while: doing)
        default: self.init(.database, "\(doing): \(error)")
        }
    }

    public static func == (lhs: PostgresStoreError, rhs: PostgresStoreError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    public var description: String { "\(message) [\(code)]" }
}
