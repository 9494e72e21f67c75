import ChimeTestSupport
import Testing

@testable import ChimeJournal

/// The durability promise under simulated power loss at every kind of point: whatever was
/// committed (commit returned) is recovered, the recovered state is exactly a prefix of what
/// was written, and the directory keeps working across repeated crashes.
@Suite struct PowerLossTests {
    private static let options = JournalOptions(fsync: .always, segmentBytes: 400, snapshotAfterBytes: 600)

    /// Runs a workload until the power fails; returns the greatest committed sequence.
    private static func workload(_ disk: SimulatedDisk, random: inout SplitMix64, committed: inout UInt64) {
        do {
            let (journal, recovery) = try Journal.open(directory: "/data", options: options, fileSystem: disk)
            guard try Content.state(recovery) == Content.entries(through: recovery.lastSequence) else { return }
            committed = max(committed, recovery.lastSequence)
            for _ in 0..<60 {
                try journal.appendStandard(through: journal.lastSequence + UInt64(1 + random.below(4)))
                try journal.commit()
                committed = journal.lastSequence
                if journal.snapshotDue || random.below(20) == 0 { try journal.snapshotStandard() }
            }
            try journal.close()
        } catch {
            // The power went: the process is gone, whatever it was doing.
        }
    }

    @Test(arguments: 0..<8)
    func committedRecordsSurvivePowerLoss(batch: Int) throws {
        for run in 0..<20 {
            let seed = UInt64(batch * 1000 + run)
            var random = SplitMix64(seed: seed)
            var disk = SimulatedDisk()
            var committed: UInt64 = 0
            // Several generations: crash, recover, go on, crash again.
            for generation in 0..<4 {
                disk.powerCut(after: 1 + random.below(2500))
                Self.workload(disk, random: &random, committed: &committed)
                disk = disk.afterPowerLoss(seed: random.next())
                let context = "seed \(seed), generation \(generation)"
                let (journal, recovery) = try Journal.open(directory: "/data", options: Self.options, fileSystem: disk)
                #expect(recovery.lastSequence >= committed, "\(context): lost committed records")
                #expect(
                    try Content.state(recovery) == Content.entries(through: recovery.lastSequence),
                    "\(context): state is not an exact prefix"
                )
                #expect(!disk.names("/data").contains { $0.hasSuffix(".tmp") }, "\(context)")
                #expect(Disk.snapshotCount(disk) <= 3, "\(context): \(disk.names("/data"))")
                committed = recovery.lastSequence
                try journal.close()
                #expect(try JournalTools.verify(directory: "/data", fileSystem: disk).isClean, "\(context)")
            }
        }
    }
}

extension Disk {
    static func snapshotCount(_ disk: SimulatedDisk) -> Int {
        disk.names("/data").filter { $0.hasSuffix(".snap") }.count
    }
}
