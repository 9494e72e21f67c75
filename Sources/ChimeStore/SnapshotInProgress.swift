import ChimeEngine
import ChimeWorkerPolicy
import Foundation

/// The snapshot a store is writing, from ``WorkerStore/beginSnapshot(slot:)`` to
/// ``WorkerStore/completeSnapshot(writeError:)``: what it covers, the journal bytes appended when it
/// began (which its completion takes off the count that makes the next one due), the store's own
/// `Detail`, and the thread that writes it. One for every store, so that each says only how it writes.
public struct SnapshotInProgress<Detail: Sendable> {
    private var current: (covered: UInt64, bytesAtBegin: Int, detail: Detail)?

    public init() {}

    public mutating func begin(covered: UInt64, bytesAtBegin: Int, _ detail: Detail) throws(StoreError) {
        guard current == nil else { throw StoreError("a snapshot is being written already") }
        current = (covered, bytesAtBegin, detail)
    }

    /// Runs `write` on a thread of its own with what was begun, and passes its outcome to `written`.
    public func write(
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
    public mutating func complete(
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
