import ChimeJournal
import Foundation
import Synchronization

/// Byte-level access to files, for damaging them on purpose.
enum Disk {
    static func read(_ path: String) -> [UInt8] {
        (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? []
    }

    static func write(_ path: String, _ bytes: [UInt8]) {
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
    }

    static func truncate(_ path: String, to length: Int) {
        write(path, Array(read(path).prefix(length)))
    }

    static func flipBit(_ path: String, at offset: Int, bit: UInt8 = 0) {
        var bytes = read(path)
        bytes[offset] ^= 1 << bit
        write(path, bytes)
    }

    static func size(_ path: String) -> Int { read(path).count }

    static func list(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Copies a directory tree (for opening a fixture without changing it).
    static func copyDirectory(_ source: String, to destination: String) {
        try? FileManager.default.removeItem(atPath: destination)
        try? FileManager.default.copyItem(atPath: source, toPath: destination)
    }

    /// Start offsets of the records in a segment, plus the offset where the last one ends.
    static func recordBoundaries(_ path: String) -> [Int] {
        let bytes = read(path)
        var offsets = [24]
        var offset = 24
        while offset + 4 <= bytes.count {
            let length =
                Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 | Int(bytes[offset + 2]) << 16
                | Int(bytes[offset + 3]) << 24
            offset += 4 + length
            offsets.append(offset)
        }
        return offsets
    }

    static func segments(_ directory: String) -> [String] { list(directory).filter { $0.hasPrefix("journal-") } }
    static func snapshots(_ directory: String) -> [String] { list(directory).filter { $0.hasSuffix(".snap") } }
}

/// Deterministic test content.
enum Content {
    /// The payload of record `sequence` in most tests: varied lengths, including empty.
    static func payload(_ sequence: UInt64) -> [UInt8] {
        sequence < UInt64(cache.count) ? cache[Int(sequence)] : makePayload(sequence)
    }

    /// Payloads are computed once: the power-loss tests build states of thousands of records
    /// many times over, and debug builds make byte-by-byte work slow.
    private static let cache = (0..<20_000).map { makePayload(UInt64($0)) }

    private static func makePayload(_ sequence: UInt64) -> [UInt8] {
        let length = Int((sequence &* 37) % 61)
        return (0..<length).map { UInt8(truncatingIfNeeded: Int(sequence) &* 31 &+ $0) }
    }

    static func type(_ sequence: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: sequence % 5) }

    static func record(_ sequence: UInt64) -> JournalRecord {
        JournalRecord(sequence: sequence, type: type(sequence), payload: payload(sequence))
    }

    /// A snapshot of the "state" after `sequence`: in these tests the state is simply every
    /// payload so far, one entry each, so recovery can be checked exactly.
    static func entries(through sequence: UInt64) -> [[UInt8]] {
        if sequence < UInt64(cache.count) { return Array(cache[1..<(Int(sequence) + 1)]) }
        return (1...sequence).map { payload($0) }
    }

    /// The state a recovery describes, in the same form as `entries(through:)`.
    static func state(_ recovery: Recovery) throws -> [[UInt8]] {
        (try recovery.snapshot?.loadEntries().map(Array.init) ?? []) + recovery.records.map(\.payload)
    }
}

extension Journal {
    /// Appends the standard content for sequences `lastSequence + 1 ... through`.
    func appendStandard(through last: UInt64) throws {
        while lastSequence < last {
            let sequence = lastSequence + 1
            try append(type: Content.type(sequence), payload: Content.payload(sequence))
        }
    }

    /// Takes a snapshot of the standard state on this thread.
    func snapshotStandard() throws {
        let writer = try beginSnapshot()
        for entry in Content.entries(through: writer.coveredSequence) { try writer.append(entry) }
        try writer.finish()
        try snapshotCompleted(writer)
    }
}
