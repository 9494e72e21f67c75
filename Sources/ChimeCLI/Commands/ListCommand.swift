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
        Exits 1 when a page's cursor repeats an earlier one, or past \(PageTrail.maxPages(.list)) pages: the pages would
        never end.
        """
    static let specs: [Flags.Spec] =
        [
            ConnectionOptions.deviceSpec,
            .init("tag", env: false, repeatable: true, "only notifications whose userInfo has key=value (key:=json)"),
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
        var rows: [ListedNotification] = []
        var request = JSONObject()
        if let match { request["match"] = ["userInfo": .object(match)] }
        try await broker.follow(.list, device: device, request, wanted: limit ?? Int.max) {
            (raw, result) throws(CLIFailure) in
            guard case .listed(let page) = result else { return (0, nil) }
            if json {
                // As chimed sent them.
                let items = (raw["notifications"]?.arrayValue ?? []).compactMap(\.objectValue)
                console.exact(lines: items.map { JSON.object($0).text })
            } else {
                rows += page.notifications
            }
            return (page.notifications.count, page.cursor)
        }
        guard !json else { return }
        guard !rows.isEmpty else {
            console.out(match == nil ? "no notifications on \(device)" : "no notifications on \(device) match")
            return
        }
        console.out(lines: Self.table(rows, zone: zone).lines)
    }

    /// The table's columns.
    enum Column: CaseIterable {
        case id, nextDelivery, repeats, on, body
    }

    /// Which column of the table shows a notification field; nil for those only `--json` shows.
    ///
    /// An exhaustive switch, so that a new ``NotificationField`` is placed or left out on purpose;
    /// the CLI's tests check that each field placed here changes its column.
    static func column(for field: NotificationField) -> Column? {
        switch field {
        case .id: return .id
        // The next delivery is shown in the notification's zone when the device has none.
        case .timeZone: return .nextDelivery
        case .repeatInterval, .rrule, .count, .until: return .repeats
        // As listed, `enabled` is the current state.
        case .enabled: return .on
        case .alertTitle, .alertBody, .alertBodies: return .body
        case .fireDate, .after, .alignTo, .exdates, .leadTime, .alertAction, .hasAction, .soundName, .category,
            .threadId, .interruptionLevel, .badge, .userInfo, .expiresAfter, .misfire, .ignoreQuietHours,
            .keepAfterFiring, .channels:
            return nil
        }
    }

    /// id, next delivery, repeat, enabled, body.
    static func table(_ rows: [ListedNotification], zone deviceZone: Zone?) -> Table {
        var table = Table(["ID", "NEXT DELIVERY", "REPEAT", "ON", "BODY"])
        for row in rows { table.append(Column.allCases.map { cell($0, row, deviceZone: deviceZone) }) }
        return table
    }

    static func cell(_ column: Column, _ row: ListedNotification, deviceZone: Zone?) -> String {
        let n = row.notification
        switch column {
        case .id: return n.id
        case .nextDelivery:
            var ownZone: Zone?
            if case .named(let zone)? = n.timeZone { ownZone = zone }
            return row.nextFireDate.map(TimeDisplay(zone: deviceZone ?? ownZone).both) ?? "-"
        case .repeats: return repeatText(n)
        case .on: return row.enabled ? "yes" : "no"
        case .body: return Table.truncated(bodyText(n), 40)
        }
    }

    static func repeatText(_ n: ResolvedNotification) -> String {
        var text: String
        if let rule = n.rrule {
            text = Table.truncated(rule.description, 32)
        } else if let unit = n.repeatInterval {
            text = unit.rawValue
        } else {
            return "once"
        }
        if let count = n.count { text += " x\(count)" }
        if let until = n.until { text += " until \(until.description.prefix(10))" }
        return text
    }

    static func bodyText(_ n: ResolvedNotification) -> String {
        if let body = n.alertBody { return body }
        if let bodies = n.alertBodies, let first = bodies.first {
            return bodies.count > 1 ? "\(first) (+\(bodies.count - 1) more)" : first
        }
        return n.alertTitle ?? ""
    }
}
