import ChimeCore
import ChimeSupport

/// `chime snooze`: deliver a notification's content once more, later.
struct SnoozeCommand: Command {
    static let name = "snooze"
    static let summary = "deliver a notification once more after a while"
    static let synopsis = "chime snooze --device ID --id ID --in DURATION [options]"
    static let discussion = """
        Delivers the notification's content once more after --in, as the one-shot "ID~snooze"
        (replacing an earlier snooze of it). The original schedule is unchanged.
        """
    static let specs: [Flags.Spec] =
        [
            ConnectionOptions.deviceSpec,
            .init("id", env: false, "the notification to snooze"),
            .init("in", env: false, "how long from now (10m)"),
            DeviceRequest.rawSpec,
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        ("remind me again in 10 minutes", "chime snooze --device phone-1 --id med --in 10m")
    ]

    let request: DeviceRequest
    let payload: JSONObject

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        guard let id = flags["id"], !id.isEmpty else { throw UsageError("--id is required") }
        guard let after = flags["in"] else { throw UsageError("--in is required (such as 10m)") }
        payload = ["id": .string(id), "after": Parse.secondsJSON(try Parse.duration(after, flag: "in"))]
    }

    func run(_ console: Console) async throws(CLIFailure) {
        try await request.send(.snooze, payload, console) { (broker, result) throws(CLIFailure) in
            guard case .snoozed(let snoozed) = result else { return }
            let zone = try await broker.deviceZone(request.device)
            let next = snoozed.nextFireDate.map(TimeDisplay(zone: zone).both) ?? "?"
            console.out("snoozed \(snoozed.id) until \(next)")
        }
    }
}

/// `chime device`: show the device, or set its zone, badge, quiet hours, receipts or history.
struct DeviceCommand: Command {
    static let name = "device"
    static let summary = "show the device, or set its time zone, badge, quiet hours, receipts and push"
    /// Four lines, the others aligned under the first option after `usage: chime device `.
    static let synopsis =
        "chime device --device ID [--tz ZONE] [--badge N] [--quiet HH:MM-HH:MM | --no-quiet]\n"
        + "                    [--receipts on|off] [--history on|off] [--apns-token HEX --apns-topic ID]\n"
        + "                    [--fcm-token TOKEN] [--webpush JSON] [--remove-push ID,... | --no-push]\n"
        + "                    [options]"
    static let discussion = """
        Without settings, shows the device. With them, sets what is given and shows the result.
        Changing the zone re-computes every notification that follows the device's zone. A delivery due
        inside the quiet hours (in the device's zone) is held until they end. With receipts, each
        delivery waits in the device's inbox until the device acknowledges it (chime inbox, chime ack);
        turning them off empties the inbox. History keeps the recent deliveries for chime history, on
        for every device unless turned off, which forgets them (receipts imply it). Shown as they apply
        now: a device that did not choose has the worker's --receipts and --history. The push options
        add a registration (APNs, FCM, Web Push) so that deliveries also reach the device while its
        app is closed; the device shows each one by id, without its secrets.
        """
    static let specs: [Flags.Spec] =
        [
            ConnectionOptions.deviceSpec,
            .init("tz", env: false, "set the device's IANA zone (Asia/Shanghai)"),
            .init("badge", env: false, "set the badge counter to N"),
            .init("quiet", env: false, "set quiet hours START-END in the device's zone (22:00-07:00)"),
            .init("no-quiet", value: false, env: false, "remove the quiet hours"),
            .init("receipts", env: false, "on: keep each delivery in the inbox until acknowledged; off: not"),
            .init("history", env: false, "on (the default): keep recent deliveries for chime history; off: forget"),
            .init("apns-token", env: false, "add an APNs registration: the device token in hex"),
            .init("apns-topic", env: false, "its app's bundle id (with --apns-token)"),
            .init("apns-sandbox", value: false, env: false, "the app is a development build (with --apns-token)"),
            .init("fcm-token", env: false, "add an FCM registration: the app's registration token"),
            .init("webpush", env: false, "add a Web Push registration: the browser's PushSubscription JSON"),
            .init("remove-push", env: false, "remove the registrations with these ids (comma-separated)"),
            .init("no-push", value: false, env: false, "remove every push registration"),
            DeviceRequest.rawSpec,
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        ("show it", "chime device --device phone-1"),
        (
            "a phone in Shanghai, quiet at night, badge cleared",
            "chime device --device phone-1 --tz Asia/Shanghai --quiet 22:00-07:00 --badge 0"
        ),
        ("no more quiet hours", "chime device --device phone-1 --no-quiet"),
        ("deliveries wait in its inbox until it acknowledges them", "chime device --device phone-1 --receipts on"),
        (
            "push to the phone while its app is closed",
            "chime device --device phone-1 --apns-token 0a1b…(64 hex digits) --apns-topic com.example.pills"
        ),
    ]

    let request: DeviceRequest
    let payload: JSONObject

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        var o = JSONObject()
        if let tz = flags["tz"] { o["timeZone"] = .string(try Parse.zone(tz, flag: "tz").identifier) }
        if let badge = try Parse.integer(flags, "badge", in: 0...1_000_000) { o["badge"] = .int(Int64(badge)) }
        switch (flags["quiet"], flags.isSet("no-quiet")) {
        case (let quiet?, false): o["quietHours"] = try Parse.quietHours(quiet)
        case (nil, true): o["quietHours"] = .null
        case (.some, true): throw UsageError("give either --quiet or --no-quiet, not both")
        case (nil, false): break
        }
        for (flag, key) in [("receipts", "receipts"), ("history", "history")] {
            if let value = flags[flag] { o[key] = .bool(try Parse.onOff(value, flag: flag)) }
        }
        if let change = try Self.pushChange(flags) { o[change.key] = change.value }
        payload = o
    }

    func run(_ console: Console) async throws(CLIFailure) {
        try await request.send(.device, payload, console) { (_, result) throws(CLIFailure) in
            guard case .device(let status) = result else { return }
            console.out(lines: Self.lines(status))
        }
    }

    /// The `addPush`, `removePush` or `push` member the push options make.
    static func pushChange(_ flags: Flags) throws(UsageError) -> (key: String, value: JSON)? {
        var added: [JSON] = []
        if let token = flags["apns-token"] {
            guard let topic = flags["apns-topic"] else { throw UsageError("--apns-token needs --apns-topic") }
            let environment = flags.isSet("apns-sandbox") ? "sandbox" : "production"
            added.append(
                ["apns": ["token": .string(token), "topic": .string(topic), "environment": .string(environment)]]
            )
        } else if flags["apns-topic"] != nil || flags.isSet("apns-sandbox") {
            throw UsageError("--apns-topic and --apns-sandbox go with --apns-token")
        }
        if let token = flags["fcm-token"] { added.append(["fcm": ["token": .string(token)]]) }
        if let text = flags["webpush"] {
            guard case .object(let subscription)? = try? JSON(parsing: text) else {
                throw UsageError("--webpush: expected the PushSubscription's JSON ({\"endpoint\": ..., \"keys\": ...})")
            }
            added.append(["webpush": .object(subscription)])
        }
        let removed = flags["remove-push"].map { $0.split(separator: ",").map { JSON.string(String($0)) } }
        switch (added.isEmpty, removed, flags.isSet("no-push")) {
        case (true, nil, false): return nil
        case (false, nil, false): return ("addPush", .array(added))
        case (true, let ids?, false): return ("removePush", .array(ids))
        case (true, nil, true): return ("push", .array([]))
        default: throw UsageError("add registrations, --remove-push or --no-push: one of them at a time")
        }
    }

    /// The device as a two-column table.
    static func lines(_ status: ReplyResult.DeviceStatus) -> [String] {
        let quiet = status.quietHours.map { "\($0.start)-\($0.end)" } ?? "none"
        var table = Table(["device", status.deviceId])
        table.append(["time zone", status.timeZone?.identifier ?? "none"])
        table.append(["badge", String(status.badge)])
        table.append(["quiet hours", quiet])
        table.append(["pending", String(status.pending)])
        table.append(["receipts", status.receipts ? "on" : "off"])
        table.append(["history", status.history ? "on" : "off"])
        for registration in status.push {
            let fields = ["id", "token", "topic", "environment", "endpoint"].compactMap {
                registration[$0]?.stringValue
            }
            table.append(["push", fields.joined(separator: " ")])
        }
        return table.lines
    }
}
