import ChimePostgres
import ChimeStore

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

    /// The advisory lock a journal's one writer holds for the life of its connection
    /// (``claimWriter(_:)``), and the one its snapshot connections hold shared (``joinWriter(_:)``).
    static let writerLock: Int64 = 0x63_6869_6D65_7731  // "chimew1"
    static let snapshotLock: Int64 = 0x63_6869_6D65_7332  // "chimes2"

    /// Makes `connection` the journal's one writer before anything is read: waits until no other
    /// connection holds the writer's lock or a snapshot connection's (call it before opening the
    /// journal on it, and open the journal again after a wait).
    ///
    /// A connection whose client was killed lives on in the server until its backend notices, and a
    /// statement it had sent (a commit, a snapshot's `COMMIT`) can still take effect meanwhile: the
    /// next chimed must not read the journal before that, or it would number its records over ones it
    /// never saw. A second chimed on the same database waits here (up to its statement timeout) and
    /// fails, as a second one on a data directory fails on its lock.
    public static func claimWriter(_ connection: PostgresConnection) throws(PostgresStoreError) {
        do {
            try connection.execute("SELECT pg_advisory_lock($1)", [.integer(writerLock)])
            try connection.execute("SELECT pg_advisory_lock($1)", [.integer(snapshotLock)])
            try connection.execute("SELECT pg_advisory_unlock($1)", [.integer(snapshotLock)])
        } catch {
            throw PostgresStoreError(
                error,
                while: "waiting for the journal's lock (is another chimed using this database, or did one just stop?)"
            )
        }
    }

    /// Marks `connection` as one of the writer's snapshot connections, for the life of the
    /// connection (see ``claimWriter(_:)``).
    public static func joinWriter(_ connection: PostgresConnection) throws(PostgresStoreError) {
        do {
            try connection.execute("SELECT pg_advisory_lock_shared($1)", [.integer(snapshotLock)])
        } catch {
            throw PostgresStoreError(error, while: "taking the snapshot lock")
        }
    }

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

    /// Writes every pending record in one transaction, between `BEGIN` and `COMMIT`, in `INSERT`s
    /// of ``recordsPerInsert``.
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
        do throws(PostgresStoreError) {
            // BEGIN and COMMIT even for one INSERT: a commit of one statement (two round trips
            // less) was taken back while chasing lost commands whose cause was elsewhere (see
            // claimWriter); it can come back, measured.
            try inTransaction(connection, "a commit of \(records.count) records") { () throws(PostgresStoreError) in
                var start = records.startIndex
                while start < records.endIndex {
                    let batch = records[start..<min(start + Self.recordsPerInsert, records.endIndex)]
                    try insert(batch)
                    start = batch.endIndex
                }
                return .commit(())
            }
        } catch {
            failure = error
            throw error
        }
        lastCommitted = records.last?.sequence ?? lastCommitted
    }

    private func insert(_ batch: ArraySlice<JournalRecord>) throws(PostgresStoreError) {
        var statement = Statement(reservingCapacity: batch.count * Statement.parametersPerRecord)
        let rows = batch.map { statement.record($0) }
        do {
            try connection.execute(
                "INSERT INTO chime_journal (seq, kind, payload) VALUES " + rows.joined(separator: ", "),
                statement.parameters
            )
        } catch {
            throw PostgresStoreError(error, while: "committing \(batch.count) records")
        }
    }

    /// The committed records after `sequence`, in order, at most `limit` of them.
    public func records(after sequence: UInt64, limit: Int = 10_000) throws(PostgresStoreError) -> [JournalRecord] {
        try JournalTables.single.records(after: sequence, limit: limit, connection)
    }

    /// What the database holds, to rebuild the engine from (as the data directory's recovery
    /// gives it): the newest snapshot and every record after it, in order.
    /// - Throws: `.corrupt` if a snapshot's chunks do not add up or the records have a gap; `.database`.
    public func recover() throws(PostgresStoreError) -> Recovery {
        try JournalTables.single.recover(connection)
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
        try inTransaction(connection, "the snapshot at \(sequence)") { () throws(PostgresStoreError) in
            try JournalTables.single.writeSnapshot(
                covering: sequence,
                catchingUp: catchingUp,
                connection,
                forEachEntry
            )
            return .commit(())
        }
    }

    /// The newest snapshot, its entries read back from the chunks and checked against its totals.
    public func latestSnapshot() throws(PostgresStoreError) -> Recovery.Snapshot? {
        try JournalTables.single.latestSnapshot(connection)
    }

    /// The greatest sequence the database holds: of a committed record or of the newest snapshot.
    private func lastSequenceInDatabase() throws(PostgresStoreError) -> UInt64 {
        try JournalTables.single.lastSequence(connection)
    }
}
