import ChimeCore
import ChimeJournal
import ChimeTestSupport
import Foundation
import Testing

/// `Fixtures/datadir-vN/`: a data directory written by chimed, with a snapshot and journal records
/// of every entry kind on both sides of it, and `Fixtures/datadir-vN.json`: the devices and
/// notifications chimed listed just before it stopped. Every later chimed must read each of these
/// directories and show exactly that. `v1` has journal format 1 and a JSON snapshot (format 1),
/// `v2` the binary snapshot (format 2), `v3` snapshot format 4 with receipts: inboxes and
/// histories in the snapshot and in records after it, and `ack` records; `v4` adds `update`
/// records; `v5` snapshot format 5, with the rules of the zones in use (a `Z` entry), and
/// `zoneRules` records on both sides of it; `v6` snapshot format 6, with push registrations and
/// pushes not yet taken (a `P` entry), and `pushed` records after it; `v7` snapshot format 7, where
/// every device keeps a history by default: the binary `Y` entry in place of `R`, `d3` that never
/// chose and `d4` that turned history off, both with deliveries on both sides of the snapshot.
/// Replies that gained members since a fixture was written are compared on the members it has.
///
/// Written by ``writeDataDirectory()`` (about 30 s):
/// `CHIME_WRITE_FIXTURES=v3 swift test --filter DurabilityFixtureTests/writeDataDirectory`.
/// Never rewrite one: when a format changes, add the next version beside them and to ``versions``.
@Suite(.serialized) struct DurabilityFixtureTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    static let versions = ["v1", "v2", "v3", "v4", "v5", "v6", "v7"]

    /// The record kinds after each fixture's snapshot: all there were when it was written.
    static func kinds(_ version: String) -> Set<JournalEntry.Kind> {
        switch version {
        case "v1", "v2": return Set(JournalEntry.Kind.allCases).subtracting([.ack, .update, .zoneRules, .pushed])
        case "v3": return Set(JournalEntry.Kind.allCases).subtracting([.update, .zoneRules, .pushed])
        case "v4": return Set(JournalEntry.Kind.allCases).subtracting([.zoneRules, .pushed])
        case "v5": return Set(JournalEntry.Kind.allCases).subtracting([.pushed])
        default: return Set(JournalEntry.Kind.allCases)
        }
    }

    /// `got` has every member of `want`, equal, and so has each object in it (later chimeds may
    /// add members, to a reply or to its rows: `history` rows gained `fireDate`, `mqtt` and
    /// `pushOutcome`).
    static func matches(_ got: JSONObject, _ want: JSON?) -> Bool {
        guard let want = want?.objectValue else { return false }
        return want.members.allSatisfy { member in got[member.key].map { alike($0, member.value) } ?? false }
    }

    private static func alike(_ got: JSON, _ want: JSON) -> Bool {
        switch (got, want) {
        case (.object(let g), .object):
            return matches(g, want)
        case (.array(let g), .array(let w)):
            return g.count == w.count && zip(g, w).allSatisfy { alike($0, $1) }
        default:
            return got == want
        }
    }

    /// The reads a fixture's expectations hold for each device, as the generator saved them.
    static let reads: [(key: String, op: ChimeCore.Operation, payload: String)] = [
        ("device", .device, "{}"), ("list", .list, #"{"limit":1000}"#), ("inbox", .inbox, #"{"limit":1000}"#),
        ("history", .history, #"{"limit":1000}"#),
    ]

    struct Expected {
        /// Device id → `{"device": <device result>, "list": <list result>}`.
        var devices: JSONObject
        /// `{"device", "id", "fireDate"}` of each pending snooze (snoozes are not listed).
        var snoozes: [JSONObject]

        init(_ json: JSON) throws {
            guard let o = json.objectValue, let devices = o["devices"]?.objectValue,
                let snoozes = o["snoozes"]?.arrayValue?.compactMap(\.objectValue)
            else { throw HarnessError("the expectations are not what the generator writes") }
            self.devices = devices
            self.snoozes = snoozes
        }

        static func load(_ version: String) throws -> Expected {
            let resources = try #require(Bundle.module.path(forResource: "Fixtures", ofType: nil))
            let data = try Data(contentsOf: URL(fileURLWithPath: resources + "/datadir-\(version).json"))
            return try Expected(try JSON(parsing: Array(data)))
        }
    }

    /// A copy of the fixture directory, so that opening it (which may fix a torn tail) changes nothing.
    static func copy(_ version: String) throws -> TemporaryDirectory {
        let resources = try #require(Bundle.module.path(forResource: "Fixtures", ofType: nil))
        let scratch = try TemporaryDirectory(prefix: "chime-\(version)")
        let copy = scratch.appending("data")
        try FileManager.default.copyItem(atPath: resources + "/datadir-\(version)", toPath: copy)
        return scratch
    }

    @Test(arguments: versions) func dataDirectoryRecoversExactly(version: String) throws {
        let expected = try Expected.load(version)
        let scratch = try Self.copy(version)
        let report = try JournalTools.verify(directory: scratch.appending("data"))
        #expect(report.isClean, "\(report)")
        let (engine, recovery) = try Durability.recover(scratch.appending("data"))
        #expect(recovery.warnings.isEmpty, "\(recovery.warnings)")
        #expect(recovery.snapshot != nil)
        // The records after the snapshot hold every kind of entry.
        let kinds = Set(recovery.records.compactMap { JournalEntry.Kind(rawValue: $0.type) })
        #expect(kinds == Self.kinds(version), "kinds after the snapshot: \(kinds)")
        if version >= "v5" {
            // d1's zone is recorded by the snapshot (its Z entry), d2's by the records after it.
            var journaled = Set<String>()
            for record in recovery.records where record.type == JournalEntry.Kind.zoneRules.rawValue {
                guard
                    case .zoneRules(_, let zones) = try JournalEntry.decode(kind: record.type, payload: record.payload)
                else { continue }
                journaled.formUnion(zones.map(\.zone))
            }
            #expect(journaled.isSuperset(of: ["America/New_York", "Asia/Tokyo"]), "\(journaled)")
            #expect(!journaled.contains("Europe/Paris"))
            // Not compared with the rules in use: those are the machine's tzdata, which may differ
            // from the one the fixture was written with.
            #expect(engine.zoneFingerprints["Europe/Paris"] != nil, "\(engine.zoneFingerprints)")
        }
        if version >= "v6" {
            // The snapshot held d1's pushes not yet taken; the records after it ended them all.
            #expect(engine.pendingPushJobs.isEmpty, "\(engine.pendingPushJobs.map(\.key))")
            let (journal, _, opened) = try Durability.open(scratch.appending("data"))
            var entryKinds = Set<UInt8>()
            try opened.snapshot?.forEachEntry { entry in entryKinds.insert(entry.first ?? 0) }
            try journal.close()
            #expect(entryKinds.contains(UInt8(ascii: "P")), "a P entry in the snapshot")
            if version >= "v7" {
                #expect(entryKinds.contains(UInt8(ascii: "Y")), "a Y entry in the snapshot")
                #expect(!entryKinds.contains(UInt8(ascii: "R")), "no R entry in the snapshot")
            }
        }
        if version >= "v7" {
            // d3 never chose: its deliveries from both sides of the snapshot are in its history;
            // d4 turned history off: none are.
            let d3 = try Durability.read(engine, "d3", .history, "{}")["deliveries"]?.arrayValue ?? []
            #expect(d3.count == 2)
            let d4 = try Durability.read(engine, "d4", .history, "{}")["deliveries"]?.arrayValue ?? []
            #expect(d4.isEmpty)
        }

        #expect(expected.devices.count == (version >= "v7" ? 4 : 2))
        for (device, value) in expected.devices {
            let want = try #require(value.objectValue)
            for read in Self.reads where want[read.key] != nil {
                let got = try Durability.read(engine, device, read.op, read.payload)
                #expect(Self.matches(got, want[read.key]), "\(device) \(read.key): \(JSON.object(got).text)")
            }
        }

        // Snoozes are not listed: each fires at its time, with its original's content.
        #expect(expected.snoozes.count == 2)
        var snoozes: [(device: String, fireId: String, due: Instant)] = []
        for snooze in expected.snoozes {
            let id = try #require(snooze["id"]?.stringValue)
            let fireDate = try #require(snooze["fireDate"]?.stringValue)
            guard case .instant(let due)? = DateTimeValue(iso8601: fireDate) else {
                Issue.record("\(fireDate) is not an instant")
                continue
            }
            snoozes.append((try #require(snooze["device"]?.stringValue), "\(id)~snooze@\(fireDate)", due))
        }
        engine.setConnected(true)
        // Each at its own time: at a later one, another device's quiet hours may hold it back.
        var fired: [Delivery] = []
        for due in snoozes.map(\.due).sorted() {
            fired += engine.tick(now: due).compactMap { output -> Delivery? in
                if case .publish(let d) = output { return d }
                return nil
            }
        }
        for snooze in snoozes {
            let delivery = fired.first { $0.fireId == snooze.fireId }
            #expect(delivery?.deviceId == snooze.device, "\(snooze.fireId) among \(fired.map(\.fireId))")
        }
    }

    /// The same directory served by the chimed binary: every device and list as it was.
    @Test(arguments: versions) func chimedServesTheDataDirectory(version: String) async throws {
        let expected = try Expected.load(version)
        let scratch = try Self.copy(version)
        let broker = try await TestBroker.start()
        let chimed = try Chimed(
            broker: broker,
            dataDirectory: scratch.appending("data"),
            workerId: "fixture-\(version)"
        )
        try await chimed.start()
        let client = try await CommandClient(broker: broker)
        defer {
            client.stop()
            chimed.process.kill()
            Task { await broker.stop() }
        }
        for (device, value) in expected.devices {
            let want = try #require(value.objectValue)
            for read in Self.reads where want[read.key] != nil {
                let got = try await client.ok(device, read.op, read.payload)
                #expect(Self.matches(got, want[read.key]), "\(device) \(read.key): \(JSON.object(got).text)")
            }
        }
    }

    // MARK: - The generator

    /// Writes `Fixtures/datadir-$CHIME_WRITE_FIXTURES` and its `.json` with the chimed binary:
    /// 1. chimed takes commands of every kind and delivers a few notifications, then stops (SIGTERM)
    ///    while a notification with `expiresAfter` is about to fall due;
    /// 2. a snapshot is written as the worker writes it (Journal + Engine, offline);
    /// 3. chimed starts again, drops the expired notification, takes commands of every kind
    ///    again, and its `device` and `list` answers are saved before it stops.
    /// Everything left pending is years ahead, so that reading the fixture later changes nothing.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["CHIME_WRITE_FIXTURES"] != nil))
    func writeDataDirectory() async throws {
        let version = try #require(ProcessInfo.processInfo.environment["CHIME_WRITE_FIXTURES"])
        // From v6: push registrations, pushes held in the snapshot, `pushed` records after it.
        let standin = version >= "v6" ? try await PushStandin.start() : nil
        defer { Task { await standin?.stop() } }
        // The inbox keeps what it holds for a century, so that the fixture reads the same later;
        // pushes are tried for four weeks.
        let f = try await WorkerFixture.start(
            extra: ["--inbox-ttl", "3153600000"] + (try standin?.chimedFlags() ?? []) + ["--push-expiry", "2419200"]
        )
        defer { Task { await f.stop() } }
        if let standin {
            let subscription = JSON.object(try standin.subscription()).text
            let token = String(repeating: "5e", count: 32)
            try await f.ok(
                "d1",
                .device,
                #"{"push":[{"apns":{"token":"\#(token)","topic":"com.example.fixture"}},{"webpush":\#(subscription)}]}"#
            )
            // What d1's deliveries push is taken by no one until chimed has stopped: the snapshot holds it.
            try standin.blackhole("apns", true)
            try standin.blackhole("webpush", true)
        }
        try await f.subscribeDeliveries("d1")
        try await f.subscribeDeliveries("d2")
        // From v7: every device keeps a history unless it said not to.
        let everyone = version >= "v7" ? ["d3", "d4"] : []
        for device in everyone { try await f.subscribeDeliveries(device) }
        let quick = #""ignoreQuietHours":true"#
        if version >= "v7" {
            try await f.ok("d4", .device, #"{"history":false}"#)
            for device in everyone {
                try await f.ok(device, .schedule, #"{"id":"before","after":1,\#(quick)}"#)
                _ = await f.waitForDeliveries(device, count: 1, timeout: .seconds(20))
            }
        }

        // 1. Every kind of entry, and deliveries.
        try await f.ok(
            "d1",
            .device,
            #"{"timeZone":"Europe/Paris","badge":5,"quietHours":{"start":"22:00","end":"07:00"},"receipts":true}"#
        )
        try await f.ok(
            "d1",
            .schedule,
            #"{"id":"rule","fireDate":"2040-01-05T09:00:00","timeZone":"device","rrule":"FREQ=MONTHLY;BYDAY=-1FR;COUNT=24","leadTime":900,"exdates":["2040-02-24T09:00:00"],"alertBodies":["a","b"],"alertTitle":"T","alertAction":"Open","hasAction":false,"soundName":"default","category":"c","userInfo":{"kind":"pill","n":[1,2.5,null,true]},"misfire":"all","expiresAfter":3600}"#
        )
        try await f.ok(
            "d1",
            .schedule,
            #"{"id":"interval","fireDate":"2041-03-01T08:00:00Z","repeatInterval":"month","count":12,"until":"2042-01-01T00:00:00Z","badge":"+1","ignoreQuietHours":true}"#
        )
        try await f.ok("d1", .schedule, #"{"id":"aligned","after":300000000,"alignTo":"12:00","badge":3}"#)
        try await f.ok(
            "d1",
            .schedule,
            #"{"id":"off","fireDate":"2045-05-05T05:05:05Z","enabled":false,"misfire":"skip"}"#
        )
        try await Self.readZonesAgain(f)
        try await f.ok("d1", .schedule, #"{"id":"cancelme","fireDate":"2050-01-01T00:00:00Z"}"#)
        try await f.ok("d1", .schedule, #"{"id":"pauseme","fireDate":"2050-01-01T00:00:00Z"}"#)
        try await f.ok("d1", .schedule, #"{"id":"resumeme","fireDate":"2050-01-01T00:00:00Z","enabled":false}"#)
        try await f.ok("d1", .schedule, #"{"id":"old","fireDate":"2050-01-01T00:00:00Z","userInfo":{"batch":"old"}}"#)
        try await f.ok(
            "d1",
            .schedule,
            #"{"notifications":[{"id":"b1","fireDate":"2043-01-01T10:00:00","repeatInterval":"week"},{"id":"b2","fireDate":"2043-01-02T10:00:00Z","userInfo":{"batch":"new"}}],"replace":{"match":{"userInfo":{"batch":"old"}}}}"#
        )
        try await f.ok("d1", .cancel, #"{"ids":["cancelme"]}"#)
        try await f.ok("d1", .update, #"{"id":"aligned","alertBody":"edited","userInfo":{"v":2}}"#)
        try await f.ok("d1", .pause, #"{"ids":["pauseme"]}"#)
        try await f.ok("d1", .resume, #"{"ids":["resumeme"]}"#)
        let snooze1 = try await f.ok("d1", .snooze, #"{"id":"rule","after":315000000}"#)
        try await f.ok("d1", .schedule, #"{"id":"kept","after":1,"keepAfterFiring":true,"badge":"+1",\#(quick)}"#)
        try await f.ok(
            "d1",
            .schedule,
            #"{"id":"thrice","after":1,"repeatInterval":"second","count":3,"keepAfterFiring":true,"misfire":"all",\#(quick)}"#
        )
        try await f.ok("d1", .schedule, #"{"id":"gone","after":1,\#(quick)}"#)
        _ = await f.waitForDeliveries("d1", count: 5, timeout: .seconds(20))
        try #require(Set(f.deliveries("d1").compactMap { $0["id"]?.stringValue }) == ["kept", "thrice", "gone"])
        try #require(
            await eventually { try await f.list("d1").first { $0["id"] == "thrice" }?["firedCount"] == 3 }
        )
        try await f.ok("d1", .schedule, #"{"id":"expiring","after":2,"expiresAfter":1,\#(quick)}"#)
        try #require(await f.stopWorker() == .exited(0))
        // Not a wait for an event: the scenario needs "expiring" (due in 2 s, for 1 s) to expire
        // while no worker runs.
        try await Task.sleep(for: .seconds(4))

        // 2. A snapshot, as the worker writes one.
        do {
            let (journal, engine, _) = try Durability.open(f.data.path)
            let writer = try journal.beginSnapshot()
            try engine.snapshot.forEachEntry { (entry: [UInt8]) throws(JournalError) in try writer.append(entry) }
            try writer.finish()
            try journal.snapshotCompleted(writer)
            try journal.close()
        }

        // 3. Every kind of entry again, after the snapshot; "expiring" is dropped.
        if let standin {
            try standin.blackhole("apns", false)
            try standin.blackhole("webpush", false)
        }
        try await f.startWorker()
        try await f.ok(
            "d2",
            .device,
            #"{"timeZone":"America/New_York","badge":2,"quietHours":{"start":"23:00","end":"06:30"},"history":true}"#
        )
        try await f.ok("d2", .schedule, #"{"id":"p","fireDate":"2044-04-04T04:04:00","timeZone":"Asia/Tokyo"}"#)
        try await f.ok(
            "d2",
            .schedule,
            #"{"notifications":[{"id":"p2","fireDate":"2044-06-01T09:00:00","rrule":"FREQ=YEARLY;BYMONTH=6;BYDAY=1MO"},{"id":"p3","after":310000000}],"replace":{"ids":["p"]}}"#
        )
        try await Self.readZonesAgain(f)
        try await f.ok("d2", .cancel, #"{"ids":["p3"]}"#)
        try await f.ok("d2", .update, #"{"id":"p2","alertTitle":"edited","rrule":"FREQ=YEARLY;BYMONTH=7;BYDAY=1MO"}"#)
        try await f.ok("d2", .pause, #"{"all":true}"#)
        try await f.ok("d2", .resume, #"{"ids":["p2"]}"#)
        let snooze2 = try await f.ok("d2", .snooze, #"{"id":"p2","after":314000000}"#)
        if standin != nil {
            try await f.ok("d2", .device, #"{"addPush":[{"fcm":{"token":"fixture-fcm-token"}}]}"#)
        }
        try await f.ok("d2", .schedule, #"{"id":"now","after":1,"badge":"-1",\#(quick)}"#)
        _ = await f.waitForDeliveries("d2", count: 1, timeout: .seconds(20))
        for device in everyone {
            try await f.ok(device, .schedule, #"{"id":"after","after":1,\#(quick)}"#)
            _ = await f.waitForDeliveries(device, count: 2, timeout: .seconds(20))
        }
        if standin != nil {
            // Every push taken and recorded: d1's five deliveries from before the stop, to two
            // registrations each, and d2's one now.
            for (device, pushes) in [("d1", 10), ("d2", 1)] {
                try #require(
                    await eventually(timeout: .seconds(60)) {
                        let rows = try await f.ok(device, .history, "{}")["deliveries"]?.arrayValue ?? []
                        return rows.reduce(0) { $0 + ($1.objectValue?["push"]?.arrayValue?.count ?? 0) } == pushes
                    }
                )
            }
        }
        try #require(await eventually { try await f.ok("d2", .device, "{}")["badge"] == 1 })
        try await f.ok("d1", .device, #"{"quietHours":null}"#)
        // An ack after the snapshot: one of d1's inbox goes, the badge moves once.
        let held = try await f.ok("d1", .inbox, "{}")["deliveries"]?.arrayValue ?? []
        let first = try #require(held.first?.objectValue?["fireId"]?.stringValue)
        try #require(try await f.ok("d1", .ack, #"{"fireIds":["\#(first)"],"badge":"-1"}"#)["acknowledged"] == 1)
        try #require(
            await eventually { try await f.list("d1").contains { $0["id"] == "expiring" } == false }
        )

        var devices = JSONObject()
        for device in ["d1", "d2"] + everyone {
            var reads = JSONObject()
            for read in Self.reads { reads[read.key] = .object(try await f.ok(device, read.op, read.payload)) }
            devices[device] = .object(reads)
        }
        let snoozes: [JSON] = [
            ["device": "d1", "id": "rule", "fireDate": snooze1["nextFireDate"] ?? .null],
            ["device": "d2", "id": "p2", "fireDate": snooze2["nextFireDate"] ?? .null],
        ]
        try #require(await f.stopWorker() == .exited(0))

        let target = Self.fixtures.appendingPathComponent("datadir-\(version)").path
        try? FileManager.default.removeItem(atPath: target)
        try FileManager.default.copyItem(atPath: f.data.path, toPath: target)
        try FileManager.default.removeItem(atPath: target + "/LOCK")
        let expected: JSON = [
            "about": .string("What chimed listed before stopping on datadir-\(version); see DurabilityFixtureTests."),
            "devices": .object(devices),
            "snoozes": .array(snoozes),
        ]
        try Data(expected.text.utf8).write(to: Self.fixtures.appendingPathComponent("datadir-\(version).json"))
    }

    /// SIGHUP, and waits until chimed handled it: the `zoneRules` record of the zones not yet
    /// recorded is appended then, and durable with the next command's reply.
    static func readZonesAgain(_ f: WorkerFixture) async throws {
        let chimed = try #require(f.worker)
        chimed.process.signal(SIGHUP)
        try #require(
            await eventually {
                chimed.process.standardErrorLines.contains {
                    $0.contains("reading the zone rules again") && $0.contains("reason=SIGHUP")
                }
            }
        )
    }
}
