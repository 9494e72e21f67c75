import ChimeCore
import ChimeSupport
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

    @Test func updateChangesWhatItIsGivenAndKeepsASwitchedOffReminderOff() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        try await w.ok("device", "--device", "p", "--tz", "Europe/Paris")
        try await w.ok(
            "schedule",
            "--device",
            "p",
            "--id",
            "med",
            "--on",
            "mon-fri",
            "--at",
            "18:00",
            "--body",
            "Take it",
            "--info",
            "kind=med"
        )
        try await w.ok("pause", "--device", "p", "--id", "med")
        let edited = try await w.ok("update", "--device", "p", "--id", "med", "--body", "Take two")
        #expect(edited.out == ["updated med, paused"], "\(edited)")
        let row = try #require(try await w.ok("list", "--device", "p", "--json").jsonLines.first)
        #expect(row["alertBody"] == "Take two")
        #expect(row["enabled"] == false)
        #expect(row["rrule"] == "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR")
        #expect(row["userInfo"] == ["kind": "med"])

        let on = try await w.ok("update", "--device", "p", "--id", "med", "--clear", "userInfo", "--enable")
        #expect(on.stdout.hasPrefix("updated med, next delivery "), "\(on)")
        let after = try #require(try await w.ok("list", "--device", "p", "--json").jsonLines.first)
        #expect(after["userInfo"] == nil)
        #expect(after["enabled"] == true)

        let missing = try await w.chime("update", "--device", "p", "--id", "nope", "--body", "x")
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("not_found"), "\(missing)")
        let nothing = try await w.chime("update", "--device", "p", "--id", "med")
        #expect(nothing.status == 2)
        let typo = try await w.chime("update", "--device", "p", "--id", "med", "--clear", "userinfo")
        #expect(typo.status == 2)
        #expect(typo.stderr.contains("did you mean userInfo?"), "\(typo)")
    }

    @Test func errorRepliesExitOneWithCodeAndField() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let json = w.data.appending("typo.json")
        try Data(#"{"after": 10, "alertBdy": "typo"}"#.utf8).write(to: URL(fileURLWithPath: json))
        let rule = w.data.appending("rule.json")
        try Data(#"{"after": 10, "rrule": "FREQ=WEEKLY;BYDAY=MO,XX"}"#.utf8).write(to: URL(fileURLWithPath: rule))
        let cases: [(arguments: [String], stderr: String)] = [
            (
                ["snooze", "--device", "d1", "--id", "nope", "--in", "10m"],
                #"error not_found id: no notification "nope""#
            ),
            (
                [
                    "schedule", "--device", "d1", "--at", "2020-01-01 10:00", "--tz", "UTC", "--every", "day",
                    "--until", "2021-01-01T00:00Z",
                ],
                "error never_fires repeatInterval: "
            ),
            // chimed's own words for a bad rule: no Swift names.
            (
                ["schedule", "--device", "d1", "--json", rule],
                #"error invalid_argument rrule: BYDAY: expected a weekday (MO, TU, WE, TH, FR, SA, SU), with an ordinal or not (1MO, -1FR), got "XX""#
            ),
            // --at HH:MM needs the device's zone, and d1 has none.
            (
                ["schedule", "--device", "d1", "--at", "18:00"],
                "chime: --at 18:00 without a date is the next 18:00 in the device's zone, and the device has none: "
                    + "give --tz ZONE, or set the device's with chime device --device d1 --tz ZONE"
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

    /// `--on DAYS --at HH:MM` and `--every weekdays` are a weekly rule from the next listed day;
    /// `--every weekday` stays Apple's every day, with a warning.
    @Test func mondayToFridayFromTheNextSuchTime() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        try await w.ok("device", "--device", "p1", "--tz", "Europe/Paris")
        let before = wallClock()
        let medicine = try await w.ok("schedule", "--device", "p1", "--id", "med", "--on", "mon-fri", "--at", "18:00")
        try await w.ok("schedule", "--device", "p1", "--id", "std", "--every", "weekdays", "--at", "08:00:30")
        let legacy = try await w.ok("schedule", "--device", "p1", "--id", "old", "--every", "weekday", "--at", "08:00")
        #expect(medicine.err.isEmpty, "\(medicine)")
        #expect(legacy.err == ["chime schedule: " + NotificationFlags.weekdayWarning], "\(legacy)")

        let rows = try await w.ok("list", "--device", "p1", "--json").jsonLines
        let byId = Dictionary(uniqueKeysWithValues: rows.compactMap { row in row["id"]?.stringValue.map { ($0, row) } })
        let mondayToFriday: JSON = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"
        #expect(byId["med"]?["rrule"] == mondayToFriday, "\(rows)")
        #expect(byId["std"]?["rrule"] == mondayToFriday, "\(rows)")
        #expect(byId["old"]?["repeatInterval"] == "weekday", "\(rows)")
        // A wall-clock fire date in the device's zone: the first Monday-to-Friday 18:00 after now,
        // which is also the next delivery.
        let paris = try #require(Zone(identifier: "Europe/Paris"))
        var expected = paris.localDateTime(at: before)
        expected = LocalDateTime(year: expected.year, month: expected.month, day: expected.day, hour: 18)
        while expected.weekday > 5 || paris.instant(for: expected) <= before {
            let (year, month, day) = civilFromDays(
                daysFromCivil(year: expected.year, month: expected.month, day: expected.day) + 1
            )
            expected = LocalDateTime(year: year, month: month, day: day, hour: 18)
        }
        #expect(byId["med"]?["fireDate"] == .string(expected.description), "\(rows)")
        #expect(byId["med"]?["timeZone"] == nil, "\(rows)")
        #expect(byId["med"]?["nextFireDate"] == .string(paris.instant(for: expected).rfc3339()), "\(rows)")
        #expect(byId["std"]?["fireDate"]?.stringValue?.hasSuffix("T08:00:30") == true, "\(rows)")

        // preview takes the same flags, from --from.
        let preview = try await w.ok(
            "preview",
            "--device",
            "p1",
            "--on",
            "sat-sun",
            "--at",
            "10:00",
            "--count",
            "3",
            "--from",
            "2026-12-05T09:30Z"
        )
        #expect(
            preview.out == [
                "#  Europe/Paris              UTC",
                "1  Sun 2026-12-06 10:00 CET  2026-12-06 09:00Z",
                "2  Sat 2026-12-12 10:00 CET  2026-12-12 09:00Z",
                "3  Sun 2026-12-13 10:00 CET  2026-12-13 09:00Z",
            ],
            "\(preview)"
        )
    }

    /// `--times N` is N deliveries from now, whatever occurrences of the series are already past.
    @Test func timesCountsDeliveriesFromNow() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let past = Zone.utc.localDateTime(at: wallClock().adding(seconds: -3 * 86_400))
        let start = "\(past.description.prefix(10)) 09:00"
        try await w.ok(
            "schedule",
            "--device",
            "t1",
            "--id",
            "daily",
            "--at",
            start,
            "--tz",
            "UTC",
            "--every",
            "day",
            "--times",
            "3"
        )
        try await w.ok(
            "schedule",
            "--device",
            "t1",
            "--id",
            "rule",
            "--at",
            start,
            "--tz",
            "UTC",
            "--rrule",
            "FREQ=DAILY",
            "--times",
            "2"
        )
        try await w.ok(
            "schedule",
            "--device",
            "t1",
            "--id",
            "days",
            "--at",
            start,
            "--tz",
            "UTC",
            "--on",
            "mon-sun",
            "--times",
            "4"
        )
        for (id, times) in [("daily", 3), ("rule", 2), ("days", 4)] {
            let preview = try await w.ok("preview", "--device", "t1", "--id", id, "--count", "20")
            #expect(preview.out.count == 1 + times, "\(id): \(preview)")
        }
        // What was sent counts the occurrences before now too, as PROTOCOL.md's count does.
        let listed = try await w.ok("list", "--device", "t1", "--json").jsonLines
        let count = try #require(listed.first { $0["id"] == "daily" }?["count"]?.numberValue)
        // Three days ago, two, one, and today unless it is not yet 09:00 UTC.
        #expect(count == 6 || count == 7, "\(listed)")
    }

    /// README's chime examples, as written: the stand-up is Monday to Friday, the DST example shows
    /// the spring-forward night.
    @Test func readmeExamplesRunAsWritten() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let readme = try String(contentsOf: repositoryFile("README.md"), encoding: .utf8)
        let commands = readme.split(separator: "\n").map(String.init).filter { $0.hasPrefix("chime ") }.map(shellWords)
        let device = try #require(commands.first { $0.starts(with: ["chime", "device"]) && $0.contains("--tz") })
        let standup = try #require(commands.first { $0.contains("standup") })
        let next = try #require(commands.first { $0.starts(with: ["chime", "next"]) })
        for command in [device, standup] {
            let run = try await w.chime(Array(command.dropFirst()))
            #expect(run.status == 0 && run.err.isEmpty, "\(command): \(run)")
        }
        let listed = try await w.ok("list", "--device", "phone-1", "--json").jsonLines
        #expect(listed.first { $0["id"] == "standup" }?["rrule"] == "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "\(listed)")
        let dst = try await runChime(Array(next.dropFirst()))
        #expect(
            dst.out == [
                "#  Europe/Paris               UTC",
                "1  Sat 2026-03-28 02:30 CET   2026-03-28 01:30Z",
                "2  Sun 2026-03-29 03:30 CEST  2026-03-29 01:30Z",
                "3  Mon 2026-03-30 02:30 CEST  2026-03-30 00:30Z",
            ],
            "\(next): \(dst)"
        )
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

        // A schedule batch file: each notification previewed under its id, as next shows it.
        let batch = w.data.appending("batch.json")
        let notifications: JSON = [
            "notifications": [
                ["id": "a", "fireDate": "2099-01-05T09:00", "repeatInterval": "day"],
                ["id": "b", "fireDate": "2099-02-01T10:00:00Z", "timeZone": "Asia/Shanghai"],
            ]
        ]
        try Data(notifications.bytes).write(to: URL(fileURLWithPath: batch))
        let previewed = try await w.ok("preview", "--device", "p1", "--json", batch, "--count", "2")
        #expect(previewed.out.first == "a:", "\(previewed)")
        #expect(previewed.out.contains("b:"), "\(previewed)")
        #expect(previewed.out.count == 8, "\(previewed)")
        let offline = try await runChime(["next", "--json", batch, "--count", "2", "--device-tz", "Europe/Paris"])
        #expect(previewed.out == offline.out, "\(offline)")
        let raw = try await w.ok("preview", "--device", "p1", "--json", batch, "--count", "1", "--raw")
        #expect(raw.jsonLines.map { $0["id"] } == ["a", "b"], "\(raw)")
        // One that chimed refuses is named.
        let bad: JSON = ["notifications": [["id": "good", "after": 60], ["id": "bad", "fireDate": "soon"]]]
        try Data(bad.bytes).write(to: URL(fileURLWithPath: batch))
        let refused = try await w.chime("preview", "--device", "p1", "--json", batch)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.hasPrefix("bad: error invalid_argument notification.fireDate: "), "\(refused)")
    }
}
