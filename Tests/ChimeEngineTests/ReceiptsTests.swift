import ChimeTestSupport
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

/// Receipts, the inbox and history (PROTOCOL.md section 3.9), through the worker's own loop.
@Suite struct ReceiptsTests {
    func inbox(_ h: inout Harness, _ device: String = "d1") -> JSONObject { h.ok(device, .inbox, "{}") }

    func deliveries(_ result: JSONObject) -> [JSONObject] {
        result["deliveries"]?.arrayValue?.compactMap(\.objectValue) ?? []
    }

    func fireIds(_ result: JSONObject) -> [String] { deliveries(result).compactMap { $0["fireId"]?.stringValue } }

    @Test func theInboxHoldsEachDeliveryAsPublishedUntilItIsAcknowledged() {
        var h = Harness()
        #expect(h.ok("d1", .device, #"{"receipts":true}"#)["receipts"] == true)
        for (i, after) in [10, 20, 30].enumerated() {
            h.ok("d1", .schedule, #"{"id":"n\#(i)","after":\#(after),"alertBody":"take \#(i)","userInfo":{"k":\#(i)}}"#)
        }
        let published = h.advance(seconds: 40)
        #expect(published.count == 3)
        let held = inbox(&h)
        #expect(deliveries(held) == published)
        #expect(held["dropped"] == 0)
        #expect(held["cursor"] == .null)

        let ids = fireIds(held)
        let ack = h.ok("d1", .ack, #"{"fireIds":["\#(ids[0])","\#(ids[1])","nope@2026-12-01T10:00:00Z"]}"#)
        #expect(ack["acknowledged"] == 2)
        #expect(ack["unknown"] == ["nope@2026-12-01T10:00:00Z"])
        #expect(fireIds(inbox(&h)) == [ids[2]])

        // The journal and a snapshot both rebuild it.
        let replayed = h.replayed()
        var restarted = h
        restarted.engine = replayed
        #expect(fireIds(inbox(&restarted)) == [ids[2]])
        var entries: [[UInt8]] = []
        replayed.snapshot.forEachEntry { entries.append($0) }
        let fromSnapshotRestorer = EngineRestorer(configuration: h.engine.configuration)
        for entry in entries { try? fromSnapshotRestorer.restore(snapshotEntry: entry) }
        let fromSnapshot = fromSnapshotRestorer.finish()
        var again = h
        again.engine = fromSnapshot
        #expect(deliveries(inbox(&again)) == [published[2]])
        #expect(again.ok("d1", .history, "{}") == h.ok("d1", .history, "{}"))
    }

    @Test func anAckAppliesItsBadgeOnceAndAnAckOfNothingNewIsNotJournaled() {
        var h = Harness()
        h.ok("d1", .device, #"{"receipts":true,"badge":3}"#)
        h.ok("d1", .schedule, #"{"id":"a","after":1}"#)
        let fireId = h.advance(seconds: 2)[0]["fireId"]!.stringValue!
        let ack = #"{"fireIds":["\#(fireId)"],"badge":"-1"}"#
        #expect(h.ok("d1", .ack, ack)["acknowledged"] == 1)
        #expect(h.ok("d1", .device, "{}")["badge"] == 2)
        let journaled = h.journal.count
        // The same message again (a redelivery) is recognised; a second ack of its own
        // acknowledges nothing new, so neither moves the badge nor is journaled.
        #expect(h.ok("d1", .ack, ack)["duplicate"] == true)
        let second = #"{"requestId":"again","fireIds":["\#(fireId)"],"badge":"-1"}"#
        #expect(h.ok("d1", .ack, second)["acknowledged"] == 0)
        #expect(h.ok("d1", .device, "{}")["badge"] == 2)
        #expect(h.journal.count == journaled)
    }

    @Test func expiresAfterTheTTLAndTheCapEachTakeWhatTheyShould() {
        var configuration = EngineConfiguration()
        configuration.receipts.inboxTTL = 3_600_000
        configuration.receipts.maxInboxPerDevice = 2
        var h = Harness(configuration: configuration)
        h.ok("d1", .device, #"{"receipts":true}"#)
        h.ok("d1", .schedule, #"{"id":"short","after":10,"expiresAfter":60}"#)
        h.ok("d1", .schedule, #"{"id":"long","after":20}"#)
        _ = h.advance(seconds: 30)
        #expect(fireIds(inbox(&h)).count == 2)
        // expiresAfter: 60 s after it was due.
        _ = h.advance(seconds: 41)
        #expect(fireIds(inbox(&h)).map { $0.hasPrefix("long@") } == [true])
        // The TTL: an hour after it was published.
        _ = h.advance(seconds: 3600)
        #expect(fireIds(inbox(&h)).isEmpty)
        // The cap: the oldest go first, and are counted.
        for i in 0..<3 { h.ok("d1", .schedule, #"{"id":"c\#(i)","after":\#(i + 1)}"#) }
        _ = h.advance(seconds: 5)
        let held = inbox(&h)
        #expect(fireIds(held).map { $0.prefix(3) } == ["c1@", "c2@"])
        #expect(held["dropped"] == 1)
        let states = h.ok("d1", .history, "{}")["deliveries"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(states.map { $0["id"] } == ["c2", "c1", "c0", "long", "short"])
        #expect(states.map { $0["state"] } == ["unacknowledged", "unacknowledged", "dropped", "expired", "expired"])
    }

    @Test func historyShowsWhatBecameOfEachDeliveryNewestFirst() throws {
        var h = Harness()
        h.ok("d1", .device, #"{"history":true}"#)
        h.ok("d1", .schedule, #"{"id":"a","after":1}"#)
        h.ok("d1", .schedule, #"{"id":"b","after":100}"#)
        let a = h.advance(seconds: 2)[0]
        _ = h.advance(seconds: 100)
        var rows = h.ok("d1", .history, "{}")["deliveries"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(rows.map { $0["id"] } == ["b", "a"])
        #expect(rows.map { $0["state"] } == ["delivered", "delivered"])
        #expect(rows[1]["fireId"] == a["fireId"])
        #expect(rows[1]["acknowledgedAt"] == .null)
        #expect(rows[1]["late"] == false)
        // No inbox without receipts.
        #expect(fireIds(inbox(&h)).isEmpty)
        // An app can still say it showed one.
        #expect(
            h.ok("d1", .ack, #"{"fireIds":[\#(JSON.string(a["fireId"]!.stringValue!).text)]}"#)["acknowledged"] == 1
        )
        rows =
            h.ok("d1", .history, #"{"since":"2026-12-01T10:00:01Z","limit":1}"#)["deliveries"]?.arrayValue?
            .compactMap(\.objectValue) ?? []
        #expect(rows.map { $0["id"] } == ["b"])
        rows = h.ok("d1", .history, "{}")["deliveries"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(rows[1]["state"] == "acknowledged")
        #expect(rows[1]["acknowledgedAt"] == "2026-12-01T10:01:42.000Z")
    }

    /// An engine rebuilt from `engine`'s snapshot.
    func restored(_ engine: Engine) throws -> Engine {
        let restorer = EngineRestorer(configuration: engine.configuration)
        for entry in engine.snapshot.entries { try restorer.restore(snapshotEntry: entry) }
        return restorer.finish()
    }

    /// `history` of every device named, from the live engine, the journal replayed and a snapshot
    /// of the replayed one: the same.
    func expectRebuiltAlike(_ h: inout Harness, _ devices: [String] = ["d1"]) throws {
        let live = devices.map { h.ok($0, .history, #"{"limit":1000}"#) }
        var again = h
        again.engine = h.replayed()
        #expect(devices.map { again.ok($0, .history, #"{"limit":1000}"#) } == live)
        again.engine = try restored(again.engine)
        #expect(devices.map { again.ok($0, .history, #"{"limit":1000}"#) } == live)
        // The snapshot holds histories in the binary entry of format 7, not the JSON one.
        let kinds = Set(h.engine.snapshot.entries.compactMap(\.first))
        #expect(!kinds.contains(UInt8(ascii: "R")))
    }

    @Test func everyDeviceKeepsAHistoryByDefault() throws {
        var h = Harness()
        #expect(h.ok("d1", .device, "{}")["history"] == true)
        h.ok("d1", .schedule, #"{"id":"pill","fireDate":"2026-12-01T10:15:00Z","leadTime":900,"alertBody":"now"}"#)
        let published = h.advance(seconds: 2)
        #expect(published.count == 1)
        let rows = deliveries(h.ok("d1", .history, "{}"))
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect(row["fireId"] == published[0]["fireId"])
        #expect(row["fireId"] == "pill@2026-12-01T10:15:00Z")
        #expect(row["id"] == "pill")
        #expect(row["occurrenceDate"] == "2026-12-01T10:15:00.000Z")
        #expect(row["fireDate"] == "2026-12-01T10:00:00.000Z")
        #expect(row["firedAt"] == "2026-12-01T10:00:00.000Z")
        #expect(row["mqtt"] == "acknowledged")
        #expect(row["pushOutcome"] == .null)
        #expect(row["state"] == "delivered")
        #expect(row["push"] == nil)
        // Decided when it was published and journaled with its record, without its payload.
        let record = h.journal.compactMap { entry -> OccurrenceRecord? in
            if case .delivered(let r) = entry { return r }
            return nil
        }
        #expect(record.count == 1)
        #expect(record.first?.receipt == ReceiptCapture(payload: nil, expiresAt: 0, late: false, lead: 900_000))
        // An app can say it showed it, as with receipts.
        #expect(h.ok("d1", .ack, #"{"fireIds":["pill@2026-12-01T10:15:00Z"]}"#)["acknowledged"] == 1)
        #expect(deliveries(h.ok("d1", .history, "{}")).first?["state"] == "acknowledged")
        try expectRebuiltAlike(&h)
    }

    @Test func aDeviceThatOptsOutKeepsNoneAndForgetsWhatItHad() throws {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"a","after":1,"repeatInterval":"minute"}"#)
        h.ok("d2", .schedule, #"{"id":"a","after":1,"repeatInterval":"minute"}"#)
        _ = h.advance(seconds: 2)
        #expect(deliveries(h.ok("d1", .history, "{}")).count == 1)
        #expect(h.ok("d1", .device, #"{"history":false}"#)["history"] == false)
        #expect(deliveries(h.ok("d1", .history, "{}")).isEmpty)
        let published = h.advance(seconds: 60)
        #expect(published.count == 2, "it still gets its deliveries")
        #expect(deliveries(h.ok("d1", .history, "{}")).isEmpty)
        #expect(deliveries(h.ok("d2", .history, "{}")).count == 2, "the positive control")
        let fireId = try #require(published.first { $0["deviceId"] == "d1" }?["fireId"]?.stringValue)
        #expect(h.ok("d1", .ack, #"{"fireIds":["\#(fireId)"]}"#)["unknown"] == [.string(fireId)])
        // Receipts imply history, whatever history says.
        #expect(h.ok("d1", .device, #"{"receipts":true}"#)["history"] == true)
        _ = h.advance(seconds: 60)
        #expect(deliveries(h.ok("d1", .history, "{}")).count == 1)
        try expectRebuiltAlike(&h, ["d1", "d2"])
    }

    @Test func withHistoryOffADeviceThatDidNotChooseKeepsNothing() {
        var configuration = EngineConfiguration()
        configuration.receipts.historyByDefault = false
        var h = Harness(configuration: configuration)
        h.ok("d1", .schedule, #"{"id":"a","after":1}"#)
        let fireId = h.advance(seconds: 2)[0]["fireId"]!.stringValue!
        #expect(fireIds(inbox(&h)).isEmpty)
        #expect(h.ok("d1", .history, "{}")["deliveries"] == [])
        #expect(h.ok("d1", .ack, #"{"fireIds":["\#(fireId)"]}"#)["unknown"] == [.string(fireId)])
        #expect(h.ok("d1", .device, "{}")["receipts"] == false)
        #expect(h.ok("d1", .device, "{}")["history"] == false)
        #expect(h.engine.deviceCount == 0)
        // One that asks for it has it.
        h.ok("d2", .device, #"{"history":true}"#)
        h.ok("d2", .schedule, #"{"id":"a","after":1}"#)
        _ = h.advance(seconds: 2)
        #expect(deliveries(h.ok("d2", .history, "{}")).count == 1)
    }

    /// A data directory written before history was on by default replays to what it was: its
    /// records carry no history, so none is made of them; what is delivered now is kept.
    @Test func recordsJournaledWithoutHistoryStayWithoutIt() throws {
        let restorer = EngineRestorer(configuration: EngineConfiguration())
        let at = instant("2026-12-01T10:00:00Z")
        let old = ResolvedNotification(id: "a", fireDate: .instant(at), NotificationSpec())
        restorer.apply(.schedule(deviceId: "d1", at: at, replaced: [], notifications: [old]))
        restorer.apply(
            .delivered(
                OccurrenceRecord(deviceId: "d1", id: "a", version: 1, index: 0, occurrence: at, at: at, last: true)
            )
        )
        let engine = restorer.finish()
        #expect(engine.deviceCount == 0)
        var random = SystemRandomNumberGenerator()
        let read = engine.decide(
            Request(deviceId: "d1", op: .history, command: .history(since: nil, limit: 100)),
            now: at,
            random: &random
        )
        guard case .reply(let reply) = read, case .success(.history(let rows)) = reply.outcome else {
            Issue.record("\(read)")
            return
        }
        #expect(rows.isEmpty)
    }

    @Test func theDefaultCapKeepsTheNewestWithinTheBudget() throws {
        let cap = EngineConfiguration.Receipts.defaultHistoryPerDevice
        #expect(
            cap * EngineConfiguration.Receipts.historyEntryBytes + EngineConfiguration.Receipts.historyDeviceBytes
                <= EngineConfiguration.Receipts.historyBytesPerDevice
        )
        #expect(EngineConfiguration().receipts.historyPerDevice == cap)
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"every-minute-please","after":60,"repeatInterval":"minute"}"#)
        for _ in 0..<(cap + 5) { _ = h.advance(seconds: 60) }
        let rows = deliveries(h.ok("d1", .history, #"{"limit":1000}"#))
        #expect(rows.count == cap)
        // Newest first, one a minute, the five oldest gone.
        let fired = rows.compactMap { $0["firedAt"]?.stringValue }
        #expect(fired == fired.sorted(by: >))
        #expect(rows.last?["occurrenceDate"] == .string(instant("2026-12-01T10:06:00Z").rfc3339(fractional: true)))
        try expectRebuiltAlike(&h)
        // One id string for the whole series: the notification's own.
        let log = try #require(h.engine.devices["d1"]?.receipts?.log)
        let held = try #require(h.engine.devices["d1"]?.notifications["every-minute-please"])
        for entry in log.entries {
            #expect(sameStorage(entry.id, held.id))
        }
    }

    /// Whether two strings share their bytes (one stored out of line, referenced twice).
    func sameStorage(_ a: String, _ b: String) -> Bool {
        var a = a
        var b = b
        return a.withUTF8 { x in b.withUTF8 { y in x.baseAddress == y.baseAddress } }
    }

    @Test func theInboxPagesByCursor() {
        var h = Harness()
        h.ok("d1", .device, #"{"receipts":true}"#)
        for i in 0..<5 { h.ok("d1", .schedule, #"{"id":"p\#(i)","after":\#(i + 1)}"#) }
        _ = h.advance(seconds: 10)
        var seen: [String] = []
        var cursor: String?
        repeat {
            let payload = cursor.map { #"{"limit":2,"cursor":\#(JSON.string($0).text)}"# } ?? #"{"limit":2}"#
            let page = h.ok("d1", .inbox, payload)
            seen += fireIds(page)
            cursor = page["cursor"]?.stringValue
        } while cursor != nil
        #expect(seen.map { String($0.prefix(2)) } == ["p0", "p1", "p2", "p3", "p4"])
        #expect(h.errorCode("d1", .inbox, #"{"cursor":"gone@2026-12-01T10:00:00Z"}"#) == "invalid_argument")
    }

    /// A `keepAfterFiring` one-shot resumed is delivered again with the same fireId, so the inbox
    /// holds two entries of one fireId: paging one at a time still ends, each entry once, with
    /// cursors that only go forward, before and after a restart.
    @Test func pagingEndsWhenTwoEntriesShareAFireId() {
        var h = Harness()
        h.ok("d1", .device, #"{"receipts":true}"#)
        h.ok("d1", .schedule, #"{"id":"k","after":1,"keepAfterFiring":true}"#)
        let first = h.advance(seconds: 2)
        h.ok("d1", .resume, #"{"id":"k"}"#)
        let second = h.advance(seconds: 2)
        #expect(first.count == 1 && second.count == 1)
        #expect(first[0]["fireId"] == second[0]["fireId"], "the same occurrence, delivered again")
        h.ok("d1", .schedule, #"{"id":"z","after":1}"#)
        _ = h.advance(seconds: 2)

        func pages(_ h: inout Harness) -> (fireIds: [String], cursors: [String]) {
            var seen: [String] = []
            var cursors: [String] = []
            var cursor: String?
            repeat {
                let payload = cursor.map { #"{"limit":1,"cursor":\#(JSON.string($0).text)}"# } ?? #"{"limit":1}"#
                let page = h.ok("d1", .inbox, payload)
                seen += fireIds(page)
                cursor = page["cursor"]?.stringValue
                if let cursor { cursors.append(cursor) }
            } while cursor != nil && cursors.count < 10
            return (seen, cursors)
        }
        let before = pages(&h)
        #expect(before.fireIds.count == 3)
        #expect(before.cursors.count == 2)
        #expect(before.cursors.compactMap { UInt64($0) } == before.cursors.compactMap { UInt64($0) }.sorted())
        #expect(Set(before.cursors).count == before.cursors.count)
        var restarted = h
        restarted.engine = h.replayed()
        #expect(pages(&restarted).fireIds == before.fireIds)
        #expect(pages(&restarted).cursors == before.cursors)
        // A cursor an older chimed gave (a fireId) still pages on, after its newest entry.
        let old = h.ok("d1", .inbox, #"{"cursor":\#(JSON.string(before.fireIds[0]).text)}"#)
        #expect(fireIds(old) == [before.fireIds[2]])
        #expect(h.errorCode("d1", .inbox, #"{"cursor":"99999"}"#) == "invalid_argument")
    }

    /// A device at the largest caps (`--max-inbox-per-device` and `--history-per-device` 100,000):
    /// each delivery recorded, each ack and each page costs what it touches, so 150,000
    /// deliveries (the last 50,000 each dropping the oldest), acks of 1,000 fireIds, a snapshot
    /// and the replay of it all take seconds, where a cost growing with the inbox took hours.
    @Test(.timeLimit(.minutes(1))) func aDeviceAtTheLargestCapsCostsWhatItTouches() async throws {
        var configuration = EngineConfiguration()
        configuration.receipts.maxInboxPerDevice = 100_000
        configuration.receipts.historyPerDevice = 100_000
        configuration.receipts.maxInboxBytesPerDevice = 1 << 28
        let engine = Engine(configuration: configuration)
        engine.apply(.device(deviceId: "d1", at: instant("2026-12-01T10:00:00Z"), update: DeviceUpdate(receipts: true)))
        let start = instant("2026-12-01T10:00:00Z").milliseconds
        var journal: [JournalEntry] = []
        func fireId(_ i: Int) -> String { "n\(i)@" + Instant(milliseconds: start + Int64(i)).rfc3339() }
        for i in 0..<150_000 {
            let at = Instant(milliseconds: start + Int64(i))
            let record = OccurrenceRecord(
                deviceId: "d1",
                id: "n\(i)",
                version: 1,
                index: 0,
                occurrence: at,
                at: at,
                last: true,
                badge: nil,
                receipt: ReceiptCapture(
                    payload: Array(JSON.object(["fireId": .string(fireId(i))]).bytes),
                    expiresAt: at.milliseconds + 86_400_000,
                    late: false
                )
            )
            journal.append(.delivered(record))
            engine.apply(journal.last!)
            // Lets the time limit stop a cost that grows with the inbox, rather than run for hours.
            if i % 1_000 == 0 { try Task.checkCancellation() }
            if i % 1_500 == 1_499 {
                // Acknowledges 1,000 spread over what the inbox holds.
                let ids = (0..<1_000).map { fireId(max(0, i - 99_999) + $0 * 97 % 100_000) }
                journal.append(.ack(deviceId: "d1", at: at, fireIds: ids, badge: nil))
                engine.apply(journal.last!)
            }
        }
        var h = Harness(configuration: configuration)
        h.engine = engine
        let history = h.ok("d1", .history, #"{"limit":1000}"#)["deliveries"]?.arrayValue ?? []
        #expect(history.count == 1_000)
        #expect(history.first?.objectValue?["id"] == "n149999")
        let page = h.ok("d1", .inbox, #"{"limit":1000}"#)
        #expect(fireIds(page).count == 1_000)
        #expect(page["dropped"] != 0 && page["dropped"] != nil)

        // The journal replayed, and a snapshot of it restored, hold the same.
        let replayedRestorer = EngineRestorer(configuration: configuration)
        for entry in journal { replayedRestorer.apply(entry) }
        let replayed = replayedRestorer.finish()
        let restoredRestorer = EngineRestorer(configuration: configuration)
        try replayed.snapshot.forEachEntry { try restoredRestorer.restore(snapshotEntry: $0) }
        let restored = restoredRestorer.finish()
        for other in [replayed, restored] {
            var again = Harness(configuration: configuration)
            again.engine = other
            #expect(again.ok("d1", .inbox, #"{"limit":1000}"#) == page)
            #expect(again.ok("d1", .history, #"{"limit":1000}"#)["deliveries"]?.arrayValue ?? [] == history)
        }
    }

    /// The largest ack there is: 1000 fireIds of the longest length, all unknown, is answered
    /// in full; one more fireId, or one character more, is refused.
    @Test func theLargestAckIsAnsweredAndOnePastItRefused() {
        var h = Harness()
        h.ok("d1", .device, #"{"receipts":true}"#)
        let longest = CommandDecoder.maxFireIdLength
        func ids(_ count: Int, length: Int) -> String {
            (0..<count).map { i in
                JSON.string(String(format: "%05d", i) + String(repeating: "x", count: length - 5)).text
            }
            .joined(separator: ",")
        }
        let full = h.ok("d1", .ack, #"{"fireIds":[\#(ids(CommandDecoder.maxBatch, length: longest))]}"#)
        #expect(full["acknowledged"] == 0)
        #expect(full["unknown"]?.arrayValue?.count == CommandDecoder.maxBatch)
        let tooMany = h.send("d1", .ack, #"{"fireIds":[\#(ids(CommandDecoder.maxBatch + 1, length: 10))]}"#)
        #expect(tooMany["error"]?.objectValue?["field"] == "fireIds")
        let tooLong = h.send("d1", .ack, #"{"fireIds":[\#(ids(1, length: longest + 1))]}"#)
        #expect(tooLong["error"]?.objectValue?["code"] == "invalid_argument")
        #expect(h.journal.count == 1)
    }

    @Test(arguments: [
        (#"{}"#, "fireIds"), (#"{"fireIds":[]}"#, "fireIds"), (#"{"fireIds":["a"],"badge":"x"}"#, "badge"),
        (#"{"fireIds":["a"],"extra":1}"#, "extra"),
    ])
    func aBadAckIsRefusedNamingItsField(payload: String, field: String) {
        var h = Harness()
        let reply = h.send("d1", .ack, payload)
        #expect(reply["ok"] == false)
        #expect(reply["error"]?.objectValue?["field"]?.stringValue == field)
    }
}
