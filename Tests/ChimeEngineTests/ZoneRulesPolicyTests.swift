import ChimeTestSupport
import ChimeWorker
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeTime
@testable import ChimeWorkerPolicy

/// The worker's policy for changed zone rules (``WorkerStateMachine``, run by the real loop over the
/// fakes): when it reads the zone database, what it journals, logs and counts. In ``ZoneRulesTests``,
/// serialized with it, as the zone database is the process's.
extension ZoneRulesTests {
    static let wall = #"{"id":"wall","fireDate":"2030-07-01T09:00","timeZone":"America/Asuncion"}"#
    static let absolute = #"{"id":"absolute","fireDate":"2030-07-01T13:00:00Z"}"#

    /// A worker online with `wall` (09:00 in the zone) and `absolute` (13:00 UTC) scheduled.
    static func world(zoneCheckInterval: Int64 = 0) throws -> WorkerTestLoop {
        let w = WorkerTestLoop(zoneCheckInterval: zoneCheckInterval)
        try w.online()
        try w.step(w.command("d1", .schedule, wall), w.command("d1", .schedule, absolute))
        #expect(w.replies().allSatisfy { $0["ok"] == true })
        return w
    }

    static func next(_ w: WorkerTestLoop, _ id: String) -> Instant? {
        w.engine.devices["d1"]?.notifications[id]?.nextFireDate
    }

    /// The zone rules records the store took, as (zone, fingerprint).
    static func journaled(_ w: WorkerTestLoop) -> [[String]] {
        w.store.records.compactMap {
            guard case .zoneRules(_, let zones) = $0.entry else { return nil }
            return zones.map { "\($0.zone) \(ZoneRulesRecord.hex($0.fingerprint))" }
        }
    }

    static func fingerprint() throws -> UInt64 { try #require(Zone(identifier: zone)).rulesFingerprint }

    @Test func sighupAsksForTheZonesInUseUnlessStopping() throws {
        try Self.withZone("-4:00") { _ in
            let w = try Self.world()
            var machine = w.machine
            let actions = machine.handle(.zoneCheckRequested, now: w.clock.now())
            let asked = actions.compactMap { action -> [String]? in
                if case .checkZones(let zones) = action { zones } else { nil }
            }
            #expect(asked == [[Self.zone]])
            // Stopping: no more reading.
            _ = machine.handle(.stopRequested, now: w.clock.now())
            #expect(
                !machine.handle(.zoneCheckRequested, now: w.clock.now()).contains {
                    if case .checkZones = $0 { true } else { false }
                }
            )
        }
    }

    @Test func changedRulesAreJournaledThenUsedLoggedAndCounted() throws {
        try Self.withZone("-4:00") { directory in
            let w = try Self.world()
            let old = try Self.fingerprint()
            // Unchanged, but never recorded: the first check journals the rules in use, counts nothing.
            w.timeline.clear()
            try w.step(.zoneCheckRequested)
            #expect(w.timeline.entries == [.append(.zoneRules), .commit])
            #expect(Self.journaled(w) == [["\(Self.zone) \(ZoneRulesRecord.hex(old))"]])
            #expect(w.machine.stats.zoneRulesChanges == 0)
            #expect(!w.logged("zone rules changed"))

            // The upgrade: -03.
            try Self.zic(Self.source("-3:00"), into: directory)
            w.timeline.clear()
            try w.step(.zoneCheckRequested)
            #expect(w.timeline.entries == [.append(.zoneRules), .commit])
            let new = try Self.fingerprint()
            #expect(new != old)
            #expect(Self.journaled(w).last == ["\(Self.zone) \(ZoneRulesRecord.hex(new))"])
            #expect(Self.next(w, "wall") == instant("2030-07-01T12:00:00Z"))
            #expect(Self.next(w, "absolute") == instant("2030-07-01T13:00:00Z"))
            #expect(w.logged("zone rules changed; next occurrences computed again"))
            #expect(w.logged("zone=\(Self.zone) notifications=1 moved=1 rules=\(ZoneRulesRecord.hex(new))"))
            #expect(w.machine.stats.zoneRulesChanges == 1)

            // Nothing new: nothing journaled, nothing counted.
            w.timeline.clear()
            try w.step(.zoneCheckRequested)
            #expect(w.timeline.entries == [.commit])
            #expect(w.machine.stats.zoneRulesChanges == 1)
        }
    }

    @Test func theDatabaseIsReadAgainEveryInterval() throws {
        try Self.withZone("-4:00") { directory in
            let w = try Self.world(zoneCheckInterval: 300_000)
            try Self.zic(Self.source("-3:00"), into: directory)
            w.advance(seconds: 299)
            try w.step()
            #expect(Self.next(w, "wall") == instant("2030-07-01T13:00:00Z"))
            #expect(w.machine.stats.zoneRulesChanges == 0)
            w.advance(seconds: 1)
            try w.step()
            #expect(Self.next(w, "wall") == instant("2030-07-01T12:00:00Z"))
            #expect(w.machine.stats.zoneRulesChanges == 1)
            #expect(Self.journaled(w).count == 1)
        }
    }

    @Test func rulesTheStoreCannotTakeAreUsedAllTheSameAndCommandsAreStillTaken() throws {
        try Self.withZone("-4:00") { directory in
            let w = try Self.world()
            try Self.zic(Self.source("-3:00"), into: directory)
            w.store.failAppends = true
            try w.step(.zoneCheckRequested)
            #expect(!w.machine.isFinished)
            #expect(w.logged("cannot journal new zone rules; computing with them all the same"))
            #expect(w.logged("no space left on device (injected)"))
            // What a restart would compute (it reads the same database): nothing is lost.
            #expect(Self.next(w, "wall") == instant("2030-07-01T12:00:00Z"))
            #expect(Self.next(w, "absolute") == instant("2030-07-01T13:00:00Z"))
            #expect(w.engine.pendingCount == 2)
            #expect(w.machine.stats.zoneRulesChanges == 1)
            #expect(Self.journaled(w).isEmpty)
            // The journal takes writes again: commands are taken as before (the rules entry is
            // informative; a restart with the same database computes the same without it).
            w.store.failAppends = false
            try w.step(w.command("d1", .schedule, #"{"id":"after","after":60}"#))
            #expect(w.replies().last?["ok"] == true)
            #expect(w.engine.pendingCount == 3)
        }
    }

    @Test func aStartAfterAnUpgradeMadeWhileStoppedIsLoggedJournaledAndCounted() throws {
        try Self.withZone("-4:00") { directory in
            let engine = Engine()
            try Self.schedule(engine, now: instant("2030-06-01T00:00:00Z"))
            let old = try Self.fingerprint()
            let entries = engine.snapshot.entries
            try Self.zic(Self.source("-3:00"), into: directory)
            let restarted = try Self.restartedAfterUpgrade(from: entries)
            let w = WorkerTestLoop(engine: restarted)
            try w.step()
            let new = try Self.fingerprint()
            #expect(w.logged("zone rules changed while chimed was stopped"))
            #expect(
                w.logged(
                    "zone=\(Self.zone) notifications=2 previous=\(ZoneRulesRecord.hex(old)) rules=\(ZoneRulesRecord.hex(new))"
                )
            )
            #expect(Self.journaled(w) == [["\(Self.zone) \(ZoneRulesRecord.hex(new))"]])
            #expect(w.machine.stats.zoneRulesChanges == 1)
            // Compared once: the next batch notices nothing.
            try w.step()
            #expect(Self.journaled(w).count == 1)
            #expect(w.machine.stats.zoneRulesChanges == 1)
        }
    }
}
