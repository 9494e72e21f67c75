import ChimeCore
import ChimeJournal
import ChimeTestSupport
import Foundation
import Testing

/// Replay never fails on one device's data (PROTOCOL.md section 6): random commands, zones
/// included, accepted and journaled as chimed does (with deliveries, and a snapshot part way), then
/// recovered from the data directory (`Journal.open`, `Engine.replaying`) as if by a chimed on
/// another machine: its zone database lacks zones the journal names (``elsewhere``) and its limits
/// are smaller. Recovery must succeed, hold every notification with the zone it was given (read in
/// UTC when unresolved), and the worker must start on it.
///
/// The zone directory itself differing (a directory without the zone, a FIFO in its place, none at
/// all) is ``ZoneDirectoryRestartTests``'s, with chimed in a process of its own.
@Suite struct ReplayElsewhereTests {
    static let devices = ["d0", "d1", "d2", "d3"]
    static let zones = [
        "Europe/Paris", "Asia/Tokyo", "America/New_York", "Pacific/Chatham", "UTC", "Australia/Lord_Howe",
    ]
    /// Zone names as the machine that wrote the journal had them and as the one that replays it reads
    /// them: zones its database lacks (the same length, so that a snapshot entry keeps its layout),
    /// and a spelling an earlier chimed accepted (in records only).
    static let elsewhere: [(written: String, replayed: String, inSnapshots: Bool)] = [
        ("Asia/Tokyo", "Asia/Tokyx", true), ("Pacific/Chatham", "Pacific/Chathax", true),
        ("Europe/Paris", "Europe//Paris", false),
    ]
    /// The zones of `elsewhere` that the replaying machine lacks.
    static let unknown: Set<String> = ["Asia/Tokyx", "Pacific/Chathax"]
    /// How `elsewhere` reads each written zone on the replaying machine.
    static let replayedZone = [
        "Asia/Tokyo": "Asia/Tokyx", "Pacific/Chatham": "Pacific/Chathax", "Europe/Paris": "Europe/Paris",
    ]
    static let start = Instant(milliseconds: 1_796_119_200_000)  // 2026-12-01T10:00:00Z

    /// A random command, as JSON text.
    struct Commands {
        var random: SplitMix64
        var ids = ["a", "b", "c", "d", "e"]

        mutating func pick<T>(_ items: [T]) -> T { items[random.below(items.count)] }
        mutating func chance(_ percent: Int) -> Bool { random.below(100) < percent }

        mutating func zone() -> String { chance(15) ? "device" : pick(ReplayElsewhereTests.zones) }

        mutating func notification() -> String {
            var m = [#""id":"\#(pick(ids))""#]
            switch random.below(3) {
            case 0: m.append(#""fireDate":"2026-12-0\#(1 + random.below(9))T0\#(random.below(10)):30""#)
            case 1: m.append(#""fireDate":"2026-12-0\#(1 + random.below(9))T09:00:00Z""#)
            default: m.append(#""after":\#(pick([60, 3600, 86_400, 700_000]))"#)
            }
            if chance(70) { m.append(#""timeZone":"\#(zone())""#) }
            switch random.below(4) {
            case 0: m.append(#""repeatInterval":"\#(pick(["day", "hour", "weekOfYear", "month"]))""#)
            case 1: m.append(#""rrule":"\#(pick(["FREQ=WEEKLY;BYDAY=MO,WE", "FREQ=DAILY;COUNT=3", "FREQ=MONTHLY"]))""#)
            default: break
            }
            if chance(20) { m.append(#""leadTime":600"#) }
            if chance(20) { m.append(#""misfire":"\#(pick(["skip", "all", "coalesce"]))""#) }
            if chance(15) { m.append(#""expiresAfter":60"#) }
            m.append(#""alertBody":"\#(String(repeating: "x", count: random.below(300)))""#)
            if chance(30) { m.append(#""userInfo":{"k":\#(random.below(5))}"#) }
            return "{" + m.joined(separator: ",") + "}"
        }

        mutating func next() -> (op: ChimeCore.Operation, payload: String) {
            switch random.below(20) {
            case 0..<4:
                var m: [String] = []
                if chance(85) { m.append(#""timeZone":"\#(pick(ReplayElsewhereTests.zones))""#) }
                if chance(25) {
                    m.append(#""quietHours":\#(chance(80) ? #"{"start":"22:00","end":"07:00"}"# : "null")"#)
                }
                if chance(15) { m.append(#""badge":\#(random.below(9))"#) }
                return (.device, "{" + m.joined(separator: ",") + "}")
            case 4..<11: return (.schedule, notification())
            case 11: return (.schedule, #"{"notifications":[\#(notification()),\#(notification())]}"#)
            case 12..<14:
                var m = [#""id":"\#(pick(ids))""#]
                if chance(60) { m.append(#""timeZone":"\#(zone())""#) }
                if chance(40) { m.append(#""alertBody":"updated""#) }
                if chance(20) { m.append(#""fireDate":"2026-12-20T08:00""#) }
                return (.update, "{" + m.joined(separator: ",") + "}")
            case 14: return (.cancel, #"{"ids":["\#(pick(ids))"]}"#)
            case 15: return (pick([.pause, .resume]), #"{"ids":["\#(pick(ids))"]}"#)
            default: return (.snooze, #"{"id":"\#(pick(ids))","after":\#(pick([60, 900, 7200]))}"#)
            }
        }
    }

    /// A journal record or snapshot entry as the other machine wrote it.
    static func written(_ bytes: [UInt8], snapshot: Bool) -> [UInt8] {
        var bytes = bytes
        for (from, to, inSnapshots) in elsewhere where !snapshot || inSnapshots {
            let from = Array(from.utf8)
            var out: [UInt8] = []
            var i = 0
            while i < bytes.count {
                if bytes[i...].starts(with: from) {
                    out += to.utf8
                    i += from.count
                } else {
                    out.append(bytes[i])
                    i += 1
                }
            }
            bytes = out
        }
        return bytes
    }

    /// The zone a list row or device names, as the replaying machine reads it.
    static func replayed(_ zone: String?) -> String? { zone.map { replayedZone[$0] ?? $0 } }

    @Test(arguments: 1...12 as ClosedRange<UInt64>)
    func recoveryElsewhereHoldsEveryNotificationAndTheWorkerStarts(seed: UInt64) throws {
        let data = try TemporaryDirectory(prefix: "chime-elsewhere")
        let (journal, _) = try Journal.open(directory: data.path, options: JournalOptions(fsync: .none))
        let decoder = CommandDecoder()
        let engine = Engine(configuration: EngineConfiguration(minRepeatSeconds: 60))
        engine.setConnected(true)
        var commands = Commands(random: SplitMix64(seed: seed))
        var random = SplitMix64(seed: seed ^ 0x5eed)
        var now = Self.start
        var accepted = 0
        func record(_ entry: JournalEntry, key: CommandKey? = nil) throws {
            _ = try journal.append(
                type: entry.kind.rawValue,
                payload: Self.written(entry.encode(key: key), snapshot: false)
            )
            engine.apply(entry, key: key)
        }
        for i in 0..<120 {
            if i == 60 {
                try journal.commit()
                let writer = try journal.beginSnapshot()
                for entry in engine.snapshot.entries { try writer.append(Self.written(entry, snapshot: true)) }
                try writer.finish()
                try journal.snapshotCompleted(writer)
            }
            let device = commands.pick(Self.devices)
            let (op, payload) = commands.next()
            guard case .success(let request) = decoder.decode(deviceId: device, op: op, payload: Array(payload.utf8))
            else { continue }
            if case .write(let entry) = engine.decide(request, now: now, random: &random) {
                try record(entry)
                accepted += 1
            }
            if commands.chance(20) {
                now = now.adding(milliseconds: Int64(commands.random.below(6 * 3_600_000)))
                for output in engine.tick(now: now) {
                    switch output {
                    case .publish(let delivery):
                        if let entry = engine.acknowledged(delivery.token) { try record(entry) }
                    case .write(let entry): try record(entry)
                    }
                }
            }
        }
        // The last commands name both zones the other machine lacks, whatever came before.
        for (device, op, payload) in [
            ("d3", ChimeCore.Operation.device, #"{"timeZone":"Asia/Tokyo"}"#),
            ("d3", .schedule, #"{"id":"z","fireDate":"2030-07-01T09:00","timeZone":"Pacific/Chatham"}"#),
        ] {
            guard case .success(let request) = decoder.decode(deviceId: device, op: op, payload: Array(payload.utf8)),
                case .write(let entry) = engine.decide(request, now: now, random: &random)
            else { throw HarnessError("\(payload) was not accepted") }
            try record(entry)
        }
        try journal.close()
        #expect(accepted > 30)

        // Elsewhere: smaller limits than those the commands were accepted under.
        let (reopened, recovery) = try Journal.open(directory: data.path, options: JournalOptions(fsync: .none))
        defer { try? reopened.close() }
        #expect(recovery.snapshot != nil)
        let configuration = EngineConfiguration(
            minRepeatSeconds: 7 * 86_400,
            maxPendingPerDevice: 1,
            maxBytesPerDevice: 1
        )
        let recovered = try Engine.replaying(recovery, configuration: configuration, directory: data.path)

        // Every notification, with the zone it was given.
        #expect(recovered.pendingCount == engine.pendingCount)
        var unresolvedInUse = Set<String>()
        for device in Self.devices {
            let live = try Durability.read(engine, device, .list, #"{"limit":1000}"#)
            let here = try Durability.read(recovered, device, .list, #"{"limit":1000}"#)
            let liveRows = live["notifications"]?.arrayValue?.compactMap(\.objectValue) ?? []
            let hereRows = here["notifications"]?.arrayValue?.compactMap(\.objectValue) ?? []
            #expect(hereRows.map { $0["id"] } == liveRows.map { $0["id"] }, "\(device)")
            for (l, h) in zip(liveRows, hereRows) {
                let zone = h["timeZone"]?.stringValue
                #expect(zone == Self.replayed(l["timeZone"]?.stringValue), "\(device) \(h)")
                if let zone, Self.unknown.contains(zone) { unresolvedInUse.insert(zone) }
            }
            let liveZone = try Durability.read(engine, device, .device, "{}")["timeZone"]?.stringValue
            let hereZone = try Durability.read(recovered, device, .device, "{}")["timeZone"]?.stringValue
            #expect(hereZone == Self.replayed(liveZone), "\(device)")
            if let hereZone, Self.unknown.contains(hereZone) { unresolvedInUse.insert(hereZone) }
        }
        #expect(unresolvedInUse == Self.unknown)
        #expect(unresolvedInUse.isSubset(of: recovered.unresolvedZones))
        // Its wall-clock time read in UTC.
        let z = try Durability.read(recovered, "d3", .list, #"{"limit":1000}"#)["notifications"]?.arrayValue?
            .compactMap(\.objectValue).first { $0["id"] == "z" }
        #expect(z?["nextFireDate"] == "2030-07-01T09:00:00Z")
        #expect(recovered.unresolvedZones.isSubset(of: Self.unknown))

        // The worker starts on it and serves commands.
        let w = WorkerTestLoop(now: now, engine: recovered)
        try w.online()
        #expect(w.statuses.last == "online")
        for zone in unresolvedInUse { #expect(w.logged("zone=\(zone) device=")) }
        try w.step(w.command("d0", .device, "{}"))
        #expect(w.replies("d0").last?["ok"] == true)
    }
}
