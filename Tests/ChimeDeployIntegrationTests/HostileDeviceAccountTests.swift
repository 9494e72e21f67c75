import ChimeCore
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// What a device account can do to everyone else on the production broker of deploy/mosquitto (its
/// mosquitto.conf, its ACL verbatim, accounts made by scripts/chime-accounts), with the real chimed:
/// it cannot take chimed's client id, its session or its connection, and the broker's limits stop
/// what chimed would otherwise have to receive. docs/production.md ("What a device account can and
/// cannot do") says the same.
@Suite(.serialized) struct HostileDeviceAccountTests {
    /// The client ids a device would try: the one chimed asks for (`chimed-{worker id}`) and the one
    /// the shipped broker gives it (its user name, which is its worker id).
    static func chimedsClientIds(_ d: SecuredDeployment) -> [String] { ["chimed-\(d.workerId)", d.workerId] }

    @Test(arguments: DeviceCredentials.allCases, [true, false])
    func aDeviceCannotTakeOverChimedsClientId(credentials: DeviceCredentials, cleanStart: Bool) async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-evil", "phone-b"], credentials: credentials)
        defer { Task { await d.stop() } }
        let watch = try await WorkerWatch.start(d)
        let reconnectsBefore = try await watch.reconnects()
        let b = try await d.client("phone-b")
        try await b.requester.subscribe("chime/phone-b/replies", timeout: .seconds(10))

        // While chimed serves: the device connects with each of chimed's client ids in turn.
        for clientId in Self.chimedsClientIds(d) {
            let attacker = try await Attacker.connect(d, clientId: clientId, cleanStart: cleanStart)
            // The broker had replaced the connection it took over before it accepted this one, and
            // published that connection's will (chimed's "offline") then: a command answered after
            // this point comes after it, for the backend watching chimed and for the device.
            await watch.fence()
            let own = try? await b.request(
                "chime/phone-b/cmd/list",
                #"{"requestId":"while-\#(clientId)"}"#,
                responseTopic: "chime/phone-b/replies/app"
            )
            #expect(own?["ok"] == true, "a command of another device during the attempt with \(clientId)")
            attacker.stop()
        }
        // chimed never lost its connection: its status never went offline (its will), and it has
        // not connected again since (its stats count every connection).
        #expect(watch.states == ["online"], "chimed's status went \(watch.states)")
        #expect(try await watch.reconnects() == reconnectsBefore)
        #expect(!d.chimed.log.contains("disconnected from the broker"), "\(d.chimed.log)")

        // While chimed is away: a command waits in its session; the device tries again, and once
        // chimed is back the command is answered, so the device had neither taken the session (and
        // with it the queued command) nor replaced it with an empty one.
        d.chimed.process.terminate()
        #expect(await d.chimed.process.waitForExit(timeout: .seconds(20)) == .exited(0))
        let code = try await b.requester.publish(
            topic: "chime/phone-b/cmd/list",
            payload: Array(#"{"requestId":"queued"}"#.utf8),
            timeout: .seconds(10)
        )
        #expect(code < 0x80)
        for clientId in Self.chimedsClientIds(d) {
            let attacker = try await Attacker.connect(d, clientId: clientId, cleanStart: cleanStart)
            attacker.stop()
        }
        let again = try await d.startChimedAgain()
        defer { again.process.terminate() }
        let answered = await b.wait(timeout: .seconds(20)) { messages in
            messages.contains {
                $0.topic == "chime/phone-b/replies"
                    && (try? RecordingClient.object($0.payload))?["requestId"] == "queued"
            }
        }
        #expect(answered, "the command queued in chimed's session was not answered: \(again.log)")
        again.process.terminate()
        await again.process.waitForExit(timeout: .seconds(20))
    }

    @Test(arguments: DeviceCredentials.allCases)
    func aDeviceConnectedTwiceKnocksItsOwnFirstConnectionOff(credentials: DeviceCredentials) async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a"], credentials: credentials)
        defer { Task { await d.stop() } }
        let watch = try await WorkerWatch.start(d)
        let reconnectsBefore = try await watch.reconnects()
        // Two connections of one account, with client ids of their own choosing.
        let first = try await Attacker.connect(d, user: "phone-a", clientId: "phone-a-app", cleanStart: true)
        defer { first.stop() }
        let second = try await d.client("phone-a")
        let knockedOff = await first.recorder.waitUntil { !$0.disconnections.isEmpty }
        // (mosquitto 2.0.11 closes it without an MQTT 5 DISCONNECT: libmosquitto reports connection
        // lost, as for a network failure.)
        #expect(knockedOff, "the first connection stayed up")
        first.stop()
        // The second connection is the account's now, and chimed serves it; nobody else was touched.
        let listed = try await second.request(
            "chime/phone-a/cmd/list",
            "{}",
            responseTopic: "chime/phone-a/replies/app"
        )
        #expect(listed["ok"] == true)
        await watch.fence()
        #expect(watch.states == ["online"])
        #expect(try await watch.reconnects() == reconnectsBefore)
    }

    @Test(arguments: DeviceCredentials.allCases)
    func theShippedHealthCheckDoesNotDisconnectChimed(credentials: DeviceCredentials) async throws {
        let d = try await SecuredDeployment.start(devices: [], credentials: credentials)
        defer { Task { await d.stop() } }
        let watch = try await WorkerWatch.start(d)
        let reconnectsBefore = try await watch.reconnects()
        let bin = URL(fileURLWithPath: try builtProduct("chime")).deletingLastPathComponent().path
        let entryPoint = Repository.path("deploy/container/chime-env")
        func health(_ environment: [String: String]) throws -> ChildProcess {
            let process = try ChildProcess(
                entryPoint,
                arguments: ["health"],
                environment: ["PATH": "\(bin):/usr/bin:/bin", "CHIME_WORKER_ID": d.workerId].merging(environment) {
                    $1
                }
            )
            try process.start()
            return process
        }
        func output(_ process: ChildProcess) -> String {
            (process.standardOutputLines + process.standardErrorLines).joined(separator: "\n")
        }

        // The image's HEALTHCHECK and the Kubernetes probes: chimed's CHIME_BROKER and the health
        // check's own account in CHIME_HEALTH_BROKER. Two at once (a readiness and a liveness probe
        // may overlap) take turns instead of knocking each other off.
        let shipped = ["CHIME_BROKER": d.url("chimed"), "CHIME_HEALTH_BROKER": d.url(d.healthAccount)]
        let probes = try [health(shipped), health(shipped)]
        for probe in probes {
            #expect(await probe.waitForExit(timeout: .seconds(30)) == .exited(0), "\(output(probe))")
        }
        // The Kubernetes and compose layout: the accounts' passwords in files named after them (a
        // Secret volume; compose's worker-passwords volume), the broker URL without an account.
        let secrets = try TemporaryDirectory(prefix: "chime-passwords")
        for account in [d.workerId, d.healthAccount] {
            try (d.passwords[account] ?? "").write(
                toFile: secrets.appending(account),
                atomically: true,
                encoding: .utf8
            )
        }
        let pod = try health([
            "CHIME_BROKER": "mqtt://\(d.broker.host):\(d.broker.port)", "CHIME_PASSWORD_DIR": secrets.path,
        ])
        #expect(await pod.waitForExit(timeout: .seconds(30)) == .exited(0), "\(output(pod))")

        // A health check that would connect with chimed's account is refused before it connects.
        for environment in [
            ["CHIME_BROKER": d.url("chimed")], shipped.merging(["CHIME_HEALTH_BROKER": d.url("chimed")]) { $1 },
        ] {
            let refused = try health(environment)
            #expect(await refused.waitForExit(timeout: .seconds(30)) == .exited(1))
            #expect(output(refused).contains("take over chimed's session"), "\(output(refused))")
        }

        // chimed was never knocked off: status online throughout, no new connection.
        await watch.fence()
        #expect(watch.states == ["online"], "chimed's status went \(watch.states)")
        #expect(try await watch.reconnects() == reconnectsBefore)
    }

    @Test(arguments: DeviceCredentials.allCases)
    func theBrokerStopsOversizedPacketsBeforeChimedSeesThem(credentials: DeviceCredentials) async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-evil", "phone-b"], credentials: credentials)
        defer { Task { await d.stop() } }
        let watch = try await WorkerWatch.start(d)
        let reconnectsBefore = try await watch.reconnects()
        let limit = try #require(
            Int(
                BrokerConfigLines(try Repository.text(Repository.productionBrokerConfig)).value("max_packet_size") ?? ""
            )
        )
        let oversized = Array(repeating: UInt8(ascii: " "), count: limit + 1)

        // An MQTT 5 client is told the limit at CONNACK: libmosquitto refuses to send the packet.
        let evil5 = try await d.client("phone-evil")
        #expect(throws: MQTTError.self) {
            try evil5.requester.client.publish(topic: "chime/phone-evil/cmd/schedule", payload: oversized)
        }
        evil5.requester.stop()
        // An MQTT 3.1.1 client is not told: the broker disconnects it when the packet arrives.
        let evil311 = try await Attacker.connect(
            d,
            user: "phone-evil",
            clientId: "evil",
            cleanStart: true,
            protocolVersion: .v311
        )
        defer { evil311.stop() }
        try evil311.client.publish(topic: "chime/phone-evil/cmd/schedule", payload: oversized)
        let dropped = await evil311.recorder.waitUntil(timeout: .seconds(20)) { !$0.disconnections.isEmpty }
        #expect(dropped, "the broker kept the connection that sent \(limit + 1) bytes")
        evil311.stop()

        // Under the limit, chimed answers for itself: the largest command it takes is scheduled, and
        // one byte more is refused with payload_too_large.
        let b = try await d.client("phone-b")
        let maxCommandBytes = ChimedDefaults.maxCommandBytes
        let tooLarge = try await b.request(
            "chime/phone-b/cmd/schedule",
            Self.command(bytes: maxCommandBytes + 1, escape: "x"),
            responseTopic: "chime/phone-b/replies/app"
        )
        #expect((tooLarge["error"]?.objectValue)?["code"] == "payload_too_large")
        await watch.fence()
        #expect(watch.states == ["online"], "chimed's status went \(watch.states)")
        #expect(try await watch.reconnects() == reconnectsBefore)
    }

    @Test(arguments: DeviceCredentials.allCases)
    func theLargestDeliveryFitsUnderTheBrokersLimit(credentials: DeviceCredentials) async throws {
        // A command of --max-command-bytes whose alert texts are all "\b" (2 bytes each): chimed
        // writes each as \u0008 (6 bytes), so its delivery is about three times the command. The
        // broker's max_packet_size must let chimed publish it, or chimed could never deliver it.
        let d = try await SecuredDeployment.start(devices: ["phone-b"], credentials: credentials)
        defer { Task { await d.stop() } }
        let b = try await d.client("phone-b")
        try await b.requester.subscribe("chime/phone-b/notifications", timeout: .seconds(10))
        let command = Self.command(bytes: ChimedDefaults.maxCommandBytes, escape: #"\b"#)
        let scheduled = try await b.request(
            "chime/phone-b/cmd/schedule",
            command,
            responseTopic: "chime/phone-b/replies/app"
        )
        #expect(scheduled["ok"] == true, "\(JSON.object(scheduled).text.prefix(300))")
        let delivered = await b.wait(timeout: .seconds(20)) { messages in
            messages.contains { $0.topic == "chime/phone-b/notifications" }
        }
        #expect(delivered, "no delivery: \(d.chimed.log.suffix(2000))")
        let payload = b.messages.first { $0.topic == "chime/phone-b/notifications" }?.payload ?? []
        #expect(payload.count > 3 * ChimedDefaults.maxCommandBytes - 4096, "the delivery is \(payload.count) bytes")
    }

    /// A schedule command of exactly `bytes` bytes: alert texts of `escape` repeated (each at most
    /// the 65536 characters a string field may have), padded with spaces.
    static func command(bytes: Int, escape: String) -> String {
        var command = #"{"id":"big","after":1"#
        for field in ["alertTitle", "alertBody", "alertAction", "category"] {
            let frame = #","\#(field)":"""#.utf8.count + 2  // the closing quote, and the final }
            let room = (bytes - command.utf8.count - frame) / escape.utf8.count
            guard room > 0 else { break }
            command += #","\#(field)":""# + String(repeating: escape, count: min(room, 65_536)) + #"""#
        }
        command += "}"
        return command + String(repeating: " ", count: bytes - command.utf8.count)
    }
}

/// A client of some account that connects with a client id of its choosing, recording its events.
final class Attacker: Sendable {
    let client: MQTTClient
    let recorder = MQTTEventRecorder()

    private init(options: MQTTOptions) throws {
        client = try MQTTClient(options: options, onEvent: recorder.handler)
    }

    /// Connects as `user` (by default the device `phone-evil`) with `clientId`, and waits for the
    /// CONNACK. It does not reconnect within the test: a second try would only repeat the first.
    static func connect(
        _ d: SecuredDeployment,
        user: String = "phone-evil",
        clientId: String,
        cleanStart: Bool,
        protocolVersion: MQTTOptions.ProtocolVersion = .v5
    ) async throws -> Attacker {
        var options = d.options(user, protocolVersion: protocolVersion)
        options.clientId = clientId
        options.cleanStart = cleanStart
        options.sessionExpiryInterval = cleanStart ? 0 : 3600
        options.reconnectDelay = .seconds(600) ... .seconds(600)
        let attacker = try Attacker(options: options)
        try attacker.client.start()
        let connected = await attacker.recorder.waitUntil { $0.connectedCount >= 1 }
        try #require(connected, "\(user) could not connect as \(clientId): \(d.broker.log.suffix(1000))")
        return attacker
    }

    func stop() { client.stop() }
}

/// chimed's retained status and its stats, as the backend account sees them.
final class WorkerWatch: Sendable {
    let client: RecordingClient
    let workerId: String
    private let fences = Mutex(0)

    private init(client: RecordingClient, workerId: String) {
        self.client = client
        self.workerId = workerId
    }

    /// Subscribes and waits for the retained status, online (the positive control of every check
    /// that it never goes offline).
    static func start(_ d: SecuredDeployment) async throws -> WorkerWatch {
        let watch = WorkerWatch(client: try await d.client("backend"), workerId: d.workerId)
        try await watch.client.requester.subscribe("chime/$worker/\(d.workerId)/status", timeout: .seconds(10))
        try await watch.client.requester.subscribe("chime/$worker/\(d.workerId)/stats", timeout: .seconds(10))
        let online = await watch.client.wait { _ in watch.states == ["online"] }
        try #require(online, "no online status for \(d.workerId): \(watch.states)")
        return watch
    }

    /// The `state` of every status message so far, in order.
    var states: [String] {
        client.messages(where: { $0.topic.hasSuffix("/status") }).map {
            (try? RecordingClient.object($0.payload))?["state"]?.stringValue ?? "?"
        }
    }

    /// `reconnects` of the first stats message chimed publishes after the call: every connection
    /// chimed made until then.
    func reconnects() async throws -> Int64 {
        let seen = client.messages(where: { $0.topic.hasSuffix("/stats") }).count
        let arrived = await client.wait { messages in messages.filter { $0.topic.hasSuffix("/stats") }.count > seen }
        try #require(arrived, "no stats from \(workerId)")
        let stats = try RecordingClient.object(client.messages(where: { $0.topic.hasSuffix("/stats") })[seen].payload)
        guard case .int(let count)? = stats["reconnects"] else {
            throw HarnessError("no reconnects in \(JSON.object(stats).text)")
        }
        return count
    }

    /// Sends chimed a read-only command and waits for its answer: the status messages the broker
    /// published before it have arrived by then. Records an issue when no answer comes (chimed lost
    /// the command).
    func fence(sourceLocation: SourceLocation = #_sourceLocation) async {
        let n = fences.withLock { value in
            value += 1
            return value
        }
        do {
            let reply = try await client.request(
                "chime/fence/cmd/list",
                "{}",
                responseTopic: "chime/fence/replies/backend-\(n)",
                timeout: .seconds(10)
            )
            #expect(reply["ok"] == true, sourceLocation: sourceLocation)
        } catch {
            Issue.record("a command to chimed was not answered: \(error)", sourceLocation: sourceLocation)
        }
    }
}
