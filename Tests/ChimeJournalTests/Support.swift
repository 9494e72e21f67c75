import ChimeJournal
import Foundation
import Synchronization

/// A fresh directory under the system temporary directory, removed by `remove()`.
///
/// Tests create one per case (`defer { scratch.remove() }`) so they can run in parallel.
struct TemporaryDirectory {
    let path: String

    init() {
        path = NSTemporaryDirectory() + "/chime-journal-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// A path inside the directory (not created).
    func path(_ name: String) -> String { path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

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

/// A ``FileSystem`` that forwards to the real one, counts calls, and fails the calls a test
/// chooses: with an errno, with a short write, or with a partial write followed by an error.
final class FaultyFileSystem: FileSystem {
    enum Operation: Hashable, Sendable {
        case open, close, read, write, truncate, dataSync, sync, size, rename, unlink, makeDirectory, list, lock
    }

    /// One call as the fault rule sees it.
    struct Call: Sendable {
        var operation: Operation
        /// The path involved (for descriptors: the path they were opened with).
        var path: String
        /// How many calls of this operation came before, in total.
        var count: Int
        /// Counts of every operation so far.
        var counts: [Operation: Int]
    }

    enum Fault: Sendable {
        /// Fail with this errno, doing nothing.
        case fail(Errno)
        /// Write only this many bytes and report success (a short write).
        case short(Int)
        /// Write this many bytes, then report this errno.
        case partialThenFail(Int, Errno)
    }

    private struct State {
        var counts: [Operation: Int] = [:]
        var paths: [Int32: String] = [:]
        var rule: (@Sendable (Call) -> Fault?)?
    }

    private let real = SystemFileSystem()
    private let state = Mutex(State())

    /// Sets the rule deciding which calls fail; nil lets everything through.
    func inject(_ rule: (@Sendable (Call) -> Fault?)?) {
        state.withLock { $0.rule = rule }
    }

    func count(_ operation: Operation) -> Int { state.withLock { $0.counts[operation] ?? 0 } }

    private func check(_ operation: Operation, _ path: String) -> Fault? {
        let (rule, call) = state.withLock { state in
            let count = state.counts[operation] ?? 0
            state.counts[operation] = count + 1
            return (state.rule, Call(operation: operation, path: path, count: count, counts: state.counts))
        }
        return rule?(call)
    }

    private func path(_ fd: FileDescriptor) -> String { state.withLock { $0.paths[fd.rawValue] ?? "?" } }

    private func failIfAsked(_ operation: Operation, _ path: String) throws(Errno) {
        if case .fail(let errno) = check(operation, path) { throw errno }
    }

    func open(_ path: String, access: FileAccess, options: OpenOptions) throws(Errno) -> FileDescriptor {
        try failIfAsked(.open, path)
        let fd = try real.open(path, access: access, options: options)
        state.withLock { $0.paths[fd.rawValue] = path }
        return fd
    }

    func close(_ fd: FileDescriptor) throws(Errno) {
        _ = check(.close, path(fd))
        state.withLock { _ = $0.paths.removeValue(forKey: fd.rawValue) }
        try real.close(fd)
    }

    func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try failIfAsked(.read, path(fd))
        return try real.read(fd, into: buffer, at: offset)
    }

    func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        switch check(.write, path(fd)) {
        case .fail(let errno):
            throw errno
        case .short(let count):
            return try real.write(fd, UnsafeRawBufferPointer(rebasing: bytes.prefix(count)), at: offset)
        case .partialThenFail(let count, let errno):
            _ = try real.write(fd, UnsafeRawBufferPointer(rebasing: bytes.prefix(count)), at: offset)
            throw errno
        case nil:
            return try real.write(fd, bytes, at: offset)
        }
    }

    func truncate(_ fd: FileDescriptor, to length: Int) throws(Errno) {
        try failIfAsked(.truncate, path(fd))
        try real.truncate(fd, to: length)
    }

    func dataSync(_ fd: FileDescriptor) throws(Errno) {
        try failIfAsked(.dataSync, path(fd))
        try real.dataSync(fd)
    }

    func sync(_ fd: FileDescriptor) throws(Errno) {
        try failIfAsked(.sync, path(fd))
        try real.sync(fd)
    }

    func size(of fd: FileDescriptor) throws(Errno) -> Int {
        try failIfAsked(.size, path(fd))
        return try real.size(of: fd)
    }

    func rename(_ source: String, to destination: String) throws(Errno) {
        try failIfAsked(.rename, source)
        try real.rename(source, to: destination)
    }

    func unlink(_ path: String) throws(Errno) {
        try failIfAsked(.unlink, path)
        try real.unlink(path)
    }

    func makeDirectory(_ path: String) throws(Errno) {
        try failIfAsked(.makeDirectory, path)
        try real.makeDirectory(path)
    }

    func listDirectory(_ path: String) throws(Errno) -> [String] {
        try failIfAsked(.list, path)
        return try real.listDirectory(path)
    }

    func lock(_ fd: FileDescriptor, exclusive: Bool) throws(Errno) {
        try failIfAsked(.lock, path(fd))
        try real.lock(fd, exclusive: exclusive)
    }
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
    static func state(_ recovery: Recovery) -> [[UInt8]] {
        (recovery.snapshot?.entries.map(Array.init) ?? []) + recovery.records.map(\.payload)
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
