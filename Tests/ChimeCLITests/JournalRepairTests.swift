import ChimeJournal
import ChimeTestSupport
import Foundation
import Testing

/// `chime journal verify` and `repair` on directories they must refuse or cannot repair.
@Suite struct JournalRepairTests {
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
