import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeTime
@testable import ChimeWorkerPolicy

/// A zone whose rules change while notifications wait (a tzdata upgrade): wall-clock times move,
/// absolute ones do not, fireIds follow their occurrences, and replay computes the same.
///
/// The zone is America/Asuncion, which no other test uses, compiled by zic into a directory searched
/// before the machine's; serialized, as the database is the process's.
@Suite(.serialized) struct ZoneRulesTests {
    static let zone = "America/Asuncion"

    /// Zone source for the test zone at a fixed offset.
    static func source(_ offset: String) -> String { "Zone \(zone) \(offset) - %z\n" }

    static func zic(_ source: String, into directory: String) throws {
        try ZoneCompiler.compile(source, into: directory)
    }

    /// Runs `body` with the test zone at `offset` in the shared database, then puts the default back.
    static func withZone(_ offset: String, _ body: (String) throws -> Void) throws {
        let directory = NSTemporaryDirectory() + "chime-zones-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer {
            ZoneDatabase.shared.use(directories: ZoneDatabase.defaultDirectories())
            try? FileManager.default.removeItem(atPath: directory)
        }
        try zic(source(offset), into: directory)
        ZoneDatabase.shared.use(directories: [directory] + ZoneDatabase.defaultDirectories())
        try body(directory)
    }

    static func schedule(_ engine: Engine, now: Instant) throws {
        engine.apply(try scheduleEntry(now: now))
    }

    /// The schedule of ``schedule(_:now:)`` as a journal record.
    static func scheduleEntry(now: Instant) throws -> JournalEntry {
        var wall = NotificationSpec()
        wall.timeZone = .named(try #require(Zone(identifier: zone)))
        wall.repeatInterval = .day
        var absolute = NotificationSpec()
        absolute.timeZone = .named(try #require(Zone(identifier: zone)))
        return JournalEntry.schedule(
            deviceId: "d",
            at: now,
            replaced: [],
            notifications: [
                ResolvedNotification(
                    id: "wall",
                    fireDate: .local(LocalDateTime(year: 2030, month: 7, day: 1, hour: 9)),
                    wall
                ),
                ResolvedNotification(id: "absolute", fireDate: .instant(instant("2030-07-01T13:00:00Z")), absolute),
            ]
        )
    }

    /// An engine restored from `entries` by a new process, which reads the zone files afresh (an
    /// upgrade made while the old one was stopped).
    static func restartedAfterUpgrade(from entries: [[UInt8]]) throws -> Engine {
        ZoneDatabase.shared.use(directories: ZoneDatabase.shared.directories)
        let restorer = EngineRestorer()
        for bytes in entries { try restorer.restore(snapshotEntry: bytes) }
        return restorer.finish()
    }

    static func next(_ engine: Engine, _ id: String) -> Instant? {
        engine.devices["d"]?.notifications[id]?.nextFireDate
    }

    @Test func wallClockTimesMoveAndAbsoluteOnesDoNot() throws {
        try Self.withZone("-4:00") { directory in
            let now = instant("2030-06-01T00:00:00Z")
            let engine = Engine()
            try Self.schedule(engine, now: now)
            #expect(Self.next(engine, "wall") == instant("2030-07-01T13:00:00Z"))
            #expect(Self.next(engine, "absolute") == instant("2030-07-01T13:00:00Z"))
            let before = try #require(Zone(identifier: Self.zone)).rulesFingerprint
            #expect(engine.unrecordedZoneRules.map(\.previous) == [nil])

            // The upgrade: -03 from now on.
            try Self.zic(Self.source("-3:00"), into: directory)
            let reload = ZoneDatabase.shared.reload(engine.zonesInUse.map(\.identifier))
            let change = try #require(reload.changes.first)
            #expect(reload.changes.count == 1 && change.oldFingerprint == before)
            let entry = JournalEntry.zoneRules(
                at: now,
                zones: [ZoneRulesRecord(zone: Self.zone, fingerprint: change.newFingerprint)]
            )
            // Written and read back as the journal does.
            let decoded = try JournalEntry.decode(kind: entry.kind.rawValue, payload: entry.encode())
            #expect(decoded == entry)
            let counts = engine.applyZoneRules([ZoneRulesRecord(zone: Self.zone, fingerprint: change.newFingerprint)])
            #expect(counts[Self.zone]?.notifications == 2)
            #expect(counts[Self.zone]?.moved == 1)
            #expect(Self.next(engine, "wall") == instant("2030-07-01T12:00:00Z"))
            #expect(Self.next(engine, "absolute") == instant("2030-07-01T13:00:00Z"))
            #expect(engine.unrecordedZoneRules.isEmpty)
            #expect(engine.fireId("wall", instant("2030-07-01T12:00:00Z")) == "wall@2030-07-01T12:00:00Z")

            // Replay of the journal (and of a snapshot) computes the same with the database as it is now.
            let replayedRestorer = EngineRestorer()
            replayedRestorer.apply(try Self.scheduleEntry(now: now))
            replayedRestorer.apply(entry)
            let replayed = replayedRestorer.finish()
            #expect(Self.next(replayed, "wall") == instant("2030-07-01T12:00:00Z"))
            #expect(Self.next(replayed, "absolute") == instant("2030-07-01T13:00:00Z"))
            #expect(replayed.zoneFingerprints == [Self.zone: change.newFingerprint])
            #expect(replayed.unrecordedZoneRules.isEmpty)

            let restoredRestorer = EngineRestorer()
            for bytes in engine.snapshot.entries { try restoredRestorer.restore(snapshotEntry: bytes) }
            let restored = restoredRestorer.finish()
            #expect(Self.next(restored, "wall") == instant("2030-07-01T12:00:00Z"))
            #expect(restored.zoneFingerprints == [Self.zone: change.newFingerprint])
        }
    }

    /// A snapshot taken with the old rules, read after an upgrade made while chimed was stopped: the
    /// engine computes with the new rules and says which zone changed since it recorded it.
    @Test func aRestartAfterAnUpgradeNoticesIt() throws {
        try Self.withZone("-4:00") { directory in
            let now = instant("2030-06-01T00:00:00Z")
            let engine = Engine()
            try Self.schedule(engine, now: now)
            let old = try #require(Zone(identifier: Self.zone)).rulesFingerprint
            let entries = engine.snapshot.entries
            try Self.zic(Self.source("-3:00"), into: directory)
            let restarted = try Self.restartedAfterUpgrade(from: entries)
            #expect(Self.next(restarted, "wall") == instant("2030-07-01T12:00:00Z"))
            #expect(Self.next(restarted, "absolute") == instant("2030-07-01T13:00:00Z"))
            let drift = restarted.unrecordedZoneRules
            #expect(drift.map(\.previous) == [old])
            #expect(drift.first?.record.fingerprint == (try #require(Zone(identifier: Self.zone))).rulesFingerprint)
            #expect(restarted.dependents(on: [Self.zone]) == [Self.zone: 2])
        }
    }
}
