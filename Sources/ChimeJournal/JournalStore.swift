import ChimeCore
import ChimeSupport
import Foundation

/// The journal in the data directory, as the worker's store.
public final class JournalStore: WorkerStore {
    let journal: Journal
    /// The snapshot being written, between ``beginSnapshot(slot:)`` and ``completeSnapshot(writeError:)``.
    private var snapshot = SnapshotInProgress<SnapshotWriter>()
    /// Deletes what each snapshot made obsolete, one compaction after another, off the loop: a
    /// large file can take long to delete (0.77 s for 2.6 GB on a disk mounted with `discard`).
    let compactor = DispatchQueue(label: "chime.compaction")
    let logger: Logger

    public init(_ journal: Journal, logger: Logger) {
        self.journal = journal
        self.logger = logger
    }

    public func append(_ entry: JournalEntry, key: CommandKey?) throws(StoreError) {
        do {
            try journal.append(type: entry.kind.rawValue, payload: entry.encode(key: key))
        } catch {
            throw StoreError(error.message)
        }
    }

    public func commit() throws(StoreError) -> Int64? {
        let syncing = journal.hasUnsyncedData
        let before = ContinuousClock.now
        do {
            try journal.commit()
        } catch {
            throw StoreError("\(error)")
        }
        return syncing && !journal.hasUnsyncedData ? microseconds(ContinuousClock.now - before) : nil
    }

    public var syncWait: Int64? {
        // Rounded up: a wait of 0 before the deadline would spin the loop until it passes.
        journal.syncDeadline.map { (microseconds(ContinuousClock.now.duration(to: $0)) + 999) / 1000 }
    }

    public var status: StoreStatus {
        StoreStatus(
            snapshotDue: journal.snapshotDue,
            bytesSinceSnapshot: journal.bytesSinceSnapshot,
            lastSequence: journal.lastSequence
        )
    }

    public func beginSnapshot(slot: Int) throws(StoreError) -> UInt64 {
        let writer: SnapshotWriter
        do {
            writer = try journal.beginSnapshot()
        } catch {
            throw StoreError("\(error)")
        }
        try snapshot.begin(covered: writer.coveredSequence, bytesAtBegin: journal.bytesSinceSnapshot, writer)
        return writer.coveredSequence
    }

    public func writeSnapshot(_ frozen: EngineSnapshot, written: @escaping @Sendable (StoreError?) -> Void) {
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

    public func completeSnapshot(writeError: StoreError?) throws(StoreError) -> UInt64 {
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

    public func close() throws(StoreError) {
        // A deletion under way finishes before the directory is released to another process.
        compactor.sync {}
        do {
            try journal.close()
        } catch {
            throw StoreError("\(error)")
        }
    }
}
