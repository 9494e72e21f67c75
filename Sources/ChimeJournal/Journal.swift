import ChimeCore
import Glibc

/// How a ``Journal`` writes.
public struct JournalOptions: Sendable {
    /// When `commit()` syncs. Default `.always`.
    public var fsync: FsyncPolicy = .always
    /// A segment that has reached this size is closed and a new one started before the next
    /// append. Default 64 MiB.
    public var segmentBytes: Int = 64 << 20
    /// Journal bytes written since the last snapshot that make ``Journal/snapshotDue`` true.
    /// Default 256 MiB.
    public var snapshotAfterBytes: Int = 256 << 20

    public init(fsync: FsyncPolicy = .always, segmentBytes: Int = 64 << 20, snapshotAfterBytes: Int = 256 << 20) {
        self.fsync = fsync
        self.segmentBytes = segmentBytes
        self.snapshotAfterBytes = snapshotAfterBytes
    }
}

/// The write-ahead journal of a data directory.
///
/// `open` recovers the directory; then the owner appends records and commits them. A command
/// is acknowledged only after the `commit()` that follows its `append` returned (with
/// `FsyncPolicy.always`), so an acknowledged command is never lost. Snapshots let old segments
/// go: ``beginSnapshot()`` returns a ``SnapshotWriter`` that may run on another thread while
/// appends continue, and ``snapshotCompleted(_:)`` deletes what is no longer needed.
///
/// Not thread-safe: a `Journal` is used from one owner thread (it is not `Sendable`). Only the
/// ``SnapshotWriter`` it hands out may move to another thread.
public final class Journal {
    private let dir: DataDirectory
    private let options: JournalOptions
    private var lockFD: FileDescriptor?
    /// The segment being appended to.
    private var segmentFD: FileDescriptor?
    private var segmentFirst: UInt64
    private var segmentSize: Int
    private var segmentHasRecords: Bool
    /// First sequences of every segment on disk, ascending; the last is the one being appended to.
    private var segments: [UInt64]
    /// Snapshots on disk believed good, ascending. Damaged ones found at open are left out.
    private var snapshots: [UInt64]
    private var lastSync: ContinuousClock.Instant
    private var pendingSnapshot: SnapshotWriter?
    /// `bytesSinceSnapshot` when the pending snapshot began: what it will cover.
    private var pendingSnapshotBytes = 0
    /// Set after a failure that leaves the file in an unknown state; every later write throws it.
    private var failure: JournalError?
    private var scratch: [UInt8] = []

    /// The sequence of the last appended record (or of the recovered state).
    public private(set) var lastSequence: UInt64
    /// Whether records were appended since the last `fdatasync`.
    public private(set) var hasUnsyncedData = false
    /// Journal bytes appended since the state the newest snapshot covers.
    public private(set) var bytesSinceSnapshot: Int

    /// Whether enough was written since the last snapshot to take one (and none is running).
    public var snapshotDue: Bool {
        if let pendingSnapshot, !pendingSnapshot.isAbandoned { return false }
        return bytesSinceSnapshot >= options.snapshotAfterBytes
    }

    /// When a `commit()` under `.interval` would sync what is unsynced; nil when nothing is
    /// unsynced or the policy is not `.interval`. The owner arms a timer for it so data does not
    /// wait for the next command.
    public var syncDeadline: ContinuousClock.Instant? {
        guard hasUnsyncedData, case .interval(let milliseconds) = options.fsync else { return nil }
        return lastSync + .milliseconds(milliseconds)
    }

    private init(dir: DataDirectory, options: JournalOptions, lockFD: FileDescriptor, scan: DirectoryScan) {
        self.dir = dir
        self.options = options
        self.lockFD = lockFD
        self.lastSequence = scan.lastSequence
        self.bytesSinceSnapshot = scan.bytesAfterBase
        self.segments = scan.segments.map(\.firstSequence)
        self.snapshots = scan.snapshots.filter { $0.problem == nil }.map(\.sequence)
        self.segmentFirst = 0
        self.segmentSize = 0
        self.segmentHasRecords = false
        self.lastSync = .now
    }

    deinit {
        // Not closed: release descriptors (and so the lock) without syncing, as a crash would.
        if let segmentFD { dir.closeQuietly(segmentFD) }
        if let lockFD { dir.closeQuietly(lockFD) }
    }

    // MARK: Opening

    /// Opens (creating if needed) a data directory and recovers it.
    ///
    /// Locks the directory (exclusive, non-blocking), removes stale `*.tmp` files, reads the
    /// newest usable snapshot and every record after it, truncates a torn tail of the newest
    /// segment, and opens it for appending.
    ///
    /// - Parameters:
    ///   - directory: the data directory; created if missing (its parent must exist).
    ///   - fileSystem: the system-call seam; tests pass a fault-injecting one.
    /// - Returns: the journal, ready for appends, and what to rebuild the state from.
    /// - Throws: `.locked` (naming the holder's pid) when another `Journal` has it open;
    ///   `.corrupt` (naming file and offset) for damage other than a torn tail;
    ///   `.badDirectory`, `.io`, `.syncFailed` for system failures.
    public static func open(
        directory: String,
        options: JournalOptions = JournalOptions(),
        fileSystem: any FileSystem = SystemFileSystem()
    ) throws(JournalError) -> (Journal, Recovery) {
        guard options.segmentBytes > 0, options.snapshotAfterBytes > 0 else {
            throw JournalError(.invalidArgument, "segmentBytes and snapshotAfterBytes must be positive")
        }
        if case .interval(let milliseconds) = options.fsync, milliseconds <= 0 {
            throw JournalError(.invalidArgument, "fsync interval must be positive")
        }
        let dir = DataDirectory(fs: fileSystem, path: directory)
        try dir.create()
        _ = try dir.list()  // .badDirectory when it is not a directory
        let lockFD = try lock(dir)
        do {
            return try recover(dir, options: options, lockFD: lockFD)
        } catch {
            dir.closeQuietly(lockFD)
            throw error
        }
    }

    /// Takes the directory's exclusive `flock` and records our pid in `LOCK`.
    ///
    /// `flock` belongs to the open file description, so a second `open` in the same process
    /// is refused too, and the kernel drops the lock when the process dies: no stale locks.
    static func lock(_ dir: DataDirectory) throws(JournalError) -> FileDescriptor {
        let name = JournalFormat.lockName
        let fd = try dir.open(name, .readWrite, [.create])
        // A lock our own pid holds may be the copy a child spawned by another thread has of a
        // descriptor this process just closed, until the child's exec closes it (close-on-exec):
        // ask again for a moment before calling it held.
        var attempts = 0
        while true {
            do {
                try dir.fs.lock(fd, exclusive: true)
                break
            } catch {
                let holder = error == .wouldBlock ? (try? readLockHolder(dir, fd)) ?? "unknown" : ""
                if error == .wouldBlock && holder == "\(getpid())" && attempts < 20 {
                    attempts += 1
                    usleep(10_000)
                    continue
                }
                dir.closeQuietly(fd)
                if error == .wouldBlock {
                    throw JournalError(
                        .locked,
                        "data directory \(dir.path) is locked by pid \(holder) (\(dir.path(name)))"
                    )
                }
                throw JournalError(.io, "cannot lock \(dir.path(name))", errno: error)
            }
        }
        do {
            try dir.truncate(fd, name, to: 0)
            try dir.writeAll(fd, name, Array("\(getpid())\n".utf8), at: 0)
        } catch {
            dir.closeQuietly(fd)
            throw error
        }
        return fd
    }

    private static func readLockHolder(_ dir: DataDirectory, _ fd: FileDescriptor) throws(JournalError) -> String {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = try bytes.withMutableBytes { buffer throws(JournalError) in
            try dir.read(fd, JournalFormat.lockName, into: buffer, at: 0)
        }
        let text = String(decoding: bytes.prefix(count), as: UTF8.self).filter { $0.isNumber }
        return text.isEmpty ? "unknown" : text
    }

    static func recover(
        _ dir: DataDirectory,
        options: JournalOptions,
        lockFD: FileDescriptor
    )
        throws(JournalError) -> (Journal, Recovery)
    {
        var warnings: [String] = []
        var directoryChanged = false
        for name in DirectoryListing(try dir.list()).temporaryFiles {
            try dir.unlink(name)
            warnings.append("\(name): removed unfinished temporary file")
            directoryChanged = true
        }

        var (scan, records) = try DirectoryScan.forRecovery(dir)
        warnings += scan.warnings

        // Fix the newest segment's end, which the scan only reported.
        if let last = scan.segments.last, last.tornHeader {
            try dir.unlink(last.name)
            scan.segments.removeLast()
            warnings.append("\(last.name): removed segment with incomplete header (\(last.fileSize) bytes)")
            directoryChanged = true
        } else if let last = scan.segments.last, last.tornTail != nil {
            let fd = try dir.open(last.name, .writeOnly)
            defer { dir.closeQuietly(fd) }
            try dir.truncate(fd, last.name, to: last.validEnd)
            try dir.fsync(fd, last.name)
            scan.segments[scan.segments.count - 1].fileSize = last.validEnd
        }

        let journal = Journal(dir: dir, options: options, lockFD: lockFD, scan: scan)
        journal.lockFD = nil  // owned by the caller's cleanup until the journal is complete
        do throws(JournalError) {
            if directoryChanged { try dir.syncDirectory() }
            if let last = scan.segments.last, last.nextSequence == scan.lastSequence + 1 {
                let fd = try dir.open(last.name, .writeOnly)
                journal.segmentFD = fd
                journal.segmentFirst = last.firstSequence
                journal.segmentSize = last.validEnd
                journal.segmentHasRecords = last.recordCount > 0
                // Whatever recovery returns must be durable before anything builds on it: the
                // records may so far live only in the page cache of a process that crashed.
                do {
                    try dir.fs.dataSync(fd)
                } catch {
                    throw JournalError(.syncFailed, "fdatasync of \(dir.path(last.name)) failed", errno: error)
                }
            } else {
                // No segment yet, or the snapshot reaches past the last record (after `repair`).
                try journal.startSegment(at: scan.lastSequence + 1)
            }
        } catch {
            if let fd = journal.segmentFD { dir.closeQuietly(fd) }
            journal.segmentFD = nil
            throw error
        }
        journal.lockFD = lockFD
        let recovery = Recovery(
            snapshot: scan.snapshotFile.map(Recovery.Snapshot.init(reading:)),
            records: records,
            warnings: warnings,
            lastSequence: scan.lastSequence
        )
        return (journal, recovery)
    }

    // MARK: Writing

    /// Appends one record with the next sequence.
    ///
    /// The whole frame is built in memory and handed to one `pwrite`, so a crash leaves at most
    /// one partial record, at the very end, which recovery recognises as a torn tail. Nothing is
    /// synced here: call ``commit()`` after a batch.
    ///
    /// If the write fails or is short (`ENOSPC`, `EIO`, ...), the file is truncated back to
    /// where the record began, so no partial record is left in the middle of the journal for a
    /// later record to follow (that would read as corruption, not as a torn tail). The journal
    /// stays usable. If even that truncate fails, the journal becomes unusable.
    ///
    /// - Returns: the record's sequence.
    /// - Throws: `.writeFailed` (nothing of the record remains); `.unusable`;
    ///   `.invalidArgument` for a payload over ``JournalFormat/maximumPayloadBytes``;
    ///   `.syncFailed` when closing a full segment could not sync it.
    @discardableResult
    public func append(type: UInt8, payload: [UInt8]) throws(JournalError) -> UInt64 {
        try checkUsable()
        guard payload.count <= JournalFormat.maximumPayloadBytes else {
            throw JournalError(.invalidArgument, "payload of \(payload.count) bytes exceeds the record limit")
        }
        if segmentHasRecords && segmentSize >= options.segmentBytes {
            do {
                try rotate()
            } catch {
                // The new segment could not be made (ENOSPC, ...): nothing changed, retry later.
                guard error.code == .io else { throw error }
                throw JournalError(.writeFailed, error.message, errno: error.errno)
            }
        }
        guard let fd = segmentFD else { throw JournalError(.invalidState, "journal is closed") }

        let sequence = lastSequence + 1
        let frameSize = JournalFormat.recordOverhead + payload.count
        if scratch.count < frameSize { scratch = [UInt8](repeating: 0, count: max(frameSize, 2 * scratch.count, 4096)) }
        let offset = segmentSize
        let result: Result<Int, Errno> = scratch.withUnsafeMutableBytes { buffer in
            buffer.storeLE(UInt32(frameSize - 4), at: 0)
            buffer[8] = type
            buffer.storeLE(sequence, at: 9)
            payload.withUnsafeBytes { source in
                guard let from = source.baseAddress, let to = buffer.baseAddress else { return }
                (to + JournalFormat.recordOverhead).copyMemory(from: from, byteCount: source.count)
            }
            buffer.storeLE(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[8..<frameSize])), at: 4)
            do throws(Errno) {
                return .success(
                    try dir.fs.write(fd, UnsafeRawBufferPointer(rebasing: buffer[0..<frameSize]), at: offset)
                )
            } catch {
                return .failure(error)
            }
        }
        // Named only on failure: formatting it on every append showed in profiles.
        var name: String { JournalFormat.segmentName(segmentFirst) }
        switch result {
        case .success(let written) where written == frameSize:
            segmentSize += frameSize
            segmentHasRecords = true
            lastSequence = sequence
            bytesSinceSnapshot += frameSize
            hasUnsyncedData = true
            return sequence
        case .success(let written):
            try truncateBack(fd, to: offset)
            throw JournalError(
                .writeFailed,
                "short write to \(dir.path(name)) at offset \(offset): \(written) of \(frameSize) bytes"
            )
        case .failure(let errno):
            try truncateBack(fd, to: offset)
            throw JournalError(.writeFailed, "cannot write \(dir.path(name)) at offset \(offset)", errno: errno)
        }
    }

    private func truncateBack(_ fd: FileDescriptor, to offset: Int) throws(JournalError) {
        do {
            try dir.fs.truncate(fd, to: offset)
        } catch {
            let name = dir.path(JournalFormat.segmentName(segmentFirst))
            let failed = JournalError(
                .unusable,
                "a failed append left \(name) with a partial record at offset \(offset) that could not be truncated",
                errno: error
            )
            failure = failed
            throw failed
        }
    }

    /// Applies the fsync policy to what was appended.
    ///
    /// This is group commit: append a batch, commit once, then acknowledge the whole batch.
    /// `.always` syncs now if anything is unsynced; `.interval` syncs if the interval has passed
    /// since the last sync; `.none` does nothing.
    ///
    /// `fdatasync`, not `fsync`: it writes the data and the file size (needed to read the data
    /// back) but skips timestamps, saving a journal write on most file systems.
    ///
    /// - Parameter now: the current time, for `.interval`; tests pass their own.
    /// - Throws: `.syncFailed`. After a failed `fdatasync` the kernel may already have dropped the
    ///   dirty pages and cleared the error, so a retry could "succeed" over lost data. The journal
    ///   becomes unusable, and the caller must exit and let recovery read what is really on disk.
    public func commit(now: ContinuousClock.Instant = .now) throws(JournalError) {
        try checkUsable()
        guard hasUnsyncedData else { return }
        switch options.fsync {
        case .always: try sync(now: now)
        case .interval(let milliseconds): if now >= lastSync + .milliseconds(milliseconds) { try sync(now: now) }
        case .none: return
        }
    }

    /// Syncs anything unsynced whatever the policy (for shutdown, or an `.interval` timer).
    /// - Throws: `.syncFailed`, as ``commit(now:)``.
    public func sync(now: ContinuousClock.Instant = .now) throws(JournalError) {
        try checkUsable()
        guard hasUnsyncedData, let fd = segmentFD else { return }
        do {
            try dir.fs.dataSync(fd)
        } catch {
            let failed = JournalError(
                .syncFailed,
                "fdatasync of \(dir.path(JournalFormat.segmentName(segmentFirst))) failed",
                errno: error
            )
            failure = JournalError(.unusable, "an earlier fdatasync failed: \(failed.message)", errno: error)
            throw failed
        }
        hasUnsyncedData = false
        lastSync = now
    }

    private func checkUsable() throws(JournalError) {
        if let failure { throw failure }
        if lockFD == nil { throw JournalError(.invalidState, "journal \(dir.path) is closed") }
    }

    /// Closes the current segment and starts the next one.
    ///
    /// The old segment is synced first, whatever the policy: only the newest segment may end
    /// in a torn record, so every older one must be whole on disk before a newer one exists.
    private func rotate() throws(JournalError) {
        try sync()
        let old = segmentFD
        try startSegment(at: lastSequence + 1)
        if let old { dir.closeQuietly(old) }
    }

    /// Creates `journal-<sequence>.log` and makes it the segment being appended to.
    ///
    /// The header is `fsync`ed, then the directory, so the segment exists with a valid header
    /// before any record relies on it. On failure the half-made file is removed and the
    /// previous segment stays current.
    private func startSegment(at sequence: UInt64) throws(JournalError) {
        let name = JournalFormat.segmentName(sequence)
        let fd = try dir.open(name, .writeOnly, [.create, .exclusive])
        do {
            try dir.writeAll(fd, name, JournalFormat.segmentHeader(firstSequence: sequence), at: 0)
            try dir.fsync(fd, name)
            try dir.syncDirectory()
        } catch {
            dir.closeQuietly(fd)
            try? dir.unlink(name)
            if error.code == .syncFailed { failure = JournalError(.unusable, error.message, errno: error.errno) }
            throw error
        }
        segmentFD = fd
        segmentFirst = sequence
        segmentSize = JournalFormat.segmentHeaderSize
        segmentHasRecords = false
        if segments.last != sequence { segments.append(sequence) }
    }

    // MARK: Snapshots

    /// Starts a snapshot of the state through ``lastSequence``.
    ///
    /// Syncs and rotates to a new segment (if the current one holds records), so every segment
    /// the snapshot covers is whole and durable, and can later be deleted as a unit. Write the
    /// state into the returned writer (on any thread), call `finish()`, then hand it back to
    /// ``snapshotCompleted(_:)`` on the owner thread.
    ///
    /// - Throws: `.invalidState` while another snapshot is running; `.syncFailed`; `.writeFailed`.
    public func beginSnapshot() throws(JournalError) -> SnapshotWriter {
        try checkUsable()
        if let pendingSnapshot, !pendingSnapshot.isAbandoned {
            throw JournalError(
                .invalidState,
                "a snapshot of sequence \(pendingSnapshot.coveredSequence) is still running"
            )
        }
        if segmentHasRecords { try rotate() } else { try sync() }
        let writer = try SnapshotWriter(dir: dir, coveredSequence: lastSequence)
        pendingSnapshot = writer
        pendingSnapshotBytes = bytesSinceSnapshot
        return writer
    }

    /// Records a finished snapshot and compacts the directory.
    ///
    /// Keeps the two newest good snapshots and every segment needed to replay from the older
    /// of them; deletes the rest. Two, not one: if the newest snapshot turns out damaged when it
    /// is next read (a bad sector, a bug), recovery falls back to the previous one plus the
    /// segments after it, and nothing is lost. With only one snapshot, no segment is deleted,
    /// since replay from the start is then the fallback.
    ///
    /// Deletion is ordered so a crash part-way leaves a directory that recovers: older snapshots
    /// first, then segments oldest first, then the directory is synced.
    ///
    /// - Throws: `.invalidState` if `writer` is not this journal's finished snapshot; `.io` if a
    ///   file cannot be deleted (the journal stays usable; see ``Compaction/run()``).
    public func snapshotCompleted(_ writer: SnapshotWriter) throws(JournalError) {
        try recordSnapshot(writer).run()
    }

    /// ``snapshotCompleted(_:)`` without its deletions: records the finished snapshot and
    /// returns the files it made obsolete, for ``Compaction/run()`` to delete on another thread
    /// (deleting a large file can take long). The journal goes on meanwhile; it never creates a
    /// file by an obsolete one's name.
    ///
    /// - Throws: `.invalidState` if `writer` is not this journal's finished snapshot; `.io` if the
    ///   directory cannot be listed.
    public func recordSnapshot(_ writer: SnapshotWriter) throws(JournalError) -> Compaction {
        try checkUsable()
        guard writer === pendingSnapshot, writer.isFinished else {
            throw JournalError(.invalidState, "snapshotCompleted needs the finished writer from beginSnapshot")
        }
        pendingSnapshot = nil
        bytesSinceSnapshot -= pendingSnapshotBytes
        pendingSnapshotBytes = 0
        if !snapshots.contains(writer.coveredSequence) {
            snapshots.append(writer.coveredSequence)
            snapshots.sort()
        }
        let kept = Array(snapshots.suffix(2))
        var obsolete = DirectoryListing(try dir.list()).snapshots.filter { !kept.contains($0.sequence) }.map(\.name)
        snapshots = kept
        if kept.count == 2 {
            let older = kept[0]
            // Segment i holds sequences segments[i] ..< segments[i + 1]; it is needed if any of
            // them is greater than the older snapshot.
            while segments.count > 1 && segments[1] <= older + 1 {
                obsolete.append(JournalFormat.segmentName(segments[0]))
                segments.removeFirst()
            }
        }
        return Compaction(dir: dir, obsolete: obsolete)
    }

    /// Syncs whatever is unsynced (whatever the policy) and releases the directory.
    ///
    /// A snapshot still being written must be finished or abandoned first by its thread; the
    /// journal does not wait for it.
    public func close() throws(JournalError) {
        guard let lockFD else { return }
        defer {
            if let segmentFD { dir.closeQuietly(segmentFD) }
            segmentFD = nil
            dir.closeQuietly(lockFD)
            self.lockFD = nil
        }
        if failure == nil { try sync() }
    }
}

/// The files a finished snapshot made obsolete (``Journal/recordSnapshot(_:)``): the older
/// snapshots, then the segments only they needed.
public struct Compaction: Sendable {
    let dir: DataDirectory
    /// Their names, in the order they are deleted.
    public let obsolete: [String]

    /// Deletes them in order, a file already gone counting as deleted, then syncs the directory.
    /// A crash part-way leaves a directory that recovers, and the next compaction deletes what is
    /// left of the snapshots (the segments, the next start).
    /// - Throws: `.io` if a file cannot be deleted; `.syncFailed` if the directory cannot be synced.
    public func run() throws(JournalError) {
        for name in obsolete { try dir.unlink(name) }
        try dir.syncDirectory()
    }
}
