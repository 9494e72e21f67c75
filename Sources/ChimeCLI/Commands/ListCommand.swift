import ChimeCore
import ChimeSupport

/// `chime list`: the device's notifications as a table, following the cursor through every page.
struct ListCommand: Command {
    static let name = "list"
    static let summary = "list the device's notifications"
    static let synopsis = "chime list --device ID [--tag KEY=VALUE...] [--limit N] [--json] [options]"
    static let discussion = """
        Lists the device's notifications ordered by id, following the cursor through all pages (or up to
        --limit). The next delivery is shown in the device's zone when it has one, and in UTC; "-" means
        paused or finished. --json prints each notification as chimed returns it, one JSON object a line.
        """
    static let specs: [Flags.Spec] =
        [
            ConnectionOptions.deviceSpec,
            .init("tag", env: false, "only notifications whose userInfo has key=value (key:=json); repeatable"),
            .init("limit", env: false, "at most N notifications (default: all)"),
            .init("json", value: false, env: false, "one JSON object a line, as chimed returns them"),
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        ("everything", "chime list --device phone-1"),
        ("those tagged team=core, as JSON lines", "chime list --device phone-1 --tag team=core --json"),
    ]

    let request: DeviceRequest
    let match: JSONObject?
    let limit: Int?
    let json: Bool

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        match = try Parse.keyValues(flags.all("tag"), flag: "tag")
        limit = try Parse.integer(flags, "limit", in: 1...100_000_000)
        json = flags.isSet("json")
    }

    func run(_ console: Console) async throws(CLIFailure) {
        let device = request.device
        let broker = try await Connection.open(request.connection)
        defer { broker.close() }
        let zone = json ? nil : try await broker.deviceZone(device)
        let wanted = limit ?? Int.max
        var rows: [JSONObject] = []
        var count = 0
        var cursor: String?
        repeat {
            var request: JSONObject = ["limit": .int(Int64(min(1000, wanted - count)))]
            if let match { request["match"] = ["userInfo": .object(match)] }
            if let cursor { request["cursor"] = .string(cursor) }
            let page = try await broker.send(.list, device: device, request)
            let items = (page["notifications"]?.arrayValue ?? []).compactMap(\.objectValue)
            count += items.count
            if json {
                console.out(lines: items.map { JSON.object($0).text })
            } else {
                rows += items
            }
            cursor = page["cursor"]?.stringValue
        } while cursor != nil && count < wanted
        guard !json else { return }
        guard !rows.isEmpty else {
            console.out(match == nil ? "no notifications on \(device)" : "no notifications on \(device) match")
            return
        }
        console.out(lines: Self.table(rows, zone: zone).lines)
    }

    /// id, next delivery, repeat, enabled, body.
    static func table(_ rows: [JSONObject], zone deviceZone: Zone?) -> Table {
        var table = Table(["ID", "NEXT DELIVERY", "REPEAT", "ON", "BODY"])
        for row in rows {
            let ownZone = row["timeZone"]?.stringValue.flatMap(Zone.init(identifier:))
            let display = TimeDisplay(zone: deviceZone ?? ownZone)
            let next = row["nextFireDate"]?.stringValue.map(display.both) ?? "-"
            table.append([
                row["id"]?.stringValue ?? "?", next, repeatText(row), row["enabled"] == false ? "no" : "yes",
                Table.truncated(bodyText(row), 40),
            ])
        }
        return table
    }

    static func repeatText(_ row: JSONObject) -> String {
        var text: String
        if let rule = row["rrule"]?.stringValue {
            text = Table.truncated(rule, 32)
        } else if let unit = row["repeatInterval"]?.stringValue {
            text = unit
        } else {
            return "once"
        }
        if case .int(let count)? = row["count"] { text += " x\(count)" }
        if let until = row["until"]?.stringValue { text += " until \(until.prefix(10))" }
        return text
    }

    static func bodyText(_ row: JSONObject) -> String {
        if let body = row["alertBody"]?.stringValue { return body }
        if let bodies = row["alertBodies"]?.arrayValue, let first = bodies.first?.stringValue {
            return bodies.count > 1 ? "\(first) (+\(bodies.count - 1) more)" : first
        }
        return row["alertTitle"]?.stringValue ?? ""
    }
}
