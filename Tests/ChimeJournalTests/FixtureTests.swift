import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeJournal

/// The version 1 data directory in `Fixtures/v1`, which every later format version must read.
///
/// It was written by ``writeFixture()`` (run with `CHIME_JOURNAL_WRITE_FIXTURES=1`): records
/// 1...11, snapshots after 4 and 8, segments of about 120 bytes (those before 5 compacted away).
@Suite struct FixtureTests {
    static func record(_ sequence: UInt64) -> JournalRecord {
        JournalRecord(sequence: sequence, type: UInt8(sequence % 4), payload: Array("record \(sequence)".utf8))
    }

    static func entries(_ sequence: UInt64) -> [[UInt8]] {
        (1...sequence).map { Array("state after \($0)".utf8) }
    }

    static let options = JournalOptions(fsync: .always, segmentBytes: 120)

    @Test func version1DirectoryReadsBack() throws {
        let fixtures = try #require(Bundle.module.path(forResource: "Fixtures", ofType: nil))
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let copy = scratch.appending("v1")
        Disk.copyDirectory(fixtures + "/v1", to: copy)
        #expect(Disk.snapshots(copy).count == 2)

        let (journal, recovery) = try Journal.open(directory: copy, options: Self.options)
        #expect(recovery.warnings.isEmpty)
        #expect(recovery.snapshot?.sequence == 8)
        #expect(try recovery.snapshot?.loadEntries() == SnapshotEntries(Self.entries(8)))
        #expect(recovery.records == (9...11).map(Self.record))
        #expect(recovery.lastSequence == 11)
        #expect(try journal.append(type: 0, payload: []) == 12)
        try journal.close()

        var dumped: [JournalRecord] = []
        try JournalTools.dump(directory: fixtures + "/v1") { dumped.append($0) }
        #expect(dumped == (5...11).map(Self.record))
        let report = try JournalTools.verify(directory: fixtures + "/v1")
        #expect(report.isClean, "\(report)")
        #expect(report.snapshots.map(\.entryCount) == [4, 8])

        // The older snapshot is whole too: damage the newest and the fallback gives the same state.
        Disk.flipBit(copy + "/" + JournalFormat.snapshotName(8), at: 40)
        let (again, fallback) = try Journal.open(directory: copy, options: Self.options)
        #expect(fallback.snapshot?.sequence == 4)
        #expect(try fallback.snapshot?.loadEntries() == SnapshotEntries(Self.entries(4)))
        #expect(fallback.records.prefix(7) == ArraySlice((5...11).map(Self.record)))
        try again.close()
    }

    /// Regenerates `Fixtures/v1`. Only for a deliberate change of the fixture: a new format
    /// version adds `Fixtures/v2` and keeps this one.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CHIME_JOURNAL_WRITE_FIXTURES"] == "1"))
    func writeFixture() throws {
        let target = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/v1")
            .path
        try? FileManager.default.removeItem(atPath: target)
        let (journal, _) = try Journal.open(directory: target, options: Self.options)
        for sequence: UInt64 in 1...11 {
            let record = Self.record(sequence)
            try journal.append(type: record.type, payload: record.payload)
            try journal.commit()
            if sequence == 4 || sequence == 8 {
                let writer = try journal.beginSnapshot()
                for entry in Self.entries(sequence) { try writer.append(entry) }
                try writer.finish()
                try journal.snapshotCompleted(writer)
            }
        }
        try journal.close()
        try FileManager.default.removeItem(atPath: target + "/LOCK")
    }
}
