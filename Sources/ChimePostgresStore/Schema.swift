import ChimePostgres

/// The tables of the journal in PostgreSQL, created and migrated by chimed itself: migration 1 has
/// ``PostgresJournal``'s, migration 2 ``SlotStore``'s (slots, leases, members, and a journal and
/// snapshots per slot).
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
        ],
        // 2: slots, for many workers on one store (SlotStore). Devices map to a fixed number of
        // slots; each slot has a journal and snapshots of its own, and a lease that says which
        // worker may write them. Every time is the database's (`now()`), so the workers' clocks
        // do not matter.
        [
            // One row: the number of slots, fixed when the store is created (devices map to slots
            // by it: `crc32(deviceId) mod slot_count`).
            """
            CREATE TABLE chime_cluster (
                singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
                slot_count integer NOT NULL CHECK (slot_count BETWEEN 1 AND 65536),
                created_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            // Membership: each worker's row says it is alive until `expires_at`; a heartbeat moves
            // that on. `instance` tells two runs of the same worker apart (`started_at` is the
            // current one's first heartbeat); `leaving` says it is handing its slots over.
            """
            CREATE TABLE chime_worker (
                worker text PRIMARY KEY,
                instance text NOT NULL,
                expires_at timestamptz NOT NULL,
                leaving boolean NOT NULL DEFAULT false,
                started_at timestamptz NOT NULL DEFAULT now()
            )
            """,
            // A lease per slot, created with the cluster's row. A worker owns a slot while it is
            // `owner` and `expires_at` is ahead; a taker increments `epoch`, and every write to the
            // slot's journal or snapshots checks the epoch it was given in the same transaction
            // (with the row locked FOR SHARE, so that a taker's UPDATE waits for it): a worker
            // that lost the lease writes nothing more. A free slot has no owner.
            """
            CREATE TABLE chime_lease (
                slot integer PRIMARY KEY CHECK (slot >= 0),
                owner text,
                epoch bigint NOT NULL DEFAULT 0 CHECK (epoch >= 0),
                expires_at timestamptz NOT NULL DEFAULT now(),
                acquired_at timestamptz
            )
            """,
            // Each slot's records, as chime_journal's: `seq` per slot, assigned by the writer (the
            // next after the slot's last committed), `epoch` the lease's it was written under. No
            // foreign key to chime_lease: its check would cost a lookup per row of every commit,
            // which is fenced by the lease anyway.
            """
            CREATE TABLE chime_slot_journal (
                slot integer NOT NULL CHECK (slot >= 0),
                seq bigint NOT NULL CHECK (seq > 0),
                kind smallint NOT NULL CHECK (kind BETWEEN 0 AND 255),
                payload bytea NOT NULL,
                epoch bigint NOT NULL CHECK (epoch > 0),
                written_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (slot, seq)
            )
            """,
            // Each slot's snapshots, as chime_snapshot's: the state of the slot after its record
            // `seq`, written (by the lease's owner at `epoch`) with its chunks in one transaction
            // that also trims the slot's journal and older snapshots.
            """
            CREATE TABLE chime_slot_snapshot (
                slot integer NOT NULL CHECK (slot >= 0),
                seq bigint NOT NULL CHECK (seq >= 0),
                entries bigint NOT NULL CHECK (entries >= 0),
                chunks integer NOT NULL CHECK (chunks >= 0),
                bytes bigint NOT NULL CHECK (bytes >= 0),
                epoch bigint NOT NULL CHECK (epoch > 0),
                written_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (slot, seq)
            )
            """,
            // A slot snapshot's entries, as chime_snapshot_chunk's.
            """
            CREATE TABLE chime_slot_snapshot_chunk (
                slot integer NOT NULL,
                snapshot bigint NOT NULL,
                chunk integer NOT NULL CHECK (chunk >= 0),
                payload bytea NOT NULL,
                PRIMARY KEY (slot, snapshot, chunk),
                FOREIGN KEY (slot, snapshot) REFERENCES chime_slot_snapshot (slot, seq) ON DELETE CASCADE
            )
            """,
        ],
        // Version 3: routing by slot (chimed --routing slot). The workers share one MQTT shared
        // subscription; its group is named after a secret of the store, so that no client that does
        // not know it can join the group and take a share of every device's commands.
        [
            """
            ALTER TABLE chime_cluster ADD COLUMN share_group text NOT NULL
                DEFAULT replace(gen_random_uuid()::text, '-', '')
            """
        ],
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
