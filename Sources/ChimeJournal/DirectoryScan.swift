/// The names in a data directory, sorted into what they are.
struct DirectoryListing: Sendable {
    /// Segments by first sequence, ascending.
    var segments: [(sequence: UInt64, name: String)] = []
    /// Snapshots by covered sequence, ascending.
    var snapshots: [(sequence: UInt64, name: String)] = []
    /// `*.tmp` files: snapshots that never finished.
    var temporaryFiles: [String] = []

    init(_ names: [String]) {
        for name in names {
            if let sequence = JournalFormat.segmentSequence(name) {
                segments.append((sequence, name))
            } else if let sequence = JournalFormat.snapshotSequence(name) {
                snapshots.append((sequence, name))
            } else if name.hasSuffix(".tmp") {
                temporaryFiles.append(name)
            }
        }
        segments.sort { $0.sequence < $1.sequence }
        snapshots.sort { $0.sequence < $1.sequence }
        temporaryFiles.sort()
    }
}

/// Everything one read-only pass over a data directory learned. `Journal.open`, `verify`,
/// `dump` and `repair` all start from this, so they agree on what is damage.
struct DirectoryScan: Sendable {
    struct SnapshotState: Sendable {
        var name: String
        var sequence: UInt64
        /// Nil when the snapshot was not read (an older one, when only the newest good one matters).
        var entryCount: UInt64?
        var problem: ScanProblem?
    }

    var listing: DirectoryListing
    /// The snapshot recovery starts from.
    var usedSnapshot: (sequence: UInt64, name: String)?
    /// The snapshot recovery starts from, held open (with ``Mode/loadSnapshot``).
    var snapshotFile: SnapshotFile?
    var snapshots: [SnapshotState] = []
    var segments: [SegmentScan] = []
    var warnings: [String] = []
    /// The first damage that recovery must not skip; scanning stops there.
    var problem: ScanProblem?
    /// Sequence of the snapshot used, 0 without one.
    var baseSequence: UInt64 = 0
    /// The greatest sequence recovered: the snapshot's or the last record's.
    var lastSequence: UInt64 = 0
    var recordCount = 0
    var firstRecordSequence: UInt64?
    var lastRecordSequence: UInt64?
    /// Frame bytes of records after the snapshot, for `snapshotDue`.
    var bytesAfterBase = 0

    /// What to do with snapshots and records while scanning.
    struct Mode {
        /// Keep the used snapshot open in `snapshotFile`, to be read again entry by entry.
        var loadSnapshot = false
        /// Read every snapshot, not only down to the first good one.
        var checkAllSnapshots = false
        /// Leave unread the segments whose records the snapshot in use holds (all but the newest
        /// segment can be): recovery does not need them, and they can be most of a directory
        /// (they are kept in case that snapshot is damaged; then the next recovery reads them).
        /// The tools read everything.
        var skipCoveredSegments = false
    }

    /// Reads the whole directory without changing it.
    ///
    /// - Parameter onRecord: every valid record in segment order, with whether it comes after
    ///   the snapshot used.
    /// - Throws: ``JournalError`` only for I/O errors on segments or the directory; damage is
    ///   reported in ``problem``.
    static func scan(
        _ dir: DataDirectory,
        mode: Mode,
        onRecord: (UInt64, UInt8, UnsafeRawBufferPointer, Bool) -> Void
    ) throws(JournalError) -> DirectoryScan {
        var scan = DirectoryScan(listing: DirectoryListing(try dir.list()))
        try scan.chooseSnapshot(dir, mode: mode)
        if scan.problem == nil { try scan.scanSegments(dir, skipCovered: mode.skipCoveredSegments, onRecord: onRecord) }
        scan.lastSequence = max(scan.baseSequence, scan.lastRecordSequence ?? 0)
        if scan.problem == nil, let damaged = scan.snapshots.last(where: { $0.problem != nil }),
            damaged.sequence > scan.lastSequence
        {
            // The damaged snapshot held state that no other file can rebuild.
            scan.problem = ScanProblem(
                file: damaged.name,
                offset: damaged.problem?.offset ?? 0,
                message: "snapshot is damaged (\(damaged.problem?.message ?? "")) and nothing else reaches "
                    + "its sequence \(damaged.sequence)"
            )
        }
        return scan
    }

    /// The newest snapshot that reads back whole; a damaged newer one is skipped with a warning.
    /// - Throws: `.badDirectory` when a snapshot is a symbolic link or not a regular file, read
    ///   or not: that is no damage to skip, but a directory the journal refuses.
    private mutating func chooseSnapshot(_ dir: DataDirectory, mode: Mode) throws(JournalError) {
        for (sequence, name) in listing.snapshots.reversed() {
            if usedSnapshot != nil && !mode.checkAllSnapshots {
                try dir.checkRegularFile(name)
                snapshots.insert(SnapshotState(name: name, sequence: sequence), at: 0)
                continue
            }
            let opened: Result<FileDescriptor, ScanProblem>
            do {
                opened = .success(try dir.open(name, .readOnly))
            } catch  where error.code == .badDirectory || error.errno == .noSuchFile {
                // A link is no damage to skip but a directory the journal refuses; a file gone
                // since the listing was compacted away (``settled(_:)`` lists again).
                throw error
            } catch {
                opened = .failure(ScanProblem(file: name, offset: 0, message: error.description))
            }
            do throws(ScanProblem) {
                let file = try SnapshotFile(dir, fd: try opened.get(), name: name, sequence: sequence)
                snapshots.insert(SnapshotState(name: name, sequence: sequence, entryCount: UInt64(file.count)), at: 0)
                if usedSnapshot == nil {
                    usedSnapshot = (sequence, name)
                    baseSequence = sequence
                    if mode.loadSnapshot { snapshotFile = file }
                }
            } catch {
                snapshots.insert(SnapshotState(name: name, sequence: sequence, problem: error), at: 0)
                if usedSnapshot == nil {
                    warnings.append("\(error.line); skipped, recovering from the snapshot before it or from the start")
                }
            }
        }
    }

    private mutating func scanSegments(
        _ dir: DataDirectory,
        skipCovered: Bool,
        onRecord: (UInt64, UInt8, UnsafeRawBufferPointer, Bool) -> Void
    ) throws(JournalError) {
        let base = baseSequence
        if let first = listing.segments.first, first.sequence > base + 1 {
            let state = usedSnapshot.map { "snapshot \($0.name)" } ?? "an empty state (no usable snapshot)"
            problem = ScanProblem(
                file: first.name,
                offset: 0,
                message:
                    "oldest segment starts at sequence \(first.sequence), but replay from \(state) needs \(base + 1)"
            )
            return
        }
        var expected: UInt64?
        for (index, (sequence, name)) in listing.segments.enumerated() {
            let isLast = index == listing.segments.count - 1
            // Consecutive segments continue each other's sequences (checked on the name, which
            // the header must repeat, before any record is reported). The only gap allowed is one
            // the snapshot in use already covers (left behind by `repair`).
            if let expected, sequence != expected, !(sequence > expected && sequence <= base + 1) {
                problem = ScanProblem(
                    file: name,
                    offset: 0,
                    message: "segment starts at sequence \(sequence) but \(expected) was expected (sequence gap)"
                )
                return
            }
            let next = index + 1 < listing.segments.count ? listing.segments[index + 1].sequence : nil
            if skipCovered, let next, next > sequence, next <= base + 1 {
                // Every record here is at most `next - 1`, which the snapshot covers. Not read,
                // but refused all the same if it is a link: it is read when that snapshot fails.
                try dir.checkRegularFile(name)
                segments.append(
                    SegmentScan(name: name, firstSequence: sequence, lastSequence: next - 1, validEnd: 0, fileSize: 0)
                )
                expected = next
                continue
            }
            let bytes = try dir.readAll(name)
            var segment: SegmentScan
            do throws(ScanProblem) {
                segment = try bytes.withBytes { buffer throws(ScanProblem) in
                    try SegmentReader.scan(buffer, name: name, nameSequence: sequence, isLast: isLast) {
                        sequence,
                        type,
                        payload,
                        frameSize in
                        let after = sequence > base
                        if after { bytesAfterBase += frameSize }
                        onRecord(sequence, type, payload, after)
                    }
                }
            } catch {
                problem = error
                return
            }
            if segment.tornHeader {
                segments.append(segment)
                return
            }
            if segment.recordCount > 0 {
                recordCount += segment.recordCount
                if firstRecordSequence == nil { firstRecordSequence = segment.firstSequence }
                lastRecordSequence = segment.lastSequence
            }
            if let torn = segment.tornTail {
                let dropped = segment.fileSize - torn.offset
                let location = "\(name): torn tail at offset \(torn.offset)"
                warnings.append("\(location), \(dropped) bytes dropped (\(torn.reason))")
            }
            expected = segment.nextSequence
            segments.append(segment)
        }
    }
}

extension DirectoryScan {
    /// Runs `attempt` again, from a new listing, while a file it listed is gone before it is
    /// read: the tools read without the lock, and a worker beside them compacts (removes the
    /// segments and the older snapshot a new snapshot covers) at any moment. A worker compacts
    /// once per snapshot, so a few attempts settle; after them the error stands.
    static func settled<T>(_ attempt: () throws(JournalError) -> T) throws(JournalError) -> T {
        var attempts = 1
        while true {
            do {
                return try attempt()
            } catch  where error.errno == .noSuchFile && attempts < 5 {
                attempts += 1
            }
        }
    }

    /// The scan recovery makes: the newest usable snapshot loaded, the records after it, segments
    /// it covers left unread.
    /// - Throws: `.corrupt` when the directory holds damage recovery cannot pass.
    static func forRecovery(_ dir: DataDirectory) throws(JournalError) -> (DirectoryScan, [JournalRecord]) {
        var records: [JournalRecord] = []
        let scan = try scan(dir, mode: .init(loadSnapshot: true, skipCoveredSegments: true)) {
            sequence,
            type,
            payload,
            after in
            if after { records.append(JournalRecord(sequence: sequence, type: type, payload: Array(copying: payload))) }
        }
        if let problem = scan.problem { throw JournalError(.corrupt, problem.line) }
        return (scan, records)
    }
}
