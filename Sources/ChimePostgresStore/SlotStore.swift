import ChimeCore
import ChimePostgres
import ChimeStore

/// Many workers on one store: devices map to a fixed number of slots (``slotCount``, chosen when
/// the store is created), each slot with a journal and snapshots of its own in PostgreSQL, so that
/// any worker can load any slot. A worker owns a slot while it holds the slot's lease (owner,
/// epoch, expiry), and every write to the slot is fenced by that epoch in the same transaction: a
/// worker that lost the lease (paused, partitioned, slow) can neither commit a record nor write a
/// snapshot for the slot any more.
///
/// ```swift
/// let store = try SlotStore(connection: PostgresConnection(uri), slotCount: nil)
/// let members = try store.heartbeat(worker: "w1", instance: bootId, ttl: .seconds(10))
/// let held = try store.acquire([3, 7], worker: "w1", ttl: .seconds(10))   // slot → epoch
/// let recovered = try store.open(slot: 3)          // snapshot + records, to rebuild the slot
/// store.append(slot: 3, type: 1, payload: bytes)
/// let lost = try store.commit(fence: held, worker: "w1")   // durable, except the slots lost
/// ```
///
/// The database's clock decides every expiry (`now()`), never the worker's: the workers' clocks
/// may disagree. The durations (time to live) are the caller's.
///
/// Not thread-safe, like its connection. A snapshot written while commits go on needs a second
/// `SlotStore` on a connection of its own.
public final class SlotStore {
    /// The number of slots of a store created without one.
    public static let defaultSlotCount = 256
    /// The numbers of slots a store may have.
    public static let slotCounts = SlotOwnership.slotCounts

    public let connection: PostgresConnection
    /// The store's number of slots: device `d` is in slot `crc32(d) mod slotCount`.
    public let slotCount: Int
    /// The group of the workers' shared subscription with `--routing slot`: `chimed-` and a random
    /// secret the store made (`chime_cluster.share_group`), which clients cannot guess.
    public let shareGroup: String

    /// A slot opened by ``open(slot:)``: its last committed sequence, and what waits for ``commit(fence:worker:)``.
    private struct OpenSlot {
        var lastCommitted: UInt64
        var pending: [JournalRecord] = []

        mutating func append(type: UInt8, payload: [UInt8]) -> UInt64 {
            let sequence = (pending.last?.sequence ?? lastCommitted) + 1
            pending.append(JournalRecord(sequence: sequence, type: type, payload: payload))
            return sequence
        }
    }

    private var slots: [Int: OpenSlot] = [:]
    /// The open slots that have pending records.
    private var dirty: Set<Int> = []
    /// How many records wait for ``commit(fence:worker:)``, in every slot.
    public private(set) var pendingCount = 0
    /// Set when a commit failed: whether it took effect is unknown here.
    private var failure: PostgresStoreError?

    /// Opens the store: creates or migrates the tables (``Schema/migrate(_:)``), and creates the
    /// store's slots (the cluster's row and a free lease per slot) when it has none.
    ///
    /// - Parameter slotCount: the number of slots; nil takes the store's, or
    ///   ``defaultSlotCount`` for a new store.
    /// - Throws: `.slotCountMismatch` if the store has another number of slots than `slotCount`;
    ///   `.invalidArgument` for a number outside ``slotCounts``; `.schemaTooNew`; `.database`.
    public init(connection: PostgresConnection, slotCount: Int?) throws(PostgresStoreError) {
        if let slotCount, !Self.slotCounts.contains(slotCount) {
            throw PostgresStoreError(
                .invalidArgument,
                "\(slotCount) slots: a store has \(Self.slotCounts.lowerBound) to \(Self.slotCounts.upperBound)"
            )
        }
        self.connection = connection
        try Schema.migrate(connection)
        let stored: Int
        if let existing = try Self.storedSlotCount(connection) {
            stored = existing
        } else {
            stored = try Self.create(connection, slotCount ?? Self.defaultSlotCount)
        }
        do {
            let row = try connection.execute("SELECT share_group FROM chime_cluster").rows.first
            shareGroup = "chimed-" + (try row?.text(0) ?? "")
        } catch {
            throw PostgresStoreError(error, while: "reading the store's share group")
        }
        if let slotCount, slotCount != stored {
            throw PostgresStoreError(
                .slotCountMismatch,
                "the store has \(stored) slots; --slots \(slotCount) was given"
            )
        }
        self.slotCount = stored
    }

    private static func storedSlotCount(_ connection: PostgresConnection) throws(PostgresStoreError) -> Int? {
        do {
            let row = try connection.execute("SELECT slot_count FROM chime_cluster").rows.first
            return try row.map { row throws(PostgresError) in Int(try row.int64(0)) }
        } catch {
            throw PostgresStoreError(error, while: "reading the number of slots")
        }
    }

    /// Creates the cluster's row and the leases, unless another worker starting at the same time
    /// did (under the migration's advisory lock, so only one does): the store's number of slots.
    private static func create(_ connection: PostgresConnection, _ count: Int) throws(PostgresStoreError) -> Int {
        try inTransaction(connection, "the creation of \(count) slots") { () throws(PostgresStoreError) in
            do {
                try connection.execute("SELECT pg_advisory_xact_lock($1)", [.integer(Schema.migrationLock)])
                if let stored = try storedSlotCount(connection) { return .commit(stored) }
                try connection.execute("INSERT INTO chime_cluster (slot_count) VALUES ($1)", [.integer(count)])
                try connection.execute(
                    "INSERT INTO chime_lease (slot) SELECT generate_series(0, $1::integer - 1)",
                    [.integer(count)]
                )
                return .commit(count)
            } catch {
                throw PostgresStoreError(error, while: "creating \(count) slots")
            }
        }
    }

    /// The slot of a device: `crc32(UTF-8 of deviceId) mod slotCount`, the CRC-32 of `--partition`.
    public static func slot(of deviceId: String, slotCount: Int) -> Int {
        precondition(slotCounts.contains(slotCount), "\(slotCount) slots")
        return Int(deviceBucket(deviceId, among: UInt32(slotCount)))
    }

    /// The slot of a device in this store.
    public func slot(of deviceId: String) -> Int {
        Self.slot(of: deviceId, slotCount: slotCount)
    }

    // MARK: Membership

    /// A live worker: one whose last heartbeat has not expired.
    public struct Member: Hashable, Sendable {
        public var worker: String
        /// Tells two runs of the same worker apart (a boot id, a pod's uid).
        public var instance: String
        /// It said it is handing its slots over.
        public var leaving: Bool
        /// How long until its heartbeat expires, by the database's clock (rounded up).
        public var expiresInMilliseconds: Int64

        public init(worker: String, instance: String, leaving: Bool, expiresInMilliseconds: Int64) {
            self.worker = worker
            self.instance = instance
            self.leaving = leaving
            self.expiresInMilliseconds = expiresInMilliseconds
        }
    }

    /// Says that `worker` is alive for `ttl` more (from the database's now), in one statement.
    /// - Returns: every live member, this one included, sorted by worker.
    /// - Throws: `.invalidArgument` for a `ttl` that is not positive; `.database`.
    public func heartbeat(
        worker: String,
        instance: String,
        ttl: Duration,
        leaving: Bool = false
    ) throws(PostgresStoreError) -> [Member] {
        var statement = Statement()
        let name = statement.bind(.text(worker))
        let run = statement.bind(.text(instance))
        let until = try Self.expiry(ttl, &statement)
        let isLeaving = statement.bind(.text(leaving ? "true" : "false"), as: "boolean")
        let left = Self.millisecondsLeft("expires_at")
        // The CTE's row is not visible to the statement's own SELECT of the table: it comes from
        // RETURNING instead. Members gone for a day are deleted on the way: each pod of a
        // Deployment is a new worker id, and nothing else would ever remove those killed.
        let sql = """
            WITH gone AS (
                DELETE FROM chime_worker WHERE expires_at < now() - interval '\(Self.forgottenAfter)'
            ),
            beat AS (
                INSERT INTO chime_worker AS member (worker, instance, expires_at, leaving)
                VALUES (\(name), \(run), \(until), \(isLeaving))
                ON CONFLICT (worker) DO UPDATE SET instance = excluded.instance, expires_at = excluded.expires_at,
                    leaving = excluded.leaving,
                    started_at = CASE WHEN member.instance = excluded.instance THEN member.started_at ELSE now() END
                RETURNING worker, instance, leaving, expires_at
            )
            SELECT worker, instance, leaving, \(left) FROM beat
            UNION ALL
            SELECT worker, instance, leaving, \(left) FROM chime_worker WHERE expires_at > now() AND worker <> \(name)
            ORDER BY 1
            """
        do {
            return try connection.execute(sql, statement.parameters).rows.map { row throws(PostgresError) in
                Member(
                    worker: try row.text(0),
                    instance: try row.text(1),
                    leaving: try row.text(2) == "t",
                    expiresInMilliseconds: try row.int64(3)
                )
            }
        } catch {
            throw PostgresStoreError(error, while: "the heartbeat of \(worker)")
        }
    }

    /// How long after its heartbeat expired a member's row is deleted.
    static let forgottenAfter = "1 day"

    /// Removes `worker` from the members at once (a clean shutdown), rather than when its
    /// heartbeat expires. Its leases stay: ``release(_:worker:)`` hands them over.
    public func deregister(worker: String) throws(PostgresStoreError) {
        do {
            try connection.execute("DELETE FROM chime_worker WHERE worker = $1", [.text(worker)])
        } catch {
            throw PostgresStoreError(error, while: "deregistering \(worker)")
        }
    }

    // MARK: Leases

    /// A slot's lease.
    public struct Lease: Hashable, Sendable {
        public var slot: Int
        /// Who holds or last held it; nil when it is free (never taken, or released).
        public var owner: String?
        /// Incremented by every acquisition; 0 for a slot never taken.
        public var epoch: Int64
        /// How long until it expires, by the database's clock (rounded up): 0 or less once expired.
        public var expiresInMilliseconds: Int64

        public init(slot: Int, owner: String?, epoch: Int64, expiresInMilliseconds: Int64) {
            self.slot = slot
            self.owner = owner
            self.epoch = epoch
            self.expiresInMilliseconds = expiresInMilliseconds
        }
    }

    /// Every slot's lease, by slot.
    public func leases() throws(PostgresStoreError) -> [Lease] {
        do {
            let rows = try connection.execute(
                "SELECT slot, owner, epoch, \(Self.millisecondsLeft("expires_at")) FROM chime_lease ORDER BY slot"
            ).rows
            return try rows.map { row throws(PostgresError) in
                Lease(
                    slot: Int(try row.int64(0)),
                    owner: try row.isNull(1) ? nil : row.text(1),
                    epoch: try row.int64(2),
                    expiresInMilliseconds: try row.int64(3)
                )
            }
        } catch {
            throw PostgresStoreError(error, while: "reading the leases")
        }
    }

    /// Takes, in one statement, each of `slots` that is free, whose lease expired, or that `worker`
    /// holds already (the same worker restarted, or one that dropped its slots after a failure):
    /// its owner becomes `worker`, its epoch one more (so that an earlier holder's writes are
    /// fenced off), its expiry `ttl` from the database's now. A slot whose lease a commit or
    /// snapshot holds locked waits for that transaction to end.
    /// - Returns: the slots taken, and their new epochs; the others are someone else's.
    /// - Throws: `.invalidArgument` for a slot outside `0..<slotCount` or a `ttl` that is not
    ///   positive; `.database`.
    public func acquire(_ slots: [Int], worker: String, ttl: Duration) throws(PostgresStoreError) -> [Int: Int64] {
        try check(slots)
        guard !slots.isEmpty else { return [:] }
        var statement = Statement()
        let owner = statement.bind(.text(worker))
        let wanted = statement.bindArray(Set(slots).sorted(), as: "integer[]")
        let until = try Self.expiry(ttl, &statement)
        // The rows are locked in the order of the slots, as commits lock them: no deadlock. A row
        // that another transaction changes meanwhile is checked again once that one ends.
        let sql = """
            UPDATE chime_lease AS lease
            SET owner = \(owner), epoch = lease.epoch + 1, expires_at = \(until), acquired_at = now()
            FROM (
                SELECT slot FROM chime_lease
                WHERE slot = ANY(\(wanted)) AND (owner IS NULL OR expires_at <= now() OR owner = \(owner))
                ORDER BY slot
                FOR UPDATE
            ) AS free
            WHERE lease.slot = free.slot
            RETURNING lease.slot, lease.epoch
            """
        do {
            var taken: [Int: Int64] = [:]
            for row in try connection.execute(sql, statement.parameters).rows {
                taken[Int(try row.int64(0))] = try row.int64(1)
            }
            return taken
        } catch {
            throw PostgresStoreError(error, while: "acquiring \(slots.count) slots for \(worker)")
        }
    }

    /// Extends by `ttl` (from the database's now) the leases `worker` still holds at the epochs of
    /// `held`, expired or not, as long as no one took them since.
    /// - Returns: the slots renewed; the others of `held` are lost.
    public func renew(_ held: [Int: Int64], worker: String, ttl: Duration) throws(PostgresStoreError) -> Set<Int> {
        guard !held.isEmpty else { return [] }
        var statement = Statement()
        let until = try Self.expiry(ttl, &statement)
        let sql = """
            UPDATE chime_lease AS lease SET expires_at = \(until)
            FROM (\(Self.held(held, by: worker, &statement, .forUpdate))) AS held
            WHERE lease.slot = held.slot
            RETURNING lease.slot
            """
        return try slotsReturned(sql, statement, "renewing \(held.count) leases of \(worker)")
    }

    /// Hands the leases of `held` over (a graceful shutdown, rebalancing): each that `worker`
    /// still holds at its epoch becomes free and expired now, so any worker may acquire it (with
    /// the epoch one more). Commit what is pending first: nothing can be committed after.
    public func release(_ held: [Int: Int64], worker: String) throws(PostgresStoreError) {
        guard !held.isEmpty else { return }
        var statement = Statement()
        let sql = """
            UPDATE chime_lease AS lease SET owner = NULL, expires_at = now()
            FROM (\(Self.held(held, by: worker, &statement, .forUpdate))) AS held
            WHERE lease.slot = held.slot
            RETURNING lease.slot
            """
        _ = try slotsReturned(sql, statement, "releasing \(held.count) leases of \(worker)")
    }

    /// How ``held(_:by:_:_:)`` locks the rows it finds.
    private enum LeaseLock: String {
        case none = ""
        /// Until the transaction ends, no one can take the lease (an acquisition's `UPDATE` waits).
        case forShare = "FOR SHARE"
        case forUpdate = "FOR UPDATE"
    }

    /// How many parameters ``held(_:by:_:_:)`` binds.
    private static let heldParameters = 3

    /// A `SELECT slot, epoch` of the leases of `leases` that `worker` still holds at their epochs,
    /// in the order of the slots, locked by `lock`: the one check behind every fenced write.
    ///
    /// In PostgreSQL's READ COMMITTED, a row that another transaction changed meanwhile is read
    /// again once that one committed, and the check made on that version: a lease taken by then is
    /// not held.
    private static func held(
        _ leases: [Int: Int64],
        by worker: String,
        _ statement: inout Statement,
        _ lock: LeaseLock
    ) -> String {
        let sorted = leases.sorted { $0.key < $1.key }
        let slots = statement.bindArray(sorted.map(\.key), as: "integer[]")
        let epochs = statement.bindArray(sorted.map(\.value), as: "bigint[]")
        let owner = statement.bind(.text(worker))
        // A join, not array_position (a scan of the array a row): 65,536 leases renewed in one
        // statement took seconds that way, and leases expired while their renewal ran.
        return """
            SELECT lease.slot, lease.epoch FROM chime_lease AS lease
            JOIN unnest(\(slots), \(epochs)) AS fence (slot, epoch)
            ON lease.slot = fence.slot AND lease.epoch = fence.epoch
            WHERE lease.owner = \(owner)
            ORDER BY lease.slot \(lock == .none ? "" : lock.rawValue + " OF lease")
            """
    }

    private func slotsReturned(
        _ sql: String,
        _ statement: Statement,
        _ what: String
    ) throws(PostgresStoreError) -> Set<Int> {
        do {
            var slots = Set<Int>()
            for row in try connection.execute(sql, statement.parameters).rows {
                slots.insert(Int(try row.int64(0)))
            }
            return slots
        } catch {
            throw PostgresStoreError(error, while: what)
        }
    }

    /// The longest time to live of a heartbeat or lease: a day (a worker that is gone keeps its
    /// slots that long).
    public static let maximumTTL = Duration.seconds(86_400)

    /// `now() + ttl`, its microseconds bound as a parameter.
    private static func expiry(_ ttl: Duration, _ statement: inout Statement) throws(PostgresStoreError) -> String {
        let (seconds, attoseconds) = ttl.components
        guard ttl >= .microseconds(1), ttl <= maximumTTL else {
            throw PostgresStoreError(
                .invalidArgument,
                "a time to live of \(ttl): it must be from a microsecond to \(maximumTTL)"
            )
        }
        let microseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        return "now() + \(statement.bind(.integer(microseconds), as: "bigint")) * interval '1 microsecond'"
    }

    /// The milliseconds from the database's now until the time in `column`, rounded up: positive
    /// until then, 0 or less after.
    private static func millisecondsLeft(_ column: String) -> String {
        "ceil(extract(epoch FROM \(column) - now()) * 1000)::bigint"
    }

    // MARK: Journals

    /// Reads slot `slot`'s newest snapshot and its records after it (in one read-only snapshot
    /// of the database, so a snapshot written meanwhile cannot tear them), and opens the slot for
    /// ``append(slot:type:payload:)`` after its last sequence. Opening an open slot again drops
    /// its pending records.
    ///
    /// Open a slot after acquiring it: a commit of the previous owner either committed before
    /// the acquisition returned (and is read here) or writes nothing.
    /// - Throws: `.invalidArgument` for a slot outside `0..<slotCount`; `.corrupt` if the snapshot's
    ///   chunks do not add up or the records have a gap; `.database`.
    public func open(slot: Int) throws(PostgresStoreError) -> Recovery {
        try check([slot])
        let tables = JournalTables.slot(slot)
        let recovery = try inTransaction(connection, "reading slot \(slot)", .readOnlySnapshot) {
            () throws(PostgresStoreError) in
            .commit(try tables.recover(connection))
        }
        forget(slot: slot)
        slots[slot] = OpenSlot(lastCommitted: recovery.lastSequence)
        return recovery
    }

    /// Closes slot `slot` (lost or released): drops its pending records and its sequence. It must
    /// be opened again before appending to it.
    public func forget(slot: Int) {
        guard let dropped = slots.removeValue(forKey: slot) else { return }
        pendingCount -= dropped.pending.count
        dirty.remove(slot)
    }

    /// Appends a record to open slot `slot` in memory; ``commit(fence:worker:)`` writes it.
    /// - Precondition: the slot is open (``open(slot:)``).
    /// - Returns: its sequence in the slot: one more than the slot's last.
    @discardableResult
    public func append(slot: Int, type: UInt8, payload: [UInt8]) -> UInt64 {
        guard let index = slots.index(forKey: slot) else {
            preconditionFailure("slot \(slot) is not open: open(slot:) it before appending to it")
        }
        let sequence = slots.values[index].append(type: type, payload: payload)
        pendingCount += 1
        if slots.values[index].pending.count == 1 {
            dirty.insert(slot)
        }
        return sequence
    }

    /// The last committed sequence of open slot `slot` (or covered by its snapshot); nil when it
    /// is not open.
    public func lastCommitted(slot: Int) -> UInt64? {
        slots[slot]?.lastCommitted
    }

    /// Writes the pending records of every slot in one transaction, each slot's fenced by its
    /// lease: a slot whose lease `worker` no longer holds at its epoch in `fence` (or that `fence`
    /// lacks) is lost: none of its records is written, and they are dropped.
    ///
    /// Up to what one statement takes (``PostgresConnection/maximumParameters``: about 21,000
    /// records), the commit is one statement, so one round trip and no `BEGIN` or `COMMIT`: it
    /// locks the pending slots' leases `FOR SHARE`, checks them, and inserts the records of those
    /// held. An acquisition of one of them then waits until the commit ended, so that a record is
    /// committed before the lease changed hands (and the new owner's ``open(slot:)`` reads it), or
    /// not written at all. Beyond, the same statement runs once per batch between `BEGIN` and
    /// `COMMIT`, and only the last one locks the leases: a lease is locked from that statement to
    /// `COMMIT`, not across the round trips of the others, and a slot taken before the last one
    /// loses what the earlier ones wrote for it, in the same transaction.
    ///
    /// When it throws, every pending record is dropped and the store is
    /// ``PostgresStoreError/Code/broken``: a commit whose connection broke may or may not have taken
    /// effect, so only a store opened again (and its slots opened again) knows what the database holds.
    ///
    /// - Parameter fence: the epoch of each lease the worker holds (what ``acquire(_:worker:ttl:)``
    ///   returned); slots without pending records are not checked.
    /// - Returns: the slots lost. Their pending records are gone; ``forget(slot:)`` them.
    /// - Throws: `.database` for the failed commit, `.broken` for any call after one.
    public func commit(fence: [Int: Int64], worker: String) throws(PostgresStoreError) -> Set<Int> {
        if let failure {
            throw PostgresStoreError(
                .broken,
                "an earlier commit failed (\(failure.message)): open the store again",
                underlying: failure.underlying
            )
        }
        guard !dirty.isEmpty else { return [] }
        let written = dirty.sorted().map { slot in (slot: slot, records: slots[slot]?.pending ?? []) }
        let count = pendingCount
        for slot in dirty {
            slots[slot]?.pending = []
        }
        dirty = []
        pendingCount = 0

        var checked: [Int: Int64] = [:]
        for (slot, _) in written {
            checked[slot] = fence[slot]
        }
        guard !checked.isEmpty else { return Set(written.map(\.slot)) }
        let batches = Self.batches(written.filter { checked[$0.slot] != nil })
        let held: Set<Int>
        do throws(PostgresStoreError) {
            if batches.count == 1 {
                held = try insert(batches[0], fence: checked, worker: worker, .forShare)
            } else {
                held = try inTransaction(connection, "a commit of \(count) records") { () throws(PostgresStoreError) in
                    // Only the last statement locks the leases, so that no lease stays locked
                    // across the round trips of the others. A slot taken meanwhile loses what the
                    // earlier statements wrote for it, before anyone can read it.
                    var heldBefore = Set<Int>()
                    for batch in batches.dropLast() {
                        heldBefore.formUnion(try insert(batch, fence: checked, worker: worker, .none))
                    }
                    let held = try insert(batches[batches.count - 1], fence: checked, worker: worker, .forShare)
                    let lost = written.compactMap { slot, records in
                        heldBefore.contains(slot) && !held.contains(slot)
                            ? records.first.map { (slot, $0.sequence, checked[slot] ?? 0) } : nil
                    }
                    if !lost.isEmpty {
                        try delete(lost)
                    }
                    return .commit(held)
                }
            }
        } catch {
            failure = error
            throw error
        }
        for (slot, records) in written where held.contains(slot) {
            if let last = records.last {
                slots[slot]?.lastCommitted = last.sequence
            }
        }
        return Set(written.map(\.slot)).subtracting(held)
    }

    /// The records of a commit cut into statements that each fit in
    /// ``PostgresConnection/maximumParameters``: a slot takes one parameter in a statement, each of
    /// its records ``Statement/parametersPerRecord``.
    private static func batches(
        _ written: [(slot: Int, records: [JournalRecord])]
    ) -> [[(slot: Int, records: ArraySlice<JournalRecord>)]] {
        var batches: [[(slot: Int, records: ArraySlice<JournalRecord>)]] = []
        var batch: [(slot: Int, records: ArraySlice<JournalRecord>)] = []
        var room = PostgresConnection.maximumParameters - heldParameters
        for (slot, records) in written {
            var start = records.startIndex
            while start < records.endIndex {
                if room < 1 + Statement.parametersPerRecord {
                    batches.append(batch)
                    batch = []
                    room = PostgresConnection.maximumParameters - heldParameters
                }
                let fitting = (room - 1) / Statement.parametersPerRecord
                let end = min(records.endIndex, start + fitting)
                batch.append((slot, records[start..<end]))
                room -= 1 + (end - start) * Statement.parametersPerRecord
                start = end
            }
        }
        if !batch.isEmpty {
            batches.append(batch)
        }
        return batches
    }

    /// One statement of a commit: checks the leases of `fence` (locked by `lock`), and inserts the
    /// records of `batch` whose slot is held, with its epoch.
    /// - Returns: the slots held.
    private func insert(
        _ batch: [(slot: Int, records: ArraySlice<JournalRecord>)],
        fence: [Int: Int64],
        worker: String,
        _ lock: LeaseLock
    ) throws(PostgresStoreError) -> Set<Int> {
        let records = batch.reduce(0) { $0 + $1.records.count }
        var statement = Statement(
            reservingCapacity: Self.heldParameters + batch.count + records * Statement.parametersPerRecord
        )
        let held = Self.held(fence, by: worker, &statement, lock)
        var rows: [String] = []
        rows.reserveCapacity(records)
        for (slot, slotRecords) in batch {
            let placeholder = statement.bind(.integer(slot), as: "integer")
            for record in slotRecords {
                rows.append(statement.record(record, after: [placeholder]))
            }
        }
        // A data-modifying WITH runs to completion whether or not the SELECT reads it.
        let sql = """
            WITH held AS (\(held)),
            written AS (
                INSERT INTO chime_slot_journal (slot, seq, kind, payload, epoch)
                SELECT record.slot, record.seq, record.kind, record.payload, held.epoch
                FROM (VALUES \(rows.joined(separator: ", "))) AS record (slot, seq, kind, payload)
                JOIN held ON held.slot = record.slot
            )
            SELECT slot FROM held
            """
        return try slotsReturned(sql, statement, "committing \(records) records")
    }

    /// Deletes, inside a commit's transaction, what its earlier statements wrote for slots whose
    /// lease was taken before its last one: each slot's records from `first` on, under `epoch`.
    private func delete(_ lost: [(slot: Int, first: UInt64, epoch: Int64)]) throws(PostgresStoreError) {
        var statement = Statement()
        let slotArray = statement.bindArray(lost.map(\.slot), as: "integer[]")
        let firsts = statement.bindArray(lost.map(\.first), as: "bigint[]")
        let epochs = statement.bindArray(lost.map(\.epoch), as: "bigint[]")
        let sql = """
            DELETE FROM chime_slot_journal AS journal
            USING unnest(\(slotArray), \(firsts), \(epochs)) AS lost (slot, first, epoch)
            WHERE journal.slot = lost.slot AND journal.seq >= lost.first AND journal.epoch = lost.epoch
            """
        do {
            try connection.execute(sql, statement.parameters)
        } catch {
            throw PostgresStoreError(
                error,
                while: "deleting what a commit wrote for \(lost.count) slots lost meanwhile"
            )
        }
    }

    // MARK: Snapshots

    /// Stores a snapshot of slot `slot`'s state after its record `sequence`, and in the same
    /// transaction deletes the slot's records up to it and its older snapshots, as
    /// ``PostgresJournal/writeSnapshot(covering:catchingUp:forEachEntry:)`` does (chunks of
    /// ``PostgresJournal/chunkBytes``, one in memory at a time); fenced like a commit: nothing is
    /// written unless `worker` still holds the slot's lease at `epoch`.
    ///
    /// Run it on a second `SlotStore` with its own connection while the first goes on committing.
    /// The lease is checked without a lock before the entries are read, and again locked
    /// `FOR SHARE` after they are written, so that it is held locked only until `COMMIT`.
    ///
    /// - Parameters:
    ///   - sequence: the last record of the slot the state includes; it must be committed, unless
    ///     `catchingUp` (a commit failed, and whether it took effect is unknown).
    ///   - forEachEntry: calls its argument with each entry, in order.
    /// - Returns: whether it was written: false when the lease is no longer `worker`'s at `epoch`.
    /// - Throws: `.invalidArgument` for a slot outside `0..<slotCount`, or a `sequence` beyond the
    ///   slot's last committed record; `.database`.
    @discardableResult
    public func writeSnapshot(
        slot: Int,
        covering sequence: UInt64,
        epoch: Int64,
        worker: String,
        catchingUp: Bool = false,
        forEachEntry: (_ body: ([UInt8]) throws(PostgresStoreError) -> Void) throws(PostgresStoreError) -> Void
    ) throws(PostgresStoreError) -> Bool {
        try check([slot])
        let lease = [slot: epoch]
        let what = "the snapshot of slot \(slot) at \(sequence)"
        guard try holds(lease, worker, .none, what) else { return false }
        return try inTransaction(connection, what) { () throws(PostgresStoreError) in
            try JournalTables.slot(slot).writeSnapshot(
                covering: sequence,
                catchingUp: catchingUp,
                columns: [("epoch", .integer(epoch))],
                connection,
                forEachEntry
            )
            return try holds(lease, worker, .forShare, what) ? .commit(true) : .rollback(false)
        }
    }

    /// ``writeSnapshot(slot:covering:epoch:worker:catchingUp:forEachEntry:)`` with the entries given.
    @discardableResult
    public func writeSnapshot(
        slot: Int,
        covering sequence: UInt64,
        epoch: Int64,
        worker: String,
        entries: some Sequence<[UInt8]>,
        catchingUp: Bool = false
    ) throws(PostgresStoreError) -> Bool {
        try writeSnapshot(slot: slot, covering: sequence, epoch: epoch, worker: worker, catchingUp: catchingUp) {
            body throws(PostgresStoreError) in
            for entry in entries { try body(entry) }
        }
    }

    private func holds(
        _ lease: [Int: Int64],
        _ worker: String,
        _ lock: LeaseLock,
        _ what: String
    ) throws(PostgresStoreError) -> Bool {
        var statement = Statement()
        let sql = Self.held(lease, by: worker, &statement, lock)
        return try !slotsReturned(sql, statement, "checking the lease for \(what)").isEmpty
    }

    private func check(_ slots: [Int]) throws(PostgresStoreError) {
        if let outside = slots.first(where: { !(0..<slotCount).contains($0) }) {
            throw PostgresStoreError(.invalidArgument, "slot \(outside) is not one of the store's 0..<\(slotCount)")
        }
    }
}
