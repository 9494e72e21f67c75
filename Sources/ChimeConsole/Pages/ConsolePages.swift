/// The console's pages, as complete HTML documents rendered from the protocol's JSON: pure
/// functions, no I/O.
///
/// Every page links ``stylesheet`` (served at ``ConsolePaths/stylesheet``) and has no script, no
/// style attribute and no `<style>` block, so it runs under `default-src 'none'; style-src 'self';
/// img-src 'self'; form-action 'self'; frame-ancestors 'none'`. Every string from a device or a
/// worker is escaped (see ``HTML``); every form that changes state posts a `csrf` field holding
/// the value the caller passes.
public enum ConsolePages {
    /// Who is signed in, as the header shows them, and the CSRF token their forms carry.
    public struct SignedIn: Sendable, Hashable {
        public var account: String
        public var role: ConsoleRole
        /// The session's CSRF token, put in the `csrf` field of every form that posts.
        public var csrf: String

        public init(account: String, role: ConsoleRole, csrf: String) {
            self.account = account
            self.role = role
            self.csrf = csrf
        }
    }

    /// How a ``message(title:text:status:back:signedIn:)`` page reads.
    public enum MessageStatus: String, Sendable, Hashable {
        /// Something was done ("Paused 2 notifications").
        case success
        /// Something to know.
        case info
        /// Something failed; the text says what to do.
        case error
    }

    /// A link to somewhere else in the console.
    public struct Link: Sendable, Hashable {
        public var title: String
        public var path: String

        public init(title: String, path: String) {
            self.title = title
            self.path = path
        }
    }

    /// The sections of the header's navigation.
    enum Section { case fleet, find }

    /// The product's name, in the header and every title.
    static let product = "Chime console"

    /// A whole document: head, header with navigation and account, `main`.
    static func document(
        title: String,
        section: Section?,
        signedIn: SignedIn?,
        refreshSeconds: Int? = nil,
        main: HTML
    ) -> String {
        let refresh: HTML = refreshSeconds.map { "<meta http-equiv=\"refresh\" content=\"\($0)\">\n" } ?? ""
        var header: HTML = "<p class=\"brand\"><a href=\"\(ConsolePaths.fleet)\">\(product)</a></p>\n"
        if let signedIn {
            func item(_ name: String, _ path: String, _ this: Section) -> HTML {
                let current: HTML = section == this ? " aria-current=\"page\"" : ""
                return "<li><a href=\"\(path)\"\(current)>\(name)</a></li>"
            }
            header.append(
                """
                <nav aria-label="Main"><ul>\(item("Fleet", ConsolePaths.fleet, .fleet))\
                \(item("Find", ConsolePaths.find, .find))</ul></nav>
                <div class="account"><p>Signed in as <strong>\(signedIn.account)</strong> \
                (\(signedIn.role.rawValue))</p>
                <form method="post" action="\(ConsolePaths.logout)">\(csrfField(signedIn.csrf))\
                <button type="submit">Sign out</button></form></div>

                """
            )
        }
        let page: HTML = """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            \(refresh)<title>\(title) — \(product)</title>
            <link rel="stylesheet" href="\(ConsolePaths.stylesheet)">
            </head>
            <body>
            <a class="skip" href="#main">Skip to content</a>
            <header class="site">
            \(header)</header>
            <main id="main">
            \(main)</main>
            </body>
            </html>

            """
        return page.rendered
    }

    /// The hidden `csrf` field of a form that posts.
    static func csrfField(_ token: String) -> HTML {
        "<input type=\"hidden\" name=\"csrf\" value=\"\(token)\">"
    }

    /// A paragraph announced at once to screen readers: an error and what to do about it.
    static func alert(_ text: String, id: String? = nil) -> HTML {
        let idHTML: HTML = id.map { " id=\"\($0)\"" } ?? ""
        return "<p class=\"notice error\" role=\"alert\"\(idHTML)>\(text)</p>\n"
    }

    // MARK: Pages

    /// The sign-in page: user name, password, and `error` (a failed attempt) above them. It posts to
    /// ``ConsolePaths/login`` without a CSRF field: there is no session yet (the routes check the
    /// request's `Origin`).
    public static func login(error: String? = nil, username: String = "") -> String {
        let errorHTML = error.map { alert($0, id: "login-error") } ?? ""
        let describedBy: HTML = error == nil ? "" : " aria-describedby=\"login-error\""
        let main: HTML = """
            <h1>Sign in</h1>
            \(errorHTML)\
            <form class="stack" method="post" action="\(ConsolePaths.login)"\(describedBy)>
            <p><label for="username">User name</label>
            <input id="username" name="username" type="text" autocomplete="username" required value="\(username)"></p>
            <p><label for="password">Password</label>
            <input id="password" name="password" type="password" autocomplete="current-password" required></p>
            <p><button type="submit" class="primary">Sign in</button></p>
            </form>

            """
        return document(title: "Sign in", section: nil, signedIn: nil, main: main)
    }

    /// A result or an error: "Paused 2 notifications", "The worker did not answer within 5 s; try
    /// again". `back` is where to go next.
    public static func message(
        title: String,
        text: String,
        status: MessageStatus,
        back: Link? = nil,
        signedIn: SignedIn?
    ) -> String {
        let role: HTML = status == .error ? "alert" : "status"
        let backHTML: HTML = back.map { "<p><a href=\"\($0.path)\">\($0.title)</a></p>\n" } ?? ""
        let main: HTML = """
            <h1>\(title)</h1>
            <p class="notice \(status.rawValue)" role="\(role)">\(text)</p>
            \(backHTML)
            """
        return document(title: title, section: nil, signedIn: signedIn, main: main)
    }

    /// The confirmation of an action on notifications, which posts to
    /// ``ConsolePaths/deviceAction(_:)`` with `action`, every id in `ids`, `minutes` (snooze),
    /// `confirm=yes` and `csrf`. With no ids it says to go back and select some; to a viewer it
    /// says that only operators may act, and has no form.
    ///
    /// - Parameters:
    ///   - snoozeMinutes: how long a snooze waits (`snooze`'s `after`, in minutes).
    public static func confirm(
        action: ConsoleAction,
        device: String,
        ids: [String],
        snoozeMinutes: Int? = nil,
        signedIn: SignedIn
    ) -> String {
        let title = "\(action.verb) notifications"
        let back: HTML = "<p><a href=\"\(ConsolePaths.device(device))\">Back to device \(device)</a></p>\n"
        guard signedIn.role == .operator, !ids.isEmpty else {
            let problem =
                signedIn.role == .operator
                ? "No notification was selected. Go back and tick the box of each notification to \(action.rawValue)."
                : "Your account is a viewer's: it may not change notifications. Ask an operator."
            let main: HTML = "<h1>\(title)</h1>\n\(alert(problem))\(back)"
            return document(title: title, section: nil, signedIn: signedIn, main: main)
        }
        let count = ids.count == 1 ? "1 notification" : "\(ids.count) notifications"
        var delay: HTML = ""
        var delayField: HTML = ""
        if action == .snooze, let minutes = snoozeMinutes {
            delay = " for \(minutes) minute\(minutes == 1 ? "" : "s")"
            delayField = "<input type=\"hidden\" name=\"minutes\" value=\"\(minutes)\">"
        }
        let items = ids.map { id -> HTML in "<li><code>\(id)</code></li>" }
        let hidden = ids.map { id -> HTML in "<input type=\"hidden\" name=\"ids\" value=\"\(id)\">" }
        let main: HTML = """
            <h1>\(title)</h1>
            <p>\(action.verb) \(count)\(delay) of device <code>\(device)</code>?</p>
            <ul class="ids">\(items)</ul>
            <p>\(action.consequence)</p>
            <form method="post" action="\(ConsolePaths.deviceAction(device))">
            \(csrfField(signedIn.csrf))<input type="hidden" name="action" value="\(action.rawValue)">\
            \(delayField)\(hidden)<input type="hidden" name="confirm" value="yes">
            <p class="buttons"><button type="submit" class="\(action == .cancel ? "danger" : "primary")">\
            \(action.verb) \(count)</button> <a href="\(ConsolePaths.device(device))">Back without changing \
            anything</a></p>
            </form>

            """
        return document(title: title, section: nil, signedIn: signedIn, main: main)
    }
}

/// What the pages say of an action: its button, its result and its consequence.
extension ConsoleAction {
    /// `Pause`: the button's text.
    public var verb: String { rawValue.prefix(1).uppercased() + rawValue.dropFirst() }

    /// `Paused 2 notifications`: the result, for ``ConsolePages/message(title:text:status:back:signedIn:)``.
    public func result(count: Int) -> String {
        let done =
            switch self {
            case .pause: "Paused"
            case .resume: "Resumed"
            case .snooze: "Snoozed"
            case .cancel: "Cancelled"
            case .edit: "Edited"
            }
        return "\(done) \(count) notification\(count == 1 ? "" : "s")"
    }

    /// What it does, said on the confirmation page.
    var consequence: String {
        switch self {
        case .pause: return "They stop firing until resumed. Nothing is lost."
        case .resume:
            return "Their next occurrence is computed again from now; a one-shot whose time passed while paused "
                + "fires at once."
        case .snooze:
            return "Each is delivered once more after the delay, as well as on its own schedule, which does not "
                + "change."
        case .cancel: return "They are removed for good; only the app can schedule them again."
        case .edit:
            return "It keeps its schedule and its place in it: its next delivery, and every one after, has the new "
                + "text."
        }
    }
}
