import ChimeConsole
import ChimePassword
import ChimeProtocol
import ChimeTime
import Synchronization
import Testing

/// The console's routes against a fake fleet: who may see and do what, the protections of every
/// `POST`, and that each action reaches the workers once confirmed and is audited.
@Suite struct ConsoleAppTests {
    /// Answers as a worker would, and keeps every command sent.
    final class FakeData: ConsoleData {
        let sent = Mutex<[(op: Operation, device: String, payload: JSONObject)]>([])
        let refuse = Mutex<ConsoleDataError?>(nil)
        /// Errors for some operations only.
        let failing = Mutex<[Operation: ConsoleDataError]>([:])
        /// Notifications that `list` adds after the first, named `n1`, `n2`, ...
        let moreNotifications = Mutex(0)
        /// When set, `pause`, `resume` and `cancel` report only these of the ids they were given.
        let known = Mutex<Set<String>?>(nil)
        /// Snoozes under way now, and the most at once.
        let snoozing = Mutex((now: 0, most: 0))
        /// While `holding` is true, commands of `held` ops wait until ``release()``.
        let hold = Mutex((holding: false, ops: Set<Operation>(), waiting: [CheckedContinuation<Void, Never>]()))

        func release() {
            let waiting = hold.withLock { state in
                state.holding = false
                let waiting = state.waiting
                state.waiting = []
                return waiting
            }
            for continuation in waiting { continuation.resume() }
        }

        func fleet() async -> [FleetWorker] {
            [FleetWorker(id: "w1", status: ["state": "online", "workerId": "w1", "partition": "0/1"])]
        }

        /// `find`'s answers by worker; the queries asked.
        let findAnswers = Mutex<Result<FleetFindAnswers, ConsoleDataError>>(.success(FleetFindAnswers(pages: [:])))
        let queries = Mutex<[FindQuery]>([])

        func find(_ query: FindQuery) async -> Result<FleetFindAnswers, ConsoleDataError> {
            queries.withLock { $0.append(query) }
            return findAnswers.withLock { $0 }
        }

        func send(_ op: Operation, device: String, _ payload: JSONObject) async -> Result<JSONObject, ConsoleDataError>
        {
            sent.withLock { $0.append((op, device, payload)) }
            await withCheckedContinuation { continuation in
                let held = hold.withLock {
                    guard $0.holding, $0.ops.contains(op) else { return false }
                    $0.waiting.append(continuation)
                    return true
                }
                if !held { continuation.resume() }
            }
            if op == .snooze {
                snoozing.withLock { $0 = (now: $0.now + 1, most: max($0.most, $0.now + 1)) }
                // Let the others that were started run meanwhile.
                for _ in 0..<10 { await Task.yield() }
                snoozing.withLock { $0.now -= 1 }
            }
            if let error = refuse.withLock({ $0 }) ?? failing.withLock({ $0[op] }) { return .failure(error) }
            switch op {
            case .device: return .success(["deviceId": .string(device), "timeZone": "Asia/Shanghai", "badge": 0])
            case .list:
                let first: JSONObject = [
                    "id": "pill", "alertBody": "<script>alert(1)</script>", "repeatInterval": "day",
                    "fireDate": "2026-12-05T10:00:00Z", "timeZone": "Asia/Shanghai",
                ]
                let more = (0..<moreNotifications.withLock { $0 }).map { n -> JSON in
                    .object(["id": .string("n\(n + 1)"), "fireDate": "2026-12-05T10:00:00Z"])
                }
                return .success(["notifications": .array([.object(first)] + more)])
            case .preview: return .success(["fireDates": ["2026-12-06T10:00:00Z"]])
            case .pause, .resume, .cancel:
                let key = op == .pause ? "paused" : op == .resume ? "resumed" : "cancelled"
                var ids = (payload["ids"]?.arrayValue ?? []).compactMap(\.stringValue)
                if let known = known.withLock({ $0 }) { ids = ids.filter(known.contains) }
                return .success([key: .array(ids.map(JSON.string))])
            default: return .success([:])
            }
        }
    }

    /// The audit lines written.
    final class AuditLog: Sendable {
        let entries = Mutex<[AuditEntry]>([])
        func append(_ entry: AuditEntry) { entries.withLock { $0.append(entry) } }
        var all: [AuditEntry] { entries.withLock { $0 } }
    }

    struct World {
        let app: ConsoleApp
        let data: FakeData
        let audit: AuditLog
    }

    static let host = "127.0.0.1:8080"
    static let origin = "http://127.0.0.1:8080"

    static func world(deadline: Duration = ConsoleApp.defaultDeadline) throws -> World {
        var accounts = ConsoleAccounts()
        accounts = try accounts.adding(name: "ops", role: .operator, password: "operator password")
        accounts = try accounts.adding(name: "help", role: .viewer, password: "viewer password")
        let data = FakeData()
        let audit = AuditLog()
        let app = ConsoleApp(
            sessions: ConsoleSessions(accounts: accounts),
            data: data,
            audit: { entry in audit.append(entry) },
            now: { Instant(milliseconds: 1_796_119_200_000) },
            origins: ConsoleOrigins(listenHost: "127.0.0.1", port: 8080, secure: false)
                .adding(origin: "https://console.example.com")!,
            deadline: deadline
        )
        return World(app: app, data: data, audit: audit)
    }

    /// Signs in; returns the Cookie header and the CSRF token of the session.
    static func signIn(
        _ world: World,
        _ name: String,
        _ password: String
    ) async throws -> (cookie: String, csrf: String) {
        let response = await world.app.respond(
            to: ConsoleRequest(
                method: "POST",
                path: "/login",
                form: [("username", name), ("password", password)],
                origin: origin,
                host: host,
                address: "127.0.0.1"
            )
        )
        #expect(response.status == 303)
        let setCookie = try #require(response.headers.first { $0.name == "Set-Cookie" }?.value)
        #expect(setCookie.contains("HttpOnly") && setCookie.contains("Secure") && setCookie.contains("SameSite=Strict"))
        let cookie = String(setCookie.prefix { $0 != ";" })
        let page = await world.app.respond(to: get("/fleet", cookie))
        let html = String(decoding: page.body, as: UTF8.self)
        let csrf = try #require(
            html.firstRange(of: #"name="csrf" value=""#).map { html[$0.upperBound...].prefix { $0 != "\"" } }
        )
        return (cookie, String(csrf))
    }

    static func get(_ path: String, _ cookie: String?, query: [(name: String, value: String)] = []) -> ConsoleRequest {
        ConsoleRequest(method: "GET", path: path, query: query, cookie: cookie, host: host, address: "127.0.0.1")
    }

    static func post(
        _ path: String,
        _ cookie: String?,
        _ form: [(name: String, value: String)],
        origin: String? = origin
    ) -> ConsoleRequest {
        ConsoleRequest(
            method: "POST",
            path: path,
            form: form,
            cookie: cookie,
            origin: origin,
            host: host,
            address: "127.0.0.1"
        )
    }

    @Test func everyPageButSignInNeedsASession() async throws {
        let w = try Self.world()
        for path in ["/", "/fleet", "/find", "/device/phone-1"] {
            let response = await w.app.respond(to: Self.get(path, nil))
            #expect(response.status == 303 && response.headers.contains { $0 == ("Location", "/login") }, "\(path)")
        }
        let forged = await w.app.respond(
            to: Self.post("/device/phone-1/act", "__Host-chime_console=forged", [("action", "cancel")])
        )
        #expect(forged.status == 403)
        #expect(w.data.sent.withLock { $0.isEmpty })
        #expect(await w.app.respond(to: Self.get("/console.css", nil)).status == 200)
        #expect(await w.app.respond(to: Self.get("/login", nil)).status == 200)
    }

    @Test func aRequestForAnotherHostIsMisdirectedEvenFromThatHost() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "ops", "operator password")
        // DNS rebinding: evil.example resolves to the console's address; its page's requests carry
        // its own Host and Origin, which agree.
        for host in [
            "evil.example:8080", "evil.example", "127.0.0.1:8081", "127.0.0.1", "", "console.example.com:8080",
        ] {
            let get = ConsoleRequest(method: "GET", path: "/fleet", cookie: cookie, host: host, address: "127.0.0.1")
            #expect(await w.app.respond(to: get).status == 421, "\(host)")
            let post = ConsoleRequest(
                method: "POST",
                path: "/device/phone-1/act",
                form: [("action", "cancel"), ("ids", "pill"), ("confirm", "yes"), ("csrf", csrf)],
                cookie: cookie,
                origin: "http://\(host)",
                host: host,
                address: "127.0.0.1"
            )
            let refused = await w.app.respond(to: post)
            #expect(refused.status == 421, "\(host)")
            #expect(String(decoding: refused.body, as: UTF8.self).contains("--origin"))
        }
        let signIn = Self.signInRequest("ops", "operator password", address: "10.0.0.5")
        var rebound = signIn
        rebound.host = "evil.example:8080"
        rebound.origin = "http://evil.example:8080"
        #expect(await w.app.respond(to: rebound).status == 421)
        #expect(!w.data.sent.withLock { $0.contains { $0.op == .cancel } })
        // The positive controls: the listen address, loopback names on its port, the public origin.
        for host in ["127.0.0.1:8080", "localhost:8080", "[::1]:8080", "console.example.com"] {
            let get = ConsoleRequest(method: "GET", path: "/fleet", cookie: cookie, host: host, address: "127.0.0.1")
            #expect(await w.app.respond(to: get).status == 200, "\(host)")
        }
        // Behind the proxy: its origin, scheme included, and the Host it passes on.
        var proxied = signIn
        proxied.host = "console.example.com"
        proxied.origin = "https://console.example.com"
        #expect(await w.app.respond(to: proxied).status == 303)
        proxied.origin = "http://console.example.com"
        #expect(await w.app.respond(to: proxied).status == 403)
    }

    @Test func theFirstLiveSessionOfSeveralCookiesIsTheOne() async throws {
        let w = try Self.world()
        let (cookie, _) = try await Self.signIn(w, "help", "viewer password")
        #expect(cookie.hasPrefix("__Host-chime_console="))
        let stale = "__Host-chime_console=" + String(repeating: "A", count: 43)
        for header in [
            "\(stale); \(cookie)", "\(cookie); \(stale)", "theme=dark; \(stale); \(stale); \(cookie)",
            String(repeating: "\(stale); ", count: ConsoleSessions.maximumSessionCandidates - 1) + cookie,
        ] {
            #expect(await w.app.respond(to: Self.get("/fleet", header)).status == 200, "\(header)")
        }
        // Past the candidates looked up, a live session is not found.
        let past = String(repeating: "\(stale); ", count: ConsoleSessions.maximumSessionCandidates) + cookie
        #expect(await w.app.respond(to: Self.get("/fleet", past)).status == 303)
        // The name without its prefix is another cookie.
        let unprefixed = String(cookie.dropFirst("__Host-".count))
        #expect(await w.app.respond(to: Self.get("/fleet", unprefixed)).status == 303)
    }

    @Test func aWrongPasswordIsRefusedAndAudited() async throws {
        let w = try Self.world()
        let response = await w.app.respond(
            to: ConsoleRequest(
                method: "POST",
                path: "/login",
                form: [("username", "ops"), ("password", "guess")],
                origin: Self.origin,
                host: Self.host,
                address: "10.0.0.9"
            )
        )
        #expect(response.status == 401)
        #expect(!response.headers.contains { $0.name == "Set-Cookie" })
        #expect(w.audit.all.map(\.outcome) == [.refused])
        // A sign-in posted from another site is refused before the password is looked at.
        let crossSite = await w.app.respond(
            to: ConsoleRequest(
                method: "POST",
                path: "/login",
                form: [("username", "ops"), ("password", "operator password")],
                origin: "https://evil.example",
                host: Self.host,
                address: "10.0.0.9"
            )
        )
        #expect(crossSite.status == 403)
    }

    /// A sign-in from `address`.
    static func signInRequest(_ name: String, _ password: String, address: String) -> ConsoleRequest {
        ConsoleRequest(
            method: "POST",
            path: "/login",
            form: [("username", name), ("password", password)],
            origin: origin,
            host: host,
            address: address
        )
    }

    @Test func theAuditLogNamesOnlyWhatCouldBeAnAccountsName() async throws {
        let w = try Self.world()
        let forged = "x\n{\"who\":\"ops\",\"outcome\":\"ok\"}" + String(repeating: "A", count: 100_000)
        for name in [forged, "bob smith", "nobody", String(repeating: "a", count: 65)] {
            let response = await w.app.respond(to: Self.signInRequest(name, "a wrong password", address: "10.0.0.7"))
            #expect(response.status == 401)
            #expect(response.body.count < 8 * 1024, "the page does not repeat a long name")
        }
        let entries = w.audit.all
        #expect(entries.map(\.who) == ["(invalid name)", "(invalid name)", "nobody", "(invalid name)"])
        #expect(entries.allSatisfy { $0.outcome == .refused && $0.action == "sign-in" && $0.line.utf8.count < 512 })
    }

    @Test func anOverlongSignInIsRefusedBeforeTheRateLimitAndTheHash() async throws {
        let w = try Self.world()
        let long = String(repeating: "p", count: ConsoleApp.maximumPasswordBytes + 1)
        // More than an address may fail: none counts, since none was checked.
        for _ in 0...ConsoleSessions.maximumFailuresPerAddress {
            #expect(await w.app.respond(to: Self.signInRequest("ops", long, address: "10.0.0.8")).status == 401)
            let name = String(repeating: "o", count: ConsoleApp.maximumUsernameBytes + 1)
            #expect(await w.app.respond(to: Self.signInRequest(name, "x", address: "10.0.0.8")).status == 401)
        }
        #expect(w.audit.all.allSatisfy { $0.detail == "name or password too long" })
        // The positive control: the right password from that address still signs in.
        let right = await w.app.respond(to: Self.signInRequest("ops", "operator password", address: "10.0.0.8"))
        #expect(right.status == 303)
        #expect(ConsoleApp.maximumPasswordBytes == PasswordHash.maximumPasswordBytes)
        #expect(ConsoleApp.maximumUsernameBytes == 64)
    }

    @Test func theDevicePageEscapesTheDevicesOwnStrings() async throws {
        let w = try Self.world()
        let (cookie, _) = try await Self.signIn(w, "help", "viewer password")
        let page = await w.app.respond(to: Self.get("/device/phone-1", cookie))
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(page.status == 200)
        #expect(!html.contains("<script>alert(1)</script>"))
        #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(html.contains("Every day"), "the rule in words")
        // A viewer gets no action form.
        #expect(!html.contains("/device/phone-1/act"))
        let ops = w.data.sent.withLock { $0.map(\.op) }
        #expect(Set(ops) == [.device, .list, .inbox, .history, .preview])
    }

    @Test func aSectionWhoseCommandFailedSaysSoAndTheOthersShow() async throws {
        let w = try Self.world()
        let (cookie, _) = try await Self.signIn(w, "help", "viewer password")
        w.data.failing.withLock {
            $0[.list] = ConsoleDataError(
                code: "refused",
                message: "error rate_limited: the device's share of the worker is used up"
            )
        }
        let page = await w.app.respond(to: Self.get("/device/phone-1", cookie))
        let html = String(decoding: page.body, as: UTF8.self)
        #expect(page.status == 200)
        #expect(
            html.contains(
                "The worker refused the list (error rate_limited: the device&#39;s share of the worker is used "
                    + "up). Reload in a moment."
            )
        )
        #expect(!html.contains("No notifications"), "an empty state would say something false")
        #expect(html.contains("role=\"alert\""))
        // The inbox and the history answered: their sections are as usual.
        #expect(html.contains("<h2 id=\"inbox-heading\">Inbox (0)</h2>"))
        #expect(html.contains("<h2 id=\"history-heading\">Delivery history (0)</h2>"))
        #expect(!w.data.sent.withLock { $0.contains { $0.op == .preview } })
        #expect(PageMarkup(html).problems.isEmpty, "\(PageMarkup(html).problems)")

        // A worker that did not answer the history: that section says what to do.
        w.data.failing.withLock { $0 = [.history: ConsoleDataError(code: "unreachable", message: "no reply in 5 s")] }
        let other = String(decoding: await w.app.respond(to: Self.get("/device/phone-1", cookie)).body, as: UTF8.self)
        #expect(other.contains("No worker answered the history (no reply in 5 s). Reload in a moment"))
        #expect(other.contains("Every day"), "the notifications show")
    }

    @Test func atMostTenNotificationsArePreviewed() async throws {
        let w = try Self.world()
        let (cookie, _) = try await Self.signIn(w, "help", "viewer password")
        w.data.moreNotifications.withLock { $0 = 24 }
        let page = await w.app.respond(to: Self.get("/device/phone-1", cookie))
        #expect(page.status == 200)
        #expect(String(decoding: page.body, as: UTF8.self).contains("Notifications (25)"))
        let previews = w.data.sent.withLock { $0.filter { $0.op == .preview } }
        #expect(previews.count == ConsoleApp.previewedNotifications && ConsoleApp.previewedNotifications == 10)
    }

    @Test func aViewerMayNotActAndTheRefusalIsAudited() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "help", "viewer password")
        let response = await w.app.respond(
            to: Self.post(
                "/device/phone-1/act",
                cookie,
                [("action", "cancel"), ("ids", "pill"), ("confirm", "yes"), ("csrf", csrf)]
            )
        )
        #expect(response.status == 403)
        #expect(!w.data.sent.withLock { $0.contains { $0.op == .cancel } })
        #expect(w.audit.all.last?.outcome == .forbidden)
    }

    @Test func anOperatorConfirmsThenTheActionIsSentOnceAndAudited() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "ops", "operator password")
        let form: [(name: String, value: String)] = [
            ("action", "pause"), ("ids", "pill"), ("ids", "exam"), ("csrf", csrf),
        ]
        // First the confirmation page: nothing sent yet.
        let confirm = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, form))
        #expect(confirm.status == 200)
        #expect(String(decoding: confirm.body, as: UTF8.self).contains(#"name="confirm" value="yes""#))
        #expect(!w.data.sent.withLock { $0.contains { $0.op == .pause } })
        // Confirmed: one pause naming both.
        let done = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, form + [("confirm", "yes")]))
        #expect(done.status == 200)
        #expect(String(decoding: done.body, as: UTF8.self).contains("Paused 2 notifications"))
        let pauses = w.data.sent.withLock { $0.filter { $0.op == .pause } }
        #expect(pauses.count == 1)
        #expect(pauses.first?.payload["ids"] == .array(["exam", "pill"]))
        let entry = try #require(w.audit.all.last)
        #expect(entry.who == "ops" && entry.action == "pause" && entry.ids == ["exam", "pill"] && entry.outcome == .ok)
        #expect(entry.line.contains(#""device":"phone-1""#))
    }

    @Test func aPostWithoutTheTokenOrFromAnotherOriginChangesNothing() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "ops", "operator password")
        let base: [(name: String, value: String)] = [("action", "cancel"), ("ids", "pill"), ("confirm", "yes")]
        // Another token: the session's with its first character changed (the token is random).
        let wrong = (csrf.first == "x" ? "y" : "x") + csrf.dropFirst()
        for (form, origin) in [
            (base, Self.origin), (base + [("csrf", wrong)], Self.origin),
            (base + [("csrf", csrf)], "https://evil.example"), (base + [("csrf", csrf)], "null"),
        ] {
            let response = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, form, origin: origin))
            #expect(response.status == 403)
        }
        #expect(!w.data.sent.withLock { $0.contains { $0.op == .cancel } })
        // Each refusal is in the audit log, after the sign-in.
        let refusals = w.audit.all.dropFirst()
        #expect(refusals.map(\.outcome) == [.refused, .refused, .refused, .refused])
        #expect(refusals.allSatisfy { $0.who == "ops" && $0.action == "cancel" && $0.device == "phone-1" })
        #expect(
            refusals.map(\.detail) == [
                "missing or wrong CSRF token", "missing or wrong CSRF token", "not sent from this console (Origin)",
                "not sent from this console (Origin)",
            ]
        )
        // A form without an action is named by its path; a foreign sign-in by its action.
        _ = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, [("ids", "pill")]))
        #expect(w.audit.all.last?.action == "/device/phone-1/act")
        var foreign = Self.signInRequest("ops", "operator password", address: "10.0.0.9")
        foreign.origin = "https://evil.example"
        #expect(await w.app.respond(to: foreign).status == 403)
        #expect(w.audit.all.last?.action == "sign-in" && w.audit.all.last?.outcome == .refused)
        // Signing out ends the session: the cookie no longer opens a page.
        _ = await w.app.respond(to: Self.post("/logout", cookie, [("csrf", csrf)]))
        #expect(await w.app.respond(to: Self.get("/fleet", cookie)).status == 303)
    }

    @Test func snoozeIsOneCommandAPerIdWithItsDelayInSeconds() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "ops", "operator password")
        let form: [(name: String, value: String)] = [
            ("action", "snooze"), ("ids", "a"), ("ids", "b"), ("minutes", "15"), ("confirm", "yes"), ("csrf", csrf),
        ]
        #expect(await w.app.respond(to: Self.post("/device/phone-1/act", cookie, form)).status == 200)
        let snoozes = w.data.sent.withLock { $0.filter { $0.op == .snooze } }
        #expect(Set(snoozes.compactMap { $0.payload["id"]?.stringValue }) == ["a", "b"] && snoozes.count == 2)
        #expect(snoozes.allSatisfy { $0.payload["after"] == .int(900) })
        // Out of range: nothing sent.
        let far = [("action", "snooze"), ("ids", "a"), ("minutes", "20000"), ("confirm", "yes"), ("csrf", csrf)]
        #expect(await w.app.respond(to: Self.post("/device/phone-1/act", cookie, far)).status == 400)
        #expect(w.data.sent.withLock { $0.filter { $0.op == .snooze } }.count == 2)
    }

    @Test func theResultCountsWhatTheWorkerReported() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "ops", "operator password")
        w.data.known.withLock { $0 = ["pill"] }
        for (action, done) in [("pause", "Paused"), ("resume", "Resumed"), ("cancel", "Cancelled")] {
            let form = [("action", action), ("ids", "pill"), ("ids", "gone"), ("confirm", "yes"), ("csrf", csrf)]
            let response = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, form))
            let html = String(decoding: response.body, as: UTF8.self)
            #expect(response.status == 200)
            #expect(html.contains("\(done) 1 notification<"), "\(action)")
            #expect(html.contains("The worker reported 1 of the 2 selected"), "\(action)")
            #expect(w.audit.all.last?.detail == "the worker reported 1 of 2")
        }
        // A reply without its list reports none.
        w.data.known.withLock { $0 = [] }
        let form = [("action", "pause"), ("ids", "pill"), ("confirm", "yes"), ("csrf", csrf)]
        let none = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, form))
        #expect(String(decoding: none.body, as: UTF8.self).contains("Paused 0 notifications"))
    }

    @Test func anActionMayNameTheMostIds() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "ops", "operator password")
        let ids = (0..<ConsoleApp.maximumIds).map { "n\($0)" }
        let form: [(name: String, value: String)] =
            [("action", "cancel"), ("confirm", "yes"), ("csrf", csrf), ("minutes", "5")] + ids.map { ("ids", $0) }
        #expect(form.count <= ConsoleApp.maximumFormFields)
        let response = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, form))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self).contains("Cancelled 1000 notifications"))
        let more = form + [("ids", "one-more")]
        #expect(await w.app.respond(to: Self.post("/device/phone-1/act", cookie, more)).status == 400)
    }

    @Test func manySnoozesGoEightAtATimeAndStopWhenNoWorkerAnswers() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "ops", "operator password")
        let ids = (0..<30).map { "n\($0)" }
        let form: [(name: String, value: String)] =
            [("action", "snooze"), ("minutes", "5"), ("confirm", "yes"), ("csrf", csrf)] + ids.map { ("ids", $0) }
        let done = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, form))
        #expect(done.status == 200)
        #expect(String(decoding: done.body, as: UTF8.self).contains("Snoozed 30 notifications"))
        #expect(w.data.sent.withLock { $0.filter { $0.op == .snooze } }.count == 30)
        #expect(w.data.snoozing.withLock { $0.most } <= ConsoleApp.snoozesAtOnce)

        // No worker answers: the first eight were sent together, and no more after their answers.
        w.data.sent.withLock { $0 = [] }
        w.data.failing.withLock { $0[.snooze] = ConsoleDataError(code: "unreachable", message: "no reply in 5 s") }
        let failed = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, form))
        let html = String(decoding: failed.body, as: UTF8.self)
        #expect(failed.status == 502)
        #expect(w.data.sent.withLock { $0.filter { $0.op == .snooze } }.count == ConsoleApp.snoozesAtOnce)
        #expect(html.contains("Snoozed 0 of the 30 selected") && html.contains("22 not sent"))
        let entry = try #require(w.audit.all.last)
        #expect(entry.action == "snooze" && entry.outcome == .failed && entry.ids.count == 30)
    }

    @Test func aRequestPastItsDeadlineIsAnswered504() async throws {
        let w = try Self.world(deadline: .seconds(2))
        let (cookie, _) = try await Self.signIn(w, "help", "viewer password")
        w.data.hold.withLock { $0 = (holding: true, ops: [.device], waiting: []) }
        let page = await w.app.respond(to: Self.get("/device/phone-1", cookie))
        #expect(page.status == 504)
        #expect(String(decoding: page.body, as: UTF8.self).contains("The workers did not answer within 2 seconds"))
        w.data.release()
        // The positive control: the same page, answered, within the same deadline.
        #expect(await w.app.respond(to: Self.get("/device/phone-1", cookie)).status == 200)
    }

    @Test func findGoesToTheDeviceAndRefusesWhatIsNotAnId() async throws {
        let w = try Self.world()
        let (cookie, _) = try await Self.signIn(w, "help", "viewer password")
        let found = await w.app.respond(
            to: Self.get("/find", cookie, query: [("device", "phone-1"), ("key", "kind"), ("value", "pill")])
        )
        #expect(found.status == 303)
        #expect(found.headers.first { $0.name == "Location" }?.value.hasPrefix("/device/phone-1?") == true)
        let bad = await w.app.respond(to: Self.get("/find", cookie, query: [("device", "<b>x</b>")]))
        #expect(bad.status == 400)
        #expect(!String(decoding: bad.body, as: UTF8.self).contains("<b>x</b>"))
        #expect(await w.app.respond(to: Self.get("/device/%3Cb%3E", cookie)).status == 404)
    }

    @Test func aWorkerThatDoesNotAnswerSaysWhatToDo() async throws {
        let w = try Self.world()
        let (cookie, _) = try await Self.signIn(w, "help", "viewer password")
        w.data.refuse.withLock { $0 = ConsoleDataError(code: "unreachable", message: "no reply within 5 s") }
        let page = await w.app.respond(to: Self.get("/device/phone-1", cookie))
        #expect(page.status == 504)
        #expect(String(decoding: page.body, as: UTF8.self).contains("is a worker online?"))
    }

    static func page(_ ids: [String], next: String?, examined: Int = 10) -> FindPage {
        FindPage(
            devices: ids.map { FoundDevice(deviceId: $0, pending: 2, matching: ["promo"], matchingCount: 1) },
            next: next,
            examined: examined
        )
    }

    @Test func listingDevicesAsksTheFleetOnceAndShowsTheMergedPageWithItsNext() async throws {
        let w = try Self.world()
        let (cookie, _) = try await Self.signIn(w, "help", "viewer password")
        // w1 looked at everything; w2 stopped at phone-5: phone-7 waits for the next page.
        let answers = FleetFindAnswers(
            pages: [
                "w1": Self.page(["phone-1", "phone-7"], next: nil),
                "w2": Self.page(["phone-3", "phone-5"], next: "phone-5"),
            ],
            silent: ["w3"]
        )
        w.data.findAnswers.withLock { $0 = .success(answers) }
        let query: [(name: String, value: String)] = [
            ("device", "phone-"), ("key", "campaign"), ("value", "spring"), ("go", "list"),
        ]
        let response = await w.app.respond(to: Self.get("/find", cookie, query: query))
        #expect(response.status == 200)
        let html = String(decoding: response.body, as: UTF8.self)
        let asked = try #require(w.data.queries.withLock { $0.last })
        #expect(asked == FindQuery(prefix: "phone-", match: ["campaign": "spring"], limit: ConsoleApp.foundPerPage))
        let links = ["phone-1", "phone-3", "phone-5"].map { "<a href=\"/device/\($0)?key=campaign&amp;value=spring\">" }
        let places = links.compactMap { html.range(of: $0)?.lowerBound }
        #expect(places.count == 3 && places == places.sorted(), "in id order")
        #expect(!html.contains("phone-7"))
        #expect(html.contains("/find?go=list&amp;device=phone-&amp;key=campaign&amp;value=spring&amp;after=phone-5"))
        #expect(html.contains("Worker w3 did not answer in time"))
        // The next page asks after phone-5, and is the last.
        w.data.findAnswers.withLock {
            $0 = .success(FleetFindAnswers(pages: ["w1": Self.page(["phone-7"], next: nil)]))
        }
        let next = await w.app.respond(to: Self.get("/find", cookie, query: query + [("after", "phone-5")]))
        #expect(w.data.queries.withLock { $0.last?.after } == "phone-5")
        let nextHTML = String(decoding: next.body, as: UTF8.self)
        #expect(nextHTML.contains(">phone-7</a>") && !nextHTML.contains("Next devices"))
        #expect(nextHTML.contains("First devices"))
    }

    @Test func aTagAloneSearchesTheFleetAndWhatIsNotAnIdsBeginningIsRefused() async throws {
        let w = try Self.world()
        let (cookie, _) = try await Self.signIn(w, "help", "viewer password")
        let tagOnly = await w.app.respond(to: Self.get("/find", cookie, query: [("key", "campaign"), ("value", "x")]))
        #expect(tagOnly.status == 200)
        #expect(w.data.queries.withLock { $0.last } == FindQuery(match: ["campaign": "x"], limit: 50))
        #expect(String(decoding: tagOnly.body, as: UTF8.self).contains("No device with a notification tagged"))
        let bad = await w.app.respond(to: Self.get("/find", cookie, query: [("device", "a/b"), ("go", "list")]))
        #expect(bad.status == 400)
        #expect(w.data.queries.withLock { $0.count } == 1)
        w.data.findAnswers.withLock {
            $0 = .failure(ConsoleDataError(code: "unreachable", message: "no worker is online"))
        }
        let none = await w.app.respond(to: Self.get("/find", cookie, query: [("device", "a"), ("go", "list")]))
        #expect(none.status == 504)
        #expect(String(decoding: none.body, as: UTF8.self).contains("is a worker online?"))
    }

    @Test func anOperatorEditsABodyAfterConfirmingWithAnAuditLine() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "ops", "operator password")
        let form = await w.app.respond(to: Self.get("/device/phone-1/edit", cookie, query: [("id", "pill")]))
        #expect(form.status == 200)
        let formHTML = String(decoding: form.body, as: UTF8.self)
        #expect(formHTML.contains(">&lt;script&gt;alert(1)&lt;/script&gt;</textarea>"))
        // The title stays empty (unchanged), the body changes: only the body is confirmed and sent.
        let fields: [(name: String, value: String)] = [
            ("action", "edit"), ("ids", "pill"), ("alertTitle", ""), ("alertBody", "Take two"), ("csrf", csrf),
        ]
        let confirm = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, fields))
        #expect(confirm.status == 200)
        let confirmHTML = String(decoding: confirm.body, as: UTF8.self)
        #expect(confirmHTML.contains(#"<input type="hidden" name="alertBody" value="Take two">"#))
        #expect(!confirmHTML.contains(#"name="alertTitle""#))
        #expect(!w.data.sent.withLock { $0.contains { $0.op == .update } })
        let confirmed: [(name: String, value: String)] = [
            ("action", "edit"), ("ids", "pill"), ("alertBody", "Take two"), ("confirm", "yes"), ("csrf", csrf),
        ]
        let done = await w.app.respond(to: Self.post("/device/phone-1/act", cookie, confirmed))
        #expect(done.status == 200)
        let updates = w.data.sent.withLock { $0.filter { $0.op == .update } }
        #expect(updates.count == 1)
        #expect(updates.first?.payload == ["id": "pill", "alertBody": "Take two"])
        let entry = try #require(w.audit.all.last)
        #expect(entry.action == "edit" && entry.ids == ["pill"] && entry.outcome == .ok)
        #expect(entry.detail == "changed alertBody")
        // Nothing changed: nothing to confirm.
        let same = await w.app.respond(
            to: Self.post(
                "/device/phone-1/act",
                cookie,
                [("action", "edit"), ("ids", "pill"), ("alertBody", "<script>alert(1)</script>"), ("csrf", csrf)]
            )
        )
        #expect(same.status == 400)
    }

    @Test func aViewerMayNotEditAndTheServerRefusesTheForgedPost() async throws {
        let w = try Self.world()
        let (cookie, csrf) = try await Self.signIn(w, "help", "viewer password")
        let form = await w.app.respond(to: Self.get("/device/phone-1/edit", cookie, query: [("id", "pill")]))
        #expect(form.status == 403)
        let forged = await w.app.respond(
            to: Self.post(
                "/device/phone-1/act",
                cookie,
                [("action", "edit"), ("ids", "pill"), ("alertBody", "x"), ("confirm", "yes"), ("csrf", csrf)]
            )
        )
        #expect(forged.status == 403)
        #expect(!w.data.sent.withLock { $0.contains { $0.op == .update } })
        #expect(w.audit.all.last?.action == "edit" && w.audit.all.last?.outcome == .forbidden)
    }
}
