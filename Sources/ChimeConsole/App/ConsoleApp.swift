import ChimePassword
import ChimeProtocol
import ChimeTime
import Synchronization

/// A request as the console sees it: what the HTTP server received, its query and form decoded.
public struct ConsoleRequest: Sendable {
    /// `GET`, `HEAD` or `POST`.
    public var method: String
    /// The path as received (percent-encoded), without the query.
    public var path: String
    public var query: [(name: String, value: String)]
    /// A `POST`'s `application/x-www-form-urlencoded` fields.
    public var form: [(name: String, value: String)]
    /// The `Cookie`, `Origin`, `Referer` and `Host` headers.
    public var cookie: String?
    public var origin: String?
    public var referer: String?
    public var host: String?
    /// The client's address, as the socket gives it.
    public var address: String

    public init(
        method: String,
        path: String,
        query: [(name: String, value: String)] = [],
        form: [(name: String, value: String)] = [],
        cookie: String? = nil,
        origin: String? = nil,
        referer: String? = nil,
        host: String? = nil,
        address: String
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.form = form
        self.cookie = cookie
        self.origin = origin
        self.referer = referer
        self.host = host
        self.address = address
    }

    /// The first query field named `name`.
    func queryValue(_ name: String) -> String? { query.first { $0.name == name }?.value }
    /// The first form field named `name`, and every one.
    func formValue(_ name: String) -> String? { form.first { $0.name == name }?.value }
    func formValues(_ name: String) -> [String] { form.filter { $0.name == name }.map(\.value) }
}

/// The console's answer: the HTTP server sends it with ``ConsoleSessions/securityHeaders``.
public struct ConsoleResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    /// Headers besides the security headers: `Set-Cookie`, `Location`, `Retry-After`.
    public var headers: [(name: String, value: String)]

    init(status: Int, html: String, headers: [(name: String, value: String)] = []) {
        self.status = status
        self.contentType = "text/html; charset=utf-8"
        self.body = Array(html.utf8)
        self.headers = headers
    }

    init(status: Int, contentType: String, body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = []
    }

    /// `303 See Other` to `location` (after a form, so that reloading does not post it again).
    static func redirect(_ location: String, headers: [(name: String, value: String)] = []) -> ConsoleResponse {
        ConsoleResponse(status: 303, html: "", headers: [("Location", location)] + headers)
    }
}

/// Why the workers did not answer as asked: the error reply's code and message, or `unreachable`
/// when no reply came in time.
public struct ConsoleDataError: Error, Sendable, Hashable {
    public var code: String
    public var message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }
}

/// What the console reads from the workers and sends to them, over MQTT as a backend account (the
/// `chime` executable's implementation); a fake in tests.
public protocol ConsoleData: Sendable {
    /// Every worker that published a status, with its latest stats and the stats before them.
    func fleet() async -> [FleetWorker]
    /// Sends a command for `device` and returns its reply's `result`.
    func send(_ op: Operation, device: String, _ payload: JSONObject) async -> Result<JSONObject, ConsoleDataError>
    /// Asks every worker online a `find` query (PROTOCOL.md section 3.12) and returns what each
    /// answered; a failure when it could not be asked at all.
    func find(_ query: FindQuery) async -> Result<FleetFindAnswers, ConsoleDataError>
}

/// The console's routes: sign-in and out, the fleet, finding a device, a device's page, and acting
/// on its notifications with a confirmation, each action written to the audit log.
///
/// Every request needs a `Host` of the console's (``ConsoleOrigins``); every page but the sign-in
/// page and the stylesheet needs a session; every `POST` but the sign-in needs the session's CSRF
/// token; every `POST` needs an `Origin` (or `Referer`) that is one of the console's origins and its
/// `Host`'s; acting needs the operator role. Sign-ins are rate-limited per address and per name
/// (``ConsoleSessions``).
public final class ConsoleApp: Sendable {
    /// Notifications shown with their next fire times (one `preview` each), at most: each
    /// preview is a command, and costs the device's share of the worker's rate limit.
    public static let previewedNotifications = 10
    /// Notifications one action may name, at most (the protocol's batch bound).
    public static let maximumIds = 1000
    /// Fields a form may have, at most: ``maximumIds`` ids, and the form's own (`csrf`, `action`,
    /// `minutes`, `confirm`) with room to spare. The HTTP side decodes forms up to this.
    public static let maximumFormFields = maximumIds + 16
    /// Snooze delays offered, in minutes: a minute to a week.
    public static let snoozeMinutes = 1...10_080
    /// Snoozes sent at once, at most: `snooze` names one notification, so snoozing many is a
    /// command each.
    public static let snoozesAtOnce = 8
    /// The longest a request may take by default (``init(sessions:data:audit:now:origins:deadline:)``).
    public static let defaultDeadline: Duration = .seconds(15)

    let sessions: Mutex<ConsoleSessions>
    let data: any ConsoleData
    let audit: @Sendable (AuditEntry) -> Void
    let now: @Sendable () -> Instant
    let origins: ConsoleOrigins
    let deadline: Duration

    /// - Parameters:
    ///   - sessions: the accounts and their sessions.
    ///   - data: the workers.
    ///   - audit: where each action's ``AuditEntry`` goes (a line of the audit log).
    ///   - now: the wall clock.
    ///   - origins: where the console is served: requests for another `Host` are answered 421,
    ///     and `POST`s from another origin are refused.
    ///   - deadline: the longest an answer may take: past it ``respond(to:)`` answers 504, and
    ///     what was under way goes on without anyone waiting for it (an action is still audited).
    public init(
        sessions: ConsoleSessions,
        data: any ConsoleData,
        audit: @escaping @Sendable (AuditEntry) -> Void,
        now: @escaping @Sendable () -> Instant,
        origins: ConsoleOrigins,
        deadline: Duration = ConsoleApp.defaultDeadline
    ) {
        self.sessions = Mutex(sessions)
        self.data = data
        self.audit = audit
        self.now = now
        self.origins = origins
        self.deadline = deadline
    }

    /// Replaces the accounts (the file was read again): sessions of changed accounts end.
    public func replaceAccounts(_ accounts: ConsoleAccounts) {
        sessions.withLock { $0.replaceAccounts(accounts) }
    }

    /// The answer to `request`, within the ``deadline``: the HTTP server waits for it on its only
    /// thread, so no worker that does not answer, and no request that sends many commands, may hold
    /// every other request for longer. Past the deadline the answer is 504; the work goes on, and
    /// its answer is dropped.
    public func respond(to request: ConsoleRequest) async -> ConsoleResponse {
        // The first of the two answers is taken; the other, if it comes, finds the stream full.
        let (answers, answer) = AsyncStream.makeStream(of: ConsoleResponse.self, bufferingPolicy: .bufferingOldest(1))
        Task { answer.yield(await self.route(request)) }
        let timer = Task { [deadline] in
            guard (try? await Task.sleep(for: deadline)) != nil else { return }
            answer.yield(Self.tooSlow(deadline))
        }
        var first: ConsoleResponse?
        for await response in answers {
            first = response
            break
        }
        timer.cancel()
        answer.finish()
        return first ?? Self.tooSlow(deadline)
    }

    /// The answer past the deadline.
    static func tooSlow(_ deadline: Duration) -> ConsoleResponse {
        ConsoleResponse(
            status: 504,
            html: ConsolePages.message(
                title: "No answer in time",
                text: "The workers did not answer within \(deadline.components.seconds) seconds. What you asked "
                    + "may still be done: reload the page in a moment, and check the device's page before acting "
                    + "again. If this goes on, check the fleet page: is a worker online?",
                status: .error,
                signedIn: nil
            )
        )
    }

    /// The answer to a request whose `Host` is not the console's (``ConsoleOrigins``).
    static let misdirected = ConsoleResponse(
        status: 421,
        contentType: "text/plain; charset=utf-8",
        body: Array(
            """
            This console does not answer for that host name. Open it at the address it was started with, \
            or start it with --origin for the address you use (behind a proxy, the proxy's).

            """.utf8
        )
    )

    func route(_ request: ConsoleRequest) async -> ConsoleResponse {
        guard origins.allowsHost(request.host) else { return Self.misdirected }
        let path = request.path
        let method = request.method == "HEAD" ? "GET" : request.method
        switch (method, path) {
        case ("GET", ConsolePaths.stylesheet):
            return ConsoleResponse(
                status: 200,
                contentType: "text/css; charset=utf-8",
                body: Array(ConsolePages.stylesheet.utf8)
            )
        case ("GET", ConsolePaths.login):
            if signedIn(request) != nil { return .redirect(ConsolePaths.fleet) }
            return ConsoleResponse(status: 200, html: ConsolePages.login())
        case ("POST", ConsolePaths.login):
            return await login(request)
        default:
            break
        }
        guard let session = signedIn(request) else {
            if method == "GET" { return .redirect(ConsolePaths.login) }
            return ConsoleResponse(status: 403, html: ConsolePages.login(error: "Your session ended. Sign in again."))
        }
        let who = ConsolePages.SignedIn(account: session.account, role: session.role, csrf: session.csrfToken)
        if method == "POST" {
            let fromHere = fromThisConsole(request)
            guard fromHere, ConsoleSessions.validCSRF(request.formValue("csrf"), for: session) else {
                audit(
                    AuditEntry(
                        who: session.account,
                        role: session.role,
                        address: request.address,
                        action: Self.auditedAction(request),
                        device: Self.devicePath(path)?.device,
                        outcome: .refused,
                        detail: fromHere ? "missing or wrong CSRF token" : "not sent from this console (Origin)",
                        at: now()
                    )
                )
                return message(
                    403,
                    "Not sent",
                    "The form was not sent from this console, or it was open too long. Go back, reload and try again.",
                    who
                )
            }
        }
        switch (method, path) {
        case ("GET", "/"):
            return .redirect(ConsolePaths.fleet)
        case ("GET", ConsolePaths.fleet):
            let workers = await data.fleet()
            return ConsoleResponse(status: 200, html: ConsolePages.fleet(workers: workers, now: now(), signedIn: who))
        case ("GET", ConsolePaths.find):
            return await find(request, who)
        case ("POST", ConsolePaths.logout):
            sessions.withLock { $0.logout(id: session.id) }
            return .redirect(ConsolePaths.login, headers: [("Set-Cookie", ConsoleSessions.clearCookie)])
        default:
            break
        }
        guard let (device, page) = Self.devicePath(path) else {
            return message(404, "Not found", "There is no page here. Use Fleet or Find above.", who)
        }
        switch (method, page) {
        case ("GET", .device): return await devicePage(device, request, who)
        case ("GET", .edit): return await editPage(device, request, session, who)
        case ("POST", .act): return await act(device, request, session, who)
        default: return message(405, "Not allowed", "This page does not take that request.", who)
        }
    }

    // MARK: Sign-in

    /// The live session of the first of the request's session cookies that has one.
    func signedIn(_ request: ConsoleRequest) -> ConsoleSessions.Session? {
        let ids = ConsoleSessions.sessionIds(fromCookieHeader: request.cookie)
        guard !ids.isEmpty else { return nil }
        let now = now()
        return sessions.withLock { sessions in
            for id in ids {
                if let session = sessions.session(id: id, now: now) { return session }
            }
            return nil
        }
    }

    /// What the audit log says of a sign-in whose name could not be an account's
    /// (``ConsoleAccounts/isValidName(_:)``): no one writes what they like, or as much as they
    /// like, into the log.
    public static let invalidNameInAudit = "(invalid name)"
    /// The longest user name a sign-in may give, in bytes: an account's longest.
    public static let maximumUsernameBytes = ConsoleAccounts.maximumNameLength
    /// The longest password a sign-in may give, in bytes: the longest libcrypt hashes.
    public static let maximumPasswordBytes = PasswordHash.maximumPasswordBytes

    func login(_ request: ConsoleRequest) async -> ConsoleResponse {
        let name = request.formValue("username") ?? ""
        let password = request.formValue("password") ?? ""
        let now = now()
        let lengthsAllowed =
            name.utf8.count <= Self.maximumUsernameBytes && password.utf8.count <= Self.maximumPasswordBytes
        // What the page fills the name in with again, escaped: only a name of an allowed length.
        let shownName = lengthsAllowed ? name : ""
        func record(_ outcome: AuditEntry.Outcome, role: ConsoleRole? = nil, _ detail: String? = nil) {
            audit(
                AuditEntry(
                    who: ConsoleAccounts.isValidName(name) ? name : Self.invalidNameInAudit,
                    role: role,
                    address: request.address,
                    action: "sign-in",
                    outcome: outcome,
                    detail: detail,
                    at: now
                )
            )
        }
        guard fromThisConsole(request) else {
            record(.refused, "not sent from this console (Origin)")
            return ConsoleResponse(
                status: 403,
                html: ConsolePages.login(error: "The form was not sent from this console. Reload the page.")
            )
        }
        // Refused before the rate limit and the hash: no account has such a name or password.
        guard lengthsAllowed else {
            record(.refused, "name or password too long")
            return ConsoleResponse(
                status: 401,
                html: ConsolePages.login(error: ConsoleSessions.LoginOutcome.refusedMessage)
            )
        }
        let (admission, accounts) = sessions.withLock {
            ($0.beginLogin(name: name, address: request.address, now: now), $0.accounts)
        }
        let ticket: ConsoleSessions.LoginTicket
        switch admission {
        case .tooManyAttempts(let seconds):
            record(.refused, "too many attempts")
            return ConsoleResponse(
                status: 429,
                html: ConsolePages.login(
                    error: "Too many attempts to sign in. Try again in \(seconds) seconds.",
                    username: shownName
                ),
                headers: [("Retry-After", "\(seconds)")]
            )
        case .proceed(let admitted):
            ticket = admitted
        }
        // The hash's cost (tens of milliseconds) outside the lock.
        let account = accounts.authenticate(name: name, password: password)
        let outcome = sessions.withLock { $0.finishLogin(ticket, account: account, now: now) }
        switch outcome {
        case .signedIn(let session):
            record(.ok, role: session.role)
            return .redirect(ConsolePaths.fleet, headers: [("Set-Cookie", ConsoleSessions.setCookie(session))])
        case .refused, .tooManyAttempts:
            record(.refused)
            return ConsoleResponse(
                status: 401,
                html: ConsolePages.login(error: ConsoleSessions.LoginOutcome.refusedMessage, username: shownName)
            )
        }
    }

    // MARK: Pages

    func devicePage(_ id: String, _ request: ConsoleRequest, _ who: ConsolePages.SignedIn) async -> ConsoleResponse {
        let tag = Self.tag(request)
        var listQuery: JSONObject = ["limit": 1000]
        if let tag { listQuery["match"] = .object(["userInfo": .object([tag.key: .string(tag.value)])]) }
        async let device = data.send(.device, device: id, [:])
        async let list = data.send(.list, device: id, listQuery)
        async let inbox = data.send(.inbox, device: id, ["limit": 1000])
        async let history = data.send(.history, device: id, [:])
        let settings: JSONObject
        switch await device {
        case .success(let result): settings = result
        case .failure(let error): return unavailable(id, error, who)
        }
        var unavailable: [ConsolePages.DeviceSection: String] = [:]
        /// The objects of `key` in a result; none, and the section unavailable, when it failed.
        func rows(
            _ result: Result<JSONObject, ConsoleDataError>,
            _ key: String,
            _ section: ConsolePages.DeviceSection,
            _ op: Operation
        ) -> [JSONObject] {
            switch result {
            case .success(let object):
                return (object[key]?.arrayValue ?? []).compactMap(\.objectValue)
            case .failure(let error):
                unavailable[section] = Self.sectionProblem(op, error)
                return []
            }
        }
        let notifications = rows(await list, "notifications", .notifications, .list)
        let inboxRows = rows(await inbox, "deliveries", .inbox, .inbox)
        let historyRows = rows(await history, "deliveries", .history, .history)
        var previews: [String: [String]] = [:]
        let enabled = notifications.filter { $0["enabled"] != .bool(false) }
        let previewed = Array(enabled.compactMap { $0["id"]?.stringValue }.prefix(Self.previewedNotifications))
        await withTaskGroup(of: (String, [String])?.self) { group in
            for nid in previewed {
                group.addTask {
                    guard
                        case .success(let result) = await self.data.send(
                            .preview,
                            device: id,
                            ["id": .string(nid), "count": 5]
                        )
                    else { return nil }
                    return (nid, (result["fireDates"]?.arrayValue ?? []).compactMap(\.stringValue))
                }
            }
            for await case let (nid, dates)? in group { previews[nid] = dates }
        }
        let html = ConsolePages.device(
            id: id,
            device: settings,
            notifications: notifications,
            previews: previews,
            inbox: inboxRows,
            history: historyRows,
            tagFilter: tag,
            unavailable: unavailable,
            signedIn: who
        )
        return ConsoleResponse(status: 200, html: html)
    }

    /// What a section of the device page says when its command failed: what happened and what to
    /// do, such as "The worker refused the list (error rate_limited: ...). Reload in a moment."
    static func sectionProblem(_ op: Operation, _ error: ConsoleDataError) -> String {
        switch error.code {
        case "unreachable":
            return "No worker answered the \(op.rawValue) (\(error.message)). Reload in a moment; if this goes "
                + "on, check the fleet page: is a worker online?"
        case "refused":
            return "The worker refused the \(op.rawValue) (\(error.message)). Reload in a moment."
        default:
            return "The worker's answer to the \(op.rawValue) could not be read (\(error.message)). Reload in a "
                + "moment."
        }
    }

    // MARK: Acting

    /// The audit line of an action on a device's notifications, by the account signed in.
    func auditAction(
        _ action: ConsoleAction,
        by session: ConsoleSessions.Session,
        _ request: ConsoleRequest,
        device: String,
        ids: [String],
        _ outcome: AuditEntry.Outcome,
        _ detail: String?
    ) {
        audit(
            AuditEntry(
                who: session.account,
                role: session.role,
                address: request.address,
                action: action.rawValue,
                device: device,
                ids: ids,
                outcome: outcome,
                detail: detail,
                at: now()
            )
        )
    }

    func act(
        _ device: String,
        _ request: ConsoleRequest,
        _ session: ConsoleSessions.Session,
        _ who: ConsolePages.SignedIn
    ) async -> ConsoleResponse {
        guard let action = request.formValue("action").flatMap(ConsoleAction.init(rawValue:)) else {
            return message(400, "Nothing to do", "Choose an action on the device's page.", who, back: device)
        }
        if action == .edit { return await edit(device, request, session, who) }
        let ids = Array(Set(request.formValues("ids"))).sorted()
        let minutes = request.formValue("minutes").flatMap(Int.init)
        func record(_ outcome: AuditEntry.Outcome, _ detail: String? = nil) {
            auditAction(action, by: session, request, device: device, ids: ids, outcome, detail)
        }
        guard session.role.may(action) else {
            record(.forbidden)
            return notAllowed(who, back: device)
        }
        guard !ids.isEmpty, ids.count <= Self.maximumIds, ids.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 256 }) else {
            return message(
                400,
                "Nothing selected",
                "Tick the box of each notification to \(action.rawValue) (at most \(Self.maximumIds)).",
                who,
                back: device
            )
        }
        if action == .snooze {
            guard let minutes, Self.snoozeMinutes.contains(minutes) else {
                let range = "\(Self.snoozeMinutes.lowerBound) to \(Self.snoozeMinutes.upperBound)"
                return message(400, "No delay", "Give the snooze a delay of \(range) minutes.", who, back: device)
            }
        }
        guard request.formValue("confirm") == "yes" else {
            return ConsoleResponse(
                status: 200,
                html: ConsolePages.confirm(
                    action: action,
                    device: device,
                    ids: ids,
                    snoozeMinutes: minutes,
                    signedIn: who
                )
            )
        }
        var failures: [String] = []
        var reported = ids.count
        if action == .snooze, let minutes {
            let outcome = await snooze(ids, device: device, seconds: Int64(minutes) * 60)
            failures = outcome.failures
            reported = outcome.done
        } else {
            let op: Operation =
                switch action {
                case .pause: .pause
                case .resume: .resume
                case .cancel: .cancel
                case .snooze: .snooze
                case .edit: .update
                }
            switch await data.send(op, device: device, ["ids": .array(ids.map(JSON.string))]) {
            case .success(let result):
                // What the worker says it changed, not what was asked.
                reported = result[Self.resultKey(action)]?.arrayValue?.count ?? 0
            case .failure(let error):
                failures.append(error.message)
            }
        }
        if failures.isEmpty {
            let fewer = reported < ids.count
            record(.ok, fewer ? "the worker reported \(reported) of \(ids.count)" : nil)
            let rest =
                fewer
                ? " The worker reported \(reported) of the \(ids.count) selected: the others were not found "
                    + "(cancelled meanwhile, perhaps). Reload the device to see where they stand."
                : ""
            return message(
                200,
                action.result(count: reported),
                "Done on device \(device).\(rest)",
                who,
                status: .success,
                back: device
            )
        }
        record(.failed, failures.joined(separator: "; "))
        let partly = action == .snooze ? "Snoozed \(reported) of the \(ids.count) selected. " : ""
        return message(
            502,
            "Not done",
            "\(partly)The worker refused or did not answer: \(failures.joined(separator: "; ")). Reload the device to "
                + "see what changed.",
            who,
            back: device
        )
    }

    /// Snoozes each of `ids` by `seconds`: a command each, ``snoozesAtOnce`` at a time, and none
    /// started after one that no worker answered (the others would wait as long for nothing).
    /// - Returns: how many were snoozed, and what became of the others, in the order of `ids`.
    func snooze(_ ids: [String], device: String, seconds: Int64) async -> (done: Int, failures: [String]) {
        @Sendable func send(_ index: Int) async -> (Int, Result<JSONObject, ConsoleDataError>) {
            (index, await data.send(.snooze, device: device, ["id": .string(ids[index]), "after": .int(seconds)]))
        }
        return await withTaskGroup(of: (Int, Result<JSONObject, ConsoleDataError>).self) { group in
            var next = 0
            var done = 0
            var failed: [(index: Int, text: String)] = []
            var unreachable = false
            while next < min(ids.count, Self.snoozesAtOnce) {
                group.addTask { [next] in await send(next) }
                next += 1
            }
            for await (index, result) in group {
                switch result {
                case .success:
                    done += 1
                case .failure(let error):
                    failed.append((index, "\(ids[index]): \(error.message)"))
                    if error.code == "unreachable" { unreachable = true }
                }
                if !unreachable, next < ids.count {
                    group.addTask { [next] in await send(next) }
                    next += 1
                }
            }
            var failures = failed.sorted { $0.index < $1.index }.map(\.text)
            if next < ids.count {
                failures.append("\(ids.count - next) not sent, since no worker answered")
            }
            return (done, failures)
        }
    }

    // MARK: Helpers

    /// Whether a `POST` comes from the console's own pages: its `Origin` (or `Referer`) is one of
    /// the console's origins, and the one of its `Host`.
    func fromThisConsole(_ request: ConsoleRequest) -> Bool {
        origins.allowsSource(origin: request.origin, referer: request.referer)
            && ConsoleSessions.originAllowed(origin: request.origin, referer: request.referer, host: request.host)
    }

    /// What the audit log calls a refused `POST`: the form's action when it is one
    /// (``ConsoleAction``), `sign-out`, or the path (at most 200 characters).
    static func auditedAction(_ request: ConsoleRequest) -> String {
        if let action = request.formValue("action").flatMap(ConsoleAction.init(rawValue:)) { return action.rawValue }
        if request.path == ConsolePaths.logout { return "sign-out" }
        return String(request.path.prefix(200))
    }

    /// The member of a `pause`, `resume` or `cancel` reply that lists the notifications changed
    /// (PROTOCOL.md sections 3.2 and 3.3).
    static func resultKey(_ action: ConsoleAction) -> String {
        switch action {
        case .pause: "paused"
        case .resume: "resumed"
        case .cancel: "cancelled"
        case .snooze: "snoozed"
        case .edit: "updated"
        }
    }

    /// The pages under `/device/{id}`.
    enum DevicePage {
        /// `/device/{id}`: the device.
        case device
        /// `/device/{id}/act`: where actions post.
        case act
        /// `/device/{id}/edit`: the form that edits a notification.
        case edit
    }

    /// `/device/{id}`, `/device/{id}/act` or `/device/{id}/edit`, the id percent-decoded and valid.
    static func devicePath(_ path: String) -> (device: String, page: DevicePage)? {
        guard path.hasPrefix("/device/") else { return nil }
        var rest = path.dropFirst("/device/".count)
        var page = DevicePage.device
        for (suffix, kind) in [("/act", DevicePage.act), ("/edit", .edit)] where rest.hasSuffix(suffix) {
            page = kind
            rest = rest.dropLast(suffix.count)
        }
        guard let id = String(rest).removingPercentEncoding, DeviceID.isValid(id) else { return nil }
        return (id, page)
    }

    /// The `key` and `value` of a tag filter, when a key is given.
    static func tag(_ request: ConsoleRequest) -> (key: String, value: String)? {
        guard let key = request.queryValue("key"), !key.isEmpty, key.utf8.count <= 256 else { return nil }
        return (key, String((request.queryValue("value") ?? "").prefix(1024)))
    }

    func unavailable(_ device: String, _ error: ConsoleDataError, _ who: ConsolePages.SignedIn) -> ConsoleResponse {
        let text =
            error.code == "unreachable"
            ? "No worker answered for device \(device): \(error.message). Check the fleet page: is a worker online?"
            : "The worker refused: \(error.message)"
        return message(error.code == "unreachable" ? 504 : 502, "Device \(device)", text, who)
    }

    /// The answer to a viewer who asked for a change.
    func notAllowed(_ who: ConsolePages.SignedIn, back device: String? = nil) -> ConsoleResponse {
        message(403, "Not allowed", "Your account is a viewer's: it may not change notifications.", who, back: device)
    }

    func message(
        _ status: Int,
        _ title: String,
        _ text: String,
        _ who: ConsolePages.SignedIn,
        status kind: ConsolePages.MessageStatus = .error,
        back device: String? = nil
    ) -> ConsoleResponse {
        let back = device.map { ConsolePages.Link(title: "Back to device \($0)", path: ConsolePaths.device($0)) }
        return ConsoleResponse(
            status: status,
            html: ConsolePages.message(title: title, text: text, status: kind, back: back, signedIn: who)
        )
    }
}
