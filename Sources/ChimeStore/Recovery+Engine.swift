import ChimeEngine
import ChimeProtocol
import Dispatch
import Synchronization

extension Engine {
    /// Rebuilds the engine from what the journal recovered in `directory`: the snapshot's
    /// entries, then every record after it, then the timers. What `chimed` does at start-up,
    /// `chime journal verify` to check a directory, and repartitioning to read its inputs.
    ///
    /// - Parameters:
    ///   - directory: the data directory `recovery` came from, for messages.
    ///   - progress: called every 4096 entries with the phase, how many are done and how many
    ///     there are, for start-up logging.
    ///   - timings: how long each phase took (`snapshotMs`, `journalMs`, `armMs`).
    /// - Throws: ``JournalError/corrupt`` naming the snapshot or record that cannot be read.
    public static func replaying(
        _ recovery: Recovery,
        configuration: EngineConfiguration = EngineConfiguration(),
        directory: String,
        progress: (_ phase: String, _ done: Int, _ total: Int) -> Void = { _, _, _ in },
        timings: ((String, Duration) -> Void)? = nil
    ) throws(JournalError) -> Engine {
        var phaseStart = ContinuousClock.now
        func phaseEnded(_ name: String) {
            let now = ContinuousClock.now
            timings?(name, now - phaseStart)
            phaseStart = now
        }
        // The records are decoded on another thread while the snapshot is restored here: decoding
        // is pure, and on a large directory both take a good part of the start-up.
        let records = recovery.records
        let decoded = Mutex<[Result<(entry: JournalEntry, key: CommandKey?), JournalEntryError>]?>(nil)
        let decoding = DispatchGroup()
        DispatchQueue.global().async(group: decoding) {
            let entries = records.map { record in
                Result { () throws(JournalEntryError) in
                    try JournalEntry.decodeRecord(kind: record.type, payload: record.payload)
                }
            }
            decoded.withLock { $0 = entries }
        }

        let restorer = EngineRestorer(configuration: configuration)
        if let snapshot = recovery.snapshot {
            restorer.reserveCapacity(for: snapshot.sizing, records: records.count)
            var restored = 0
            try snapshot.forEachEntry { entry throws(JournalError) in
                do {
                    try restorer.restore(snapshotEntry: entry)
                } catch {
                    throw JournalError(.corrupt, "snapshot \(snapshot.sequence) in \(directory): \(error)")
                }
                if restored & 0xFFF == 0 { progress("snapshot", restored, snapshot.count) }
                restored += 1
            }
        }
        decoding.wait()
        phaseEnded("snapshotMs")
        let entries = decoded.withLock { $0 ?? [] }
        for (i, (record, entry)) in zip(records, entries).enumerated() {
            do {
                let (entry, key) = try entry.get()
                restorer.apply(entry, key: key)
            } catch {
                throw JournalError(
                    .corrupt,
                    "journal record \(record.sequence) in \(directory) cannot be read: \(error); "
                        + "run `chime journal verify \(directory)`"
                )
            }
            if i & 0xFFF == 0 { progress("journal", i, records.count) }
        }
        phaseEnded("journalMs")
        let engine = restorer.finish()
        phaseEnded("armMs")
        return engine
    }
}
