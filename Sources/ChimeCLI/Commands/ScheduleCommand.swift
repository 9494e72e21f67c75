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
        A wall-clock --at without --tz (or with --tz device) follows the device's zone.
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
            "every weekday at 08:00 in the device's zone, 10 minutes early, with userInfo",
            #"chime schedule --device phone-1 --id standup --at "2026-12-01 08:00" --tz device --every weekday --lead 10m --info team=core --info priority=2"#
        ),
        (
            "come back tomorrow at noon",
            #"chime schedule --device phone-1 --in 1d --align 12:00 --tz Europe/Paris --body "We miss you""#
        ),
        ("a raw batch payload", "chime schedule --device phone-1 --json batch.json"),
    ]

    let request: DeviceRequest
    let payload: JSONObject
    let namedZone: Zone?

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        if let file = flags["json"] {
            guard !NotificationFlags.anyGiven(flags) else {
                throw UsageError("--json sends the file as it is: give no notification flags with it")
            }
            payload = try Parse.jsonFile(file, flag: "json")
            namedZone = NotificationFlags.namedZone(of: payload)
        } else {
            let notification = try NotificationFlags(flags, countIsTimes: true)
            payload = notification.object
            namedZone = notification.namedZone
        }
    }

    func run(_ console: Console) async throws(CLIFailure) {
        try await request.send(.schedule, payload, console) { (broker, result) throws(CLIFailure) in
            // Times in the zone the notification names, else in the device's (when it has one).
            var zone = namedZone
            if zone == nil { zone = try await broker.deviceZone(request.device) }
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
