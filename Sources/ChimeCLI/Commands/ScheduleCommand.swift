import ChimeCore
import ChimeSupport

/// `chime schedule`: one notification from flags, or a raw payload (single or batch) from `--json`.
struct ScheduleCommand: Command {
    static let name = "schedule"
    static let summary = "schedule a notification (or replace one with the same --id)"
    static let synopsis = "chime schedule --device ID (--at TIME [--tz ZONE] | --in DURATION) [options]"
    static let discussion = """
        Schedules a notification on chimed and prints its id and next delivery time. Scheduling an
        existing --id replaces it. --json FILE (or - for standard input) sends a raw schedule payload
        instead, one notification or a batch {"notifications": [...], "replace": {...}}.
        A wall-clock --at without --tz (or with --tz device) follows the device's zone. --at HH:MM
        without a date is the next such time in that zone: today if it is still ahead, else tomorrow
        (with --on or --every weekdays, the next listed day). --times N counts from now: chime adds
        the occurrences before now to the count it sends, since chimed counts from the first date.
        """
    static let specs =
        [ConnectionOptions.deviceSpec] + NotificationFlags.specs
        + [
            .init("json", env: false, "send this file's JSON object (- for standard input) instead of the flags"),
            DeviceRequest.rawSpec,
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        (
            "dinner at 18:00 Shanghai time",
            #"chime schedule --device phone-1 --at "2026-12-01 18:00" --tz Asia/Shanghai --body "Dinner""#
        ),
        (
            "a reminder in 15 minutes",
            #"chime schedule --device phone-1 --in 15m --body "Tea is ready" --sound default"#
        ),
        (
            "every Mid-Autumn Festival (the 15th of the 8th Chinese month) at 09:00 Shanghai time",
            #"chime schedule --device phone-1 --id mid-autumn --lunar 8-15 --at 09:00 --tz Asia/Shanghai --body "Mid-Autumn""#
        ),
        (
            "the last day of every month: the 31st, or the month's last day when it is shorter",
            #"chime schedule --device phone-1 --id rent --every month --on-day 31 --skip backward --at 09:00 --body "Rent""#
        ),
        (
            "Monday to Friday at 18:00 in the device's zone, from the next such day",
            #"chime schedule --device phone-1 --id medicine --on mon-fri --at 18:00 --body "Take your medicine""#
        ),
        (
            "every weekday (Monday to Friday) at 08:00, 10 minutes early, with userInfo",
            #"chime schedule --device phone-1 --id standup --at 08:00 --every weekdays --lead 10m --info team=core --info priority=2"#
        ),
        (
            "the next 7 mornings at 09:00",
            #"chime schedule --device phone-1 --id pill --at 09:00 --every day --times 7 --body "Take the pill""#
        ),
        (
            "come back at the first noon at least a day from now (tomorrow if asked before noon)",
            #"chime schedule --device phone-1 --in 1d --align 12:00 --tz Europe/Paris --body "We miss you""#
        ),
        ("a raw batch payload", "chime schedule --device phone-1 --json batch.json"),
    ]

    let request: DeviceRequest
    /// The notification the flags describe, or nil with `--json`.
    let notification: NotificationFlags?
    /// The `--json` payload, sent as it is.
    let file: JSONObject
    let namedZone: Zone?

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        if let path = flags["json"] {
            guard !NotificationFlags.anyGiven(flags) else {
                throw UsageError("--json sends the file as it is: give no notification flags with it")
            }
            file = try Parse.jsonFile(path, flag: "json")
            notification = nil
            namedZone = NotificationFlags.namedZone(of: file)
        } else {
            let notification = try NotificationFlags(flags, countIsTimes: true)
            self.notification = notification
            file = [:]
            namedZone = notification.namedZone
        }
    }

    func run(_ console: Console) async throws(CLIFailure) {
        Self.warn(notification?.warnings ?? [], console)
        try await request.send(.schedule, notification, json: file, namedZone: namedZone, console) { result, zone in
            guard case .scheduled(let scheduled) = result else { return }
            console.out(lines: Self.lines(scheduled, zone: zone))
        }
    }

    /// One line per notification scheduled, then how many `replace` removed.
    static func lines(_ result: ReplyResult.Scheduled, zone: Zone?) -> [String] {
        let display = TimeDisplay(zone: zone)
        var table = Table([])
        for row in result.scheduled {
            let next = row.nextFireDate.map { "next delivery \(display.both($0))" } ?? "paused"
            table.append(["scheduled \(row.id)", next])
        }
        var lines = table.lines
        if result.replaced > 0 { lines.append("replaced \(result.replaced)") }
        return lines
    }
}
