import ChimeCore
import ChimeSupport
import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeCLI

/// The built `chime` where no chimed is needed: help, usage mistakes, `next`, an unreachable broker.
@Suite struct OfflineTests {
    /// Nothing listens on port 1: any command that needs the broker would fail.
    static let nowhere = ["CHIME_BROKER": "mqtt://127.0.0.1:1"]

    @Test func helpForEveryCommandHasUsageOptionsAndExamples() async throws {
        for arguments in [["help"], ["--help"]] {
            let run = try await runChime(arguments)
            #expect(run.status == 0, "\(run)")
            for command in Dispatcher.commands {
                #expect(run.out.contains { $0.hasPrefix("  \(command.name) ") }, "\(command.name) missing: \(run)")
            }
        }
        for command in Dispatcher.commands {
            for arguments in [[command.name, "--help"], ["help", command.name]] {
                let run = try await runChime(arguments)
                #expect(run.status == 0, "\(arguments): \(run)")
                #expect(run.out.first?.hasPrefix("usage: chime \(command.name)") == true, "\(arguments): \(run)")
                #expect(run.out.contains("Examples:"), "\(arguments)")
                #expect(run.out.contains { $0.hasPrefix("  chime \(command.name)") }, "\(arguments)")
                #expect(run.out.contains { $0.hasPrefix("Exit status: 0 ok") }, "\(arguments)")
                // Readable in a 100-column terminal; only example command lines may be longer.
                let long = run.out.filter { $0.count > 100 && !$0.hasPrefix("  chime ") }
                #expect(long.isEmpty, "\(arguments): \(long)")
            }
        }
        let bare = try await runChime([])
        #expect(bare.status == 2)
        #expect(bare.err.first?.hasPrefix("chime: talk to chimed") == true, "\(bare)")
    }

    @Test(
        arguments: [
            (["schedule", "--device", "d", "--in", "abc"], "schedule", #"--in: "abc" is not a duration"#),
            (
                ["schedule", "--device", "d", "--in", "5m", "--at", "2099-01-01 10:00"], "schedule",
                "either --at or --in"
            ),
            (["schedule", "--device", "d"], "schedule", "say when: --at"),
            (["schedule", "--in", "5m"], "schedule", "--device is required"),
            (["schedule", "--device", "bad device", "--in", "5m"], "schedule", #"--device: "bad device""#),
            (["schedule", "--device", "d", "--in", "5m", "--tz", "Mars/Olympus"], "schedule", "not an IANA time zone"),
            (["schedule", "--device", "d", "--at", "tomorrow"], "schedule", #"--at: expected "YYYY-MM-DD HH:MM""#),
            (
                ["schedule", "--device", "d", "--in", "5m", "--every", "fortnight"], "schedule",
                "--every: expected one of"
            ),
            (["schedule", "--device", "d", "--in", "5m", "--times", "3"], "schedule", "--times goes with --every"),
            (
                ["schedule", "--device", "d", "--at", "2099-01-01 10:00", "--align", "12:00"], "schedule",
                "--align goes with --in"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--badge", "++1"], "schedule",
                "--badge: expected N, +N or -N"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--info", "novalue"], "schedule",
                "--info: expected key=value"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--info", "k:={"], "schedule",
                "--info: k:= needs a JSON value"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--rrule", "FREQ=SOMETIMES"], "schedule",
                #"--rrule: FREQ: expected SECONDLY, MINUTELY, HOURLY, DAILY, WEEKLY, MONTHLY or YEARLY, got "SOMETIMES""#
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--rrule", "FREQ=WEEKLY;BYDAY=MO,XX"], "schedule",
                #"--rrule: BYDAY: expected a weekday (MO, TU, WE, TH, FR, SA, SU), with an ordinal or not (1MO, -1FR), got "XX""#
            ),
            (["schedule", "--device", "d", "--in", "5m", "--bogus"], "schedule", "unknown flag --bogus"),
            (
                ["schedule", "--device", "d", "--in", "5m", "--bdy", "Hi"], "schedule",
                "unknown flag --bdy (did you mean --body?)"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "-b"], "schedule",
                "unknown flag -b (flags are spelled --name)"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--body", "a", "--body=b"], "schedule",
                #"--body was given twice ("a", then "b"): give it once"#
            ),
            (["list", "--device", "d", "--device", "e"], "list", #"--device was given twice ("d", then "e")"#),
            (["schedule", "--device", "d", "--in", "5m", "--on", "mon-fri"], "schedule", "--on goes with --at"),
            (
                ["schedule", "--device", "d", "--at", "18:00", "--on", "mon-funday"], "schedule",
                #"--on: expected days such as mon-fri, mon,wed,fri, sat-sun, monday,thursday, weekdays or weekends, got "mon-funday""#
            ),
            (
                ["schedule", "--device", "d", "--at", "18:00", "--on", "mon", "--every", "day"], "schedule",
                "--on is a weekly rule: give no --every or --rrule"
            ),
            (
                ["schedule", "--device", "d", "--at", "18:00", "--every", "wekdays"], "schedule",
                #"got "wekdays" (did you mean weekdays?)"#
            ),
            (["schedule", "--device", "d", "--at", "25:00"], "schedule", #"HH:MM (the next one)"#),
            (["schedule", "--device", "d", "--json", "/nonexistent.json"], "schedule", "--json: cannot read"),
            (["cancel", "--device", "d"], "cancel", "say which: --id ID, --tag key=value or --all"),
            (["cancel", "--device", "d", "--id", "a", "--all"], "cancel", "give one kind of selector"),
            (["device", "--device", "d", "--quiet", "22-7"], "device", "--quiet: expected START-END"),
            (
                ["device", "--device", "d", "--quiet", "22:00-07:00", "--no-quiet"], "device",
                "either --quiet or --no-quiet"
            ),
            (["snooze", "--device", "d", "--id", "a"], "snooze", "--in is required"),
            (["list", "--device", "d", "--limit", "0"], "list", "--limit must be an integer from 1"),
            (["watch"], "watch", "--device is required"),
            (["watch", "--device", "d", "--count", "0"], "watch", "--count must be an integer from 1"),
            (["ack", "--device", "d"], "ack", "say which deliveries: give one or more fireIds"),
            (["ack", "--device", "d", "a@x", "--badge", "down"], "ack", "--badge: expected N, +N or -N"),
            (["inbox", "--device", "d", "extra"], "inbox", #"unexpected argument "extra""#),
            (["history", "--device", "d", "--since", "2026-12-01 10:00"], "history", "--since: expected an instant"),
            (["history", "--device", "d", "--limit", "1001"], "history", "--limit must be an integer from 1 to 1000"),
            (["device", "--device", "d", "--receipts", "maybe"], "device", "--receipts: expected on or off"),
            (["status", "--worker", "w", "--json"], "status", "--worker is a check"),
            (["next", "--in", "5m", "--count", "0"], "next", "--count must be an integer from 1 to 1000"),
            (["next", "--in", "5m", "--from", "2026-01-01 10:00"], "next", "--from: expected an instant"),
            (["journal", "fix", "/tmp"], "journal", #"unknown journal action "fix""#),
            (["journal", "verify"], "journal", "needs the data directory"),
            (
                [
                    "journal", "repartition", "--partitions", "2", "--from", "a", "--to", "b", "--to", "c",
                    "--partitions", "3",
                ],
                "journal", #"--partitions was given twice ("2", then "3")"#
            ),
            (["list", "--device", "d", "--broker", "http://x"], "list", "--broker: invalid broker URL"),
            (["list", "--device", "d", "--timeout", "soon"], "list", #"--timeout: "soon" is not a duration"#),
            // Every duration needs its unit.
            (
                ["schedule", "--device", "d", "--in", "15"], "schedule",
                #"--in: "15" needs a unit: 15s, 15m, 15h or 15d"#
            ),
            (
                ["schedule", "--device", "d", "--at", "18:00", "--lead", "10"], "schedule",
                #"--lead: "10" needs a unit: 10s, 10m"#
            ),
            (
                ["schedule", "--device", "d", "--in", "1h", "--expires", "60"], "schedule",
                #"--expires: "60" needs a unit"#
            ),
            (["snooze", "--device", "d", "--id", "a", "--in", "10"], "snooze", #"--in: "10" needs a unit"#),
            (["next", "--in", "90"], "next", #"--in: "90" needs a unit"#),
            (["list", "--device", "d", "--timeout", "5"], "list", #"--timeout: "5" needs a unit: 5s, 5m"#),
            // A time for a duration, a duration for a time.
            (
                ["schedule", "--device", "d", "--at", "15m"], "schedule",
                #"--at: "15m" is a duration: for this long from now, give --in 15m"#
            ),
            (
                ["schedule", "--device", "d", "--in", "18:00"], "schedule",
                #"--in: "18:00" is a time, not a duration: give --at "18:00""#
            ),
            // Other tools' names, and the protocol's, for chime's flags.
            (
                ["schedule", "--device", "d", "--in", "5m", "--repeat", "day"], "schedule",
                "unknown flag --repeat (did you mean --every?)"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--message", "Hi"], "schedule",
                "unknown flag --message (did you mean --body?)"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--text", "Hi"], "schedule",
                "unknown flag --text (did you mean --body?)"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--Message=Hi"], "schedule",
                "unknown flag --Message (did you mean --body?)"
            ),
            (["schedule", "--device", "d", "--time", "18:00"], "schedule", "unknown flag --time (did you mean --at?)"),
            (
                ["schedule", "--device", "d", "--date", "2027-01-01"], "schedule",
                "unknown flag --date (did you mean --at?)"
            ),
            (
                ["schedule", "--device", "d", "--fireDate", "2027-01-01T10:00Z"], "schedule",
                "unknown flag --fireDate (did you mean --at?)"
            ),
            (["schedule", "--device", "d", "--after", "60"], "schedule", "unknown flag --after (did you mean --in?)"),
            (
                ["schedule", "--device", "d", "--in", "5m", "--alertBody", "Hi"], "schedule",
                "unknown flag --alertBody (did you mean --body?)"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--alert-title", "Hi"], "schedule",
                "unknown flag --alert-title (did you mean --title?)"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--timezone", "UTC"], "schedule",
                "unknown flag --timezone (did you mean --tz?)"
            ),
            (
                ["schedule", "--device", "d", "--at", "18:00", "--before", "10m"], "schedule",
                "unknown flag --before (did you mean --lead?)"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--identifier", "x"], "schedule",
                "unknown flag --identifier (did you mean --id?)"
            ),
            (
                ["schedule", "--device", "d", "--in", "5m", "--userInfo", "a=1"], "schedule",
                "unknown flag --userInfo (did you mean --info?)"
            ),
            (
                ["update", "--device", "d", "--id", "a", "--repeatInterval", "day"], "update",
                "unknown flag --repeatInterval (did you mean --every?)"
            ),
            (["next", "--in", "5m", "--message", "Hi"], "next", "unknown flag --message (did you mean --body?)"),
            (["list", "--device-id", "d"], "list", "unknown flag --device-id (did you mean --device?)"),
            (["history", "--device", "d", "--json", "--raw"], "history", "give either --json or --raw, not both"),
            (["list", "--device", "d", "--protocol", "4"], "list", "--protocol: expected 5 or 311"),
        ] as [([String], String, String)]
    )
    func usageMistakesExitTwoWithAHint(arguments: [String], command: String, message: String) async throws {
        let run = try await runChime(arguments, environment: Self.nowhere)
        #expect(run.status == 2, "\(run)")
        #expect(run.err.count == 2, "\(run)")
        #expect(run.err.first?.hasPrefix("chime \(command): ") == true, "\(run)")
        #expect(run.err.first?.contains(message) == true, "\(run)")
        #expect(run.err.last == "try chime \(command) --help", "\(run)")
        #expect(run.out.isEmpty)
    }

    @Test func anUnknownCommandPointsToTheOverview() async throws {
        let run = try await runChime(["explode"])
        #expect(run.status == 2)
        #expect(run.err == [#"chime: unknown command "explode""#, "try chime --help"], "\(run)")
    }

    /// Commands and the flags before them get a "did you mean" too.
    @Test func closeCommandsAndLeadingFlagsAreSuggested() async throws {
        let command = try await runChime(["shedule", "--device", "d", "--in", "5m"], environment: Self.nowhere)
        #expect(command.status == 2)
        #expect(command.err == [#"chime: unknown command "shedule" (did you mean schedule?)"#, "try chime --help"])
        let help = try await runChime(["help", "lst"])
        #expect(help.status == 2)
        #expect(help.err.first == #"chime: no command "lst" (did you mean list?)"#, "\(help)")
        let leading = try await runChime(["--brokr", "mqtt://x", "list"], environment: Self.nowhere)
        #expect(leading.status == 2)
        #expect(
            leading.err.first == "chime: unknown flag --brokr before the command (did you mean --broker?)",
            "\(leading)"
        )
        // A flag before the command counts as given, like one after it.
        let twice = try await runChime(["--device", "a", "list", "--device", "b"], environment: Self.nowhere)
        #expect(twice.status == 2)
        #expect(twice.err.first == #"chime list: --device was given twice ("b", then "a"): give it once"#, "\(twice)")
    }

    /// Other names point to a flag only where the command has it, and a flag that switches a field
    /// off does not stand for the field.
    @Test func hintsNameOnlyFlagsTheCommandHas() {
        #expect(Flags.unknown("enabled", among: NotificationFlags.specs).message == "unknown flag --enabled")
        #expect(Flags.unknown("hasAction", among: NotificationFlags.specs).message == "unknown flag --hasAction")
        #expect(Flags.unknown("message", among: ListCommand.specs).message == "unknown flag --message")
        #expect(
            Flags.unknown("repeat", among: NotificationFlags.specs).message
                == "unknown flag --repeat (did you mean --every?)"
        )
        // Closeness still serves the rest.
        #expect(
            Flags.unknown("bdy", among: NotificationFlags.specs).message == "unknown flag --bdy (did you mean --body?)"
        )
        #expect(NotificationFlags.dashed("ignoreQuietHours") == "ignore-quiet-hours")
    }

    /// The flags help calls repeatable take every value given; the others one (see the usage table).
    @Test func repeatableFlagsTakeEveryValue() throws {
        let flags = try Flags(
            ["--except", "2099-01-02 10:00", "--info", "a=1", "--except", "2099-01-03 10:00", "--info", "b=2"],
            specs: NotificationFlags.specs,
            environment: [:],
            rejectingRepeats: true
        )
        #expect(flags.all("except") == ["2099-01-02 10:00", "2099-01-03 10:00"])
        #expect(flags.all("info") == ["a=1", "b=2"])
        // chimed's flags: the last one wins, so that callers may append overrides to defaults.
        let worker = try Flags(["--body", "a", "--body", "b"], specs: NotificationFlags.specs, environment: [:])
        #expect(worker["body"] == "b")
        // Help says which are repeatable, from the same declaration.
        let help = HelpText.options(NotificationFlags.specs).joined(separator: " ")
        #expect(help.contains("(a date and time, as --at); repeatable"), "\(help)")
        #expect(
            !HelpText.options(NotificationFlags.contentSpecs.filter { $0.name == "body" })[0].contains("repeatable")
        )
    }

    /// RRULE errors read as sentences, in the CLI as in chimed's replies: no Swift case names.
    @Test(arguments: [
        "FREQ=WEEKLY;BYDAY=XX", "FREQ=DAILY;BYHOUR=24", "FREQ=DAILY;COUNT=x", "INTERVAL=2", "FREQ=DAILY;;",
    ])
    func ruleErrorsNameNoSwiftCases(rule: String) async throws {
        let run = try await runChime(["next", "--in", "1h", "--rrule", rule], environment: Self.nowhere)
        #expect(run.status == 2, "\(run)")
        #expect(run.err.first?.hasPrefix("chime next: --rrule: ") == true, "\(run)")
        for name in ["invalidRule", "invalidCombination", "searchLimit"] {
            #expect(!run.stderr.contains(name), "\(run)")
        }
    }

    /// `journal repartition` takes directories, and its help says so.
    @Test func journalHelpNamesDirectoriesAndScheduleHelpSpellsMondayToFriday() async throws {
        let journal = try await runChime(["journal", "--help"])
        #expect(journal.out.contains { $0.hasPrefix("  --from DIR ") }, "\(journal)")
        #expect(journal.out.contains { $0.hasPrefix("  --to DIR ") }, "\(journal)")
        #expect(!journal.stdout.contains("TIME"), "\(journal)")
        // Monday to Friday is --on mon-fri or --every weekdays; no example repeats --every weekday.
        let schedule = try await runChime(["schedule", "--help"])
        let examples = schedule.out.filter { $0.hasPrefix("  chime ") }
        #expect(examples.contains { $0.contains("--on mon-fri --at 18:00") }, "\(schedule)")
        #expect(examples.contains { $0.contains("--every weekdays") }, "\(schedule)")
        #expect(!examples.contains { $0.contains("--every weekday ") }, "\(schedule)")
        #expect(!schedule.stdout.contains("tomorrow at noon\n"), "\(schedule)")
    }

    /// docs/cli.md has a section for every command, and names every journal and accounts action.
    @Test func theReferenceDocumentsEveryCommand() throws {
        let text = try String(contentsOf: repositoryFile("docs/cli.md"), encoding: .utf8)
        let headings = text.split(separator: "\n").filter { $0.hasPrefix("## ") }
        for command in Dispatcher.commands {
            #expect(
                headings.contains {
                    $0.dropFirst(3).split(separator: ",").contains { $0.trimmingPrefix(" ") == command.name }
                },
                "no section for \(command.name)"
            )
        }
        for action in JournalCommand.Action.allCases {
            #expect(text.contains("chime journal \(action.rawValue) "), "docs/cli.md does not show journal \(action)")
        }
        for action in AccountsCommand.Action.allCases {
            #expect(
                text.contains("chime accounts \(action.rawValue)\n")
                    || text.contains("chime accounts \(action.rawValue) "),
                "docs/cli.md does not show accounts \(action)"
            )
        }
    }

    @Test func anUnreachableBrokerExitsThree() async throws {
        let run = try await runChime(["list", "--device", "d1", "--timeout", "300ms"], environment: Self.nowhere)
        #expect(run.status == 3, "\(run)")
        #expect(run.err == ["chime: cannot reach the broker at mqtt://127.0.0.1:1 within 300ms"], "\(run)")
        // Connection options may come before the command, and a flag beats the environment.
        let before = try await runChime(
            ["--broker", "mqtt://127.0.0.1:1", "--timeout", "200ms", "status"],
            environment: ["CHIME_BROKER": "mqtt://127.0.0.1:2"]
        )
        #expect(before.status == 3, "\(before)")
        #expect(before.stderr.contains("mqtt://127.0.0.1:1 within 200ms"), "\(before)")
    }

    @Test func noReplyWithinTheTimeoutExitsThree() async throws {
        let broker = try await TestBroker.start()  // and no chimed
        defer { Task { await broker.stop() } }
        let run = try await runChime(
            ["list", "--device", "d1", "--timeout", "1s"],
            environment: ["CHIME_BROKER": broker.url]
        )
        #expect(run.status == 3, "\(run)")
        #expect(
            run.stderr.hasPrefix("chime: no reply from chimed to the device command on chime/d1/cmd/device"),
            "\(run)"
        )
        let probe = try await runChime(
            ["status", "--worker", "w1", "--timeout", "1s"],
            environment: ["CHIME_BROKER": broker.url]
        )
        #expect(probe.status == 1, "\(probe)")
        #expect(probe.stderr.contains("not ready: worker w1 has no status"), "\(probe)")
    }

    @Test(
        arguments: [
            // Spring forward: 02:30 does not exist on March 8 and becomes 03:30 EDT; the next day is 02:30 again.
            (
                [
                    "--at", "2026-03-08 02:30", "--tz", "America/New_York", "--every", "day", "--count", "3", "--from",
                    "2026-03-01T00:00Z",
                ],
                [
                    "#  America/New_York          UTC",
                    "1  Sun 2026-03-08 03:30 EDT  2026-03-08 07:30Z",
                    "2  Mon 2026-03-09 02:30 EDT  2026-03-09 06:30Z",
                    "3  Tue 2026-03-10 02:30 EDT  2026-03-10 06:30Z",
                ]
            ),
            // Fall back: 01:30 exists twice on November 1 and means the first (EDT).
            (
                [
                    "--at", "2026-11-01 01:30", "--tz", "America/New_York", "--every", "day", "--count", "2", "--from",
                    "2026-10-25T00:00Z",
                ],
                [
                    "#  America/New_York          UTC",
                    "1  Sun 2026-11-01 01:30 EDT  2026-11-01 05:30Z",
                    "2  Mon 2026-11-02 01:30 EST  2026-11-02 06:30Z",
                ]
            ),
            // Monthly on the 31st keeps to the end of shorter months.
            (
                [
                    "--at", "2027-01-31 18:00", "--tz", "Asia/Shanghai", "--every", "month", "--count", "3", "--from",
                    "2027-01-01T00:00Z",
                ],
                [
                    "#  Asia/Shanghai             UTC",
                    "1  Sun 2027-01-31 18:00 CST  2027-01-31 10:00Z",
                    "2  Sun 2027-02-28 18:00 CST  2027-02-28 10:00Z",
                    "3  Wed 2027-03-31 18:00 CST  2027-03-31 10:00Z",
                ]
            ),
            // Relative to --from, with a lead time; no zone: UTC only.
            (["--in", "2h", "--lead", "15m", "--from", "2026-06-01T10:00Z"], ["#  UTC", "1  Mon 2026-06-01 11:45Z"]),
            // A rule limited by --times; the device's zone stands for --tz device.
            (
                [
                    "--at", "2027-01-01 09:00", "--tz", "device", "--device-tz", "Asia/Kolkata", "--rrule",
                    "FREQ=WEEKLY;BYDAY=MO,FR",
                    "--times", "3", "--from", "2026-12-01T00:00Z",
                ],
                [
                    "#  Asia/Kolkata              UTC",
                    "1  Fri 2027-01-01 09:00 IST  2027-01-01 03:30Z",
                    "2  Mon 2027-01-04 09:00 IST  2027-01-04 03:30Z",
                    "3  Fri 2027-01-08 09:00 IST  2027-01-08 03:30Z",
                ]
            ),
            // Monday to Friday at 18:00, asked on a Friday evening: from Monday.
            (
                [
                    "--on", "mon-fri", "--at", "18:00", "--tz", "Europe/Paris", "--count", "3", "--from",
                    "2026-12-04T18:00Z",
                ],
                [
                    "#  Europe/Paris              UTC",
                    "1  Mon 2026-12-07 18:00 CET  2026-12-07 17:00Z",
                    "2  Tue 2026-12-08 18:00 CET  2026-12-08 17:00Z",
                    "3  Wed 2026-12-09 18:00 CET  2026-12-09 17:00Z",
                ]
            ),
            // --every weekdays is the same rule; in the device's zone, asked on Friday after 08:00 there.
            (
                [
                    "--every", "weekdays", "--at", "08:00", "--device-tz", "Asia/Shanghai", "--count", "2", "--from",
                    "2026-12-04T01:00Z",
                ],
                [
                    "#  Asia/Shanghai             UTC",
                    "1  Mon 2026-12-07 08:00 CST  2026-12-07 00:00Z",
                    "2  Tue 2026-12-08 08:00 CST  2026-12-08 00:00Z",
                ]
            ),
            // Days in any case and spelling; today counts while the time is still ahead.
            (
                [
                    "--on", "Sat,SUNDAY", "--at", "09:00:30", "--tz", "UTC", "--count", "3", "--from",
                    "2026-12-05T08:00Z",
                ],
                [
                    "#  UTC", "1  Sat 2026-12-05 09:00:30Z", "2  Sun 2026-12-06 09:00:30Z",
                    "3  Sat 2026-12-12 09:00:30Z",
                ]
            ),
            // HH:MM alone, already past today: tomorrow.
            (["--at", "09:00", "--tz", "UTC", "--from", "2026-12-05T10:00Z"], ["#  UTC", "1  Sun 2026-12-06 09:00Z"]),
            // --times counts from now (--from here), not from a start in the past.
            (
                [
                    "--at", "2026-12-01 09:00", "--tz", "UTC", "--every", "day", "--times", "3", "--count", "10",
                    "--from",
                    "2026-12-05T10:00Z",
                ],
                ["#  UTC", "1  Sun 2026-12-06 09:00Z", "2  Mon 2026-12-07 09:00Z", "3  Tue 2026-12-08 09:00Z"]
            ),
            (
                [
                    "--on", "mon,wed", "--at", "2026-11-30 09:00", "--tz", "UTC", "--times", "3", "--from",
                    "2026-12-05T00:00Z",
                ],
                ["#  UTC", "1  Mon 2026-12-07 09:00Z", "2  Wed 2026-12-09 09:00Z", "3  Mon 2026-12-14 09:00Z"]
            ),
            (
                [
                    "--at", "2026-12-01T09:00Z", "--rrule", "FREQ=DAILY;INTERVAL=2", "--times", "2", "--lead", "1h",
                    "--from", "2026-12-05T08:30Z",
                ],
                ["#  UTC", "1  Mon 2026-12-07 08:00Z", "2  Wed 2026-12-09 08:00Z"]
            ),
        ] as [([String], [String])]
    )
    func nextExpandsOfflineWithTheEngine(arguments: [String], expected: [String]) async throws {
        let run = try await runChime(["next"] + arguments, environment: Self.nowhere)
        #expect(run.status == 0, "\(run)")
        #expect(run.out == expected, "\(run)")
    }

    @Test func nextReportsTheEnginesErrorsAndPrintsRawFireDates() async throws {
        let noZone = try await runChime(
            ["next", "--at", "2099-01-01 10:00", "--every", "day"],
            environment: Self.nowhere
        )
        #expect(noZone.status == 1, "\(noZone)")
        #expect(noZone.stderr.hasPrefix("error timezone_required notification.timeZone: "), "\(noZone)")
        #expect(noZone.stderr.hasSuffix("(give --tz ZONE or --device-tz ZONE)"), "\(noZone)")
        let never = try await runChime(
            ["next", "--at", "2020-01-01 10:00Z", "--every", "day", "--until", "2021-01-01T00:00Z"],
            environment: Self.nowhere
        )
        #expect(never.status == 1, "\(never)")
        #expect(never.stderr.hasPrefix("error never_fires"), "\(never)")
        let tooOften = try await runChime(["next", "--in", "1m", "--every", "second"], environment: Self.nowhere)
        #expect(tooOften.status == 1, "\(tooOften)")
        #expect(tooOften.stderr.hasPrefix("error invalid_argument notification.repeatInterval"), "\(tooOften)")
        let raw = try await runChime(
            ["next", "--at", "2027-01-01T00:00Z", "--every", "hour", "--count", "2", "--raw"],
            environment: Self.nowhere
        )
        #expect(raw.status == 0, "\(raw)")
        #expect(raw.jsonLines.first?["fireDates"] == ["2027-01-01T00:00:00Z", "2027-01-01T01:00:00Z"], "\(raw)")
        // HH:MM alone needs a zone to find the next one in.
        let noZoneForTheTime = try await runChime(
            ["next", "--at", "18:00", "--every", "day"],
            environment: Self.nowhere
        )
        #expect(noZoneForTheTime.status == 1, "\(noZoneForTheTime)")
        #expect(
            noZoneForTheTime.err == [
                "chime: --at 18:00 without a date is the next 18:00 in the device's zone, and the device has none: "
                    + "give --tz ZONE or --device-tz ZONE"
            ],
            "\(noZoneForTheTime)"
        )
    }

    /// `--every weekday` keeps Apple's meaning, every day, and says so; `--every weekdays` is Monday to
    /// Friday and says nothing.
    @Test func everyWeekdayWarnsThatItIncludesWeekends() async throws {
        let flags = ["--at", "2026-12-05 10:00", "--tz", "UTC", "--count", "3", "--from", "2026-12-01T00:00Z"]
        let weekday = try await runChime(["next", "--every", "weekday"] + flags, environment: Self.nowhere)
        #expect(weekday.status == 0, "\(weekday)")
        #expect(
            weekday.out == [
                "#  UTC", "1  Sat 2026-12-05 10:00Z", "2  Sun 2026-12-06 10:00Z", "3  Mon 2026-12-07 10:00Z",
            ]
        )
        #expect(weekday.err == ["chime next: " + NotificationFlags.weekdayWarning], "\(weekday)")
        #expect(weekday.stderr.contains("--every weekdays or --on mon-fri"))
        let weekdays = try await runChime(["next", "--every", "weekdays"] + flags, environment: Self.nowhere)
        #expect(weekdays.status == 0, "\(weekdays)")
        #expect(weekdays.out.dropFirst().map { String($0.dropFirst(3).prefix(3)) } == ["Mon", "Tue", "Wed"])
        #expect(weekdays.err.isEmpty, "\(weekdays)")
    }

    /// `--json` takes a schedule batch too: each notification expanded under its id.
    @Test func nextExpandsEachNotificationOfABatch() async throws {
        let directory = try TemporaryDirectory(prefix: "chime-next-batch")
        let path = directory.appending("batch.json")
        let batch: JSON = [
            "notifications": [
                ["id": "med", "fireDate": "2026-12-07T18:00", "rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"],
                ["fireDate": "2027-01-15T07:00:00Z", "leadTime": 900],
            ],
            "replace": ["all": true],
        ]
        try Data(batch.bytes).write(to: URL(fileURLWithPath: path))
        let run = try await runChime(
            ["next", "--json", path, "--count", "2", "--device-tz", "Asia/Shanghai", "--from", "2026-12-01T00:00Z"],
            environment: Self.nowhere
        )
        #expect(run.status == 0, "\(run)")
        #expect(
            run.out == [
                "med:",
                "#  Asia/Shanghai             UTC",
                "1  Mon 2026-12-07 18:00 CST  2026-12-07 10:00Z",
                "2  Tue 2026-12-08 18:00 CST  2026-12-08 10:00Z",
                "",
                "notifications[1]:",
                "#  Asia/Shanghai             UTC",
                "1  Fri 2027-01-15 14:45 CST  2027-01-15 06:45Z",
            ],
            "\(run)"
        )
        let raw = try await runChime(
            [
                "next", "--json", path, "--count", "1", "--device-tz", "Asia/Shanghai", "--from", "2026-12-01T00:00Z",
                "--raw",
            ],
            environment: Self.nowhere
        )
        #expect(raw.jsonLines.map { $0["id"] } == ["med", "notifications[1]"], "\(raw)")
        #expect(raw.jsonLines.last?["fireDates"] == ["2027-01-15T06:45:00Z"], "\(raw)")
    }
}

/// The parsers and formatters behind the flags, directly.
@Suite struct ParsingTests {
    @Test(
        arguments: [
            ("90s", 90_000), ("15m", 900_000), ("2h", 7_200_000), ("1d", 86_400_000), ("1h30m", 5_400_000),
            ("1w", 604_800_000), ("500ms", 500), ("1.5s", 1500), ("1.5h", 5_400_000), ("2d12h", 216_000_000),
        ] as [(String, Int64)]
    )
    func durations(text: String, milliseconds: Int64) throws {
        #expect(try Parse.duration(text, flag: "in") == milliseconds)
    }

    @Test(arguments: ["", "abc", "5x", "-5m", "m", "1h-30m", "20y", "99999w", "1.5.5s"])
    func badDurations(text: String) {
        #expect(throws: (any Error).self) { try Parse.duration(text, flag: "in") }
    }

    /// A number alone is refused, not taken for seconds: `--in 15` may well mean minutes.
    @Test(
        arguments: [
            ("15", #"--in: "15" needs a unit: 15s, 15m, 15h or 15d (combinations such as 1h30m too)"#),
            ("1.5", #"--in: "1.5" needs a unit: 1.5s, 1.5m, 1.5h or 1.5d (combinations such as 1h30m too)"#),
            ("1h30", #"--in: "1h30" needs a unit after 30: s, m, h or d"#),
        ]
    )
    func aNumberNeedsItsUnit(text: String, message: String) {
        #expect(throws: UsageError(message)) { try Parse.duration(text, flag: "in") }
    }

    @Test func zeroDurationsOnlyWhereAllowed() throws {
        #expect(throws: (any Error).self) { try Parse.duration("0s", flag: "in") }
        #expect(throws: UsageError(#"--in must be more than 0, got "0""#)) { try Parse.duration("0", flag: "in") }
        #expect(try Parse.duration("0s", flag: "lead", allowZero: true) == 0)
        // Zero is zero in any unit.
        #expect(try Parse.duration("0", flag: "lead", allowZero: true) == 0)
    }

    @Test(
        arguments: [
            ("n=3", "n", JSON.int(3)), ("x=1.5", "x", .double(1.5)), ("ok=true", "ok", .bool(true)),
            ("s=hello", "s", .string("hello")), ("z=007", "z", .string("007")), ("e=", "e", .string("")),
            ("nil=null", "nil", .string("null")), ("eq=a=b", "eq", .string("a=b")), ("j:=[1,\"a\"]", "j", [1, "a"]),
            ("q:=\"3\"", "q", .string("3")), ("o:={\"k\":null}", "o", ["k": nil]),
        ] as [(String, String, JSON)]
    )
    func keyValues(text: String, key: String, value: JSON) throws {
        let parsed = try Parse.keyValue(text, flag: "info")
        #expect(parsed.key == key)
        #expect(parsed.value == value)
    }

    @Test func badges() throws {
        #expect(try Parse.badge("3") == .int(3))
        #expect(try Parse.badge("+1") == .string("+1"))
        #expect(try Parse.badge("-2") == .string("-2"))
        for bad in ["", "+", "+-1", "x", "1.5", "99999999"] {
            #expect(throws: (any Error).self, "\(bad)") { try Parse.badge(bad) }
        }
    }

    @Test(
        arguments: [
            ("Asia/Shanghai", "2026-12-01T10:00:00Z", "2026-12-01 18:00 CST (10:00Z)"),
            ("Asia/Shanghai", "2026-12-01T17:30:05Z", "2026-12-02 01:30:05 CST (2026-12-01 17:30:05Z)"),
            ("America/New_York", "2026-07-01T16:00:00Z", "2026-07-01 12:00 EDT (16:00Z)"),
            ("Europe/London", "2026-01-15T09:00:00Z", "2026-01-15 09:00 GMT (09:00Z)"),
            ("Asia/Kolkata", "2026-01-15T09:00:00Z", "2026-01-15 14:30 IST (09:00Z)"),
            ("America/Sao_Paulo", "2026-01-15T09:00:00Z", "2026-01-15 06:00 -03 (09:00Z)"),
            ("UTC", "2026-01-15T09:00:00Z", "2026-01-15 09:00Z"),
        ] as [(String, String, String)]
    )
    func timesShowInTheZoneAndInUTC(zone: String, instant: String, shown: String) throws {
        let named: Zone = try #require(Zone(identifier: zone))
        let display = TimeDisplay(zone: named)
        #expect(display.both(instant) == shown)
    }

    @Test func withoutTheTzDatabaseAZoneIsNamedByItsOffset() throws {
        let shanghai = try #require(Zone(identifier: "Asia/Shanghai"))
        let missing = ZoneAbbreviations(shanghai, directory: "/nonexistent")
        #expect(missing.abbreviation(at: Instant(seconds: 0), offset: 8 * 3600) == "+08:00")
        let present = ZoneAbbreviations(shanghai)
        #expect(present.abbreviation(at: Instant(seconds: 1_800_000_000), offset: 8 * 3600) == "CST")
        // An offset the file does not know for that time (another data set) is shown as the offset.
        #expect(present.abbreviation(at: Instant(seconds: 1_800_000_000), offset: -5 * 3600) == "-05:00")
        #expect(ZoneAbbreviations(.utc).abbreviation(at: Instant(seconds: 0), offset: 0) == "UTC")
    }

    @Test(
        arguments: [
            ("mon-fri", [1, 2, 3, 4, 5]), ("MON,wed,Fri", [1, 3, 5]), ("sat-sun", [6, 7]), ("Monday,Thursday", [1, 4]),
            ("fri-mon", [1, 5, 6, 7]), ("su", [7]), ("tues,thurs", [2, 4]), ("mon, tue", [1, 2]),
            ("sun-sat", [1, 2, 3, 4, 5, 6, 7]), ("wed-wed,wed", [3]), ("weekdays", [1, 2, 3, 4, 5]),
            ("weekends", [6, 7]), ("Weekend", [6, 7]), ("weekends,mon", [1, 6, 7]), ("weekdays,weekends", Array(1...7)),
        ] as [(String, [Int])]
    )
    func daysAndRangesOfDays(text: String, days: [Int]) throws {
        #expect(try Parse.weekdays(text, flag: "on") == days)
    }

    @Test(arguments: [
        "", "m", "mon-", "-fri", "mon-tue-wed", "funday", "mon,,tue", "mo.", "1-5", "weekday", "weekdays-sun",
    ])
    func badDays(text: String) {
        #expect(throws: UsageError.self) { try Parse.weekdays(text, flag: "on") }
    }

    /// `--at HH:MM` alone: the next such wall-clock time, on a listed day when there are days.
    @Test(
        arguments: [
            // Still ahead today; just past; exactly now is past.
            ("2026-12-05T08:59:59Z", nil, "2026-12-05T09:00:00"),
            ("2026-12-05T09:00:01Z", nil, "2026-12-06T09:00:00"),
            ("2026-12-05T09:00:00Z", nil, "2026-12-06T09:00:00"),
            // Saturday: Monday is the next weekday; a week later when only today is listed and it is past.
            ("2026-12-05T08:00:00Z", [1, 2, 3, 4, 5], "2026-12-07T09:00:00"),
            ("2026-12-05T10:00:00Z", [6], "2026-12-12T09:00:00"),
            ("2026-12-05T08:00:00Z", [6], "2026-12-05T09:00:00"),
        ] as [(String, [Int]?, String)]
    )
    func theNextTimeOfDay(now: String, days: [Int]?, expected: String) throws {
        let instant = try Parse.instant(now, flag: "from")
        let next = NotificationFlags.next(TimeOfDay(hour: 9, minute: 0), on: days, in: .utc, after: instant)
        #expect(next.description == expected)
    }

    @Test func theNextTimeOfDayAcrossTheSpringForwardGap() throws {
        // 02:30 does not exist in New York on 2026-03-08; at 01:00 EST it is still ahead (03:30 EDT).
        let newYork = try #require(Zone(identifier: "America/New_York"))
        let now = try Parse.instant("2026-03-08T06:00:00Z", flag: "from")
        let next = NotificationFlags.next(TimeOfDay(hour: 2, minute: 30), on: nil, in: newYork, after: now)
        #expect(next.description == "2026-03-08T02:30:00")
    }

    @Test func tablesAlignColumnsAndTruncateText() {
        var table = Table(["ID", "WHEN", "BODY"])
        table.append(["a", "today", "short"])
        table.append(["longer-id", "-", ""])
        #expect(table.lines == ["ID         WHEN   BODY", "a          today  short", "longer-id  -"])
        #expect(Table.truncated("abcdef", 4) == "abc…")
        #expect(Table.truncated("a\nb", 4) == "a b")
    }

    @Test(
        arguments: [
            (0, 1), (1, 3), (2, 3), (0, 7), (6, 7), (31, 32), (99_999, 100_000), (0, 4_294_967_295),
            (4_294_967_294, 4_294_967_295), (123_456_789, 3_000_000_000),
        ] as [(UInt32, UInt32)]
    )
    func theProbeDeviceBelongsToTheWorkersPartition(index: UInt32, count: UInt32) {
        let partition = Partition(index: index, count: count)
        let device = StatusCommand.probeDevice(remainder: index, modulus: count)
        #expect(partition.owns(device))
        #expect(DeviceID.isValid(device))
        if count <= 32 { #expect(device == "chime-probe" || device.hasPrefix("chime-probe-") && device.count <= 16) }
    }

    /// The 48 flips of the built probe device span all 32 bits of a CRC: every bit alone, and so
    /// every CRC, is reached.
    @Test func aProbeDeviceIsBuiltForEveryCRC() {
        let targets: [UInt32] = [0, 1, .max, 0xDEAD_BEEF] + (0..<32).map { 1 << $0 }
        for target in targets {
            let device = StatusCommand.device(withCRC: target)
            #expect(crc32(Array(device.utf8)) == target, "\(target): \(device)")
            #expect(DeviceID.isValid(device) && device.count == 36, "\(device)")
        }
    }

    @Test func controlCharactersAreEscapedForTheTerminal() {
        #expect(TerminalText.escaped("plain text, ünïcödé 日本 🙂 \\e") == "plain text, ünïcödé 日本 🙂 \\e")
        #expect(TerminalText.escaped("\u{1b}]0;pwned\u{07}") == #"\u{1B}]0;pwned\u{07}"#)
        #expect(TerminalText.escaped("\u{1b}]52;c;cHduZWQ=\u{1b}\\") == #"\u{1B}]52;c;cHduZWQ=\u{1B}\"#)
        #expect(TerminalText.escaped("a\u{7f}\u{80}\u{9b}\u{9f}\u{a0}b") == #"a\u{7F}\u{80}\u{9B}\u{9F}"# + "\u{a0}b")
        #expect(TerminalText.escaped("\u{0}\t\r\n") == #"\u{00}\u{09}\u{0D}\u{0A}"#)
        #expect(TerminalText.escaped("a\nb\r", keepingNewlines: true) == "a\nb" + #"\u{0D}"#)
        #expect(TerminalText.escaped("abc\u{202e}fed\u{2066}") == #"abc\u{202E}fed\u{2066}"#)
        // A combining mark after ESC does not hide it.
        #expect(TerminalText.escaped("\u{1b}\u{301}[2J") == #"\u{1B}"# + "\u{301}[2J")
        // Escaping twice changes nothing.
        let once = TerminalText.escaped("\u{1b}[2J\u{9b}\\u{1B}")
        #expect(TerminalText.escaped(once) == once)
    }

    @Test func tableCellsAreEscapedAndMeasuredSo() {
        var table = Table(["ID", "BODY"])
        table.append(["\u{1b}[2J", "x"])
        table.append(["id", Table.truncated("\u{1b}]0;title\u{07} and\nmore", 20)])
        #expect(table.lines == [#"ID         BODY"#, #"\u{1B}[2J  x"#, #"id         \u{1B}]0;title…"#])
    }

    @Test func aPagerStopsAtARepeatedCursorAndAfterMorePagesThanADeviceFills() throws {
        var trail = PageTrail(.list)
        #expect(trail.maxPages == DeviceLimits.maxPendingPerDevice + 1)
        #expect(PageTrail(.inbox).maxPages == DeviceLimits.maxInboxPerDevice + 1)
        #expect(try trail.follow("a") == "a")
        #expect(try trail.follow("b") == "b")
        #expect(throws: PageTrail.Endless.self) { try trail.follow("a") }
        var last = PageTrail(.inbox)
        #expect(try last.follow(nil) == nil)

        // Three pages at most: two with a cursor, then one that ends the listing.
        var bounded = PageTrail(.inbox, maxPages: 3)
        #expect(try bounded.follow("1") == "1")
        #expect(try bounded.follow("2") == "2")
        do {
            _ = try bounded.follow("3")
            Issue.record("a fourth page was asked for")
        } catch {
            #expect(error.message.hasPrefix("3 inbox pages and a cursor for more"), "\(error)")
        }
        var ending = PageTrail(.inbox, maxPages: 3)
        _ = try ending.follow("1")
        _ = try ending.follow("2")
        #expect(try ending.follow(nil) == nil)
    }

    @Test func slotRangesReadBackWhatTheyWrite() {
        #expect(SlotRanges.text([9, 0, 1, 2, 3, 7, 10, 11, 12]) == "0-3,7,9-12")
        #expect(SlotRanges.text([]) == "")
        #expect(SlotRanges.slots("0-3,7,9-12", count: 13) == [0, 1, 2, 3, 7, 9, 10, 11, 12])
        #expect(SlotRanges.slots("", count: 4) == [])
        for broken in ["0-3,2", "3-1", "0-13", "-1", "1,,2", "a", "1-2-3", "5,4"] {
            #expect(SlotRanges.slots(broken, count: 13) == nil, "\(broken)")
        }
        // A count no store may have is refused before any range is expanded.
        #expect(SlotRanges.slots("0-999999999999", count: 1_000_000_000_000) == nil)
        #expect(SlotRanges.slots("0-65535", count: 65536)?.count == 65536)
    }

    /// What a worker's status says of its slots, read as the probe and the overview read it: a
    /// count no store may have, or not a whole number, is unreadable rather than a crash.
    @Test func aStatusWithSlotsNoStoreMayHaveIsUnreadable() {
        #expect(StatusCommand.servedSlots(["slots": 64, "serving": "0-3,9"])! == (64, [0, 1, 2, 3, 9]))
        #expect(StatusCommand.servedSlots(["slots": 64]).map(\.serving) == [])
        for slots: JSON in [.double(1e300), .double(2.5), -1, 0, 65537, "64"] {
            #expect(StatusCommand.servedSlots(["slots": slots, "serving": "0"]) == nil, "\(slots)")
        }
        #expect(StatusCommand.servedSlots(["slots": 64, "serving": "0-64"]) == nil)
    }

    @Test func undecodableJournalRecordsAreDumpedAsBase64WithTheError() {
        let unknown = JournalCommand.line(sequence: 7, type: 99, [1, 2, 3])
        #expect(unknown["seq"] == 7)
        #expect(unknown["type"] == 99)
        #expect(unknown["payload"] == "AQID")
        #expect(unknown["error"]?.stringValue?.contains("unknown record type 99") == true)
        let broken = JournalCommand.line(sequence: 8, type: 2, Array("{not json".utf8))
        #expect(broken["type"] == "cancel")
        #expect(broken["entry"] == nil)
        #expect(broken["payload"] == .string(Data("{not json".utf8).base64EncodedString()))
        let good = JournalCommand.line(
            sequence: 9,
            type: 2,
            Array(#"{"device":"d1","at":1000,"ids":["a"]}"#.utf8)
        )
        #expect(good["entry"] == ["device": "d1", "at": 1000, "ids": ["a"]])
    }
}
