import ChimeCore
import ChimeSupport

/// `chime next`: "when will this fire?", answered offline by the same engine chimed runs.
struct NextCommand: Command {
    static let name = "next"
    static let summary = "when would this fire? (offline: no broker, same engine as chimed)"
    static let synopsis = "chime next (--at TIME | --in DURATION) [schedule flags] [--count N] [--from TIME]"
    static let discussion = """
        Builds the notification from the same flags as `schedule`, decodes it as chimed would and
        expands it with chimed's engine, locally: no broker, no chimed. Each delivery time is printed in
        the zone (--tz, else --device-tz) and in UTC. --device-tz stands for the device's zone, for
        --tz device and for wall-clock times without --tz. Quiet hours are not applied.
        """
    static let specs: [Flags.Spec] =
        NotificationFlags.expansionSpecs + ExpansionFlags.specs + [
            .init("device-tz", env: false, "the device's zone, for --tz device or a wall-clock --at without --tz"),
            .init("min-repeat-seconds", default: "60", env: false, "as chimed's flag: reject repeats more often"),
        ]
    static let examples: [(comment: String, command: String)] = [
        (
            "daily at 02:30 New York time across the spring-forward night",
            #"chime next --at "2026-03-08 02:30" --tz America/New_York --every day --count 3 --from 2026-03-01T00:00Z"#
        ),
        (
            "the last Friday of each month at 17:00 in the device's zone",
            #"chime next --at "2027-01-01 17:00" --device-tz Europe/Paris --rrule "FREQ=MONTHLY;BYDAY=-1FR""#
        ),
    ]

    let payload: JSONObject
    let deviceZone: Zone?
    let displayZone: Zone?
    let minRepeatSeconds: Int
    let raw: Bool

    init(_ flags: Flags) throws(UsageError) {
        try flags.expectNoPositional()
        var payload = try ExpansionFlags.parameters(flags)
        let (notification, namedZone) = try ExpansionFlags.notification(flags)
        payload["notification"] = .object(notification)
        self.payload = payload
        let deviceZone = try flags["device-tz"].map { (text: String) throws(UsageError) in
            try Parse.zone(text, flag: "device-tz")
        }
        self.deviceZone = deviceZone ?? namedZone
        displayZone = namedZone ?? deviceZone
        minRepeatSeconds = try flags.integer("min-repeat-seconds", in: 1...31_536_000)
        raw = flags.isSet("raw")
    }

    /// The fire dates the engine computes, or its error reply.
    func fireDates(now: Instant) throws(CLIFailure) -> ReplyResult {
        let deviceId = "chime-next"
        let request: Request
        switch CommandDecoder().decode(deviceId: deviceId, op: .preview, payload: JSON.object(payload).bytes) {
        case .success(let decoded): request = decoded
        case .failure(let failure): throw CLIFailure(chimeError: failure.error)
        }
        let engine = Engine(configuration: EngineConfiguration(minRepeatSeconds: Int64(minRepeatSeconds)))
        if let deviceZone {
            engine.apply(.device(deviceId: deviceId, at: now, update: DeviceUpdate(timeZone: deviceZone)))
        }
        var random = SystemRandomNumberGenerator()
        guard case .reply(let reply) = engine.decide(request, now: now, random: &random) else {
            throw CLIFailure(.failed, "the engine wanted to change state for a preview")
        }
        switch reply.outcome {
        case .success(let result): return result
        case .failure(let error):
            var failure = CLIFailure(chimeError: error)
            if error.code == .timezoneRequired { failure.message += " (give --tz ZONE or --device-tz ZONE)" }
            throw failure
        }
    }

    func run(_ console: Console) async throws(CLIFailure) {
        let result = try fireDates(now: wallClock())
        if raw {
            console.out(JSON.object(result.json).text)
            return
        }
        guard case .previewed(let dates) = result else { return }
        console.out(lines: ExpansionFlags.lines(dates, zone: displayZone))
    }
}
