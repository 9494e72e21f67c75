import ChimeJournal
import ChimeTestSupport
import Synchronization

/// An in-memory ``FileSystem`` that models what survives a power loss.
///
/// Each file keeps its current bytes and the bytes last made durable by `fsync`/`fdatasync`;
/// each directory keeps its current entries and those last made durable by an `fsync` of the
/// directory. ``powerCut(after:)`` makes the disk stop after a chosen number of further system
/// calls (every call then fails with `EIO`, as a machine that lost power would never return);
/// ``afterPowerLoss(seed:)`` is the disk as the next boot finds it: only durable directory
/// entries, and for each file its durable bytes plus, at random, part of what was written after
/// them (the kernel may have written some of it back), sometimes as zeros (a size update that
/// reached the disk before the data).
///
/// Only what the journal uses is modelled: a root directory `/` and directories directly in it.
final class SimulatedDisk: FileSystem {
    private struct Inode {
        var data: [UInt8] = []
        var durable: [UInt8] = []
        var isDirectory = false
    }

    private struct State {
        var inodes: [Int: Inode] = [0: Inode(isDirectory: true)]
        /// Directory path → name → inode.
        var entries: [String: [String: Int]] = ["/": [:]]
        var durableEntries: [String: [String: Int]] = ["/": [:]]
        var descriptors: [Int32: (inode: Int, path: String)] = [:]
        var locks: [Int: Int32] = [:]
        var nextInode = 1
        var nextDescriptor: Int32 = 3
        var remainingCalls: Int?
        var calls = 0
    }

    private let state: Mutex<State>

    init() { state = Mutex(State()) }

    private init(_ initial: State) { state = Mutex(initial) }

    /// The disk stops working after `calls` more system calls.
    func powerCut(after calls: Int?) { state.withLock { $0.remainingCalls = calls } }

    /// System calls made so far.
    var calls: Int { state.withLock { $0.calls } }

    /// The disk as found after the power loss.
    func afterPowerLoss(seed: UInt64) -> SimulatedDisk {
        var random = SplitMix64(seed: seed)
        return state.withLock { old in
            var new = State()
            new.nextInode = old.nextInode
            new.entries = ["/": [:]]
            for (name, inode) in old.durableEntries["/"] ?? [:] {
                new.entries["/"]?[name] = inode
                if old.inodes[inode]?.isDirectory == true {
                    new.entries["/" + name] = old.durableEntries["/" + name] ?? [:]
                }
            }
            new.durableEntries = new.entries
            for (number, inode) in old.inodes {
                var data = inode.durable
                if inode.data.count > data.count, inode.data.starts(with: data) {
                    var extra = Array(
                        inode.data[data.count..<(data.count + random.below(inode.data.count - data.count + 1))]
                    )
                    if random.below(4) == 0 { extra = [UInt8](repeating: 0, count: extra.count) }
                    data += extra
                }
                new.inodes[number] = Inode(data: data, durable: data, isDirectory: inode.isDirectory)
            }
            return SimulatedDisk(new)
        }
    }

    // MARK: FileSystem

    private func split(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return ("/", path) }
        let directory = String(path[..<slash])
        return (directory.isEmpty ? "/" : directory, String(path[path.index(after: slash)...]))
    }

    /// Counts a call, failing it if the power is gone.
    private func call<R>(_ body: (inout State) throws(Errno) -> R) throws(Errno) -> R {
        let result: Result<R, Errno> = state.withLock { state in
            state.calls += 1
            if let remaining = state.remainingCalls {
                if remaining <= 0 { return .failure(.ioError) }
                state.remainingCalls = remaining - 1
            }
            do throws(Errno) { return .success(try body(&state)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    private static func lookup(_ state: State, _ path: String, split: (String) -> (String, String)) -> Int? {
        if path == "/" { return 0 }
        if state.entries[path] != nil {
            let (directory, name) = split(path)
            return state.entries[directory]?[name]
        }
        let (directory, name) = split(path)
        return state.entries[directory]?[name]
    }

    func open(_ path: String, access: FileAccess, options: OpenOptions) throws(Errno) -> FileDescriptor {
        try call { state throws(Errno) in
            let (directory, name) = split(path)
            var inode = Self.lookup(state, path, split: split)
            if inode != nil && options.contains(.create) && options.contains(.exclusive) { throw .fileExists }
            if inode == nil {
                guard options.contains(.create), state.entries[directory] != nil else { throw .noSuchFile }
                inode = state.nextInode
                state.nextInode += 1
                state.inodes[state.nextInode - 1] = Inode()
                state.entries[directory]?[name] = state.nextInode - 1
            }
            guard let number = inode, let node = state.inodes[number] else { throw .noSuchFile }
            if options.contains(.directory) && !node.isDirectory { throw .notDirectory }
            if options.contains(.truncate) { state.inodes[number]?.data = [] }
            let fd = state.nextDescriptor
            state.nextDescriptor += 1
            state.descriptors[fd] = (number, path)
            return FileDescriptor(rawValue: fd)
        }
    }

    func close(_ fd: FileDescriptor) throws(Errno) {
        // Closing never fails and always releases the lock, power or not (the process ends).
        state.withLock { state in
            if let inode = state.descriptors[fd.rawValue]?.inode, state.locks[inode] == fd.rawValue {
                state.locks[inode] = nil
            }
            state.descriptors[fd.rawValue] = nil
        }
    }

    private static func inode(_ state: State, _ fd: FileDescriptor) throws(Errno) -> Int {
        guard let inode = state.descriptors[fd.rawValue]?.inode else { throw Errno(rawValue: 9) }  // EBADF
        return inode
    }

    func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try call { state throws(Errno) in
            let data = state.inodes[try Self.inode(state, fd)]?.data ?? []
            guard offset < data.count else { return 0 }
            let count = min(buffer.count, data.count - offset)
            data.withUnsafeBytes { source in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[offset..<(offset + count)]))
            }
            return count
        }
    }

    func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try call { state throws(Errno) in
            let number = try Self.inode(state, fd)
            let size = state.inodes[number]?.data.count ?? 0
            if size == offset {
                state.inodes[number]?.data.append(contentsOf: bytes)  // in place: appends are the common case
            } else {
                if size < offset + bytes.count {
                    state.inodes[number]?.data.append(contentsOf: repeatElement(0, count: offset + bytes.count - size))
                }
                state.inodes[number]?.data.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
            }
            return bytes.count
        }
    }

    func truncate(_ fd: FileDescriptor, to length: Int) throws(Errno) {
        try call { state throws(Errno) in
            let number = try Self.inode(state, fd)
            var data = state.inodes[number]?.data ?? []
            if data.count > length {
                data.removeLast(data.count - length)
            } else {
                data += [UInt8](repeating: 0, count: length - data.count)
            }
            state.inodes[number]?.data = data
        }
    }

    func dataSync(_ fd: FileDescriptor) throws(Errno) { try sync(fd) }

    func sync(_ fd: FileDescriptor) throws(Errno) {
        try call { state throws(Errno) in
            let number = try Self.inode(state, fd)
            guard let node = state.inodes[number] else { return }
            if node.isDirectory, let path = state.descriptors[fd.rawValue]?.path {
                state.durableEntries[path] = state.entries[path]
            } else {
                state.inodes[number]?.durable = node.data
            }
        }
    }

    func size(of fd: FileDescriptor) throws(Errno) -> Int {
        try call { state throws(Errno) in state.inodes[try Self.inode(state, fd)]?.data.count ?? 0 }
    }

    func kind(of fd: FileDescriptor) throws(Errno) -> FileKind {
        try call { state throws(Errno) in
            state.inodes[try Self.inode(state, fd)]?.isDirectory == true ? .directory : .regular
        }
    }

    func rename(_ source: String, to destination: String) throws(Errno) {
        try call { state throws(Errno) in
            let (from, fromName) = split(source)
            let (to, toName) = split(destination)
            guard let inode = state.entries[from]?[fromName] else { throw .noSuchFile }
            guard state.entries[to] != nil else { throw .noSuchFile }
            state.entries[from]?[fromName] = nil
            state.entries[to]?[toName] = inode
        }
    }

    func unlink(_ path: String) throws(Errno) {
        try call { state throws(Errno) in
            let (directory, name) = split(path)
            guard state.entries[directory]?[name] != nil else { throw .noSuchFile }
            state.entries[directory]?[name] = nil
        }
    }

    func makeDirectory(_ path: String) throws(Errno) {
        try call { state throws(Errno) in
            let (directory, name) = split(path)
            guard directory == "/", state.entries[path] == nil else {
                throw state.entries[path] == nil ? .noSuchFile : .fileExists
            }
            let number = state.nextInode
            state.nextInode += 1
            state.inodes[number] = Inode(isDirectory: true)
            state.entries["/"]?[name] = number
            state.entries[path] = [:]
        }
    }

    func listDirectory(_ path: String) throws(Errno) -> [String] {
        try call { state throws(Errno) in
            guard let names = state.entries[path]?.keys else { throw .noSuchFile }
            return Array(names)
        }
    }

    func lock(_ fd: FileDescriptor, exclusive: Bool) throws(Errno) {
        try call { state throws(Errno) in
            let inode = try Self.inode(state, fd)
            if let holder = state.locks[inode], holder != fd.rawValue { throw .wouldBlock }
            state.locks[inode] = fd.rawValue
        }
    }

    /// The bytes of a file, for assertions.
    func contents(_ path: String) -> [UInt8]? {
        state.withLock { state in Self.lookup(state, path, split: split).flatMap { state.inodes[$0]?.data } }
    }

    func names(_ directory: String) -> [String] { state.withLock { ($0.entries[directory] ?? [:]).keys.sorted() } }
}
