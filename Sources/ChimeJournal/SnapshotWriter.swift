import Synchronization

/// Writes one snapshot: the state through ``coveredSequence`` as opaque entries.
///
/// Created by ``Journal/beginSnapshot()``. Entries are buffered and written in large chunks to
/// `snapshot-<sequence>.snap.tmp`; ``finish()`` completes the file, `fsync`s it, renames it into
/// place and `fsync`s the directory, so the final name only ever refers to a whole, durable
/// snapshot. Until `finish()` returns, a crash leaves only a temporary file, which the next
/// `open` removes.
///
/// `@unchecked Sendable` because it is meant to be handed to another thread while the owner
/// keeps appending: its mutable state (descriptor, buffer, counters) is used by one thread at a
/// time, and handing it over (a `Task`, a dispatch queue) orders those uses. The journal only
/// reads ``coveredSequence`` (immutable) and the lifecycle state, which is an `Atomic`.
public final class SnapshotWriter: @unchecked Sendable {
    /// Every record up to and including this sequence is reflected in the snapshot.
    public let coveredSequence: UInt64

    private enum State: UInt8 {
        case writing, finished, abandoned, failed
    }

    private let dir: DataDirectory
    private let temporaryName: String
    private let finalName: String
    private let state = Atomic<UInt8>(State.writing.rawValue)
    private var fd: FileDescriptor?
    private var buffer: [UInt8]
    private var buffered = 0
    /// File offset where `buffer[0]` goes.
    private var fileOffset = 0
    private var entryCount: UInt64 = 0
    private static let bufferSize = 1 << 20

    init(dir: DataDirectory, coveredSequence: UInt64) throws(JournalError) {
        self.dir = dir
        self.coveredSequence = coveredSequence
        self.finalName = JournalFormat.snapshotName(coveredSequence)
        self.temporaryName = finalName + ".tmp"
        // Start small (most snapshots in tests and small deployments are small); `flush` grows it.
        self.buffer = [UInt8](repeating: 0, count: 64 << 10)
        self.fd = try dir.open(temporaryName, .writeOnly, [.create, .truncate])
        // The header's entry count is unknown until `finish`, which rewrites the header.
        let header = JournalFormat.snapshotHeader(sequence: coveredSequence, entryCount: 0)
        buffer.replaceSubrange(0..<header.count, with: header)
        buffered = header.count
    }

    deinit {
        if let fd { dir.closeQuietly(fd) }
    }

    var isFinished: Bool { state.load(ordering: .acquiring) == State.finished.rawValue }
    var isAbandoned: Bool {
        let current = state.load(ordering: .acquiring)
        return current == State.abandoned.rawValue || current == State.failed.rawValue
    }

    /// Adds one entry (at most ``JournalFormat/maximumEntryBytes``). Buffered: nothing may be on
    /// disk until a later call or `finish()`.
    /// - Throws: `.writeFailed` (abandon the writer), `.invalidState` after `finish`/`abandon`,
    ///   `.invalidArgument` for an oversized entry.
    public func append(_ entry: [UInt8]) throws(JournalError) {
        try checkWriting()
        guard entry.count <= JournalFormat.maximumEntryBytes else {
            throw JournalError(.invalidArgument, "snapshot entry of \(entry.count) bytes exceeds the limit")
        }
        let frameSize = JournalFormat.entryOverhead + entry.count
        if buffered + frameSize > buffer.count {
            try flush()
            if frameSize > buffer.count { buffer = [UInt8](repeating: 0, count: frameSize) }
        }
        let at = buffered
        buffer.withUnsafeMutableBytes { bytes in
            entry.withUnsafeBytes { source in
                bytes.storeLE(UInt32(source.count), at: at)
                bytes.storeLE(CRC32C.checksum(source), at: at + 4)
                guard let from = source.baseAddress, let to = bytes.baseAddress else { return }
                (to + at + JournalFormat.entryOverhead).copyMemory(from: from, byteCount: source.count)
            }
        }
        buffered += frameSize
        entryCount += 1
    }

    /// Completes the snapshot: writes the rest and the trailer, rewrites the header with the
    /// entry count, `fsync`s the file, renames it to `snapshot-<sequence>.snap` and `fsync`s the
    /// directory. Afterwards hand the writer to ``Journal/snapshotCompleted(_:)``.
    ///
    /// A failure here never harms the journal: the snapshot is simply not used. That is why a
    /// failed `fsync` of the snapshot is reported as `.writeFailed`, not `.syncFailed`.
    /// - Throws: `.writeFailed`, `.io`; then call ``abandon()``.
    public func finish() throws(JournalError) {
        try checkWriting()
        guard let fd else { throw JournalError(.invalidState, "snapshot writer has no file") }
        do throws(JournalError) {
            let trailer = JournalFormat.snapshotTrailer(entryCount: entryCount)
            if buffered + trailer.count > buffer.count { try flush() }
            buffer.replaceSubrange(buffered..<(buffered + trailer.count), with: trailer)
            buffered += trailer.count
            try flush()
            let header = JournalFormat.snapshotHeader(sequence: coveredSequence, entryCount: entryCount)
            try dir.writeAll(fd, temporaryName, header, at: 0)
            do {
                try dir.fs.sync(fd)
            } catch {
                throw JournalError(.writeFailed, "fsync of \(dir.path(temporaryName)) failed", errno: error)
            }
            dir.closeQuietly(fd)
            self.fd = nil
            do {
                try dir.fs.rename(dir.path(temporaryName), to: dir.path(finalName))
            } catch {
                throw JournalError(.io, "cannot rename \(dir.path(temporaryName)) to \(finalName)", errno: error)
            }
            do {
                try dir.syncDirectory()
            } catch {
                throw JournalError(.writeFailed, error.message, errno: error.errno)
            }
        } catch {
            state.store(State.failed.rawValue, ordering: .releasing)
            throw error
        }
        state.store(State.finished.rawValue, ordering: .releasing)
    }

    /// Gives the snapshot up: closes and removes the temporary file. Harmless after a failure;
    /// does nothing after a successful `finish()`.
    public func abandon() {
        guard !isFinished else { return }
        if let fd { dir.closeQuietly(fd) }
        fd = nil
        try? dir.unlink(temporaryName)
        state.store(State.abandoned.rawValue, ordering: .releasing)
    }

    private func checkWriting() throws(JournalError) {
        guard state.load(ordering: .acquiring) == State.writing.rawValue else {
            throw JournalError(.invalidState, "snapshot \(finalName) is no longer being written")
        }
    }

    private func flush() throws(JournalError) {
        guard buffered > 0 else { return }
        guard let fd else { throw JournalError(.invalidState, "snapshot writer has no file") }
        let count = buffered
        try buffer.withBytes { bytes throws(JournalError) in
            try dir.writeAll(fd, temporaryName, UnsafeRawBufferPointer(rebasing: bytes[0..<count]), at: fileOffset)
        }
        fileOffset += count
        buffered = 0
        if buffer.count < Self.bufferSize { buffer = [UInt8](repeating: 0, count: Self.bufferSize) }
    }
}
