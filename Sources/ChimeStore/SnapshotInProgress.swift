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
    ///
    /// `write`, and the frozen state it captures, is released on that thread before `written` is
    /// called. So when the loop hears that a snapshot is written, its copy is gone: a new snapshot
    /// never copies the state beside the old copy, and the memory read then is what is held.
    /// (Releasing a copy of ten million notifications takes the writing thread about a second.)
    public func write(
        _ written: @escaping @Sendable (StoreError?) -> Void,
        _ write: @escaping @Sendable (_ covered: UInt64, _ detail: Detail) throws(StoreError) -> Void
    ) {
        guard let (covered, _, detail) = current else { return written(StoreError("no snapshot was begun")) }
        let job = OneShot(write)
        Thread.detachNewThread { written(job.run(covered, detail)) }
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

/// A snapshot's writing closure, held until the writing thread runs it once and lets it go.
private final class OneShot<Detail>: @unchecked Sendable {
    // Read and cleared by the one thread that runs it, which `Thread.detachNewThread` orders
    // after the initialiser.
    private var body: ((UInt64, Detail) throws(StoreError) -> Void)?

    init(_ body: @escaping (UInt64, Detail) throws(StoreError) -> Void) { self.body = body }

    /// Runs the closure and releases it, with everything it captured, before returning.
    func run(_ covered: UInt64, _ detail: Detail) -> StoreError? {
        guard let body = body.take() else { return StoreError("a snapshot was written twice") }
        do throws(StoreError) {
            try body(covered, detail)
            return nil
        } catch {
            return error
        }
    }
}
