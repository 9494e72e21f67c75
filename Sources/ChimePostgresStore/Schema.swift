import ChimePostgres

/// The tables of the journal in PostgreSQL, created and migrated by chimed itself.
///
/// `chime_schema` holds one row: the version of the schema. ``migrate(_:)`` runs, in one
/// transaction under an advisory lock (so two chimeds starting together migrate once), the
/// migrations after the database's version; a database whose version is newer than
/// ``currentVersion`` is refused, so an older chimed never writes to tables it does not know.
///
/// The tables live in the connection's `search_path` (`public` by default; a URI can say
/// `options=-csearch_path%3Dchime`).
public enum Schema {
    /// The migrations, in order: version N is the state after the first N.
    static let migrations: [[String]] = [
        // 1: the journal and its snapshots.
        [
            // A record per journaled command. `seq` is assigned by the writer (the next after the
            // last committed), not by a sequence: a gap then always means a lost record, the
            // number is known at append (as in the embedded journal), and a second writer on the
            // same journal collides on the primary key instead of interleaving.
            """
            CREATE TABLE chime_journal (
                seq bigint PRIMARY KEY CHECK (seq > 0),
                kind smallint NOT NULL CHECK (kind BETWEEN 0 AND 255),
                payload bytea NOT NULL,
                written_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            // A snapshot describes the state after the record `seq`. It is written with its chunks
            // in one transaction, which also trims the journal and older snapshots, so a snapshot
            // in the table is always complete.
            """
            CREATE TABLE chime_snapshot (
                seq bigint PRIMARY KEY CHECK (seq >= 0),
                entries bigint NOT NULL CHECK (entries >= 0),
                chunks integer NOT NULL CHECK (chunks >= 0),
                bytes bigint NOT NULL CHECK (bytes >= 0),
                written_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            // The snapshot's entries, each a big-endian UInt32 length and the bytes, in chunks of
            // about `PostgresJournal.chunkBytes`.
            """
            CREATE TABLE chime_snapshot_chunk (
                snapshot bigint NOT NULL REFERENCES chime_snapshot (seq) ON DELETE CASCADE,
                chunk integer NOT NULL CHECK (chunk >= 0),
                payload bytea NOT NULL,
                PRIMARY KEY (snapshot, chunk)
            )
            """,
        ]
    ]

    /// The schema version this code reads and writes.
    public static var currentVersion: Int { migrations.count }

    /// The advisory lock key the migration holds ("chime" in ASCII).
    static let migrationLock: Int64 = 0x63_6869_6D65

    /// Creates the tables or migrates them to ``currentVersion``.
    /// - Returns: the version the database had before (0 for an empty database).
    /// - Throws: `.schemaTooNew` if the database's schema is newer; `.database` if a statement failed.
    @discardableResult
    public static func migrate(_ connection: PostgresConnection) throws(PostgresStoreError) -> Int {
        try migrate(connection, to: currentVersion)
    }

    /// ``migrate(_:)`` up to `target` only: for tests, a database as an older chimed left it.
    static func migrate(_ connection: PostgresConnection, to target: Int) throws(PostgresStoreError) -> Int {
        try inTransaction(connection, "the schema's migration") { () throws(PostgresStoreError) in
            .commit(try migrateLocked(connection, to: target))
        }
    }

    /// The database's schema version, 0 when there is none.
    public static func version(_ connection: PostgresConnection) throws(PostgresStoreError) -> Int {
        do {
            let exists = try connection.execute("SELECT to_regclass('chime_schema') IS NOT NULL").rows.first?.text(0)
            guard exists == "t" else { return 0 }
            let row = try connection.execute("SELECT version FROM chime_schema").rows.first
            return try row.map { row throws(PostgresError) in Int(try row.int64(0)) } ?? 0
        } catch {
            throw PostgresStoreError(error, while: "reading the schema version")
        }
    }

    private static func migrateLocked(
        _ connection: PostgresConnection,
        to target: Int
    ) throws(PostgresStoreError) -> Int {
        let version: Int
        do {
            try connection.execute("SELECT pg_advisory_xact_lock($1)", [.integer(migrationLock)])
            try connection.execute(
                """
                CREATE TABLE IF NOT EXISTS chime_schema (
                    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                    version integer NOT NULL,
                    migrated_at timestamptz NOT NULL DEFAULT now()
                )
                """
            )
            let found = try connection.execute("SELECT version FROM chime_schema").rows.first
            version = try found.map { row throws(PostgresError) in Int(try row.int64(0)) } ?? 0
        } catch {
            throw PostgresStoreError(error, while: "reading the schema version")
        }
        guard version <= currentVersion else {
            throw PostgresStoreError(
                .schemaTooNew,
                "the database's Chime schema is version \(version), newer than this chimed's \(currentVersion): "
                    + "a newer chimed migrated it; run that version (or newer)"
            )
        }
        if version >= target { return version }
        do {
            for migration in migrations[version..<target] {
                for statement in migration {
                    try connection.execute(statement)
                }
            }
            try connection.execute(
                """
                INSERT INTO chime_schema (version) VALUES ($1)
                ON CONFLICT (singleton) DO UPDATE SET version = excluded.version, migrated_at = now()
                """,
                [.integer(target)]
            )
        } catch {
            throw PostgresStoreError(error, while: "migrating the schema from version \(version)")
        }
        return version
    }
}
