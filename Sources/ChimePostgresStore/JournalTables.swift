import ChimePostgres
import ChimeStore

/// A statement's SQL built together with its parameters: ``bind(_:as:)`` appends a value and
/// returns its placeholder, so each `$n` names its value however the SQL is put together.
struct Statement {
    private(set) var parameters: [PostgresValue?] = []

    init(reservingCapacity count: Int = 0) {
        parameters.reserveCapacity(count)
    }

    /// Appends `value` and returns its placeholder, `$n`, or `$n::type` when `type` is given.
    mutating func bind(_ value: PostgresValue?, as type: String? = nil) -> String {
        parameters.append(value)
        return type.map { "$\(parameters.count)::\($0)" } ?? "$\(parameters.count)"
    }

    /// How many parameters ``record(_:after:)`` binds for a record.
    static let parametersPerRecord = 3

    /// A record as a row of `VALUES`: `(leading..., seq, kind, payload)`, `leading` being
    /// placeholders (or SQL) already made.
    mutating func record(_ record: JournalRecord, after leading: [String] = []) -> String {
        let columns = [
            bind(.integer(record.sequence), as: "bigint"), bind(.integer(record.type), as: "smallint"),
            bind(.bytea(record.payload)),
        ]
        return "(" + (leading + columns).joined(separator: ", ") + ")"
    }

    /// An `integer[]` or `bigint[]` parameter (`'{1,2,3}'`).
    mutating func bindArray(_ values: [some BinaryInteger], as type: String) -> String {
        bind(.text("{" + values.map { String($0) }.joined(separator: ",") + "}"), as: type)
    }
}

/// How a transaction's body wants it to end.
enum TransactionEnd<Value> {
    case commit(Value)
    /// Nothing it wrote is kept; the value is returned all the same.
    case rollback(Value)
}

/// How a transaction of the store begins.
enum TransactionKind: String {
    case readWrite = "BEGIN"
    /// Every statement reads the same snapshot of the database, and none writes: a journal read
    /// this way is never torn by a snapshot that trims it meanwhile.
    case readOnlySnapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
}

/// Runs `body` between `BEGIN` and `COMMIT`, or `ROLLBACK` (when the connection still works) if
/// it throws or returns ``TransactionEnd/rollback(_:)``: every transaction of the store goes
/// through here.
/// - Parameter what: what the transaction does, for the error's message.
func inTransaction<Value>(
    _ connection: PostgresConnection,
    _ what: String,
    _ kind: TransactionKind = .readWrite,
    _ body: () throws(PostgresStoreError) -> TransactionEnd<Value>
) throws(PostgresStoreError) -> Value {
    do {
        try connection.execute(kind.rawValue)
    } catch {
        throw PostgresStoreError(error, while: "beginning \(what)")
    }
    do throws(PostgresStoreError) {
        switch try body() {
        case .commit(let value):
            do {
                try connection.commit()
            } catch {
                throw PostgresStoreError(error, while: "committing \(what)")
            }
            return value
        case .rollback(let value):
            do {
                try connection.rollback()
            } catch {
                throw PostgresStoreError(error, while: "rolling back \(what)")
            }
            return value
        }
    } catch {
        if connection.status == .ok && connection.transactionStatus != .idle {
            try? connection.rollback()
        }
        throw error
    }
}

/// Where one journal's rows are: ``PostgresJournal``'s tables (``single``), or one slot's rows in
/// ``SlotStore``'s (``slot(_:)``). Reading records, recovery, and writing and reading snapshots
/// are written once, against this.
///
/// The tables have the same columns after the ``key``: the journal `seq, kind, payload`, the
/// snapshots `seq, entries, chunks, bytes`, the chunks `snapshot, chunk, payload`. A snapshot's
/// entries are stored back to back, each a big-endian `UInt32` length and its bytes, in chunks of
/// about ``PostgresJournal/chunkBytes``.
struct JournalTables {
    let journal: String
    let snapshots: String
    let chunks: String
    /// The columns, and their values, that pick this journal's rows out of the tables.
    let key: [(column: String, value: PostgresValue)]
    /// The journal, for messages: `chime_journal`, `slot 3`.
    let name: String

    /// ``PostgresJournal``'s: the tables of migration 1, one journal.
    static let single = JournalTables(
        journal: "chime_journal",
        snapshots: "chime_snapshot",
        chunks: "chime_snapshot_chunk",
        key: [],
        name: "chime_journal"
    )

    /// One slot's journal in the tables of migration 2.
    static func slot(_ slot: Int) -> JournalTables {
        JournalTables(
            journal: "chime_slot_journal",
            snapshots: "chime_slot_snapshot",
            chunks: "chime_slot_snapshot_chunk",
            key: [("slot", .integer(slot))],
            name: "slot \(slot)"
        )
    }

    /// `WHERE` with the key's conditions (its values bound) and `conditions`, all of them; empty
    /// when there are none.
    private func matching(_ statement: inout Statement, _ conditions: String...) -> String {
        let all = key.map { "\($0.column) = \(statement.bind($0.value))" } + conditions
        return all.isEmpty ? "" : "WHERE " + all.joined(separator: " AND ")
    }

    /// The key's columns and bound values, each followed by a comma, for an `INSERT`.
    private func keyColumns(_ statement: inout Statement) -> (columns: String, values: String) {
        (key.map { $0.column + ", " }.joined(), key.map { statement.bind($0.value) + ", " }.joined())
    }

    /// The committed records after `sequence`, in order, at most `limit` of them.
    func records(
        after sequence: UInt64,
        limit: Int,
        _ connection: PostgresConnection
    ) throws(PostgresStoreError) -> [JournalRecord] {
        let what = "reading \(name) after \(sequence)"
        do {
            var statement = Statement()
            let after = "seq > " + statement.bind(.integer(sequence))
            let sql =
                "SELECT seq, kind, payload FROM \(journal) \(matching(&statement, after)) ORDER BY seq "
                + "LIMIT \(statement.bind(.integer(limit)))"
            let rows = try connection.execute(sql, statement.parameters).rows
            var records: [JournalRecord] = []
            records.reserveCapacity(rows.count)
            for row in rows {
                let seq = try row.int64(0)
                let kind = try row.int64(1)
                guard seq > 0, let type = UInt8(exactly: kind) else {
                    throw PostgresStoreError(.corrupt, "\(name) has a record \(seq) of kind \(kind)")
                }
                records.append(JournalRecord(sequence: UInt64(seq), type: type, payload: try row.bytes(2)))
            }
            return records
        } catch {
            throw PostgresStoreError(error, while: what)
        }
    }

    /// The newest snapshot and every record after it, in order.
    /// - Throws: `.corrupt` if a snapshot's chunks do not add up or the records have a gap; `.database`.
    func recover(_ connection: PostgresConnection) throws(PostgresStoreError) -> Recovery {
        let snapshot = try latestSnapshot(connection)
        var records: [JournalRecord] = []
        var expected = (snapshot?.sequence ?? 0) + 1
        while true {
            let batch = try self.records(after: expected - 1, limit: 10_000, connection)
            guard !batch.isEmpty else { break }
            for record in batch {
                guard record.sequence == expected else {
                    throw PostgresStoreError(.corrupt, "\(name) skips from \(expected - 1) to \(record.sequence)")
                }
                expected += 1
            }
            records += batch
        }
        return Recovery(
            snapshot: snapshot,
            records: records,
            lastSequence: records.last?.sequence ?? snapshot?.sequence ?? 0
        )
    }

    /// The greatest sequence the database holds: of a committed record or of the newest snapshot.
    func lastSequence(_ connection: PostgresConnection) throws(PostgresStoreError) -> UInt64 {
        do {
            var statement = Statement()
            let condition = matching(&statement)
            let sql =
                "SELECT greatest((SELECT max(seq) FROM \(journal) \(condition)), "
                + "(SELECT max(seq) FROM \(snapshots) \(condition)), 0)"
            let row = try connection.execute(sql, statement.parameters).rows.first
            return UInt64(try row?.int64(0) ?? 0)
        } catch {
            throw PostgresStoreError(error, while: "reading the last sequence of \(name)")
        }
    }

    /// In the caller's transaction: stores a snapshot of the state after record `sequence`, and
    /// deletes the records up to it and the older snapshots, so that a reader sees the old snapshot
    /// and records or the new snapshot, never neither.
    ///
    /// - Parameters:
    ///   - sequence: the last record the state includes; it must be committed, unless `catchingUp`.
    ///   - catchingUp: the state is ahead of the journal: every record up to `sequence` goes,
    ///     whether the database holds it or not.
    ///   - columns: more columns of the snapshot's row, and their values (a slot's `epoch`).
    ///   - forEachEntry: calls its argument with each entry, in order; only one chunk of them is
    ///     held at a time.
    /// - Throws: `.invalidArgument` if `sequence` is beyond what was committed; `.database`.
    func writeSnapshot(
        covering sequence: UInt64,
        catchingUp: Bool,
        columns: [(column: String, value: PostgresValue)] = [],
        _ connection: PostgresConnection,
        _ forEachEntry: (_ body: ([UInt8]) throws(PostgresStoreError) -> Void) throws(PostgresStoreError) -> Void
    ) throws(PostgresStoreError) {
        let what = "writing the snapshot of \(name) at \(sequence)"
        let committed = try lastSequence(connection)
        guard sequence <= committed || catchingUp else {
            throw PostgresStoreError(
                .invalidArgument,
                "a snapshot of \(name) at \(sequence) is beyond the last committed record, \(committed)"
            )
        }
        /// Runs a statement whose SQL `make` writes, binding its values into the statement.
        func run(_ make: (inout Statement) -> String) throws(PostgresStoreError) {
            var statement = Statement()
            let sql = make(&statement)
            do {
                try connection.execute(sql, statement.parameters)
            } catch {
                throw PostgresStoreError(error, while: what)
            }
        }
        let seq = PostgresValue.integer(sequence)
        // The snapshot's row first (the chunks refer to it); its totals are filled in last.
        try run { statement in
            let newer = "seq >= " + statement.bind(seq)
            return "DELETE FROM \(snapshots) \(matching(&statement, newer))"
        }
        try run { statement in
            let (keyNames, keyValues) = keyColumns(&statement)
            let extraNames = columns.map { ", " + $0.column }.joined()
            let extraValues = columns.map { ", " + statement.bind($0.value) }.joined()
            return "INSERT INTO \(snapshots) (\(keyNames)seq, entries, chunks, bytes\(extraNames)) "
                + "VALUES (\(keyValues)\(statement.bind(seq)), 0, 0, 0\(extraValues))"
        }
        var chunk: [UInt8] = []
        var chunkCount = 0
        var count = 0
        var bytes = 0
        func insertChunk() throws(PostgresStoreError) {
            try run { statement in
                let (keyNames, keyValues) = keyColumns(&statement)
                return "INSERT INTO \(chunks) (\(keyNames)snapshot, chunk, payload) VALUES "
                    + "(\(keyValues)\(statement.bind(seq)), \(statement.bind(.integer(chunkCount))), "
                    + "\(statement.bind(.bytea(chunk))))"
            }
            chunkCount += 1
            chunk.removeAll(keepingCapacity: true)
        }
        try forEachEntry { entry throws(PostgresStoreError) in
            guard let length = UInt32(exactly: entry.count) else {
                throw PostgresStoreError(.invalidArgument, "a snapshot entry of \(entry.count) bytes")
            }
            withUnsafeBytes(of: length.bigEndian) { chunk.append(contentsOf: $0) }
            chunk += entry
            count += 1
            bytes += entry.count
            if chunk.count >= PostgresJournal.chunkBytes {
                try insertChunk()
            }
        }
        if !chunk.isEmpty {
            try insertChunk()
        }
        try run { statement in
            let totals =
                "entries = \(statement.bind(.integer(count))), chunks = \(statement.bind(.integer(chunkCount))), "
                + "bytes = \(statement.bind(.integer(bytes)))"
            let this = "seq = " + statement.bind(seq)
            return "UPDATE \(snapshots) SET \(totals) \(matching(&statement, this))"
        }
        try run { statement in
            let older = "seq < " + statement.bind(seq)
            return "DELETE FROM \(snapshots) \(matching(&statement, older))"
        }
        try run { statement in
            let covered = "seq <= " + statement.bind(seq)
            return "DELETE FROM \(journal) \(matching(&statement, covered))"
        }
    }

    /// The newest snapshot, its entries read back from the chunks and checked against its totals.
    func latestSnapshot(_ connection: PostgresConnection) throws(PostgresStoreError) -> Recovery.Snapshot? {
        do {
            var newest = Statement()
            let condition = matching(&newest)
            guard
                let row = try connection.execute(
                    "SELECT seq, entries, chunks, bytes FROM \(snapshots) \(condition) ORDER BY seq DESC LIMIT 1",
                    newest.parameters
                ).rows.first
            else { return nil }
            let sequence = try row.int64(0)
            let (expectedEntries, expectedChunks, expectedBytes) = (
                try row.int64(1), try row.int64(2), try row.int64(3)
            )
            let label = "\(name): snapshot \(sequence)"
            var entries: [[UInt8]] = []
            var bytes: Int64 = 0
            var chunk: Int64 = 0
            while chunk < expectedChunks {
                // A few chunks at a time: a snapshot of a million entries is hundreds of megabytes.
                var statement = Statement()
                let from = [
                    "snapshot = " + statement.bind(.integer(sequence)), "chunk >= " + statement.bind(.integer(chunk)),
                ]
                let sql =
                    "SELECT chunk, payload FROM \(chunks) \(matching(&statement, from[0], from[1])) "
                    + "ORDER BY chunk LIMIT 16"
                let rows = try connection.execute(sql, statement.parameters).rows
                guard !rows.isEmpty else { break }
                for row in rows {
                    guard try row.int64(0) == chunk else {
                        throw PostgresStoreError(.corrupt, "\(label) lacks chunk \(chunk)")
                    }
                    let payload = try row.bytes(1)
                    var offset = 0
                    while offset < payload.count {
                        guard payload.count - offset >= 4 else {
                            throw PostgresStoreError(.corrupt, "\(label), chunk \(chunk): a torn length")
                        }
                        let length = payload[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
                        offset += 4
                        guard payload.count - offset >= length else {
                            throw PostgresStoreError(.corrupt, "\(label), chunk \(chunk): a torn entry")
                        }
                        entries.append(Array(payload[offset..<offset + length]))
                        offset += length
                        bytes += Int64(length)
                    }
                    chunk += 1
                }
            }
            guard chunk == expectedChunks, Int64(entries.count) == expectedEntries, bytes == expectedBytes else {
                throw PostgresStoreError(
                    .corrupt,
                    "\(label) should have \(expectedEntries) entries (\(expectedBytes) bytes) in "
                        + "\(expectedChunks) chunks, and has \(entries.count) (\(bytes) bytes) in \(chunk)"
                )
            }
            return Recovery.Snapshot(sequence: UInt64(sequence), entries: entries)
        } catch {
            throw PostgresStoreError(error, while: "reading the newest snapshot of \(name)")
        }
    }
}
