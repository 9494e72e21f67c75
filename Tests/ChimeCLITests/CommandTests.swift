import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeCLI

/// The built `chime` against a real mosquitto and a real chimed: what each command prints and how
/// it exits.
@Suite(.serialized) struct CommandTests {
    @Test func scheduleListPauseResumeSnoozeAndCancel() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let device = try await w.ok("device", "--device", "phone-1", "--tz", "Asia/Shanghai", "--quiet", "22:00-07:00")
        #expect(row(device.out, "time zone")?.hasSuffix("Asia/Shanghai") == true, "\(device)")
        #expect(row(device.out, "quiet hours")?.hasSuffix("22:00-07:00") == true, "\(device)")

        // A wall-clock time in a named zone, with typed userInfo.
        let dinner = try await w.ok(
            "schedule",
            "--device",
            "phone-1",
            "--id",
            "dinner",
            "--at",
            "2099-12-01 18:00",
            "--tz",
            "Asia/Shanghai",
            "--body",
            "Dinner",
            "--info",
            "n=3",
            "--info",
            "team=core",
            "--info",
            "tags:=[\"a\",1]"
        )
        #expect(dinner.out == ["scheduled dinner  next delivery 2099-12-01 18:00 CST (10:00Z)"], "\(dinner)")
        // Relative, repeating, limited: shown in the device's zone.
        try await w.ok(
            "schedule",
            "--device",
            "phone-1",
            "--id",
            "tea",
            "--in",
            "1h",
            "--every",
            "day",
            "--times",
            "5",
            "--info",
            "team=ops",
            "--body",
            "Tea is ready"
        )
        // Following the device's zone, 10 minutes early.
        let standup = try await w.ok(
            "schedule",
            "--device",
            "phone-1",
            "--id",
            "standup",
            "--at",
            "2099-12-01 08:00",
            "--tz",
            "device",
            "--every",
            "weekday",
            "--lead",
            "10m",
            "--body",
            "Standup"
        )
        #expect(standup.stdout.contains("next delivery 2099-12-01 07:50 CST (2099-11-30 23:50Z)"), "\(standup)")

        let list = try await w.ok("list", "--device", "phone-1")
        #expect(list.out.first?.hasPrefix("ID") == true, "\(list)")
        #expect(list.out.dropFirst().map { String($0.prefix { $0 != " " }) } == ["dinner", "standup", "tea"])
        let dinnerRow = try #require(row(list.out, "dinner"), "\(list)")
        #expect(dinnerRow.contains("2099-12-01 18:00 CST (10:00Z)"))
        #expect(dinnerRow.contains("once"))
        #expect(dinnerRow.hasSuffix("yes  Dinner"))
        #expect(row(list.out, "tea")?.contains("day x5") == true, "\(list)")
        #expect(row(list.out, "standup")?.contains("weekday") == true, "\(list)")

        // Raw rows keep userInfo typed.
        let json = try await w.ok("list", "--device", "phone-1", "--json")
        #expect(json.jsonLines.count == 3)
        #expect(json.jsonLines.first?["userInfo"] == ["n": 3, "team": "core", "tags": ["a", 1]], "\(json)")
        // Tags select by userInfo, typed as given.
        let core = try await w.ok("list", "--device", "phone-1", "--tag", "team=core", "--json")
        #expect(core.jsonLines.compactMap { $0["id"]?.stringValue } == ["dinner"])
        let typed = try await w.ok("list", "--device", "phone-1", "--tag", "n=3", "--json")
        #expect(typed.jsonLines.compactMap { $0["id"]?.stringValue } == ["dinner"])
        let none = try await w.ok("list", "--device", "phone-1", "--tag", "n:=\"3\"")
        #expect(none.out == ["no notifications on phone-1 match"])
        let limited = try await w.ok("list", "--device", "phone-1", "--limit", "2", "--json")
        #expect(limited.jsonLines.compactMap { $0["id"]?.stringValue } == ["dinner", "standup"])

        // Pause by tag, resume by ids (one unknown).
        let paused = try await w.ok("pause", "--device", "phone-1", "--tag", "team=ops")
        #expect(paused.out == ["paused 1: tea"])
        let pausedRow = try #require(row(try await w.ok("list", "--device", "phone-1").out, "tea"))
        #expect(pausedRow.contains(" -  ") && pausedRow.contains(" no  "), "\(pausedRow)")
        let resumed = try await w.ok("resume", "--device", "phone-1", "--id", "tea", "--id", "nope")
        #expect(resumed.out == ["resumed 1: tea"])

        let snoozed = try await w.ok("snooze", "--device", "phone-1", "--id", "dinner", "--in", "10m")
        #expect(snoozed.stdout.hasPrefix("snoozed dinner until "), "\(snoozed)")
        #expect(snoozed.stdout.contains(" CST ("), "\(snoozed)")

        let cancelled = try await w.ok("cancel", "--device", "phone-1", "--id", "dinner")
        #expect(cancelled.out == ["cancelled 1: dinner"])
        let rest = try await w.ok("cancel", "--device", "phone-1", "--all")
        #expect(rest.out == ["cancelled 2: standup, tea"])
        let nothing = try await w.ok("cancel", "--device", "phone-1", "--all")
        #expect(nothing.out == ["cancelled nothing: no notification matched"])
        #expect(try await w.ok("list", "--device", "phone-1").out == ["no notifications on phone-1"])
    }

    @Test func errorRepliesExitOneWithCodeAndField() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let json = w.data.appending("typo.json")
        try Data(#"{"after": 10, "alertBdy": "typo"}"#.utf8).write(to: URL(fileURLWithPath: json))
        let cases: [(arguments: [String], stderr: String)] = [
            (
                ["snooze", "--device", "d1", "--id", "nope", "--in", "10m"],
                #"error not_found id: no notification "nope""#
            ),
            (
                [
                    "schedule", "--device", "d1", "--at", "2020-01-01 10:00", "--tz", "UTC", "--every", "day",
                    "--times", "2",
                ],
                "error never_fires repeatInterval: "
            ),
            (["schedule", "--device", "d1", "--at", "2099-01-01 10:00"], "error timezone_required timeZone: "),
            (["schedule", "--device", "d1", "--json", json], "error unknown_field alertBdy: "),
            (["preview", "--device", "d1", "--id", "nope"], "error not_found id: "),
            (["--protocol", "311", "snooze", "--device", "d1", "--id", "nope", "--in", "1m"], "error not_found id: "),
        ]
        for c in cases {
            let run = try await w.chime(c.arguments)
            #expect(run.status == 1, "\(c.arguments): \(run)")
            #expect(run.stderr.hasPrefix(c.stderr), "\(c.arguments): \(run)")
            #expect(run.out.isEmpty, "\(c.arguments): \(run)")
        }
        // Nothing was scheduled by any of them.
        #expect(try await w.ok("list", "--device", "d1").out == ["no notifications on d1"])
    }

    @Test func mqtt311RepliesComeByRequestId() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let set = try await w.ok("--protocol", "311", "device", "--device", "old-1", "--badge", "4")
        #expect(row(set.out, "badge")?.hasSuffix(" 4") == true, "\(set)")
        let scheduled = try await w.ok(
            "schedule",
            "--protocol",
            "311",
            "--device",
            "old-1",
            "--id",
            "a",
            "--in",
            "1h",
            "--raw"
        )
        let result = try #require(scheduled.jsonLines.first)
        #expect(result["scheduled"]?.arrayValue?.first?.objectValue?["id"] == "a", "\(scheduled)")
    }

    @Test func batchesScheduleAtomicallyAndListFollowsTheCursorThroughPages() async throws {
        let w = try await CLIWorld.start(extra: ["--max-pending-per-device", "2000"])
        defer { Task { await w.stop() } }
        func batch(_ range: Range<Int>, replace: Bool = false) throws -> String {
            let items = range.map {
                JSON.object(["id": .string("n\($0)"), "after": 3600, "alertBody": .string("#\($0)")])
            }
            var o: JSONObject = ["notifications": .array(items)]
            if replace { o["replace"] = ["all": true] }
            let path = w.data.appending("batch-\(range.lowerBound).json")
            try Data(JSON.object(o).bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
        let first = try await w.ok("schedule", "--device", "big", "--json", try batch(1000..<2000))
        #expect(first.out.count == 1000)
        try await w.ok("schedule", "--device", "big", "--json", try batch(2000..<2050))
        let all = try await w.ok("list", "--device", "big", "--json")
        #expect(all.jsonLines.compactMap { $0["id"]?.stringValue } == (1000..<2050).map { "n\($0)" })
        let table = try await w.ok("list", "--device", "big")
        #expect(table.out.count == 1051)
        // A batch with replace: everything else goes, in the same step.
        let replaced = try await w.ok("schedule", "--device", "big", "--json", try batch(0..<2, replace: true))
        #expect(replaced.out.last == "replaced 1050", "\(replaced)")
        #expect(try await w.ok("list", "--device", "big", "--json").jsonLines.count == 2)
    }

    /// The deepest userInfo chimed accepts lists through the CLI, as a table and as JSON.
    @Test func listShowsTheDeepestUserInfo() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        var userInfo: JSON = ["leaf": 1]
        for _ in 1..<CommandLimits.maximumUserInfoDepth { userInfo = ["k": userInfo] }
        let o: JSONObject = ["id": "deep", "after": 3600, "userInfo": userInfo]
        let path = w.data.appending("deep.json")
        try Data(JSON.object(o).bytes).write(to: URL(fileURLWithPath: path))
        try await w.ok("schedule", "--device", "deep", "--json", path)
        let listed = try await w.ok("list", "--device", "deep", "--json")
        #expect(listed.jsonLines.first?["userInfo"] == userInfo)
        let table = try await w.ok("list", "--device", "deep")
        #expect(table.out.contains { $0.contains("deep") })
    }

    @Test func previewAsksChimedAndAgreesWithNextOffline() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let flags = [
            "--at", "2026-03-08 02:30", "--tz", "America/New_York", "--every", "day", "--count", "3", "--from",
            "2026-03-01T00:00Z",
        ]
        let preview = try await w.chime(["preview", "--device", "p1"] + flags)
        #expect(preview.status == 0, "\(preview)")
        let next = try await runChime(["next"] + flags)
        #expect(next.status == 0, "\(next)")
        #expect(preview.out == next.out)
        #expect(preview.out.count == 4)

        // A stored notification, shown in the device's zone.
        try await w.ok("device", "--device", "p1", "--tz", "Europe/Paris")
        try await w.ok(
            "schedule",
            "--device",
            "p1",
            "--id",
            "weekly",
            "--at",
            "2099-01-05 09:00",
            "--rrule",
            "FREQ=WEEKLY;BYDAY=MO"
        )
        let stored = try await w.ok("preview", "--device", "p1", "--id", "weekly", "--count", "2")
        #expect(
            stored.out == [
                "#  Europe/Paris              UTC",
                "1  Mon 2099-01-05 09:00 CET  2099-01-05 08:00Z",
                "2  Mon 2099-01-12 09:00 CET  2099-01-12 08:00Z",
            ],
            "\(stored)"
        )
    }
}
