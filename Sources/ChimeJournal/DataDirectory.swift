/// The data directory as the journal sees it: a path, the ``FileSystem`` seam, and the few
/// compound operations built on it. This is where a failed system call becomes a
/// ``JournalError`` naming the file, and the only place that knows how paths are joined.
struct DataDirectory: Sendable {
    let fs: any FileSystem
    let path: String

    func path(_ name: String) -> String { path + "/" + name }

    func list() throws(JournalError) -> [String] {
        do {
            return try fs.listDirectory(path)
        } catch {
            let code: JournalError.Code = error == .notDirectory || error == .noSuchFile ? .badDirectory : .io
            throw JournalError(code, "cannot list data directory \(path)", errno: error)
        }
    }

    /// Opens a file of the directory, which must be a regular file: never through a symbolic link
    /// (`O_NOFOLLOW`: a link planted in the directory would have the journal write, truncate or
    /// overwrite whatever it points to), never waiting for the other end of a FIFO (`O_NONBLOCK`),
    /// and checked with `fstat` once open (a check of the name before opening would race with a
    /// rename in between).
    /// - Throws: `.badDirectory` naming the file when it is a symbolic link, a FIFO, a directory
    ///   or anything else but a regular file; `.io` for any other failure.
    func open(_ name: String, _ access: FileAccess, _ options: OpenOptions = []) throws(JournalError) -> FileDescriptor
    {
        let fd: FileDescriptor
        do {
            fd = try fs.open(path(name), access: access, options: options.union([.noFollow, .nonBlocking]))
        } catch {
            switch error {
            case .symbolicLinkLoop: throw refusal(name, FileKind.symbolicLink.description)
            case .isDirectory: throw refusal(name, FileKind.directory.description)
            case .noDeviceOrAddress: throw refusal(name, "a FIFO or a socket")
            default: throw JournalError(.io, "cannot open \(path(name))", errno: error)
            }
        }
        let kind: FileKind
        do {
            kind = try fs.kind(of: fd)
        } catch {
            closeQuietly(fd)
            throw JournalError(.io, "cannot stat \(path(name))", errno: error)
        }
        guard kind == .regular else {
            closeQuietly(fd)
            throw refusal(name, kind.description)
        }
        return fd
    }

    /// Refuses a file the journal would read or write if it were a regular file.
    private func refusal(_ name: String, _ what: String) -> JournalError {
        let why =
            what == FileKind.symbolicLink.description
            ? "and chimed follows no links in its data directory (put the file itself there)"
            : "not a regular file"
        return JournalError(.badDirectory, "refusing \(path(name)): it is \(what), \(why)")
    }

    /// Checks that `name`, if it exists, is a regular file the journal may open (as ``open(_:_:_:)``
    /// would), without reading it: for files recovery lists but does not read now, so that a
    /// symbolic link is refused whether or not it is read at this start.
    /// - Throws: `.badDirectory` as ``open(_:_:_:)``; `.io`.
    func checkRegularFile(_ name: String) throws(JournalError) {
        do {
            closeQuietly(try open(name, .readOnly))
        } catch  where error.errno == .noSuchFile {
            return  // removed since the listing (by a worker, when a tool reads without the lock)
        }
    }

    /// Closes a descriptor whose data no longer matters (already synced, or being discarded).
    func closeQuietly(_ fd: FileDescriptor) {
        try? fs.close(fd)
    }

    func size(_ fd: FileDescriptor, _ name: String) throws(JournalError) -> Int {
        do {
            return try fs.size(of: fd)
        } catch {
            throw JournalError(.io, "cannot stat \(path(name))", errno: error)
        }
    }

    /// Reads `count` bytes at `offset` into `buffer`, looping over short reads; returns fewer only at end of file.
    func read(
        _ fd: FileDescriptor,
        _ name: String,
        into buffer: UnsafeMutableRawBufferPointer,
        at offset: Int
    )
        throws(JournalError) -> Int
    {
        var done = 0
        while done < buffer.count {
            let n: Int
            do {
                n = try fs.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]), at: offset + done)
            } catch {
                throw JournalError(.io, "cannot read \(path(name)) at offset \(offset + done)", errno: error)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// The whole file. Segments are read this way: they are bounded by `segmentBytes`, and the
    /// torn-tail rule needs to look ahead of a damaged record.
    func readAll(_ name: String) throws(JournalError) -> [UInt8] {
        let fd = try open(name, .readOnly)
        defer { closeQuietly(fd) }
        let size = try self.size(fd, name)
        var bytes = [UInt8](repeating: 0, count: size)
        let count = try bytes.withMutableBytes { buffer throws(JournalError) in
            try read(fd, name, into: buffer, at: 0)
        }
        if count < size { bytes.removeLast(size - count) }
        return bytes
    }

    /// Writes all of `bytes` at `offset`, continuing after short writes. For snapshots and tools;
    /// `Journal.append` deliberately does not use this (one write per record, no continuation).
    func writeAll(
        _ fd: FileDescriptor,
        _ name: String,
        _ bytes: UnsafeRawBufferPointer,
        at offset: Int
    )
        throws(JournalError)
    {
        var done = 0
        while done < bytes.count {
            let n: Int
            do {
                n = try fs.write(fd, UnsafeRawBufferPointer(rebasing: bytes[done...]), at: offset + done)
            } catch {
                throw JournalError(.writeFailed, "cannot write \(path(name)) at offset \(offset + done)", errno: error)
            }
            if n <= 0 {
                throw JournalError(.writeFailed, "short write to \(path(name)) at offset \(offset + done)")
            }
            done += n
        }
    }

    func writeAll(_ fd: FileDescriptor, _ name: String, _ bytes: [UInt8], at offset: Int) throws(JournalError) {
        try bytes.withBytes { buffer throws(JournalError) in try writeAll(fd, name, buffer, at: offset) }
    }

    /// `fsync` of a file: data and metadata, used for new files whose size and name must survive.
    func fsync(_ fd: FileDescriptor, _ name: String) throws(JournalError) {
        do {
            try fs.sync(fd)
        } catch {
            throw JournalError(.syncFailed, "fsync of \(path(name)) failed", errno: error)
        }
    }

    /// Makes creates, renames and unlinks in the directory durable.
    func syncDirectory() throws(JournalError) {
        let fd: FileDescriptor
        do {
            fd = try fs.open(path, access: .readOnly, options: [.directory])
        } catch {
            throw JournalError(.io, "cannot open data directory \(path)", errno: error)
        }
        defer { closeQuietly(fd) }
        do {
            try fs.sync(fd)
        } catch {
            throw JournalError(.syncFailed, "fsync of data directory \(path) failed", errno: error)
        }
    }

    func unlink(_ name: String) throws(JournalError) {
        do {
            try fs.unlink(path(name))
        } catch {
            if error == .noSuchFile { return }
            throw JournalError(.io, "cannot remove \(path(name))", errno: error)
        }
    }

    func truncate(_ fd: FileDescriptor, _ name: String, to length: Int) throws(JournalError) {
        do {
            try fs.truncate(fd, to: length)
        } catch {
            throw JournalError(.io, "cannot truncate \(path(name)) to \(length) bytes", errno: error)
        }
    }

    /// Creates the directory and any missing parents, and `fsync`s the parent of each one made,
    /// so the new directory, and so every record later synced inside it, survives a power loss.
    func create() throws(JournalError) {
        let trimmed = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
        let slash = trimmed.lastIndex(of: "/")
        let parent = slash.map { $0 == trimmed.startIndex ? "/" : String(trimmed[..<$0]) } ?? "."
        do {
            try fs.makeDirectory(trimmed)
        } catch {
            if error == .fileExists { return }
            guard error == .noSuchFile, parent != trimmed, slash != nil else {
                throw JournalError(.badDirectory, "cannot create data directory \(path)", errno: error)
            }
            try DataDirectory(fs: fs, path: parent).create()
            do {
                try fs.makeDirectory(trimmed)
            } catch  where error == .fileExists {
                return
            } catch {
                throw JournalError(.badDirectory, "cannot create data directory \(path)", errno: error)
            }
        }
        try DataDirectory(fs: fs, path: parent).syncDirectory()
    }
}

/// What is at a path, for tools that must tell a missing directory from an empty one.
public enum DirectoryContents: Hashable, Sendable {
    case missing
    case notADirectory
    case entries([String])
}

extension JournalTools {
    /// Looks at `path` without changing anything.
    /// - Throws: `.io` when it exists but cannot be listed.
    public static func contents(
        of path: String,
        fileSystem: any FileSystem = SystemFileSystem()
    ) throws(JournalError) -> DirectoryContents {
        do {
            return .entries(try fileSystem.listDirectory(path))
        } catch {
            switch error {
            case .noSuchFile: return .missing
            case .notDirectory: return .notADirectory
            default: throw JournalError(.io, "cannot list \(path)", errno: error)
            }
        }
    }

    /// Creates a data directory and its missing parents, durably (see ``Journal/open(directory:options:fileSystem:)``).
    public static func createDirectory(
        _ path: String,
        fileSystem: any FileSystem = SystemFileSystem()
    ) throws(JournalError) {
        try DataDirectory(fs: fileSystem, path: path).create()
    }
}
