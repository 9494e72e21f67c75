import Foundation
import Synchronization

/// Where ``Zone`` gets its rules: the machine's zone database (TZif files, RFC 8536), so that a tzdata
/// upgrade is what Chime computes with, and Foundation's (ICU's) data for a zone the directory does not
/// have or cannot be read.
///
/// The tables handed out are the database's *current generation*: read once per zone on first use and
/// kept, so that a ``Zone`` stays a cheap value. Files on disk are read again only when asked
/// (``reload(_:)``: chimed does on SIGHUP and every `--zoneinfo-check` seconds), which swaps in the
/// tables that changed and says which. `Zone` values made before keep the table they were made with; their
/// owner replaces them (the engine does, for the zones a reload reports).
public final class ZoneDatabase: Sendable {
    /// The database every ``Zone/init(identifier:)`` reads.
    public static let shared = ZoneDatabase(directories: defaultDirectories())

    /// Where a zone's rules came from.
    public enum Source: Hashable, Sendable, CustomStringConvertible {
        /// A TZif file, at this path.
        case file(String)
        /// Foundation's data (ICU), for a zone no directory has.
        case foundation

        public var description: String {
            switch self {
            case .file(let path): return path
            case .foundation: return "Foundation"
            }
        }
    }

    /// A zone whose rules a ``reload(_:)`` found changed.
    public struct Change: Hashable, Sendable {
        public var identifier: String
        public var oldFingerprint: UInt64
        public var newFingerprint: UInt64
        public var source: Source
    }

    /// What a ``reload(_:)`` found.
    public struct Reload: Hashable, Sendable {
        public var changes: [Change] = []
        /// Zones whose file could not be read or parsed: they keep the rules they had.
        public var failures: [String: ZoneDataError] = [:]
        /// The fingerprint of the rules the database has now for each zone asked about: a zone
        /// missing here is one that no directory nor Foundation has (``Zone/isResolved``).
        public var current: [String: UInt64] = [:]
    }

    private struct Entry {
        var table: ZoneTable
        var source: Source
    }

    private struct State {
        var directories: [String]
        var entries: [String: Entry] = [:]
    }

    private let state: Mutex<State>

    /// - Parameter directories: searched in order for `<directory>/<identifier>`.
    public init(directories: [String]) {
        state = Mutex(State(directories: directories))
    }

    /// `$TZDIR` when set, else /usr/share/zoneinfo when it exists; none (Foundation only) otherwise.
    public static func defaultDirectories() -> [String] {
        if let tzdir = ProcessInfo.processInfo.environment["TZDIR"], !tzdir.isEmpty { return [tzdir] }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: "/usr/share/zoneinfo", isDirectory: &isDirectory),
            isDirectory.boolValue
        {
            return ["/usr/share/zoneinfo"]
        }
        return []
    }

    /// The directories searched, in order.
    public var directories: [String] { state.withLock { $0.directories } }

    /// Searches `directories` from now on, and forgets every table read so far (chimed's `--zoneinfo`,
    /// at start-up). Zones already made keep their tables.
    public func use(directories: [String]) {
        state.withLock {
            $0.directories = directories
            $0.entries.removeAll()
        }
    }

    /// The zones read so far and where from.
    public var sources: [String: Source] { state.withLock { $0.entries.mapValues(\.source) } }

    /// The current table of a zone, read on first use; nil when neither a directory nor Foundation has it.
    func table(for identifier: String) -> ZoneTable? {
        let directories = state.withLock { s -> [String]? in s.entries[identifier] == nil ? s.directories : nil }
        guard let directories else { return state.withLock { $0.entries[identifier]?.table } }
        guard let read = Self.lookUp(identifier, in: directories).entry else { return nil }
        return state.withLock { s in
            if let existing = s.entries[identifier] { return existing.table }
            s.entries[identifier] = read
            return read.table
        }
    }

    /// The fingerprint of a zone's current rules (see ``Zone/rulesFingerprint``).
    public func fingerprint(of identifier: String) -> UInt64? { table(for: identifier)?.fingerprint }

    /// Reads these zones again, swaps in the tables whose rules changed and reports them. A zone whose
    /// file became unreadable or corrupt keeps the rules it had. A zone not read yet (the zones a
    /// worker asks about were, unless no directory nor Foundation had them) is looked up as on first
    /// use.
    public func reload(_ identifiers: some Sequence<String>) -> Reload {
        var result = Reload()
        let directories = self.directories
        for identifier in Set(identifiers).sorted() {
            guard let old = state.withLock({ $0.entries[identifier] }) else {
                // Only names the database may look up: these come from journals and snapshots.
                guard Zone.isIANAName(identifier), let table = table(for: identifier) else { continue }
                result.current[identifier] = table.fingerprint
                continue
            }
            result.current[identifier] = old.table.fingerprint
            let (entry, failure) = Self.lookUp(identifier, in: directories)
            if let failure { result.failures[identifier] = failure }
            guard failure == nil, let entry else { continue }
            guard entry.table.fingerprint != old.table.fingerprint else { continue }
            state.withLock { $0.entries[identifier] = entry }
            result.current[identifier] = entry.table.fingerprint
            result.changes.append(
                Change(
                    identifier: identifier,
                    oldFingerprint: old.table.fingerprint,
                    newFingerprint: entry.table.fingerprint,
                    source: entry.source
                )
            )
        }
        return result
    }

    /// A zone from the first directory that has its file, else from Foundation; with the error of a
    /// file that was there and could not be used.
    private static func lookUp(
        _ identifier: String,
        in directories: [String]
    ) -> (entry: Entry?, failure: ZoneDataError?) {
        var failure: ZoneDataError?
        for directory in directories {
            let path = directory + "/" + identifier
            do throws(ZoneDataError) {
                guard let bytes = try readFile(path) else { continue }
                return (Entry(table: ZoneTable(tzif: try TZifFile(bytes: bytes)), source: .file(path)), nil)
            } catch {
                failure = ZoneDataError(error.code, "\(path): \(error.message)")
                break
            }
        }
        guard let tz = TimeZone(identifier: identifier) else { return (nil, failure) }
        return (Entry(table: ZoneTable(timeZone: tz), source: .foundation), failure)
    }

    /// The bytes of a zone file, at most ``TZifFile/maximumBytes`` + 1 of them; nil when there is no
    /// such file (or it is a directory).
    ///
    /// Opened without blocking, and refused unless the descriptor opened (symbolic links followed, as
    /// tzdata's links are) is a regular file: opening a FIFO named like a zone would wait until
    /// something writes to it, and a device may never end. A regular file is read to its end or the
    /// bound, whichever comes first.
    static func readFile(_ path: String) throws(ZoneDataError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return nil }
            throw ZoneDataError(.unreadable, "cannot open: \(String(cString: strerror(code)))")
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw ZoneDataError(.unreadable, "cannot stat: \(String(cString: strerror(errno)))")
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: return nil
        default: throw ZoneDataError(.unreadable, "not a regular file")
        }
        let limit = TZifFile.maximumBytes + 1
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while bytes.count < limit {
            let wanted = min(chunk.count, limit - bytes.count)
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, wanted) }
            if count < 0 {
                if errno == EINTR { continue }
                throw ZoneDataError(.unreadable, "cannot read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return bytes
    }
}
