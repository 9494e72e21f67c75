import ChimeCore
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// A tzdata upgrade under a real chimed on a real mosquitto: a zone directory the test controls
/// (`--zoneinfo`), whose zone `America/Asuncion` the test recompiles with another offset.
@Suite(.serialized) struct ZoneRulesChangeTests {
    static let zone = "America/Asuncion"
    /// 09:00 local on 2030-01-10, the wall-clock time of the notifications that move.
    static let nineLocal = "2030-01-10T09:00"

    /// The notifications of a test: `wall`, `daily` and `follows` (the device's zone) are at 09:00
    /// in the zone; `absolute` (an instant) and `later` (`after`) are not and never move.
    final class World: Sendable {
        let fixture: WorkerFixture
        let zoneinfo: TemporaryDirectory
        let device = "tz1"
        /// Stats messages before this index are an earlier process's.
        let statsFrom = Mutex(0)

        init(store: StoreKind, offset: String) async throws {
            zoneinfo = try TemporaryDirectory(prefix: "chime-zoneinfo")
            try ZoneCompiler.install(ZoneCompiler.shifting(offset: offset), into: zoneinfo.path)
            fixture = try await WorkerFixture.start(
                extra: ["--zoneinfo", zoneinfo.path, "--zoneinfo-check", "0"],
                store: store
            )
            try await fixture.client.subscribe("chime/$worker/\(fixture.workerId)/stats", qos: 0, timeout: .seconds(10))
            try await fixture.subscribeDeliveries(device)
        }

        /// Each notification's `nextFireDate`, in milliseconds since 1970.
        func nextFires() async throws -> [String: Int64] {
            var out: [String: Int64] = [:]
            for row in try await fixture.list(device) {
                guard let id = row["id"]?.stringValue, let text = row["nextFireDate"]?.stringValue else { continue }
                out[id] = try milliseconds(text)
            }
            return out
        }

        /// The latest `zoneRulesChanges` the running process published (nil before its first stats).
        func zoneRulesChanges() -> Int64? {
            let from = statsFrom.withLock { $0 }
            let all = fixture.commands.received.withLock { $0.filter { $0.topic.hasSuffix("/stats") } }
            guard all.count > from, case .object(let o)? = try? JSON(parsing: all[all.count - 1].payload),
                case .int(let n)? = o["zoneRulesChanges"]
            else { return nil }
            return n
        }

        /// Stops chimed (SIGTERM), runs `meanwhile`, starts it again.
        func restart(meanwhile: () throws -> Void = {}) async throws {
            #expect(await fixture.stopWorker() == .exited(0))
            try meanwhile()
            statsFrom.withLock {
                $0 = fixture.commands.received.withLock { $0.filter { $0.topic.hasSuffix("/stats") } }.count
            }
            try await fixture.startWorker()
        }

        func log() -> String { fixture.worker?.log ?? "" }
    }

    static func milliseconds(_ text: String) throws -> Int64 {
        guard case .instant(let instant)? = DateTimeValue(iso8601: text) else {
            throw HarnessError("\(text) is not an instant")
        }
        return instant.milliseconds
    }

    static func at(_ text: String) -> Int64 { (try? milliseconds(text)) ?? -1 }

    @Test(arguments: StoreKind.allCases)
    func aTzdataUpgradeOnSIGHUPMovesWallClockTimesOnlyAndARestartComputesTheSame(store: StoreKind) async throws {
        let w = try await World(store: store, offset: "-4:00")
        let f = w.fixture
        defer { Task { await f.stop() } }
        try await f.ok(w.device, .device, #"{"timeZone":"\#(Self.zone)"}"#)
        try await f.ok(
            w.device,
            .schedule,
            #"{"id":"wall","fireDate":"\#(Self.nineLocal)","timeZone":"\#(Self.zone)"}"#
        )
        try await f.ok(
            w.device,
            .schedule,
            #"{"id":"daily","fireDate":"\#(Self.nineLocal)","timeZone":"\#(Self.zone)","repeatInterval":"day"}"#
        )
        try await f.ok(w.device, .schedule, #"{"id":"follows","fireDate":"\#(Self.nineLocal)"}"#)
        try await f.ok(w.device, .schedule, #"{"id":"absolute","fireDate":"2030-01-10T13:00:00Z"}"#)
        try await f.ok(w.device, .schedule, #"{"id":"later","after":86400}"#)
        // A wall-clock time an hour away at -4:00 and seconds away at -3:00: delivered once the new
        // rules are in use, at the instant they give.
        let soonSeconds = Int64(Date().timeIntervalSince1970) + 8
        let soonLocal = String("\(Instant(seconds: soonSeconds - 3 * 3600))".dropLast())
        try await f.ok(w.device, .schedule, #"{"id":"soon","fireDate":"\#(soonLocal)","timeZone":"\#(Self.zone)"}"#)

        let before = try await w.nextFires()
        let nineAtMinus4 = Self.at("2030-01-10T13:00:00Z")
        #expect(before["wall"] == nineAtMinus4)
        #expect(before["daily"] == nineAtMinus4)
        #expect(before["follows"] == nineAtMinus4)
        #expect(before["absolute"] == nineAtMinus4)
        #expect(before["soon"] == (soonSeconds + 3600) * 1000)
        #expect(await eventually { w.zoneRulesChanges() == 0 })

        // Version B: an hour east. Only a SIGHUP makes chimed read it (--zoneinfo-check 0).
        try ZoneCompiler.install(ZoneCompiler.shifting(offset: "-3:00"), into: w.zoneinfo.path)
        try #require(f.worker != nil)
        f.worker?.process.signal(SIGHUP)
        let nineAtMinus3 = Self.at("2030-01-10T12:00:00Z")
        let moved = await eventually { (try? await w.nextFires())?["wall"] == nineAtMinus3 }
        #expect(moved)
        let after = try await w.nextFires()
        #expect(after["daily"] == nineAtMinus3)
        #expect(after["follows"] == nineAtMinus3)
        #expect(after["absolute"] == before["absolute"])
        #expect(after["later"] == before["later"])
        let line = w.log().split(separator: "\n").first { $0.contains("zone rules changed; next occurrences") }
        #expect(line?.contains("zone=\(Self.zone)") == true, "\(w.log())")
        #expect(line?.contains("notifications=4") == true, "\(line ?? "")")
        #expect(line?.contains("moved=4") == true, "\(line ?? "")")
        #expect(await eventually { w.zoneRulesChanges() == 1 })
        let delivered = await f.waitForDeliveries(w.device, count: 1, timeout: .seconds(20))
        #expect(delivered.first?["id"] == "soon")
        #expect((delivered.first?["fireDate"]?.stringValue).map(Self.at) == soonSeconds * 1000)

        // A restart computes the same: the new rules were journaled.
        let expected = after.filter { $0.key != "soon" }
        try await w.restart()
        #expect(try await w.nextFires() == expected)
        #expect(await eventually { w.zoneRulesChanges() != nil })
        #expect(w.zoneRulesChanges() == 0)
        #expect(!w.log().contains("while chimed was stopped"))

        // Version C, installed while chimed is stopped: it notices at start.
        try await w.restart { try ZoneCompiler.install(ZoneCompiler.shifting(offset: "-5:00"), into: w.zoneinfo.path) }
        let nineAtMinus5 = Self.at("2030-01-10T14:00:00Z")
        let atStart = try await w.nextFires()
        #expect(atStart["wall"] == nineAtMinus5)
        #expect(atStart["daily"] == nineAtMinus5)
        #expect(atStart["follows"] == nineAtMinus5)
        #expect(atStart["absolute"] == before["absolute"])
        #expect(atStart["later"] == before["later"])
        let stopped = w.log().split(separator: "\n").first {
            $0.contains("zone rules changed while chimed was stopped")
        }
        #expect(stopped?.contains("zone=\(Self.zone)") == true, "\(w.log())")
        #expect(stopped?.contains("notifications=3") == true, "\(stopped ?? "")")
        #expect(await eventually { w.zoneRulesChanges() == 1 })

        // Journaled: the next start has nothing to notice.
        try await w.restart()
        #expect(try await w.nextFires() == atStart)
        #expect(!w.log().contains("while chimed was stopped"))
    }
}
