import ChimeJournal
import ChimePostgres

/// The journal in PostgreSQL: the same records and snapshots as the embedded journal
/// (`ChimeJournal.Journal`), in the tables of ``Schema``.
///
/// Records are appended in memory and written by ``commit()`` in one transaction (group commit:
/// the commands that arrive together cost one round of `COMMIT`); a command is acknowledged only
/// after the commit that followed its append returned. ``writeSnapshot(covering:entries:)``
/// stores a snapshot and trims the journal before it in one transaction, and ``recover()`` reads
/// the newest snapshot and the records after it.
///
/// ```swift
/// let journal = try PostgresJournal(connection: PostgresConnection(uri))
/// let recovered = try journal.recover()        // snapshot + records, to rebuild the engine
/// let sequence = journal.append(type: 1, payload: bytes)
/// try journal.commit()                          // durable: reply now
/// try journal.writeSnapshot(covering: sequence, entries: frozenEntries)
/// ```
///
/// Not thread-safe, like its connection. A snapshot written while appends go on needs a second
/// `PostgresJournal` on a connection of its own.
public final class PostgresJournal {
    /// About how many bytes of entries go in one `chime_snapshot_chunk` row.
    public static let chunkBytes = 1 << 20
    /// How many records go in one `INSERT` of a commit (each takes three parameters, and a
    /// statement takes at most 65535).
    public static let recordsPerInsert = 20_000

    public let connection: PostgresConnection
    /// The greatest committed sequence (or covered by a snapshot).
    public private(set) var lastCommitted: UInt64
    /// Appended, not yet committed.
    private var pending: [JournalRecord] = []
    /// Set when a commit failed: whether it took effect is unknown here.
    private var failure: PostgresStoreError?

    /// Opens the journal: creates or migrates the tables (``Schema/migrate(_:)``) and reads the
    /// last sequence.
    /// - Throws: `.schemaTooNew` when a newer chimed migrated the database; `.database`.
    public init(connection: PostgresConnection) throws(PostgresStoreError) {
        self.connection = connection
        try Schema.migrate(connection)
        self.lastCommitted = 0
        self.lastCommitted = try lastSequenceInDatabase()
    }

    /// The sequence of the last record appended (committed or not); the next append gets one more.
    public var lastSequence: UInt64 {
        pending.last?.sequence ?? lastCommitted
    }

    /// How many records wait for ``commit()``.
    public var pendingCount: Int { pending.count }

    /// Appends a record in memory; ``commit()`` writes it.
    /// - Returns: its sequence.
    @discardableResult
    public func append(type: UInt8, payload: [UInt8]) -> UInt64 {
        let sequence = lastSequence + 1
        pending.append(JournalRecord(sequence: sequence, type: type, payload: payload))
        return sequence
    }

    /// Writes every pending record in one transaction: one `INSERT` (a statement is a transaction of
    /// its own: one round trip to the server), or, beyond ``recordsPerInsert``, batches of that many
    /// between `BEGIN` and `COMMIT`.
    ///
    /// When it throws, the pending records are dropped and the journal is ``PostgresStoreError/Code/broken``:
    /// a commit whose connection broke may or may not have taken effect, so only a journal opened
    /// again (and recovered) knows what the database holds.
    /// - Throws: `.database` for the failed commit, `.broken` for any call after one.
    public func commit() throws(PostgresStoreError) {
        if let failure {
            throw PostgresStoreError(.broken, "an earlier commit failed (\(failure.message)): open the journal again")
        }
        guard !pending.isEmpty else { return }
        let records = pending
        pending.removeAll()
        do {
            if records.count <= Self.recordsPerInsert {
                try Self.insert(records[...], connection)
            } else {
                try connection.transaction { connection throws(PostgresError) in
                    var start = records.startIndex
                    while start < records.endIndex {
                        let batch = records[start..<min(start + Self.recordsPerInsert, records.endIndex)]
                        try Self.insert(batch, connection)
                        start = batch.endIndex
                    }
                }
            }
        } catch {
            let failed = PostgresStoreError(error, while: "committing \(records.count) records")
            failure = failed
            throw failed
        }
        lastCommitted = records.last?.sequence ?? lastCommitted
    }

    private static func insert(
        _ batch: ArraySlice<JournalRecord>,
        _ connection: PostgresConnection
    ) throws(PostgresError) {
        var values: [String] = []
        var parameters: [PostgresValue?] = []
        values.reserveCapacity(batch.count)
        parameters.reserveCapacity(batch.count * 3)
        for record in batch {
            let base = parameters.count
            values.append("($\(base + 1)::bigint, $\(base + 2)::smallint, $\(base + 3))")
            parameters += [.integer(record.sequence), .integer(record.type), .bytea(record.payload)]
        }
        let sql = "INSERT INTO chime_journal (seq, kind, payload) VALUES " + values.joined(separator: ", ")
        try connection.execute(sql, parameters)
    }

    /// The committed records after `sequence`, in order, at most `limit` of them.
    public func records(after sequence: UInt64, limit: Int = 10_000) throws(PostgresStoreError) -> [JournalRecord] {
        do {
            let rows = try connection.execute(
                "SELECT seq, kind, payload FROM chime_journal WHERE seq > $1 ORDER BY seq LIMIT $2",
                [.integer(sequence), .integer(limit)]
            ).rows
            var records: [JournalRecord] = []
            records.reserveCapacity(rows.count)
            for row in rows {
                let seq = try row.int64(0)
                let kind = try row.int64(1)
                guard seq > 0, let type = UInt8(exactly: kind) else {
                    throw PostgresStoreError(.corrupt, "chime_journal has a record \(seq) of kind \(kind)")
                }
                records.append(JournalRecord(sequence: UInt64(seq), type: type, payload: try row.bytes(2)))
            }
            return records
        } catch let error as PostgresStoreError {
            throw error
        } catch let error as PostgresError {
            throw PostgresStoreError(error, while: "reading the journal after \(sequence)")
        } catch {
            throw PostgresStoreError(.database, "reading the journal after \(sequence): \(error)")
        }
    }

    /// What the database holds, to rebuild the engine from (as the data directory's recovery
    /// gives it): the newest snapshot and every record after it, in order.
    /// - Throws: `.corrupt` if a snapshot's chunks do not add up or the records have a gap; `.database`.
    public func recover() throws(PostgresStoreError) -> Recovery {
        let snapshot = try latestSnapshot()
        var records: [JournalRecord] = []
        var expected = (snapshot?.sequence ?? 0) + 1
        while true {
            let batch = try self.records(after: expected - 1)
            guard !batch.isEmpty else { break }
            for record in batch {
                guard record.sequence == expected else {
                    throw PostgresStoreError(.corrupt, "chime_journal skips from \(expected - 1) to \(record.sequence)")
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

    /// Stores a snapshot of the state after record `sequence`, and in the same transaction deletes
    /// the records up to it and the older snapshots: a reader sees the old snapshot and records or
    /// the new snapshot, never neither.
    ///
    /// - Parameters:
    ///   - sequence: the last record the state includes; it must be committed, unless `catchingUp`.
    ///   - entries: the snapshot's opaque entries, in order.
    ///   - catchingUp: the state is ahead of the journal (a commit failed, and whether it took
    ///     effect is unknown): `sequence` may be beyond what the database holds, and every record up
    ///     to it goes, whether it was committed or not.
    /// - Throws: `.invalidArgument` if `sequence` is beyond what was committed; `.database`.
    public func writeSnapshot(
        covering sequence: UInt64,
        entries: some Sequence<[UInt8]>,
        catchingUp: Bool = false
    ) throws(PostgresStoreError) {
        try writeSnapshot(covering: sequence, catchingUp: catchingUp) { body throws(PostgresStoreError) in
            for entry in entries { try body(entry) }
        }
    }

    /// ``writeSnapshot(covering:entries:catchingUp:)`` with the entries produced one at a time by
    /// `forEachEntry`, which calls its argument with each (as `EngineSnapshot.forEachEntry` does):
    /// only one chunk of them (``chunkBytes``) is held at a time.
    public func writeSnapshot(
        covering sequence: UInt64,
        catchingUp: Bool = false,
        forEachEntry: (_ body: ([UInt8]) throws(PostgresStoreError) -> Void) throws(PostgresStoreError) -> Void
    ) throws(PostgresStoreError) {
        do {
            try connection.begin()
        } catch {
            throw PostgresStoreError(error, while: "beginning the snapshot at \(sequence)")
        }
        do throws(PostgresStoreError) {
            try writeSnapshotInTransaction(sequence, forEachEntry, catchingUp: catchingUp)
            do {
                try connection.commit()
            } catch {
                throw PostgresStoreError(error, while: "committing the snapshot at \(sequence)")
            }
        } catch {
            if connection.status == .ok && connection.transactionStatus != .idle {
                try? connection.rollback()
            }
            throw error
        }
    }

    private func writeSnapshotInTransaction(
        _ sequence: UInt64,
        _ forEachEntry: (_ body: ([UInt8]) throws(PostgresStoreError) -> Void) throws(PostgresStoreError) -> Void,
        catchingUp: Bool
    ) throws(PostgresStoreError) {
        let committed = try lastSequenceInDatabase()
        guard sequence <= committed || catchingUp else {
            throw PostgresStoreError(
                .invalidArgument,
                "a snapshot at \(sequence) is beyond the last committed record, \(committed)"
            )
        }
        do {
            // The snapshot's row first (the chunks refer to it); its totals are filled in last.
            try connection.execute("DELETE FROM chime_snapshot WHERE seq >= $1", [.integer(sequence)])
            try connection.execute(
                "INSERT INTO chime_snapshot (seq, entries, chunks, bytes) VALUES ($1, 0, 0, 0)",
                [.integer(sequence)]
            )
            var chunk: [UInt8] = []
            var chunks = 0
            var count = 0
            var bytes = 0
            func insertChunk() throws(PostgresStoreError) {
                do {
                    try connection.execute(
                        "INSERT INTO chime_snapshot_chunk (snapshot, chunk, payload) VALUES ($1, $2, $3)",
                        [.integer(sequence), .integer(chunks), .bytea(chunk)]
                    )
                } catch {
                    throw PostgresStoreError(error, while: "writing the snapshot at \(sequence)")
                }
                chunks += 1
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
                if chunk.count >= Self.chunkBytes {
                    try insertChunk()
                }
            }
            if !chunk.isEmpty {
                try insertChunk()
            }
            try connection.execute(
                "UPDATE chime_snapshot SET entries = $2, chunks = $3, bytes = $4 WHERE seq = $1",
                [.integer(sequence), .integer(count), .integer(chunks), .integer(bytes)]
            )
            try connection.execute("DELETE FROM chime_snapshot WHERE seq < $1", [.integer(sequence)])
            try connection.execute("DELETE FROM chime_journal WHERE seq <= $1", [.integer(sequence)])
        } catch let error as PostgresStoreError {
            throw error
        } catch let error as PostgresError {
            throw PostgresStoreError(error, while: "writing the snapshot at \(sequence)")
        } catch {
            throw PostgresStoreError(.database, "writing the snapshot at \(sequence): \(error)")
        }
    }

    /// The newest snapshot, its entries read back from the chunks and checked against its totals.
    public func latestSnapshot() throws(PostgresStoreError) -> Recovery.Snapshot? {
        do {
            guard
                let row = try connection.execute(
                    "SELECT seq, entries, chunks, bytes FROM chime_snapshot ORDER BY seq DESC LIMIT 1"
                ).rows.first
            else { return nil }
            let sequence = try row.int64(0)
            let (expectedEntries, expectedChunks, expectedBytes) = (
                try row.int64(1), try row.int64(2), try row.int64(3)
            )
            var entries: [[UInt8]] = []
            var bytes: Int64 = 0
            var chunk: Int64 = 0
            while chunk < expectedChunks {
                // A few chunks at a time: a snapshot of a million entries is hundreds of megabytes.
                let rows = try connection.execute(
                    "SELECT chunk, payload FROM chime_snapshot_chunk WHERE snapshot = $1 AND chunk >= $2 "
                        + "ORDER BY chunk LIMIT 16",
                    [.integer(sequence), .integer(chunk)]
                ).rows
                guard !rows.isEmpty else { break }
                for row in rows {
                    guard try row.int64(0) == chunk else {
                        throw PostgresStoreError(.corrupt, "snapshot \(sequence) lacks chunk \(chunk)")
                    }
                    let payload = try row.bytes(1)
                    var offset = 0
                    while offset < payload.count {
                        guard payload.count - offset >= 4 else {
                            throw PostgresStoreError(.corrupt, "snapshot \(sequence), chunk \(chunk): a torn length")
                        }
                        let length = payload[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
                        offset += 4
                        guard payload.count - offset >= length else {
                            throw PostgresStoreError(.corrupt, "snapshot \(sequence), chunk \(chunk): a torn entry")
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
                    "snapshot \(sequence) should have \(expectedEntries) entries (\(expectedBytes) bytes) in "
                        + "\(expectedChunks) chunks, and has \(entries.count) (\(bytes) bytes) in \(chunk)"
                )
            }
            return Recovery.Snapshot(sequence: UInt64(sequence), entries: entries)
        } catch let error as PostgresStoreError {
            throw error
        } catch let error as PostgresError {
            throw PostgresStoreError(error, while: "reading the newest snapshot")
        } catch {
            throw PostgresStoreError(.database, "reading the newest snapshot: \(error)")
        }
    }

    /// The greatest sequence the database holds: of a committed record or of the newest snapshot.
    private func lastSequenceInDatabase() throws(PostgresStoreError) -> UInt64 {
        do {
            let row = try connection.execute(
                """
                SELECT greatest((SELECT max(seq) FROM chime_journal), (SELECT max(seq) FROM chime_snapshot), 0)
                """
            ).rows.first
            return UInt64(try row?.int64(0) ?? 0)
        } catch {
            throw PostgresStoreError(error, while: "reading the last sequence")
        }
    }
}
