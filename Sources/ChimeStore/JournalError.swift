import Glibc

/// An `errno` value from a failed system call.
///
/// This is the one place where C error numbers get Swift names; everything the
/// `FileSystem` seam (ChimeJournal's) throws is an `Errno`, and ``JournalError`` carries it on.
public struct Errno: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: Int32

    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// `ENOSPC`: no space left on device.
    public static let noSpace = Errno(rawValue: ENOSPC)
    /// `EIO`: input/output error.
    public static let ioError = Errno(rawValue: EIO)
    /// `ENOENT`: no such file or directory.
    public static let noSuchFile = Errno(rawValue: ENOENT)
    /// `EEXIST`: file exists.
    public static let fileExists = Errno(rawValue: EEXIST)
    /// `EWOULDBLOCK` (`EAGAIN`): a non-blocking lock is held by someone else.
    public static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    /// `EINTR`: interrupted system call.
    public static let interrupted = Errno(rawValue: EINTR)
    /// `ENOTDIR`: not a directory.
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    /// `EACCES`: permission denied.
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// `ELOOP`: too many symbolic links; what `open` with `O_NOFOLLOW` reports for a link.
    public static let symbolicLinkLoop = Errno(rawValue: ELOOP)
    /// `EISDIR`: is a directory (opened for writing).
    public static let isDirectory = Errno(rawValue: EISDIR)
    /// `ENXIO`: no such device or address; what `open` reports for a socket, or for a FIFO opened
    /// for writing with `O_NONBLOCK` that nobody reads.
    public static let noDeviceOrAddress = Errno(rawValue: ENXIO)

    /// The calling thread's current `errno`.
    public static var current: Errno { Errno(rawValue: errno) }

    public var description: String {
        "\(String(cString: strerror(rawValue))) (errno \(rawValue))"
    }
}

/// Every failure of the journal: a ``Code`` to switch on, a one-line message naming the file
/// (and offset) involved, and the `errno` when a system call failed. In the store layer, with
/// ``Errno``, because ``Recovery`` and ``Engine/replaying(_:configuration:directory:progress:timings:)``
/// throw it whichever store recovered.
///
/// Equality and hashing consider only the code, so tests can write
/// `#expect(throws: JournalError.corrupt) { ... }`.
public struct JournalError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a closed set that can still grow without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case locked, corrupt, writeFailed, syncFailed, io, badDirectory, unusable, invalidState, invalidArgument
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// Another `Journal` (in this or another process) holds the directory's lock.
        public static let locked = Code(.locked)
        /// The data directory holds damage that recovery must not silently skip.
        public static let corrupt = Code(.corrupt)
        /// An append failed; nothing of the record remains on disk and the journal is still usable.
        public static let writeFailed = Code(.writeFailed)
        /// `fdatasync`/`fsync` failed: durability of earlier writes is unknown and the process must stop.
        public static let syncFailed = Code(.syncFailed)
        /// Any other failed system call (open, read, rename, ...).
        public static let io = Code(.io)
        /// The data directory path cannot be created or is not a directory, or a name the journal
        /// uses in it (`LOCK`, a segment, a snapshot) is a symbolic link, a FIFO, a directory or
        /// anything else but a regular file, which the journal refuses to open.
        public static let badDirectory = Code(.badDirectory)
        /// An earlier failure left the journal unable to take writes; every later call throws this.
        public static let unusable = Code(.unusable)
        /// A call made out of order (after `close`, a second snapshot while one runs, ...).
        public static let invalidState = Code(.invalidState)
        /// An argument outside what the format allows (such as a record too large).
        public static let invalidArgument = Code(.invalidArgument)

        public var description: String {
            switch base {
            case .locked: "locked"
            case .corrupt: "corrupt"
            case .writeFailed: "write failed"
            case .syncFailed: "sync failed"
            case .io: "I/O error"
            case .badDirectory: "bad directory"
            case .unusable: "journal unusable"
            case .invalidState: "invalid state"
            case .invalidArgument: "invalid argument"
            }
        }
    }

    public var code: Code
    /// One line: what failed, naming the file and offset where relevant.
    public var message: String
    /// The `errno` of the failed system call, if one failed.
    public var errno: Errno?

    public init(_ code: Code, _ message: String, errno: Errno? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
    }

    // Values with only a code, to compare against: `#expect(throws: JournalError.corrupt)`,
    // `catch let error where error == .locked`.
    public static let locked = JournalError(.locked, "")
    public static let corrupt = JournalError(.corrupt, "")
    public static let writeFailed = JournalError(.writeFailed, "")
    public static let syncFailed = JournalError(.syncFailed, "")
    public static let io = JournalError(.io, "")
    public static let badDirectory = JournalError(.badDirectory, "")
    public static let unusable = JournalError(.unusable, "")
    public static let invalidState = JournalError(.invalidState, "")
    public static let invalidArgument = JournalError(.invalidArgument, "")

    public static func == (lhs: JournalError, rhs: JournalError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String {
        if let errno { return "\(code): \(message): \(errno)" }
        return "\(code): \(message)"
    }
}
