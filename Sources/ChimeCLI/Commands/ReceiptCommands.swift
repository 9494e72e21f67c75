import ChimeCore
import ChimeSupport

/// `chime inbox`: the deliveries waiting for the device's `ack`, following the cursor through every page.
struct InboxCommand: Command {
    static let name = "inbox"
    static let summary = "the device's unacknowledged deliveries (receipts)"
    static let synopsis = "chime inbox --device ID [--limit N] [--json] [options]"
    static let discussion = """
        Lists the deliveries waiting in the device's inbox for an ack, oldest first, following the
        cursor through every page (or up to --limit): the fireId to give chime ack, when it was sent
        (in the device's zone when it has one, and in UTC), whether it was late, and its title and
        body. A last line counts the deliveries ever dropped from the inbox to make room. --json
        prints each delivery exactly as it was published, one JSON object a line (the dropped count
        goes to standard error). The inbox is empty unless the device has receipts (chime device
        --receipts on). Exits 1 when a page's cursor repeats an earlier one, or past \(PageTrail.maxPages(.inbox)) pages.
        """
    static let specs: [Flags.Spec] =
        [
            ConnectionOptions.deviceSpec,
            .init("limit", env: false, "at most N deliveries (default: all)"),
            .init("json", value: false, env: false, "one JSON object a line, each delivery as published"),
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        ("what the device has not acknowledged", "chime inbox --device phone-1"),
        ("the fireIds, for a script", "chime inbox --device phone-1 --json | jq -r .fireId"),
    ]

    let request: DeviceRequest
    let limit: Int?
    let json: Bool

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        limit = try Parse.integer(flags, "limit", in: 1...100_000_000)
        json = flags.isSet("json")
    }

    func run(_ console: Console) async throws(CLIFailure) {
        let device = request.device
        let broker = try await Connection.open(request.connection)
        defer { broker.close() }
        let zone = json ? nil : try await broker.deviceZone(device)
        var deliveries: [JSONObject] = []
        var dropped = 0
        try await broker.follow(.inbox, device: device, [:], wanted: limit ?? Int.max) {
            (_, result) throws(CLIFailure) in
            guard case .inbox(let page) = result else { return (0, nil) }
            let items = page.deliveries.compactMap(\.objectValue)
            if json { console.exact(lines: items.map { JSON.object($0).text }) }
            deliveries += items
            dropped = page.dropped
            return (page.deliveries.count, page.cursor)
        }
        let droppedLine = "dropped \(dropped) (the inbox was full; the oldest left first)"
        if json {
            if dropped > 0 { console.err(droppedLine) }
            return
        }
        if deliveries.isEmpty {
            console.out("no deliveries in the inbox of \(device)")
        } else {
            console.out(lines: Self.table(deliveries, display: TimeDisplay(zone: zone)).lines)
        }
        if dropped > 0 { console.out(droppedLine) }
    }

    /// fireId, fired at, late, title and body.
    static func table(_ deliveries: [JSONObject], display: TimeDisplay) -> Table {
        var table = Table(["FIRE ID", "FIRED AT", "LATE", "BODY"])
        for d in deliveries {
            table.append([
                d["fireId"]?.stringValue ?? "?",
                (d["firedAt"]?.stringValue).map(display.both) ?? "?",
                d["late"] == true ? "yes" : "no",
                Table.truncated(WatchCommand.text(d), 40),
            ])
        }
        return table
    }
}

/// `chime ack`: acknowledge deliveries, as the device does once it has shown them.
struct AckCommand: Command {
    static let name = "ack"
    static let summary = "acknowledge deliveries by fireId, as the device would (receipts)"
    static let synopsis = "chime ack --device ID FIREID... [--badge N|+N|-N] [options]"
    static let discussion = """
        Acknowledges the deliveries with these fireIds (chime inbox shows them): they leave the inbox,
        and history records when. --badge changes the device's badge in the same step, only if at
        least one of them was new. Acknowledging twice, or a fireId the device does not have, is not
        an error: chime ack prints how many were new and lists the unknown ones, and exits 0.
        """
    static let specs: [Flags.Spec] =
        [
            ConnectionOptions.deviceSpec,
            .init("badge", env: false, "set the badge to N, or change it by +N / -N, if one was new"),
            DeviceRequest.rawSpec,
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        (
            "the app showed it: acknowledge and take one off the badge",
            "chime ack --device phone-1 med@2026-12-01T01:00:00Z --badge -1"
        ),
        (
            "everything in the inbox",
            "chime inbox --device phone-1 --json | jq -r .fireId | xargs -r -n 1000 chime ack --device phone-1"
        ),
    ]

    let request: DeviceRequest
    /// Each fireId once, in the order given.
    let fireIds: [String]
    let payload: JSONObject

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags, positional: true)
        var seen = Set<String>()
        fireIds = flags.positional.filter { seen.insert($0).inserted }
        guard !fireIds.isEmpty else {
            throw UsageError("say which deliveries: give one or more fireIds (chime inbox lists them)")
        }
        guard fireIds.count <= CommandDecoder.maxBatch else {
            throw UsageError("at most \(CommandDecoder.maxBatch) fireIds at once, got \(fireIds.count)")
        }
        if let long = fireIds.first(where: { $0.isEmpty || $0.count > CommandDecoder.maxFireIdLength }) {
            throw UsageError("a fireId is 1 to \(CommandDecoder.maxFireIdLength) characters, got \"\(long)\"")
        }
        var o: JSONObject = ["fireIds": .array(fireIds.map(JSON.string))]
        if let badge = flags["badge"] { o["badge"] = try Parse.badge(badge) }
        payload = o
    }

    func run(_ console: Console) async throws(CLIFailure) {
        try await request.send(.ack, payload, console) { (_, result) throws(CLIFailure) in
            guard case .acknowledged(let count, let unknown) = result else { return }
            console.out(lines: Self.lines(given: fireIds.count, acknowledged: count, unknown: unknown))
        }
    }

    /// `acknowledged 1, 1 already`, then `unknown 1: x` when some were unknown.
    static func lines(given: Int, acknowledged: Int, unknown: [String]) -> [String] {
        let already = given - acknowledged - unknown.count
        var lines = ["acknowledged \(acknowledged)" + (already > 0 ? ", \(already) already" : "")]
        if !unknown.isEmpty { lines.append("unknown \(unknown.count): \(unknown.joined(separator: ", "))") }
        return lines
    }
}

/// `chime history`: the device's recent deliveries and what became of each.
struct HistoryCommand: Command {
    static let name = "history"
    static let summary = "the device's recent deliveries: did each reach it, over MQTT and push"
    static let synopsis = "chime history --device ID [--since TIME] [--limit N] [--json | --raw] [options]"
    static let discussion = """
        Lists the device's recent deliveries, newest first: when each was sent (in the device's zone
        when it has one, and in UTC), the notification's id, when it was due, what became of it on
        MQTT (acknowledged: the broker took it; none: push only) and on push (accepted, pending,
        refused, unregistered, expired; "-": not pushed), its state (unacknowledged, acknowledged,
        expired, dropped or delivered), whether it was late, and when it was acknowledged ("-": not).
        chimed keeps the last --history-per-device (default \(EngineConfiguration.Receipts.defaultHistoryPerDevice)) deliveries of every device, unless it
        turned history off (chime device --history off), which this command then says. --json prints
        each entry as chimed returns it, with its fireId, one JSON object a line; --raw the reply's
        result as one JSON object.
        """
    static let specs: [Flags.Spec] =
        [
            ConnectionOptions.deviceSpec,
            .init("since", env: false, "only deliveries sent at or after this instant (2026-12-01T00:00Z)"),
            .init("limit", env: false, "at most N deliveries, 1 to 1000 (default 100)"),
            .init("json", value: false, env: false, "one JSON object a line, as chimed returns them"),
            DeviceRequest.rawSpec,
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        ("did the reminders reach the phone?", "chime history --device phone-1"),
        (
            "those not acknowledged since December 1st, as JSON lines",
            "chime history --device phone-1 --since 2026-12-01T00:00Z --json | jq 'select(.state != \"acknowledged\")'"
        ),
    ]

    let request: DeviceRequest
    let payload: JSONObject
    let json: Bool

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        var o = JSONObject()
        if let since = flags["since"] {
            o["since"] = .string(try Parse.instant(since, flag: "since").rfc3339(fractional: true))
        }
        if let limit = try Parse.integer(flags, "limit", in: 1...1000) { o["limit"] = .int(Int64(limit)) }
        payload = o
        json = flags.isSet("json")
        if json && request.raw { throw UsageError("give either --json or --raw, not both") }
    }

    func run(_ console: Console) async throws(CLIFailure) {
        let device = request.device
        let broker = try await Connection.open(request.connection)
        defer { broker.close() }
        let raw = try await broker.send(.history, device: device, payload)
        if request.raw {
            console.exact(JSON.object(raw).text)
            return
        }
        if json {
            // As chimed sent them.
            console.exact(lines: (raw["deliveries"]?.arrayValue ?? []).map(\.text))
            return
        }
        guard case .history(let rows) = try Connection.typed(.history, raw) else { return }
        let status = try await broker.deviceStatus(device)
        if !rows.isEmpty {
            console.out(lines: Self.table(rows, display: TimeDisplay(zone: status?.timeZone)).lines)
        }
        if status?.history == false {
            console.out(Self.keepsNone(device))
        } else if rows.isEmpty {
            console.out("no deliveries in the history of \(device)")
        }
    }

    /// What a device that keeps no history is told.
    static func keepsNone(_ device: String) -> String {
        "device \(device) keeps no delivery history (device --history off)"
    }

    /// fired at, id, due, MQTT, push, state, late, acknowledged at.
    static func table(_ rows: [ReplyResult.HistoryRow], display: TimeDisplay) -> Table {
        var table = Table(["FIRED AT", "ID", "DUE", "MQTT", "PUSH", "STATE", "LATE", "ACKNOWLEDGED AT"])
        for row in rows {
            table.append([
                display.both(row.firedAt),
                row.id,
                display.local(row.fireDate),
                row.mqtt.rawValue,
                row.pushOutcome?.rawValue ?? "-",
                row.state.rawValue,
                row.late ? "yes" : "no",
                row.acknowledgedAt.map(display.local) ?? "-",
            ])
        }
        return table
    }
}
