import ChimeCore
import ChimeJournal
import ChimePostgres
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

@testable import ChimePostgresStore

/// The slot store against a real PostgreSQL: each test starts its own server (TestPostgres).
@Suite("SlotStore against a real PostgreSQL")
struct SlotStoreTests {
    @Test("a store is created with its number of slots; another number is refused, nil takes the store's")
    func slotCount() async throws {
        let server = try await TestPostgres.start()
        let store = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 64)
        #expect(store.slotCount == 64)
        let leases = try store.leases()
        #expect(leases.map(\.slot) == Array(0..<64))
        #expect(leases.allSatisfy { $0.owner == nil && $0.epoch == 0 && $0.expiresInMilliseconds <= 0 })

        // Another worker on the same database sees the same slots, given them or not.
        #expect(try SlotStore(connection: PostgresConnection(server.uri), slotCount: nil).slotCount == 64)
        #expect(try SlotStore(connection: PostgresConnection(server.uri), slotCount: 64).slotCount == 64)
        let error = #expect(throws: PostgresStoreError(.slotCountMismatch)) {
            try SlotStore(connection: PostgresConnection(server.uri), slotCount: 256)
        }
        #expect(error?.message == "the store has 64 slots; --slots 256 was given")
        #expect(try store.leases().count == 64)

        for count in [0, 65537] {
            #expect(throws: PostgresStoreError(.invalidArgument)) {
                try SlotStore(connection: PostgresConnection(server.uri), slotCount: count)
            }
        }
    }

    @Test("a new store has 256 slots by default; workers creating it together create it once")
    func concurrentCreation() async throws {
        let server = try await TestPostgres.start()
        let uri = server.uri
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<4 {
                group.addTask { try SlotStore(connection: PostgresConnection(uri), slotCount: nil).slotCount }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(counts == Array(repeating: SlotStore.defaultSlotCount, count: 4))
        let rows = try PostgresConnection(uri).execute(
            "SELECT (SELECT count(*) FROM chime_cluster), (SELECT count(*) FROM chime_lease)"
        ).rows.first
        #expect(try rows?.int64(0) == 1)
        #expect(try rows?.int64(1) == Int64(SlotStore.defaultSlotCount))
    }

    @Test("a database an older chimed left at version 1 is migrated, and its journal kept")
    func upgradeFromVersion1() async throws {
        let server = try await TestPostgres.start()
        let connection = try PostgresConnection(server.uri)
        #expect(try Schema.migrate(connection, to: 1) == 0)
        try connection.execute("INSERT INTO chime_journal (seq, kind, payload) VALUES (1, 2, '\\x0304')")
        #expect(try Schema.version(connection) == 1)

        let store = try SlotStore(connection: connection, slotCount: 8)
        #expect(store.slotCount == 8)
        #expect(try Schema.version(connection) == Schema.currentVersion)
        let journal = try PostgresJournal(connection: connection).recover()
        #expect(journal.records == [JournalRecord(sequence: 1, type: 2, payload: [3, 4])])
    }

    @Test("the store names the workers' shared subscription group with a secret of its own, the same for all")
    func shareGroup() async throws {
        let server = try await TestPostgres.start()
        let first = try SlotStore(connection: try PostgresConnection(server.uri), slotCount: 8)
        let second = try SlotStore(connection: try PostgresConnection(server.uri), slotCount: nil)
        #expect(first.shareGroup == second.shareGroup)
        #expect(first.shareGroup.wholeMatch(of: /chimed-[0-9a-f]{32}/) != nil, "\(first.shareGroup)")
        // Another store, another secret.
        let other = try await TestPostgres.start()
        let elsewhere = try SlotStore(connection: try PostgresConnection(other.uri), slotCount: 8)
        #expect(elsewhere.shareGroup != first.shareGroup)
        await server.stop()
        await other.stop()
    }

    @Test("a device's slot is the CRC-32 of its UTF-8 modulo the slots, as --partition's")
    func slotOfDevice() throws {
        // zlib's crc32("123456789") is 0xCBF43926.
        #expect(SlotStore.slot(of: "123456789", slotCount: 256) == 0x26)
        #expect(SlotStore.slot(of: "123456789", slotCount: 1) == 0)
        for device in ["kitchen", "ü-device", "", "a/b", "phone-42"] {
            let slot = SlotStore.slot(of: device, slotCount: 64)
            #expect((0..<64).contains(slot))
            #expect(Partition(index: UInt32(slot), count: 64).owns(device))
        }
    }

    @Test("heartbeats: every live member, sorted; one whose heartbeat expired or who left is gone")
    func membership() async throws {
        let server = try await TestPostgres.start()
        let store = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 4)

        let first = try store.heartbeat(worker: "w2", instance: "boot-1", ttl: .seconds(1))
        #expect(first.map(\.worker) == ["w2"])
        let both = try store.heartbeat(worker: "w1", instance: "boot-9", ttl: .seconds(60), leaving: true)
        try #require(both.map(\.worker) == ["w1", "w2"])
        #expect(both[0].instance == "boot-9" && both[0].leaving)
        #expect(both[0].expiresInMilliseconds > 50_000)
        #expect(both[1].instance == "boot-1" && !both[1].leaving)

        // w2 stops beating: it expires, by the database's clock.
        let expired = try await eventually {
            try store.heartbeat(worker: "w1", instance: "boot-9", ttl: .seconds(60)).map(\.worker) == ["w1"]
        }
        #expect(expired)
        // Back, as another instance.
        let back = try store.heartbeat(worker: "w2", instance: "boot-2", ttl: .seconds(60))
        try #require(back.map(\.worker) == ["w1", "w2"])
        #expect(back[0].leaving == false)
        #expect(back[1].instance == "boot-2")

        try store.deregister(worker: "w1")
        #expect(try store.heartbeat(worker: "w2", instance: "boot-2", ttl: .seconds(60)).map(\.worker) == ["w2"])
        // Workers killed long ago (a Deployment's old pods) are deleted by the next heartbeat;
        // those expired within the day stay.
        let rows = try PostgresConnection(server.uri)
        defer { rows.close() }
        _ = try rows.execute(
            """
            INSERT INTO chime_worker (worker, instance, expires_at) VALUES
                ('old-pod', 'i', now() - interval '25 hours'), ('recent-pod', 'i', now() - interval '1 hour')
            """
        )
        _ = try store.heartbeat(worker: "w2", instance: "boot-2", ttl: .seconds(60))
        let left = try rows.execute("SELECT worker FROM chime_worker ORDER BY worker").rows.map { try $0.text(0) }
        #expect(left == ["recent-pod", "w2"])
        #expect(throws: PostgresStoreError(.invalidArgument)) {
            try store.heartbeat(worker: "w2", instance: "boot-2", ttl: .zero)
        }
    }

    @Test(
        "acquire takes free and expired slots and its own again (the epoch one more), not others' held ones; renew keeps what is still held"
    )
    func leases() async throws {
        let server = try await TestPostgres.start()
        let a = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 16)
        let b = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 16)

        #expect(try a.acquire([1, 2, 2], worker: "a", ttl: .seconds(60)) == [1: 1, 2: 1])
        #expect(try b.acquire([2, 3], worker: "b", ttl: .seconds(60)) == [3: 1])
        #expect(try b.acquire([1], worker: "b", ttl: .seconds(60)) == [:])
        // Its owner takes it again (a restart, or slots dropped after a failure): the next epoch,
        // which fences off whatever the earlier holder still tries to write.
        #expect(try a.acquire([1], worker: "a", ttl: .seconds(60)) == [1: 2])
        let held = try a.leases()[1]
        #expect(held.owner == "a" && held.epoch == 2 && held.expiresInMilliseconds > 50_000)

        // An expired lease is anyone's, with the next epoch.
        #expect(try a.acquire([5, 7], worker: "a", ttl: .seconds(1)) == [5: 1, 7: 1])
        #expect(try b.acquire([5], worker: "b", ttl: .seconds(60)) == [:])
        #expect(try await eventually { try a.leases()[5].expiresInMilliseconds <= 0 })
        #expect(try b.acquire([5], worker: "b", ttl: .seconds(60)) == [5: 2])
        #expect(try a.leases()[5].owner == "b")

        // Renew: 1 and 2 are still a's; 5 was taken; 7 expired but no one took it, so it is still a's.
        #expect(try a.leases()[7].expiresInMilliseconds <= 0)
        #expect(try a.renew([1: 2, 2: 1, 5: 1, 7: 1], worker: "a", ttl: .seconds(60)) == [1, 2, 7])
        #expect(try a.leases()[7].expiresInMilliseconds > 50_000)
        let taken = try a.leases()[5]
        #expect(taken.owner == "b" && taken.epoch == 2 && taken.expiresInMilliseconds > 50_000)
        // Neither another worker's name nor a stale epoch renews.
        #expect(try b.renew([1: 1], worker: "b", ttl: .seconds(60)) == [])
        #expect(try b.renew([5: 1], worker: "b", ttl: .seconds(60)) == [])

        // Release hands a slot over at once: free, expired; the next owner's epoch is one more.
        try b.release([5: 1], worker: "b")  // stale: nothing
        #expect(try a.leases()[5].owner == "b")
        try a.release([1: 2, 2: 1], worker: "a")
        let released = try a.leases()[1]
        #expect(released.owner == nil && released.epoch == 2 && released.expiresInMilliseconds <= 0)
        #expect(try b.acquire([1], worker: "b", ttl: .seconds(60)) == [1: 3])
        #expect(try a.renew([1: 2], worker: "a", ttl: .seconds(60)) == [])

        #expect(throws: PostgresStoreError(.invalidArgument)) { try a.acquire([16], worker: "a", ttl: .seconds(1)) }
        #expect(throws: PostgresStoreError(.invalidArgument)) { try a.acquire([-1], worker: "a", ttl: .seconds(1)) }
        #expect(throws: PostgresStoreError(.invalidArgument)) { try a.acquire([3], worker: "a", ttl: .seconds(-1)) }
        #expect(throws: PostgresStoreError(.invalidArgument)) {
            try a.acquire([3], worker: "a", ttl: .seconds(Int64.max))
        }
    }

    @Test("workers acquiring the same slots together each get some, and every slot goes to one of them")
    func concurrentAcquire() async throws {
        let server = try await TestPostgres.start()
        let uri = server.uri
        _ = try SlotStore(connection: PostgresConnection(uri), slotCount: 32)
        let taken = try await withThrowingTaskGroup(of: [Int: Int64].self) { group in
            for worker in 0..<4 {
                group.addTask {
                    let store = try SlotStore(connection: PostgresConnection(uri), slotCount: 32)
                    return try store.acquire(Array(0..<32).shuffled(), worker: "w\(worker)", ttl: .seconds(60))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(taken.map(\.count).reduce(0, +) == 32)
        #expect(Set(taken.flatMap(\.keys)) == Set(0..<32))
        #expect(taken.allSatisfy { $0.values.allSatisfy { $0 == 1 } })
    }

    @Test("each slot has its own sequence; a commit writes every slot's records in one statement; open reads them back")
    func perSlotJournals() async throws {
        let server = try await TestPostgres.start(.init(settings: ["log_statement": "all"]))
        let store = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        let fence = try store.acquire([1, 2, 3], worker: "a", ttl: .seconds(60))
        for slot in [1, 2, 3] {
            let empty = try store.open(slot: slot)
            #expect(empty.snapshot == nil && empty.records.isEmpty && empty.lastSequence == 0)
        }
        #expect(store.append(slot: 1, type: 1, payload: [1, 1]) == 1)
        #expect(store.append(slot: 2, type: 2, payload: [2, 1]) == 1)
        #expect(store.append(slot: 1, type: 1, payload: [1, 2]) == 2)
        #expect(store.append(slot: 1, type: 1, payload: []) == 3)
        #expect(store.append(slot: 2, type: 2, payload: [2, 2]) == 2)
        #expect(store.pendingCount == 5)
        #expect(store.lastCommitted(slot: 1) == 0)
        #expect(store.lastCommitted(slot: 4) == nil)

        let marker = "SELECT 'before the commit'"
        try store.connection.execute(marker)
        #expect(try store.commit(fence: fence, worker: "a") == [])
        try store.connection.execute("SELECT 'after the commit'")
        #expect(store.pendingCount == 0)
        #expect(store.lastCommitted(slot: 1) == 3)
        #expect(store.lastCommitted(slot: 2) == 2)
        #expect(store.lastCommitted(slot: 3) == 0)
        #expect(try store.commit(fence: fence, worker: "a") == [])  // nothing pending: nothing sent

        // The fast path: one statement, no BEGIN or COMMIT, one transaction.
        let statements = try await loggedStatements(server, between: "before the commit", and: "after the commit")
        #expect(statements.count == 1)
        #expect(statements.first?.contains("WITH held AS") == true)
        let rows = try store.connection.execute(
            "SELECT count(DISTINCT xmin::text), min(epoch), max(epoch), count(*) FROM chime_slot_journal"
        ).rows.first
        #expect(try rows?.int64(0) == 1)
        #expect(try rows?.int64(1) == 1 && rows?.int64(2) == 1 && rows?.int64(3) == 5)

        // A snapshot of slot 1 at 2 (on a second store, as a worker does) trims slot 1 only.
        let snapshots = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        #expect(try snapshots.writeSnapshot(slot: 1, covering: 2, epoch: 1, worker: "a", entries: [[9], [8, 7]]))
        #expect(store.append(slot: 1, type: 1, payload: [1, 4]) == 4)
        #expect(store.append(slot: 3, type: 3, payload: [3, 1]) == 1)
        #expect(try store.commit(fence: fence, worker: "a") == [])

        let other = try SlotStore(connection: PostgresConnection(server.uri), slotCount: nil)
        let one = try other.open(slot: 1)
        #expect(one.snapshot?.sequence == 2)
        #expect(try one.snapshot?.loadEntries() == SnapshotEntries([[9], [8, 7]]))
        #expect(
            one.records == [
                JournalRecord(sequence: 3, type: 1, payload: []), JournalRecord(sequence: 4, type: 1, payload: [1, 4]),
            ]
        )
        #expect(one.lastSequence == 4)
        let two = try other.open(slot: 2)
        #expect(two.snapshot == nil)
        #expect(two.records.map(\.payload) == [[2, 1], [2, 2]])
        #expect(try other.open(slot: 3).records.map(\.payload) == [[3, 1]])
        #expect(try other.open(slot: 0).lastSequence == 0)
        #expect(other.lastCommitted(slot: 1) == 4)
        #expect(other.append(slot: 1, type: 1, payload: []) == 5)

        // A snapshot that covers the whole slot: open knows where its sequence is.
        #expect(try snapshots.writeSnapshot(slot: 2, covering: 2, epoch: 1, worker: "a", entries: []))
        let trimmed = try other.open(slot: 2)
        #expect(trimmed.snapshot?.sequence == 2 && trimmed.records.isEmpty && trimmed.lastSequence == 2)
        #expect(throws: PostgresStoreError(.invalidArgument)) {
            try snapshots.writeSnapshot(slot: 2, covering: 3, epoch: 1, worker: "a", entries: [])
        }
        #expect(snapshots.connection.transactionStatus == .idle)
        #expect(throws: PostgresStoreError(.invalidArgument)) { try other.open(slot: 8) }

        // Forgetting a slot drops its pending records.
        other.append(slot: 3, type: 3, payload: [])
        #expect(other.pendingCount == 2)
        other.forget(slot: 3)
        #expect(other.pendingCount == 1)
        #expect(other.lastCommitted(slot: 3) == nil)
    }

    @Test("fencing: a worker whose lease was taken commits nothing more for that slot, and the rest of its commit")
    func fencedCommit() async throws {
        let server = try await TestPostgres.start()
        let a = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        let b = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        var fence = try a.acquire([3], worker: "a", ttl: .milliseconds(300))
        fence.merge(try a.acquire([4], worker: "a", ttl: .seconds(60))) { $1 }
        #expect(fence == [3: 1, 4: 1])
        _ = try a.open(slot: 3)
        _ = try a.open(slot: 4)
        a.append(slot: 3, type: 1, payload: [1])
        a.append(slot: 4, type: 1, payload: [1])
        #expect(try a.commit(fence: fence, worker: "a") == [])

        // a is paused past its lease of slot 3; b takes it.
        a.append(slot: 3, type: 1, payload: [2])
        a.append(slot: 3, type: 1, payload: [3])
        a.append(slot: 4, type: 1, payload: [2])
        #expect(try await eventually { try b.leases()[3].expiresInMilliseconds <= 0 })
        #expect(try b.acquire([3], worker: "b", ttl: .seconds(60)) == [3: 2])
        let taken = try b.open(slot: 3)
        #expect(taken.records.map(\.payload) == [[1]])

        #expect(try a.commit(fence: fence, worker: "a") == [3])
        #expect(a.pendingCount == 0)
        #expect(a.lastCommitted(slot: 3) == 1)
        #expect(a.lastCommitted(slot: 4) == 2)
        let sql = b.connection
        let afterTaken = try sql.execute(
            "SELECT count(*) FROM chime_slot_journal WHERE slot = 3 AND epoch = 1 AND seq > 1"
        )
        #expect(try afterTaken.rows.first?.int64(0) == 0)
        let slot4 = try sql.execute("SELECT seq, epoch FROM chime_slot_journal WHERE slot = 4 ORDER BY seq").rows
        #expect(try slot4.map { [try $0.int64(0), try $0.int64(1)] } == [[1, 1], [2, 1]])

        // A slot missing from the fence is lost too.
        a.append(slot: 4, type: 1, payload: [3])
        #expect(try a.commit(fence: [:], worker: "a") == [4])
        #expect(a.lastCommitted(slot: 4) == 2)

        // The new owner continues after what it read.
        #expect(b.append(slot: 3, type: 1, payload: [9]) == 2)
        #expect(try b.commit(fence: [3: 2], worker: "b") == [])
        let slot3 = try sql.execute("SELECT seq, epoch FROM chime_slot_journal WHERE slot = 3 ORDER BY seq").rows
        #expect(try slot3.map { [try $0.int64(0), try $0.int64(1)] } == [[1, 1], [2, 2]])
        #expect(try b.open(slot: 4).records.count == 2)
    }

    @Test("an acquisition of a slot whose commit is in flight waits for that commit, then sees its records")
    func commitLocksTheLease() async throws {
        let server = try await TestPostgres.start()
        let uri = server.uri
        let a = try SlotStore(connection: PostgresConnection(uri), slotCount: 8)
        let observer = try PostgresConnection(uri)
        let fence = try a.acquire([3], worker: "a", ttl: .milliseconds(300))
        _ = try a.open(slot: 3)
        #expect(try await eventually { try a.leases()[3].expiresInMilliseconds <= 0 })

        // a's commit statement runs in a transaction the test keeps open: its lock stays.
        try a.connection.begin()
        a.append(slot: 3, type: 1, payload: [1])
        #expect(try a.commit(fence: fence, worker: "a") == [])
        let log = EventLog()
        let acquisition = onThread {
            let b = try SlotStore(connection: PostgresConnection(uri), slotCount: nil)
            let taken = try b.acquire([3], worker: "b", ttl: .seconds(60))
            log.record("b acquired")
            return (taken, try b.open(slot: 3).records.map(\.payload))
        }
        #expect(try await waitsForALock(observer, like: "UPDATE chime_lease%"))
        log.record("b waits")
        log.record("a commits")
        try a.connection.commit()
        let (taken, records) = try await acquisition()
        #expect(log.events == ["b waits", "a commits", "b acquired"])
        #expect(taken == [3: 2])
        #expect(records == [[1]])
    }

    @Test("a commit that meets an acquisition in flight waits for it, then finds the lease taken and writes nothing")
    func commitWaitsForAnAcquisition() async throws {
        let server = try await TestPostgres.start()
        let uri = server.uri
        let b = try SlotStore(connection: PostgresConnection(uri), slotCount: 8)
        let observer = try PostgresConnection(uri)
        #expect(try b.acquire([3], worker: "a", ttl: .milliseconds(300)) == [3: 1])
        #expect(try await eventually { try b.leases()[3].expiresInMilliseconds <= 0 })

        // b's acquisition runs in a transaction the test keeps open.
        try b.connection.begin()
        #expect(try b.acquire([3], worker: "b", ttl: .seconds(60)) == [3: 2])
        let log = EventLog()
        let commit = onThread {
            let a = try SlotStore(connection: PostgresConnection(uri), slotCount: nil)
            _ = try a.open(slot: 3)
            a.append(slot: 3, type: 1, payload: [1])
            let lost = try a.commit(fence: [3: 1], worker: "a")
            log.record("a committed")
            return lost
        }
        #expect(try await waitsForALock(observer, like: "WITH held AS%"))
        log.record("a waits")
        log.record("b commits")
        try b.connection.commit()
        #expect(try await commit() == [3])
        #expect(log.events == ["a waits", "b commits", "a committed"])
        let rows = try observer.execute("SELECT count(*) FROM chime_slot_journal").rows
        #expect(try rows.first?.int64(0) == 0)
    }

    @Test("a snapshot by a worker that lost the lease, before or while it writes, writes nothing")
    func fencedSnapshot() async throws {
        let server = try await TestPostgres.start()
        let a = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        let snapshots = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        let b = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        let fence = try a.acquire([2, 5], worker: "a", ttl: .milliseconds(300))
        for slot in [2, 5] {
            _ = try a.open(slot: slot)
            a.append(slot: slot, type: 1, payload: [1])
            a.append(slot: slot, type: 1, payload: [2])
        }
        #expect(try a.commit(fence: fence, worker: "a") == [])
        // Held (expired, but not taken): written.
        #expect(try await eventually { try a.leases()[5].expiresInMilliseconds <= 0 })
        #expect(try snapshots.writeSnapshot(slot: 2, covering: 1, epoch: 1, worker: "a", entries: [[1]]))

        // Taken before: refused at once; the entries are not even read.
        #expect(try b.acquire([2], worker: "b", ttl: .seconds(60)) == [2: 2])
        var read = false
        let before = try snapshots.writeSnapshot(slot: 2, covering: 2, epoch: 1, worker: "a") {
            _ throws(PostgresStoreError) in
            read = true
        }
        #expect(!before && !read)

        // Taken while the snapshot is written: rolled back.
        var taken: [Int: Int64] = [:]
        let during = try snapshots.writeSnapshot(slot: 5, covering: 2, epoch: 1, worker: "a") {
            body throws(PostgresStoreError) in
            try body([7])
            taken = try b.acquire([5], worker: "b", ttl: .seconds(60))
            try body([8])
        }
        #expect(taken == [5: 2])
        #expect(!during)
        #expect(snapshots.connection.transactionStatus == .idle)

        let rows = try b.connection.execute(
            "SELECT (SELECT count(*) FROM chime_slot_snapshot WHERE epoch = 1 AND NOT (slot = 2 AND seq = 1)), "
                + "(SELECT count(*) FROM chime_slot_snapshot_chunk WHERE slot = 5), "
                + "(SELECT count(*) FROM chime_slot_journal WHERE slot = 5)"
        ).rows.first
        #expect(try rows?.int64(0) == 0)
        #expect(try rows?.int64(1) == 0)
        #expect(try rows?.int64(2) == 2)
        let slot2 = try b.open(slot: 2)
        #expect(slot2.snapshot?.sequence == 1)
        #expect(try slot2.snapshot?.loadEntries() == SnapshotEntries([[1]]))
        #expect(slot2.records.map(\.sequence) == [2])
        #expect(try b.open(slot: 5).snapshot == nil)
    }

    @Test("a commit whose connection was terminated throws, writes nothing, and leaves the store broken")
    func terminatedConnection() async throws {
        let server = try await TestPostgres.start()
        let a = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        let fence = try a.acquire([1], worker: "a", ttl: .seconds(60))
        _ = try a.open(slot: 1)
        a.append(slot: 1, type: 1, payload: [1])
        #expect(try a.commit(fence: fence, worker: "a") == [])
        let pid = try a.connection.execute("SELECT pg_backend_pid()").rows.first?.int64(0) ?? 0

        let observer = try PostgresConnection(server.uri)
        try observer.execute("SELECT pg_terminate_backend($1::integer)", [.integer(pid)])
        let gone = try await eventually {
            try observer.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = $1::integer", [.integer(pid)])
                .rows.first?.int64(0) == 0
        }
        #expect(gone)

        a.append(slot: 1, type: 1, payload: [2])
        let error = #expect(throws: PostgresStoreError(.database)) { try a.commit(fence: fence, worker: "a") }
        #expect(error?.underlying?.isConnectionUsable == false)
        #expect(a.pendingCount == 0)
        #expect(throws: PostgresStoreError(.broken)) { try a.commit(fence: fence, worker: "a") }

        let other = try SlotStore(connection: PostgresConnection(server.uri), slotCount: nil)
        #expect(try other.open(slot: 1).records.map(\.payload) == [[1]])
    }

    @Test("a commit larger than one statement is one transaction; a lost slot among it writes nothing")
    func largeCommit() async throws {
        let server = try await TestPostgres.start()
        let a = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        let b = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        var fence = try a.acquire([0, 1, 2], worker: "a", ttl: .seconds(60))
        fence.merge(try a.acquire([6], worker: "a", ttl: .milliseconds(300))) { $1 }
        let perSlot = 9_000  // 4 slots of 27,000 parameters each: two statements
        #expect(perSlot * 4 * Statement.parametersPerRecord > PostgresConnection.maximumParameters)
        var generator = SplitMix64(seed: 16)
        var payloads: [Int: [[UInt8]]] = [:]
        for slot in [0, 1, 2, 6] {
            _ = try a.open(slot: slot)
            payloads[slot] = (0..<perSlot).map { index in
                (0..<generator.below(12)).map { _ in UInt8(truncatingIfNeeded: generator.next()) } + [
                    UInt8(index % 251)
                ]
            }
            for payload in payloads[slot] ?? [] {
                a.append(slot: slot, type: UInt8(slot), payload: payload)
            }
        }
        #expect(try await eventually { try b.leases()[6].expiresInMilliseconds <= 0 })
        #expect(try b.acquire([6], worker: "b", ttl: .seconds(60)) == [6: 2])

        #expect(try a.commit(fence: fence, worker: "a") == [6])
        #expect(a.connection.transactionStatus == .idle)
        let rows = try b.connection.execute(
            "SELECT count(DISTINCT xmin::text), count(*), count(*) FILTER (WHERE slot = 6) FROM chime_slot_journal"
        ).rows.first
        #expect(try rows?.int64(0) == 1)
        #expect(try rows?.int64(1) == Int64(perSlot * 3))
        #expect(try rows?.int64(2) == 0)
        for slot in [0, 1, 2] {
            let recovered = try b.open(slot: slot)
            #expect(recovered.records.map(\.sequence) == Array(1...UInt64(perSlot)))
            #expect(recovered.records.map(\.payload) == payloads[slot])
            #expect(recovered.records.allSatisfy { $0.type == UInt8(slot) })
            #expect(a.lastCommitted(slot: slot) == UInt64(perSlot))
        }
    }

    @Test("a commit of several statements locks the leases in its last only; a slot taken before loses it all")
    func largeCommitLocksLate() async throws {
        let server = try await TestPostgres.start()
        let uri = server.uri
        let observer = try PostgresConnection(uri)
        let b = try SlotStore(connection: PostgresConnection(uri), slotCount: 8)
        // Holds slot 1's last record uncommitted, so that the commit's first statement waits for it.
        let blocker = try PostgresConnection(uri)
        try blocker.begin()
        try blocker.execute(
            "INSERT INTO chime_slot_journal (slot, seq, kind, payload, epoch) VALUES (1, 15000, 1, '\\x00', 9)"
        )
        let perSlot = 15_000  // slot 1 fills most of the first statement; slot 6 spans both
        #expect(2 * perSlot * Statement.parametersPerRecord > PostgresConnection.maximumParameters)
        let commit = onThread {
            let a = try SlotStore(connection: PostgresConnection(uri), slotCount: 8)
            var fence = try a.acquire([1], worker: "a", ttl: .seconds(60))
            fence.merge(try a.acquire([6], worker: "a", ttl: .milliseconds(300))) { $1 }
            for slot in [1, 6] {
                _ = try a.open(slot: slot)
                for index in 0..<perSlot {
                    a.append(slot: slot, type: 1, payload: [UInt8(index % 251)])
                }
            }
            while try a.leases()[6].expiresInMilliseconds > 0 { usleep(20_000) }
            let lost = try a.commit(fence: fence, worker: "a")
            return (lost, a.lastCommitted(slot: 1), a.lastCommitted(slot: 6), a.connection.transactionStatus == .idle)
        }
        #expect(try await waitsForALock(observer, like: "WITH held AS%"))

        // While the commit is in flight, its leases are not locked: b takes the expired one at once.
        try b.connection.execute("SET lock_timeout = '5s'")
        #expect(try b.acquire([6], worker: "b", ttl: .seconds(60)) == [6: 2])
        #expect(try b.open(slot: 6).records.isEmpty)
        try blocker.rollback()

        let (lost, last1, last6, idle) = try await commit()
        #expect(lost == [6])
        #expect(last1 == UInt64(perSlot))
        #expect(last6 == 0)
        #expect(idle)
        let rows = try observer.execute(
            "SELECT count(DISTINCT xmin::text), count(*) FILTER (WHERE slot = 1), count(*) FILTER (WHERE slot = 6) "
                + "FROM chime_slot_journal"
        ).rows.first
        #expect(try rows?.int64(0) == 1)
        #expect(try rows?.int64(1) == Int64(perSlot))
        #expect(try rows?.int64(2) == 0)
        #expect(try b.open(slot: 1).records.map(\.sequence) == Array(1...UInt64(perSlot)))
    }

    @Test("a snapshot of several chunks reads back entry for entry")
    func largeSnapshot() async throws {
        let server = try await TestPostgres.start()
        let a = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        let fence = try a.acquire([7], worker: "a", ttl: .seconds(60))
        _ = try a.open(slot: 7)
        for index in 1...10 {
            a.append(slot: 7, type: 1, payload: [UInt8(index)])
        }
        #expect(try a.commit(fence: fence, worker: "a") == [])
        var generator = SplitMix64(seed: 61)
        var entries = (0..<8000).map { _ in
            (0..<generator.below(700)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        }
        entries.insert([], at: 3)
        entries.insert([UInt8](repeating: 5, count: 2 << 20), at: 2000)  // larger than a chunk
        let snapshots = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8)
        #expect(try snapshots.writeSnapshot(slot: 7, covering: 6, epoch: 1, worker: "a", entries: entries))

        let chunks = try a.connection.execute("SELECT count(*) FROM chime_slot_snapshot_chunk WHERE slot = 7").rows
        #expect(try (chunks.first?.int64(0) ?? 0) >= 3)
        let recovered = try SlotStore(connection: PostgresConnection(server.uri), slotCount: 8).open(slot: 7)
        #expect(recovered.snapshot?.sequence == 6)
        #expect(try recovered.snapshot?.loadEntries().map { Array($0) } == entries)
        #expect(recovered.records.map(\.sequence) == Array(7...10))
    }

    /// Waits until one statement whose text is `like` (SQL LIKE) waits for a lock, as
    /// `pg_stat_activity` says: whether it did.
    private func waitsForALock(_ observer: PostgresConnection, like pattern: String) async throws -> Bool {
        try await eventually {
            let rows = try observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1",
                [.text(pattern)]
            ).rows
            return try rows.first?.int64(0) == 1
        }
    }

    /// The statements the server logged (`log_statement = all`) between two `SELECT 'marker'`s.
    private func loggedStatements(
        _ server: TestPostgres,
        between start: String,
        and end: String
    ) async throws -> [String] {
        var lines: [String] = []
        let logged = await eventually {
            lines = server.log
            return lines.contains { $0.contains(end) }
        }
        try #require(logged)
        guard let first = lines.firstIndex(where: { $0.contains(start) }),
            let last = lines.firstIndex(where: { $0.contains(end) })
        else { return [] }
        return lines[(first + 1)..<last].filter { $0.contains("LOG:  execute") || $0.contains("LOG:  statement") }
    }
}

/// Events from several threads, in the order they happened.
private final class EventLog: Sendable {
    private let recorded = Mutex<[String]>([])

    func record(_ event: String) {
        recorded.withLock { $0.append(event) }
    }

    var events: [String] { recorded.withLock { $0 } }
}

/// Starts `body` on a thread of its own and returns a function that waits for its result. A
/// statement that blocks on a lock in the server blocks its thread: on one of Swift's few
/// cooperative threads, two such tests at once would leave none to run the task that releases the
/// lock.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) -> @Sendable () async throws -> T {
    let result = Mutex<Result<T, any Error>?>(nil)
    Thread.detachNewThread {
        let outcome = Result { try body() }
        result.withLock { $0 = outcome }
    }
    return {
        while true {
            if let outcome = result.withLock({ $0 }) { return try outcome.get() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}
