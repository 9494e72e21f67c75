import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeJournal

/// A directory with two segments of standard records, and where each record of the last one is.
private struct TwoSegments {
    let scratch: TemporaryDirectory
    let pristine: String
    let older: String
    let newest: String
    /// Start offsets of the newest segment's records, then its end.
    let boundaries: [Int]
    let newestFirst: UInt64
    let last: UInt64 = 12

    init() throws {
        scratch = try TemporaryDirectory(prefix: "chime-journal")
        pristine = scratch.appending("pristine")
        let options = JournalOptions(fsync: .none, segmentBytes: 200)
        let (journal, _) = try Journal.open(directory: pristine, options: options)
        try journal.appendStandard(through: last)
        try journal.close()
        let segments = Disk.segments(pristine)
        precondition(segments.count >= 2, "expected two segments")
        older = segments[segments.count - 2]
        newest = segments[segments.count - 1]
        newestFirst = JournalFormat.segmentSequence(newest) ?? 0
        boundaries = Disk.recordBoundaries(pristine + "/" + newest)
        precondition(boundaries.count >= 4, "expected at least three records in the newest segment")
    }

    /// A fresh copy of the pristine directory.
    func copy(_ name: String) -> String {
        let path = scratch.appending(name)
        Disk.copyDirectory(pristine, to: path)
        return path
    }
}

@Suite struct TornTailTests {
    /// Cuts the newest segment at every byte inside its last three records: exactly the records
    /// written whole come back, bytes dropped are reported, and appends continue after them.
    @Test func truncationAtEveryOffsetOfTheLastThreeRecords() throws {
        let setup = try TwoSegments()
        let ends = setup.boundaries
        let firstCut = ends[ends.count - 4]
        let fileEnd = ends[ends.count - 1]
        #expect(fileEnd - firstCut > 60, "\(ends)")
        for cut in firstCut...fileEnd {
            let directory = setup.copy("cut-\(cut)")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            Disk.truncate(directory + "/" + setup.newest, to: cut)
            // Records wholly before the cut survive.
            let whole = ends.dropFirst().filter { $0 <= cut }.count
            let lastKept = setup.newestFirst + UInt64(whole) - 1

            let (journal, recovery) = try Journal.open(directory: directory, options: JournalOptions(fsync: .none))
            #expect(recovery.records == (1...lastKept).map(Content.record), "cut at \(cut)")
            #expect(recovery.lastSequence == lastKept)
            let dropped = cut - (ends.last { $0 <= cut } ?? cut)
            if dropped > 0 {
                #expect(recovery.warnings.count == 1, "cut at \(cut)")
                let expected = "\(setup.newest): torn tail at offset \(cut - dropped), \(dropped) bytes dropped"
                #expect(recovery.warnings.first?.hasPrefix(expected) == true, "\(recovery.warnings)")
            } else {
                #expect(recovery.warnings.isEmpty, "cut at \(cut): \(recovery.warnings)")
            }
            try journal.appendStandard(through: lastKept + 2)
            try journal.close()

            let (again, second) = try Journal.open(directory: directory)
            #expect(second.records == (1...(lastKept + 2)).map(Content.record), "cut at \(cut)")
            #expect(second.warnings.isEmpty)
            try again.close()
        }
    }

    @Test func segmentWithIncompleteHeaderIsRemoved() throws {
        let setup = try TwoSegments()
        for size in [0, 1, 23] {
            let directory = setup.copy("header-\(size)")
            Disk.truncate(directory + "/" + setup.newest, to: size)
            let (journal, recovery) = try Journal.open(directory: directory)
            #expect(recovery.records == (1..<setup.newestFirst).map(Content.record))
            #expect(recovery.warnings.first?.contains("incomplete header") == true)
            try journal.appendStandard(through: setup.newestFirst + 1)
            try journal.close()
            let (again, second) = try Journal.open(directory: directory)
            #expect(second.records == (1...(setup.newestFirst + 1)).map(Content.record))
            try again.close()
        }
    }

    @Test func zeroFilledTailIsTorn() throws {
        let setup = try TwoSegments()
        let directory = setup.copy("zeros")
        let path = directory + "/" + setup.newest
        Disk.write(path, Disk.read(path) + [UInt8](repeating: 0, count: 4096))
        let (journal, recovery) = try Journal.open(directory: directory)
        #expect(recovery.records == (1...setup.last).map(Content.record))
        #expect(recovery.warnings.first?.contains("4096 bytes dropped") == true)
        try journal.close()
    }
}

@Suite struct CorruptionTests {
    /// A flipped bit anywhere in the newest record is a torn write: dropped with a warning.
    @Test func bitFlipInLastRecordIsTruncated() throws {
        let setup = try TwoSegments()
        let start = setup.boundaries[setup.boundaries.count - 2]
        let end = setup.boundaries[setup.boundaries.count - 1]
        for offset in start..<end {
            let directory = setup.copy("flip-\(offset)")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            Disk.flipBit(directory + "/" + setup.newest, at: offset, bit: UInt8(offset % 8))
            let (journal, recovery) = try Journal.open(directory: directory)
            #expect(recovery.records == (1..<setup.last).map(Content.record), "flip at \(offset)")
            #expect(recovery.warnings.first?.contains("torn tail at offset \(start)") == true, "\(recovery.warnings)")
            try journal.close()
        }
    }

    /// A flipped bit in any record of the newest segment that has valid records after it is
    /// damage, not a torn write.
    @Test func bitFlipInMiddleRecordIsRefused() throws {
        let setup = try TwoSegments()
        let ends = setup.boundaries
        for index in 0..<(ends.count - 2) {
            for offset in [
                ends[index], ends[index] + 1, ends[index] + 4, ends[index] + 8, ends[index] + 9, ends[index + 1] - 1,
            ] {
                let directory = setup.copy("middle-\(offset)")
                defer { try? FileManager.default.removeItem(atPath: directory) }
                Disk.flipBit(directory + "/" + setup.newest, at: offset, bit: 3)
                try expectCorrupt(directory, file: setup.newest, offset: ends[index])
            }
        }
    }

    @Test func anyDamageInOlderSegmentIsRefused() throws {
        let setup = try TwoSegments()
        let size = Disk.size(setup.pristine + "/" + setup.older)
        let olderBoundaries = Disk.recordBoundaries(setup.pristine + "/" + setup.older)
        #expect(olderBoundaries.count >= 3 && size > 100, "\(olderBoundaries)")
        for offset in stride(from: 0, to: size, by: 3) + [size - 1] {
            let directory = setup.copy("older-\(offset)")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            Disk.flipBit(directory + "/" + setup.older, at: offset, bit: 1)
            let recordStart = offset < 24 ? nil : olderBoundaries.last { $0 <= offset }
            try expectCorrupt(directory, file: setup.older, offset: recordStart)
        }
    }

    /// A segment whose records a snapshot holds is not read at start-up (it is kept only in case
    /// that snapshot is damaged): damage there does not stop the journal, `verify` still reports
    /// it, and once the snapshot is gone it is refused like any other.
    @Test func damageInASegmentTheSnapshotCoversIsLeftForVerify() throws {
        let setup = try TwoSegments()
        let directory = setup.copy("covered")
        let options = JournalOptions(fsync: .none, segmentBytes: 200)
        do {
            let (journal, _) = try Journal.open(directory: directory, options: options)
            try journal.snapshotStandard()
            try journal.close()
        }
        #expect(Disk.segments(directory).contains(setup.older))
        Disk.flipBit(directory + "/" + setup.older, at: 30, bit: 1)

        let (journal, recovery) = try Journal.open(directory: directory, options: options)
        try journal.close()
        #expect(recovery.snapshot?.sequence == setup.last)
        #expect(try Content.state(recovery) == Content.entries(through: setup.last))
        let report = try JournalTools.verify(directory: directory)
        #expect(report.problem?.file == setup.older, "\(report)")

        for snapshot in Disk.snapshots(directory) {
            try FileManager.default.removeItem(atPath: directory + "/" + snapshot)
        }
        try expectCorrupt(directory, file: setup.older, offset: nil)
    }

    @Test func truncatedOlderSegmentIsRefused() throws {
        let setup = try TwoSegments()
        let directory = setup.copy("short")
        let path = directory + "/" + setup.older
        Disk.truncate(path, to: Disk.size(path) - 1)
        try expectCorrupt(directory, file: setup.older, offset: nil)
    }

    @Test func badMagicVersionAndGapAreRefused() throws {
        let setup = try TwoSegments()

        let magic = setup.copy("magic")
        Disk.flipBit(magic + "/" + setup.newest, at: 2)
        try expectCorrupt(magic, file: setup.newest, offset: 0, saying: "bad magic")
        try expectRepairable(magic, keeping: setup.newestFirst - 1)

        // Version 2, with a header CRC that matches: a file from a newer release.
        let version = setup.copy("version")
        var header = JournalFormat.segmentMagic
        header.appendLittleEndian(UInt32(2))
        header.appendLittleEndian(setup.newestFirst)
        header.appendLittleEndian(CRC32C.checksum(header))
        let path = version + "/" + setup.newest
        Disk.write(path, header + Disk.read(path).dropFirst(24))
        try expectCorrupt(version, file: setup.newest, offset: 8, saying: "unsupported format version 2")
        try expectRepairable(version, keeping: setup.newestFirst - 1)

        // A whole segment missing between two others.
        let gap = setup.copy("gap")
        let (journal, _) = try Journal.open(directory: gap, options: JournalOptions(segmentBytes: 200))
        try journal.appendStandard(through: setup.last + 10)
        try journal.close()
        let segments = Disk.segments(gap)
        try FileManager.default.removeItem(atPath: gap + "/" + segments[1])
        try expectCorrupt(gap, file: segments[2], offset: 0, saying: "sequence gap")
        try expectRepairable(gap, keeping: (JournalFormat.segmentSequence(segments[1]) ?? 0) - 1)

        // A record with a valid CRC but the wrong sequence.
        let skip = setup.copy("skip")
        let (writer, _) = try Journal.open(directory: skip)
        try writer.close()
        let segment = skip + "/" + setup.newest
        var bytes = Disk.read(segment)
        let at = setup.boundaries[1]
        bytes[at + 9] &+= 1
        let length = Int(bytes[at]) | Int(bytes[at + 1]) << 8
        let crc = CRC32C.checksum(Array(bytes[(at + 8)..<(at + 4 + length)]))
        withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange((at + 4)..<(at + 8), with: $0) }
        Disk.write(segment, bytes)
        try expectCorrupt(skip, file: setup.newest, offset: at, saying: "where")
        try expectRepairable(skip, keeping: setup.newestFirst)
    }

    /// A segment named and headed sequence 0 is refused for what is wrong with it (the name and
    /// the header agree): sequences start at 1.
    @Test func segmentZeroSaysSequencesStartAtOne() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let directory = scratch.appending("zero")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let name = JournalFormat.segmentName(0)
        Disk.write(directory + "/" + name, JournalFormat.segmentHeader(firstSequence: 0))
        try expectCorrupt(
            directory,
            file: name,
            offset: 12,
            saying: "segment starts at sequence 0, but sequences start at 1"
        )
    }

    @Test func repairMakesDamagedDirectoryOpenable() throws {
        let setup = try TwoSegments()
        // Damage a middle record of the newest segment.
        let directory = setup.copy("repair")
        let damaged = setup.boundaries[1]
        Disk.flipBit(directory + "/" + setup.newest, at: damaged + 12)
        #expect(try !JournalTools.verify(directory: directory).isOpenable)
        let original = Disk.read(directory + "/" + setup.newest)

        let report = try JournalTools.repair(directory: directory)
        #expect(report.after.isClean, "\(report)")
        let backup = try #require(report.backupDirectory)
        #expect(Disk.read(backup + "/" + setup.newest) == original)
        #expect(report.actions.contains { $0.contains("truncated \(setup.newest) at offset \(damaged)") })

        let (journal, recovery) = try Journal.open(directory: directory)
        #expect(recovery.records == (1...setup.newestFirst).map(Content.record))
        #expect(recovery.warnings.isEmpty)
        try journal.appendStandard(through: setup.newestFirst + 3)
        try journal.close()
        #expect(try JournalTools.verify(directory: directory).isClean)
    }

    @Test func repairOfOlderSegmentAndGap() throws {
        let setup = try TwoSegments()
        let directory = setup.copy("older")
        Disk.flipBit(directory + "/" + setup.older, at: 30)
        let report = try JournalTools.repair(directory: directory)
        #expect(report.after.isClean, "\(report)")
        let (journal, recovery) = try Journal.open(directory: directory)
        // The damaged record is the older segment's first; the segments after it go too.
        let olderFirst = JournalFormat.segmentSequence(setup.older) ?? 0
        #expect(recovery.records == (1..<olderFirst).map(Content.record))
        try journal.close()
        #expect(Disk.exists(try #require(report.backupDirectory) + "/" + setup.newest))
    }

    @Test func repairOfTornTailAndTemporaryFiles() throws {
        let setup = try TwoSegments()
        let directory = setup.copy("torn")
        Disk.truncate(directory + "/" + setup.newest, to: Disk.size(directory + "/" + setup.newest) - 3)
        Disk.write(directory + "/snapshot-00000000000000000005.snap.tmp", [1, 2, 3])
        let before = try JournalTools.verify(directory: directory)
        #expect(before.isOpenable && !before.isClean && before.temporaryFiles.count == 1)
        let report = try JournalTools.repair(directory: directory)
        #expect(report.after.isClean && report.after.temporaryFiles.isEmpty, "\(report)")
        #expect(report.after.lastSequence == setup.last - 1)
    }

    /// Repairs `directory` and checks it then opens with records 1...keeping and a backup.
    private func expectRepairable(
        _ directory: String,
        keeping last: UInt64,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        var dumped: [JournalRecord] = []
        #expect(throws: JournalError.corrupt, sourceLocation: sourceLocation) {
            try JournalTools.dump(directory: directory) { dumped.append($0) }
        }
        #expect(dumped == (1...last).map(Content.record), sourceLocation: sourceLocation)
        let report = try JournalTools.repair(directory: directory)
        #expect(report.after.isClean, "\(report)", sourceLocation: sourceLocation)
        let backup = try #require(report.backupDirectory, sourceLocation: sourceLocation)
        #expect(!Disk.list(backup).isEmpty, sourceLocation: sourceLocation)
        let (journal, recovery) = try Journal.open(directory: directory)
        #expect(recovery.records == (1...last).map(Content.record), sourceLocation: sourceLocation)
        #expect(try journal.append(type: 0, payload: []) == last + 1, sourceLocation: sourceLocation)
        try journal.close()
        #expect(try JournalTools.verify(directory: directory).isClean, sourceLocation: sourceLocation)
    }

    private func expectCorrupt(
        _ directory: String,
        file: String,
        offset: Int?,
        saying words: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        do {
            let (journal, _) = try Journal.open(directory: directory)
            try journal.close()
            Issue.record("open succeeded on damaged \(directory)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == .corrupt, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.hasPrefix("\(file): offset "), "\(error.message)", sourceLocation: sourceLocation)
            if let offset {
                #expect(
                    error.message.hasPrefix("\(file): offset \(offset):"),
                    "\(error)",
                    sourceLocation: sourceLocation
                )
            }
            if let words {
                #expect(error.message.contains(words), "\(error.message)", sourceLocation: sourceLocation)
            }
            #expect(!error.message.contains("\n"), sourceLocation: sourceLocation)
        }
        let report = try JournalTools.verify(directory: directory)
        #expect(report.problem?.file == file, "\(report)", sourceLocation: sourceLocation)
    }
}
