import ChimeCore
import ChimeMQTT
import ChimeSupport
import Foundation

/// `chime watch`: follows deliveries as they are published, one line each, until Ctrl-C or SIGTERM.
struct WatchCommand: Command {
    static let name = "watch"
    static let summary = "follow a device's deliveries (or every device's) as they happen"
    static let synopsis = "chime watch (--device ID | --all) [--json] [--tz ZONE] [options]"
    static let discussion = """
        Subscribes to P/{device}/notifications (P/+/notifications with --all) and prints one line per
        delivery: when it was sent (in --tz, default the local zone), the device, the id, the
        occurrence number, the markers late, missed N, deferred and last (of a repeating one), the
        badge and the body. --json prints each delivery as published. Runs until Ctrl-C or SIGTERM,
        then exits 0. A line on standard error says when the subscription is in place.
        """
    static let specs: [Flags.Spec] =
        [
            ConnectionOptions.deviceSpec,
            .init("all", value: false, env: false, "every device's deliveries"),
            .init("json", value: false, env: false, "print each delivery's JSON as published"),
            .init("tz", env: false, "show times in this IANA zone (default: the local zone)"),
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        ("one device", "chime watch --device phone-1"),
        ("everything, as JSON lines for jq", "chime watch --all --json | jq .alertBody"),
    ]

    let connection: ConnectionOptions
    let filter: String
    let json: Bool
    let display: TimeDisplay

    init(_ flags: Flags) throws(UsageError) {
        try flags.expectNoPositional()
        connection = try ConnectionOptions(flags)
        if flags.isSet("all") {
            filter = connection.topics.notifications("+")
        } else {
            filter = connection.topics.notifications(try ConnectionOptions.device(flags))
        }
        json = flags.isSet("json")
        if let tz = flags["tz"] {
            display = TimeDisplay(zone: try Parse.zone(tz, flag: "tz"))
        } else {
            display = TimeDisplay(zone: Zone(identifier: TimeZone.current.identifier) ?? .utc)
        }
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
        for await message in requester.messages {
            if json {
                console.out(String(decoding: message.payload, as: UTF8.self))
            } else {
                console.out(line(message))
            }
        }
    }

    /// `2026-12-01 18:00:03 CST  phone-1  med  #3  late  Take it`.
    func line(_ message: MQTTMessage) -> String {
        guard case .object(let d)? = try? JSON(parsing: message.payload) else {
            return "\(message.topic): \(String(decoding: message.payload, as: UTF8.self))"
        }
        var when = d["firedAt"]?.stringValue ?? d["fireDate"]?.stringValue ?? "?"
        if case .instant(let instant)? = DateTimeValue(iso8601: when) { when = display.local(instant) }
        var parts = [when, d["deviceId"]?.stringValue ?? "?", d["id"]?.stringValue ?? "?"]
        if let occurrence = d["occurrence"] { parts.append("#\(occurrence.plainText)") }
        var markers: [String] = []
        if d["late"] == true { markers.append("late") }
        if case .int(let missed)? = d["missed"], missed > 0 { markers.append("missed \(missed)") }
        if d["deferred"] == true { markers.append("deferred") }
        if d["last"] == true, case .int(let n)? = d["occurrence"], n > 1 { markers.append("last") }
        if !markers.isEmpty { parts.append("[\(markers.joined(separator: ", "))]") }
        if let badge = d["badge"] { parts.append("badge \(badge.plainText)") }
        var text = d["alertBody"]?.stringValue ?? ""
        if let title = d["alertTitle"]?.stringValue { text = text.isEmpty ? title : "\(title): \(text)" }
        if !text.isEmpty { parts.append(text) }
        return parts.joined(separator: "  ")
    }
}
