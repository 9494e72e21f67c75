import Glibc

/// Files that `chime` writes whole and others read (the accounts commands' keys, deny list and
/// console accounts): a new file written and synced, never half of one; a change made under an
/// exclusive lock, so that two commands at once do not lose each other's; a replaced file renamed
/// over, so that a reader sees the old file or the new one.
enum ReplacedFile {
    /// Why a file could not be written: `exists` when ``create(_:contents:mode:)`` found one there.
    struct Failure: Error, CustomStringConvertible {
        var message: String
        var exists = false
        var description: String { message }
    }

    /// Runs `body` holding the exclusive lock of `path` (`PATH.lock`, made when missing); a lock that
    /// cannot be taken is thrown as `failure` makes it.
    static func locked<R, E: Error>(
        _ path: String,
        _ failure: (Failure) -> E,
        _ body: () throws(E) -> R
    ) throws(E) -> R {
        let lock = open(path + ".lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o644)
        guard lock >= 0 else { throw failure(Failure(message: "cannot open \(path).lock: \(reason())")) }
        defer { close(lock) }
        guard flock(lock, LOCK_EX) == 0 else {
            throw failure(Failure(message: "cannot lock \(path).lock: \(reason())"))
        }
        return try body()
    }

    /// Writes a new file with `mode` (never replacing one), synced to disk; the bytes held in memory
    /// are zeroed after (a key's).
    static func create(_ path: String, contents: String, mode: mode_t) throws(Failure) {
        let fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, mode)
        guard fd >= 0 else {
            let exists = errno == EEXIST
            throw Failure(message: "cannot create \(path): \(exists ? "it exists already" : reason())", exists: exists)
        }
        defer { close(fd) }
        fchmod(fd, mode)  // whatever the umask took away
        var bytes = Array(contents.utf8)
        defer {
            for index in bytes.indices { bytes[index] = 0 }
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw Failure(message: "cannot write \(path): \(reason())") }
            offset += written
        }
        guard fsync(fd) == 0 else { throw Failure(message: "cannot sync \(path): \(reason())") }
    }

    /// Replaces `path` by a file of `contents` and `mode`: written as `PATH.new`, then renamed over.
    static func replace(_ path: String, contents: String, mode: mode_t) throws(Failure) {
        let temporary = path + ".new"
        unlink(temporary)
        try create(temporary, contents: contents, mode: mode)
        guard rename(temporary, path) == 0 else {
            let why = reason()
            unlink(temporary)
            throw Failure(message: "cannot replace \(path): \(why)")
        }
    }

    private static func reason() -> String { String(cString: strerror(errno)) }
}
