import ChimeCore
import ChimeMQTT
import ChimeSupport
import ChimeTestSupport
import ChimeWorker
import Foundation
import Synchronization
import Testing

/// The files of this repository that the tests run as shipped.
enum Repository {
    /// The checkout's root: three levels above this file (`Tests/ChimeDeployIntegrationTests/<file>`).
    static let root: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func path(_ relative: String) -> String { root.appendingPathComponent(relative).path }

    static func text(_ relative: String) throws -> String {
        try String(contentsOfFile: path(relative), encoding: .utf8)
    }

    static let productionBrokerConfig = "deploy/mosquitto/mosquitto.conf"
    static let acl = "deploy/mosquitto/chime.acl"
    static let accountsScript = "scripts/chime-accounts"
}

/// chimed's defaults that the shipped broker limits are sized for.
enum ChimedDefaults {
    /// `--max-command-bytes`, as chimed declares it.
    static let maxCommandBytes: Int = {
        let spec = WorkerConfiguration.flagSpecs.first { $0.name == "max-command-bytes" }
        guard let text = spec?.defaultValue, let value = Int(text) else {
            fatalError("chimed declares no default --max-command-bytes")
        }
        return value
    }()
}

/// A mosquitto configuration file read as `(key, rest of the line)` pairs, comments and blank lines
/// left out, in order.
struct BrokerConfigLines {
    var lines: [(key: String, value: String)]

    init(_ text: String) {
        lines = text.split(separator: "\n", omittingEmptySubsequences: false).compactMap { raw in
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#") else { return nil }
            let key = line.prefix { $0 != " " }
            return (String(key), line.dropFirst(key.count).trimmingCharacters(in: .whitespaces))
        }
    }

    /// The value of the last line with `key` (mosquitto keeps the last one).
    func value(_ key: String) -> String? { lines.last { $0.key == key }?.value }
}

/// Accounts made with `scripts/chime-accounts` in a password file of their own.
struct Accounts {
    let passwordFile: String
    let aclFile: String
    private(set) var passwords: [String: String] = [:]

    /// Runs the script; returns its exit status, standard output and standard error.
    static func run(
        _ arguments: [String],
        passwordFile: String,
        aclFile: String,
        input: String? = nil
    ) async throws -> (status: ChildProcess.Termination?, output: [String], errors: [String]) {
        let script = Repository.path(Repository.accountsScript)
        var executable = script
        var commandLine = ["-p", passwordFile, "-a", aclFile] + arguments
        if let input {
            // ChildProcess gives the child /dev/null as standard input: pipe `input` in through bash.
            executable = "/bin/bash"
            commandLine = ["-c", "printf '%s\\n' \"$1\" | \"${@:2}\"", "bash", input, script] + commandLine
        }
        let process = try ChildProcess(executable, arguments: commandLine)
        try process.start()
        let status = await process.waitForExit(timeout: .seconds(30))
        return (status, process.standardOutputLines, process.standardErrorLines)
    }

    /// Adds an account with a generated password, which the script prints alone on standard output.
    mutating func add(_ role: String, _ name: String) async throws {
        let (status, output, errors) = try await Self.run(
            ["add", role, name],
            passwordFile: passwordFile,
            aclFile: aclFile
        )
        guard status == .exited(0), output.count == 1, let password = output.first, password.count >= 16 else {
            throw HarnessError(
                "chime-accounts add \(role) \(name): \(String(describing: status)) \(output) \(errors)"
            )
        }
        passwords[name] = password
    }

    func password(_ name: String) -> String { passwords[name] ?? "" }
}

/// How the devices of a ``SecuredDeployment`` log in: with passwords from `scripts/chime-accounts`
/// on a broker without the device-token plugin (a small site), or with tokens from `chime accounts
/// add` checked by the plugin, as `deploy/mosquitto/mosquitto.conf` ships.
enum DeviceCredentials: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case password, token

    var testDescription: String { rawValue }
}

/// The files of the device-token plugin in a test: `chime accounts keygen`'s key pair, the deny list.
struct TokenFiles: Sendable {
    let signingKey: String
    let publicKey: String
    let denyFile: String

    /// Makes the key pair with the built `chime accounts keygen` in `directory`.
    static func make(in directory: TemporaryDirectory) async throws -> TokenFiles {
        let files = TokenFiles(
            signingKey: directory.appending("accounts.key"),
            publicKey: directory.appending("chime-accounts.pub"),
            denyFile: directory.appending("chime-accounts.deny")
        )
        let (status, _, errors) = try await files.chimeAccounts(["keygen"])
        guard status == .exited(0) else { throw HarnessError("chime accounts keygen: \(errors)") }
        return files
    }

    /// Runs the built `chime accounts ARGUMENTS` on these files.
    func chimeAccounts(
        _ arguments: [String]
    ) async throws -> (status: ChildProcess.Termination?, output: [String], errors: [String]) {
        let process = try ChildProcess(
            try builtProduct("chime"),
            arguments: ["accounts"] + arguments + [
                "--signing-key", signingKey, "--public-key", publicKey, "--deny-file", denyFile,
            ]
        )
        try process.start()
        let status = await process.waitForExit(timeout: .seconds(30))
        return (status, process.standardOutputLines, process.standardErrorLines)
    }

    /// `chime accounts add DEVICE`: the token it printed alone on standard output.
    func add(_ device: String, _ more: [String] = []) async throws -> String {
        let (status, output, errors) = try await chimeAccounts(["add", device] + more)
        guard status == .exited(0), output.count == 1, let token = output.first else {
            throw HarnessError("chime accounts add \(device): \(String(describing: status)) \(output) \(errors)")
        }
        return token
    }
}

/// The device-token plugin, built by `make plugin` (as `make test` does) the first time a test needs it.
enum ChimeAuthPlugin {
    static let path = Repository.path(".build/plugin/chime_auth.so")

    private static let built = Mutex(false)

    /// Builds the plugin (make keeps it when it is newer than its source) once per test process.
    static func build() async throws -> String {
        if built.withLock({ $0 }) { return path }
        let make = try ChildProcess("make", arguments: ["-s", "-C", Repository.root.path, "plugin"])
        try make.start()
        let status = await make.waitForExit(timeout: .seconds(120))
        guard status == .exited(0) else {
            throw HarnessError(
                "make plugin: \((make.standardOutputLines + make.standardErrorLines).joined(separator: "\n"))"
            )
        }
        built.withLock { $0 = true }
        return path
    }
}

/// The production broker of `deploy/mosquitto/`: the shipped `mosquitto.conf` with only what must
/// differ in a test replaced (listener, file locations, logging), the shipped ACL byte for byte,
/// and a password file made by `scripts/chime-accounts`.
enum ProductionBroker {
    /// Keys whose lines are dropped: TestBroker sets the listener and logging; TLS belongs to
    /// the listener it replaces; `include_dir` names a host directory.
    static let replacedKeys: Set<String> = [
        "listener", "certfile", "keyfile", "cafile", "tls_version", "require_certificate",
        "use_identity_as_username", "include_dir", "log_dest", "log_timestamp", "log_type",
        "connection_messages",
    ]

    /// The shipped configuration's lines for a test broker whose files are in `directory`.
    /// - Parameter tokens: the device-token plugin's files, its lines pointed at them (and at the
    ///   built plugin); nil drops the plugin's lines, as a small site with password-only devices may.
    static func configurationLines(
        config: String = Repository.productionBrokerConfig,
        passwordFile: String,
        aclFile: String,
        persistenceDirectory: String,
        tokens: TokenFiles? = nil
    ) throws -> [String] {
        let shipped = BrokerConfigLines(try Repository.text(config))
        var lines: [String] = []
        var rewritten: Set<String> = []
        for (key, value) in shipped.lines {
            switch key {
            case _ where replacedKeys.contains(key):
                continue
            case _ where key.hasPrefix("plugin") && tokens == nil:
                continue
            case "plugin":
                lines.append("plugin \(ChimeAuthPlugin.path)")
                rewritten.insert(key)
            case "plugin_opt_public_key":
                lines.append("plugin_opt_public_key \(tokens?.publicKey ?? "")")
                rewritten.insert(key)
            case "plugin_opt_deny_file":
                lines.append("plugin_opt_deny_file \(tokens?.denyFile ?? "")")
                rewritten.insert(key)
            case "plugin_opt_password_file":
                lines.append("plugin_opt_password_file \(passwordFile)")
                rewritten.insert(key)
            case "password_file":
                lines.append("password_file \(passwordFile)")
                rewritten.insert(key)
            case "acl_file":
                lines.append("acl_file \(aclFile)")
                rewritten.insert(key)
            case "persistence_location":
                lines.append("persistence_location \(persistenceDirectory)/")
                rewritten.insert(key)
            default:
                lines.append("\(key) \(value)")
            }
        }
        var expected: Set<String> = ["password_file", "acl_file", "persistence_location"]
        if tokens != nil {
            expected.formUnion(["plugin", "plugin_opt_public_key", "plugin_opt_deny_file", "plugin_opt_password_file"])
        }
        guard rewritten == expected else {
            throw HarnessError("\(config) lacks one of \(expected.subtracting(rewritten).sorted())")
        }
        return lines
    }
}

/// A production broker with accounts, and chimed running under its own account.
final class SecuredDeployment: Sendable {
    let files: TemporaryDirectory
    let broker: TestBroker
    let passwords: [String: String]
    let data: TemporaryDirectory
    /// chimed's worker id, and so the name of its account: the shipped broker names every client's
    /// session after its user name (`use_username_as_clientid`).
    let workerId = "chimed"
    /// The account of the worker's health check (`chime-env health`), a backend account.
    var healthAccount: String { "\(workerId)-health" }
    let chimed: Chimed
    /// The device-token plugin's files, when devices log in with tokens.
    let tokens: TokenFiles?

    /// Accounts made: `chimed` (worker), `chimed-health` and `backend` (backends) in the password
    /// file, and each of `devices` there too (`.password`) or as a token of `chime accounts add`
    /// (`.token`, with the device-token plugin loaded as the shipped configuration loads it).
    static func start(devices: [String], credentials: DeviceCredentials = .password) async throws -> SecuredDeployment {
        let files = try TemporaryDirectory(prefix: "chime-deploy")
        let acl = files.appending("chime.acl")
        let shippedACL = try Data(contentsOf: URL(fileURLWithPath: Repository.path(Repository.acl)))
        try shippedACL.write(to: URL(fileURLWithPath: acl))
        var accounts = Accounts(passwordFile: files.appending("chime.passwd"), aclFile: acl)
        try await accounts.add("worker", "chimed")
        try await accounts.add("backend", "chimed-health")
        try await accounts.add("backend", "backend")
        var passwords = accounts.passwords
        var tokens: TokenFiles?
        switch credentials {
        case .password:
            for device in devices { try await accounts.add("device", device) }
            passwords = accounts.passwords
        case .token:
            _ = try await ChimeAuthPlugin.build()
            let made = try await TokenFiles.make(in: files)
            for device in devices { passwords[device] = try await made.add(device) }
            tokens = made
        }
        // The accounts above are the ACL's own: the script must have left it as shipped.
        guard try Data(contentsOf: URL(fileURLWithPath: acl)) == shippedACL else {
            throw HarnessError("chime-accounts changed the shipped ACL")
        }
        let persistence = files.appending("broker")
        try FileManager.default.createDirectory(atPath: persistence, withIntermediateDirectories: false)
        let lines = try ProductionBroker.configurationLines(
            passwordFile: accounts.passwordFile,
            aclFile: acl,
            persistenceDirectory: persistence,
            tokens: tokens
        )
        let broker = try await TestBroker.start(.init(extraLines: lines))
        return try await SecuredDeployment(files: files, broker: broker, passwords: passwords, tokens: tokens)
    }

    private init(
        files: TemporaryDirectory,
        broker: TestBroker,
        passwords: [String: String],
        tokens: TokenFiles?
    ) async throws {
        self.files = files
        self.broker = broker
        self.passwords = passwords
        self.tokens = tokens
        self.data = try TemporaryDirectory(prefix: "chime-deploy-data")
        chimed = try Chimed(
            broker: broker,
            dataDirectory: data.path,
            workerId: workerId,
            extra: ["--broker", "mqtt://chimed:\(passwords["chimed"] ?? "")@\(broker.host):\(broker.port)"]
        )
        do {
            try await chimed.start()
        } catch {
            throw HarnessError("\(error)\nbroker log:\n\(broker.log)")
        }
    }

    /// `mqtt://user:password@host:port` of this broker.
    func url(_ user: String) -> String {
        "mqtt://\(user):\(passwords[user] ?? "")@\(broker.host):\(broker.port)"
    }

    /// Starts chimed again, as it was started (same data directory, worker id and account), once the
    /// first one has stopped. The caller stops it.
    func startChimedAgain() async throws -> Chimed {
        let again = try Chimed(executable: try builtProduct("chimed"), arguments: chimed.arguments)
        try await again.start()
        return again
    }

    /// Options for `user` with its password.
    func options(_ user: String?, protocolVersion: MQTTOptions.ProtocolVersion = .v5) -> MQTTOptions {
        var options = broker.clientOptions(
            clientId: "\(user ?? "anonymous")-\(UInt32.random(in: 0...UInt32.max))",
            protocolVersion: protocolVersion
        )
        options.username = user
        options.password = user.flatMap { passwords[$0] }
        return options
    }

    /// A connected client of `user`.
    func client(_ user: String, protocolVersion: MQTTOptions.ProtocolVersion = .v5) async throws -> RecordingClient {
        let client = try RecordingClient(options: options(user, protocolVersion: protocolVersion))
        try await client.requester.connect(timeout: .seconds(10))
        return client
    }

    func stop() async {
        chimed.process.terminate()
        await chimed.process.waitForExit(timeout: .seconds(20))
        await broker.stop()
    }
}

/// An MQTT client that keeps every message no waiter took, in arrival order.
final class RecordingClient: Sendable {
    let requester: MQTTRequester
    let received = Mutex<[MQTTMessage]>([])

    init(options: MQTTOptions) throws {
        requester = try MQTTRequester(options: options)
        let stream = requester.messages
        Task { [weak self] in
            for await message in stream { self?.received.withLock { $0.append(message) } }
        }
    }

    deinit { requester.stop() }

    var messages: [MQTTMessage] { received.withLock { $0 } }

    func messages(where predicate: (MQTTMessage) -> Bool) -> [MQTTMessage] { messages.filter(predicate) }

    /// Sends a command with a Response Topic and returns the reply.
    func request(
        _ topic: String,
        _ payload: String,
        responseTopic: String,
        timeout: Duration = .seconds(10)
    ) async throws -> JSONObject {
        let reply = try await requester.request(
            topic: topic,
            payload: Array(payload.utf8),
            responseTopic: responseTopic,
            timeout: timeout
        )
        return try Self.object(reply.payload)
    }

    static func object(_ payload: [UInt8]) throws -> JSONObject {
        guard case .object(let o) = try JSON(parsing: payload) else {
            throw HarnessError("not a JSON object: \(String(decoding: payload, as: UTF8.self))")
        }
        return o
    }

    /// Waits until `condition` holds for the messages received, or `timeout` passes.
    func wait(timeout: Duration = .seconds(10), until condition: ([MQTTMessage]) -> Bool) async -> Bool {
        await eventually(timeout: timeout) { condition(messages) }
    }
}

extension JSONObject {
    /// `result` of an ok reply; records an issue and returns an empty object otherwise.
    func okResult(sourceLocation: SourceLocation = #_sourceLocation) -> JSONObject {
        guard self["ok"] == true, case .object(let result)? = self["result"] else {
            Issue.record("expected an ok reply, got \(JSON.object(self).text)", sourceLocation: sourceLocation)
            return [:]
        }
        return result
    }
}
