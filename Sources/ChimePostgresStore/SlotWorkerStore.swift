import ChimeCore
import ChimePostgres
import ChimeStore
import ChimeSupport
import Foundation

/// Slot mode's store (`--slots` with `--store postgres://...`): the journals of the slots this
/// worker holds, in a PostgreSQL shared with the other workers (ChimePostgresStore's `SlotStore`),
/// every write fenced by this worker's lease of its slot, and the lease calls of ``SlotOwnership``.
///
/// The database is the truth: when a commit fails, whether it took effect is unknown, so the
/// connection is dropped and the worker drops every slot (``WorkerStateMachine``); the next lease
/// call connects again, and the slots are loaded again from what the database holds.
public final class SlotWorkerStore: WorkerStore {
    let connectionString: String
    let worker: String
    let instance: String
    let leaseTTL: Duration
    public let slotCount: Int
    /// The workers' shared subscription group (``SlotStore/shareGroup``).
    public let shareGroup: String
    /// Journal bytes of one slot that trigger its snapshot: `--snapshot-bytes` over the slots, so
    /// that the journals together stay as large as one store's would, and a slot loads quickly.
    let snapshotAfterBytes: Int
    /// nil after a failed commit or lease call, until the next lease call connects again.
    private var store: SlotStore?
    /// The epoch of each lease held and loaded: what every write of the slot is fenced by.
    private var fence: [Int: Int64] = [:]
    private var bytesSinceSnapshot: [Int: Int] = [:]
    public private(set) var fenced: Set<Int> = []
    /// Slots whose fences a failure dropped, for the next ``commit()`` to report as ``fenced``:
    /// the worker must drop them too, and load them again.
    private var lost: Set<Int> = []
    /// The snapshot being written, with its slot and lease.
    private var snapshot = SnapshotInProgress<(slot: Int, epoch: Int64)>()

    static func connect(_ connectionString: String, slotCount: Int?) throws(StoreError) -> SlotStore {
        try PostgresStore.connect(connectionString) { connection throws(PostgresStoreError) in
            try SlotStore(connection: connection, slotCount: slotCount)
        }
    }

    public init(
        _ connectionString: String,
        worker: String,
        instance: String,
        slotCount: Int,
        leaseTTL: Duration,
        snapshotAfterBytes: Int
    ) throws(StoreError) {
        let store = try Self.connect(connectionString, slotCount: slotCount)
        self.connectionString = connectionString
        self.worker = worker
        self.instance = instance
        self.leaseTTL = leaseTTL
        self.slotCount = store.slotCount
        self.shareGroup = store.shareGroup
        self.snapshotAfterBytes = max(65_536, snapshotAfterBytes / store.slotCount)
        self.store = store
    }

    /// The connection, opened again after a failure.
    private func connected() throws(StoreError) -> SlotStore {
        if let store { return store }
        let store = try Self.connect(connectionString, slotCount: slotCount)
        self.store = store
        return store
    }

    /// Drops the connection after a failure: whatever it was doing may or may not have taken effect.
    private func fail(_ error: some Error) -> StoreError {
        store?.connection.close()
        store = nil
        lost.formUnion(fence.keys)
        fence.removeAll()
        bytesSinceSnapshot.removeAll()
        return StoreError("PostgreSQL: \(error)", transient: true)
    }

    public func append(_ entry: JournalEntry, key: CommandKey?) throws(StoreError) {
        throw StoreError("slot mode appends to a slot's journal")
    }

    public func append(_ entry: JournalEntry, key: CommandKey?, slot: Int) throws(StoreError) {
        guard let store, fence[slot] != nil else {
            throw StoreError("slot \(slot) is not held here", transient: true)
        }
        let payload = entry.encode(key: key)
        store.append(slot: slot, type: entry.kind.rawValue, payload: payload)
        bytesSinceSnapshot[slot, default: 0] += payload.count
    }

    public func commit() throws(StoreError) -> Int64? {
        fenced = lost
        lost = []
        guard let store, store.pendingCount > 0 else { return nil }
        let before = ContinuousClock.now
        let refused: Set<Int>
        do {
            refused = try store.commit(fence: fence, worker: worker)
        } catch {
            throw fail(error)
        }
        for slot in refused { forgetSlot(slot) }
        fenced.formUnion(refused)
        return microseconds(ContinuousClock.now - before)
    }

    public var syncWait: Int64? { nil }

    public var status: StoreStatus {
        let largest = bytesSinceSnapshot.max { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) }
        return StoreStatus(
            snapshotDue: (largest?.value ?? 0) >= snapshotAfterBytes,
            bytesSinceSnapshot: bytesSinceSnapshot.values.reduce(0, +),
            lastSequence: 0,
            snapshotSlot: largest?.key ?? 0
        )
    }

    public func beginSnapshot(slot: Int) throws(StoreError) -> UInt64 {
        guard let store, let epoch = fence[slot], let covered = store.lastCommitted(slot: slot) else {
            throw StoreError("slot \(slot) is not held here")
        }
        try snapshot.begin(covered: covered, bytesAtBegin: bytesSinceSnapshot[slot] ?? 0, (slot, epoch))
        return covered
    }

    public func writeSnapshot(_ frozen: EngineSnapshot, written: @escaping @Sendable (StoreError?) -> Void) {
        let connectionString = self.connectionString
        let worker = self.worker
        snapshot.write(written) { (covered, lease) throws(StoreError) in
            let writer = try Self.connect(connectionString, slotCount: nil)
            defer { writer.connection.close() }
            // Copied first, as PostgresStore does.
            let entries = frozen.entries
            let wrote: Bool
            do {
                wrote = try writer.writeSnapshot(
                    slot: lease.slot,
                    covering: covered,
                    epoch: lease.epoch,
                    worker: worker,
                    entries: entries
                )
            } catch {
                throw StoreError("PostgreSQL: \(error)", transient: true)
            }
            if !wrote { throw StoreError("slot \(lease.slot) was fenced off: another worker holds it") }
        }
    }

    public func completeSnapshot(writeError: StoreError?) throws(StoreError) -> UInt64 {
        let snapshot = try self.snapshot.complete(writeError: writeError)
        // Only if the slot is still held under the same lease: one loaded again counts anew.
        if fence[snapshot.detail.slot] == snapshot.detail.epoch {
            bytesSinceSnapshot[snapshot.detail.slot, default: 0] -= snapshot.bytesAtBegin
        }
        return snapshot.covered
    }

    public func lease(
        _ action: SlotOwnership.Action,
        sentAt: ContinuousClock.Instant
    ) throws(StoreError)
        -> SlotOwnership.Event?
    {
        let store = try connected()
        do {
            switch action {
            case .heartbeat(let leaving):
                let members = try store.heartbeat(worker: worker, instance: instance, ttl: leaseTTL, leaving: leaving)
                let leases = try store.leases()
                return .heartbeat(
                    members: members.map { SlotOwnership.Member(worker: $0.worker, leaving: $0.leaving) },
                    leases: leases.map {
                        SlotOwnership.Lease(
                            slot: $0.slot,
                            owner: $0.owner,
                            epoch: $0.epoch,
                            live: $0.expiresInMilliseconds > 0
                        )
                    },
                    sentAt: sentAt
                )
            case .renew(let held):
                return .renewed(try store.renew(held, worker: worker, ttl: leaseTTL), requested: held, sentAt: sentAt)
            case .acquire(let slots):
                return .acquired(try store.acquire(slots, worker: worker, ttl: leaseTTL), sentAt: sentAt)
            case .release(let held):
                for slot in held.keys { forgetSlot(slot) }
                try store.release(held, worker: worker)
                return nil
            case .deregister:
                try store.deregister(worker: worker)
                return nil
            case .load, .drain, .stopServing:
                return nil
            }
        } catch {
            throw fail(error)
        }
    }

    public func loadSlot(_ slot: Int, epoch: Int64) throws(StoreError) -> Recovery {
        let store = try connected()
        do {
            let recovery = try store.open(slot: slot)
            fence[slot] = epoch
            bytesSinceSnapshot[slot] = recovery.records.reduce(0) { $0 + $1.payload.count }
            return recovery
        } catch {
            throw fail(error)
        }
    }

    public func forgetSlot(_ slot: Int) {
        fence[slot] = nil
        bytesSinceSnapshot[slot] = nil
        store?.forget(slot: slot)
    }

    /// Commits what is left, hands every lease over and leaves the membership, so that the other
    /// workers take the slots at their next round instead of waiting for the leases to expire.
    public func close() throws(StoreError) {
        guard let store else { return }
        defer {
            store.connection.close()
            self.store = nil
        }
        _ = try commit()
        do {
            if !fence.isEmpty { try store.release(fence, worker: worker) }
            try store.deregister(worker: worker)
        } catch {
            throw StoreError("PostgreSQL: handing the slots over at shutdown: \(error)", transient: true)
        }
        fence.removeAll()
    }
}
