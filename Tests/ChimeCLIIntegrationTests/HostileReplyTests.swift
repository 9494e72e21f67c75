import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeCLI

/// What a device or a worker chose reaching the operator: control characters in human output, a
/// pager whose cursor never ends, a worker status with a partition of 2^32 - 1 parts.
@Suite(.serialized) struct HostileReplyTests {
    /// What a row of text shows: no character a terminal would act on.
    static func isInert(_ text: String) -> Bool {
        !text.unicodeScalars.contains { TerminalText.needsEscape($0, true) }
    }

    @Test func listAndInboxStopWhenAPageRepeatsTheCursor() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.stop() } }
        let row: JSONObject = [
            "id": "a", "fireDate": "2026-12-01T10:00:00Z", "alertBody": "hi", "nextFireDate": "2026-12-01T10:00:00Z",
            "enabled": true, "firedCount": 0, "lastFiredAt": .null, "createdAt": "2026-11-01T10:00:00Z",
            "updatedAt": "2026-11-01T10:00:00Z",
        ]
        let delivery: JSONObject = [
            "deviceId": "d1", "id": "a", "fireId": "a@2026-12-01T10:00:00Z", "firedAt": "2026-12-01T10:00:00Z",
            "alertBody": "hi",
        ]
        // Every page says there is more, after the same cursor (up to 100 replies: a pager that
        // follows them all then waits in vain and exits 3).
        let fake = try await FakeChimed.start(broker, limit: 100) { op, _ in
            switch op {
            case "device": return FakeChimed.ok(FakeChimed.device)
            case "list": return FakeChimed.ok(["notifications": [.object(row)], "cursor": "again"])
            case "inbox": return FakeChimed.ok(["deliveries": [.object(delivery)], "cursor": "again", "dropped": 0])
            default: return nil
            }
        }
        defer { Task { await fake.stop() } }
        for op in ["list", "inbox"] {
            for json in [false, true] {
                let arguments = [op, "--device", "d1"] + (json ? ["--json"] : [])
                let run = try await runChime(
                    arguments + ["--timeout", "20s"],
                    environment: ["CHIME_BROKER": broker.url]
                )
                #expect(run.status == 1, "\(arguments): \(run)")
                #expect(
                    run.err == [
                        "chime: \(op) page 2 has the cursor of an earlier page: "
                            + "the pages would never end: stopped"
                    ],
                    "\(arguments): \(run)"
                )
                // --json prints each page as it comes: the two read.
                #expect(run.out.count == (json ? 2 : 0), "\(arguments): \(run)")
            }
        }
        #expect(fake.answered["list"] == 4 && fake.answered["inbox"] == 4, "\(fake.answered)")
    }

    /// `history` shows what a worker sends: an id with escapes (which chimed itself never sends) is
    /// shown escaped; `--json` keeps it exact.
    @Test func historyEscapesTheIdsAWorkerSends() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.stop() } }
        let id = "\u{1b}]0;pwned\u{07}\u{9b}2J"
        let entry: JSONObject = [
            "fireId": .string(id + "@2026-12-01T10:00:00Z"), "id": .string(id),
            "occurrenceDate": "2026-12-01T10:00:00Z", "firedAt": "2026-12-01T10:00:00Z", "late": false,
            "acknowledgedAt": .null, "state": "unacknowledged",
        ]
        let fake = try await FakeChimed.start(broker) { op, _ in
            switch op {
            case "device": return FakeChimed.ok(FakeChimed.device)
            case "history": return FakeChimed.ok(["deliveries": [.object(entry)]])
            default: return nil
            }
        }
        defer { Task { await fake.stop() } }
        let environment = ["CHIME_BROKER": broker.url]
        let shown = try await runChime(["history", "--device", "d1"], environment: environment)
        #expect(shown.status == 0, "\(shown)")
        #expect(shown.out.allSatisfy(Self.isInert), "\(shown)")
        #expect(shown.out.last?.contains(#"  \u{1B}]0;pwned\u{07}\u{9B}2J  "#) == true, "\(shown)")
        #expect(shown.out.last?.firstMatch(of: #/  - +unacknowledged  /#) != nil, "\(shown)")
        let json = try await runChime(["history", "--device", "d1", "--json"], environment: environment)
        #expect(json.jsonLines.first?["id"] == .string(id), "\(json)")
        #expect(json.out.first?.unicodeScalars.contains("\u{9b}") == true, "\(json)")
    }

    /// A device's title, body and userInfo with a title change, a screen clear, an OSC 52 clipboard
    /// write, C1 and DEL and a right-to-left override: `list`, `inbox` and `watch` show them
    /// escaped; `--json` exactly as chimed sent them.
    @Test func listInboxAndWatchEscapeWhatADeviceChose() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let title = "\u{1b}]0;pwned\u{07}\u{9b}\u{7f}\u{202e}"
        let body = "\u{1b}[2J\u{1b}]52;c;cHduZWQ=\u{07}"
        let info = "\u{1b}[31m"
        try await w.ok("device", "--device", "d1", "--receipts", "on")
        let watch = try w.spawn("watch", "--device", "d1", "--tz", "UTC")
        let watchJSON = try w.spawn("watch", "--device", "d1", "--json")
        defer {
            watch.kill()
            watchJSON.kill()
        }
        for process in [watch, watchJSON] {
            let ready = await process.waitForLine(onStandardError: true, timeout: .seconds(20)) {
                $0.hasPrefix("watching ")
            }
            #expect(ready != nil, "\(process.standardErrorLines)")
        }
        for (id, after) in [("later", "1h"), ("now", "1s")] {
            try await w.ok(
                "schedule",
                "--device",
                "d1",
                "--id",
                id,
                "--in",
                after,
                "--title",
                title,
                "--body",
                body,
                "--info",
                "k=\(info)"
            )
        }
        let escapedTitle = #"\u{1B}]0;pwned\u{07}\u{9B}\u{7F}\u{202E}"#
        let escapedBody = #"\u{1B}[2J\u{1B}]52;c;cHduZWQ=\u{07}"#

        let list = try await w.ok("list", "--device", "d1")
        #expect(list.out.allSatisfy(Self.isInert), "\(list)")
        #expect(row(list.out, "later")?.hasSuffix(escapedBody) == true, "\(list)")
        let listed = try await w.ok("list", "--device", "d1", "--json").jsonLines
        #expect(listed.first?["alertTitle"] == .string(title) && listed.first?["alertBody"] == .string(body))
        #expect(listed.first?["userInfo"]?.objectValue?["k"] == .string(info), "\(listed)")

        let line = await watch.waitForLine(timeout: .seconds(20)) { $0.contains("  now  ") }
        let shown = try #require(line, "\(watch.standardOutputLines) \(watch.standardErrorLines)")
        #expect(Self.isInert(shown), "\(shown)")
        #expect(shown.hasSuffix("  \(escapedTitle): \(escapedBody)"), "\(shown)")
        let published = await watchJSON.waitForLine(timeout: .seconds(20)) { $0.contains("\"now\"") }
        let delivery = try #require(published.flatMap { try? JSON(parsing: $0) }?.objectValue)
        #expect(delivery["alertTitle"] == .string(title) && delivery["alertBody"] == .string(body))
        // Exact: U+009B and DEL, which JSON does not escape, are there as they are.
        #expect(published?.unicodeScalars.contains("\u{9b}") == true, "\(published ?? "")")

        let inbox = try await w.ok("inbox", "--device", "d1")
        #expect(inbox.out.allSatisfy(Self.isInert), "\(inbox)")
        // Cut to 40 characters, never inside an escape.
        #expect(inbox.out.last?.hasSuffix(#"  \u{1B}]0;pwned\u{07}\u{9B}\u{7F}…"#) == true, "\(inbox)")
        let waiting = try await w.ok("inbox", "--device", "d1", "--json")
        #expect(waiting.jsonLines.first?["alertTitle"] == .string(title), "\(waiting)")
        #expect(waiting.jsonLines.first?["userInfo"]?.objectValue?["k"] == .string(info), "\(waiting)")
        #expect(waiting.out.first?.unicodeScalars.contains("\u{7f}") == true, "\(waiting)")
    }

    /// A retained status of k/N with N = 2^32 - 1: the probe device comes from a bounded piece of
    /// work, and the check ends within --timeout whether the worker answers or not.
    @Test func theProbeOfAPartitionOf4294967295PartsEndsWithinItsTimeout() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let status: JSONObject = ["state": "online", "workerId": "huge", "partition": "4294967294/4294967295"]
        try await publishRetained(w.broker, "chime/$worker/huge/status", status)
        // chimed (0/1) answers for every device, the probe's too.
        let ready = try await runChime(
            ["status", "--worker", "huge", "--timeout", "10s"],
            environment: w.environment,
            timeout: .seconds(30)
        )
        #expect(ready.status == 0, "\(ready)")
        let device = try #require(ready.stdout.split(separator: " ").dropLast(3).last.map(String.init), "\(ready)")
        #expect(Partition(index: 4_294_967_294, count: 4_294_967_295).owns(device), "\(ready)")
        #expect(DeviceID.isValid(device), "\(ready)")

        // Under a prefix no chimed serves, nobody answers: not ready, within --timeout.
        try await publishRetained(w.broker, "silent/$worker/huge/status", status)
        let silent = try await runChime(
            ["status", "--worker", "huge", "--timeout", "2s", "--topic-prefix", "silent"],
            environment: w.environment,
            timeout: .seconds(15)
        )
        #expect(silent.status == 1, "\(silent)")
        #expect(
            silent.stderr.hasPrefix("chime: not ready: worker huge is online but did not answer a list for device ")
                && silent.stderr.hasSuffix(" within 2s"),
            "\(silent)"
        )
    }
}
