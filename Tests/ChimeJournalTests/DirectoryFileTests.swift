import ChimeTestSupport
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

@testable import ChimeJournal

/// The files of a data directory are the journal's own: a symbolic link or anything but a
/// regular file under a name it uses (`LOCK`, a segment, a snapshot) is refused with one line
/// naming it, by `Journal.open` and by the tools, and nothing is written through it.
@Suite struct DirectoryFileTests {
    /// A data directory holding records 1...12 in several segments, and a file outside it.
    private struct Setup {
        let scratch: TemporaryDirectory
        let data: String
        let outside: String
        let last: UInt64 = 12

        init(snapshot: Bool = false) throws {
            scratch = try TemporaryDirectory(prefix: "chime-files")
            data = scratch.appending("data")
            outside = scratch.appending("outside")
            let (journal, _) = try Journal.open(directory: data, options: JournalOptions(segmentBytes: 200))
            try journal.appendStandard(through: last)
            if snapshot { try journal.snapshotStandard() }
            try journal.close()
            #expect(Disk.segments(data).count >= 2)
        }

        var newest: String { Disk.segments(data).last ?? "" }

        /// Replaces `name` in the directory by a symbolic link to `outside`, holding `bytes`.
        func link(_ name: String, holding bytes: [UInt8]) throws {
            Disk.write(outside, bytes)
            try? FileManager.default.removeItem(atPath: data + "/" + name)
            try FileManager.default.createSymbolicLink(atPath: data + "/" + name, withDestinationPath: outside)
        }
    }

    /// Expects `body` to refuse with `.badDirectory` and one line naming `name` and saying `what`.
    private func expectRefused(
        _ name: String,
        _ what: String,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws(JournalError) -> Void
    ) {
        do {
            try body()
            Issue.record("\(name) was not refused", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .badDirectory, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains("/\(name): it is \(what)"), "\(error)", sourceLocation: sourceLocation)
            #expect(!error.message.contains("\n"), sourceLocation: sourceLocation)
        }
    }

    private func open(_ directory: String) throws(JournalError) {
        let (journal, _) = try Journal.open(directory: directory)
        try journal.close()
    }

    @Test func lockLinkedToAFileOutsideIsRefusedAndTheFileKeepsItsContent() throws {
        let setup = try Setup()
        let precious = Array("precious, not a pid\n".utf8)
        try setup.link("LOCK", holding: precious)

        expectRefused("LOCK", "a symbolic link") { () throws(JournalError) in try open(setup.data) }
        expectRefused("LOCK", "a symbolic link") { () throws(JournalError) in
            _ = try JournalTools.repair(directory: setup.data)
        }
        expectRefused("LOCK", "a symbolic link") { () throws(JournalError) in
            _ = try JournalTools.verify(directory: setup.data)
        }
        #expect(Disk.read(setup.outside) == precious)
        #expect(!Disk.list(setup.data).contains { $0.hasPrefix("backup-") })

        // A link to nowhere is not followed to create its target either.
        try FileManager.default.removeItem(atPath: setup.outside)
        expectRefused("LOCK", "a symbolic link") { () throws(JournalError) in try open(setup.data) }
        #expect(!Disk.exists(setup.outside))
    }

    @Test func linkedSegmentWithATornTailIsRefusedAndItsTargetNotTruncated() throws {
        let setup = try Setup()
        let newest = setup.newest
        let torn = Disk.read(setup.data + "/" + newest) + [7, 0, 0]
        try setup.link(newest, holding: torn)

        expectRefused(newest, "a symbolic link") { () throws(JournalError) in try open(setup.data) }
        expectRefused(newest, "a symbolic link") { () throws(JournalError) in
            _ = try JournalTools.repair(directory: setup.data)
        }
        expectRefused(newest, "a symbolic link") { () throws(JournalError) in
            _ = try JournalTools.verify(directory: setup.data)
        }
        #expect(Disk.read(setup.outside) == torn)
        #expect(Disk.segments(setup.data).contains(newest))
    }

    /// Repair refuses a link before changing anything, also one past the first damage, where
    /// its scan stops.
    @Test func repairRefusesALinkPastTheDamageBeforeChangingAnything() throws {
        let setup = try Setup()
        let segments = Disk.segments(setup.data)
        Disk.flipBit(setup.data + "/" + segments[0], at: 30)
        let damaged = Disk.read(setup.data + "/" + segments[0])
        let newest = setup.newest
        try setup.link(newest, holding: Disk.read(setup.data + "/" + newest))

        expectRefused(newest, "a symbolic link") { () throws(JournalError) in
            _ = try JournalTools.repair(directory: setup.data)
        }
        #expect(Disk.read(setup.data + "/" + segments[0]) == damaged)
        #expect(Disk.segments(setup.data) == segments)
        #expect(!Disk.list(setup.data).contains { $0.hasPrefix("backup-") })
    }

    /// A linked snapshot is refused, not skipped as damage (which would start from older state),
    /// and one that recovery does not read (the older of two) is refused too.
    @Test func linkedSnapshotIsRefusedWhetherReadOrNot() throws {
        let setup = try Setup(snapshot: true)
        let (journal, _) = try Journal.open(directory: setup.data, options: JournalOptions(segmentBytes: 200))
        try journal.appendStandard(through: setup.last + 5)
        try journal.snapshotStandard()
        try journal.close()
        let snapshots = Disk.snapshots(setup.data)
        #expect(snapshots.count == 2)
        for name in snapshots {
            let copy = setup.scratch.appending("copy-\(name)")
            Disk.copyDirectory(setup.data, to: copy)
            let outside = setup.scratch.appending("outside-\(name)")
            try FileManager.default.moveItem(atPath: copy + "/" + name, toPath: outside)
            try FileManager.default.createSymbolicLink(atPath: copy + "/" + name, withDestinationPath: outside)
            expectRefused(name, "a symbolic link") { () throws(JournalError) in try open(copy) }
            expectRefused(name, "a symbolic link") { () throws(JournalError) in
                _ = try JournalTools.repair(directory: copy)
            }
            #expect(Disk.snapshots(copy) == snapshots, "the link is neither moved nor removed")
        }
    }

    /// A FIFO named like a segment or `LOCK` does not block the journal, which refuses it.
    @Test func fifoNamedLikeASegmentOrTheLockIsRefusedWithoutBlocking() throws {
        for name in ["segment", "LOCK"] {
            let setup = try Setup()
            let file = name == "LOCK" ? "LOCK" : setup.newest
            let path = setup.data + "/" + file
            try FileManager.default.removeItem(atPath: path)
            #expect(mkfifo(path, 0o644) == 0)
            let opened = unblocking(path) { () -> JournalError? in
                do throws(JournalError) {
                    try open(setup.data)
                    return nil
                } catch {
                    return error
                }
            }
            expectRefused(file, "a FIFO") { () throws(JournalError) in if let opened { throw opened } }
            let repaired = unblocking(path) { () -> JournalError? in
                do throws(JournalError) {
                    _ = try JournalTools.repair(directory: setup.data)
                    return nil
                } catch {
                    return error
                }
            }
            expectRefused(file, "a FIFO") { () throws(JournalError) in if let repaired { throw repaired } }
        }
    }

    /// Runs `body` on another thread and returns what it returns. Should it still be running
    /// after a minute (blocked opening the FIFO at `fifo`, as a journal without `O_NONBLOCK`
    /// would), the FIFO's other end is opened so that it goes on and the test fails instead of
    /// hanging; the journal under test never takes that path.
    private func unblocking<T: Sendable>(_ fifo: String, _ body: @escaping @Sendable () -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        if done.wait(timeout: .now() + 60) == .timedOut {
            Issue.record("blocked opening the FIFO \(fifo)")
            let fd = Glibc.open(fifo, O_RDWR | O_NONBLOCK)
            done.wait()
            if fd >= 0 { Glibc.close(fd) }
        }
        return result.withLock { $0! }
    }

    @Test func directoryNamedLikeASegmentIsRefused() throws {
        let setup = try Setup()
        let newest = setup.newest
        try FileManager.default.removeItem(atPath: setup.data + "/" + newest)
        try FileManager.default.createDirectory(atPath: setup.data + "/" + newest, withIntermediateDirectories: false)
        expectRefused(newest, "a directory") { () throws(JournalError) in try open(setup.data) }
        expectRefused(newest, "a directory") { () throws(JournalError) in
            _ = try JournalTools.repair(directory: setup.data)
        }
    }

    /// Every file repair changes or removes is in the backup as it was: an unfinished
    /// temporary file (which recovery would delete) and a segment with a torn tail.
    @Test func repairBacksUpTemporaryFilesAndTornTails() throws {
        let setup = try Setup()
        let newest = setup.newest
        let torn = Disk.read(setup.data + "/" + newest) + [9, 0, 0]
        Disk.write(setup.data + "/" + newest, torn)
        let temporary = "snapshot-00000000000000000005.snap.tmp"
        Disk.write(setup.data + "/" + temporary, [1, 2, 3])

        let report = try JournalTools.repair(directory: setup.data)
        #expect(report.after.isClean, "\(report)")
        let backup = try #require(report.backupDirectory)
        #expect(Disk.read(backup + "/" + temporary) == [1, 2, 3])
        #expect(Disk.read(backup + "/" + newest) == torn)
        #expect(report.actions.contains { $0.contains(temporary) }, "\(report)")
        #expect(report.actions.contains { $0.contains("truncated \(newest)") && $0.contains("torn tail") }, "\(report)")
        #expect(!Disk.exists(setup.data + "/" + temporary))
        #expect(Disk.size(setup.data + "/" + newest) == torn.count - 3)
    }
}
