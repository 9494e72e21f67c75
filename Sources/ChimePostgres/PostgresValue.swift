/// A value sent as a statement's parameter or read from a result: text (the server parses it as
/// the parameter's type, so numbers go as their decimal text) or bytes (`bytea`, sent and read in
/// binary). SQL NULL is `nil` in a `[PostgresValue?]`.
public enum PostgresValue: Hashable, Sendable, CustomStringConvertible {
    /// Text in the text format; the server infers the type from the statement (`$1::bigint` to
    /// say it). PostgreSQL text cannot hold NUL characters: such a value is refused before sending.
    case text(String)
    /// Bytes as `bytea`, in the binary format: any bytes, NULs included, nothing escaped.
    case bytea([UInt8])

    /// An integer, as its decimal text.
    public static func integer(_ value: some BinaryInteger) -> PostgresValue {
        .text(String(value))
    }

    public var description: String {
        switch self {
        case .text(let text): "'\(text)'"
        case .bytea(let bytes): "bytea(\(bytes.count) bytes)"
        }
    }
}

extension PostgresValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    public init(stringLiteral value: String) {
        self = .text(value)
    }

    public init(integerLiteral value: Int64) {
        self = .integer(value)
    }
}

/// One row of a result: a value (or nil for NULL) per column.
public struct PostgresRow: Hashable, Sendable {
    /// The values, in the order of the result's columns.
    public let values: [PostgresValue?]

    public init(_ values: [PostgresValue?]) {
        self.values = values
    }

    /// The value of a column, nil for NULL (or a column that does not exist).
    public subscript(column: Int) -> PostgresValue? {
        values.indices.contains(column) ? values[column] : nil
    }

    /// The text of a column that is not NULL and not `bytea`.
    /// - Throws: `PostgresError(.unexpectedResult)` for NULL, `bytea` or a missing column.
    public func text(_ column: Int) throws(PostgresError) -> String {
        switch try value(column) {
        case .text(let text): return text
        case .bytea: throw PostgresError(.unexpectedResult, "column \(column) is bytea, not text")
        }
    }

    /// The bytes of a `bytea` column that is not NULL.
    /// - Throws: `PostgresError(.unexpectedResult)` for NULL, text or a missing column.
    public func bytes(_ column: Int) throws(PostgresError) -> [UInt8] {
        switch try value(column) {
        case .bytea(let bytes): return bytes
        case .text: throw PostgresError(.unexpectedResult, "column \(column) is text, not bytea")
        }
    }

    /// A column that is not NULL, as an integer (from an integer column or decimal text).
    /// - Throws: `PostgresError(.unexpectedResult)` for NULL, bytes or text that is not an `Int64`.
    public func int64(_ column: Int) throws(PostgresError) -> Int64 {
        let text = try text(column)
        guard let number = Int64(text) else {
            throw PostgresError(.unexpectedResult, "column \(column) is '\(text)', not an integer")
        }
        return number
    }

    /// Whether a column is NULL.
    public func isNull(_ column: Int) -> Bool {
        self[column] == nil
    }

    private func value(_ column: Int) throws(PostgresError) -> PostgresValue {
        guard values.indices.contains(column) else {
            throw PostgresError(.unexpectedResult, "there is no column \(column) (the row has \(values.count))")
        }
        guard let value = values[column] else {
            throw PostgresError(.unexpectedResult, "column \(column) is NULL")
        }
        return value
    }
}

/// What a statement returned, copied out of libpq's `PGresult` (which is freed before `execute`
/// returns).
public struct PostgresResult: Sendable {
    /// The column names, in order.
    public let columns: [String]
    /// The rows, in the order the server sent them.
    public let rows: [PostgresRow]
    /// The command tag (`PQcmdStatus`), such as `INSERT 0 3`, `SELECT 2` or `COMMIT`.
    public let commandStatus: String
    /// The rows inserted, updated, deleted, selected, ... (`PQcmdTuples`); nil when the command
    /// does not count rows.
    public let affectedRows: Int?
}
