import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeTime
@testable import ChimeWorkerPolicy

/// An unresolved zone (``UnresolvedZoneTests``) installed while the worker runs: the next zone check
/// (SIGHUP, `--zoneinfo-check`) finds it, journals its rules and computes its notifications again
/// with them. In ``ZoneRulesTests``, serialized with it, as the zone database is the process's.
extension ZoneRulesTests {
    @Test func anUnresolvedZoneIsResolvedByTheCheckThatFindsIt() throws {
        let lost = UnresolvedZoneTests.lost
        let w = WorkerTestLoop(engine: try UnresolvedZoneTests.replayed())
        try w.online()
        #expect(w.engine.unresolvedZones == [lost])

        // Asked for, not found yet: nothing moves.
        try w.step(.zoneCheckRequested)
        #expect(w.engine.unresolvedZones == [lost])
        #expect(!Self.journaled(w).joined().contains { $0.hasPrefix(lost) })
        #expect(UnresolvedZoneTests.next(w.engine, "d2", "own") == instant("2030-07-01T10:00:00Z"))

        // Installed (-02:30): the next check resolves it.
        let directory = NSTemporaryDirectory() + "chime-zones-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer {
            ZoneDatabase.shared.use(directories: ZoneDatabase.defaultDirectories())
            try? FileManager.default.removeItem(atPath: directory)
        }
        try Self.zic("Zone \(lost) -2:30 - %z\n", into: directory)
        ZoneDatabase.shared.use(directories: [directory] + ZoneDatabase.defaultDirectories())
        let fingerprint = try #require(Zone(identifier: lost)).rulesFingerprint
        w.timeline.clear()
        try w.step(.zoneCheckRequested)
        #expect(w.timeline.entries.prefix(1) == [.append(.zoneRules)])
        #expect(Self.journaled(w).last?.contains("\(lost) \(ZoneRulesRecord.hex(fingerprint))") == true)
        #expect(w.engine.unresolvedZones.isEmpty)
        #expect(w.engine.devices["d2"]?.timeZone?.isResolved == true)
        #expect(UnresolvedZoneTests.next(w.engine, "d2", "own") == instant("2030-07-01T12:30:00Z"))
        #expect(UnresolvedZoneTests.next(w.engine, "d2", "follows") == instant("2030-07-01T11:30:00Z"))
        #expect(UnresolvedZoneTests.next(w.engine, "d2", "absolute") == instant("2030-07-01T09:00:00Z"))
        #expect(w.logged("zone found in the zone database; next occurrences computed again with its rules"))
        #expect(w.logged("zone=\(lost) notifications=2 moved=2 rules=\(ZoneRulesRecord.hex(fingerprint))"))
        #expect(w.machine.metrics(now: w.clock.now()).unresolvedZones == 0)
        #expect(w.machine.stats.zoneRulesChanges == 0)

        // Nothing more to find.
        w.timeline.clear()
        try w.step(.zoneCheckRequested)
        #expect(w.timeline.entries == [.commit])
    }
}
