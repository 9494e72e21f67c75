import ChimeProtocol

/// Builds an engine from what a store kept: a snapshot's entries (``restore(snapshotEntry:)``),
/// then the records journaled after it (``apply(_:key:)``); ``finish()`` computes what restoring
/// leaves for last (next occurrences, timers, the pushes left waiting) and hands over the live
/// engine.
///
/// The engine being built is reachable only through this: nothing can hand it a command, a tick or
/// an acknowledgement before it is whole, and the live engine's API has nothing about recovery. It
/// cannot be copied, and ``finish()`` consumes it: nothing restores into the live engine.
public struct EngineRestorer: ~Copyable {
    private let engine: Engine

    public init(configuration: EngineConfiguration = EngineConfiguration()) {
        engine = Engine(configuration: configuration)
        engine.beginRecovery()
    }

    /// Makes room at once for what a snapshot holds (its ``SnapshotSizing``) and `records` journal
    /// records after it.
    public func reserveCapacity(for sizing: SnapshotSizing, records: Int = 0) {
        engine.reserveCapacity(for: sizing, records: records)
    }

    /// Reads one snapshot entry, as ``EngineSnapshot/forEachEntry(_:)`` wrote it (format 2) or an
    /// earlier chimed did (format 1, JSON).
    public func restore(snapshotEntry bytes: ArraySlice<UInt8>) throws(RecoveryError) {
        try engine.restore(snapshotEntry: bytes)
    }

    /// Reads one snapshot entry held in an array of its own.
    public func restore(snapshotEntry bytes: [UInt8]) throws(RecoveryError) {
        try engine.restore(snapshotEntry: bytes[...])
    }

    /// Applies a journal record written after the snapshot, with the command key it was journaled with.
    public func apply(_ entry: JournalEntry, key: CommandKey? = nil) {
        engine.apply(entry, key: key)
    }

    /// Ends the restore: every notification armed, the timers ordered.
    /// - Returns: the live engine.
    public consuming func finish() -> Engine {
        engine.finishRecovery()
        return engine
    }
}
