import ChimeConsole
import ChimeCore
import ChimeHTTP
import ChimePassword
import ChimeSupport
import Foundation
import Synchronization

/// `chime console`: the web console for operators and support staff (docs/console.md), and
/// `chime console add|remove|list` for its accounts file.
struct ConsoleCommand: Command {
    static let name = "console"
    static let summary = "serve the web console for operators and support staff, or manage its accounts"
    static let synopsis = """
        chime console [--listen HOST:PORT] --accounts FILE [--origin URL] [--tls-cert F --tls-key F]
               chime console add NAME --role viewer|operator --accounts FILE
               chime console remove NAME --accounts FILE
               chime console list --accounts FILE
        """
    static let discussion = """
        Serves the console on --listen: the fleet of workers, devices found by id, by the beginning
        of their ids or by a userInfo tag across the fleet, a device's notifications (each rule in
        words, its next times in the device's zone), its inbox and delivery history, and for
        operators pause, resume, snooze, cancel and edit, each confirmed and written to the audit log
        (one JSON line each, standard output). It talks to the workers over MQTT as a backend account
        (--broker), as the other commands do, so it works with one worker, partitions or slots.
        Accounts come from --accounts, a file of name:role:hash lines (yescrypt, mode 0600): add
        reads the password from standard input (without echo on a terminal). Sign-ins are limited
        per address; sessions are cookies (HttpOnly, Secure, SameSite=Strict) that end after 30
        minutes unused or 12 hours. Browsers send Secure cookies over plain HTTP only to localhost:
        elsewhere serve HTTPS with --tls-cert and --tls-key, or put a TLS proxy in front and name
        its origin with --origin (docs/console.md): the console answers only requests for its own
        host names. Runs until Ctrl-C or SIGTERM; SIGHUP reads the accounts file again.
        """
    static let specs: [Flags.Spec] =
        [
            .init("listen", env: false, "HOST:PORT to serve on (default 127.0.0.1:8080)"),
            .init("accounts", env: false, "the accounts file: name:role:hash lines, mode 0600"),
            .init("role", env: false, "with add: viewer (reads) or operator (may also act)"),
            .init("tls-cert", env: false, "PEM certificate chain: serve HTTPS (with --tls-key)"),
            .init("tls-key", env: false, "PEM private key of --tls-cert, not encrypted"),
            .init(
                "origin",
                env: false,
                repeatable: true,
                placeholder: "URL",
                "an origin the console is also served at, such as https://console.example.com behind a proxy "
                    + "(repeatable)"
            ),
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        (
            "an operator account (the password from standard input)",
            "chime console add ana --role operator --accounts console.passwd"
        ),
        ("serve on localhost", "chime console --accounts console.passwd --broker mqtt://backend:secret@127.0.0.1:1883"),
    ]

    enum Action: Equatable {
        case serve
        case add(String, ConsoleRole)
        case remove(String)
        case list
    }

    let action: Action
    let accountsFile: String
    let listen: String
    let tls: (certificate: String, key: String)?
    /// The `--origin` URLs, each checked.
    let publicOrigins: [String]
    let connection: ConnectionOptions?

    init(_ flags: Flags) throws(UsageError) {
        guard let accounts = flags["accounts"], !accounts.isEmpty else {
            throw UsageError(
                "--accounts FILE is needed: the console's accounts (chime console add NAME ... creates it)"
            )
        }
        accountsFile = accounts
        let words = flags.positional
        switch words.first {
        case nil:
            action = .serve
        case "add":
            guard words.count == 2 else { throw UsageError("console add needs one account NAME") }
            guard let role = flags["role"].flatMap(ConsoleRole.init(rawValue:)) else {
                throw UsageError("console add needs --role viewer or --role operator")
            }
            action = .add(words[1], role)
        case "remove":
            guard words.count == 2 else { throw UsageError("console remove needs one account NAME") }
            action = .remove(words[1])
        case "list":
            guard words.count == 1 else { throw UsageError("unexpected argument \"\(words[1])\"") }
            action = .list
        case let other?:
            throw UsageError("unknown console action \"\(other)\": add, remove, list, or none to serve")
        }
        if case .add = action {
        } else if flags["role"] != nil {
            throw UsageError("--role goes with add")
        }
        listen = flags["listen"] ?? "127.0.0.1:8080"
        do {
            _ = try HTTPServer.parse(listen: listen)
        } catch {
            throw UsageError("--listen: \(error.message)")
        }
        switch (flags["tls-cert"], flags["tls-key"]) {
        case (nil, nil): tls = nil
        case (let certificate?, let key?): tls = (certificate, key)
        default: throw UsageError("--tls-cert and --tls-key go together")
        }
        publicOrigins = flags.all("origin")
        for origin in publicOrigins where !ConsoleOrigins.isOrigin(origin) {
            throw UsageError(
                "--origin: \"\(origin)\" is not an origin: a scheme, a host and a port if not the default, "
                    + "such as https://console.example.com"
            )
        }
        connection = action == .serve ? try ConnectionOptions(flags) : nil
    }

    /// Where the console is served once it listens on `port`: the --listen address's origins and
    /// every --origin.
    func origins(port: UInt16) -> ConsoleOrigins {
        let host = (try? HTTPServer.parse(listen: listen).host) ?? ""
        var origins = ConsoleOrigins(listenHost: host, port: Int(port), secure: tls != nil)
        for origin in publicOrigins { origins = origins.adding(origin: origin) ?? origins }
        return origins
    }

    func run(_ console: Console) async throws(CLIFailure) {
        switch action {
        case .serve:
            try await serve(console)
        case .list:
            let accounts = try Self.load(accountsFile)
            let width = accounts.accounts.map(\.name.count).max() ?? 0
            for account in accounts.accounts {
                console.out(
                    account.name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + account.role.rawValue
                )
            }
        case .add(let name, let role):
            let password = try PasswordPrompt.read("password for \(name): ")
            try update { (accounts) throws(ConsoleAccountsError) in
                try accounts.adding(name: name, role: role, password: password)
            }
            console.err("chime console: added \(role.rawValue) \(name) to \(accountsFile)")
        case .remove(let name):
            try update { (accounts) throws(ConsoleAccountsError) in try accounts.removing(name: name) }
            console.err("chime console: removed \(name) from \(accountsFile)")
        }
    }

    /// Changes the accounts file under its lock (so that two commands at once do not lose each
    /// other's change) and replaces it whole, mode 0600; a missing file is an empty one.
    func update(
        _ change: (ConsoleAccounts) throws(ConsoleAccountsError) -> ConsoleAccounts
    ) throws(CLIFailure) {
        let path = accountsFile
        try ReplacedFile.locked(path, { CLIFailure(.failed, $0.message) }) { () throws(CLIFailure) in
            let existing = FileManager.default.fileExists(atPath: path) ? try Self.load(path) : ConsoleAccounts()
            let changed: ConsoleAccounts
            do {
                changed = try change(existing)
            } catch {
                throw CLIFailure(.failed, "\(error)")
            }
            do {
                try ReplacedFile.replace(path, contents: changed.text, mode: 0o600)
            } catch {
                throw CLIFailure(.failed, "\(error)")
            }
        }
    }

    static func load(_ path: String) throws(CLIFailure) -> ConsoleAccounts {
        do {
            return try ConsoleAccounts.load(path: path)
        } catch {
            throw CLIFailure(.failed, "\(error)")
        }
    }
}

/// Reads a password: from a terminal with a prompt and without echo, else the first line of
/// standard input.
enum PasswordPrompt {
    static func read(_ prompt: String) throws(CLIFailure) -> String {
        let terminal = isatty(STDIN_FILENO) == 1
        var saved = termios()
        if terminal {
            FileHandle.standardError.write(Data(prompt.utf8))
            tcgetattr(STDIN_FILENO, &saved)
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        }
        let line = readLine(strippingNewline: true)
        if terminal {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        guard let line, !line.isEmpty else { throw CLIFailure(.usage, "no password given on standard input") }
        return line
    }
}

extension ConsoleCommand {
    /// Request bodies (sign-in and action forms), at most: 1,000 ids of 256 bytes each fit.
    static let maxBodyBytes = 512 * 1024

    func serve(_ console: Console) async throws(CLIFailure) {
        guard let connection else { return }
        let accounts = try Self.load(accountsFile)
        if accounts.count == 0 {
            console.err("chime console: warning: \(accountsFile) has no account; add one with chime console add")
        }
        let broker = try await Connection.open(connection)
        let data = try await ConsoleMQTTData(broker)
        // The app is made once the server has its port (--listen may ask for any): until then a
        // request is answered 503.
        let slot = AppSlot()
        var limits = HTTPServer.Limits()
        limits.maxBodyBytes = Self.maxBodyBytes
        limits.requestTime = .seconds(30)
        let server: HTTPServer
        do {
            let tls = try self.tls.map { (files) throws(HTTPError) in
                try HTTPServer.TLS(certificateFile: files.certificate, keyFile: files.key)
            }
            server = try HTTPServer(listen: listen, limits: limits, methods: ["GET", "HEAD", "POST"], tls: tls) {
                guard let app = slot.app.withLock({ $0 }) else {
                    return HTTPResponse(status: 503, "The console is starting. Reload in a moment.")
                }
                return Self.answer($0, app)
            }
        } catch {
            data.stop()
            throw CLIFailure(.failed, "cannot serve the console on \(listen): \(error.message)")
        }
        let app = ConsoleApp(
            sessions: ConsoleSessions(accounts: accounts),
            data: data,
            audit: { entry in console.exact(entry.line) },
            now: { wallClock() },
            origins: origins(port: server.port)
        )
        slot.app.withLock { $0 = app }
        let scheme = tls == nil ? "http" : "https"
        console.err(
            "chime console: serving on \(scheme)://\(Self.host(listen)):\(server.port) (accounts \(accountsFile), broker \(Connection.redacted(broker.options.brokerURL)))"
        )
        // Ctrl-C and SIGTERM stop; SIGHUP reads the accounts file again.
        let stopped = AsyncStream<Void>.makeStream()
        let file = accountsFile
        let signals = SignalHandlers([SIGTERM, SIGINT, SIGHUP]) { signal in
            if signal == SIGHUP {
                do {
                    app.replaceAccounts(try ConsoleAccounts.load(path: file))
                    console.err("chime console: read \(file) again")
                } catch {
                    console.err("chime console: kept the accounts: \(error)")
                }
            } else {
                stopped.continuation.finish()
            }
        }
        for await _ in stopped.stream {}
        // The server stops when it is released, after the signal handlers.
        withExtendedLifetime((signals, server)) {}
        data.stop()
    }

    /// The host of a `HOST:PORT` as a URL has it.
    static func host(_ listen: String) -> String {
        let host = (try? HTTPServer.parse(listen: listen).host) ?? listen
        return host.contains(":") ? "[\(host)]" : host
    }

    /// The app, once there is one, as the server's handler finds it.
    final class AppSlot: Sendable {
        let app = Mutex<ConsoleApp?>(nil)
    }

    /// A response handed from the console's task to the server's thread.
    final class Answer: Sendable {
        let response = Mutex<ConsoleResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
    }

    /// The HTTP server's request as the console's, answered on the server's thread: the console's
    /// work is async (MQTT requests), so the thread waits for it, at most the app's deadline
    /// (``ConsoleApp/defaultDeadline``).
    static func answer(_ request: HTTPRequest, _ app: ConsoleApp) -> HTTPResponse {
        guard let consoleRequest = consoleRequest(request) else {
            return HTTPResponse(
                status: 400,
                "A form or query that is not valid UTF-8 form encoding, or has more than "
                    + "\(ConsoleApp.maximumFormFields) fields."
            )
        }
        let answered = Answer()
        Task {
            let response = await app.respond(to: consoleRequest)
            answered.response.withLock { $0 = response }
            answered.done.signal()
        }
        answered.done.wait()
        let response = answered.response.withLock { $0 }!
        return HTTPResponse(
            status: response.status,
            contentType: response.contentType,
            headers: ConsoleSessions.securityHeaders + response.headers.map { ($0.name, $0.value) },
            body: response.body
        )
    }

    /// The HTTP server's request as the console's: its query and, for a `POST`, its form decoded
    /// (up to ``ConsoleApp/maximumFormFields`` fields: an action on 1,000 notifications has more
    /// than ``HTTPForm/maxFields``); nil when either is malformed or too long.
    static func consoleRequest(_ request: HTTPRequest) -> ConsoleRequest? {
        let query = request.queryItems
        let form = request.method == "POST" ? request.form(maxFields: ConsoleApp.maximumFormFields) : []
        guard let query, let form else { return nil }
        return ConsoleRequest(
            method: request.method,
            path: request.path,
            query: query.map { (name: $0.0, value: $0.1) },
            form: form.map { (name: $0.0, value: $0.1) },
            cookie: request.header("Cookie"),
            origin: request.header("Origin"),
            referer: request.header("Referer"),
            host: request.header("Host"),
            address: request.remoteAddress
        )
    }
}
