import ChimeProtocol
import ChimeTime

extension ConsolePages {
    /// The parts of a device's page that each come from a command of their own (`list`, `inbox`,
    /// `history`), so that one may be unavailable while the others show.
    public enum DeviceSection: String, Sendable, Hashable, CaseIterable {
        case notifications
        case inbox
        case history
    }

    /// One device: its settings, every notification with its state, its rule in words and its next
    /// occurrences, its inbox, and its delivery history with each outcome ("did it reach the device,
    /// and when"). Times are in the device's zone, with UTC on hover and in the markup.
    ///
    /// Operators get a form around the notifications (a checkbox each, then pause, resume, snooze or
    /// cancel) that posts to ``ConsolePaths/deviceAction(_:)`` (`action`, `ids`, `minutes`, `csrf`),
    /// whose answer is ``confirm(action:device:ids:snoozeMinutes:signedIn:)``; viewers get none.
    ///
    /// - Parameters:
    ///   - id: the device id.
    ///   - device: the `device` command's result (PROTOCOL.md section 3.7).
    ///   - notifications: the `list` rows (all of them, or those `tagFilter` selects).
    ///   - previews: the next fire times (`preview`'s `fireDates`) by notification id.
    ///   - inbox: the `inbox` deliveries.
    ///   - history: the `history` rows, newest first.
    ///   - tagFilter: the `userInfo` key and value the notifications were selected by.
    ///   - unavailable: the sections whose command failed, each with what happened and what to do:
    ///     shown as an error in the section's place, never as its empty state (which would say
    ///     something false, such as "No notifications").
    public static func device(
        id: String,
        device: JSONObject,
        notifications: [JSONObject],
        previews: [String: [String]] = [:],
        inbox: [JSONObject],
        history: [JSONObject],
        tagFilter: (key: String, value: String)? = nil,
        unavailable: [DeviceSection: String] = [:],
        signedIn: SignedIn
    ) -> String {
        let zoneName = device["timeZone"]?.stringValue
        let zone = ConsoleTime.zone(named: zoneName)
        let notificationsHTML =
            unavailable[.notifications].map { unavailableSection("notifications", "Notifications", $0) }
            ?? notificationsSection(id, notifications, previews, zone, deviceZone: zoneName, tagFilter, signedIn)
        let inboxHTML =
            unavailable[.inbox].map { unavailableSection("inbox", "Inbox", $0) }
            ?? inboxSection(inbox, receipts: device["receipts"] == .bool(true), zone)
        let historyHTML =
            unavailable[.history].map { unavailableSection("history", "Delivery history", $0) }
            ?? historySection(history, keepsHistory: device["history"] != .bool(false), zone)
        let main: HTML = """
            <h1>Device <code>\(id)</code></h1>
            \(deviceSettings(device, zoneName: zoneName, zone: zone))\
            \(notificationsHTML)\(inboxHTML)\(historyHTML)
            """
        return document(title: "Device \(id)", section: nil, signedIn: signedIn, main: main)
    }

    /// A section whose command failed: its heading, without a count, and `problem` as an alert.
    static func unavailableSection(_ id: String, _ title: String, _ problem: String) -> HTML {
        "<h2 id=\"\(id)-heading\">\(title)</h2>\n" + alert(problem)
    }

    /// The settings as a description list.
    static func deviceSettings(_ device: JSONObject, zoneName: String?, zone: Zone?) -> HTML {
        func onOff(_ key: String, _ on: String, _ off: String) -> String {
            switch device[key] {
            case .bool(true)?: return on
            case .bool(false)?: return off
            default: return "unknown"
            }
        }
        var zoneText = zoneName ?? "none set: notifications that follow the device's zone cannot be scheduled"
        if let zoneName, zone == nil {
            zoneText = "\(zoneName) (not in this console's zone database: times below are in UTC)"
        }
        var quiet = "none"
        if case .object(let hours)? = device["quietHours"], let start = hours["start"]?.stringValue,
            let end = hours["end"]?.stringValue
        {
            quiet = "\(start) to \(end): deliveries due then are held and sent once when they end"
        }
        var push = "none"
        if case .array(let registrations)? = device["push"], !registrations.isEmpty {
            push = registrations.map { r -> String in
                let o = r.objectValue ?? [:]
                let details = [o["provider"], o["environment"]].compactMap { $0?.stringValue }.joined(separator: ", ")
                return (o["id"]?.stringValue ?? "?") + (details.isEmpty ? "" : " (\(details))")
            }.joined(separator: "; ")
        }
        let rows: [(String, String)] = [
            ("Time zone", zoneText),
            ("Quiet hours", quiet),
            ("Badge", device["badge"].map(plain) ?? "unknown"),
            ("Pending notifications", device["pending"].map(plain) ?? "unknown"),
            (
                "Receipts",
                onOff("receipts", "on: each delivery waits in the inbox until the device acknowledges it", "off")
            ),
            ("History", onOff("history", "on", "off: no record of deliveries is kept")),
            ("Push registrations", push),
        ]
        let items = rows.map { name, value -> HTML in "<div><dt>\(name)</dt><dd>\(value)</dd></div>" }
        return "<h2>Settings</h2>\n<dl class=\"settings\">\(items)</dl>\n"
    }

    /// The notifications, with the tag filter and (for operators) the action form.
    static func notificationsSection(
        _ id: String,
        _ notifications: [JSONObject],
        _ previews: [String: [String]],
        _ zone: Zone?,
        deviceZone: String?,
        _ tagFilter: (key: String, value: String)?,
        _ signedIn: SignedIn
    ) -> HTML {
        let filterNote: HTML
        if let tagFilter {
            filterNote = """
                <p>Showing the notifications whose userInfo has <code>\(tagFilter.key)</code> = \
                <code>\(tagFilter.value)</code>. <a href="\(ConsolePaths.device(id))">Show all</a></p>

                """
        } else {
            filterNote = ""
        }
        let filterForm: HTML = """
            <form class="inline" method="get" action="\(ConsolePaths.device(id))" role="search" \
            aria-label="Filter by userInfo tag">
            <p><label for="tag-key">userInfo key</label>
            <input id="tag-key" name="key" type="text" autocomplete="off" required value="\(tagFilter?.key ?? "")"></p>
            <p><label for="tag-value">Value</label>
            <input id="tag-value" name="value" type="text" autocomplete="off" value="\(tagFilter?.value ?? "")"></p>
            <p><button type="submit">Filter</button></p>
            </form>

            """
        let heading: HTML = "<h2 id=\"notifications-heading\">Notifications (\(notifications.count))</h2>\n"
        guard !notifications.isEmpty else {
            let empty: HTML =
                tagFilter == nil
                ? """
                No notifications. The device has none scheduled — check the device id, or that the app \
                scheduled with it.
                """
                : """
                No notification has this userInfo tag. Check the key and value (both are case-sensitive, \
                and a number is not the same as a string), or show all.
                """
            return heading + filterForm + filterNote + "<p class=\"notice info\" role=\"status\">\(empty)</p>\n"
        }
        let isOperator = signedIn.role == .operator
        let rows = notifications.enumerated().map { index, n in
            notificationRow(n, index: index, device: id, previews, zone, deviceZone: deviceZone, select: isOperator)
        }
        let selectHeader: HTML = isOperator ? "<th scope=\"col\">Select</th>" : ""
        let table: HTML = """
            <div class="scroll" role="region" aria-labelledby="notifications-heading" tabindex="0">
            <table class="stack">
            <thead><tr>\(selectHeader)<th scope="col">Notification</th><th scope="col">State</th>\
            <th scope="col">Schedule</th><th scope="col">Next occurrences</th><th scope="col">Fired</th>\
            <th scope="col">userInfo</th></tr></thead>
            <tbody>
            \(rows)</tbody>
            </table>
            </div>

            """
        guard isOperator else { return heading + filterForm + filterNote + table }
        let buttons = ConsoleAction.onSelection.map { action -> HTML in
            let kind: HTML = action == .cancel ? " class=\"danger\"" : ""
            return "<button type=\"submit\" name=\"action\" value=\"\(action.rawValue)\"\(kind)>\(action.verb)</button>"
        }
        return heading + filterForm + filterNote
            + """
            <form method="post" action="\(ConsolePaths.deviceAction(id))">
            \(csrfField(signedIn.csrf))
            <fieldset class="actions"><legend>Act on the selected notifications (you confirm on the next page)</legend>
            <p><label for="snooze-minutes">Snooze for (minutes)</label>
            <input id="snooze-minutes" name="minutes" type="number" min="\(ConsoleApp.snoozeMinutes.lowerBound)" \
            max="\(ConsoleApp.snoozeMinutes.upperBound)" value="10" \
            inputmode="numeric"></p>
            <p class="buttons">\(HTML.join(buttons, separator: " "))</p>
            </fieldset>
            \(table)</form>

            """
    }

    /// One notification's row.
    static func notificationRow(
        _ n: JSONObject,
        index: Int,
        device: String,
        _ previews: [String: [String]],
        _ zone: Zone?,
        deviceZone: String?,
        select: Bool
    ) -> HTML {
        let id = n["id"]?.stringValue ?? ""
        var content: [HTML] = ["<code>\(id)</code>"]
        if select {
            content.append(
                """
                <a href="\(ConsolePaths.deviceEdit(device, notification: id))">Edit<span class="visually-hidden"> \
                \(id)</span></a>
                """
            )
        }
        if let title = n["alertTitle"]?.stringValue { content.append("<strong>\(title)</strong>") }
        if let body = n["alertBody"]?.stringValue {
            content.append("<span>\(body)</span>")
        } else if case .array(let bodies)? = n["alertBodies"] {
            let texts = bodies.compactMap(\.stringValue).map { b -> HTML in "<li>\(b)</li>" }
            content.append("<span>One of:</span><ul class=\"bodies\">\(texts)</ul>")
        }
        let state: HTML
        if n["enabled"] == .bool(false) {
            state = "<span class=\"state off\">Paused</span>"
        } else if n["nextFireDate"]?.stringValue == nil {
            state = "<span class=\"state done\">Finished</span>"
        } else {
            state = "<span class=\"state on\">On</span>"
        }
        var times = previews[id] ?? []
        if times.isEmpty, let next = n["nextFireDate"]?.stringValue { times = [next] }
        let next: HTML =
            times.isEmpty
            ? "None"
            : "<ol class=\"times\">\(times.map { t -> HTML in "<li>\(zonedWithUTC(t, zone))</li>" })</ol>"
        var fired: HTML = "Never"
        if let count = n["firedCount"], count != .int(0) {
            fired = "\(plain(count)) time\(count == .int(1) ? "" : "s")"
            if let last = n["lastFiredAt"]?.stringValue { fired.append(", last \(ConsoleTime.html(last, zone: zone))") }
        }
        var tags: HTML = "—"
        if case .object(let info)? = n["userInfo"], !info.isEmpty {
            let items = info.map { key, value -> HTML in
                guard case .string(let text) = value else {
                    return "<div><dt>\(key)</dt><dd><code>\(value.text)</code></dd></div>"
                }
                let href = ConsolePaths.device(device, tag: (key, text))
                return """
                    <div><dt>\(key)</dt><dd><a href="\(href)" title="Only the notifications with this tag">\
                    \(text)</a></dd></div>
                    """
            }
            tags = "<dl class=\"tags\">\(items)</dl>"
        }
        let selectCell: HTML =
            select
            ? """
            <td data-label="Select"><input type="checkbox" name="ids" value="\(id)" id="select-\(index)">\
            <label for="select-\(index)" class="visually-hidden">Select \(id)</label></td>
            """
            : ""
        return """
            <tr>\(selectCell)\
            <td data-label="Notification" class="content">\(HTML.join(content, separator: "<br>"))</td>\
            <td data-label="State">\(state)</td>\
            <td data-label="Schedule">\(RuleWording.describe(n, deviceZone: deviceZone))</td>\
            <td data-label="Next occurrences">\(next)</td><td data-label="Fired">\(fired)</td>\
            <td data-label="userInfo">\(tags)</td></tr>

            """
    }

    /// An instant in the device's zone, then in UTC, both visible (`Mon 7 Dec 2026 18:00
    /// (Asia/Shanghai)` · `10:00 UTC`).
    static func zonedWithUTC(_ text: String, _ zone: Zone?) -> HTML {
        guard let instant = ConsoleTime.instant(text) else { return HTML(text: text) }
        guard let zone, zone != .utc else { return ConsoleTime.html(instant, zone: nil) }
        return
            "\(ConsoleTime.html(instant, zone: zone)) "
            + "<span class=\"utc\">\(ConsoleTime.utcText(instant, besides: zone))</span>"
    }

    /// The inbox: deliveries the device has not acknowledged.
    static func inboxSection(_ inbox: [JSONObject], receipts: Bool, _ zone: Zone?) -> HTML {
        let heading: HTML = "<h2 id=\"inbox-heading\">Inbox (\(inbox.count))</h2>\n"
        guard !inbox.isEmpty else {
            let text =
                receipts
                ? "The inbox is empty: the device has acknowledged every delivery it was sent."
                : """
                No inbox: this device does not use receipts, so deliveries do not wait for it to acknowledge \
                them. The history below says what was sent.
                """
            return heading + "<p class=\"notice info\">\(text)</p>\n"
        }
        let rows = inbox.map { d -> HTML in
            var flags: [String] = []
            if d["late"] == .bool(true) { flags.append("late") }
            if d["deferred"] == .bool(true) { flags.append("held by quiet hours") }
            if let missed = d["missed"], missed != .int(0) { flags.append("stands for \(plain(missed)) missed") }
            let text = [d["alertTitle"]?.stringValue, d["alertBody"]?.stringValue].compactMap { $0 }
            return """
                <tr><td data-label="Sent">\(time(d["firedAt"], zone))</td>\
                <td data-label="Notification"><code>\(d["id"]?.stringValue ?? "")</code></td>\
                <td data-label="Content">\(text.joined(separator: " — "))</td>\
                <td data-label="Due">\(time(d["fireDate"], zone))</td>\
                <td data-label="Notes">\(flags.isEmpty ? "on time" : flags.joined(separator: ", "))</td></tr>

                """
        }
        return heading
            + """
            <p class="hint">Sent and waiting for the device to acknowledge them, oldest first.</p>
            <div class="scroll" role="region" aria-labelledby="inbox-heading" tabindex="0">
            <table class="stack">
            <thead><tr><th scope="col">Sent</th><th scope="col">Notification</th><th scope="col">Content</th>\
            <th scope="col">Due</th><th scope="col">Notes</th></tr></thead>
            <tbody>
            \(rows)</tbody>
            </table>
            </div>

            """
    }

    /// The history: every recent delivery and what became of it.
    static func historySection(_ history: [JSONObject], keepsHistory: Bool, _ zone: Zone?) -> HTML {
        let heading: HTML = "<h2 id=\"history-heading\">Delivery history (\(history.count))</h2>\n"
        guard !history.isEmpty else {
            let text =
                keepsHistory
                ? """
                No deliveries in the history yet: nothing has fired for this device since its history began \
                (the newest 28 are kept by default). The notifications' next occurrences are above.
                """
                : """
                No history: this device keeps none (it turned history off, or the worker runs with \
                --history false and the device did not ask for it). The device command \
                {"history": true} turns it on for deliveries from then on.
                """
            return heading + "<p class=\"notice info\">\(text)</p>\n"
        }
        let rows = history.map { h -> HTML in
            let late: HTML = h["late"] == .bool(true) ? "<span class=\"state late\">late</span>" : "on time"
            return """
                <tr><td data-label="Due">\(time(h["fireDate"], zone))</td>\
                <td data-label="Notification"><code>\(h["id"]?.stringValue ?? "")</code></td>\
                <td data-label="Sent">\(time(h["firedAt"], zone)) (\(late))</td>\
                <td data-label="What happened">\(outcome(h, zone))</td>\
                <td data-label="Push">\(pushOutcome(h, zone))</td></tr>

                """
        }
        return heading
            + """
            <p class="hint">Newest first: when each delivery was due and sent, and whether it reached the device.</p>
            <div class="scroll" role="region" aria-labelledby="history-heading" tabindex="0">
            <table class="stack">
            <thead><tr><th scope="col">Due</th><th scope="col">Notification</th><th scope="col">Sent</th>\
            <th scope="col">What happened</th><th scope="col">Push</th></tr></thead>
            <tbody>
            \(rows)</tbody>
            </table>
            </div>

            """
    }

    /// A history row's `state` (and `mqtt`) in words.
    static func outcome(_ h: JSONObject, _ zone: Zone?) -> HTML {
        let acknowledged: HTML = h["acknowledgedAt"]?.stringValue.map { "\(ConsoleTime.html($0, zone: zone))" } ?? ""
        let mqtt: HTML =
            h["mqtt"]?.stringValue == "none" ? " Not sent over MQTT (push only)." : " The broker accepted it."
        switch h["state"]?.stringValue ?? "" {
        case "acknowledged":
            return "<span class=\"state on\">Reached the device</span>: acknowledged \(acknowledged).\(mqtt)"
        case "unacknowledged":
            return "<span class=\"state pending\">Sent, not acknowledged yet</span>: waiting in the inbox.\(mqtt)"
        case "delivered":
            let ack: HTML =
                h["acknowledgedAt"]?.stringValue == nil ? "" : " The device acknowledged it \(acknowledged)."
            return """
                <span class="state on">Sent</span>.\(mqtt) The device sends no receipts, so whether it showed is \
                not known.\(ack)
                """
        case "expired":
            return "<span class=\"state off\">Not acknowledged</span>: it left the inbox when it expired.\(mqtt)"
        case "dropped":
            return "<span class=\"state off\">Not acknowledged</span>: dropped to make room in a full inbox.\(mqtt)"
        case let other:
            return "\(other)"
        }
    }

    /// A history row's push outcome: its word, and each registration's.
    static func pushOutcome(_ h: JSONObject, _ zone: Zone?) -> HTML {
        guard let word = h["pushOutcome"]?.stringValue else { return "not pushed" }
        guard case .array(let pushes)? = h["push"], !pushes.isEmpty else { return HTML(text: word) }
        let items = pushes.compactMap(\.objectValue).map { p -> HTML in
            let reason = p["reason"]?.stringValue.map { " (\($0))" } ?? ""
            let at: HTML = p["at"]?.stringValue.map { " \(ConsoleTime.html($0, zone: zone))" } ?? ""
            return """
                <li><code>\(p["registration"]?.stringValue ?? "?")</code>: \
                \(p["outcome"]?.stringValue ?? "?")\(reason)\(at)</li>
                """
        }
        return "\(word)<ul class=\"pushes\">\(items)</ul>"
    }

    /// A time member of a reply, in `zone`; `—` when absent.
    static func time(_ value: JSON?, _ zone: Zone?) -> HTML {
        guard let text = value?.stringValue else { return "—" }
        return ConsoleTime.html(text, zone: zone)
    }

    /// A value as text: strings as they are, other JSON written out.
    static func plain(_ value: JSON) -> String {
        if case .string(let s) = value { return s }
        return value.text
    }
}
