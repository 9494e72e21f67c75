import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeJournal

@Suite struct CRC32CTests {
    @Test(arguments: [
        ("", UInt32(0)),
        ("a", 0xC1D0_4330),
        ("123456789", 0xE306_9283),
        ("The quick brown fox jumps over the lazy dog", 0x2262_0404),
    ])
    func knownVectors(text: String, expected: UInt32) {
        #expect(CRC32C.checksum(Array(text.utf8)) == expected)
    }

    @Test func rfc3720Vectors() {
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum((0..<32).map { UInt8(31 - $0) }) == 0x113F_DB5C)
    }

    @Test func continuingEqualsWhole() {
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        for split in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let first = CRC32C.checksum(Array(bytes[..<split]))
            #expect(CRC32C.checksum(Array(bytes[split...]), continuing: first) == CRC32C.checksum(bytes))
        }
    }

    /// The processor's instruction and the tables agree, whatever the length and alignment.
    @Test func hardwareEqualsSoftware() {
        #if arch(x86_64) || arch(arm64)
        #expect(CRC32C.usesHardware, "every x86-64 and ARM server chimed runs on has the instruction")
        #endif
        var random = SplitMix64(seed: 32)
        let bytes = (0..<4096).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        bytes.withUnsafeBytes { all in
            for _ in 0..<500 {
                let start = Int(random.next() % 64)
                let end = start + Int(random.next() % UInt64(all.count - start))
                let part = UnsafeRawBufferPointer(rebasing: all[start..<end])
                let seed = UInt32(truncatingIfNeeded: random.next())
                #expect(CRC32C.checksum(part, continuing: seed) == CRC32C.software(part, continuing: seed))
            }
        }
        for text in ["", "a", "123456789"] {
            Array(text.utf8).withUnsafeBytes {
                #expect(CRC32C.software($0) == CRC32C.checksum($0))
            }
        }
    }
}

@Suite struct FsyncPolicyTests {
    @Test func parsing() {
        #expect(FsyncPolicy(parsing: "always") == .always)
        #expect(FsyncPolicy(parsing: "none") == FsyncPolicy.none)
        #expect(FsyncPolicy(parsing: "interval:250") == .interval(milliseconds: 250))
        for bad in ["", "Always", "interval:", "interval:0", "interval:-5", "interval:x", "sometimes"] {
            #expect(FsyncPolicy(parsing: bad) == nil, "\(bad)")
        }
        #expect(FsyncPolicy.interval(milliseconds: 5).description == "interval:5")
    }
}

@Suite struct JournalBasicTests {
    @Test func appendCommitReopen() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, recovery) = try Journal.open(directory: scratch.path, options: JournalOptions())
        #expect(recovery.snapshot == nil && recovery.records.isEmpty && recovery.lastSequence == 0)
        #expect(recovery.warnings.isEmpty)
        for expected: UInt64 in 1...20 {
            let sequence = try journal.append(type: Content.type(expected), payload: Content.payload(expected))
            #expect(sequence == expected)
        }
        #expect(journal.hasUnsyncedData)
        try journal.commit()
        #expect(!journal.hasUnsyncedData)
        try journal.close()

        let (again, second) = try Journal.open(directory: scratch.path, options: JournalOptions())
        #expect(second.records == (1...20).map(Content.record))
        #expect(second.lastSequence == 20)
        #expect(try again.append(type: 1, payload: [1]) == 21)
        try again.close()
        #expect(Disk.segments(scratch.path) == ["journal-00000000000000000001.log"])
    }

    @Test func closedJournalRefusesWrites() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path)
        try journal.close()
        try journal.close()  // harmless
        #expect(throws: JournalError.invalidState) { try journal.append(type: 0, payload: []) }
    }

    @Test func directoryThatIsAFile() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        Disk.write(scratch.appending("file"), [1])
        #expect(throws: JournalError.badDirectory) { try Journal.open(directory: scratch.appending("file")) }
        #expect(throws: JournalError.badDirectory) { try Journal.open(directory: scratch.appending("file/deeper")) }
    }

    /// Missing parents are created (chimed's `--data-dir /var/lib/chime/data` on a new machine).
    @Test func missingParentsAreCreated() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, recovery) = try Journal.open(directory: scratch.appending("missing/deeper/data"))
        #expect(recovery.records.isEmpty)
        try journal.close()
        #expect(try JournalTools.contents(of: scratch.appending("missing/deeper")) == .entries(["data"]))
        #expect(try JournalTools.contents(of: scratch.appending("nothing")) == .missing)
        Disk.write(scratch.appending("file"), [1])
        #expect(try JournalTools.contents(of: scratch.appending("file")) == .notADirectory)
    }

    @Test func secondOpenIsLockedUntilClose() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path)
        do {
            _ = try Journal.open(directory: scratch.path)
            Issue.record("second open succeeded")
        } catch {
            #expect(error.code == .locked)
            #expect(error.message.contains("pid \(getpid())"), "\(error.message)")
        }
        // The offline tools that only read work beside the running journal.
        try journal.append(type: 1, payload: [9])
        try journal.commit()
        #expect(try JournalTools.verify(directory: scratch.path).recordCount == 1)
        #expect(throws: JournalError.locked) { try JournalTools.repair(directory: scratch.path) }
        try journal.close()
        let (again, recovery) = try Journal.open(directory: scratch.path)
        #expect(recovery.records.count == 1)
        try again.close()
    }

    @Test func droppedJournalReleasesLock() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        do {
            let (journal, _) = try Journal.open(directory: scratch.path)
            try journal.append(type: 1, payload: [1])
        }
        let (again, _) = try Journal.open(directory: scratch.path)
        try again.close()
    }

    @Test func segmentsRotateAndSequencesContinue() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let options = JournalOptions(fsync: .none, segmentBytes: 300)
        let (journal, _) = try Journal.open(directory: scratch.path, options: options)
        try journal.appendStandard(through: 100)
        try journal.close()
        let segments = Disk.segments(scratch.path)
        #expect(segments.count > 5)
        #expect(segments.first == "journal-00000000000000000001.log")
        let (again, recovery) = try Journal.open(directory: scratch.path, options: options)
        #expect(recovery.records == (1...100).map(Content.record))
        try again.appendStandard(through: 150)
        try again.close()
        var dumped: [JournalRecord] = []
        try JournalTools.dump(directory: scratch.path) { dumped.append($0) }
        #expect(dumped == (1...150).map(Content.record))
        let report = try JournalTools.verify(directory: scratch.path)
        #expect(report.isClean && report.recordCount == 150 && report.firstSequence == 1 && report.lastSequence == 150)
    }

    @Test func oversizedPayloadIsRefused() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let (journal, _) = try Journal.open(directory: scratch.path)
        let huge = [UInt8](repeating: 0, count: JournalFormat.maximumPayloadBytes + 1)
        #expect(throws: JournalError.invalidArgument) { try journal.append(type: 0, payload: huge) }
        #expect(try journal.append(type: 0, payload: []) == 1)
        try journal.close()
    }
}

@Suite struct GroupCommitTests {
    @Test func oneSyncPerCommittedBatch() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let fs = FaultyFileSystem()
        let (journal, _) = try Journal.open(directory: scratch.path, options: JournalOptions(), fileSystem: fs)
        let before = fs.count(.dataSync)
        for _ in 0..<100 { try journal.append(type: 1, payload: [1, 2, 3]) }
        #expect(fs.count(.dataSync) == before)
        try journal.commit()
        #expect(fs.count(.dataSync) == before + 1)
        try journal.commit()  // nothing new: no sync
        #expect(fs.count(.dataSync) == before + 1)
        try journal.append(type: 1, payload: [])
        try journal.commit()
        #expect(fs.count(.dataSync) == before + 2)
        try journal.close()
        #expect(fs.count(.dataSync) == before + 2)
    }

    @Test func intervalSyncsOnlyWhenDue() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let fs = FaultyFileSystem()
        let options = JournalOptions(fsync: .interval(milliseconds: 100))
        let (journal, _) = try Journal.open(directory: scratch.path, options: options, fileSystem: fs)
        let start = ContinuousClock.now
        try journal.append(type: 1, payload: [1])
        let base = fs.count(.dataSync)
        try journal.sync(now: start)  // the interval counts from here
        #expect(fs.count(.dataSync) == base + 1)
        try journal.append(type: 1, payload: [2])
        #expect(journal.syncDeadline == start + .milliseconds(100))
        try journal.commit(now: start + .milliseconds(50))
        #expect(fs.count(.dataSync) == base + 1 && journal.hasUnsyncedData)
        try journal.commit(now: start + .milliseconds(99))
        #expect(fs.count(.dataSync) == base + 1)
        try journal.commit(now: start + .milliseconds(100))
        #expect(fs.count(.dataSync) == base + 2 && !journal.hasUnsyncedData)
        #expect(journal.syncDeadline == nil)
        try journal.commit(now: start + .milliseconds(500))  // nothing unsynced
        #expect(fs.count(.dataSync) == base + 2)
        try journal.close()
    }

    @Test func noneNeverSyncsOnCommit() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let fs = FaultyFileSystem()
        let (journal, _) = try Journal.open(
            directory: scratch.path,
            options: JournalOptions(fsync: .none),
            fileSystem: fs
        )
        let base = fs.count(.dataSync)
        for _ in 0..<10 {
            try journal.append(type: 1, payload: [1])
            try journal.commit(now: .now + .seconds(3600))
        }
        #expect(fs.count(.dataSync) == base && journal.hasUnsyncedData)
        try journal.close()  // close syncs whatever the policy
        #expect(fs.count(.dataSync) == base + 1)
    }
}

@Suite struct FormatTests {
    @Test func names() {
        #expect(JournalFormat.segmentName(42) == "journal-00000000000000000042.log")
        #expect(JournalFormat.snapshotName(7) == "snapshot-00000000000000000007.snap")
        #expect(JournalFormat.segmentSequence("journal-00000000000000000042.log") == 42)
        #expect(JournalFormat.snapshotSequence("snapshot-00000000000000000007.snap") == 7)
        for other in [
            "journal-42.log", "journal-0000000000000000004x.log", "journal-00000000000000000042.log.tmp",
            "snapshot-00000000000000000007.snap.tmp", "journal-99999999999999999999.log", "LOCK", "backup-x",
        ] {
            #expect(JournalFormat.segmentSequence(other) == nil && JournalFormat.snapshotSequence(other) == nil)
        }
    }

    @Test func errorsCompareByCode() {
        let error = JournalError(.corrupt, "journal-1.log: offset 5: bad", errno: .ioError)
        #expect(error == .corrupt)
        #expect(error != .io)
        #expect(error.description == "corrupt: journal-1.log: offset 5: bad: \(Errno.ioError)")
    }
}
