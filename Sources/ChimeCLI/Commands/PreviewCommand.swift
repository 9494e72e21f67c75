import ChimeCore
import ChimeSupport

/// The flags `preview` and `next` add to the notification flags, and what both expand.
enum ExpansionFlags {
    static let specs: [Flags.Spec] = [
        .init("count", env: false, "how many deliveries to show, 1 to 1000 (default 10)"),
        .init("from", env: false, "start from this instant instead of now (2026-12-01T00:00Z)"),
        .init(
            "json",
            env: false,
            "take the notification from this file (- for standard input): one notification object, or a batch "
                + "{\"notifications\": [...]} whose notifications are each shown under their id"
        ),
        .init("raw", value: false, env: false, "print the result as JSON"),
    ]

    /// One notification to expand: the one the flags describe, or one of a `--json` file's,
    /// labelled when the file is a batch.
    enum Subject: Sendable {
        case flags(NotificationFlags)
        case file(label: String?, JSONObject)

        var label: String? {
            if case .file(let label, _) = self { return label }
            return nil
        }

        var namedZone: Zone? {
            switch self {
            case .flags(let notification): return notification.namedZone
            case .file(_, let object): return NotificationFlags.namedZone(of: object)
            }
        }

        /// What to say on standard error before expanding it (`--every weekday`).
        var warnings: [String] {
            if case .flags(let notification) = self { return notification.warnings }
            return []
        }

        var needsDeviceZone: Bool {
            if case .flags(let notification) = self { return notification.needsDeviceZone }
            return false
        }

        /// The notification object, completed for `now` (``NotificationFlags/payload(now:deviceZone:missingZone:)``).
        func object(now: Instant, deviceZone: Zone?, missingZone: String) throws(CLIFailure) -> JSONObject {
            switch self {
            case .flags(let notification):
                return try notification.payload(now: now, deviceZone: deviceZone, missingZone: missingZone)
            case .file(_, let object):
                return object
            }
        }
    }

    /// `count` and `from` of a preview command, and `from` as an instant.
    static func parameters(_ flags: Flags) throws(UsageError) -> (JSONObject, from: Instant?) {
        var o: JSONObject = ["count": .int(Int64(try Parse.integer(flags, "count", in: 1...1000) ?? 10))]
        let from = try flags["from"].map { (text: String) throws(UsageError) in try Parse.instant(text, flag: "from") }
        if let from { o["from"] = .string(from.rfc3339()) }
        return (o, from)
    }

    /// The notification of the flags, or those of `--json`: the file's object, or each of a
    /// schedule batch's `notifications` (its `replace` stores nothing here).
    static func subjects(_ flags: Flags) throws(UsageError) -> [Subject] {
        guard let file = flags["json"] else { return [.flags(try NotificationFlags(flags, countIsTimes: false))] }
        guard !NotificationFlags.anyGiven(flags, except: ["count"]) else {
            throw UsageError("--json takes the notification from the file: give no notification flags with it")
        }
        let object = try Parse.jsonFile(file, flag: "json")
        guard let batch = object["notifications"] else { return [.file(label: nil, object)] }
        guard case .array(let items) = batch, !items.isEmpty else {
            throw UsageError("--json: \"notifications\" must be a non-empty array of notification objects")
        }
        var subjects: [Subject] = []
        for (index, item) in items.enumerated() {
            guard case .object(let notification) = item else {
                throw UsageError(
                    "--json: notifications[\(index)] is \(item.typeDescription), not a notification object"
                )
            }
            subjects.append(.file(label: notification["id"]?.stringValue ?? "notifications[\(index)]", notification))
        }
        return subjects
    }

    /// The instants as a table: number, the time in `zone` with its weekday, and UTC, then each
    /// occurrence's date in the rule's own calendar when it has one (`RSCALE=CHINESE`: a `CHINESE`
    /// column, `8-15`); under `label` (and a blank line unless `first`) when the file was a batch.
    static func lines(
        _ dates: [Instant],
        calendarDates: [String]? = nil,
        zone: Zone?,
        label: String? = nil,
        first: Bool = true
    ) -> [String] {
        let display = TimeDisplay(zone: zone)
        var header = display.zone.map { ["#", $0.identifier, "UTC"] } ?? ["#", "UTC"]
        if calendarDates != nil { header.append("CHINESE") }
        var table = Table(header)
        for (index, instant) in dates.enumerated() {
            let utc = display.utc(instant)
            var row =
                display.zone == nil
                ? ["\(index + 1)", TimeDisplay.weekday(Zone.utc.localDateTime(at: instant)) + " " + utc]
                : ["\(index + 1)", display.localWithWeekday(instant), utc]
            if let calendarDates { row.append(index < calendarDates.count ? calendarDates[index] : "") }
            table.append(row)
        }
        let body = dates.isEmpty ? ["no deliveries"] : table.lines
        guard let label else { return body }
        return (first ? [] : [""]) + ["\(label):"] + body
    }

    /// A result as `--raw` prints it: as chimed sent it, with the notification's label when the
    /// file was a batch.
    static func raw(_ result: JSONObject, label: String?) -> String {
        guard let label else { return JSON.object(result).text }
        var o: JSONObject = ["id": .string(label)]
        for (key, value) in result { o[key] = value }
        return JSON.object(o).text
    }
}

/// `chime preview`: asks chimed when a stored notification, or one described by flags, would fire.
struct PreviewCommand: Command {
    static let name = "preview"
    static let summary = "ask chimed when a notification (stored, or described by flags) would fire"
    static let synopsis =
        "chime preview --device ID (--id ID | schedule flags | --json FILE) [--count N] [--from TIME]"
    static let discussion = """
        Asks chimed for the next delivery times of the stored notification --id, or of the notification
        the schedule flags describe, or of each notification of --json FILE (a notification object or a
        schedule batch); nothing is stored. Times are shown in --tz, else in the device's zone, and in
        UTC. Quiet hours are not applied. For an answer without a broker, see `chime next`.
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
        ("each notification of a batch file, before scheduling it", "chime preview --device phone-1 --json batch.json"),
    ]

    let request: DeviceRequest
    let parameters: JSONObject
    let from: Instant?
    /// `--id` alone: the stored notification; else `subjects`.
    let stored: String?
    let subjects: [ExpansionFlags.Subject]

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        (parameters, from) = try ExpansionFlags.parameters(flags)
        if let id = flags["id"], flags["json"] == nil, !NotificationFlags.anyGiven(flags, except: ["id", "count"]) {
            (stored, subjects) = (id, [])
        } else {
            (stored, subjects) = (nil, try ExpansionFlags.subjects(flags))
        }
    }

    func run(_ console: Console) async throws(CLIFailure) {
        let device = request.device
        Self.warn(subjects.flatMap(\.warnings), console)
        let broker = try await Connection.open(request.connection)
        defer { broker.close() }
        let showsDeviceZone = !request.raw && (stored != nil || subjects.contains { $0.namedZone == nil })
        let needed = subjects.contains(where: \.needsDeviceZone)
        let deviceZone = needed || showsDeviceZone ? try await broker.deviceZone(device) : nil
        if let stored {
            var payload = parameters
            payload["id"] = .string(stored)
            try show(try await broker.send(.preview, device: device, payload), label: nil, zone: deviceZone, console)
            return
        }
        for (index, subject) in subjects.enumerated() {
            var payload = parameters
            payload["notification"] = .object(
                try subject.object(
                    now: from ?? wallClock(),
                    deviceZone: deviceZone,
                    missingZone: NotificationFlags.missingZone(device)
                )
            )
            let result: JSONObject
            do {
                result = try await broker.send(.preview, device: device, payload)
            } catch {
                throw error.labelled(subject.label)
            }
            let zone = subject.namedZone ?? deviceZone
            try show(result, label: subject.label, zone: zone, first: index == 0, console)
        }
    }

    /// One result: as chimed sent it with `--raw`, else as a table.
    func show(
        _ result: JSONObject,
        label: String?,
        zone: Zone?,
        first: Bool = true,
        _ console: Console
    ) throws(CLIFailure) {
        if request.raw {
            console.exact(ExpansionFlags.raw(result, label: label))
        } else if case .previewed(let dates, let calendarDates) = try Connection.typed(.preview, result) {
            console.out(
                lines: ExpansionFlags.lines(
                    dates,
                    calendarDates: calendarDates,
                    zone: zone,
                    label: label,
                    first: first
                )
            )
        }
    }
}
