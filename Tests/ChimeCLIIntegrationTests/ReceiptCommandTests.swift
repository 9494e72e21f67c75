import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// `inbox`, `ack`, `history` and `watch --ack` with the built `chime` against a real mosquitto and a
/// real chimed: a device with receipts whose deliveries wait until it acknowledges them.
@Suite(.serialized) struct ReceiptCommandTests {
    @Test func inboxAckAndHistoryFollowWhatTheDeviceAcknowledged() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let device = try await w.ok("device", "--device", "phone-1", "--tz", "Asia/Shanghai", "--receipts", "on")
        #expect(row(device.out, "receipts")?.hasSuffix(" on") == true, "\(device)")
        #expect(row(device.out, "history")?.hasSuffix(" on") == true, "\(device)")
        try await w.ok(
            "schedule",
            "--device",
            "phone-1",
            "--id",
            "med",
            "--in",
            "1s",
            "--title",
            "Medicine",
            "--body",
            "Take the pill",
            "--badge",
            "+1"
        )
        try await w.ok("schedule", "--device", "phone-1", "--id", "tea", "--in", "2s", "--body", "Tea", "--badge", "+1")

        // Both fired: the history holds them, newest first, neither acknowledged.
        var history = ChimeRun(out: [], err: [])
        let fired = try await eventually(every: .milliseconds(200)) {
            history = try await w.ok("history", "--device", "phone-1", "--json")
            return history.jsonLines.count == 2
        }
        #expect(fired, "\(history)")
        #expect(history.jsonLines.compactMap { $0["id"]?.stringValue } == ["tea", "med"], "\(history)")
        #expect(history.jsonLines.allSatisfy { $0["state"] == "unacknowledged" && $0["acknowledgedAt"] == .null })

        // The inbox, oldest first, as a table and as the deliveries were published.
        let inbox = try await w.ok("inbox", "--device", "phone-1")
        #expect(inbox.out.first?.hasPrefix("FIRE ID ") == true, "\(inbox)")
        #expect(inbox.out.count == 3, "\(inbox)")
        #expect(inbox.out.dropFirst().first?.hasPrefix("med@") == true, "\(inbox)")
        #expect(inbox.out.dropFirst().first?.hasSuffix("Medicine: Take the pill") == true, "\(inbox)")
        #expect(inbox.out.last?.hasPrefix("tea@") == true, "\(inbox)")
        #expect(inbox.out.last?.contains(" CST (") == true, "\(inbox)")
        let deliveries = try await w.ok("inbox", "--device", "phone-1", "--json").jsonLines
        #expect(deliveries.compactMap { $0["id"]?.stringValue } == ["med", "tea"])
        #expect(deliveries.first?["alertBody"] == "Take the pill")
        #expect(deliveries.first?["deviceId"] == "phone-1")
        let fireIds = deliveries.compactMap { $0["fireId"]?.stringValue }
        #expect(fireIds == history.jsonLines.reversed().compactMap { $0["fireId"]?.stringValue })
        try #require(fireIds.count == 2)
        let first = try await w.ok("inbox", "--device", "phone-1", "--limit", "1", "--json")
        #expect(first.jsonLines.compactMap { $0["fireId"]?.stringValue } == [fireIds[0]], "\(first)")

        // Acknowledge one, taking one off the badge; again, with an unknown one: not an error, and
        // the badge changes once.
        let acked = try await w.ok("ack", "--device", "phone-1", fireIds[0], "--badge", "-1")
        #expect(acked.out == ["acknowledged 1"], "\(acked)")
        let unknown = "med@2020-01-01T00:00:00.000Z"
        let again = try await w.ok("ack", "--device", "phone-1", fireIds[0], unknown, "--badge", "-1")
        #expect(again.out == ["acknowledged 0, 1 already", "unknown 1: \(unknown)"], "\(again)")
        let badge = try await w.ok("device", "--device", "phone-1")
        #expect(row(badge.out, "badge")?.hasSuffix(" 1") == true, "\(badge)")

        let left = try await w.ok("inbox", "--device", "phone-1")
        #expect(left.out.count == 2, "\(left)")
        #expect(left.out.last?.hasPrefix(fireIds[1] + " ") == true, "\(left)")

        let states = try await w.ok("history", "--device", "phone-1", "--json")
        #expect(states.jsonLines.compactMap { $0["state"]?.stringValue } == ["unacknowledged", "acknowledged"])
        #expect(states.jsonLines.last?["acknowledgedAt"]?.stringValue != nil, "\(states)")
        let table = try await w.ok("history", "--device", "phone-1")
        #expect(table.out.first?.hasPrefix("FIRED AT ") == true, "\(table)")
        #expect(table.out.count == 3, "\(table)")
        #expect(table.out.dropFirst().first?.contains("  tea  ") == true, "\(table)")
        // MQTT: the broker took it; PUSH: not pushed; then its state.
        #expect(table.out.dropFirst().first?.firstMatch(of: #/  acknowledged +- +unacknowledged  /#) != nil, "\(table)")
        #expect(table.out.dropFirst().first?.hasSuffix("  -") == true, "\(table)")
        #expect(table.out.last?.contains("  med  ") == true, "\(table)")
        #expect(table.out.last?.firstMatch(of: #/  acknowledged +- +acknowledged  /#) != nil, "\(table)")
        #expect(table.out.last?.hasSuffix(" CST") == true, "\(table)")
        // --raw: the reply's result as chimed sent it, one object, the entries as --json prints them.
        let raw = try await w.ok("history", "--device", "phone-1", "--raw")
        #expect(raw.jsonLines.count == 1, "\(raw)")
        guard case .array(let deliveries)? = raw.jsonLines.first?["deliveries"] else {
            Issue.record("\(raw)")
            return
        }
        #expect(deliveries.compactMap(\.objectValue) == states.jsonLines, "\(raw)")

        // --since: only what fired at or after it.
        let teaFiredAt = try #require(history.jsonLines.first?["firedAt"]?.stringValue)
        let recent = try await w.ok("history", "--device", "phone-1", "--since", teaFiredAt, "--json")
        #expect(recent.jsonLines.compactMap { $0["id"]?.stringValue } == ["tea"], "\(recent)")
    }

    @Test func watchWithAckAcknowledgesEachDeliveryAsADeviceWould() async throws {
        // Receipts as the worker's default: the device never chose.
        let w = try await CLIWorld.start(extra: ["--receipts", "true"])
        defer { Task { await w.stop() } }
        let device = try await w.ok("device", "--device", "phone-2")
        #expect(row(device.out, "receipts")?.hasSuffix(" on") == true, "\(device)")

        let watch = try w.spawn("watch", "--device", "phone-2", "--ack", "--count", "1")
        defer { watch.kill() }
        let ready = await watch.waitForLine(onStandardError: true, timeout: .seconds(20)) { $0.hasPrefix("watching ") }
        #expect(ready != nil, "\(watch.standardErrorLines)")
        try await w.ok("schedule", "--device", "phone-2", "--id", "hello", "--in", "1s", "--body", "Hello")
        // It exits by itself once it has printed and acknowledged one delivery.
        #expect(await watch.waitForExit(timeout: .seconds(30)) == .exited(0), "\(watch.standardErrorLines)")
        #expect(watch.standardOutputLines.count == 1, "\(watch.standardOutputLines)")
        #expect(watch.standardOutputLines.first?.hasSuffix("  phone-2  hello  #1  Hello") == true)

        // It was delivered (history has it) and acknowledged: the inbox is empty.
        let history = try await w.ok("history", "--device", "phone-2", "--json")
        #expect(history.jsonLines.compactMap { $0["state"]?.stringValue } == ["acknowledged"], "\(history)")
        let inbox = try await w.ok("inbox", "--device", "phone-2")
        #expect(inbox.out == ["no deliveries in the inbox of phone-2"], "\(inbox)")
    }

    @Test func inboxCountsWhatWasDroppedToMakeRoom() async throws {
        let w = try await CLIWorld.start(extra: ["--receipts", "true", "--max-inbox-per-device", "1"])
        defer { Task { await w.stop() } }
        try await w.ok("schedule", "--device", "phone-3", "--id", "a", "--in", "1s", "--body", "First")
        try await w.ok("schedule", "--device", "phone-3", "--id", "b", "--in", "2s", "--body", "Second")
        var history = ChimeRun(out: [], err: [])
        let fired = try await eventually(every: .milliseconds(200)) {
            history = try await w.ok("history", "--device", "phone-3", "--json")
            return history.jsonLines.count == 2
        }
        #expect(fired, "\(history)")
        #expect(history.jsonLines.compactMap { $0["state"]?.stringValue } == ["unacknowledged", "dropped"])

        let inbox = try await w.ok("inbox", "--device", "phone-3")
        #expect(inbox.out.count == 3, "\(inbox)")
        #expect(inbox.out.dropFirst().first?.hasSuffix("Second") == true, "\(inbox)")
        #expect(inbox.out.last == "dropped 1 (the inbox was full; the oldest left first)", "\(inbox)")
        // As JSON, standard output holds only the deliveries.
        let json = try await w.ok("inbox", "--device", "phone-3", "--json")
        #expect(json.jsonLines.compactMap { $0["id"]?.stringValue } == ["b"], "\(json)")
        #expect(json.out.count == 1 && json.err.contains { $0.hasPrefix("dropped 1 ") }, "\(json)")
    }

    /// The issue this answers: "did it reach the device?" for a device that never asked for
    /// history; and a device that turned it off keeps none, which `chime history` says.
    @Test func everyDeviceKeepsAHistoryUnlessItTurnsItOff() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let off = try await w.ok("device", "--device", "phone-5", "--history", "off")
        #expect(row(off.out, "history")?.hasSuffix(" off") == true, "\(off)")
        try await w.ok("schedule", "--device", "phone-5", "--id", "quiet", "--in", "1s", "--body", "Not kept")
        try await w.ok("schedule", "--device", "phone-4", "--id", "pill", "--in", "1s", "--body", "Kept")

        var history = ChimeRun(out: [], err: [])
        let fired = try await eventually(every: .milliseconds(200)) {
            history = try await w.ok("history", "--device", "phone-4")
            return history.out.count == 2
        }
        #expect(fired, "\(history)")
        let header = history.out.first?.split(separator: " ", omittingEmptySubsequences: true) ?? []
        #expect(
            header == ["FIRED", "AT", "ID", "DUE", "MQTT", "PUSH", "STATE", "LATE", "ACKNOWLEDGED", "AT"],
            "\(history)"
        )
        let cells = history.out.last?.split(separator: " ", omittingEmptySubsequences: true).map(String.init) ?? []
        #expect(cells.contains("pill") && cells.contains("acknowledged") && cells.contains("delivered"), "\(history)")
        let json = try await w.ok("history", "--device", "phone-4", "--json").jsonLines
        #expect(json.first?["mqtt"] == "acknowledged" && json.first?["pushOutcome"] == .null, "\(json)")

        // phone-5's one-shot is gone from its list once its delivery is recorded.
        let delivered = try await eventually(every: .milliseconds(200)) {
            try await w.ok("list", "--device", "phone-5", "--json").jsonLines.isEmpty
        }
        #expect(delivered)
        let none = try await w.ok("history", "--device", "phone-5")
        #expect(none.out == ["device phone-5 keeps no delivery history (device --history off)"], "\(none)")
        #expect(try await w.ok("history", "--device", "phone-5", "--json").out.isEmpty)
    }
}
