import ChimeJournal
import Dispatch
import Synchronization

/// The journal's ``FileSystem`` seam with faults on demand: forwards every call to the real file
/// system, counts calls, and lets a rule decide which of them fail (with an errno, a short write,
/// a partial write then an error) or wait until ``release()``.
///
/// Safe to change the rule from a test while the journal's threads (a worker's loop, its snapshot
/// thread) use it.
///
/// ```swift
/// let disk = FaultyFileSystem()
/// disk.inject { $0.operation == .dataSync ? .fail(.ioError) : nil }
/// ```
public final class FaultyFileSystem: FileSystem {
    public enum Operation: Hashable, Sendable {
        case open, close, read, write, truncate, dataSync, sync, size, kind, rename, unlink, makeDirectory, list, lock
    }

    /// One call as the fault rule sees it.
    public struct Call: Sendable {
        public var operation: Operation
        /// The path involved (for descriptors: the path they were opened with).
        public var path: String
        /// How many calls of this operation came before, in total.
        public var count: Int
        /// Counts of every operation so far.
        public var counts: [Operation: Int]
        /// The bytes a write was asked to write; 0 for other calls.
        public var length: Int
    }

    public enum Fault: Sendable {
        /// Fail with this errno, doing nothing.
        case fail(Errno)
        /// Write only this many bytes and report success (a short write).
        case short(Int)
        /// Write this many bytes, then report this errno.
        case partialThenFail(Int, Errno)
        /// Wait until ``FaultyFileSystem/release()``, then go ahead.
        case hold
    }

    private struct State {
        var counts: [Operation: Int] = [:]
        var faults: [Operation: Int] = [:]
        var held = 0
        var paths: [Int32: String] = [:]
        var rule: (@Sendable (Call) -> Fault?)?
    }

    private let real = SystemFileSystem()
    private let state = Mutex(State())
    private let gate = DispatchSemaphore(value: 0)

    public init() {}

    /// Sets the rule deciding which calls fail or wait; nil lets everything through.
    public func inject(_ rule: (@Sendable (Call) -> Fault?)?) {
        state.withLock { $0.rule = rule }
    }

    /// Lets every call waiting on a ``Fault/hold`` go on (a call held later waits again).
    public func release() {
        let waiting = state.withLock { $0.held }
        for _ in 0..<waiting { gate.signal() }
    }

    /// Calls of `operation` so far.
    public func count(_ operation: Operation) -> Int { state.withLock { $0.counts[operation] ?? 0 } }

    /// Calls of `operation` the rule made fail, wait or write short so far.
    public func faults(_ operation: Operation) -> Int { state.withLock { $0.faults[operation] ?? 0 } }

    /// Calls waiting on a ``Fault/hold`` now.
    public var held: Int { state.withLock { $0.held } }

    /// Counts the call and asks the rule; waits here if it says ``Fault/hold``.
    private func check(_ operation: Operation, _ path: String, length: Int = 0) -> Fault? {
        let fault = state.withLock { state -> Fault? in
            let count = state.counts[operation] ?? 0
            state.counts[operation] = count + 1
            let call = Call(operation: operation, path: path, count: count, counts: state.counts, length: length)
            guard let fault = state.rule?(call) else { return nil }
            state.faults[operation, default: 0] += 1
            if case .hold = fault { state.held += 1 }
            return fault
        }
        if case .hold = fault {
            gate.wait()
            state.withLock { $0.held -= 1 }
            return nil
        }
        return fault
    }

    private func path(_ fd: FileDescriptor) -> String { state.withLock { $0.paths[fd.rawValue] ?? "?" } }

    private func failIfAsked(_ operation: Operation, _ path: String) throws(Errno) {
        if case .fail(let errno) = check(operation, path) { throw errno }
    }

    public func open(_ path: String, access: FileAccess, options: OpenOptions) throws(Errno) -> FileDescriptor {
        try failIfAsked(.open, path)
        let fd = try real.open(path, access: access, options: options)
        state.withLock { $0.paths[fd.rawValue] = path }
        return fd
    }

    public func close(_ fd: FileDescriptor) throws(Errno) {
        _ = check(.close, path(fd))
        state.withLock { _ = $0.paths.removeValue(forKey: fd.rawValue) }
        try real.close(fd)
    }

    public func read(
        _ fd: FileDescriptor,
        into buffer: UnsafeMutableRawBufferPointer,
        at offset: Int
    ) throws(Errno) -> Int {
        try failIfAsked(.read, path(fd))
        return try real.read(fd, into: buffer, at: offset)
    }

    public func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        switch check(.write, path(fd), length: bytes.count) {
        case .fail(let errno):
            throw errno
        case .short(let count):
            return try real.write(fd, UnsafeRawBufferPointer(rebasing: bytes.prefix(count)), at: offset)
        case .partialThenFail(let count, let errno):
            _ = try real.write(fd, UnsafeRawBufferPointer(rebasing: bytes.prefix(count)), at: offset)
            throw errno
        case .hold, nil:
            return try real.write(fd, bytes, at: offset)
        }
    }

    public func truncate(_ fd: FileDescriptor, to length: Int) throws(Errno) {
        try failIfAsked(.truncate, path(fd))
        try real.truncate(fd, to: length)
    }

    public func dataSync(_ fd: FileDescriptor) throws(Errno) {
        try failIfAsked(.dataSync, path(fd))
        try real.dataSync(fd)
    }

    public func sync(_ fd: FileDescriptor) throws(Errno) {
        try failIfAsked(.sync, path(fd))
        try real.sync(fd)
    }

    public func size(of fd: FileDescriptor) throws(Errno) -> Int {
        try failIfAsked(.size, path(fd))
        return try real.size(of: fd)
    }

    public func kind(of fd: FileDescriptor) throws(Errno) -> FileKind {
        try failIfAsked(.kind, path(fd))
        return try real.kind(of: fd)
    }

    public func rename(_ source: String, to destination: String) throws(Errno) {
        try failIfAsked(.rename, source)
        try real.rename(source, to: destination)
    }

    public func unlink(_ path: String) throws(Errno) {
        try failIfAsked(.unlink, path)
        try real.unlink(path)
    }

    public func makeDirectory(_ path: String) throws(Errno) {
        try failIfAsked(.makeDirectory, path)
        try real.makeDirectory(path)
    }

    public func listDirectory(_ path: String) throws(Errno) -> [String] {
        try failIfAsked(.list, path)
        return try real.listDirectory(path)
    }

    public func lock(_ fd: FileDescriptor, exclusive: Bool) throws(Errno) {
        try failIfAsked(.lock, path(fd))
        try real.lock(fd, exclusive: exclusive)
    }
}
