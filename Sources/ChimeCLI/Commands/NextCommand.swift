import ChimeCore
import ChimeSupport

/// `chime next`: "when will this fire?", answered offline by the same engine chimed runs.
struct NextCommand: Command {
    static let name = "next"
    static let summary = "when would this fire? (offline: no broker, same engine as chimed)"
    static let synopsis =
        "chime next (--at TIME | --in DURATION) [schedule flags] [--count N] [--from TIME]\n"
        + "       chime next --json FILE [--count N] [--from TIME]"
    static let discussion = """
        Builds the notification from the same flags as `schedule` (or takes it from --json FILE, a
        notification object or a schedule batch, each of whose notifications is shown under its id),
        decodes it as chimed would and expands it with chimed's engine, locally: no broker, no chimed.
        Each delivery time is printed in the zone (--tz, else --device-tz) and in UTC. --device-tz
        stands for the device's zone, for --tz device and for wall-clock times without --tz. Quiet
        hours are not applied.
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

    let parameters: JSONObject
    let from: Instant?
    let subjects: [ExpansionFlags.Subject]
    let deviceZone: Zone?
    let minRepeatSeconds: Int
    let raw: Bool

    init(_ flags: Flags) throws(UsageError) {
        try flags.expectNoPositional()
        (parameters, from) = try ExpansionFlags.parameters(flags)
        subjects = try ExpansionFlags.subjects(flags)
        let deviceZone = try flags["device-tz"].map { (text: String) throws(UsageError) in
            try Parse.zone(text, flag: "device-tz")
        }
        // A zone the flags name stands for the device's too.
        self.deviceZone = deviceZone ?? (subjects.count == 1 ? subjects[0].namedZone : nil)
        minRepeatSeconds = try flags.integer("min-repeat-seconds", in: 1...31_536_000)
        raw = flags.isSet("raw")
    }

    /// The fire dates the engine computes for `notification`, or its error reply.
    func fireDates(_ notification: JSONObject, now: Instant) throws(CLIFailure) -> ReplyResult {
        let deviceId = "chime-next"
        var payload = parameters
        payload["notification"] = .object(notification)
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
            if error.code == .timezoneRequired { failure.message += " (\(Self.missingZone))" }
            throw failure
        }
    }

    /// How to give a zone when the notification follows the device's.
    static let missingZone = "give --tz ZONE or --device-tz ZONE"

    func run(_ console: Console) async throws(CLIFailure) {
        Self.warn(subjects.flatMap(\.warnings), console)
        let now = wallClock()
        for (index, subject) in subjects.enumerated() {
            let object = try subject.object(now: from ?? now, deviceZone: deviceZone, missingZone: Self.missingZone)
            let result: ReplyResult
            do {
                result = try fireDates(object, now: now)
            } catch {
                throw error.labelled(subject.label)
            }
            if raw {
                console.exact(ExpansionFlags.raw(result.json, label: subject.label))
            } else if case .previewed(let dates, let calendarDates) = result {
                let zone = subject.namedZone ?? deviceZone
                console.out(
                    lines: ExpansionFlags.lines(
                        dates,
                        calendarDates: calendarDates,
                        zone: zone,
                        label: subject.label,
                        first: index == 0
                    )
                )
            }
        }
    }
}
