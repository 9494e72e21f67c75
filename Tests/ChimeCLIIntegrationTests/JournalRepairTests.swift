import ChimeJournal
import ChimeTestSupport
import Foundation
import Testing

/// `chime journal repair` ends with the verdict `verify` gives, and says what it cannot repair.
@Suite struct JournalRepairTests {
    /// A record of a type this chimed does not know (a newer chimed's) is whole: `verify` says
    /// chimed will not start, and `repair` says the same, that it cannot fix it, and leaves it.
    @Test func repairOfAnUnknownRecordTypeEndsWithVerifysVerdictAndKeepsTheRecord() async throws {
        let scratch = try TemporaryDirectory(prefix: "chime-repair")
        let data = scratch.appending("data")
        let (journal, _) = try Journal.open(directory: data)
        try journal.append(type: 99, payload: Array(#"{"from":"a newer chimed"}"#.utf8))
        try journal.close()
        let names = try FileManager.default.contentsOfDirectory(atPath: data).sorted()
        let segment = try #require(names.first { $0.hasPrefix("journal-") })
        let before = try Data(contentsOf: URL(fileURLWithPath: data + "/" + segment))

        let verified = try await runChime(["journal", "verify", data])
        #expect(verified.status == 1, "\(verified)")
        let verdict = "\(data) cannot be replayed, chimed will not start from it: journal record 1"
        #expect(verified.stderr.contains(verdict), "\(verified)")

        let repaired = try await runChime(["journal", "repair", data])
        #expect(repaired.status == 1, "\(repaired)")
        #expect(repaired.stderr.contains(verdict), "\(repaired)")
        #expect(repaired.stderr.contains("unknown record type 99"), "\(repaired)")
        #expect(repaired.stderr.contains("repair cannot fix this"), "\(repaired)")
        #expect(repaired.err.count == 1, "\(repaired)")
        #expect(!repaired.out.contains("ok"), "\(repaired)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: data + "/" + segment)) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: data).sorted() == names)
    }

    /// `LOCK` linked to a file elsewhere: both tools refuse naming it, and the file is unchanged.
    @Test func linkedLockIsRefusedByVerifyAndRepair() async throws {
        let scratch = try TemporaryDirectory(prefix: "chime-repair")
        let data = scratch.appending("data")
        let (journal, _) = try Journal.open(directory: data)
        try journal.close()
        let outside = scratch.appending("outside")
        let precious = Data("precious\n".utf8)
        try precious.write(to: URL(fileURLWithPath: outside))
        try FileManager.default.removeItem(atPath: data + "/LOCK")
        try FileManager.default.createSymbolicLink(atPath: data + "/LOCK", withDestinationPath: outside)

        for action in ["verify", "repair"] {
            let run = try await runChime(["journal", action, data])
            #expect(run.status == 1, "\(run)")
            #expect(run.stderr.contains("refusing \(data)/LOCK: it is a symbolic link"), "\(run)")
            #expect(run.err.count == 1, "\(run)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == precious)
    }
}
