import ChimeCore
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

@testable import ChimeJournal

@Suite struct SnapshotTests {
    private let options = JournalOptions(fsync: .none, segmentBytes: 256, snapshotAfterBytes: 1000)

    @Test func snapshotThenRecordsRecoverExactly() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        try journal.appendStandard(through: 30)
        try journal.snapshotStandard()
        try journal.appendStandard(through: 45)
        try journal.close()

        let (again, recovery) = try Journal.open(directory: scratch.path, options: options)
        #expect(recovery.snapshot?.sequence == 30)
        #expect(try recovery.snapshot?.loadEntries().map(Array.init) == Content.entries(through: 30))
        #expect(recovery.records == (31...45).map(Content.record))
        #expect(try Content.state(recovery) == Content.entries(through: 45))
        try again.close()
    }

    /// The writing thread lets go of the frozen state before the loop hears the snapshot is
    /// written: a snapshot begun then copies the state beside no older copy, and memory read then
    /// is memory held (at ten million pending the copy is 630 MB and takes a second to release).
    @Test func theFrozenCopyIsReleasedBeforeTheSnapshotIsReportedWritten() throws {
        final class Shared: Sendable {
            let released = Mutex(false)
            let heard = Mutex<(error: StoreError?, released: Bool)?>(nil)
        }
        final class Frozen: Sendable {
            let shared: Shared
            init(_ shared: Shared) { self.shared = shared }
            deinit { shared.released.withLock { $0 = true } }
        }
        let shared = Shared()
        // The writing waits until this thread holds no reference to the copy: the closure's is
        // then the last.
        let letGo = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        var progress = SnapshotInProgress<Int>()
        try progress.begin(covered: 7, bytesAtBegin: 0, 0)
        do {
            let frozen = Frozen(shared)
            progress.write({ error in
                shared.heard.withLock { $0 = (error, shared.released.withLock { $0 }) }
                done.signal()
            }) { covered, _ in
                letGo.wait()
                withExtendedLifetime(frozen) { #expect(covered == 7) }
            }
        }
        letGo.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        let heard = try #require(shared.heard.withLock { $0 })
        #expect(heard.error == nil)
        #expect(heard.released)
    }

    /// Recovery holds the snapshot it checked open and reads it again entry by entry, instead of
    /// keeping a copy in memory: the file deleted meanwhile still reads back, and one changed
    /// in place meanwhile is refused by name with `.corrupt`, not read as other state.
    @Test func theSnapshotInUseIsReadAgainFromTheFileItChecked() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        try journal.appendStandard(through: 30)
        try journal.snapshotStandard()
        try journal.close()

        let (first, deleted) = try Journal.open(directory: scratch.path, options: options)
        try first.close()
        let name = try #require(Disk.snapshots(scratch.path).first)
        let path = scratch.path + "/" + name
        let bytes = Disk.read(path)
        try FileManager.default.removeItem(atPath: path)
        #expect(deleted.snapshot?.count == 30)
        #expect(try deleted.snapshot?.loadEntries().map(Array.init) == Content.entries(through: 30))

        Disk.write(path, bytes)
        let (second, changed) = try Journal.open(directory: scratch.path, options: options)
        try second.close()
        let handle = try #require(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: UInt64(bytes.count / 2))
        try handle.write(contentsOf: [bytes[bytes.count / 2] ^ 1])
        try handle.close()
        let error = try #require(throws: JournalError.self) { try changed.snapshot?.forEachEntry { _ in } }
        #expect(error.code == .corrupt)
        #expect(error.message.contains(name) && error.message.contains("no longer reads as it did"), "\(error)")
    }

    /// What `Journal.open` recovers from a new directory holding one snapshot of `entries`.
    private func recovered(fromSnapshotOf entries: [[UInt8]], in directory: String) throws -> Recovery {
        let (journal, _) = try Journal.open(directory: directory, options: options)
        let writer = try journal.beginSnapshot()
        for entry in entries { try writer.append(entry) }
        try writer.finish()
        try journal.snapshotCompleted(writer)
        try journal.close()
        let (again, recovery) = try Journal.open(directory: directory, options: options)
        try again.close()
        return recovery
    }

    /// Reading the snapshot back a chunk at a time hands every entry over in order across many
    /// chunks, and a restore that fails part-way (at the first entry, in the middle, at the last)
    /// stops the read there and throws its own error, not one about the file.
    @Test(arguments: [0, 1_000, 2_999])
    func readingBackHandsEveryEntryInOrderAndStopsWhereTheRestoreFails(failingAt: Int) throws {
        let entries = (0..<3_000).map { i in [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 4_000 + i) }
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let snapshot = try #require(try recovered(fromSnapshotOf: entries, in: scratch.path).snapshot)

        var seen = 0
        let error = try #require(throws: JournalError.self) {
            try snapshot.forEachEntry { entry throws(JournalError) in
                if seen == failingAt { throw JournalError(.corrupt, "entry \(seen) refused") }
                seen += 1
            }
        }
        #expect(error.message == "entry \(failingAt) refused")
        #expect(seen == failingAt)
        var read: [[UInt8]] = []
        try snapshot.forEachEntry { read.append(Array($0)) }
        #expect(read == entries)
    }

    /// The snapshot to restore is sized while `Journal.open` checks it, so that recovery reads it
    /// twice (check, restore) and not three times: the sizing equals one counted from the
    /// entries, and the engine restored with it holds every notification.
    @Test func theSnapshotToRestoreIsSizedWhileItIsChecked() throws {
        let engine = Engine()
        let start = Instant(milliseconds: 1_800_000_000_000)
        for (device, count) in [("big", 200), ("small", 10)] {
            let notifications = (0..<count).map {
                ResolvedNotification(id: "n\($0)", fireDate: .instant(start.adding(seconds: 3600)), NotificationSpec())
            }
            engine.apply(.schedule(deviceId: device, at: start, replaced: [], notifications: notifications))
        }
        let entries = engine.snapshot.entries
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let recovery = try recovered(fromSnapshotOf: entries, in: scratch.path)
        let snapshot = try #require(recovery.snapshot)
        #expect(snapshot.sizing == SnapshotSizing(entries.lazy.map { $0[...] }))
        #expect(snapshot.sizing != SnapshotSizing())
        let restored = try Engine.replaying(recovery, directory: scratch.path)
        #expect(restored.pendingCount == 210)
        #expect(Set(restored.snapshot.deviceIds) == ["big", "small"])
    }

    /// The worker deletes what a snapshot made obsolete on another thread: recording the snapshot
    /// deletes nothing, the journal goes on (another snapshot included) before the deletion runs,
    /// and a file already gone is no error.
    @Test func obsoleteFilesAreDeletedWhenTheCompactionRunsNotBefore() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let directory = scratch.path
        let (journal, _) = try Journal.open(directory: directory, options: options)
        try journal.appendStandard(through: 40)
        try journal.snapshotStandard()
        try journal.appendStandard(through: 80)
        try journal.snapshotStandard()
        try journal.appendStandard(through: 120)
        let before = Disk.list(directory)
        let writer = try journal.beginSnapshot()
        for entry in Content.entries(through: 120) { try writer.append(entry) }
        try writer.finish()
        let compaction = try journal.recordSnapshot(writer)
        // The oldest snapshot, then the segments only it needed.
        #expect(compaction.obsolete.first == Disk.snapshots(directory).sorted().first)
        #expect(compaction.obsolete.count >= 2)
        #expect(compaction.obsolete.dropFirst().allSatisfy { $0.hasPrefix("journal-") })
        #expect(Set(compaction.obsolete).isSubset(of: before), "nothing deleted yet")
        #expect(Disk.snapshots(directory).count == 3)
        // The journal goes on, and the next snapshot lists the old one again.
        try journal.appendStandard(through: 160)
        try journal.commit()
        try journal.snapshotStandard()
        try compaction.run()
        #expect(Disk.snapshots(directory).count == 2)
        #expect(!Disk.list(directory).contains { compaction.obsolete.contains($0) })
        try compaction.run()
        try journal.close()
        let (again, recovery) = try Journal.open(directory: directory, options: options)
        #expect(try Content.state(recovery) == Content.entries(through: 160))
        try again.close()
    }

    @Test func snapshotDueFollowsBytesWritten() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        #expect(!journal.snapshotDue)
        while !journal.snapshotDue { try journal.append(type: 0, payload: [UInt8](repeating: 7, count: 50)) }
        #expect(journal.bytesSinceSnapshot >= 1000)
        let writer = try journal.beginSnapshot()
        #expect(!journal.snapshotDue)  // one is running
        #expect(throws: JournalError.invalidState) { try journal.beginSnapshot() }
        try journal.append(type: 0, payload: [1])
        try writer.append([1])
        try writer.finish()
        try journal.snapshotCompleted(writer)
        #expect(journal.bytesSinceSnapshot == 18)
        #expect(!journal.snapshotDue)
        try journal.close()

        // Reopened, the count is what follows the snapshot.
        let (again, _) = try Journal.open(directory: scratch.path, options: options)
        #expect(again.bytesSinceSnapshot == 18)
        try again.close()
    }

    @Test func abandonedSnapshotLeavesNothing() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        try journal.appendStandard(through: 10)
        let writer = try journal.beginSnapshot()
        try writer.append([1, 2])
        writer.abandon()
        #expect(!Disk.list(scratch.path).contains { $0.contains("snap") })
        #expect(throws: JournalError.invalidState) { try journal.snapshotCompleted(writer) }
        try journal.snapshotStandard()  // a new one may start
        try journal.close()
    }

    @Test func snapshotWithoutNewRecordsReplacesTheSameSequence() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        try journal.appendStandard(through: 10)
        try journal.snapshotStandard()
        try journal.snapshotStandard()
        try journal.close()
        #expect(Disk.snapshots(scratch.path) == [JournalFormat.snapshotName(10)])
        let (again, recovery) = try Journal.open(directory: scratch.path, options: options)
        #expect(recovery.snapshot?.sequence == 10 && recovery.records.isEmpty)
        #expect(try Content.state(recovery) == Content.entries(through: 10))
        try again.close()
    }

    /// The writer runs on another thread while the owner keeps appending.
    @Test func snapshotOnAnotherThread() async throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        try journal.appendStandard(through: 200)
        let writer = try journal.beginSnapshot()
        let entries = Content.entries(through: writer.coveredSequence)
        let task = Task.detached {
            for entry in entries { try writer.append(entry) }
            try writer.finish()
        }
        try journal.appendStandard(through: 300)
        try journal.commit()
        try await task.value
        try journal.snapshotCompleted(writer)
        try journal.close()
        let (again, recovery) = try Journal.open(directory: scratch.path, options: options)
        #expect(recovery.snapshot?.sequence == 200)
        #expect(try Content.state(recovery) == Content.entries(through: 300))
        try again.close()
    }

    /// Many records and snapshots: old segments and snapshots go, two snapshots stay, and the
    /// state is exact after reopening.
    @Test func rolloverKeepsTwoSnapshotsAndTheSegmentsTheyNeed() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        var snapshots: [UInt64] = []
        for round in 1...8 {
            try journal.appendStandard(through: UInt64(round) * 60)
            try journal.snapshotStandard()
            snapshots.append(UInt64(round) * 60)
            let onDisk = Disk.snapshots(scratch.path).compactMap(JournalFormat.snapshotSequence)
            #expect(onDisk == Array(snapshots.suffix(2)))
            // Every segment kept is needed to replay from the older snapshot kept.
            let segments = Disk.segments(scratch.path).compactMap(JournalFormat.segmentSequence)
            let older = snapshots.count >= 2 ? snapshots[snapshots.count - 2] : 0
            #expect(segments.first.map { $0 <= older + 1 } ?? true)
            if snapshots.count >= 2 { #expect(segments.first == older + 1, "\(segments)") }
        }
        try journal.appendStandard(through: 515)
        try journal.close()

        let (again, recovery) = try Journal.open(directory: scratch.path, options: options)
        #expect(recovery.snapshot?.sequence == 480)
        #expect(recovery.records.first?.sequence == 481)
        #expect(try Content.state(recovery) == Content.entries(through: 515))
        #expect(recovery.warnings.isEmpty)
        try again.close()
        #expect(try JournalTools.verify(directory: scratch.path).isClean)
    }

    @Test(arguments: ["flip", "truncate", "trailer", "empty", "extended"])
    func damagedNewestSnapshotFallsBackToThePrevious(damage: String) throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        try journal.appendStandard(through: 50)
        try journal.snapshotStandard()
        try journal.appendStandard(through: 100)
        try journal.snapshotStandard()
        try journal.appendStandard(through: 120)
        try journal.close()

        let newest = scratch.appending(JournalFormat.snapshotName(100))
        let size = Disk.size(newest)
        switch damage {
        case "flip": Disk.flipBit(newest, at: size / 2)
        case "truncate": Disk.truncate(newest, to: size / 2)
        case "trailer": Disk.truncate(newest, to: size - 1)
        case "empty": Disk.truncate(newest, to: 0)
        default: Disk.write(newest, Disk.read(newest) + [0])
        }
        let (again, recovery) = try Journal.open(directory: scratch.path, options: options)
        #expect(recovery.snapshot?.sequence == 50)
        #expect(try Content.state(recovery) == Content.entries(through: 120))
        #expect(recovery.warnings.count == 1)
        #expect(recovery.warnings.first?.hasPrefix(JournalFormat.snapshotName(100)) == true)
        // The next snapshot replaces the damaged one in the rotation.
        try again.appendStandard(through: 130)
        try again.snapshotStandard()
        try again.close()
        #expect(Disk.snapshots(scratch.path) == [JournalFormat.snapshotName(50), JournalFormat.snapshotName(130)])
        let (third, last) = try Journal.open(directory: scratch.path, options: options)
        #expect(try last.snapshot?.sequence == 130 && Content.state(last) == Content.entries(through: 130))
        try third.close()
    }

    @Test func damagedOnlySnapshotFallsBackToFullReplay() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        try journal.appendStandard(through: 40)
        try journal.snapshotStandard()
        try journal.appendStandard(through: 45)
        try journal.close()
        Disk.flipBit(scratch.appending(JournalFormat.snapshotName(40)), at: 50)
        let (again, recovery) = try Journal.open(directory: scratch.path, options: options)
        #expect(recovery.snapshot == nil)
        #expect(recovery.records == (1...45).map(Content.record))
        try again.close()
    }

    // MARK: Crash points

    /// Where a snapshot's progress is stopped, by failing the next step.
    enum CrashPoint: String, CaseIterable, Sendable {
        case afterTemporaryWrite, afterTemporarySync, afterRename, duringCompaction
    }

    @Test(arguments: CrashPoint.allCases)
    func crashDuringSnapshotLosesNothing(point: CrashPoint) throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let fs = FaultyFileSystem()
        let directory = scratch.path
        do {
            let (journal, _) = try Journal.open(directory: directory, options: options, fileSystem: fs)
            // Two snapshots already, so compaction has something to delete.
            try journal.appendStandard(through: 40)
            try journal.snapshotStandard()
            try journal.appendStandard(through: 80)
            try journal.snapshotStandard()
            try journal.appendStandard(through: 120)

            switch point {
            case .afterTemporaryWrite:
                fs.inject { $0.operation == .sync && $0.path.hasSuffix(".snap.tmp") ? .fail(.ioError) : nil }
            case .afterTemporarySync:
                fs.inject { $0.operation == .rename ? .fail(.ioError) : nil }
            case .afterRename:
                fs.inject { call in
                    call.operation == .sync && call.path == directory && (call.counts[.rename] ?? 0) > 2
                        ? .fail(.ioError) : nil
                }
            case .duringCompaction:
                // Let the first deletion through, fail the second.
                let unlinksBefore = fs.count(.unlink)
                fs.inject { $0.operation == .unlink && $0.count == unlinksBefore + 1 ? .fail(.ioError) : nil }
            }
            let writer = try journal.beginSnapshot()
            for entry in Content.entries(through: 120) { try writer.append(entry) }
            do {
                try writer.finish()
                try journal.snapshotCompleted(writer)
                Issue.record("the injected failure did not happen")
            } catch {
                // The process "stops" here: no abandon, no close, nothing synced after.
            }
            try journal.appendStandard(through: 125)
            try journal.commit()
        }
        fs.inject(nil)

        let (again, recovery) = try Journal.open(directory: directory, options: options)
        #expect(try Content.state(recovery) == Content.entries(through: 125))
        #expect(!Disk.list(directory).contains { $0.hasSuffix(".tmp") })
        switch point {
        case .afterTemporaryWrite, .afterTemporarySync:
            #expect(recovery.snapshot?.sequence == 80)
            #expect(recovery.warnings.contains { $0.contains("removed unfinished temporary file") })
        case .afterRename, .duringCompaction:
            #expect(recovery.snapshot?.sequence == 120)
        }
        // The next snapshot compacts what the interrupted one did not.
        try again.snapshotStandard()
        try again.close()
        #expect(Disk.snapshots(directory).count == 2)
        let (third, last) = try Journal.open(directory: directory, options: options)
        #expect(try Content.state(last) == Content.entries(through: 125))
        try third.close()
    }

    /// `verify`, `dump` and `read` take no lock, and a worker beside them compacts whenever it
    /// snapshots: the files they listed may be gone when they read them. They list again and
    /// report what is there, not an I/O error.
    @Test func theToolsReadADirectoryThatACompactionChangesUnderThem() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        defer { try? journal.close() }
        try journal.appendStandard(through: 60)
        try journal.snapshotStandard()
        try journal.appendStandard(through: 120)
        try journal.snapshotStandard()
        try journal.appendStandard(through: 150)
        var last: UInt64 = 150
        // The first listing of each tool is followed by a compaction: the older snapshot and the
        // segments after it go.
        let fs = ListingThenChange {
            last += 60
            try journal.appendStandard(through: last)
            try journal.snapshotStandard()
        }
        let report = try JournalTools.verify(directory: scratch.path, fileSystem: fs)
        #expect(report.isClean, "\(report)")
        #expect(fs.listings == 2)

        var dumped: [UInt64] = []
        fs.armed = true
        try JournalTools.dump(directory: scratch.path, fileSystem: fs) { dumped.append($0.sequence) }
        #expect(dumped == dumped.sorted() && Set(dumped).count == dumped.count, "\(dumped)")
        #expect(dumped.last == last)

        // What the segments it listed hold when it reads them: not those the compaction's round
        // started after the listing.
        fs.armed = true
        let recovery = try JournalTools.read(directory: scratch.path, fileSystem: fs)
        #expect((last - 60..<last).contains(recovery.lastSequence))
        #expect(try Content.state(recovery) == Content.entries(through: recovery.lastSequence))
    }
}

/// The real file system, calling `change` after the next listing of a directory while `armed`,
/// before the caller reads what was listed: a worker compacting beside a tool.
private final class ListingThenChange: FileSystem, @unchecked Sendable {
    private let system = SystemFileSystem()
    private let change: () throws -> Void
    var armed = true
    private(set) var listings = 0

    init(_ change: @escaping () throws -> Void) { self.change = change }

    func listDirectory(_ path: String) throws(Errno) -> [String] {
        let names = try system.listDirectory(path)
        listings += 1
        if armed {
            armed = false
            try? change()
        }
        return names
    }

    func open(_ path: String, access: FileAccess, options: OpenOptions) throws(Errno) -> FileDescriptor {
        try system.open(path, access: access, options: options)
    }
    func close(_ fd: FileDescriptor) throws(Errno) { try system.close(fd) }
    func read(_ fd: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try system.read(fd, into: buffer, at: offset)
    }
    func write(_ fd: FileDescriptor, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try system.write(fd, bytes, at: offset)
    }
    func truncate(_ fd: FileDescriptor, to length: Int) throws(Errno) { try system.truncate(fd, to: length) }
    func dataSync(_ fd: FileDescriptor) throws(Errno) { try system.dataSync(fd) }
    func sync(_ fd: FileDescriptor) throws(Errno) { try system.sync(fd) }
    func size(of fd: FileDescriptor) throws(Errno) -> Int { try system.size(of: fd) }
    func kind(of fd: FileDescriptor) throws(Errno) -> FileKind { try system.kind(of: fd) }
    func rename(_ source: String, to destination: String) throws(Errno) { try system.rename(source, to: destination) }
    func unlink(_ path: String) throws(Errno) { try system.unlink(path) }
    func makeDirectory(_ path: String) throws(Errno) { try system.makeDirectory(path) }
    func lock(_ fd: FileDescriptor, exclusive: Bool) throws(Errno) { try system.lock(fd, exclusive: exclusive) }
}
