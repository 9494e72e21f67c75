import ChimeProtocol

extension ConsolePages {
    /// A page of the devices found across the fleet.
    public struct Found: Sendable, Hashable {
        /// In id order.
        public var devices: [FoundDevice]
        /// The `after` of the next page; nil on the last.
        public var next: String?
        /// The `after` this page was asked with: a later page.
        public var after: String?
        /// What may be missing, and why: a worker that did not answer, or refused.
        public var problems: [String]

        public init(devices: [FoundDevice], next: String?, after: String? = nil, problems: [String] = []) {
            self.devices = devices
            self.next = next
            self.after = after
            self.problems = problems
        }
    }

    /// The find page (`GET /find`): a device id (or its beginning) and a `userInfo` tag; Open device
    /// (the default, Enter) goes to the device, List devices lists the devices found across the
    /// fleet, a page at a time.
    ///
    /// - Parameters:
    ///   - query: the device id, or its beginning, asked for; nil before a search.
    ///   - tag: the `userInfo` key and value asked for, if any.
    ///   - found: the devices found, after a search of the fleet.
    ///   - error: why the search failed (not an id, no worker to ask).
    public static func find(
        query: String?,
        tag: (key: String, value: String)? = nil,
        found: Found? = nil,
        error: String? = nil,
        signedIn: SignedIn
    ) -> String {
        var outcome: HTML = ""
        if let error {
            outcome = alert(error)
        } else if let found {
            outcome = foundSection(found, prefix: query ?? "", tag: tag)
        }
        let main: HTML = """
            <h1>Find devices</h1>
            <form class="stack" method="get" action="\(ConsolePaths.find)" role="search">
            <p><label for="find-device">Device id</label>
            <input id="find-device" name="device" type="text" maxlength="128" autocomplete="off" \
            spellcheck="false" value="\(query ?? "")" aria-describedby="find-device-hint">
            <span class="hint" id="find-device-hint">The whole id, such as phone-1, opens that device. With List \
            devices, the beginning of one (phone-) lists every device whose id starts with it, or leave it empty.\
            </span></p>
            <fieldset><legend>With a notification tagged (optional): a userInfo key and value</legend>
            <p><label for="find-key">Key</label>
            <input id="find-key" name="key" type="text" autocomplete="off" value="\(tag?.key ?? "")"></p>
            <p><label for="find-value">Value</label>
            <input id="find-value" name="value" type="text" autocomplete="off" value="\(tag?.value ?? "")"></p>
            </fieldset>
            <p class="buttons"><button type="submit" name="go" value="open" class="primary">Open device</button> \
            <button type="submit" name="go" value="list">List devices</button></p>
            </form>
            \(outcome)
            """
        return document(title: "Find", section: .find, signedIn: signedIn, main: main)
    }

    /// The devices found, with their notifications and those tagged, and the links to other pages.
    static func foundSection(_ found: Found, prefix: String, tag: (key: String, value: String)?) -> HTML {
        var html: HTML = "<h2 id=\"found-heading\">Devices found (\(found.devices.count))</h2>\n"
        for problem in found.problems { html.append(alert(problem)) }
        var asked: [HTML] = []
        if !prefix.isEmpty { asked.append("whose id starts with <code>\(prefix)</code>") }
        if let tag { asked.append("with a notification tagged <code>\(tag.key)</code> = <code>\(tag.value)</code>") }
        let what: HTML = asked.isEmpty ? "" : " " + HTML.join(asked, separator: " and ")
        if found.devices.isEmpty {
            let later: HTML = found.after == nil ? "" : " after <code>\(found.after ?? "")</code>"
            html.append(
                """
                <p class="notice info" role="status">No device\(what)\(later). Ids, keys and values are \
                case-sensitive, and a number in userInfo is not the same as a string: check them, or find the \
                device by its whole id.</p>

                """
            )
        } else {
            let tagHeader: HTML = tag == nil ? "" : "<th scope=\"col\">Tagged notifications</th>"
            let rows = found.devices.map { d -> HTML in
                var tagged: HTML = ""
                if tag != nil {
                    let ids = (d.matching ?? []).map { id -> HTML in "<li><code>\(id)</code></li>" }
                    let more = max(0, (d.matchingCount ?? 0) - (d.matching?.count ?? 0))
                    let moreHTML: HTML = more == 0 ? "" : "<p>and \(more) more</p>"
                    tagged = "<td data-label=\"Tagged notifications\"><ul class=\"ids\">\(ids)</ul>\(moreHTML)</td>"
                }
                return """
                    <tr><td data-label="Device"><a href="\(ConsolePaths.device(d.deviceId, tag: tag))">\
                    \(d.deviceId)</a></td><td data-label="Notifications">\(d.pending)</td>\(tagged)</tr>

                    """
            }
            html.append(
                """
                <p class="hint">The devices\(what), in id order.</p>
                <div class="scroll" role="region" aria-labelledby="found-heading" tabindex="0">
                <table class="stack">
                <thead><tr><th scope="col">Device</th><th scope="col">Notifications</th>\(tagHeader)</tr></thead>
                <tbody>
                \(rows)</tbody>
                </table>
                </div>

                """
            )
        }
        var links: [HTML] = []
        if found.after != nil {
            links.append("<a href=\"\(ConsolePaths.found(prefix: prefix, tag: tag))\">First devices</a>")
        }
        if let next = found.next {
            links.append(
                "<a href=\"\(ConsolePaths.found(prefix: prefix, tag: tag, after: next))\" rel=\"next\">Next devices</a>"
            )
        }
        if !links.isEmpty {
            html.append(
                "<nav aria-label=\"Pages of devices found\"><p class=\"buttons\">\(HTML.join(links, separator: " "))</p></nav>\n"
            )
        }
        return html
    }

    /// A field of a notification the edit form changes, its text now and after.
    public struct Change: Sendable, Hashable {
        /// `alertTitle`, `alertBody` or `soundName`.
        public var field: String
        public var from: String
        /// Empty: the field is cleared.
        public var to: String

        public init(field: String, from: String, to: String) {
            self.field = field
            self.from = from
            self.to = to
        }
    }

    /// The names of the fields the edit form changes, as its labels say them.
    static func fieldName(_ field: String) -> String {
        switch field {
        case "alertTitle": "Title"
        case "alertBody": "Body"
        case "soundName": "Sound"
        default: field
        }
    }

    /// The form that edits one notification's title, body and sound (its `list` row), posting to
    /// ``ConsolePaths/deviceAction(_:)`` with `action=edit`; its answer is
    /// ``confirmEdit(device:id:changes:signedIn:)``.
    public static func edit(device: String, notification: JSONObject, signedIn: SignedIn) -> String {
        let id = notification["id"]?.stringValue ?? ""
        let title = "Edit notification"
        guard signedIn.role == .operator else { return viewerRefusal(title, device: device, signedIn) }
        var several: HTML = ""
        if case .array(let bodies)? = notification["alertBodies"] {
            several = """
                <p class="notice info">It has \(bodies.count) bodies, one picked at random for each delivery: a body \
                given here replaces them all.</p>

                """
        }
        let main: HTML = """
            <h1>\(title)</h1>
            <p>Notification <code>\(id)</code> of device <code>\(device)</code>. Its schedule does not change; \
            leave a field empty to clear it. You confirm on the next page.</p>
            \(several)<form class="stack" method="post" action="\(ConsolePaths.deviceAction(device))">
            \(csrfField(signedIn.csrf))<input type="hidden" name="action" value="edit">\
            <input type="hidden" name="ids" value="\(id)">
            <p><label for="edit-title">Title</label>
            <input id="edit-title" name="alertTitle" type="text" autocomplete="off" \
            value="\(notification["alertTitle"]?.stringValue ?? "")"></p>
            <p><label for="edit-body">Body</label>
            <textarea id="edit-body" name="alertBody" rows="4">\(notification["alertBody"]?.stringValue ?? "")</textarea></p>
            <p><label for="edit-sound">Sound</label>
            <input id="edit-sound" name="soundName" type="text" autocomplete="off" \
            value="\(notification["soundName"]?.stringValue ?? "")" aria-describedby="edit-sound-hint">
            <span class="hint" id="edit-sound-hint">default for the default sound; empty for none.</span></p>
            <p class="buttons"><button type="submit" class="primary">Review the change</button> \
            <a href="\(ConsolePaths.device(device))">Back without changing anything</a></p>
            </form>

            """
        return document(title: title, section: nil, signedIn: signedIn, main: main)
    }

    /// The confirmation of an edit: each field that changes, as it is and as it will be, and a form
    /// that posts only those with `confirm=yes`.
    public static func confirmEdit(device: String, id: String, changes: [Change], signedIn: SignedIn) -> String {
        let title = "Edit notification"
        guard signedIn.role == .operator else { return viewerRefusal(title, device: device, signedIn) }
        let rows = changes.map { c -> HTML in
            let to: HTML = c.to.isEmpty ? "<em>(cleared)</em>" : "\(c.to)"
            let from: HTML = c.from.isEmpty ? "<em>(none)</em>" : "\(c.from)"
            return """
                <tr><th scope="row">\(fieldName(c.field))</th><td data-label="Now">\(from)</td>\
                <td data-label="After">\(to)</td></tr>

                """
        }
        let hidden = changes.map { c -> HTML in "<input type=\"hidden\" name=\"\(c.field)\" value=\"\(c.to)\">" }
        let main: HTML = """
            <h1>\(title)</h1>
            <p>Change notification <code>\(id)</code> of device <code>\(device)</code>?</p>
            <div class="scroll" role="region" aria-label="Changes" tabindex="0">
            <table class="stack">
            <thead><tr><th scope="col">Field</th><th scope="col">Now</th><th scope="col">After</th></tr></thead>
            <tbody>
            \(rows)</tbody>
            </table>
            </div>
            <p>\(ConsoleAction.edit.consequence)</p>
            <form method="post" action="\(ConsolePaths.deviceAction(device))">
            \(csrfField(signedIn.csrf))<input type="hidden" name="action" value="edit">\
            <input type="hidden" name="ids" value="\(id)">\(hidden)<input type="hidden" name="confirm" value="yes">
            <p class="buttons"><button type="submit" class="primary">Change notification \(id)</button> \
            <a href="\(ConsolePaths.device(device))">Back without changing anything</a></p>
            </form>

            """
        return document(title: title, section: nil, signedIn: signedIn, main: main)
    }

    /// What a page that changes something says to a viewer, with no form.
    static func viewerRefusal(_ title: String, device: String, _ signedIn: SignedIn) -> String {
        let main: HTML = """
            <h1>\(title)</h1>
            \(alert("Your account is a viewer's: it may not change notifications. Ask an operator."))\
            <p><a href="\(ConsolePaths.device(device))">Back to device \(device)</a></p>

            """
        return document(title: title, section: nil, signedIn: signedIn, main: main)
    }
}
