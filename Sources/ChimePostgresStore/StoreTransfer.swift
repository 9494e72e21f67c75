import ChimeCore
import ChimeJournal
import ChimePostgres

/// Moving a worker's state between its two stores, and checking one (`chime journal export`,
/// `import` and `verify`): the state is replayed as chimed's start-up does and written as the
/// first snapshot of the other store, which is then read back and replayed again.
public enum StoreTransfer {
    /// What was read and written.
    public struct Report: Sendable, CustomStringConvertible {
        public var snapshotEntries: Int
        public var records: Int
        public var notifications: Int
        public var devices: Int

        /// What `recovery` held, and the state `engine` (replayed from it, or written from it) holds.
        init(_ recovery: Recovery, _ engine: Engine) {
            snapshotEntries = recovery.snapshot?.count ?? 0
            records = recovery.records.count
            notifications = engine.pendingCount
            devices = engine.deviceCount
        }

        public var description: String {
            "\(snapshotEntries) snapshot entries and \(records) records: \(notifications) notifications on "
                + "\(devices) devices"
        }
    }

    /// Why a transfer or a check failed.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var message: String
        init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    /// Writes the state of the data directory `directory` (chimed stopped) into the empty
    /// PostgreSQL database `uri`, and checks that the database replays to it.
    public static func export(directory: String, to uri: String) throws(Failure) -> Report {
        let recovery: Recovery
        let engine: Engine
        do {
            recovery = try JournalTools.read(directory: directory)
            engine = try Engine.replaying(recovery, directory: directory)
        } catch {
            throw Failure("\(directory) cannot be replayed: \(error.message)")
        }
        let journal = try open(uri)
        defer { journal.connection.close() }
        guard journal.lastSequence == 0, (try? journal.latestSnapshot()) == nil else {
            throw Failure("the database already holds a journal: export writes only into an empty one")
        }
        let state = engine.snapshot
        let entries = state.entries
        do {
            try journal.writeSnapshot(covering: recovery.lastSequence, entries: entries, catchingUp: true)
        } catch {
            throw Failure("writing the snapshot failed: \(error)")
        }
        let (back, replayed) = try read(journal, uri)
        guard (try? back.snapshot?.loadEntries()) == SnapshotEntries(entries), back.records.isEmpty,
            Set(replayed.snapshot.deviceIds) == Set(state.deviceIds),
            replayed.pendingCount == engine.pendingCount
        else {
            throw Failure("the database does not read back as written")
        }
        return Report(recovery, replayed)
    }

    /// Writes the state the PostgreSQL database `uri` holds into a new data directory
    /// `directory` (missing or empty), and checks that the directory replays to it.
    public static func importStore(_ uri: String, to directory: String) throws(Failure) -> Report {
        let journal = try open(uri)
        defer { journal.connection.close() }
        let (recovery, engine) = try read(journal, uri)
        let written: Engine
        do {
            written = try JournalTools.writeDirectory(engine.snapshot, to: directory)
        } catch {
            throw Failure("\(error)")
        }
        guard written.pendingCount == engine.pendingCount else {
            throw Failure("\(directory) does not replay to what the database holds")
        }
        return Report(recovery, written)
    }

    /// Reads the database `uri` and replays it as chimed's start-up does.
    public static func verify(_ uri: String) throws(Failure) -> Report {
        let journal = try open(uri)
        defer { journal.connection.close() }
        let (recovery, engine) = try read(journal, uri)
        return Report(recovery, engine)
    }

    static func open(_ uri: String) throws(Failure) -> PostgresJournal {
        do {
            return try PostgresJournal(connection: PostgresConnection(uri, connectTimeout: .seconds(10)))
        } catch {
            throw Failure("\(error)")
        }
    }

    /// The snapshot and records, read in one read-only transaction (so that a chimed writing
    /// meanwhile cannot tear them), and the engine they replay to.
    static func read(_ journal: PostgresJournal, _ uri: String) throws(Failure) -> (Recovery, Engine) {
        let recovery: Recovery
        do {
            try journal.connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            defer { _ = try? journal.connection.execute("COMMIT") }
            recovery = try journal.recover()
        } catch {
            throw Failure("reading the database failed: \(error)")
        }
        do {
            return (recovery, try Engine.replaying(recovery, directory: "the database"))
        } catch {
            throw Failure("the database cannot be replayed, chimed will not start from it: \(error.message)")
        }
    }
}
