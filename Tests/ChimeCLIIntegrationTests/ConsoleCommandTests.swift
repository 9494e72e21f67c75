import ChimeConsole
import ChimeCore
import ChimeHTTP
import ChimeMQTT
import ChimeSupport
import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeCLI

/// `chime console` as a person runs it: accounts made with the CLI, the console served against a
/// real chimed and mosquitto, signed into and used with curl (a real HTTP client keeping cookies),
/// and its sign-in page opened in headless Chromium under its Content-Security-Policy.
@Suite(.serialized) struct ConsoleCommandTests {
    /// A console serving a world, with an operator `ana` and a viewer `vic`.
    final class Served: Sendable {
        let world: CLIWorld
        let files: TemporaryDirectory
        let console: ChildProcess
        let url: String

        var accounts: String { files.appending("console.passwd") }

        init() async throws {
            world = try await CLIWorld.start()
            files = try TemporaryDirectory(prefix: "chime-console")
            let accounts = files.appending("console.passwd")
            for (name, role, password) in [
                ("ana", "operator", "a long passphrase"), ("vic", "viewer", "a viewer's words"),
            ] {
                let added = try await Self.withInput(
                    password,
                    ["console", "add", name, "--role", role, "--accounts", accounts]
                )
                #expect(added.status == 0, "\(added)")
            }
            console = try ChildProcess(
                try builtProduct("chime"),
                arguments: ["console", "--listen", "127.0.0.1:0", "--accounts", accounts],
                environment: world.environment
            )
            try console.start()
            let serving = await console.waitForLine(onStandardError: true, timeout: .seconds(20)) {
                $0.contains("serving on ")
            }
            let line = try #require(serving, "\(console.standardErrorLines)")
            url = String(line.split(separator: " ").first { $0.hasPrefix("http://") } ?? "")
        }

        func stop() async {
            console.terminate()
            await console.waitForExit(timeout: .seconds(10))
            await world.stop()
        }

        /// `chime ARGUMENTS` with `input` as its standard input.
        static func withInput(_ input: String, _ arguments: [String]) async throws -> ChimeRun {
            let process = try ChildProcess(
                "/bin/bash",
                arguments: ["-c", "printf '%s\\n' \"$1\" | \"${@:2}\"", "bash", input, try builtProduct("chime")]
                    + arguments
            )
            try process.start()
            let end = await process.waitForExit(timeout: .seconds(30))
            return ChimeRun(termination: end, out: process.standardOutputLines, err: process.standardErrorLines)
        }

        /// curl with a cookie jar of its own per `jar`: the status, the body and the headers.
        func curl(
            _ path: String,
            jar: String,
            form: [String] = [],
            origin: String? = nil,
            host: String? = nil
        ) async throws -> (
            status: Int, body: String, headers: String
        ) {
            let body = files.appending("body-\(UInt32.random(in: 0...UInt32.max))")
            let headers = body + ".headers"
            var arguments = [
                "-s", "-o", body, "-D", headers, "-w", "%{http_code}", "-c", files.appending(jar), "-b",
                files.appending(jar),
            ]
            if let origin { arguments += ["-H", "Origin: \(origin)"] }
            if let host { arguments += ["-H", "Host: \(host)"] }
            for field in form { arguments += ["--data-urlencode", field] }
            let process = try ChildProcess("curl", arguments: arguments + [url + path])
            try process.start()
            await process.waitForExit(timeout: .seconds(30))
            let status = Int(process.standardOutputLines.joined()) ?? 0
            return (
                status, (try? String(contentsOfFile: body, encoding: .utf8)) ?? "",
                (try? String(contentsOfFile: headers, encoding: .utf8)) ?? ""
            )
        }

        func signIn(_ name: String, _ password: String, jar: String) async throws -> String {
            let signedIn = try await curl(
                "/login",
                jar: jar,
                form: ["username=\(name)", "password=\(password)"],
                origin: url
            )
            #expect(signedIn.status == 303, "\(signedIn)")
            let fleet = try await curl("/fleet", jar: jar)
            #expect(fleet.status == 200)
            return String(
                fleet.body.firstRange(of: #"name="csrf" value=""#).map {
                    fleet.body[$0.upperBound...].prefix { $0 != "\"" }
                }
                    ?? ""
            )
        }
    }

    @Test func accountsAreMadeListedAndRemovedInAPrivateFile() async throws {
        let files = try TemporaryDirectory(prefix: "chime-console-accounts")
        let path = files.appending("console.passwd")
        let added = try await Served.withInput(
            "secret words",
            ["console", "add", "ana", "--role", "operator", "--accounts", path]
        )
        #expect(added.status == 0, "\(added)")
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("ana:operator:$y$") && !text.contains("secret words"))
        #expect(try await runChime(["console", "list", "--accounts", path]).out == ["ana  operator"])
        let again = try await Served.withInput(
            "another long password",
            ["console", "add", "ana", "--role", "viewer", "--accounts", path]
        )
        #expect(again.status == 1, "a second ana: \(again)")
        #expect(try await runChime(["console", "remove", "ana", "--accounts", path]).status == 0)
        #expect(try await runChime(["console", "list", "--accounts", path]).out.isEmpty)
        let short = try await Served.withInput(
            "short words",
            ["console", "add", "bob", "--role", "viewer", "--accounts", path]
        )
        #expect(short.status == 1, "\(short)")
        #expect(short.stderr.contains("the password is shorter than 12 characters"), "\(short)")
        #expect(try await runChime(["console", "list", "--accounts", path]).out.isEmpty)
        // A file others may read stops the console before it listens, with the fix.
        chmod(path, 0o644)
        let refused = try await runChime(["console", "--accounts", path, "--listen", "127.0.0.1:0"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("chmod 600"), "\(refused)")
        let usage = try await runChime(["console", "add", "bob", "--accounts", path])
        #expect(usage.status == 2 && usage.stderr.contains("--role"), "\(usage)")
        let origin = try await runChime(["console", "--accounts", path, "--origin", "console.example.com"])
        #expect(origin.status == 2 && origin.stderr.contains("--origin: \"console.example.com\" is not an origin"))
    }

    @Test func aViewerSeesADevicesRemindersAndAnOperatorPausesOne() async throws {
        let served = try await Served()
        defer { Task { await served.stop() } }
        try await served.world.ok(
            "schedule",
            "--device",
            "phone-1",
            "--id",
            "pill",
            "--at",
            "18:00",
            "--on",
            "weekdays",
            "--tz",
            "Asia/Shanghai",
            "--body",
            "<script>alert(1)</script> Take your medicine"
        )

        // A page of another name that resolves to the console (DNS rebinding) is not answered.
        let port = served.url.split(separator: ":").last.map(String.init) ?? ""
        let rebound = try await served.curl("/login", jar: "none", host: "evil.example:\(port)")
        #expect(rebound.status == 421, "\(rebound)")

        // Signed out: every page sends to the sign-in page; a wrong password is refused.
        #expect(try await served.curl("/device/phone-1", jar: "none").status == 303)
        let wrong = try await served.curl(
            "/login",
            jar: "none",
            form: ["username=vic", "password=guess"],
            origin: served.url
        )
        #expect(wrong.status == 401)

        // The viewer: the reminder, its rule in words, the hostile body as text; no action.
        let viewerCSRF = try await served.signIn("vic", "a viewer's words", jar: "vic")
        let page = try await served.curl("/device/phone-1", jar: "vic")
        #expect(page.status == 200)
        #expect(page.body.contains("Monday to Friday at 18:00, Asia/Shanghai"))
        #expect(!page.body.contains("<script>") && page.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        #expect(!page.body.contains("/device/phone-1/act"))
        #expect(page.headers.contains("Content-Security-Policy: default-src 'none'"))
        let denied = try await served.curl(
            "/device/phone-1/act",
            jar: "vic",
            form: ["action=cancel", "ids=pill", "confirm=yes", "csrf=\(viewerCSRF)"],
            origin: served.url
        )
        #expect(denied.status == 403)

        // The operator: a confirmation, then the pause, which chimed applied.
        let csrf = try await served.signIn("ana", "a long passphrase", jar: "ana")
        let form = ["action=pause", "ids=pill", "csrf=\(csrf)"]
        let crossSite = try await served.curl(
            "/device/phone-1/act",
            jar: "ana",
            form: form + ["confirm=yes"],
            origin: "https://evil.example"
        )
        #expect(crossSite.status == 403)
        let confirm = try await served.curl("/device/phone-1/act", jar: "ana", form: form, origin: served.url)
        #expect(confirm.status == 200 && confirm.body.contains(#"name="confirm" value="yes""#))
        let listedBefore = try await served.world.ok("list", "--device", "phone-1", "--json")
        #expect(listedBefore.jsonLines.first?["enabled"] == .bool(true))
        let done = try await served.curl(
            "/device/phone-1/act",
            jar: "ana",
            form: form + ["confirm=yes"],
            origin: served.url
        )
        #expect(done.status == 200 && done.body.contains("Paused 1 notification"), "\(done.body)")
        let listed = try await served.world.ok("list", "--device", "phone-1", "--json")
        #expect(listed.jsonLines.first?["enabled"] == .bool(false), "\(listed)")

        // The audit log (standard output): who did what, from where.
        let audit = served.console.standardOutputLines.compactMap { (try? JSON(parsing: $0))?.objectValue }
        let pause = audit.first { $0["action"] == "pause" && $0["outcome"] == "ok" }
        #expect(pause?["who"] == "ana" && pause?["device"] == "phone-1", "\(audit)")
        #expect(audit.contains { $0["action"] == "pause" && $0["who"] == "ana" && $0["outcome"] == "refused" })
        #expect(audit.contains { $0["action"] == "cancel" && $0["who"] == "vic" && $0["outcome"] == "forbidden" })

        // The fleet page shows the worker, with the version its status gives.
        let fleet = try await served.curl("/fleet", jar: "ana")
        #expect(fleet.body.contains(served.world.workerId))
        #expect(fleet.body.contains(">\(chimeVersion)<"), "\(fleet.body)")
    }

    @Test func devicesAreFoundByPrefixAndTagAndAnOperatorEditsABodyAfterConfirming() async throws {
        let served = try await Served()
        defer { Task { await served.stop() } }
        for (device, tagged) in [("phone-2", false), ("phone-1", true), ("tablet-1", true), ("phone-3", true)] {
            var arguments = ["schedule", "--device", device, "--id", "pill", "--in", "1h", "--body", "Take it"]
            if tagged { arguments += ["--info", "campaign=spring"] }
            let run = try await runChime(arguments, environment: served.world.environment)
            #expect(run.status == 0, "\(run)")
        }
        _ = try await served.signIn("vic", "a viewer's words", jar: "vic")
        /// The device links of a page of devices found, in order.
        func found(_ body: String) -> [String] {
            body.matches(of: /<td data-label="Device"><a href="\/device\/([^"?]+)/).map { String($0.1) }
        }
        let byPrefix = try await served.curl("/find?go=list&device=phone-", jar: "vic")
        #expect(byPrefix.status == 200, "\(byPrefix.body)")
        #expect(found(byPrefix.body) == ["phone-1", "phone-2", "phone-3"], "\(byPrefix.body)")
        let byTag = try await served.curl("/find?go=list&key=campaign&value=spring", jar: "vic")
        #expect(found(byTag.body) == ["phone-1", "phone-3", "tablet-1"], "\(byTag.body)")
        #expect(byTag.body.contains("<li><code>pill</code></li>"))
        // The whole id, as before: straight to the device.
        let open = try await served.curl("/find?device=tablet-1", jar: "vic")
        #expect(open.status == 303 && open.headers.contains("Location: /device/tablet-1"))

        // A viewer may not edit: no form, and the server refuses a forged post.
        #expect(try await served.curl("/device/phone-1/edit?id=pill", jar: "vic").status == 403)
        let viewerCSRF = try await served.signIn("vic", "a viewer's words", jar: "vic")
        let forged = try await served.curl(
            "/device/phone-1/act",
            jar: "vic",
            form: ["action=edit", "ids=pill", "alertBody=hacked", "confirm=yes", "csrf=\(viewerCSRF)"],
            origin: served.url
        )
        #expect(forged.status == 403)

        // The operator: the form, the confirmation of the change, then the update chimed applied.
        let csrf = try await served.signIn("ana", "a long passphrase", jar: "ana")
        let form = try await served.curl("/device/phone-1/edit?id=pill", jar: "ana")
        #expect(form.status == 200 && form.body.contains(">Take it</textarea>"), "\(form.body)")
        let fields = ["action=edit", "ids=pill", "alertTitle=", "alertBody=Take two", "csrf=\(csrf)"]
        let confirm = try await served.curl("/device/phone-1/act", jar: "ana", form: fields, origin: served.url)
        #expect(confirm.status == 200 && confirm.body.contains(#"name="alertBody" value="Take two""#))
        let before = try await served.world.ok("list", "--device", "phone-1", "--json")
        #expect(before.jsonLines.first?["alertBody"] == "Take it")
        let done = try await served.curl(
            "/device/phone-1/act",
            jar: "ana",
            form: ["action=edit", "ids=pill", "alertBody=Take two", "confirm=yes", "csrf=\(csrf)"],
            origin: served.url
        )
        #expect(done.status == 200 && done.body.contains("Edited 1 notification"), "\(done.body)")
        let after = try await served.world.ok("list", "--device", "phone-1", "--json")
        #expect(after.jsonLines.first?["alertBody"] == "Take two", "\(after)")
        let audit = served.console.standardOutputLines.compactMap { (try? JSON(parsing: $0))?.objectValue }
        #expect(audit.contains { $0["action"] == "edit" && $0["who"] == "ana" && $0["outcome"] == "ok" }, "\(audit)")
        #expect(audit.contains { $0["action"] == "edit" && $0["who"] == "vic" && $0["outcome"] == "forbidden" })
    }

    /// The sign-in page in a real browser, under the console's own Content-Security-Policy: it
    /// renders its form and the browser reports no blocked resource.
    @Test func chromiumShowsTheSignInPageWithNothingBlocked() async throws {
        let served = try await Served()
        defer { Task { await served.stop() } }
        let profile = try TemporaryDirectory(prefix: "chime-chromium")
        let shot = served.files.appending("login.png")
        let chromium = try ChildProcess(
            "chromium",
            arguments: [
                "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile.path)",
                "--enable-logging=stderr", "--v=0", "--window-size=360,800", "--screenshot=\(shot)",
                served.url + "/login",
            ]
        )
        try chromium.start()
        let end = await chromium.waitForExit(timeout: .seconds(60))
        #expect(end == .exited(0), "\(chromium.standardErrorLines.suffix(20))")
        let png = try Data(contentsOf: URL(fileURLWithPath: shot))
        #expect(png.count > 1000 && png.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]))
        let blocked = chromium.standardErrorLines.filter {
            $0.contains("Content Security Policy") || $0.contains("Refused to")
        }
        #expect(blocked.isEmpty, "\(blocked)")
        let dom = try ChildProcess(
            "chromium",
            arguments: [
                "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile.path)", "--dump-dom",
                served.url + "/login",
            ]
        )
        try dom.start()
        await dom.waitForExit(timeout: .seconds(60))
        let html = dom.standardOutputLines.joined(separator: "\n")
        #expect(
            html.contains(#"<label for="username">"#)
                && html.contains(#"<form class="stack" method="post" action="/login""#)
        )
    }

    /// What the console keeps of the workers' topics: each worker by its topic's id, whatever its
    /// payload says, and no message over the bound.
    @Test func workersAreKeptByTheirTopicsIdAndLargeMessagesAreIgnored() {
        let heard = ConsoleMQTTData.Heard(topics: Topics(prefix: "chime"))
        func message(_ topic: String, _ json: String) -> MQTTMessage {
            MQTTMessage(topic: topic, payload: Array(json.utf8), qos: 1, retain: true)
        }
        heard.take(message("chime/$worker/w1/status", #"{"state":"online","workerId":"w2"}"#))
        heard.take(message("chime/$worker/w1/stats", #"{"workerId":"w2","pending":7}"#))
        #expect(heard.fleet.map(\.id) == ["w1"])
        #expect(heard.fleet.first?.pending == 7)
        let padding = String(repeating: " ", count: ConsoleMQTTData.maximumMessageBytes)
        heard.take(message("chime/$worker/w1/stats", #"{"pending":8}"# + padding))
        heard.take(message("chime/$worker/w3/status", #"{"state":"online"}"# + padding))
        #expect(heard.fleet.map(\.id) == ["w1"] && heard.fleet.first?.pending == 7)
        #expect(ConsoleMQTTData.maximumMessageBytes == 64 * 1024)
    }

    /// A confirmed action on the most notifications one action may name, as the browser posts it.
    @Test func theConsoleTakesAFormOfTheMostIds() throws {
        let fields =
            [("csrf", "t"), ("action", "snooze"), ("minutes", "10"), ("confirm", "yes")]
            + (0..<ConsoleApp.maximumIds).map { ("ids", "reminder-\($0)") }
        func post(_ fields: [(String, String)]) -> HTTPRequest {
            HTTPRequest(
                method: "POST",
                path: "/device/phone-1/act",
                headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Host", "127.0.0.1:8080")],
                body: Array(HTTPForm.encode(fields).utf8)
            )
        }
        let request = try #require(ChimeCLI.ConsoleCommand.consoleRequest(post(fields)))
        #expect(request.form.filter { $0.name == "ids" }.count == ConsoleApp.maximumIds)
        #expect(request.form.contains { $0 == ("confirm", "yes") })
        #expect(post(fields).body.count <= ChimeCLI.ConsoleCommand.maxBodyBytes)
        let tooMany = fields + (0...ConsoleApp.maximumFormFields).map { ("x", "\($0)") }
        #expect(ChimeCLI.ConsoleCommand.consoleRequest(post(tooMany)) == nil)
    }
}
