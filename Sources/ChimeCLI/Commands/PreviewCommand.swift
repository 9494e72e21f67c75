import ChimeCore
import ChimeSupport

/// The flags `preview` and `next` add to the notification flags.
enum ExpansionFlags {
    static let specs: [Flags.Spec] = [
        .init("count", env: false, "how many deliveries to show, 1 to 1000 (default 10)"),
        .init("from", env: false, "start from this instant instead of now (2026-12-01T00:00Z)"),
        .init("json", env: false, "take the notification object from this file (- for standard input)"),
        .init("raw", value: false, env: false, "print the result as JSON"),
    ]

    /// `count` and `from` of a preview command.
    static func parameters(_ flags: Flags) throws(UsageError) -> JSONObject {
        var o: JSONObject = ["count": .int(Int64(try Parse.integer(flags, "count", in: 1...1000) ?? 10))]
        if let from = flags["from"] { o["from"] = .string(try Parse.instant(from, flag: "from").rfc3339()) }
        return o
    }

    /// The notification from `--json` or from the notification flags, and the zone it names.
    static func notification(_ flags: Flags) throws(UsageError) -> (JSONObject, Zone?) {
        if let file = flags["json"] {
            guard !NotificationFlags.anyGiven(flags, except: ["count"]) else {
                throw UsageError("--json takes the notification from the file: give no notification flags with it")
            }
            let object = try Parse.jsonFile(file, flag: "json")
            return (object, NotificationFlags.namedZone(of: object))
        }
        let built = try NotificationFlags(flags, countIsTimes: false)
        return (built.object, built.namedZone)
    }

    /// The instants as a table: number, the time in `zone` with its weekday, and UTC.
    static func lines(_ dates: [Instant], zone: Zone?) -> [String] {
        let display = TimeDisplay(zone: zone)
        var table = Table(display.zone.map { ["#", $0.identifier, "UTC"] } ?? ["#", "UTC"])
        for (index, instant) in dates.enumerated() {
            let utc = display.utc(instant)
            table.append(
                display.zone == nil
                    ? ["\(index + 1)", TimeDisplay.weekday(Zone.utc.localDateTime(at: instant)) + " " + utc]
                    : ["\(index + 1)", display.localWithWeekday(instant), utc]
            )
        }
        return dates.isEmpty ? ["no deliveries"] : table.lines
    }
}

/// `chime preview`: asks chimed when a stored notification, or one described by flags, would fire.
struct PreviewCommand: Command {
    static let name = "preview"
    static let summary = "ask chimed when a notification (stored, or described by flags) would fire"
    static let synopsis = "chime preview --device ID (--id ID | schedule flags) [--count N] [--from TIME]"
    static let discussion = """
        Asks chimed for the next delivery times of the stored notification --id, or of the notification
        the schedule flags describe (nothing is stored). Times are shown in --tz, else in the device's
        zone, and in UTC. Quiet hours are not applied. For an answer without a broker, see `chime next`.
        """
    static let specs: [Flags.Spec] =
        [ConnectionOptions.deviceSpec] + NotificationFlags.expansionSpecs + ExpansionFlags.specs
        + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        ("the next 5 deliveries of a stored notification", "chime preview --device phone-1 --id standup --count 5"),
        (
            "what would this rule do, from the start of next year",
            #"chime preview --device phone-1 --at "2027-01-01 09:00" --tz Europe/Paris --rrule "FREQ=MONTHLY;BYDAY=-1FR" --from 2027-01-01T00:00Z"#
        ),
    ]

    let request: DeviceRequest
    let payload: JSONObject
    let namedZone: Zone?

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        var payload = try ExpansionFlags.parameters(flags)
        if let id = flags["id"], flags["json"] == nil, !NotificationFlags.anyGiven(flags, except: ["id", "count"]) {
            payload["id"] = .string(id)
            namedZone = nil
        } else {
            let (notification, zone) = try ExpansionFlags.notification(flags)
            payload["notification"] = .object(notification)
            namedZone = zone
        }
        self.payload = payload
    }

    func run(_ console: Console) async throws(CLIFailure) {
        try await request.send(.preview, payload, console) { (broker, result) throws(CLIFailure) in
            var zone = namedZone
            if zone == nil { zone = try await broker.deviceZone(request.device) }
            guard case .previewed(let dates) = result else { return }
            console.out(lines: ExpansionFlags.lines(dates, zone: zone))
        }
    }
}
