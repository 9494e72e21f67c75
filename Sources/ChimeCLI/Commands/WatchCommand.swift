import ChimeCore
import ChimeMQTT
import ChimeSupport
import Foundation

/// `chime watch`: follows deliveries as they are published, one line each, until Ctrl-C or SIGTERM.
struct WatchCommand: Command {
    static let name = "watch"
    static let summary = "follow a device's deliveries (or every device's) as they happen"
    static let synopsis = "chime watch (--device ID | --all) [--json] [--tz ZONE] [--ack] [--count N] [options]"
    static let discussion = """
        Subscribes to P/{device}/notifications (P/+/notifications with --all) and prints one line per
        delivery: when it was sent (in --tz, else the device's zone, and in UTC; with --all in UTC
        unless --tz), the device, the id, the
        occurrence number, the markers late, missed N, deferred and last (of a repeating one), the
        badge and the body. --json prints each delivery as published. --ack acknowledges each
        delivery after printing it, as a device with receipts does (a failed ack is reported on
        standard error, and watching goes on). Runs until Ctrl-C or SIGTERM, or until --count
        deliveries, then exits 0 (1 if an ack failed). A line on standard error says when the
        subscription is in place.
        """
    static let specs: [Flags.Spec] =
        [
            ConnectionOptions.deviceSpec,
            .init("all", value: false, env: false, "every device's deliveries"),
            .init("json", value: false, env: false, "print each delivery's JSON as published"),
            .init(
                "tz",
                env: false,
                "show times in this IANA zone (UTC: in UTC only); default: the device's zone, which chime asks "
                    + "chimed for, and UTC"
            ),
            .init("ack", value: false, env: false, "acknowledge each delivery after printing it, as a device would"),
            .init("count", env: false, "stop after N deliveries (default: run until Ctrl-C or SIGTERM)"),
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        ("one device", "chime watch --device phone-1"),
        ("everything, as JSON lines for jq", "chime watch --all --json | jq .alertBody"),
        (
            "play the device: take the next delivery, acknowledge it, exit",
            "chime watch --device phone-1 --ack --count 1"
        ),
    ]

    let connection: ConnectionOptions
    let filter: String
    /// The one device watched; nil with `--all`.
    let device: String?
    let json: Bool
    /// `--tz`: the zone to show times in; nil: the device's (UTC with `--all`).
    let zone: Zone?
    let ack: Bool
    let count: Int?

    init(_ flags: Flags) throws(UsageError) {
        try flags.expectNoPositional()
        connection = try ConnectionOptions(flags)
        if flags.isSet("all") {
            device = nil
            filter = connection.topics.notifications("+")
        } else {
            let device = try ConnectionOptions.device(flags)
            self.device = device
            filter = connection.topics.notifications(device)
        }
        json = flags.isSet("json")
        zone = try flags["tz"].map { (tz: String) throws(UsageError) in try Parse.zone(tz, flag: "tz") }
        ack = flags.isSet("ack")
        count = try Parse.integer(flags, "count", in: 1...1_000_000_000)
    }

    func run(_ console: Console) async throws(CLIFailure) {
        let broker = try await Connection.open(connection)
        let requester = broker.requester
        // Ctrl-C and SIGTERM end the stream of messages, and so the loop below.
        let signals = SignalHandlers { _ in requester.stop() }
        defer { withExtendedLifetime(signals) { broker.close() } }
        do {
            try await requester.subscribe(filter, qos: 1, timeout: connection.timeout)
        } catch {
            throw CLIFailure(.unreachable, "cannot subscribe to \(filter): \(error.message)")
        }
        console.err("watching \(filter) (Ctrl-C to stop)")
        let display = TimeDisplay(zone: json ? nil : await shownZone(broker, console))
        var seen = 0
        var failedAcks = 0
        for await message in requester.messages {
            // Replies to our own acks (on MQTT 3.1.1, P/{device}/replies) are not deliveries.
            guard let deviceId = deviceId(of: message.topic) else { continue }
            if json {
                console.exact(String(decoding: message.payload, as: UTF8.self))
            } else {
                console.out(line(message, display))
            }
            if ack, await !acknowledge(message, on: deviceId, broker, console) { failedAcks += 1 }
            seen += 1
            if let count, seen >= count { break }
        }
        if failedAcks > 0 {
            throw CLIFailure(.failed, "\(failedAcks) of \(seen) deliveries could not be acknowledged")
        }
    }

    /// The zone times are shown in: `--tz`, else the device's as chimed says (as `list` and
    /// `history` show them); UTC with `--all`, or when chimed does not say (a note on standard error).
    func shownZone(_ broker: Connection, _ console: Console) async -> Zone? {
        if let zone { return zone }
        guard let device else { return nil }
        do throws(CLIFailure) {
            return try await broker.deviceZone(device)
        } catch {
            console.err("chime watch: times in UTC: cannot read the zone of \(device) (\(error.message))")
            return nil
        }
    }

    /// The device a message on the watched filter is for; nil for a message on another topic.
    func deviceId(of topic: String) -> String? {
        if let device { return topic == filter ? device : nil }
        let prefix = connection.topics.prefix + "/"
        guard topic.hasPrefix(prefix) else { return nil }
        let levels = topic.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 2, levels[1] == "notifications", !levels[0].isEmpty else { return nil }
        return String(levels[0])
    }

    /// Sends `ack` for the delivery's fireId; reports a failure on standard error.
    /// - Returns: whether chimed answered the ack.
    func acknowledge(
        _ message: MQTTMessage,
        on deviceId: String,
        _ broker: Connection,
        _ console: Console
    ) async
        -> Bool
    {
        guard case .object(let d)? = try? JSON(parsing: message.payload), let fireId = d["fireId"]?.stringValue else {
            console.err("chime: cannot acknowledge a delivery without a fireId on \(message.topic)")
            return false
        }
        do throws(CLIFailure) {
            _ = try await broker.send(.ack, device: deviceId, ["fireIds": [.string(fireId)]])
            return true
        } catch {
            console.err("chime: cannot acknowledge \(fireId): \(error.message)")
            return false
        }
    }

    /// `2026-12-01 18:00:03 CST (10:00:03Z)  phone-1  med  #3  late  Take it`: one line, whatever the
    /// delivery holds (control characters and line breaks escaped, ``TerminalText``).
    func line(_ message: MQTTMessage, _ display: TimeDisplay) -> String {
        TerminalText.escaped(Self.text(of: message, display))
    }

    static func text(of message: MQTTMessage, _ display: TimeDisplay) -> String {
        guard case .object(let d)? = try? JSON(parsing: message.payload) else {
            return "\(message.topic): \(String(decoding: message.payload, as: UTF8.self))"
        }
        var when = d["firedAt"]?.stringValue ?? d["fireDate"]?.stringValue ?? "?"
        if case .instant(let instant)? = DateTimeValue(iso8601: when) { when = display.both(instant) }
        var parts = [when, d["deviceId"]?.stringValue ?? "?", d["id"]?.stringValue ?? "?"]
        if let occurrence = d["occurrence"] { parts.append("#\(occurrence.plainText)") }
        var markers: [String] = []
        if d["late"] == true { markers.append("late") }
        if case .int(let missed)? = d["missed"], missed > 0 { markers.append("missed \(missed)") }
        if d["deferred"] == true { markers.append("deferred") }
        if d["last"] == true, case .int(let n)? = d["occurrence"], n > 1 { markers.append("last") }
        if !markers.isEmpty { parts.append("[\(markers.joined(separator: ", "))]") }
        if let badge = d["badge"] { parts.append("badge \(badge.plainText)") }
        let text = Self.text(d)
        if !text.isEmpty { parts.append(text) }
        return parts.joined(separator: "  ")
    }

    /// A delivery's text: `Title: Body`, or whichever of the two it has.
    static func text(_ d: JSONObject) -> String {
        let body = d["alertBody"]?.stringValue ?? ""
        guard let title = d["alertTitle"]?.stringValue else { return body }
        return body.isEmpty ? title : "\(title): \(body)"
    }
}
