import CPostgres

#if canImport(Glibc)
import Glibc
#endif

/// One connection to PostgreSQL through libpq: the owner of a `PGconn *`, closed by ``close()`` or
/// when the object goes away.
///
/// Statements go with ``execute(_:_:)``: the parameters always separately from the SQL
/// (`PQsendQueryParams`), text in the text format and `bytea` in binary, so nothing is ever
/// escaped or interpolated; results come back in binary and are copied into Swift values.
///
/// ```swift
/// let connection = try PostgresConnection("postgresql://chime@db-a,db-b/chime?target_session_attrs=read-write")
/// try connection.transaction { connection throws(PostgresError) in
///     try connection.execute("INSERT INTO notes (id, body) VALUES ($1, $2)", [.integer(7), .bytea(body)])
/// }
/// let rows = try connection.execute("SELECT id, body FROM notes WHERE id > $1", [.integer(6)]).rows
/// ```
///
/// Not thread-safe (nor is a `PGconn`): use it from one thread at a time, and open one connection
/// per thread that needs one.
public final class PostgresConnection {
    /// The connection's state (`PQstatus`).
    public enum Status: Sendable, Equatable {
        /// Connected and usable.
        case ok
        /// Broken: the server went away, or a statement timed out. Open a new connection.
        case bad
        /// Closed by ``close()``.
        case closed
    }

    /// Where the connection is with respect to a transaction (`PQtransactionStatus`).
    public enum TransactionStatus: Sendable, Equatable {
        /// Not in a transaction.
        case idle
        /// A statement is running.
        case active
        /// In a transaction, after `BEGIN`.
        case inTransaction
        /// In a transaction in which a statement failed: only `ROLLBACK` is accepted.
        case inFailedTransaction
        /// The connection is bad or closed.
        case unknown
    }

    /// The `PGconn *`: nil once closed, or dropped after a timeout.
    private var connection: OpaquePointer?
    /// Whether ``close()`` was called (rather than the connection being dropped as broken).
    private var closedByUser = false
    /// How long a statement may take before ``execute(_:_:)`` gives up with `.timeout`; nil waits
    /// as long as it takes.
    public let statementTimeout: Duration?
    /// The most parameters one statement takes: the protocol counts them in 16 bits.
    public static let maximumParameters = Int(UInt16.max)

    /// Connects, blocking until connected or failed.
    ///
    /// - Parameters:
    ///   - connectionString: a libpq connection URI (`postgresql://user@host:port/db?sslmode=require`)
    ///     or `key=value` string. Multi-host URIs (`postgresql://a:5432,b:5432/db`) with
    ///     `target_session_attrs=read-write` (or `primary`, `standby`, ...) are libpq's: it tries
    ///     the hosts in order and keeps the first that fits.
    ///   - connectTimeout: how long to wait for each host, unless the string sets its own
    ///     `connect_timeout`. libpq counts whole seconds (rounded up here), at least 2.
    ///   - statementTimeout: how long ``execute(_:_:)`` waits for the server's answer; nil: forever.
    /// - Throws: `PostgresError(.connectionFailed)` with libpq's message (which never contains the
    ///   password).
    public init(
        _ connectionString: String,
        connectTimeout: Duration = .seconds(10),
        statementTimeout: Duration? = nil
    ) throws(PostgresError) {
        self.statementTimeout = statementTimeout
        let (seconds, attoseconds) = connectTimeout.components
        let timeout = max(1, seconds + (attoseconds > 0 ? 1 : 0))
        // Later entries override earlier ones (expand_dbname = 1 expands the string in place of
        // dbname): the string's own connect_timeout wins over the default given here, and the
        // client encoding is always UTF-8, which is what Swift strings are.
        let keywords = ["connect_timeout", "fallback_application_name", "dbname", "client_encoding"]
        let values = [String(timeout), "chime", connectionString, "UTF8"]
        let connection = withCStrings(keywords) { keywords in
            withCStrings(values) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let connection else {
            throw PostgresError(.connectionFailed, "libpq could not allocate a connection", isConnectionUsable: false)
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.errorMessage(connection)
            PQfinish(connection)
            throw PostgresError(.connectionFailed, message, isConnectionUsable: false)
        }
        // Non-blocking, so that sending a large statement to a server that stopped reading can time
        // out too; execute() waits with poll(2) itself.
        guard PQsetnonblocking(connection, 1) == 0 else {
            let message = Self.errorMessage(connection)
            PQfinish(connection)
            throw PostgresError(.connectionFailed, message, isConnectionUsable: false)
        }
        // The server's NOTICEs (such as "relation already exists, skipping") are not errors: without
        // a processor libpq prints them on standard error.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        self.connection = connection
    }

    deinit {
        if let connection {
            PQfinish(connection)
        }
    }

    /// Closes the connection (`PQfinish`); later calls throw `.closed`. Closing twice does nothing.
    public func close() {
        if let connection {
            PQfinish(connection)
        }
        connection = nil
        closedByUser = true
    }

    /// The connection's state.
    public var status: Status {
        if closedByUser { return .closed }
        guard let connection else { return .bad }
        return PQstatus(connection) == CONNECTION_OK ? .ok : .bad
    }

    /// Where the connection is with respect to a transaction.
    public var transactionStatus: TransactionStatus {
        guard let connection else { return .unknown }
        switch PQtransactionStatus(connection) {
        case PQTRANS_IDLE: return .idle
        case PQTRANS_ACTIVE: return .active
        case PQTRANS_INTRANS: return .inTransaction
        case PQTRANS_INERROR: return .inFailedTransaction
        default: return .unknown
        }
    }

    /// The host the connection went to (`PQhost`): with a multi-host URI, the one that was chosen.
    public var host: String? {
        connection.flatMap { PQhost($0) }.map { String(cString: $0) }
    }

    /// The port the connection went to (`PQport`).
    public var port: Int? {
        connection.flatMap { PQport($0) }.flatMap { Int(String(cString: $0)) }
    }

    /// The server's version as an integer, such as 150018 for 15.18 (`PQserverVersion`); 0 when closed.
    public var serverVersion: Int {
        connection.map { Int(PQserverVersion($0)) } ?? 0
    }

    /// A parameter the server reports (`PQparameterStatus`): `server_version`, `in_hot_standby`,
    /// `default_transaction_read_only`, `server_encoding`, ...
    public func parameterStatus(_ name: String) -> String? {
        guard let connection, let value = PQparameterStatus(connection, name) else { return nil }
        return String(cString: value)
    }

    // MARK: Statements

    /// Runs one statement, its parameters sent separately (`$1`, `$2`, ... in `sql`).
    ///
    /// - Parameters:
    ///   - sql: one SQL statement; its parameters are `$1`...`$n`.
    ///   - parameters: a value per parameter, nil for NULL.
    /// - Returns: the rows and the command tag.
    /// - Throws: `PostgresError`: `.queryFailed` with the server's SQLSTATE when it refused the
    ///   statement; `.connectionLost` or `.timeout` (the connection is then unusable, and whether
    ///   the statement took effect is unknown); `.invalidParameter`, `.unexpectedResult`, `.closed`.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [PostgresValue?] = []) throws(PostgresError) -> PostgresResult {
        let connection = try usableConnection()
        guard parameters.count <= Self.maximumParameters else {
            throw PostgresError(
                .invalidParameter,
                "\(parameters.count) parameters: PostgreSQL takes at most \(Self.maximumParameters)"
            )
        }
        let encoded = try EncodedParameters(parameters)
        defer { encoded.deallocate() }
        let deadline = statementTimeout.map { ContinuousClock.now + $0 }

        // Result format 1: every column in binary (see CellDecoder), bytea as its bytes.
        let sent = PQsendQueryParams(
            connection,
            sql,
            Int32(parameters.count),
            encoded.types,
            encoded.values,
            encoded.lengths,
            encoded.formats,
            1
        )
        guard sent == 1 else { throw failure(connection, "cannot send the statement") }
        try flush(connection, deadline: deadline)
        let results = try collectResults(connection, deadline: deadline)
        defer { results.forEach { PQclear($0) } }
        // The first error is the one that explains; otherwise the last result is the statement's.
        let chosen = results.first { PQresultStatus($0) == PGRES_FATAL_ERROR } ?? results.last
        guard let result = chosen else {
            throw failure(connection, "the server sent no result")
        }
        return try read(result, connection)
    }

    // MARK: Transactions

    /// `BEGIN`.
    public func begin() throws(PostgresError) {
        try execute("BEGIN")
    }

    /// `COMMIT`.
    /// - Throws: `.queryFailed` also when the server answers `ROLLBACK`, which it does for a
    ///   transaction in which a statement had failed: nothing of it was committed.
    public func commit() throws(PostgresError) {
        let result = try execute("COMMIT")
        if result.commandStatus == "ROLLBACK" {
            throw PostgresError(
                .queryFailed,
                "the transaction was rolled back, not committed: a statement in it had failed",
                sqlState: SQLState.inFailedTransaction
            )
        }
    }

    /// `ROLLBACK`.
    public func rollback() throws(PostgresError) {
        try execute("ROLLBACK")
    }

    /// Runs `body` in a transaction: `BEGIN`, then `COMMIT` if it returns, or `ROLLBACK` (when the
    /// connection still works) if it throws.
    /// - Throws: what `body` threw, or the error of `BEGIN` or `COMMIT`.
    @discardableResult
    public func transaction<T>(
        _ body: (PostgresConnection) throws(PostgresError) -> T
    ) throws(PostgresError) -> T {
        try begin()
        do throws(PostgresError) {
            let value = try body(self)
            try commit()
            return value
        } catch {
            if status == .ok && transactionStatus != .idle {
                try? rollback()
            }
            throw error
        }
    }

    // MARK: Internals

    private func usableConnection() throws(PostgresError) -> OpaquePointer {
        guard let connection else {
            if closedByUser { throw PostgresError(.closed, "the connection was closed", isConnectionUsable: false) }
            throw PostgresError(
                .connectionLost,
                "the connection was dropped: open a new one",
                isConnectionUsable: false
            )
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            throw PostgresError(
                .connectionLost,
                "the connection is broken: \(Self.errorMessage(connection))",
                isConnectionUsable: false
            )
        }
        return connection
    }

    /// Sends what libpq buffered, reading meanwhile so that the server is never blocked on us.
    private func flush(_ connection: OpaquePointer, deadline: ContinuousClock.Instant?) throws(PostgresError) {
        while true {
            let flushed = PQflush(connection)
            if flushed == 0 { return }
            if flushed < 0 { throw failure(connection, "cannot send the statement") }
            let events = try wait(connection, for: Int16(POLLIN | POLLOUT), deadline: deadline)
            if events & Int16(POLLIN | POLLHUP | POLLERR) != 0 && PQconsumeInput(connection) == 0 {
                throw failure(connection, "cannot send the statement")
            }
        }
    }

    /// Reads every result of the statement, up to libpq's NULL. A broken connection ends with an
    /// error result libpq makes itself.
    private func collectResults(
        _ connection: OpaquePointer,
        deadline: ContinuousClock.Instant?
    ) throws(PostgresError) -> [OpaquePointer] {
        var results: [OpaquePointer] = []
        do throws(PostgresError) {
            while true {
                while PQisBusy(connection) != 0 {
                    try wait(connection, for: Int16(POLLIN), deadline: deadline)
                    if PQconsumeInput(connection) == 0 { break }
                }
                guard let result = PQgetResult(connection) else { break }
                results.append(result)
                let status = PQresultStatus(result)
                if status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH {
                    drop()
                    throw PostgresError(.unexpectedResult, "COPY is not supported", isConnectionUsable: false)
                }
            }
        } catch {
            results.forEach { PQclear($0) }
            throw error
        }
        return results
    }

    /// Waits with poll(2) until the socket is ready for `events` or the deadline passes.
    @discardableResult
    private func wait(
        _ connection: OpaquePointer,
        for events: Int16,
        deadline: ContinuousClock.Instant?
    ) throws(PostgresError) -> Int16 {
        let socket = PQsocket(connection)
        guard socket >= 0 else { throw failure(connection, "the connection has no socket") }
        while true {
            var timeout: Int32 = -1
            if let deadline {
                let left = ContinuousClock.now.duration(to: deadline)
                if left <= .zero { throw timedOut() }
                let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
                timeout = Int32(clamping: milliseconds + 1)
            }
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let ready = poll(&descriptor, 1, timeout)
            if ready > 0 { return descriptor.revents }
            if ready == 0 { continue }  // the deadline check above throws
            if errno == EINTR { continue }
            throw PostgresError(
                .connectionLost,
                "poll: \(String(cString: strerror(errno)))",
                isConnectionUsable: false
            )
        }
    }

    /// The server did not answer in time: what it does with the statement is unknown, so the
    /// connection is dropped (the server aborts the statement when it sees the disconnect).
    private func timedOut() -> PostgresError {
        drop()
        let limit = statementTimeout.map { " (\($0))" } ?? ""
        return PostgresError(
            .timeout,
            "the server did not answer within the statement timeout\(limit); the connection was dropped",
            isConnectionUsable: false
        )
    }

    private func drop() {
        if let connection {
            PQfinish(connection)
        }
        connection = nil
    }

    /// The error for a libpq call that failed: lost if the connection is now bad, failed otherwise.
    private func failure(_ connection: OpaquePointer, _ what: String) -> PostgresError {
        let message = "\(what): \(Self.errorMessage(connection))"
        if PQstatus(connection) == CONNECTION_OK {
            return PostgresError(.queryFailed, message)
        }
        return PostgresError(.connectionLost, message, isConnectionUsable: false)
    }

    /// Copies a result into Swift values, or makes the error it carries.
    private func read(_ result: OpaquePointer, _ connection: OpaquePointer) throws(PostgresError) -> PostgresResult {
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY else {
            let usable = PQstatus(connection) == CONNECTION_OK
            let primary = Self.field(result, chime_pg_diag_message_primary())
            let message = primary ?? Self.trimmed(PQresultErrorMessage(result)) ?? Self.errorMessage(connection)
            throw PostgresError(
                usable ? .queryFailed : .connectionLost,
                message.isEmpty ? "the statement failed" : message,
                sqlState: Self.field(result, chime_pg_diag_sqlstate()),
                detail: Self.field(result, chime_pg_diag_message_detail()),
                isConnectionUsable: usable
            )
        }
        let columnCount = Int(PQnfields(result))
        let rowCount = Int(PQntuples(result))
        var columns: [String] = []
        var decoders: [CellDecoder] = []
        for column in 0..<columnCount {
            let name = PQfname(result, Int32(column)).map { String(cString: $0) } ?? "?column?"
            columns.append(name)
            let type = PQftype(result, Int32(column))
            guard let decoder = CellDecoder(type: type) else {
                throw PostgresError(
                    .unexpectedResult,
                    "column '\(name)' has type OID \(type), which ChimePostgres does not decode: "
                        + "cast it in the query (\(name)::text)"
                )
            }
            decoders.append(decoder)
        }
        var rows: [PostgresRow] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var values: [PostgresValue?] = []
            values.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if PQgetisnull(result, Int32(row), Int32(column)) != 0 {
                    values.append(nil)
                    continue
                }
                let length = Int(PQgetlength(result, Int32(row), Int32(column)))
                let bytes: UnsafeRawBufferPointer
                if let start = PQgetvalue(result, Int32(row), Int32(column)) {
                    bytes = UnsafeRawBufferPointer(start: start, count: length)
                } else {
                    bytes = UnsafeRawBufferPointer(start: nil, count: 0)
                }
                values.append(try decoders[column].decode(bytes, column: columns[column]))
            }
            rows.append(PostgresRow(values))
        }
        let commandStatus = PQcmdStatus(result).map { String(cString: $0) } ?? ""
        let affected = PQcmdTuples(result).flatMap { Int(String(cString: $0)) }
        return PostgresResult(columns: columns, rows: rows, commandStatus: commandStatus, affectedRows: affected)
    }

    private static func field(_ result: OpaquePointer, _ code: Int32) -> String? {
        PQresultErrorField(result, code).map { String(cString: $0) }
    }

    private static func trimmed(_ message: UnsafeMutablePointer<CChar>?) -> String? {
        guard let message else { return nil }
        let text = String(cString: message)
        let trimmed = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        return trimmed.isEmpty ? nil : trimmed
    }

    static func errorMessage(_ connection: OpaquePointer) -> String {
        trimmed(PQerrorMessage(connection)) ?? "unknown libpq error"
    }
}

/// Calls `body` with a NULL-terminated C array of copies of the strings, alive for the call only.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let array = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: strings.count + 1)
    let copies = strings.map { strdup($0) }
    defer {
        copies.forEach { free($0) }
        array.deallocate()
    }
    for (index, copy) in copies.enumerated() {
        array[index] = UnsafePointer(copy)
    }
    array[strings.count] = nil
    return body(array)
}
