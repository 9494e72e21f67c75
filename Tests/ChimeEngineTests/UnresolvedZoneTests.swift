import ChimeTestSupport
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeTime
@testable import ChimeWorkerPolicy

/// Zone names a client may give, and zone names the journal and snapshots hold that this machine
/// cannot resolve (PROTOCOL.md section 6): a client's must be canonical and known here; a recorded
/// one is never refused, so that one device's data cannot stop a worker from starting.
///
/// `America/Atlantis` stands for a zone another machine's tzdata had and this one lacks;
/// `Europe//Paris` for a spelling an earlier chimed accepted because its file path resolved.
@Suite struct UnresolvedZoneTests {
    static let lost = "America/Atlantis"
    static let at = "1796119200000"  // 2026-12-01T10:00:00Z

    /// Journal records as an earlier chimed, on a machine with other zones, wrote them.
    static let records: [(JournalEntry.Kind, String)] = [
        (.device, #"{"device":"d1","at":\#(at),"timeZone":"Europe//Paris"}"#),
        (.device, #"{"device":"d2","at":\#(at),"timeZone":"\#(lost)"}"#),
        (
            .schedule,
            #"{"device":"d2","at":\#(at),"notifications":["#
                + #"{"id":"own","fireDate":"2030-07-01T09:00:00","timeZone":"\#(lost)"},"#
                + #"{"id":"follows","fireDate":"2030-07-01T09:00:00","timeZone":"device"},"#
                + #"{"id":"daily","fireDate":"2030-07-01T09:00:00","timeZone":"Europe//Paris","repeatInterval":"day"},"#
                + #"{"id":"absolute","fireDate":"2030-07-01T09:00:00Z"}]}"#
        ),
        (
            .update,
            #"{"device":"d2","at":\#(at),"notification":{"id":"own","fireDate":"2030-07-01T10:00:00","timeZone":"\#(lost)"}}"#
        ),
    ]

    /// The records, decoded and applied as recovery does.
    static func replayed() throws -> Engine {
        let restorer = EngineRestorer()
        for (kind, text) in records {
            let (entry, key) = try JournalEntry.decodeRecord(kind: kind.rawValue, payload: Array(text.utf8))
            restorer.apply(entry, key: key)
        }
        return restorer.finish()
    }

    static func next(_ engine: Engine, _ device: String, _ id: String) -> Instant? {
        engine.devices[device]?.notifications[id]?.nextFireDate
    }

    /// What a worker replaying `records` holds: the old spelling as the zone it named, the zone this
    /// machine lacks under its name, read in UTC.
    static func expectReplayed(_ engine: Engine) {
        #expect(engine.devices["d1"]?.timeZone?.identifier == "Europe/Paris")
        #expect(engine.devices["d1"]?.timeZone?.isResolved == true)
        #expect(engine.devices["d2"]?.timeZone?.identifier == lost)
        #expect(engine.devices["d2"]?.timeZone?.isResolved == false)
        #expect(engine.unresolvedZones == [lost])
        #expect(engine.pendingCount == 4)
        #expect(next(engine, "d2", "own") == instant("2030-07-01T10:00:00Z"))
        #expect(next(engine, "d2", "follows") == instant("2030-07-01T09:00:00Z"))
        #expect(next(engine, "d2", "daily").map { $0 >= instant("2030-07-01T07:00:00Z") } == true)
        #expect(next(engine, "d2", "absolute") == instant("2030-07-01T09:00:00Z"))
        #expect(engine.devices["d2"]?.notifications["daily"]?.spec.spec.timeZone == .named(zone("Europe/Paris")))
    }

    static func zone(_ name: String) -> Zone { Zone(identifier: name)! }

    @Test func aClientMustNameAZoneAsTheIANADatabaseSpellsIt() {
        var h = Harness()
        #expect(h.errorCode("d1", .device, #"{"timeZone":"Europe//Paris"}"#) == "invalid_argument")
        #expect(h.errorCode("d1", .device, #"{"timeZone":"Europe/Paris/"}"#) == "invalid_argument")
        #expect(h.errorCode("d1", .device, #"{"timeZone":"\#(Self.lost)"}"#) == "invalid_argument")
        let wall = #"{"id":"a","fireDate":"2030-07-01T09:00","timeZone":"Europe//Paris"}"#
        #expect(h.errorCode("d1", .schedule, wall) == "invalid_argument")
        h.ok("d1", .schedule, #"{"id":"a","fireDate":"2030-07-01T09:00","timeZone":"Europe/Paris"}"#)
        #expect(h.errorCode("d1", .update, #"{"id":"a","timeZone":"America//New_York"}"#) == "invalid_argument")
        #expect(h.journal.count == 1)
    }

    /// Replay reads what the journal says, whatever zones this machine has.
    @Test func recordsNamingZonesThisMachineCannotResolveAreReplayed() throws {
        let engine = try Self.replayed()
        Self.expectReplayed(engine)
        // Written again (a snapshot, the records a live worker writes): under the names it holds.
        let device = JournalEntry.device(
            deviceId: "d2",
            at: Instant(milliseconds: 0),
            update: DeviceUpdate(timeZone: engine.devices["d2"]!.timeZone)
        )
        #expect(String(decoding: device.encode(), as: UTF8.self).contains(#""timeZone":"America/Atlantis""#))
    }

    /// A snapshot holds the zones as the engine does, unresolved ones included, and reads back.
    @Test func aSnapshotKeepsUnresolvedZonesAndReadsBack() throws {
        let engine = try Self.replayed()
        let restoredRestorer = EngineRestorer()
        for bytes in engine.snapshot.entries { try restoredRestorer.restore(snapshotEntry: bytes) }
        let restored = restoredRestorer.finish()
        Self.expectReplayed(restored)
        // An unresolved zone has no rules to record.
        #expect(engine.snapshot.zoneRules.map(\.zone).contains(Self.lost) == false)
    }

    /// Format 1 (JSON) snapshot entries, as an earlier chimed wrote them.
    @Test func aJSONSnapshotNamingZonesThisMachineCannotResolveIsRestored() throws {
        let entries = [
            #"{"format":1,"nextVersion":3}"#, #"{"device":"d1","timeZone":"Europe//Paris","badge":0}"#,
            #"{"device":"d2","timeZone":"\#(Self.lost)","badge":0}"#,
            #"{"device":"d2","n":{"id":"own","fireDate":"2030-07-01T09:00:00","timeZone":"\#(Self.lost)"},"version":1}"#,
        ]
        let restorer = EngineRestorer()
        for entry in entries { try restorer.restore(snapshotEntry: Array(entry.utf8)) }
        let engine = restorer.finish()
        #expect(engine.devices["d1"]?.timeZone?.identifier == "Europe/Paris")
        #expect(engine.devices["d2"]?.timeZone?.isResolved == false)
        #expect(Self.next(engine, "d2", "own") == instant("2030-07-01T09:00:00Z"))
        #expect(engine.unresolvedZones == [Self.lost])
    }

    /// The worker starts on such an engine, says which zone it cannot resolve and who depends on it,
    /// counts it, and serves commands: a client moves the device to a zone it can resolve.
    @Test func theWorkerStartsLogsAndCountsUnresolvedZones() throws {
        let w = WorkerTestLoop(engine: try Self.replayed())
        try w.online()
        #expect(w.statuses.last == "online")
        #expect(w.logged("zone not in the zone database; its wall-clock times are read in UTC until it is"))
        #expect(w.logged("zone=\(Self.lost) device=d2 devices=1 notifications=2"))
        let metrics = w.machine.metrics(now: w.clock.now())
        #expect(metrics.unresolvedZones == 1)
        #expect(metrics.prometheusText.contains("\nchime_unresolved_zones 1\n"))

        try w.step(w.command("d2", .device, #"{"timeZone":"Asia/Tokyo"}"#))
        #expect(w.replies("d2").last?["ok"] == true)
        #expect(Self.next(w.engine, "d2", "follows") == instant("2030-07-01T00:00:00Z"))
        #expect(Self.next(w.engine, "d2", "own") == instant("2030-07-01T10:00:00Z"))
    }
}
