import ChimeCore
import ChimeMQTT
import ChimeSupport
import ChimeTestSupport
import ChimeWorker
import Foundation
import Testing

/// The service files that cannot run here whole (systemd, Docker, Kubernetes) checked for what can
/// be: the settings they name exist, the entry point derives partitions as documented, the example
/// environment file starts chimed, the compose broker keeps the production settings.
@Suite struct ServiceFilesTests {
    /// Settings chime-env reads itself (deploy/container/chime-env).
    static let entryPointSettings: Set<String> = [
        "CHIME_PARTITION_COUNT", "CHIME_HOSTNAME", "CHIME_DATA_ROOT", "CHIME_HEALTH_BROKER", "CHIME_PASSWORD_DIR",
        "CHIME_WORKER_ACCOUNT",
    ]
    /// What the entry point exports with `environment` (and a plain PATH): `chime-env env`, ended.
    static func entryPointEnvironment(_ environment: [String: String]) async throws -> ChildProcess {
        let process = try ChildProcess(
            Repository.path("deploy/container/chime-env"),
            arguments: ["env"],
            environment: ["PATH": "/usr/bin:/bin"].merging(environment) { $1 }
        )
        try process.start()
        await process.waitForExit(timeout: .seconds(10))
        return process
    }

    static let chimedSettings = Set(WorkerConfiguration.flagSpecs.filter(\.fromEnvironment).map(\.environmentName))

    /// Settings of the tools the images hold: scripts/chime-accounts (the broker image's) and
    /// `chime accounts` (deploy/compose's accounts service), as they say themselves.
    static func toolSettings() async throws -> Set<String> {
        let script = try Repository.text(Repository.accountsScript)
        var names = Set(script.matches(of: /\$\{(CHIME_[A-Z0-9_]+):-/).map { String($0.output.1) })
        let help = try ChildProcess(try builtProduct("chime"), arguments: ["accounts", "--help"])
        try help.start()
        await help.waitForExit(timeout: .seconds(10))
        let text = (help.standardOutputLines + help.standardErrorLines).joined(separator: "\n")
        names.formUnion(text.matches(of: /\[(CHIME_[A-Z0-9_]+)\]/).map { String($0.output.1) })
        return names
    }

    @Test func everyChimeSettingNamedInDeployExists() async throws {
        let toolSettings = try await Self.toolSettings()
        #expect(toolSettings.isSuperset(of: ["CHIME_PASSWORD_FILE", "CHIME_SIGNING_KEY", "CHIME_DENY_FILE"]))
        let files = try FileManager.default.subpathsOfDirectory(atPath: Repository.path("deploy"))
            .filter { !$0.hasSuffix(".conf") && !$0.hasSuffix(".acl") }
            .map { "deploy/\($0)" }
            .filter { path in
                var isDirectory: ObjCBool = false
                return FileManager.default.fileExists(atPath: Repository.path(path), isDirectory: &isDirectory)
                    && !isDirectory.boolValue
            }
        #expect(files.contains("deploy/systemd/chimed.env"))
        #expect(files.contains("deploy/kubernetes/chimed-config.yaml"))
        let pattern = try NSRegularExpression(pattern: #"\bCHIME_[A-Z0-9_]+"#)
        var seen: Set<String> = []
        for file in files {
            let text = try Repository.text(file)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                let name = String(text[Range(match.range, in: text)!])
                seen.insert(name)
                #expect(
                    Self.chimedSettings.contains(name) || Self.entryPointSettings.contains(name)
                        || toolSettings.contains(name),
                    "\(file) names \(name), which neither chimed nor a tool of the images reads"
                )
            }
        }
        #expect(seen.isSuperset(of: ["CHIME_BROKER", "CHIME_PARTITION_COUNT", "CHIME_FSYNC"]))
    }

    @Test func theExampleEnvironmentFileStartsChimed() async throws {
        var settings: [String: String] = [:]
        for line in try Repository.text("deploy/systemd/chimed.env").split(separator: "\n") {
            let line = line.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#"), let eq = line.firstIndex(of: "=") else { continue }
            settings[String(line[..<eq])] = String(line[line.index(after: eq)...])
        }
        // Every chimed setting is in the example, with its meaning.
        #expect(Set(settings.keys) == Self.chimedSettings)
        let broker = try await TestBroker.start()
        let data = try TemporaryDirectory(prefix: "chime-env-file")
        // What differs on a test machine; everything else as shipped, with no flags at all.
        settings["CHIME_BROKER"] = broker.url
        settings["CHIME_DATA_DIR"] = data.appending("data")
        // The shipped port may be taken on a test machine: same host, a free port.
        #expect(settings["CHIME_METRICS_LISTEN"] == "127.0.0.1:9464")
        let metricsPort = try TestBroker.freePort()
        settings["CHIME_METRICS_LISTEN"] = "127.0.0.1:\(metricsPort)"
        let chimed = try ChildProcess(try builtProduct("chimed"), environment: settings)
        try chimed.start()
        let serving = await chimed.waitForLine(onStandardError: true, timeout: .seconds(20)) {
            $0.contains("serving")
        }
        #expect(serving?.hasPrefix("{") == true, "log lines are JSON: \(chimed.standardErrorLines)")
        #expect(await eventually { (try? HTTPProbe.get(port: metricsPort, "/readyz").status) == 200 })
        chimed.terminate()
        #expect(await chimed.waitForExit(timeout: .seconds(20)) == .exited(0))
        await broker.stop()
    }

    @Test(arguments: [
        ("chimed-0", "3", ["CHIME_PARTITION=0/3", "CHIME_WORKER_ID=chimed-0-of-3", "CHIME_DATA_DIR=/v/0-of-3"]),
        ("chimed-2", "3", ["CHIME_PARTITION=2/3", "CHIME_WORKER_ID=chimed-2-of-3", "CHIME_DATA_DIR=/v/2-of-3"]),
        ("chime-prod-chimed-11", "12", ["CHIME_PARTITION=11/12", "CHIME_WORKER_ID=chime-prod-chimed-11-of-12"]),
        ("box", "", ["CHIME_WORKER_ID=box", "CHIME_DATA_DIR=/v/data"]),
    ])
    func theEntryPointDerivesThePartitionFromThePodName(host: String, count: String, expected: [String]) async throws {
        var environment = ["PATH": "/usr/bin:/bin", "CHIME_HOSTNAME": host, "CHIME_DATA_ROOT": "/v"]
        if !count.isEmpty { environment["CHIME_PARTITION_COUNT"] = count }
        let process = try ChildProcess(
            Repository.path("deploy/container/chime-env"),
            arguments: ["env"],
            environment: environment
        )
        try process.start()
        #expect(await process.waitForExit(timeout: .seconds(10)) == .exited(0))
        let lines = Set(process.standardOutputLines)
        for line in expected { #expect(lines.contains(line), "\(host): \(lines.sorted())") }
        if count.isEmpty { #expect(!lines.contains { $0.hasPrefix("CHIME_PARTITION=") }) }
    }

    /// One PostgreSQL database per partition (deploy/kubernetes/postgres): the pod's `{partition}`.
    @Test(arguments: [
        ("chimed-0", "3", "CHIME_STORE=postgres://chimed@pg:5432/chime_0_of_3?sslmode=verify-full"),
        ("chimed-11", "12", "CHIME_STORE=postgres://chimed@pg:5432/chime_11_of_12?sslmode=verify-full"),
        ("box", "", "chime-env: CHIME_STORE names {partition}, which only a StatefulSet's pod"),
    ])
    func theEntryPointNamesEachPartitionsDatabase(host: String, count: String, expected: String) async throws {
        let process = try ChildProcess(
            Repository.path("deploy/container/chime-env"),
            arguments: ["env"],
            environment: [
                "PATH": "/usr/bin:/bin", "CHIME_HOSTNAME": host, "CHIME_PARTITION_COUNT": count,
                "CHIME_STORE": "postgres://chimed@pg:5432/chime_{partition}?sslmode=verify-full",
            ]
        )
        try process.start()
        let status = await process.waitForExit(timeout: .seconds(10))
        if count.isEmpty {
            #expect(status == .exited(2))
            #expect(process.standardErrorLines.contains { $0.hasPrefix(expected) }, "\(process.standardErrorLines)")
        } else {
            #expect(status == .exited(0))
            #expect(process.standardOutputLines.contains(expected), "\(process.standardOutputLines.sorted())")
        }
    }

    @Test(arguments: [
        ("chimed-3", "3", "", "outside 3 partitions"),
        ("web", "3", "", "does not end in -<ordinal>"),
        ("chimed-1", "0", "", "positive number"),
        ("chimed-1", "x", "", "positive number"),
        ("chimed-1", "3", "0/3", "contradicts ordinal 1 of 3"),
    ])
    func theEntryPointRefusesALayoutThatDoesNotFit(
        host: String,
        count: String,
        partition: String,
        words: String
    )
        async throws
    {
        var environment = ["PATH": "/usr/bin:/bin", "CHIME_HOSTNAME": host, "CHIME_PARTITION_COUNT": count]
        if !partition.isEmpty { environment["CHIME_PARTITION"] = partition }
        let process = try ChildProcess(
            Repository.path("deploy/container/chime-env"),
            arguments: ["env"],
            environment: environment
        )
        try process.start()
        #expect(await process.waitForExit(timeout: .seconds(10)) == .exited(2))
        #expect(process.standardOutputLines.isEmpty)
        #expect(process.standardErrorLines.joined().contains(words), "\(process.standardErrorLines)")
    }

    @Test func theEntryPointGivesEachPodItsOwnAccountsFromThePasswordDirectory() async throws {
        let secrets = try TemporaryDirectory(prefix: "chime-passwords")
        func run(_ environment: [String: String]) async throws -> ChildProcess {
            try await Self.entryPointEnvironment(
                [
                    "CHIME_HOSTNAME": "chimed-1", "CHIME_PARTITION_COUNT": "3",
                    "CHIME_BROKER": "mqtts://emqx.chime.svc:8883", "CHIME_PASSWORD_DIR": secrets.path,
                ].merging(environment) { $1 }
            )
        }
        // As a Secret volume holds them: one file per account, maybe with a final newline.
        try "worker-pw_1\n".write(toFile: secrets.appending("chimed-1-of-3"), atomically: true, encoding: .utf8)
        try "health-pw.2".write(toFile: secrets.appending("chimed-1-of-3-health"), atomically: true, encoding: .utf8)
        let pod = try await run([:])
        #expect(pod.termination == .exited(0), "\(pod.standardErrorLines)")
        let lines = Set(pod.standardOutputLines)
        #expect(lines.contains("CHIME_BROKER=mqtts://chimed-1-of-3:worker-pw_1@emqx.chime.svc:8883"), "\(lines)")
        #expect(lines.contains("CHIME_HEALTH_BROKER=mqtts://chimed-1-of-3-health:health-pw.2@emqx.chime.svc:8883"))

        // Refused, with the reason: an account in the URL, a missing password, one that would need
        // escaping in a URL.
        let withUser = try await run(["CHIME_BROKER": "mqtt://chimed:pw@emqx:1883"])
        #expect(withUser.termination == .exited(2))
        #expect(withUser.standardErrorLines.joined().contains("names no account"))
        try "p@ss".write(toFile: secrets.appending("chimed-1-of-3-health"), atomically: true, encoding: .utf8)
        let escaped = try await run([:])
        #expect(escaped.termination == .exited(2))
        #expect(escaped.standardErrorLines.joined().contains("chimed-1-of-3-health: a password here is"))
        try FileManager.default.removeItem(atPath: secrets.appending("chimed-1-of-3-health"))
        let missing = try await run([:])
        #expect(missing.termination == .exited(2))
        #expect(missing.standardErrorLines.joined().contains("no password for account chimed-1-of-3-health"))
        #expect(missing.standardOutputLines.isEmpty)
    }

    @Test func theShippedBrokerBindsClientIdsOnEveryListenerAndTakesChimedsLargestDelivery() throws {
        for file in [Repository.productionBrokerConfig, "deploy/compose/mosquitto.conf"] {
            // Every listener, the commented-out TLS one too, is followed by its own
            // use_username_as_clientid (a listener setting), commented out alike.
            var open: String?
            for raw in try Repository.text(file).split(separator: "\n") {
                let line = raw.trimmingCharacters(in: .whitespaces)
                let setting = line.hasPrefix("#") ? String(line.dropFirst()) : line
                if setting.hasPrefix("listener ") {
                    #expect(open == nil, "\(file): \(open ?? "") has no use_username_as_clientid true")
                    open = line
                } else if setting == "use_username_as_clientid true", let listener = open {
                    #expect(line.hasPrefix("#") == listener.hasPrefix("#"), "\(file): \(listener)")
                    open = nil
                }
            }
            #expect(open == nil, "\(file): \(open ?? "") has no use_username_as_clientid true")
        }
        // A delivery can be three times its command (chimed writes the 2-byte escape \b as \u0008),
        // plus its own fields: max_packet_size must let chimed publish it.
        let maxCommandBytes = ChimedDefaults.maxCommandBytes
        let config = BrokerConfigLines(try Repository.text(Repository.productionBrokerConfig))
        let maxPacketSize = try #require(config.value("max_packet_size").flatMap { Int($0) })
        #expect(maxPacketSize >= 3 * maxCommandBytes + 16_384)
    }

    @Test func chimedStartsThroughTheEntryPointAsAPodWould() async throws {
        let broker = try await TestBroker.start()
        let root = try TemporaryDirectory(prefix: "chime-pod")
        let watcher = try RecordingClient(options: broker.clientOptions(clientId: "pod-watcher"))
        defer { watcher.requester.stop() }
        try await watcher.requester.connect(timeout: .seconds(10))
        try await watcher.requester.subscribe("chime/$worker/+/status", timeout: .seconds(10))

        let pod = try ChildProcess(
            Repository.path("deploy/container/chime-env"),
            arguments: [try builtProduct("chimed")],
            environment: [
                "PATH": "/usr/bin:/bin", "CHIME_HOSTNAME": "chimed-1", "CHIME_PARTITION_COUNT": "2",
                "CHIME_DATA_ROOT": root.path, "CHIME_BROKER": broker.url, "CHIME_STATS_INTERVAL": "0",
            ]
        )
        try pod.start()
        let online = await watcher.wait { messages in
            messages.contains { (try? RecordingClient.object($0.payload))?["state"] == "online" }
        }
        #expect(online, "\(pod.standardErrorLines)")
        let status = try #require(watcher.messages.first { $0.topic == "chime/$worker/chimed-1-of-2/status" })
        let payload = try RecordingClient.object(status.payload)
        #expect(payload["partition"] == "1/2")
        #expect(payload["workerId"] == "chimed-1-of-2")
        #expect(FileManager.default.fileExists(atPath: root.appending("1-of-2/LOCK")))
        // It serves partition 1 of 2 only: a device of partition 1 is answered.
        let device = (0..<100).map { "device-\($0)" }.first { Partition(index: 1, count: 2).owns($0) }!
        let reply = try await watcher.request("chime/\(device)/cmd/list", "{}", responseTopic: "test/pod")
        #expect(reply["ok"] == true)
        pod.terminate()
        #expect(await pod.waitForExit(timeout: .seconds(20)) == .exited(0))
        await broker.stop()
    }

    /// Slot mode (deploy/kubernetes/slots): the worker id is the pod name, whatever it is, the
    /// account the shared one; partitions and slots exclude each other.
    @Test func theEntryPointNamesASlotWorkerAfterItsPodAndGivesItTheSharedAccount() async throws {
        let secrets = try TemporaryDirectory(prefix: "chime-passwords")
        try "slots-pw".write(toFile: secrets.appending("chimed-slots"), atomically: true, encoding: .utf8)
        try "health-pw".write(toFile: secrets.appending("chimed-slots-health"), atomically: true, encoding: .utf8)
        func run(_ environment: [String: String]) async throws -> ChildProcess {
            try await Self.entryPointEnvironment(
                [
                    "CHIME_HOSTNAME": "chimed-slots-7d9f8c6b5-x2kqp", "CHIME_SLOTS": "256",
                    "CHIME_BROKER": "mqtt://emqx-workers:1884", "CHIME_PASSWORD_DIR": secrets.path,
                    "CHIME_WORKER_ACCOUNT": "chimed-slots",
                ].merging(environment) { $1 }
            )
        }
        let pod = try await run([:])
        #expect(pod.termination == .exited(0), "\(pod.standardErrorLines)")
        let lines = Set(pod.standardOutputLines)
        #expect(lines.contains("CHIME_WORKER_ID=chimed-slots-7d9f8c6b5-x2kqp"), "\(lines)")
        #expect(lines.contains("CHIME_BROKER=mqtt://chimed-slots:slots-pw@emqx-workers:1884"), "\(lines)")
        #expect(lines.contains("CHIME_HEALTH_BROKER=mqtt://chimed-slots-health:health-pw@emqx-workers:1884"))
        let both = try await run(["CHIME_PARTITION_COUNT": "3"])
        #expect(both.termination == .exited(2))
        #expect(both.standardErrorLines.joined().contains("CHIME_SLOTS and CHIME_PARTITION_COUNT exclude each other"))
        let notANumber = try await run(["CHIME_SLOTS": "many"])
        #expect(notANumber.termination == .exited(2))
        #expect(notANumber.standardErrorLines.joined().contains("CHIME_SLOTS must be a number"))
    }

    /// Two pods of the slot Deployment, started through the entry point with nothing but the
    /// settings of deploy/kubernetes/slots (a real PostgreSQL and broker): each named after its pod,
    /// they share the slots.
    @Test func slotWorkersStartThroughTheEntryPointAsDeploymentPodsWould() async throws {
        let broker = try await TestBroker.start()
        let postgres = try await TestPostgres.start()
        let watcher = try RecordingClient(options: broker.clientOptions(clientId: "pods-watcher"))
        defer { watcher.requester.stop() }
        try await watcher.requester.connect(timeout: .seconds(10))
        try await watcher.requester.subscribe("chime/$worker/+/status", timeout: .seconds(10))
        let names = ["chimed-slots-5c8d7-h2x9q", "chimed-slots-5c8d7-m4kzt"]
        var pods: [ChildProcess] = []
        for name in names {
            let pod = try ChildProcess(
                Repository.path("deploy/container/chime-env"),
                arguments: [try builtProduct("chimed")],
                environment: [
                    "PATH": "/usr/bin:/bin", "CHIME_HOSTNAME": name, "CHIME_BROKER": broker.url,
                    "CHIME_STORE": postgres.uri, "CHIME_SLOTS": "16", "CHIME_LEASE_TTL": "2",
                    "CHIME_STATS_INTERVAL": "0",
                ]
            )
            try pod.start()
            pods.append(pod)
        }
        // The latest retained status of each: online, and between them every slot once.
        func serving() -> [String: [Int]] {
            var latest: [String: [Int]] = [:]
            for message in watcher.messages {
                guard let status = try? RecordingClient.object(message.payload), status["state"] == "online",
                    let id = status["workerId"]?.stringValue, let ranges = status["serving"]?.stringValue
                else { continue }
                latest[id] = SlotRanges.slots(ranges, count: 16)
            }
            return latest
        }
        let shared = await eventually(timeout: .seconds(30)) {
            let now = serving()
            return now.keys.sorted() == names && now.values.flatMap { $0 }.sorted() == Array(0..<16)
                && now.values.allSatisfy { $0.count == 8 }
        }
        #expect(shared, "\(serving()) \(pods.map(\.standardErrorLines))")
        for pod in pods { pod.terminate() }
        for pod in pods { #expect(await pod.waitForExit(timeout: .seconds(20)) == .exited(0)) }
        await broker.stop()
        await postgres.stop()
    }

    @Test func chimedTrustsAPrivateBrokerCAThroughSSLCertFile() async throws {
        // What chimed.env and the Kubernetes Secret say: mqtts:// checks the broker against the
        // system's CAs, and SSL_CERT_FILE names a private CA instead.
        let directory = try TemporaryDirectory(prefix: "chime-tls")
        let certificates = try await TestCertificates.make(in: directory)
        let broker = try await TestBroker.start(.init(tls: certificates))
        func start(_ environment: [String: String]) throws -> ChildProcess {
            let chimed = try ChildProcess(
                try builtProduct("chimed"),
                arguments: ["--broker", broker.url, "--worker-id", "tls", "--data-dir", directory.appending("data")],
                environment: environment
            )
            try chimed.start()
            return chimed
        }
        let untrusting = try start([:])
        // The positive control: the broker logs each handshake it refuses, and chimed tries again
        // only after an attempt failed, so by the second refusal the first has got nowhere.
        let refusals = await eventually {
            broker.log.split(separator: "\n").filter { $0.contains("Client connection from") && $0.contains("failed") }
                .count >= 2
        }
        #expect(refusals, "the broker refused no handshake of chimed's:\n\(broker.log)")
        #expect(
            !untrusting.standardErrorLines.contains { $0.contains(" serving ") },
            "connected without trusting the CA"
        )
        untrusting.terminate()
        await untrusting.waitForExit(timeout: .seconds(20))
        let trusting = try start(["SSL_CERT_FILE": certificates.caFile])
        let serving = await trusting.waitForLine(onStandardError: true, timeout: .seconds(20)) {
            $0.contains(" serving ")
        }
        #expect(serving != nil, "\(trusting.standardErrorLines)")
        trusting.terminate()
        #expect(await trusting.waitForExit(timeout: .seconds(20)) == .exited(0))
        await broker.stop()
    }

    @Test func theComposeBrokerKeepsTheProductionSettings() async throws {
        // The shipped file with its TLS listener turned on is the compose file, but for the files
        // that are where compose's volumes put them.
        let tlsLines = /^#((listener|use_username_as_clientid|max_connections|certfile|keyfile|tls_version) .*)$/
        let shipped = try Repository.text(Repository.productionBrokerConfig).split(
            separator: "\n",
            omittingEmptySubsequences: false
        )
        .map { line in (try? tlsLines.wholeMatch(in: line)).map { String($0.output.1) } ?? String(line) }
        .joined(separator: "\n")
        let volumePaths: Set<String> = [
            "password_file", "acl_file", "plugin_opt_public_key", "plugin_opt_deny_file", "plugin_opt_password_file",
        ]
        func settings(_ text: String) -> [String] {
            BrokerConfigLines(text).lines.map { "\($0.key) \(volumePaths.contains($0.key) ? "(volume)" : $0.value)" }
        }
        let composeText = try Repository.text("deploy/compose/mosquitto.conf")
        #expect(settings(composeText) == settings(shipped))
        let compose = BrokerConfigLines(composeText)
        #expect(compose.value("password_file") == "/etc/mosquitto/accounts/chime.passwd")
        #expect(compose.value("plugin_opt_password_file") == compose.value("password_file"))
        #expect(compose.value("acl_file") == "/etc/mosquitto/accounts/chime.acl")
        #expect(compose.value("plugin_opt_public_key") == "/var/lib/chime-tokens/chime-accounts.pub")
        #expect(compose.value("plugin_opt_deny_file") == "/var/lib/chime-tokens/chime-accounts.deny")

        // And mosquitto takes it (paths replaced as for the production file).
        let files = try TemporaryDirectory(prefix: "chime-compose")
        let acl = files.appending("chime.acl")
        try Repository.text(Repository.acl).write(toFile: acl, atomically: true, encoding: .utf8)
        var accounts = Accounts(passwordFile: files.appending("chime.passwd"), aclFile: acl)
        try await accounts.add("device", "phone-1")
        try FileManager.default.createDirectory(atPath: files.appending("data"), withIntermediateDirectories: false)
        let broker = try await TestBroker.start(
            .init(
                extraLines: try ProductionBroker.configurationLines(
                    config: "deploy/compose/mosquitto.conf",
                    passwordFile: accounts.passwordFile,
                    aclFile: acl,
                    persistenceDirectory: files.appending("data")
                )
            )
        )
        var options = broker.clientOptions(clientId: "compose-phone")
        options.username = "phone-1"
        options.password = accounts.password("phone-1")
        let phone = try MQTTRequester(options: options)
        defer { phone.stop() }
        try await phone.connect(timeout: .seconds(10))
        let code = try await phone.publish(topic: "chime/phone-2/cmd/list", payload: [], timeout: .seconds(10))
        #expect(code == 0x87)
        await broker.stop()
    }
}
