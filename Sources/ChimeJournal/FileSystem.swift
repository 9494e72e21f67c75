import Glibc

/// An open file, as the kernel numbers it.
public struct FileDescriptor: RawRepresentable, Hashable, Sendable {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
}

/// How a file is opened for I/O.
public enum FileAccess: Hashable, Sendable {
    case readOnly, writeOnly, readWrite
}

/// Extra `open(2)` flags. `O_CLOEXEC` is always added.
public struct OpenOptions: OptionSet, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `O_CREAT` (mode 0644 for files).
    public static let create = OpenOptions(rawValue: 1)
    /// `O_EXCL`.
    public static let exclusive = OpenOptions(rawValue: 2)
    /// `O_TRUNC`.
    public static let truncate = OpenOptions(rawValue: 4)
    /// `O_DIRECTORY`.
    public static let directory = OpenOptions(rawValue: 8)
    /// `O_NOFOLLOW`: a symbolic link as the last component fails with `ELOOP` instead of being followed.
    public static let noFollow = OpenOptions(rawValue: 16)
    /// `O_NONBLOCK`: opening a FIFO returns at once instead of waiting for its other end (it has
    /// no effect on reading or writing a regular file).
    public static let nonBlocking = OpenOptions(rawValue: 32)
}

/// What an open descriptor refers to, from `fstat(2)`'s `st_mode`.
public enum FileKind: Hashable, Sendable, CustomStringConvertible {
    case regular, directory, symbolicLink, fifo, socket, characterDevice, blockDevice, unknown

    public var description: String {
        switch self {
        case .regular: "a regular file"
        case .directory: "a directory"
        case .symbolicLink: "a symbolic link"
        case .fifo: "a FIFO"
        case .socket: "a socket"
        case .characterDevice: "a character device"
        case .blockDevice: "a block device"
        case .unknown: "not a regular file"
        }
    }
}

/// The seam for fault injection: every system call the journal makes on the data directory
/// goes through one of these methods, so tests can inject `ENOSPC`, `EIO`, short writes and
/// "crashes" at any chosen call, and count `fdatasync`s.
///
/// Implementations report failures as the raw ``Errno``; the journal turns them into
/// ``JournalError``s with the file and operation named. Reads and writes are positional
/// (`pread`/`pwrite`) so no file offset state hides in the kernel.
public protocol FileSystem: Sendable {
    /// `open(2)`.
    func open(_ path: String, access: FileAccess, options: OpenOptions) throws(Errno) -> FileDescriptor
    /// `close(2)`.
    func close(_ fd: FileDescriptor) throws(Errno)
    /// `pread(2)`: returns the number of bytes read, 0 at end of file.
    func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int
    /// `pwrite(2)`: returns the number of bytes written, which may be fewer than asked (a short write).
    func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Errno) -> Int
    /// `ftruncate(2)`.
    func truncate(_ fd: FileDescriptor, to length: Int) throws(Errno)
    /// `fdatasync(2)`.
    func dataSync(_ fd: FileDescriptor) throws(Errno)
    /// `fsync(2)`, also used on directories to make entries (creates, renames, unlinks) durable.
    func sync(_ fd: FileDescriptor) throws(Errno)
    /// `fstat(2)`'s `st_size`.
    func size(of fd: FileDescriptor) throws(Errno) -> Int
    /// `fstat(2)`'s file type.
    func kind(of fd: FileDescriptor) throws(Errno) -> FileKind
    /// `rename(2)`.
    func rename(_ source: String, to destination: String) throws(Errno)
    /// `unlink(2)`.
    func unlink(_ path: String) throws(Errno)
    /// `mkdir(2)` with mode 0755.
    func makeDirectory(_ path: String) throws(Errno)
    /// The names in a directory (`opendir`/`readdir`), without `.` and `..`, in no particular order.
    func listDirectory(_ path: String) throws(Errno) -> [String]
    /// `flock(2)` with `LOCK_NB`: throws ``Errno/wouldBlock`` when another open file description holds it.
    func lock(_ fd: FileDescriptor, exclusive: Bool) throws(Errno)
}

/// The real file system, through Glibc. Retries `EINTR`; never retries anything else.
public struct SystemFileSystem: FileSystem {
    public init() {}

    public func open(_ path: String, access: FileAccess, options: OpenOptions) throws(Errno) -> FileDescriptor {
        var flags: Int32 = O_CLOEXEC
        switch access {
        case .readOnly: flags |= O_RDONLY
        case .writeOnly: flags |= O_WRONLY
        case .readWrite: flags |= O_RDWR
        }
        if options.contains(.create) { flags |= O_CREAT }
        if options.contains(.exclusive) { flags |= O_EXCL }
        if options.contains(.truncate) { flags |= O_TRUNC }
        if options.contains(.directory) { flags |= O_DIRECTORY }
        if options.contains(.noFollow) { flags |= O_NOFOLLOW }
        if options.contains(.nonBlocking) { flags |= O_NONBLOCK }
        while true {
            let fd = Glibc.open(path, flags, 0o644)
            if fd >= 0 { return FileDescriptor(rawValue: fd) }
            if errno != EINTR { throw Errno.current }
        }
    }

    public func close(_ fd: FileDescriptor) throws(Errno) {
        // Never retry close on EINTR: on Linux the descriptor is already released.
        if Glibc.close(fd.rawValue) != 0 { throw Errno.current }
    }

    public func read(
        _ fd: FileDescriptor,
        into buffer: UnsafeMutableRawBufferPointer,
        at offset: Int
    ) throws(Errno)
        -> Int
    {
        while true {
            let n = pread(fd.rawValue, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw Errno.current }
        }
    }

    public func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        while true {
            let n = pwrite(fd.rawValue, bytes.baseAddress, bytes.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw Errno.current }
        }
    }

    public func truncate(_ fd: FileDescriptor, to length: Int) throws(Errno) {
        while ftruncate(fd.rawValue, off_t(length)) != 0 {
            if errno != EINTR { throw Errno.current }
        }
    }

    public func dataSync(_ fd: FileDescriptor) throws(Errno) {
        if fdatasync(fd.rawValue) != 0 { throw Errno.current }
    }

    public func sync(_ fd: FileDescriptor) throws(Errno) {
        if fsync(fd.rawValue) != 0 { throw Errno.current }
    }

    public func size(of fd: FileDescriptor) throws(Errno) -> Int {
        var info = stat()
        if fstat(fd.rawValue, &info) != 0 { throw Errno.current }
        return Int(info.st_size)
    }

    public func kind(of fd: FileDescriptor) throws(Errno) -> FileKind {
        var info = stat()
        if fstat(fd.rawValue, &info) != 0 { throw Errno.current }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .regular
        case S_IFDIR: return .directory
        case S_IFLNK: return .symbolicLink
        case S_IFIFO: return .fifo
        case S_IFSOCK: return .socket
        case S_IFCHR: return .characterDevice
        case S_IFBLK: return .blockDevice
        default: return .unknown
        }
    }

    public func rename(_ source: String, to destination: String) throws(Errno) {
        if Glibc.rename(source, destination) != 0 { throw Errno.current }
    }

    public func unlink(_ path: String) throws(Errno) {
        if Glibc.unlink(path) != 0 { throw Errno.current }
    }

    public func makeDirectory(_ path: String) throws(Errno) {
        if mkdir(path, 0o755) != 0 { throw Errno.current }
    }

    public func listDirectory(_ path: String) throws(Errno) -> [String] {
        guard let dir = opendir(path) else { throw Errno.current }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { throw Errno.current }
                return names
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: tuple.pointee)) {
                    String(cString: $0)
                }
            }
            if name != "." && name != ".." { names.append(name) }
        }
    }

    public func lock(_ fd: FileDescriptor, exclusive: Bool) throws(Errno) {
        let operation = (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB
        while flock(fd.rawValue, operation) != 0 {
            if errno != EINTR { throw Errno.current }
        }
    }
}
