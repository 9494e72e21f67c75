import ChimeEngine
import ChimeProtocol
import ChimeWorkerPolicy

/// Where the worker keeps what it acknowledged: the journal in the data directory (ChimeJournal's
/// `JournalStore`) or in PostgreSQL (ChimePostgresStore's `PostgresStore`, `SlotWorkerStore`).
/// Called only from the loop thread, except for the `written` callback of a snapshot.
public protocol WorkerStore: AnyObject {
    /// Appends a record (not yet durable: see ``commit()``).
    func append(_ entry: JournalEntry, key: CommandKey?) throws(StoreError)
    /// Makes what was appended durable under the store's sync policy.
    /// - Returns: the microseconds a sync took, nil when none was needed.
    func commit() throws(StoreError) -> Int64?
    /// Milliseconds until a ``commit()`` would sync what waits under an interval policy; nil when
    /// nothing waits.
    var syncWait: Int64? { get }
    var status: StoreStatus { get }
    /// Begins a snapshot of what was appended so far (of the journal of `slot` in slot mode, else
    /// 0). The engine's state as of now follows in ``writeSnapshot(_:written:)``, once copied.
    /// - Returns: the sequence the snapshot covers.
    func beginSnapshot(slot: Int) throws(StoreError) -> UInt64
    /// Writes the snapshot begun, `frozen`, on another thread, which calls `written` when done.
    func writeSnapshot(_ frozen: EngineSnapshot, written: @escaping @Sendable (StoreError?) -> Void)
    /// After `written`, on the loop thread: makes the snapshot the new base. With `writeError`
    /// (also before anything was written) it abandons it instead, and throws that error.
    /// - Returns: the sequence the snapshot covers.
    func completeSnapshot(writeError: StoreError?) throws(StoreError) -> UInt64
    /// Syncs and releases the store.
    func close() throws(StoreError)

    // Slot mode (many workers on one store). The defaults are a store without slots: one journal
    // (slot 0), no leases.

    /// Appends a record to the journal of `slot`.
    func append(_ entry: JournalEntry, key: CommandKey?, slot: Int) throws(StoreError)
    /// The slots whose records the last ``commit()`` refused because another worker holds their
    /// lease now.
    var fenced: Set<Int> { get }
    /// Carries out a lease call of ``SlotOwnership`` begun at `sentAt`.
    /// - Returns: its result for the ownership machine, nil when it has none.
    func lease(
        _ action: SlotOwnership.Action,
        sentAt: ContinuousClock.Instant
    ) throws(StoreError)
        -> SlotOwnership.Event?
    /// Reads a slot's journal to rebuild its engine, and fences its later writes with `epoch`.
    func loadSlot(_ slot: Int, epoch: Int64) throws(StoreError) -> Recovery
    /// Forgets a slot no longer served here: its sequence, its fence, what waits to be committed.
    func forgetSlot(_ slot: Int)
}

extension WorkerStore {
    public func append(_ entry: JournalEntry, key: CommandKey?, slot: Int) throws(StoreError) {
        try append(entry, key: key)
    }

    public var fenced: Set<Int> { [] }

    public func lease(
        _ action: SlotOwnership.Action,
        sentAt: ContinuousClock.Instant
    ) throws(StoreError)
        -> SlotOwnership.Event?
    {
        throw StoreError("this store has no slots (--slots needs --store postgres://...)")
    }

    public func loadSlot(_ slot: Int, epoch: Int64) throws(StoreError) -> Recovery {
        throw StoreError("this store has no slots (--slots needs --store postgres://...)")
    }

    public func forgetSlot(_ slot: Int) {}
}
