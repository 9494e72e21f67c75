import ChimeConsole
import ChimeProtocol
import ChimeTime
import Testing

@Suite("Console pages")
struct PagesTests {
    static let plainPages = PageSamples.pages(text: nil, session: PageSamples.operatorSession())
    static let hostilePages = PageSamples.pages(
        text: PageSamples.hostile,
        session: .init(account: PageSamples.hostile, role: .operator, csrf: PageSamples.hostile)
    )

    @Test("Every page is a whole document that links the stylesheet")
    func documents() {
        for (name, html) in Self.plainPages + Self.hostilePages {
            #expect(html.hasPrefix("<!doctype html>\n<html lang=\"en\">"), "\(name)")
            #expect(html.contains("<meta charset=\"utf-8\">"), "\(name)")
            #expect(
                html.contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"),
                "\(name)"
            )
            #expect(html.contains("<link rel=\"stylesheet\" href=\"/console.css\">"), "\(name)")
            #expect(html.contains("<main id=\"main\">") && html.contains("<header class=\"site\">"), "\(name)")
            #expect(html.contains("<title>"), "\(name)")
        }
    }

    @Test("Every page's tags are well formed and nested, with quoted attributes")
    func wellFormed() {
        for (name, html) in Self.plainPages + Self.hostilePages {
            let markup = PageMarkup(html)
            #expect(markup.problems.isEmpty, "\(name): \(markup.problems)")
            #expect(markup.all("html").count == 1 && markup.all("main").count == 1, "\(name)")
        }
    }

    @Test("No script, no style attribute, no style block, no event handler anywhere")
    func contentSecurityPolicy() {
        for (name, html) in Self.plainPages + Self.hostilePages {
            #expect(!html.contains("<script"), "\(name)")
            #expect(!html.contains("<style"), "\(name)")
            #expect(!html.contains(" style="), "\(name)")
            for tag in PageMarkup(html).tags {
                #expect(!["script", "style", "iframe", "object", "embed", "img"].contains(tag.name), "\(name): \(tag)")
                for attribute in tag.attributes.keys {
                    #expect(!attribute.hasPrefix("on") && attribute != "style", "\(name): \(tag)")
                }
                for attribute in ["href", "action", "src"] {
                    if let url = tag.attributes[attribute] {
                        #expect(url.hasPrefix("/") || url.hasPrefix("#"), "\(name): \(tag)")
                    }
                }
            }
        }
        #expect(!ConsolePages.stylesheet.contains("url("))
    }

    @Test("Hostile strings from devices are text on every page")
    func hostileStringsEscaped() {
        for (name, html) in Self.hostilePages {
            #expect(!html.contains("<img"), "\(name)")
            #expect(!html.contains("<svg onload"), "\(name)")
            #expect(!html.contains("'><"), "\(name)")
            #expect(
                html.contains("&lt;script&gt;alert(1)&lt;/script&gt;")
                    || html.contains("%3Cscript%3Ealert%281%29%3C%2Fscript%3E"),
                "\(name)"
            )
        }
        let device = Self.hostilePages.first { $0.name == "device" }!.html
        #expect(device.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"))
        #expect(device.contains("&#39;&gt;&lt;svg onload=alert(1)&gt;"))
        // In URLs, percent-encoded: one path segment, one query value.
        #expect(device.contains("/device/%3Cscript%3Ealert%281%29%3C%2Fscript%3E%22%3E%3Cimg"))
        #expect(!device.contains("/device/<") && !device.contains("/device/&lt;"))
    }

    @Test("Every control has an id, unique on its page, and a label for it")
    func labels() {
        for (name, html) in Self.plainPages + Self.hostilePages {
            let markup = PageMarkup(html)
            let controls = (markup.all("input") + markup.all("select") + markup.all("textarea")).filter {
                $0.attributes["type"] != "hidden"
            }
            let labelled = Set(markup.all("label").compactMap { $0.attributes["for"] })
            for control in controls {
                let id = control.attributes["id"]
                #expect(id != nil, "\(name): \(control)")
                #expect(id.map(labelled.contains) == true, "\(name): \(control) has no label")
            }
            let ids = markup.tags.compactMap { $0.isClosing ? nil : $0.attributes["id"] }
            #expect(Set(ids).count == ids.count, "\(name): \(ids)")
            for header in markup.all("th") {
                #expect(["col", "row"].contains(header.attributes["scope"] ?? ""), "\(name): \(header)")
            }
        }
    }

    @Test("Every form that posts carries the session's csrf token, but the login form")
    func csrf() {
        for (name, html) in Self.plainPages {
            let markup = PageMarkup(html)
            for form in markup.all("form") where form.attributes["method"] == "post" {
                let fields = markup.inside(form).filter { $0.name == "input" && $0.attributes["name"] == "csrf" }
                if form.attributes["action"] == ConsolePaths.login {
                    #expect(fields.isEmpty, "\(name)")
                } else {
                    #expect(fields.map { $0.attributes["value"] } == ["token-123"], "\(name): \(form)")
                    #expect(fields.first?.attributes["type"] == "hidden", "\(name)")
                }
            }
        }
        let hostile = Self.hostilePages.first { $0.name == "device" }!.html
        #expect(hostile.contains("name=\"csrf\" value=\"&lt;script&gt;"))
    }

    @Test("Viewers get no action controls; operators get them with confirmation")
    func roles() {
        let viewer = PageSamples.pages(text: nil, session: PageSamples.viewerSession())
        for (name, html) in viewer {
            let markup = PageMarkup(html)
            let posting = markup.all("form").filter { $0.attributes["method"] == "post" }
            #expect(
                posting.allSatisfy { [ConsolePaths.logout, ConsolePaths.login].contains($0.attributes["action"]) },
                "\(name)"
            )
            #expect(!markup.all("input").contains { $0.attributes["type"] == "checkbox" }, "\(name)")
            #expect(!markup.all("button").contains { $0.attributes["name"] == "action" }, "\(name)")
        }
        let device = Self.plainPages.first { $0.name == "device" }!.html
        let markup = PageMarkup(device)
        let act = markup.all("form").filter { $0.attributes["action"] == "/device/phone-1/act" }
        #expect(act.count == 1)
        let inside = act.first.map(markup.inside) ?? []
        #expect(
            inside.filter { $0.attributes["type"] == "checkbox" }.map { $0.attributes["value"] } == ["pill", "exam"]
        )
        #expect(
            inside.filter { $0.name == "button" }.compactMap { $0.attributes["value"] }
                == ["pause", "resume", "snooze", "cancel"]
        )
        let minutes = inside.first { $0.attributes["name"] == "minutes" }
        // The browser offers what the console takes: a minute to a week.
        #expect(minutes?.attributes["min"] == String(ConsoleApp.snoozeMinutes.lowerBound))
        #expect(minutes?.attributes["max"] == String(ConsoleApp.snoozeMinutes.upperBound))
        #expect(ConsoleApp.snoozeMinutes.upperBound == 10_080)
        #expect(!inside.contains { $0.attributes["name"] == "confirm" })
        let refused = viewer.first { $0.name == "confirm" }!.html
        #expect(refused.contains("Your account is a viewer&#39;s: it may not change notifications. Ask an operator."))
    }

    @Test("The confirmation page posts every id with confirm=yes")
    func confirmation() {
        let html = ConsolePages.confirm(
            action: .snooze,
            device: "phone-1",
            ids: ["a", "b&c"],
            snoozeMinutes: 15,
            signedIn: PageSamples.operatorSession()
        )
        let markup = PageMarkup(html)
        let form = markup.all("form").first { $0.attributes["action"] == "/device/phone-1/act" }!
        let fields = markup.inside(form).filter { $0.name == "input" }.map {
            "\($0.attributes["name"]!)=\($0.attributes["value"]!)"
        }
        #expect(fields == ["csrf=token-123", "action=snooze", "minutes=15", "ids=a", "ids=b&amp;c", "confirm=yes"])
        #expect(html.contains("Snooze 2 notifications for 15 minutes of device <code>phone-1</code>?"))
        let none = ConsolePages.confirm(action: .cancel, device: "d", ids: [], signedIn: PageSamples.operatorSession())
        #expect(none.contains("No notification was selected. Go back and tick the box"))
        #expect(!none.contains("name=\"confirm\""))
        #expect(ConsoleAction.pause.result(count: 2) == "Paused 2 notifications")
        #expect(ConsoleAction.cancel.result(count: 1) == "Cancelled 1 notification")
    }

    @Test("Empty and error states say what to do")
    func emptyStates() {
        let session = PageSamples.operatorSession()
        let empty = ConsolePages.device(
            id: "phone-1",
            device: PageSamples.device(),
            notifications: [],
            inbox: [],
            history: [],
            signedIn: session
        )
        #expect(
            empty.contains(
                "No notifications. The device has none scheduled — check the device id, or that the app scheduled with it."
            )
        )
        #expect(empty.contains("The inbox is empty: the device has acknowledged every delivery"))
        #expect(empty.contains("No deliveries in the history yet"))
        #expect(!empty.contains("<table"))
        var plain = PageSamples.device()
        plain["receipts"] = false
        plain["history"] = false
        let bare = ConsolePages.device(
            id: "phone-1",
            device: plain,
            notifications: [],
            inbox: [],
            history: [],
            tagFilter: ("tag", "med"),
            signedIn: session
        )
        #expect(bare.contains("No inbox: this device does not use receipts"))
        #expect(bare.contains("No history: this device keeps none"))
        #expect(bare.contains("No notification has this userInfo tag."))
        #expect(bare.contains("<a href=\"/device/phone-1\">Show all</a>"))
        let fleet = ConsolePages.fleet(workers: [], now: PageSamples.now, signedIn: session)
        #expect(fleet.contains("No worker has published a status on <code>chime/$worker/+/status</code>. Check that"))
        let none = ConsolePages.find(
            query: "phone-9",
            found: ConsolePages.Found(devices: [], next: nil),
            signedIn: session
        )
        #expect(none.contains("No device whose id starts with <code>phone-9</code>."))
        let login = ConsolePages.login(error: "Wrong user name or password.")
        #expect(login.contains("role=\"alert\" id=\"login-error\">Wrong user name or password.</p>"))
        #expect(login.contains("aria-describedby=\"login-error\""))
    }

    @Test("The device page: settings, rules in words, times in the device's zone, outcomes")
    func devicePage() {
        let html = Self.plainPages.first { $0.name == "device" }!.html
        #expect(html.contains("<h1>Device <code>phone-1</code></h1>"))
        #expect(html.contains("<dd>Asia/Shanghai</dd>"))
        #expect(html.contains("22:00 to 07:00"))
        #expect(html.contains("Monday to Friday at 18:00, Asia/Shanghai"))
        #expect(html.contains("Once, 5 Dec 2026 at 07:00, Europe/Paris"))
        #expect(
            html.contains(
                "<time datetime=\"2026-12-07T10:00:00Z\" title=\"2026-12-07T10:00:00Z UTC\">Mon 7 Dec 2026 18:00 (Asia/Shanghai)</time> <span class=\"utc\">10:00 UTC</span>"
            )
        )
        #expect(html.contains("<span class=\"state on\">On</span>"))
        #expect(html.contains("<span class=\"state off\">Paused</span>"))
        #expect(html.contains("4 times, last <time datetime=\"2026-12-04T10:00:00.004Z\""))
        #expect(html.contains("<a href=\"/device/phone-1?key=tag&amp;value=med\""))
        #expect(html.contains("<dt>n</dt><dd><code>1</code></dd>"))
        #expect(html.contains("Reached the device</span>: acknowledged <time datetime=\"2026-12-04T10:02:00Z\""))
        #expect(html.contains("Sent, not acknowledged yet"))
        #expect(html.contains("dropped to make room in a full inbox"))
        #expect(html.contains("<code>apns-1a2b3c4d</code>: accepted (HTTP 200)"))
        #expect(html.contains("(<span class=\"state late\">late</span>)"))
        #expect(html.contains("Sent to the broker") || html.contains("The broker accepted it."))
    }

    @Test("The fleet page reloads itself and shows rates, totals and charts")
    func fleetPage() {
        let html = Self.plainPages.first { $0.name == "fleet" }!.html
        #expect(html.contains("<meta http-equiv=\"refresh\" content=\"10\">"))
        #expect(html.contains("<dt>Workers online</dt><dd>1 of 1</dd>"))
        #expect(html.contains("<dt>Commands a second</dt><dd>10</dd>"))
        #expect(html.contains("<dt>Deliveries a second</dt><dd>5</dd>"))
        #expect(html.contains("<dt>Refused deliveries</dt><dd>2</dd>"))
        #expect(html.contains("<td data-label=\"Up\"><span title=\"since 2026-12-07T07:00:00Z UTC\">3 h</span></td>"))
        #expect(html.contains("aria-label=\"lateness: p50 1 ms, p99 2 ms, max 3 ms, 87 samples\""))
        #expect(html.contains("aria-label=\"loop turns: no samples yet\""))
        #expect(html.contains("<td data-label=\"Serves\">partition 0/1</td>"))
        for (name, page) in Self.plainPages where !name.hasPrefix("fleet") {
            #expect(!page.contains("http-equiv=\"refresh\""), "\(name)")
        }
    }

    @Test("The header names the account and role and marks the current section")
    func header() {
        let html = Self.plainPages.first { $0.name == "fleet" }!.html
        #expect(html.contains("Signed in as <strong>alice</strong> (operator)"))
        #expect(html.contains("<a href=\"/fleet\" aria-current=\"page\">Fleet</a>"))
        #expect(html.contains("<a href=\"/find\">Find</a>"))
        #expect(html.contains("<form method=\"post\" action=\"/logout\">"))
        let login = ConsolePages.login()
        #expect(!login.contains("<nav") && !login.contains("Sign out"))
    }
}
