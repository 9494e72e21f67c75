import ChimeCore

/// Damage found while reading the data directory: which file, where, and what.
struct ScanProblem: Error, Hashable, Sendable {
    var file: String
    var offset: Int
    var message: String

    var line: String { "\(file): offset \(offset): \(message)" }
}

/// What reading one segment found.
struct SegmentScan: Sendable {
    var name: String
    var firstSequence: UInt64
    var lastSequence: UInt64?
    var recordCount = 0
    /// Where the valid records end; the file's size when nothing is torn.
    var validEnd: Int
    var fileSize: Int
    /// A torn final record: the offset it starts at and why it is not a record.
    var tornTail: (offset: Int, reason: String)?
    /// The segment is shorter than its header (or its header is all zeros): a crash while it was created.
    var tornHeader = false

    /// The sequence the next record appended to this segment would carry.
    var nextSequence: UInt64 { (lastSequence ?? (firstSequence &- 1)) &+ 1 }
}

enum SegmentReader {
    /// Walks the records of one segment held in memory.
    ///
    /// - Parameters:
    ///   - isLast: only the newest segment may end in a torn record.
    ///   - onRecord: called for each valid record with its sequence, type, payload and frame size.
    /// - Throws: ``ScanProblem`` for damage that is not a torn tail.
    static func scan(
        _ bytes: UnsafeRawBufferPointer,
        name: String,
        nameSequence: UInt64,
        isLast: Bool,
        onRecord: (UInt64, UInt8, UnsafeRawBufferPointer, Int) -> Void
    ) throws(ScanProblem) -> SegmentScan {
        let size = bytes.count
        let headerSize = JournalFormat.segmentHeaderSize
        if size < headerSize || (size == headerSize && bytes.allSatisfy { $0 == 0 }) {
            guard isLast else {
                throw ScanProblem(file: name, offset: 0, message: "segment header is incomplete (\(size) bytes)")
            }
            return SegmentScan(
                name: name,
                firstSequence: nameSequence,
                validEnd: 0,
                fileSize: size,
                tornHeader: true
            )
        }
        guard bytes.prefix(8).elementsEqual(JournalFormat.segmentMagic) else {
            throw ScanProblem(file: name, offset: 0, message: "bad magic, not a Chime journal segment")
        }
        let version: UInt32 = bytes.le(8)
        guard version == JournalFormat.version else {
            throw ScanProblem(file: name, offset: 8, message: "unsupported format version \(version)")
        }
        let firstSequence: UInt64 = bytes.le(12)
        guard bytes.le(20, as: UInt32.self) == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<20])) else {
            throw ScanProblem(file: name, offset: 20, message: "segment header CRC mismatch")
        }
        guard firstSequence == nameSequence else {
            throw ScanProblem(
                file: name,
                offset: 12,
                message: "header says first sequence \(firstSequence), file name says \(nameSequence)"
            )
        }
        guard firstSequence > 0 else {
            throw ScanProblem(
                file: name,
                offset: 12,
                message: "segment starts at sequence 0, but sequences start at 1 (no journal writes a segment 0)"
            )
        }

        var scan = SegmentScan(name: name, firstSequence: firstSequence, validEnd: size, fileSize: size)
        var offset = headerSize
        var expected = firstSequence
        while offset < size {
            let reason: String
            let remaining = size - offset
            if remaining < JournalFormat.recordOverhead {
                reason = "partial record (\(remaining) bytes)"
            } else {
                let length = Int(bytes.le(offset, as: UInt32.self))
                if length < JournalFormat.recordOverhead - 4
                    || length > JournalFormat.maximumPayloadBytes + JournalFormat.recordOverhead - 4
                {
                    reason = "invalid record length \(length)"
                } else if length > remaining - 4 {
                    reason = "record length \(length) runs past the end of the file"
                } else {
                    let body = UnsafeRawBufferPointer(rebasing: bytes[(offset + 8)..<(offset + 4 + length)])
                    if CRC32C.checksum(body) != bytes.le(offset + 4, as: UInt32.self) {
                        reason = "record CRC mismatch"
                    } else {
                        let sequence: UInt64 = bytes.le(offset + 9)
                        guard sequence == expected else {
                            throw ScanProblem(
                                file: name,
                                offset: offset,
                                message: "sequence \(sequence) where \(expected) was expected"
                            )
                        }
                        onRecord(
                            sequence,
                            bytes[offset + 8],
                            UnsafeRawBufferPointer(rebasing: bytes[(offset + 17)..<(offset + 4 + length)]),
                            4 + length
                        )
                        scan.lastSequence = sequence
                        scan.recordCount += 1
                        expected += 1
                        offset += 4 + length
                        continue
                    }
                }
            }
            // A damaged frame. At the end of the newest segment with nothing valid after it, it is
            // the record that was being written when the process or machine stopped: never
            // acknowledged (its fdatasync had not returned), so it is safe to drop. Anywhere else
            // it is damage to acknowledged data, and recovery must not guess.
            guard isLast else {
                throw ScanProblem(file: name, offset: offset, message: "\(reason) in a segment that is not the newest")
            }
            if let later = validFrame(in: bytes, after: offset, lastGood: expected - 1) {
                throw ScanProblem(
                    file: name,
                    offset: offset,
                    message:
                        "\(reason), but a valid record (sequence \(later.sequence)) follows at offset \(later.offset)"
                )
            }
            scan.validEnd = offset
            scan.tornTail = (offset, reason)
            break
        }
        return scan
    }

    /// The first offset after `start` holding a frame whose CRC checks and whose sequence is
    /// greater than `lastGood`.
    ///
    /// A cheap plausibility test on the sequence comes first: a genuine later record with
    /// sequence `lastGood + k` lies at least `17 × (k − 1)` bytes after `start`, so `k` is
    /// bounded by the bytes left. That keeps the search linear even over megabytes of payload.
    static func validFrame(
        in bytes: UnsafeRawBufferPointer,
        after start: Int,
        lastGood: UInt64
    )
        -> (offset: Int, sequence: UInt64)?
    {
        let size = bytes.count
        let overhead = JournalFormat.recordOverhead
        guard size - start > overhead else { return nil }
        let maximumStep = UInt64((size - start) / overhead + 1)
        var candidate = start + 1
        while candidate + overhead <= size {
            defer { candidate += 1 }
            let sequence: UInt64 = bytes.le(candidate + 9)
            guard sequence > lastGood, sequence - lastGood <= maximumStep else { continue }
            let length = Int(bytes.le(candidate, as: UInt32.self))
            guard length >= overhead - 4, length <= size - candidate - 4 else { continue }
            let body = UnsafeRawBufferPointer(rebasing: bytes[(candidate + 8)..<(candidate + 4 + length)])
            if CRC32C.checksum(body) == bytes.le(candidate + 4, as: UInt32.self) {
                return (candidate, sequence)
            }
        }
        return nil
    }
}

/// A snapshot file whose every frame was checked, held open: it reads back the same even if it
/// is deleted meanwhile (by a worker, when a tool read the directory without the lock).
final class SnapshotFile: SnapshotSource {
    let dir: DataDirectory
    let fd: FileDescriptor
    let name: String
    let size: Int
    let sequence: UInt64
    let count: Int
    /// What the engine needs to know before restoring the entries, counted while they were
    /// checked, so that recovery reads the file twice and not three times.
    let sizing: SnapshotSizing

    /// Checks a whole snapshot, counting its ``sizing`` on the way.
    ///
    /// - Parameters:
    ///   - fd: the snapshot, opened with ``DataDirectory/open(_:_:_:)``; closed when this throws.
    ///   - sequence: the sequence in the file name, which the header must repeat.
    /// - Throws: ``ScanProblem`` for anything that keeps the snapshot from being used, including I/O errors.
    init(_ dir: DataDirectory, fd: FileDescriptor, name: String, sequence: UInt64) throws(ScanProblem) {
        let size: Int
        do {
            size = try dir.size(fd, name)
        } catch {
            dir.closeQuietly(fd)
            throw ScanProblem(file: name, offset: 0, message: error.description)
        }
        var sizing = SnapshotSizing()
        do throws(ScanProblem) {
            count = Int(
                try SnapshotReader.read(dir, fd, name: name, size: size, expectedSequence: sequence) {
                    sizing.count($0)
                }
            )
        } catch {
            dir.closeQuietly(fd)
            throw error
        }
        (self.dir, self.fd, self.name, self.size, self.sequence) = (dir, fd, name, size, sequence)
        self.sizing = sizing
    }

    deinit { dir.closeQuietly(fd) }

    /// Reads the snapshot again, a chunk at a time, checking every frame again, and hands each
    /// entry to `body`: no buffer the size of the file.
    /// - Throws: what `body` throws, or ``JournalError/corrupt`` if the file no longer reads as it did when checked.
    func forEachEntry(_ body: (ArraySlice<UInt8>) throws(JournalError) -> Void) throws(JournalError) {
        var failure: JournalError?
        do throws(ScanProblem) {
            _ = try SnapshotReader.read(dir, fd, name: name, size: size, expectedSequence: sequence) {
                entry throws(ScanProblem) in
                do throws(JournalError) {
                    try body(entry)
                } catch {
                    failure = error
                    throw ScanProblem(file: self.name, offset: 0, message: error.message)
                }
            }
        } catch {
            if let failure { throw failure }
            throw JournalError(.corrupt, "\(dir.path(name)) no longer reads as it did at start-up: \(error.line)")
        }
    }
}

/// Reads a snapshot file in large chunks, checking every frame.
enum SnapshotReader {
    private static let chunkSize = 4 << 20

    /// Reads and checks a whole snapshot from an open descriptor.
    ///
    /// - Parameters:
    ///   - expectedSequence: the sequence in the file name, which the header must repeat.
    ///   - onEntry: called with each entry's bytes, a slice of the read buffer that must not
    ///     outlive the call.
    /// - Returns: the number of entries.
    /// - Throws: ``ScanProblem`` for anything that keeps the snapshot from being used, including
    ///   I/O errors, or what `onEntry` throws.
    static func read(
        _ dir: DataDirectory,
        _ fd: FileDescriptor,
        name: String,
        size: Int,
        expectedSequence: UInt64,
        onEntry: (ArraySlice<UInt8>) throws(ScanProblem) -> Void = { _ in }
    ) throws(ScanProblem) -> UInt64 {
        var reader = ChunkReader(dir: dir, fd: fd, name: name, size: size, chunkSize: chunkSize)

        let header = JournalFormat.snapshotHeaderSize
        let (sequence, count) = try reader.next(header) { bytes throws(ScanProblem) in
            guard bytes.prefix(8).elementsEqual(JournalFormat.snapshotMagic) else {
                throw ScanProblem(file: name, offset: 0, message: "bad magic, not a Chime snapshot")
            }
            let version: UInt32 = bytes.le(8)
            guard version == JournalFormat.version else {
                throw ScanProblem(file: name, offset: 8, message: "unsupported format version \(version)")
            }
            guard bytes.le(32, as: UInt32.self) == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<32]))
            else {
                throw ScanProblem(file: name, offset: 32, message: "snapshot header CRC mismatch")
            }
            return (bytes.le(16, as: UInt64.self), bytes.le(24, as: UInt64.self))
        }
        guard sequence == expectedSequence else {
            throw ScanProblem(
                file: name,
                offset: 16,
                message: "header says sequence \(sequence), file name says \(expectedSequence)"
            )
        }
        let minimumSize = UInt64(header + JournalFormat.trailerSize)
        guard count <= (UInt64(size) &- minimumSize) / UInt64(JournalFormat.entryOverhead), UInt64(size) >= minimumSize
        else {
            throw ScanProblem(file: name, offset: 24, message: "entry count \(count) does not fit in \(size) bytes")
        }
        for index in 0..<count {
            let frameOffset = reader.position
            let (length, crc) = try reader.next(JournalFormat.entryOverhead) { bytes throws(ScanProblem) in
                (Int(bytes.le(0, as: UInt32.self)), bytes.le(4, as: UInt32.self))
            }
            guard length <= JournalFormat.maximumEntryBytes else {
                throw ScanProblem(file: name, offset: frameOffset, message: "entry \(index): invalid length \(length)")
            }
            try reader.nextSlice(length) { bytes throws(ScanProblem) in
                guard bytes.withUnsafeBytes({ CRC32C.checksum($0) }) == crc else {
                    throw ScanProblem(file: name, offset: frameOffset, message: "entry \(index): CRC mismatch")
                }
                try onEntry(bytes)
            }
        }
        let trailerOffset = reader.position
        try reader.next(JournalFormat.trailerSize) { bytes throws(ScanProblem) in
            guard bytes.prefix(8).elementsEqual(JournalFormat.trailerMagic),
                bytes.le(16, as: UInt32.self) == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<16])),
                bytes.le(8, as: UInt64.self) == count
            else {
                throw ScanProblem(file: name, offset: trailerOffset, message: "bad trailer")
            }
        }
        guard reader.position == size else {
            throw ScanProblem(
                file: name,
                offset: reader.position,
                message: "\(size - reader.position) unexpected bytes after the trailer"
            )
        }
        return count
    }
}

/// Sequential reads through a buffer refilled in large chunks.
private struct ChunkReader {
    let dir: DataDirectory
    let fd: FileDescriptor
    let name: String
    let size: Int
    private var buffer: [UInt8]
    /// File offset of `buffer[0]`.
    private var bufferOffset = 0
    private var start = 0
    private var end = 0

    init(dir: DataDirectory, fd: FileDescriptor, name: String, size: Int, chunkSize: Int) {
        self.dir = dir
        self.fd = fd
        self.name = name
        self.size = size
        self.buffer = [UInt8](repeating: 0, count: min(chunkSize, max(size, 64)))
    }

    /// File offset of the next unread byte.
    var position: Int { bufferOffset + start }

    /// Hands the next `count` bytes to `body` and moves past them.
    mutating func next<R>(
        _ count: Int,
        _ body: (UnsafeRawBufferPointer) throws(ScanProblem) -> R
    ) throws(ScanProblem)
        -> R
    {
        try prepare(count)
        let result = try buffer.withBytes { bytes throws(ScanProblem) in
            try body(UnsafeRawBufferPointer(rebasing: bytes[start..<(start + count)]))
        }
        start += count
        return result
    }

    /// Hands the next `count` bytes to `body` as a slice of the buffer, and moves past them.
    mutating func nextSlice(_ count: Int, _ body: (ArraySlice<UInt8>) throws(ScanProblem) -> Void) throws(ScanProblem) {
        try prepare(count)
        try body(buffer[start..<(start + count)])
        start += count
    }

    /// Makes sure the next `count` bytes are in the buffer.
    private mutating func prepare(_ count: Int) throws(ScanProblem) {
        guard count <= size - position else {
            throw ScanProblem(
                file: name,
                offset: position,
                message: "file ends after \(size) bytes, \(count) more bytes expected (truncated)"
            )
        }
        if end - start < count { try fill(count) }
    }

    private mutating func fill(_ count: Int) throws(ScanProblem) {
        let kept = end - start
        if start > 0 && kept > 0 {
            buffer.withUnsafeMutableBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                base.copyMemory(from: base + start, byteCount: kept)
            }
        }
        bufferOffset += start
        start = 0
        end = kept
        if buffer.count < count {
            buffer.append(contentsOf: repeatElement(0, count: count - buffer.count))
        }
        let readOffset = bufferOffset + end
        let want = min(buffer.count - end, size - readOffset)
        let got: Int
        let (dir, fd, name, from) = (self.dir, self.fd, self.name, end)
        do throws(JournalError) {
            got = try buffer.withMutableBytes { bytes throws(JournalError) in
                let target = UnsafeMutableRawBufferPointer(rebasing: bytes[from..<(from + want)])
                return try dir.read(fd, name, into: target, at: readOffset)
            }
        } catch {
            throw ScanProblem(file: name, offset: readOffset, message: error.description)
        }
        end += got
        guard end >= count else {
            throw ScanProblem(file: name, offset: bufferOffset + end, message: "file shrank while being read")
        }
    }
}
