import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeJournal

@Suite struct WriteFaultTests {
    enum Failure: String, CaseIterable, Sendable {
        case noSpace, shortWrite, ioError, partialThenError
    }

    /// A failed append leaves nothing of the record on disk and the journal keeps working.
    @Test(arguments: Failure.allCases)
    func failedAppendLeavesNoPartialRecord(failure: Failure) throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let fs = FaultyFileSystem()
        let (journal, _) = try Journal.open(directory: scratch.path, options: JournalOptions(), fileSystem: fs)
        try journal.appendStandard(through: 5)
        try journal.commit()
        let segment = scratch.appending(JournalFormat.segmentName(1))
        let sizeBefore = Disk.size(segment)

        let fault: FaultyFileSystem.Fault =
            switch failure {
            case .noSpace: .fail(.noSpace)
            case .shortWrite: .short(7)
            case .ioError: .fail(.ioError)
            case .partialThenError: .partialThenFail(20, .ioError)
            }
        fs.inject { $0.operation == .write ? fault : nil }
        do {
            try journal.append(type: 1, payload: [UInt8](repeating: 0xAB, count: 100))
            Issue.record("append succeeded")
        } catch {
            #expect(error.code == .writeFailed, "\(error)")
            #expect(error.message.contains("offset \(sizeBefore)"), "\(error.message)")
        }
        fs.inject(nil)
        #expect(Disk.size(segment) == sizeBefore)
        #expect(journal.lastSequence == 5)

        try journal.appendStandard(through: 8)
        try journal.commit()
        try journal.close()
        let (again, recovery) = try Journal.open(directory: scratch.path)
        #expect(recovery.records == (1...8).map(Content.record))
        #expect(recovery.warnings.isEmpty)
        try again.close()
    }

    @Test func failedTruncateMakesJournalUnusable() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let fs = FaultyFileSystem()
        let (journal, _) = try Journal.open(directory: scratch.path, options: JournalOptions(), fileSystem: fs)
        try journal.appendStandard(through: 3)
        try journal.commit()
        fs.inject { call in
            switch call.operation {
            case .write: .partialThenFail(10, .ioError)
            case .truncate: .fail(.ioError)
            default: nil
            }
        }
        #expect(throws: JournalError.unusable) { try journal.append(type: 1, payload: [1, 2, 3]) }
        fs.inject(nil)
        #expect(throws: JournalError.unusable) { try journal.append(type: 1, payload: [1]) }
        #expect(throws: JournalError.unusable) { try journal.commit() }
        try journal.close()
        // The partial record is at the very end, so recovery sees a torn tail.
        let (again, recovery) = try Journal.open(directory: scratch.path)
        #expect(recovery.records == (1...3).map(Content.record))
        #expect(recovery.warnings.count == 1)
        try again.close()
    }

    @Test func failedSyncIsFatal() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let fs = FaultyFileSystem()
        let (journal, _) = try Journal.open(directory: scratch.path, options: JournalOptions(), fileSystem: fs)
        try journal.append(type: 1, payload: [1])
        fs.inject { $0.operation == .dataSync ? .fail(.ioError) : nil }
        do {
            try journal.commit()
            Issue.record("commit succeeded")
        } catch {
            #expect(error.code == .syncFailed)
            #expect(error.errno == .ioError)
            #expect(error.message.contains("journal-00000000000000000001.log"))
        }
        fs.inject(nil)
        // Never retry-and-continue: the pages may be gone.
        #expect(throws: JournalError.unusable) { try journal.commit() }
        #expect(throws: JournalError.unusable) { try journal.append(type: 1, payload: [2]) }
        try journal.close()
    }

    @Test func failedSegmentCreationKeepsTheOldSegment() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let fs = FaultyFileSystem()
        let options = JournalOptions(segmentBytes: 100)
        let (journal, _) = try Journal.open(directory: scratch.path, options: options, fileSystem: fs)
        try journal.appendStandard(through: 3)
        fs.inject { $0.operation == .open && $0.path.hasSuffix(".log") ? .fail(.noSpace) : nil }
        #expect(throws: JournalError.writeFailed) { try journal.appendStandard(through: 20) }
        fs.inject(nil)
        try journal.appendStandard(through: 20)
        try journal.close()
        let (again, recovery) = try Journal.open(directory: scratch.path, options: options)
        #expect(recovery.records == (1...20).map(Content.record))
        try again.close()
    }

    @Test func failedOpenReleasesTheLock() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-journal")
        let fs = FaultyFileSystem()
        fs.inject { $0.operation == .dataSync || $0.operation == .sync ? .fail(.ioError) : nil }
        #expect(throws: JournalError.syncFailed) { try Journal.open(directory: scratch.path, fileSystem: fs) }
        fs.inject(nil)
        let (journal, _) = try Journal.open(directory: scratch.path, fileSystem: fs)
        try journal.close()
    }
}
