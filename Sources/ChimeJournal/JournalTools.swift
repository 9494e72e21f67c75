import Glibc

/// What `JournalTools.verify` found.
public struct VerifyReport: Hashable, Sendable, CustomStringConvertible {
    /// A place where the directory is damaged.
    public struct Problem: Hashable, Sendable {
        public var file: String
        public var offset: Int
        public var message: String
    }

    /// One snapshot file and whether it reads back whole.
    public struct SnapshotInfo: Hashable, Sendable {
        public var file: String
        public var sequence: UInt64
        /// Nil when damaged.
        public var entryCount: UInt64?
        public var problem: Problem?
    }

    public var segmentCount: Int
    /// Valid records in all segments (including those a snapshot covers).
    public var recordCount: Int
    public var firstSequence: UInt64?
    public var lastSequence: UInt64?
    public var snapshots: [SnapshotInfo]
    /// The snapshot `open` would start from.
    public var usedSnapshot: String?
    public var temporaryFiles: [String]
    /// What `open` would fix or work around by itself (a torn tail, a damaged newest snapshot).
    public var warnings: [String]
    /// The first damage that makes `open` refuse; `repair` fixes it.
    public var problem: Problem?

    /// `open` would succeed.
    public var isOpenable: Bool { problem == nil }
    /// Nothing to fix or work around at all.
    public var isClean: Bool { problem == nil && warnings.isEmpty }

    public var description: String {
        var lines: [String] = []
        let range = firstSequence.map { "sequences \($0)...\(lastSequence ?? $0)" } ?? "no records"
        lines.append("segments: \(segmentCount), records: \(recordCount), \(range)")
        for snapshot in snapshots {
            if let problem = snapshot.problem {
                lines.append("snapshot \(snapshot.file): DAMAGED at offset \(problem.offset): \(problem.message)")
            } else if let count = snapshot.entryCount {
                let used = snapshot.file == usedSnapshot ? " (used)" : ""
                lines.append("snapshot \(snapshot.file): \(count) entries\(used)")
            }
        }
        for name in temporaryFiles { lines.append("temporary file \(name) (removed on open)") }
        for warning in warnings { lines.append("warning: \(warning)") }
        if let problem {
            lines.append("PROBLEM: \(problem.file): offset \(problem.offset): \(problem.message)")
        } else {
            lines.append(warnings.isEmpty ? "ok" : "ok (open fixes the warnings above)")
        }
        return lines.joined(separator: "\n")
    }
}

/// What `JournalTools.repair` did.
public struct RepairReport: Hashable, Sendable, CustomStringConvertible {
    /// Where the files it changed or removed were copied first; nil if nothing was changed.
    public var backupDirectory: String?
    /// One line per change.
    public var actions: [String]
    /// The directory after the repair.
    public var after: VerifyReport

    /// What repair did, without the report of the directory after it: the actions and where
    /// the backup is, or that nothing was changed.
    public var summary: [String] {
        var lines = actions
        if let backupDirectory { lines.append("backup: \(backupDirectory)") }
        if actions.isEmpty { lines.append("no damaged file found: nothing changed") }
        return lines
    }

    public var description: String { (summary + [after.description]).joined(separator: "\n") }
}

/// Offline tools behind `chime journal verify|dump|repair DIR`.
///
/// `verify` and `dump` only read, without the lock, so they work beside a running worker
/// (whose newest record may then show as a torn tail if it is mid-write). `repair` changes the
/// directory and so takes the exclusive lock.
public enum JournalTools {
    /// Reads everything in `directory` and reports what is there and the first problem.
    /// - Throws: `.io`/`.badDirectory` when the directory or a segment cannot be read at all;
    ///   `.badDirectory` when `LOCK`, a segment or a snapshot is a symbolic link or not a regular
    ///   file (which `open` refuses).
    public static func verify(
        directory: String,
        fileSystem: any FileSystem = SystemFileSystem()
    )
        throws(JournalError) -> VerifyReport
    {
        let dir = DataDirectory(fs: fileSystem, path: directory)
        let scan = try DirectoryScan.settled { () throws(JournalError) in
            try DirectoryScan.scan(dir, mode: .init(checkAllSnapshots: true)) { _, _, _, _ in }
        }
        // `open` takes the lock in `LOCK`, which must be a regular file as much as any other.
        try dir.checkRegularFile(JournalFormat.lockName)
        return report(scan)
    }

    /// What a worker would recover from `directory`, read without the lock and without changing
    /// anything (a torn tail is left for the worker to truncate): for checks that go beyond the
    /// journal's own structure, such as replaying the records.
    /// - Throws: `.corrupt` when the worker would refuse to start.
    public static func read(
        directory: String,
        fileSystem: any FileSystem = SystemFileSystem()
    ) throws(JournalError) -> Recovery {
        let dir = DataDirectory(fs: fileSystem, path: directory)
        let (scan, records) = try DirectoryScan.settled { () throws(JournalError) in
            try DirectoryScan.forRecovery(dir)
        }
        return Recovery(
            snapshot: scan.snapshotFile.map(Recovery.Snapshot.init(reading:)),
            records: records,
            warnings: scan.warnings,
            lastSequence: scan.lastSequence
        )
    }

    /// Calls `body` with every valid record in the segments, oldest first (including records a
    /// snapshot already covers; snapshots are not dumped). Stops before a torn tail.
    /// - Throws: `.corrupt` naming file and offset after the records before the damage were dumped.
    public static func dump(
        directory: String,
        fileSystem: any FileSystem = SystemFileSystem(),
        _ body: (JournalRecord) -> Void
    ) throws(JournalError) {
        let dir = DataDirectory(fs: fileSystem, path: directory)
        // A scan listed again (see `settled`) passes the records already dumped once more.
        var dumped: UInt64?
        let scan = try DirectoryScan.settled { () throws(JournalError) in
            try DirectoryScan.scan(dir, mode: .init()) { sequence, type, payload, _ in
                guard dumped.map({ sequence > $0 }) ?? true else { return }
                dumped = sequence
                body(JournalRecord(sequence: sequence, type: type, payload: Array(copying: payload)))
            }
        }
        if let problem = scan.problem { throw JournalError(.corrupt, problem.line) }
    }

    /// Makes a damaged directory openable, losing as little as possible.
    ///
    /// Takes the exclusive lock. Before changing or removing a file it copies or moves it to
    /// `DIR/backup-<UTC time>/` (once: the backup keeps the file as repair found it). Then, until
    /// `verify` finds no problem:
    /// - damage in a segment that the newest good snapshot fully covers: that segment and the
    ///   older ones are removed (nothing current is lost);
    /// - damage elsewhere: the segment is truncated at the damage (removed if the header is
    ///   bad) and every later segment removed; if the snapshot in use reaches beyond the damage,
    ///   all segments go, as their remaining records are all covered;
    /// - a damaged snapshot that recovery cannot use is moved to the backup.
    /// Finally temporary files are moved to the backup and a torn tail is truncated (after a
    /// copy), so `verify` reports clean.
    ///
    /// It only mends the structure that `verify` checks. A record that is whole but that the
    /// engine cannot read (an unknown record type, from a newer chimed) is no damage to it and is
    /// left as it is; `chime journal repair` replays the result to say so.
    ///
    /// - Throws: `.locked` while a worker has the directory open; `.corrupt` if no repair applies;
    ///   `.badDirectory`, before changing anything, when `LOCK`, a segment or a snapshot is a
    ///   symbolic link or not a regular file (it never writes through a link).
    public static func repair(
        directory: String,
        fileSystem: any FileSystem = SystemFileSystem()
    )
        throws(JournalError) -> RepairReport
    {
        let dir = DataDirectory(fs: fileSystem, path: directory)
        _ = try dir.list()
        let lockFD = try Journal.lock(dir)
        var repair = Repair(dir: dir)
        let journal: Journal
        do {
            try repair.run()
            // Let recovery itself truncate torn tails, drop temporary files and start a segment
            // where one is needed, exactly as the next `open` would; the backup is taken first.
            (journal, _) = try Journal.recover(dir, options: JournalOptions(), lockFD: lockFD)
        } catch {
            dir.closeQuietly(lockFD)
            throw error
        }
        try journal.close()
        let after = try verify(directory: directory, fileSystem: fileSystem)
        return RepairReport(backupDirectory: repair.backupPath, actions: repair.actions, after: after)
    }

    static func report(_ scan: DirectoryScan) -> VerifyReport {
        func problem(_ problem: ScanProblem?) -> VerifyReport.Problem? {
            problem.map { VerifyReport.Problem(file: $0.file, offset: $0.offset, message: $0.message) }
        }
        return VerifyReport(
            segmentCount: scan.listing.segments.count,
            recordCount: scan.recordCount,
            firstSequence: scan.firstRecordSequence,
            lastSequence: scan.lastRecordSequence,
            snapshots: scan.snapshots.map {
                VerifyReport.SnapshotInfo(
                    file: $0.name,
                    sequence: $0.sequence,
                    entryCount: $0.entryCount,
                    problem: problem($0.problem)
                )
            },
            usedSnapshot: scan.usedSnapshot?.name,
            temporaryFiles: scan.listing.temporaryFiles,
            warnings: scan.warnings,
            problem: problem(scan.problem)
        )
    }
}

/// The steps of `JournalTools.repair`, with the backup it keeps.
private struct Repair {
    let dir: DataDirectory
    var actions: [String] = []
    var backupPath: String?
    private var backupName: String?
    /// Files already in the backup, as repair found them.
    private var backedUp: Set<String> = []

    init(dir: DataDirectory) { self.dir = dir }

    mutating func run() throws(JournalError) {
        // A link or other odd file is refused before anything changes, also one that the scan,
        // which stops at the first damage, would not reach.
        let listing = DirectoryListing(try dir.list())
        for name in listing.segments.map(\.name) + listing.snapshots.map(\.name) { try dir.checkRegularFile(name) }
        // Each round removes at least one file or some bytes, so this ends; the bound is a guard.
        for _ in 0..<1000 {
            let scan = try DirectoryScan.scan(dir, mode: .init(checkAllSnapshots: true)) { _, _, _, _ in }
            for snapshot in scan.snapshots where snapshot.problem != nil {
                try moveToBackup(snapshot.name)
                actions.append("moved damaged snapshot \(snapshot.name) to the backup")
            }
            guard let problem = scan.problem else {
                // What the next `open` would do by itself, done by the recovery that follows;
                // the files it changes or removes are backed up here.
                for name in scan.listing.temporaryFiles {
                    try moveToBackup(name)
                    actions.append("moved unfinished temporary file \(name) to the backup")
                }
                if let last = scan.segments.last, last.tornHeader {
                    try copyToBackup(last.name)
                    actions.append("removed \(last.name) (incomplete header, \(last.fileSize) bytes)")
                } else if let last = scan.segments.last, let torn = last.tornTail {
                    try copyToBackup(last.name)
                    actions.append(
                        "truncated \(last.name) at offset \(torn.offset) (torn tail: \(torn.reason), "
                            + "\(last.fileSize - torn.offset) bytes dropped)"
                    )
                }
                return
            }
            let segments = scan.listing.segments
            if JournalFormat.snapshotSequence(problem.file) != nil {
                continue  // moved above; its state is lost, as the problem said
            }
            guard let index = segments.firstIndex(where: { $0.name == problem.file }) else {
                throw JournalError(.corrupt, "cannot repair: \(problem.line)")
            }
            let base = scan.baseSequence
            if index + 1 < segments.count, segments[index + 1].sequence <= base + 1 {
                // Everything in this segment and before it is inside the snapshot in use.
                for segment in segments[...index] { try moveToBackup(segment.name) }
                actions.append(
                    "removed \(index + 1) segment(s) through \(problem.file), covered by the snapshot (\(problem.line))"
                )
                continue
            }
            for segment in segments[(index + 1)...] { try moveToBackup(segment.name) }
            if index + 1 < segments.count {
                actions.append("removed \(segments.count - index - 1) segment(s) after \(problem.file)")
            }
            if problem.offset < JournalFormat.segmentHeaderSize {
                try moveToBackup(problem.file)
                actions.append("removed \(problem.file) (\(problem.line))")
            } else {
                try copyToBackup(problem.file)
                let fd = try dir.open(problem.file, .writeOnly)
                defer { dir.closeQuietly(fd) }
                try dir.truncate(fd, problem.file, to: problem.offset)
                try dir.fsync(fd, problem.file)
                actions.append("truncated \(problem.file) at offset \(problem.offset) (\(problem.message))")
            }
        }
        throw JournalError(.corrupt, "cannot repair \(dir.path): damage remains after many rounds")
    }

    /// The backup directory, created on first use: `backup-<UTC time>`.
    private mutating func backup() throws(JournalError) -> String {
        if let backupName { return backupName }
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let stamp =
            "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
        var name = "backup-\(stamp)"
        var attempt = 1
        while true {
            do {
                try dir.fs.makeDirectory(dir.path(name))
                break
            } catch {
                guard error == .fileExists, attempt < 100 else {
                    throw JournalError(.io, "cannot create backup directory \(dir.path(name))", errno: error)
                }
                attempt += 1
                name = "backup-\(stamp)-\(attempt)"
            }
        }
        backupName = name
        backupPath = dir.path(name)
        return name
    }

    /// Moves a file into the backup (a rename: cheap and atomic). One copied there before it was
    /// changed is removed instead, so the backup keeps it as it was.
    private mutating func moveToBackup(_ name: String) throws(JournalError) {
        if backedUp.contains(name) {
            try dir.unlink(name)
            try dir.syncDirectory()
            return
        }
        let target = try backup() + "/" + name
        do {
            try dir.fs.rename(dir.path(name), to: dir.path(target))
        } catch {
            throw JournalError(.io, "cannot move \(dir.path(name)) to \(dir.path(target))", errno: error)
        }
        backedUp.insert(name)
        try DataDirectory(fs: dir.fs, path: dir.path(try backup())).syncDirectory()
        try dir.syncDirectory()
    }

    /// Copies a file into the backup before it is changed in place, unless it is there already.
    private mutating func copyToBackup(_ name: String) throws(JournalError) {
        guard !backedUp.contains(name) else { return }
        let target = try backup() + "/" + name
        let bytes = try dir.readAll(name)
        let fd = try dir.open(target, .writeOnly, [.create, .exclusive])
        defer { dir.closeQuietly(fd) }
        try dir.writeAll(fd, target, bytes, at: 0)
        try dir.fsync(fd, target)
        try DataDirectory(fs: dir.fs, path: dir.path(try backup())).syncDirectory()
        backedUp.insert(name)
    }
}
