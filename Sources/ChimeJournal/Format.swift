/// The on-disk format of a Chime data directory, version 1.
///
/// Every integer is little-endian. Every checksum is CRC-32C (``CRC32C``).
///
/// ## Directory
///
/// | name | what |
/// |---|---|
/// | `LOCK` | `flock`ed exclusively by the one `Journal` that owns the directory; holds its pid as text |
/// | `journal-<first sequence, 20 digits>.log` | a segment: records with consecutive sequences |
/// | `snapshot-<covered sequence, 20 digits>.snap` | the state after applying every record up to that sequence |
/// | `*.tmp` | a snapshot being written; removed when the journal opens |
/// | `backup-<UTC time>/` | copies made by `JournalTools.repair` before it changed anything |
///
/// Anything else in the directory is ignored. The files under these names must be regular files:
/// the journal opens them with `O_NOFOLLOW | O_NONBLOCK` and checks them with `fstat`, and refuses
/// a symbolic link, a FIFO, a directory or any other kind (`JournalError.Code.badDirectory`).
///
/// ## Segment (`journal-….log`)
///
/// Header, 24 bytes:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | magic `CHIMEJNL` |
/// | 8 | 4 | format version, 1 |
/// | 12 | 8 | first sequence (equal to the one in the file name) |
/// | 20 | 4 | CRC-32C of bytes 0..<20 |
///
/// Then records, back to back, each:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | length L of everything after this field: 13 + payload size |
/// | 4 | 4 | CRC-32C of bytes 8..<4+L (type, sequence, payload) |
/// | 8 | 1 | type (opaque to the journal) |
/// | 9 | 8 | sequence |
/// | 17 | L-13 | payload |
///
/// Sequences start at 1 and grow by exactly 1 from record to record and from one segment to the
/// next; a segment's first record has the header's first sequence. A payload is at most
/// ``JournalFormat/maximumPayloadBytes``. A new segment is created by writing and `fsync`ing its
/// header and then `fsync`ing the directory; the segment it replaces is `fdatasync`ed first, so
/// only the newest segment can ever end in a torn record.
///
/// ## Snapshot (`snapshot-….snap`)
///
/// Header, 36 bytes:
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | magic `CHIMESNP` |
/// | 8 | 4 | format version, 1 |
/// | 12 | 4 | reserved, 0 |
/// | 16 | 8 | covered sequence (equal to the one in the file name) |
/// | 24 | 8 | entry count |
/// | 32 | 4 | CRC-32C of bytes 0..<32 |
///
/// Then `entry count` entries, each `length` (4) + CRC-32C of the entry bytes (4) + the bytes.
/// Then a 20-byte trailer: magic `CHIMEEND` (8), entry count again (8), CRC-32C of those 16
/// bytes (4). The file ends right after the trailer, so a truncated or extended file is detected.
/// A snapshot is written as `snapshot-….snap.tmp`, `fsync`ed, renamed into place, and the
/// directory `fsync`ed.
///
/// ## Recovery
///
/// The newest snapshot that reads back whole is used (a damaged one is skipped with a warning,
/// which is why two are kept); then every record with a greater sequence is replayed from the
/// segments. The oldest segment kept must start at or before the snapshot's sequence + 1, and
/// each segment must start where the previous one ended (a gap is tolerated only where the
/// snapshot in use covers it, as `repair` can leave). Every segment is checked, including
/// those the snapshot covers, since they are the fallback if the snapshot is damaged.
///
/// Only the end of the newest segment may be damaged: a bad record there (short, impossible
/// length, CRC mismatch) after which no frame with a matching CRC and a greater sequence can be
/// found is a torn write, truncated with a warning. A newest segment shorter than its header is
/// a crash while it was created, and is removed. Any other damage makes `Journal.open` refuse
/// with ``JournalError/Code/corrupt``, naming file and offset; `JournalTools.repair` fixes it.
///
/// ## Compatibility
///
/// The version fields let a later release read older files; a reader refuses a version it does
/// not know. `Tests/ChimeJournalTests/Fixtures/v1/` is a version 1 directory that every later
/// version must still read.
public enum JournalFormat {
    /// The version this code writes.
    public static let version: UInt32 = 1
    /// The largest record payload accepted by `append` and by recovery.
    public static let maximumPayloadBytes = 64 << 20
    /// The largest snapshot entry.
    public static let maximumEntryBytes = 64 << 20
    /// Sequences (in names and headers) above this are not Chime's, whatever their checksum:
    /// the bound keeps `sequence + 1` from ever overflowing on a crafted file. At a million
    /// records a second it would take over 100,000 years to reach.
    public static let maximumSequence: UInt64 = 1 << 62

    static let segmentMagic: [UInt8] = Array("CHIMEJNL".utf8)
    static let snapshotMagic: [UInt8] = Array("CHIMESNP".utf8)
    static let trailerMagic: [UInt8] = Array("CHIMEEND".utf8)
    static let segmentHeaderSize = 24
    /// length + CRC + type + sequence.
    static let recordOverhead = 17
    static let snapshotHeaderSize = 36
    static let entryOverhead = 8
    static let trailerSize = 20
    static let lockName = "LOCK"

    static func segmentName(_ firstSequence: UInt64) -> String { "journal-\(pad20(firstSequence)).log" }
    static func snapshotName(_ sequence: UInt64) -> String { "snapshot-\(pad20(sequence)).snap" }

    /// The sequence in a `journal-<20 digits>.log` name, nil for any other name.
    static func segmentSequence(_ name: String) -> UInt64? { sequence(in: name, prefix: "journal-", suffix: ".log") }
    /// The sequence in a `snapshot-<20 digits>.snap` name, nil for any other name.
    static func snapshotSequence(_ name: String) -> UInt64? {
        sequence(in: name, prefix: "snapshot-", suffix: ".snap")
    }

    private static func pad20(_ value: UInt64) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }

    private static func sequence(in name: String, prefix: String, suffix: String) -> UInt64? {
        guard name.utf8.count == prefix.utf8.count + 20 + suffix.utf8.count, name.hasPrefix(prefix),
            name.hasSuffix(suffix)
        else { return nil }
        let digits = name.utf8.dropFirst(prefix.utf8.count).prefix(20)
        guard digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        guard let value = UInt64(Substring(digits)), value <= maximumSequence else { return nil }
        return value
    }

    static func segmentHeader(firstSequence: UInt64) -> [UInt8] {
        var header = segmentMagic
        header.appendLittleEndian(version)
        header.appendLittleEndian(firstSequence)
        header.appendLittleEndian(CRC32C.checksum(header))
        return header
    }

    static func snapshotHeader(sequence: UInt64, entryCount: UInt64) -> [UInt8] {
        var header = snapshotMagic
        header.appendLittleEndian(version)
        header.appendLittleEndian(UInt32(0))
        header.appendLittleEndian(sequence)
        header.appendLittleEndian(entryCount)
        header.appendLittleEndian(CRC32C.checksum(header))
        return header
    }

    static func snapshotTrailer(entryCount: UInt64) -> [UInt8] {
        var trailer = trailerMagic
        trailer.appendLittleEndian(entryCount)
        trailer.appendLittleEndian(CRC32C.checksum(trailer))
        return trailer
    }
}

extension Array where Element == UInt8 {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

extension UnsafeRawBufferPointer {
    /// A little-endian integer at `offset`; the caller has checked the bounds.
    @inline(__always)
    func le<T: FixedWidthInteger>(_ offset: Int, as: T.Type = T.self) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

extension UnsafeMutableRawBufferPointer {
    @inline(__always)
    func storeLE<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` keeping the closure's typed error (the standard one only rethrows `any Error`).
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeBytes { bytes in
            do throws(E) { return .success(try body(bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// `withUnsafeMutableBytes` keeping the closure's typed error.
    mutating func withMutableBytes<R, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E)
        -> R
    {
        let result: Result<R, E> = withUnsafeMutableBytes { bytes in
            do throws(E) { return .success(try body(bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}

extension Array where Element == UInt8 {
    /// A copy of `bytes` with one `memcpy` (`Array(bytes)` would go byte by byte through the
    /// sequence protocol, which dominates recovery of a million snapshot entries).
    init(copying bytes: UnsafeRawBufferPointer) {
        self.init(unsafeUninitializedCapacity: bytes.count) { buffer, count in
            if let target = buffer.baseAddress, let source = bytes.baseAddress {
                UnsafeMutableRawPointer(target).copyMemory(from: source, byteCount: bytes.count)
            }
            count = bytes.count
        }
    }
}
