import ChimeCore
import ChimeJournal
import ChimeMQTT
import ChimePush
import ChimeSupport
import Foundation

/// Where the worker keeps what it acknowledged: the journal in the data directory today.
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

/// The snapshot a store is writing, from ``WorkerStore/beginSnapshot(slot:)`` to
/// ``WorkerStore/completeSnapshot(writeError:)``: what it covers, the journal bytes appended when it
/// began (which its completion takes off the count that makes the next one due), the store's own
/// `Detail`, and the thread that writes it. One for every store, so that each says only how it writes.
struct SnapshotInProgress<Detail: Sendable> {
    private var current: (covered: UInt64, bytesAtBegin: Int, detail: Detail)?

    mutating func begin(covered: UInt64, bytesAtBegin: Int, _ detail: Detail) throws(StoreError) {
        guard current == nil else { throw StoreError("a snapshot is being written already") }
        current = (covered, bytesAtBegin, detail)
    }

    /// Runs `write` on a thread of its own with what was begun, and passes its outcome to `written`.
    func write(
        _ written: @escaping @Sendable (StoreError?) -> Void,
        _ write: @escaping @Sendable (_ covered: UInt64, _ detail: Detail) throws(StoreError) -> Void
    ) {
        guard let (covered, _, detail) = current else { return written(StoreError("no snapshot was begun")) }
        Thread.detachNewThread {
            do throws(StoreError) {
                try write(covered, detail)
                written(nil)
            } catch {
                written(error)
            }
        }
    }

    /// Ends the snapshot: what was begun, or `writeError` thrown after `abandon` was given what
    /// was begun (a store whose snapshot holds a resource, such as a temporary file, lets it go).
    mutating func complete(
        writeError: StoreError?,
        abandon: (Detail) -> Void = { _ in }
    ) throws(StoreError) -> (covered: UInt64, bytesAtBegin: Int, detail: Detail) {
        guard let current else { throw StoreError("no snapshot is being written") }
        self.current = nil
        if let writeError {
            abandon(current.detail)
            throw writeError
        }
        return current
    }
}

/// How the worker reaches the broker: ChimeMQTT's client.
public protocol WorkerTransport: AnyObject {
    /// - Returns: the message id, to match the broker's PUBACK.
    func publish(_ message: OutboundMessage) throws(TransportError) -> Int32
    /// - Returns: the message id, to match the broker's SUBACK.
    func subscribe(_ filter: String, qos: Int) throws(TransportError) -> Int32
    func unsubscribe(_ filter: String) throws(TransportError)
    func stop()
}

/// The worker's time: the wall clock it schedules by, and a monotonic one to measure with.
public protocol WorkerClock {
    func now() -> Instant
    func monotonic() -> ContinuousClock.Instant
}

// MARK: The production seams

/// The journal in the data directory, as the worker's store.
final class JournalStore: WorkerStore {
    let journal: Journal
    /// The snapshot being written, between ``beginSnapshot(slot:)`` and ``completeSnapshot(writeError:)``.
    private var snapshot = SnapshotInProgress<SnapshotWriter>()
    /// Deletes what each snapshot made obsolete, one compaction after another, off the loop: a
    /// large file can take long to delete (0.77 s for 2.6 GB on a disk mounted with `discard`).
    let compactor = DispatchQueue(label: "chime.compaction")
    let logger: Logger

    init(_ journal: Journal, logger: Logger) {
        self.journal = journal
        self.logger = logger
    }

    func append(_ entry: JournalEntry, key: CommandKey?) throws(StoreError) {
        do {
            try journal.append(type: entry.kind.rawValue, payload: entry.encode(key: key))
        } catch {
            throw StoreError(error.message)
        }
    }

    func commit() throws(StoreError) -> Int64? {
        let syncing = journal.hasUnsyncedData
        let before = ContinuousClock.now
        do {
            try journal.commit()
        } catch {
            throw StoreError("\(error)")
        }
        return syncing && !journal.hasUnsyncedData ? microseconds(ContinuousClock.now - before) : nil
    }

    var syncWait: Int64? {
        // Rounded up: a wait of 0 before the deadline would spin the loop until it passes.
        journal.syncDeadline.map { (microseconds(ContinuousClock.now.duration(to: $0)) + 999) / 1000 }
    }

    var status: StoreStatus {
        StoreStatus(
            snapshotDue: journal.snapshotDue,
            bytesSinceSnapshot: journal.bytesSinceSnapshot,
            lastSequence: journal.lastSequence
        )
    }

    func beginSnapshot(slot: Int) throws(StoreError) -> UInt64 {
        let writer: SnapshotWriter
        do {
            writer = try journal.beginSnapshot()
        } catch {
            throw StoreError("\(error)")
        }
        try snapshot.begin(covered: writer.coveredSequence, bytesAtBegin: journal.bytesSinceSnapshot, writer)
        return writer.coveredSequence
    }

    func writeSnapshot(_ frozen: EngineSnapshot, written: @escaping @Sendable (StoreError?) -> Void) {
        snapshot.write(written) { (_, writer) throws(StoreError) in
            do throws(JournalError) {
                try frozen.forEachEntry { (entry: [UInt8]) throws(JournalError) in try writer.append(entry) }
                try writer.finish()
            } catch {
                writer.abandon()
                throw StoreError("\(error)")
            }
        }
    }

    func completeSnapshot(writeError: StoreError?) throws(StoreError) -> UInt64 {
        let writer = try snapshot.complete(writeError: writeError) { $0.abandon() }.detail
        let compaction: Compaction
        do {
            compaction = try journal.recordSnapshot(writer)
        } catch {
            throw StoreError("compaction failed: \(error)")
        }
        let logger = self.logger
        compactor.async {
            do {
                try compaction.run()
            } catch {
                logger.warning(
                    "cannot delete what the last snapshot made obsolete; the next snapshot or start deletes it",
                    ["error": "\(error)"]
                )
            }
        }
        return writer.coveredSequence
    }

    func close() throws(StoreError) {
        // A deletion under way finishes before the directory is released to another process.
        compactor.sync {}
        do {
            try journal.close()
        } catch {
            throw StoreError("\(error)")
        }
    }
}

/// ChimeMQTT's client, as the worker's transport.
final class MQTTTransport: WorkerTransport {
    let client: MQTTClient

    init(_ client: MQTTClient) { self.client = client }

    func publish(_ message: OutboundMessage) throws(TransportError) -> Int32 {
        var properties = MQTTPublishProperties()
        properties.contentType = message.contentType
        properties.responseTopic = message.responseTopic
        properties.correlationData = message.correlationData
        properties.userProperties = message.userProperties.map { MQTTUserProperty($0.name, $0.value) }
        properties.messageExpiryInterval = message.messageExpiry
        do {
            return try client.publish(
                topic: message.topic,
                payload: message.payload,
                qos: message.qos,
                retain: message.retain,
                properties: properties
            )
        } catch {
            throw TransportError("\(error)")
        }
    }

    func subscribe(_ filter: String, qos: Int) throws(TransportError) -> Int32 {
        do {
            return try client.subscribe(filter, qos: qos)
        } catch {
            throw TransportError("\(error)")
        }
    }

    func unsubscribe(_ filter: String) throws(TransportError) {
        do {
            try client.unsubscribe(filter)
        } catch {
            throw TransportError("\(error)")
        }
    }

    func stop() { client.stop() }
}

/// The system's clocks.
struct SystemClock: WorkerClock {
    func now() -> Instant { wallClock() }
    func monotonic() -> ContinuousClock.Instant { .now }
}

/// Makes push attempts off the loop and reports each one's end as ``WorkerEvent/push(_:_:)``
/// (ChimePush's `PushService`; a fake in tests).
public protocol PushSender: Sendable {
    func send(_ job: PushJob)
}

extension PushService: PushSender {}
