import ChimeJournal
import ChimePostgres
import ChimePostgresStore
import ChimeTestSupport
import Testing

/// The journal in PostgreSQL against a real server: each test starts its own (TestPostgres).
@Suite("PostgresJournal against a real PostgreSQL")
struct PostgresJournalTests {
    @Test("an empty database is migrated to the current schema; opening again migrates nothing")
    func migrate() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        #expect(try Schema.version(connection) == 0)
        _ = try PostgresJournal(connection: connection)
        #expect(try Schema.version(connection) == Schema.currentVersion)
        #expect(try Schema.migrate(connection) == Schema.currentVersion)
        let tables = try connection.execute(
            "SELECT table_name::text FROM information_schema.tables WHERE table_name LIKE 'chime_%' ORDER BY 1"
        ).rows.map { try $0.text(0) }
        #expect(
            tables == [
                "chime_cluster", "chime_journal", "chime_lease", "chime_schema", "chime_slot_journal",
                "chime_slot_snapshot", "chime_slot_snapshot_chunk", "chime_snapshot", "chime_snapshot_chunk",
                "chime_worker",
            ]
        )
    }

    @Test("two chimeds starting together on an empty database migrate it once")
    func concurrentMigration() async throws {
        let server = try await TestPostgres.start()
        let uri = server.uri
        let before = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<4 {
                group.addTask { try Schema.migrate(PostgresConnection(uri)) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let version = Schema.currentVersion
        #expect(before.sorted() == [0, version, version, version])
    }

    @Test("a schema newer than this chimed's is refused with a clear message, and left alone")
    func schemaTooNew() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        _ = try PostgresJournal(connection: connection)
        try connection.execute("UPDATE chime_schema SET version = 99")
        let error = #expect(throws: PostgresStoreError(.schemaTooNew)) { try PostgresJournal(connection: connection) }
        #expect(error?.message.contains("version 99, newer than this chimed's \(Schema.currentVersion)") == true)
        #expect(connection.transactionStatus == .idle)
        #expect(try Schema.version(connection) == 99)
    }

    /// One INSERT, and more records than one INSERT takes (several in the transaction).
    @Test(
        "records appended together are committed in one transaction and read back in order",
        arguments: [2500, PostgresJournal.recordsPerInsert * 2 + 1]
    )
    func groupCommit(count: Int) async throws {
        let server = try await TestPostgres.start()
        let journal = try PostgresJournal(connection: PostgresConnection(server.uri))
        var generator = SplitMix64(seed: 15)
        let payloads = (0..<count).map { index in
            (0..<generator.below(300)).map { _ in UInt8(truncatingIfNeeded: generator.next()) } + [
                0, UInt8(index % 256),
            ]
        }
        for (index, payload) in payloads.enumerated() {
            #expect(journal.append(type: UInt8(index % 7), payload: payload) == UInt64(index + 1))
        }
        #expect(journal.pendingCount == count)
        #expect(journal.lastCommitted == 0)
        try journal.commit()
        #expect(journal.pendingCount == 0)
        #expect(journal.lastCommitted == UInt64(count))

        // One transaction: every row was written by the same transaction id.
        let transactions = try journal.connection.execute("SELECT count(DISTINCT xmin::text) FROM chime_journal")
        #expect(try transactions.rows.first?.int64(0) == 1)

        let all = try journal.recover()
        #expect(all.snapshot == nil)
        #expect(all.lastSequence == UInt64(count))
        #expect(all.records.map(\.sequence) == Array(1...UInt64(count)))
        #expect(all.records.map(\.payload) == payloads)
        #expect(all.records.map(\.type) == (0..<count).map { UInt8($0 % 7) })
        let page = try journal.records(after: 1000, limit: 10)
        #expect(page.map(\.sequence) == Array(1001...1010))

        // Reopened, the journal continues after the last committed record.
        let reopened = try PostgresJournal(connection: PostgresConnection(server.uri))
        #expect(reopened.lastSequence == UInt64(count))
        #expect(reopened.append(type: 1, payload: []) == UInt64(count) + 1)
    }

    @Test("a failed commit leaves nothing of its records, and the journal must be opened again")
    func failedCommit() async throws {
        let server = try await TestPostgres.start()
        let first = try PostgresJournal(connection: PostgresConnection(server.uri))
        let second = try PostgresJournal(connection: PostgresConnection(server.uri))
        second.append(type: 1, payload: [2])
        try second.commit()

        // The first writer does not know of the second: its records collide on the sequence.
        first.append(type: 1, payload: [1])
        first.append(type: 1, payload: [1])
        let error = #expect(throws: PostgresStoreError(.database)) { try first.commit() }
        #expect(error?.underlying?.sqlState == SQLState.uniqueViolation)
        #expect(first.pendingCount == 0)
        #expect(throws: PostgresStoreError(.broken)) { try first.commit() }
        #expect(try second.recover().records.map(\.payload) == [[2]])
    }

    @Test("a commit when the server was killed fails, and the uncommitted records are gone after restart")
    func serverKilled() async throws {
        let server = try await TestPostgres.start()
        let journal = try PostgresJournal(connection: PostgresConnection(server.uri))
        journal.append(type: 1, payload: [1])
        try journal.commit()
        journal.append(type: 1, payload: [2])
        await server.kill()
        let error = #expect(throws: PostgresStoreError(.database)) { try journal.commit() }
        #expect(error?.underlying?.isConnectionUsable == false)
        try await server.restart()
        let recovered = try PostgresJournal(connection: PostgresConnection(server.uri)).recover()
        #expect(recovered.records.map(\.payload) == [[1]])
    }

    @Test("a snapshot trims the journal before it; recovery is the snapshot plus the records after it")
    func snapshot() async throws {
        let server = try await TestPostgres.start()
        let journal = try PostgresJournal(connection: PostgresConnection(server.uri))
        for index in 1...100 {
            journal.append(type: 2, payload: [UInt8(index)])
        }
        try journal.commit()

        var generator = SplitMix64(seed: 60)
        var entries = (0..<3000).map { _ in
            (0..<generator.below(200)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        }
        entries.insert([], at: 10)
        entries.insert([UInt8](repeating: 0, count: 3 << 20), at: 1500)  // larger than a chunk, mid-snapshot
        try journal.writeSnapshot(covering: 60, entries: entries)

        let counts = try journal.connection.execute(
            "SELECT (SELECT count(*) FROM chime_snapshot), (SELECT count(*) FROM chime_snapshot_chunk), "
                + "(SELECT min(seq) FROM chime_journal)"
        ).rows.first
        #expect(try counts?.int64(0) == 1)
        #expect(try (counts?.int64(1) ?? 0) >= 2)
        #expect(try counts?.int64(2) == 61)

        let recovered = try PostgresJournal(connection: PostgresConnection(server.uri)).recover()
        #expect(recovered.snapshot?.sequence == 60)
        #expect(try recovered.snapshot?.loadEntries().map { Array($0) } == entries)
        #expect(recovered.records.map(\.sequence) == Array(61...100))
        #expect(recovered.lastSequence == 100)

        // A newer snapshot replaces the older one and empties the journal; recovery still knows
        // where the sequence is.
        try journal.writeSnapshot(covering: 100, entries: [[1], [2]])
        let after = try PostgresJournal(connection: PostgresConnection(server.uri))
        let last = try after.recover()
        #expect(last.snapshot?.sequence == 100)
        #expect(try last.snapshot?.loadEntries() == SnapshotEntries([[1], [2]]))
        #expect(last.records.isEmpty)
        #expect(after.lastSequence == 100)
        #expect(after.append(type: 1, payload: []) == 101)

        // Not beyond what was committed.
        journal.append(type: 1, payload: [])
        #expect(throws: PostgresStoreError(.invalidArgument)) { try journal.writeSnapshot(covering: 101, entries: []) }
        #expect(journal.connection.transactionStatus == .idle)
        #expect(try journal.latestSnapshot()?.sequence == 100)
    }
}
