import ChimeCore
import ChimePostgres
import ChimeStore
import ChimeSupport
import Foundation

/// The journal in PostgreSQL (`--store postgres://...`), as the worker's store.
///
/// The same records and snapshots as the data directory, in the tables of ChimePostgresStore.
/// A commit is one transaction of every record appended since the last (group commit), on the
/// loop's connection; a snapshot is written on a connection of its own, by a background thread.
///
/// When a commit fails (the database went away, or was too slow to answer), whether it took effect
/// is unknown: the connection is dropped, ``commit()`` throws a transient ``StoreError``, and the
/// worker's policy refuses commands until a snapshot has caught the database up. That snapshot
/// covers every sequence handed out, committed or not, so that the records of the failed commit,
/// if they did reach the database, are trimmed with the rest rather than replayed twice; once it is
/// written, the loop's connection is opened again.
public final class PostgresStore: WorkerStore {
    let connectionString: String
    let snapshotAfterBytes: Int
    /// The loop's journal; nil after a failed commit, until a snapshot has caught up.
    private var journal: PostgresJournal?
    /// The greatest sequence handed out, committed or not.
    private var highestSequence: UInt64
    private var bytesSinceSnapshot = 0
    /// The snapshot being written: what it covers, the bytes appended when it began, and whether
    /// memory was ahead of the database then (it catches the database up).
    private var snapshot = SnapshotInProgress<Bool>()

    static let connectTimeout = Duration.seconds(5)
    /// How long a statement may wait for the database before the commit counts as failed: the loop
    /// (and so every delivery) waits that long for a database that stopped answering.
    static let statementTimeout = Duration.seconds(10)

    /// Connects with the worker's timeouts and opens what `open` makes of the connection (a
    /// journal, the slots). A failure is transient (retried), except a schema newer than this
    /// chimed and a store with another number of slots: those need the operator.
    static func connect<Opened>(
        _ connectionString: String,
        _ open: (PostgresConnection) throws(PostgresStoreError) -> Opened
    ) throws(StoreError) -> Opened {
        do {
            let connection = try PostgresConnection(
                connectionString,
                connectTimeout: connectTimeout,
                statementTimeout: statementTimeout
            )
            return try open(connection)
        } catch let error as PostgresStoreError {
            let permanent = error.code == .schemaTooNew || error.code == .slotCountMismatch
            throw StoreError("PostgreSQL: \(error)", transient: !permanent)
        } catch {
            throw StoreError("PostgreSQL: \(error)", transient: true)
        }
    }

    /// - Parameter writer: the loop's connection, which holds the journal's writer lock for its
    ///   life; else a snapshot's, which holds it shared (``PostgresJournal/claimWriter(_:)``).
    static func connect(_ connectionString: String, writer: Bool = true) throws(StoreError) -> PostgresJournal {
        try connect(connectionString) { connection throws(PostgresStoreError) in
            if writer {
                try PostgresJournal.claimWriter(connection)
            } else {
                try PostgresJournal.joinWriter(connection)
            }
            return try PostgresJournal(connection: connection)
        }
    }

    /// Opens the journal and reads what the engine is rebuilt from.
    public static func open(
        _ connectionString: String,
        snapshotAfterBytes: Int
    ) throws(StoreError) -> (PostgresStore, Recovery) {
        let journal = try connect(connectionString)
        let recovery: Recovery
        do {
            recovery = try journal.recover()
        } catch {
            throw StoreError("PostgreSQL: \(error)")
        }
        let store = PostgresStore(connectionString, journal, snapshotAfterBytes: snapshotAfterBytes)
        store.bytesSinceSnapshot = recovery.records.reduce(0) { $0 + $1.payload.count }
        return (store, recovery)
    }

    private init(_ connectionString: String, _ journal: PostgresJournal, snapshotAfterBytes: Int) {
        self.connectionString = connectionString
        self.journal = journal
        self.snapshotAfterBytes = snapshotAfterBytes
        self.highestSequence = journal.lastSequence
    }

    public func append(_ entry: JournalEntry, key: CommandKey?) throws(StoreError) {
        guard let journal else { throw StoreError("PostgreSQL is not connected", transient: true) }
        let payload = entry.encode(key: key)
        highestSequence = journal.append(type: entry.kind.rawValue, payload: payload)
        bytesSinceSnapshot += payload.count
    }

    public func commit() throws(StoreError) -> Int64? {
        guard let journal, journal.pendingCount > 0 else { return nil }
        let before = ContinuousClock.now
        do {
            try journal.commit()
        } catch {
            self.journal = nil
            journal.connection.close()
            throw StoreError("PostgreSQL: \(error)", transient: true)
        }
        return microseconds(ContinuousClock.now - before)
    }

    public var syncWait: Int64? { nil }

    public var status: StoreStatus {
        StoreStatus(
            snapshotDue: bytesSinceSnapshot >= snapshotAfterBytes,
            bytesSinceSnapshot: bytesSinceSnapshot,
            lastSequence: highestSequence
        )
    }

    public func beginSnapshot(slot: Int) throws(StoreError) -> UInt64 {
        let covered = highestSequence
        // Memory is ahead of the database when a commit failed, or when records wait for one; the
        // detail says whether it is catching up.
        try snapshot.begin(
            covered: covered,
            bytesAtBegin: bytesSinceSnapshot,
            journal.map { $0.lastCommitted < covered } ?? true
        )
        return covered
    }

    public func writeSnapshot(_ frozen: EngineSnapshot, written: @escaping @Sendable (StoreError?) -> Void) {
        let connectionString = self.connectionString
        snapshot.write(written) { (covered, catchingUp) throws(StoreError) in
            let writer = try Self.connect(connectionString, writer: false)
            defer { writer.connection.close() }
            // Copied before the transaction begins (memory doubles meanwhile). Streaming them
            // into it (writeSnapshot's forEachEntry) was taken back while chasing lost commands
            // whose cause turned out to be elsewhere (see PostgresJournal.claimWriter); it can
            // come back, measured.
            let entries = frozen.entries
            do {
                try writer.writeSnapshot(covering: covered, entries: entries, catchingUp: catchingUp)
            } catch {
                throw StoreError("PostgreSQL: \(error)", transient: true)
            }
        }
    }

    public func completeSnapshot(writeError: StoreError?) throws(StoreError) -> UInt64 {
        let snapshot = try self.snapshot.complete(writeError: writeError)
        bytesSinceSnapshot -= snapshot.bytesAtBegin
        if journal == nil {
            // Caught up: the database holds memory's state as of the snapshot, which nothing has
            // changed since (commands were refused, and deliveries were recorded in memory only
            // while a snapshot covering them was due).
            journal = try Self.connect(connectionString)
        }
        return snapshot.covered
    }

    public func close() throws(StoreError) {
        guard let journal else { return }
        defer {
            journal.connection.close()
            self.journal = nil
        }
        _ = try commit()
    }
}
