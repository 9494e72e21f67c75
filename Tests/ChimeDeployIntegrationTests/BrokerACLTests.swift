import ChimeCore
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Testing

/// The production broker of deploy/mosquitto (its mosquitto.conf, its ACL verbatim, accounts made by
/// scripts/chime-accounts) with chimed under its own account: devices are isolated from each other.
@Suite(.serialized) struct BrokerACLTests {
    static let notAuthorized: Int32 = 0x87

    @Test(arguments: DeviceCredentials.allCases)
    func aDeviceCannotScheduleCancelOrListForAnother(credentials: DeviceCredentials) async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a", "phone-b", "phone-c"], credentials: credentials)
        defer { Task { await d.stop() } }
        let a = try await d.client("phone-a")
        let b = try await d.client("phone-b")
        let backend = try await d.client("backend")
        try await backend.requester.subscribe("chime/$worker/\(d.workerId)/stats", timeout: .seconds(10))

        let bReplies = "chime/phone-b/replies/app"
        _ = try await b.request(
            "chime/phone-b/cmd/schedule",
            #"{"id":"b1","after":3600,"alertBody":"B's","userInfo":{"k":"v"}}"#,
            responseTopic: bReplies
        ).okResult()
        let before = try await b.request("chime/phone-b/cmd/list", "{}", responseTopic: bReplies).okResult()
        #expect(before["notifications"]?.arrayValue?.count == 1)

        // Every operation on B's topics, over MQTT 5: the broker refuses each publish (PUBACK 0x87) ...
        let aReplies = "chime/phone-a/replies/app"
        let attempts: [(op: String, payload: String)] = [
            ("schedule", #"{"id":"evil","after":1,"alertBody":"from A"}"#),
            ("cancel", #"{"all":true}"#),
            ("list", "{}"),
            ("pause", #"{"ids":["b1"]}"#),
            ("resume", #"{"ids":["b1"]}"#),
            ("preview", #"{"id":"b1"}"#),
            ("device", #"{"badge":7,"timeZone":"Asia/Tokyo"}"#),
            ("snooze", #"{"id":"b1","after":1}"#),
        ]
        for attempt in attempts {
            var properties = MQTTPublishProperties()
            properties.responseTopic = aReplies
            properties.correlationData = Array(attempt.op.utf8)
            let code = try await a.requester.publish(
                topic: "chime/phone-b/cmd/\(attempt.op)",
                payload: Array(attempt.payload.utf8),
                qos: 1,
                properties: properties,
                timeout: .seconds(10)
            )
            #expect(code == Self.notAuthorized, "\(attempt.op): PUBACK reason \(code)")
        }
        // ... and over MQTT 3.1.1, where it drops them without saying so (from another device: an
        // account has one connection at a time).
        let c311 = try await d.client("phone-c", protocolVersion: .v311)
        for attempt in attempts {
            try await c311.requester.publish(
                topic: "chime/phone-b/cmd/\(attempt.op)",
                payload: Array(attempt.payload.utf8),
                timeout: .seconds(10)
            )
        }

        // A command of A's own, sent after them: once its reply is here, the attempts would have been
        // answered too (chimed serves commands in order), had any reached it.
        let own = try await a.request("chime/phone-a/cmd/list", "{}", responseTopic: aReplies).okResult()
        #expect(own["notifications"]?.arrayValue?.isEmpty == true)
        #expect(a.messages.map(\.topic).isEmpty)
        #expect(c311.messages.map(\.topic).isEmpty)

        // B's state is as it was.
        let after = try await b.request("chime/phone-b/cmd/list", "{}", responseTopic: bReplies).okResult()
        #expect(after == before)
        let device = try await b.request("chime/phone-b/cmd/device", "{}", responseTopic: bReplies).okResult()
        #expect(device["badge"] == 0)
        #expect(device["timeZone"] == nil || device["timeZone"] == .null)

        // chimed never saw them: its counters hold exactly the commands of B and A's own list.
        let expected: JSONObject = ["device": 1, "list": 3, "schedule": 1]
        let counted = await backend.wait { messages in
            messages.contains { (try? RecordingClient.object($0.payload))?["commands"] == .object(expected) }
        }
        let last = backend.messages.last.map { String(decoding: $0.payload, as: UTF8.self) } ?? "none"
        #expect(counted, "stats never showed \(JSON.object(expected).text); last: \(last)")
    }

    @Test(arguments: DeviceCredentials.allCases)
    func aDeviceCannotReadAnotherDevicesDeliveriesOrReplies(credentials: DeviceCredentials) async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a", "phone-b"], credentials: credentials)
        defer { Task { await d.stop() } }
        let a = try await d.client("phone-a")
        // Subscriptions that would show B's traffic: the broker lets A subscribe to some of them but
        // forwards nothing it may not read.
        for filter in [
            "chime/phone-b/notifications", "chime/phone-b/replies", "chime/phone-b/replies/#", "chime/phone-b/cmd/#",
            "chime/+/notifications", "chime/+/replies", "chime/#", "#",
        ] {
            try await a.requester.subscribe(filter, timeout: .seconds(10))
        }
        let b = try await d.client("phone-b")
        try await b.requester.subscribe("chime/phone-b/notifications", timeout: .seconds(10))
        try await b.requester.subscribe("chime/phone-b/replies", timeout: .seconds(10))
        let backend = try await d.client("backend")

        // B gets a notification from the backend and one of its own, scheduled without a Response
        // Topic (its reply goes to chime/phone-b/replies).
        _ = try await backend.request(
            "chime/phone-b/cmd/schedule",
            #"{"id":"from-backend","after":1,"alertBody":"hello B"}"#,
            responseTopic: "chime/phone-b/replies/r1"
        ).okResult()
        try await b.requester.publish(
            topic: "chime/phone-b/cmd/schedule",
            payload: Array(#"{"id":"own","after":1,"requestId":"b-own"}"#.utf8),
            timeout: .seconds(10)
        )
        let bGotAll = await b.wait { messages in
            messages.filter { $0.topic == "chime/phone-b/notifications" }.count == 2
                && messages.filter { $0.topic == "chime/phone-b/replies" }.count == 1
        }
        #expect(bGotAll, "B got \(b.messages.map(\.topic))")

        // A aims the replies to its own commands at B's topics and at the worker's status: chimed
        // answers on A's own replies topic instead.
        let aims = [
            "chime/phone-b/notifications", "chime/phone-b/replies", "chime/phone-b/replies/x",
            "chime/phone-b/cmd/cancel", "chime/$worker/\(d.workerId)/status",
        ]
        for (i, aim) in aims.enumerated() {
            var properties = MQTTPublishProperties()
            properties.responseTopic = aim
            let code = try await a.requester.publish(
                topic: "chime/phone-a/cmd/list",
                payload: Array(#"{"requestId":"aim-\#(i)"}"#.utf8),
                properties: properties,
                timeout: .seconds(10)
            )
            #expect(code < 0x80, "A's own command refused: \(code)")
        }
        let aReplies = await a.wait { messages in
            let ids = messages.filter { $0.topic == "chime/phone-a/replies" }.compactMap {
                (try? RecordingClient.object($0.payload))?["requestId"]?.stringValue
            }
            return Set(ids) == Set(aims.indices.map { "aim-\($0)" })
        }
        #expect(aReplies, "A's replies: \(a.messages.map(\.topic))")
        // Positive controls, not a pause: a command of B's, served after A's, is answered on B's
        // replies topic (the path a reply aimed at B would have taken); then one more of A's, answered
        // after it on A's. Once each is here, whatever chimed sent before it on that path is here too.
        func replied(_ requestId: String, on topic: String) -> @Sendable ([MQTTMessage]) -> Bool {
            { messages in
                messages.contains {
                    $0.topic == topic && (try? RecordingClient.object($0.payload))?["requestId"] == .string(requestId)
                }
            }
        }
        for (client, device) in [(b, "phone-b"), (a, "phone-a")] {
            try await client.requester.publish(
                topic: "chime/\(device)/cmd/list",
                payload: Array(#"{"requestId":"marker"}"#.utf8),
                timeout: .seconds(10)
            )
            let answered = await client.wait(until: replied("marker", on: "chime/\(device)/replies"))
            #expect(answered, "no reply to \(device)'s marker: \(client.messages.map(\.topic))")
        }

        let leaked = a.messages.map(\.topic).filter { !$0.hasPrefix("chime/phone-a/") }
        #expect(leaked.isEmpty)
        // B got exactly its two deliveries and its two replies: nothing A sent reached it.
        #expect(
            b.messages.map(\.topic).sorted() == [
                "chime/phone-b/notifications", "chime/phone-b/notifications", "chime/phone-b/replies",
                "chime/phone-b/replies",
            ]
        )
        let delivered = b.messages.filter { $0.topic == "chime/phone-b/notifications" }.compactMap {
            (try? RecordingClient.object($0.payload))?["id"]?.stringValue
        }
        #expect(Set(delivered) == ["from-backend", "own"])
        // The worker's retained status was not overwritten by a reply.
        try await backend.requester.subscribe("chime/$worker/\(d.workerId)/status", timeout: .seconds(10))
        let status = await backend.wait { $0.contains { $0.topic.hasSuffix("/status") } }
        #expect(status)
        let statusPayload = backend.messages.first { $0.topic.hasSuffix("/status") }?.payload ?? []
        #expect((try? RecordingClient.object(statusPayload))?["state"] == "online")
    }

    @Test func theBackendSchedulesForAnyDeviceAndReadsReplies() async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-b"])
        defer { Task { await d.stop() } }
        let backend = try await d.client("backend")
        for device in ["phone-b", "never-connected", "kiosk:42@lobby"] {
            let replies = "chime/\(device)/replies/jobs"
            let scheduled = try await backend.request(
                "chime/\(device)/cmd/schedule",
                #"{"id":"n","after":3600}"#,
                responseTopic: replies
            ).okResult()
            #expect(scheduled["scheduled"]?.arrayValue?.first?.objectValue?["id"] == "n", "\(device)")
            let listed = try await backend.request("chime/\(device)/cmd/list", "{}", responseTopic: replies)
                .okResult()
            #expect(listed["notifications"]?.arrayValue?.count == 1, "\(device)")
        }

        // On MQTT 3.1.1 (no Response Topic) the backend reads the device's replies topic. (One
        // connection per account: this one would take over the first.)
        backend.requester.stop()
        let old = try await d.client("backend", protocolVersion: .v311)
        try await old.requester.subscribe("chime/+/replies", timeout: .seconds(10))
        let reply = old.requester.expectMessage { $0.topic == "chime/phone-c/replies" }
        try await old.requester.publish(
            topic: "chime/phone-c/cmd/schedule",
            payload: Array(#"{"id":"m","after":3600,"requestId":"old-backend"}"#.utf8),
            timeout: .seconds(10)
        )
        let answer = try RecordingClient.object(try await reply.value(timeout: .seconds(10)).payload)
        #expect(answer["ok"] == true)
        #expect(answer["requestId"] == "old-backend")

        // The worker's status, for monitoring.
        try await old.requester.subscribe("chime/$worker/+/status", timeout: .seconds(10))
        #expect(await old.wait { $0.contains { $0.topic == "chime/$worker/\(d.workerId)/status" } })
    }

    /// Routing by slot: the forwarded commands' topics are the workers' alone. A device or a backend
    /// that could write them would reach a slot's owner as any device, past the device patterns.
    @Test func onlyWorkersMayWriteForwardedCommands() async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a"])
        defer { Task { await d.stop() } }
        let payload = Array(#"{"id":"x","after":3600}"#.utf8)
        for name in ["phone-a", "backend"] {
            let client = try await d.client(name)
            let code = try await client.requester.publish(
                topic: "chime/$slot/0/phone-a/cmd/schedule",
                payload: payload,
                timeout: .seconds(10)
            )
            #expect(code >= 0x80, "\(name) wrote a forwarded command: \(code)")
            // Positive control: the same account may command phone-a on its own topic.
            let own = try await client.requester.publish(
                topic: "chime/phone-a/cmd/list",
                payload: Array("{}".utf8),
                timeout: .seconds(10)
            )
            #expect(own < 0x80, "\(name)'s own command refused: \(own)")
            client.requester.stop()
        }
        let acl = try String(contentsOfFile: d.files.appending("chime.acl"), encoding: .utf8)
        let worker = acl.components(separatedBy: "user \(d.workerId)\n").last ?? ""
        #expect(worker.contains("topic readwrite chime/$slot/#"), "\(worker)")
    }

    /// `find` across the fleet (PROTOCOL.md section 3.12): a device may not ask it, whether it logs
    /// in with a password or a token, even with its own reply space as the Response Topic; a
    /// backend may, and chimed answers it there.
    @Test(arguments: DeviceCredentials.allCases)
    func onlyBackendsMayAskTheFleetToFind(credentials: DeviceCredentials) async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a"], credentials: credentials)
        defer { Task { await d.stop() } }
        let a = try await d.client("phone-a")
        let own = "chime/phone-a/replies/app"
        _ = try await a.request("chime/phone-a/cmd/schedule", #"{"id":"a1","after":3600}"#, responseTopic: own)
            .okResult()
        try await a.requester.subscribe("chime/$reply/phone-a/#", timeout: .seconds(10))
        var properties = MQTTPublishProperties()
        properties.responseTopic = "chime/$reply/phone-a/find"
        let code = try await a.requester.publish(
            topic: "chime/$fleet/find",
            payload: Array(#"{"prefix":"phone-"}"#.utf8),
            qos: 1,
            properties: properties,
            timeout: .seconds(10)
        )
        #expect(code == Self.notAuthorized, "PUBACK reason \(code)")
        // Had chimed received it, its reply would come before the reply to this later command of
        // the same device, on the same connection.
        _ = try await a.request("chime/phone-a/cmd/list", "{}", responseTopic: own).okResult()
        #expect(a.messages.filter { $0.topic.hasPrefix("chime/$reply/") }.isEmpty)

        // The positive control: the backend asks, chimed (its account reads the query) answers in
        // the backend's reply space.
        let backend = try await d.client("backend")
        let reply = try await backend.request(
            "chime/$fleet/find",
            #"{"prefix":"phone-"}"#,
            responseTopic: "chime/$reply/backend/find-1"
        )
        #expect(reply["workerId"] == .string(d.workerId))
        let devices = reply.okResult()["devices"]?.arrayValue?.compactMap { $0.objectValue?["deviceId"] }
        #expect(devices == ["phone-a"])
    }

    @Test func chimedServesUnderItsOwnAccountEndToEnd() async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-b"])
        defer { Task { await d.stop() } }
        let b = try await d.client("phone-b")
        try await b.requester.subscribe("chime/phone-b/notifications", timeout: .seconds(10))
        let result = try await b.request(
            "chime/phone-b/cmd/schedule",
            #"{"id":"e2e","after":1,"alertTitle":"Chime","alertBody":"works","badge":"+1"}"#,
            responseTopic: "chime/phone-b/replies/app"
        ).okResult()
        #expect(result["scheduled"]?.arrayValue?.first?.objectValue?["id"] == "e2e")
        #expect(await b.wait { $0.contains { $0.topic == "chime/phone-b/notifications" } })
        let delivery = try RecordingClient.object(b.messages.first { $0.topic.hasSuffix("/notifications") }!.payload)
        #expect(delivery["id"] == "e2e")
        #expect(delivery["alertBody"] == "works")
        #expect(delivery["badge"] == 1)
        #expect(d.chimed.process.isRunning)
    }

    @Test func theImageHealthCheckPassesUnderItsOwnAccountAndTheBackendCanProbe() async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a"])
        defer { Task { await d.stop() } }
        let bin = URL(fileURLWithPath: try builtProduct("chime")).deletingLastPathComponent().path
        func run(
            _ executable: String,
            _ arguments: [String],
            environment: [String: String]
        ) async throws -> ChildProcess.Termination? {
            let process = try ChildProcess(
                executable,
                arguments: arguments,
                environment: ["PATH": "\(bin):/usr/bin:/bin", "CHIME_WORKER_ID": d.workerId].merging(environment) {
                    $1
                }
            )
            try process.start()
            let status = await process.waitForExit(timeout: .seconds(30))
            if status != .exited(0) {
                print(
                    "\(arguments): \((process.standardOutputLines + process.standardErrorLines).joined(separator: "\n"))"
                )
            }
            return status
        }
        let entryPoint = Repository.path("deploy/container/chime-env")
        func health(_ account: String, _ extra: [String] = []) async throws -> ChildProcess.Termination? {
            try await run(
                entryPoint,
                ["health"] + extra,
                environment: ["CHIME_BROKER": d.url("chimed"), "CHIME_HEALTH_BROKER": d.url(account)]
            )
        }
        // The container's HEALTHCHECK and Kubernetes probes, with the health check's own account.
        #expect(try await health(d.healthAccount) == .exited(0))
        // Monitoring from the backend account, in its reply space.
        let probe = [
            "status", "--worker", d.workerId, "--timeout", "5s",
        ]
        #expect(try await run("\(bin)/chime", probe, environment: ["CHIME_BROKER": d.url("backend")]) == .exited(0))
        // Without --reply-topic, the CLI picks one in its user's reply space, which the ACL lets
        // it read: a device command from the backend account is answered.
        let listed = ["list", "--device", "phone-a", "--timeout", "5s"]
        #expect(try await run("\(bin)/chime", listed, environment: ["CHIME_BROKER": d.url("backend")]) == .exited(0))
        // A device account cannot read the worker's status nor send the probe's command: not ready.
        #expect(try await health("phone-a", ["--timeout", "2s"]) == .exited(1))
        // A stopped worker is not healthy.
        d.chimed.process.terminate()
        await d.chimed.process.waitForExit(timeout: .seconds(20))
        #expect(try await health(d.healthAccount, ["--timeout", "2s"]) == .exited(1))
    }

    @Test func anonymousClientsAndWrongPasswordsAreRefused() async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a"])
        defer { Task { await d.stop() } }
        func publish(_ extra: [String]) async throws -> (ChildProcess.Termination?, String) {
            let pub = try ChildProcess(
                "mosquitto_pub",
                arguments: ["-h", d.broker.host, "-p", "\(d.broker.port)", "-t", "chime/phone-a/cmd/list", "-m", "{}"]
                    + extra
            )
            try pub.start()
            let status = await pub.waitForExit(timeout: .seconds(15))
            return (status, (pub.standardErrorLines + pub.standardOutputLines).joined(separator: " "))
        }
        let anonymous = try await publish([])
        #expect(anonymous.0 != .exited(0))
        #expect(anonymous.1.contains("not authori"), "\(anonymous.1)")
        let wrong = try await publish(["-u", "phone-a", "-P", "not-the-password"])
        #expect(wrong.0 != .exited(0))
        let unknown = try await publish(["-u", "phone-z", "-P", d.passwords["phone-a"] ?? ""])
        #expect(unknown.0 != .exited(0))
        let right = try await publish(["-u", "phone-a", "-P", d.passwords["phone-a"] ?? ""])
        #expect(right.0 == .exited(0), "\(right.1)")

        // The client library, anonymous over MQTT 5: never connected.
        let client = try MQTTRequester(options: d.options(nil))
        defer { client.stop() }
        await #expect(throws: MQTTError.self) { try await client.connect(timeout: .seconds(2)) }
        #expect(d.broker.log.contains("not authorised"))
    }

    @Test func theAccountScriptAddsBackendsAndKeepsRolesApart() async throws {
        let files = try TemporaryDirectory(prefix: "chime-accounts")
        let acl = files.appending("chime.acl")
        let shipped = try Repository.text(Repository.acl)
        try shipped.write(toFile: acl, atomically: true, encoding: .utf8)
        let passwords = files.appending("chime.passwd")
        var accounts = Accounts(passwordFile: passwords, aclFile: acl)
        try await accounts.add("worker", "chimed")
        try await accounts.add("worker", "host-1-of-2")
        try await accounts.add("backend", "crm")
        try await accounts.add("device", "phone-1")
        let given = try await Accounts.run(
            ["--password-stdin", "add", "device", "phone-2"],
            passwordFile: passwords,
            aclFile: acl,
            input: "given-password-2"
        )
        #expect(given.status == .exited(0))
        #expect(given.output == ["given-password-2"])

        // A new backend gets its section appended; the shipped text is untouched above it.
        let edited = try String(contentsOfFile: acl, encoding: .utf8)
        #expect(edited.hasPrefix(shipped))
        #expect(edited.dropFirst(shipped.count).contains("user crm\ntopic write chime/+/cmd/#\n"))
        // A new worker's section names its own status topics only: the account is the worker id.
        let worker =
            edited.dropFirst(shipped.count).components(separatedBy: "user host-1-of-2\n").last?
            .components(separatedBy: "\n\n").first ?? ""
        #expect(worker.hasPrefix("topic read chime/+/cmd/#\n"), "\(worker)")
        #expect(worker.hasSuffix("topic write chime/$worker/host-1-of-2/#"), "\(worker)")
        #expect(!worker.contains("topic write chime/+/cmd/#"), "\(worker)")
        // Refusals: a device named like a backend or the worker, a name that is not one topic level,
        // an unknown role.
        for arguments in [
            ["add", "device", "crm"], ["add", "device", "chimed"], ["add", "device", "a/b"], ["add", "device", "+"],
            ["add", "device", "$SYS"], ["add", "admin", "x"], ["add", "worker", String(repeating: "w", count: 65)],
        ] {
            let refused = try await Accounts.run(arguments, passwordFile: passwords, aclFile: acl)
            #expect(refused.status != .exited(0), "\(arguments) was accepted")
            #expect(refused.output.isEmpty, "\(arguments) printed \(refused.output)")
        }
        let list = try await Accounts.run(["list"], passwordFile: passwords, aclFile: acl)
        #expect(
            Set(list.output) == [
                "worker chimed", "worker host-1-of-2", "backend crm", "device phone-1", "device phone-2",
            ]
        )
        let attributes = try FileManager.default.attributesOfItem(atPath: passwords)
        #expect((attributes[.posixPermissions] as? Int) == 0o640)

        // The broker takes the edited files: the new backend schedules for a device, which reads it.
        let persistence = files.appending("broker")
        try FileManager.default.createDirectory(atPath: persistence, withIntermediateDirectories: false)
        let broker = try await TestBroker.start(
            .init(
                extraLines: try ProductionBroker.configurationLines(
                    passwordFile: passwords,
                    aclFile: acl,
                    persistenceDirectory: persistence
                )
            )
        )
        let data = try TemporaryDirectory(prefix: "chime-accounts-data")
        let chimed = try Chimed(
            broker: broker,
            dataDirectory: data.path,
            workerId: "chimed",
            extra: ["--broker", "mqtt://chimed:\(accounts.password("chimed"))@\(broker.host):\(broker.port)"]
        )
        try await chimed.start()
        func client(_ user: String, _ password: String) async throws -> RecordingClient {
            var options = broker.clientOptions(clientId: "\(user)-client")
            options.username = user
            options.password = password
            let client = try RecordingClient(options: options)
            try await client.requester.connect(timeout: .seconds(10))
            return client
        }
        let crm = try await client("crm", accounts.password("crm"))
        let phone = try await client("phone-2", "given-password-2")
        _ = try await crm.request(
            "chime/phone-2/cmd/schedule",
            #"{"id":"crm","after":3600}"#,
            responseTopic: "chime/phone-2/replies/crm-1"
        ).okResult()
        let listed = try await phone.request("chime/phone-2/cmd/list", "{}", responseTopic: "chime/phone-2/replies/1")
            .okResult()
        #expect(listed["notifications"]?.arrayValue?.first?.objectValue?["id"] == "crm")

        // Removing takes the account out of the password file (the broker applies it on SIGHUP).
        let removed = try await Accounts.run(["remove", "phone-1"], passwordFile: passwords, aclFile: acl)
        #expect(removed.status == .exited(0))
        let after = try await Accounts.run(["list"], passwordFile: passwords, aclFile: acl)
        #expect(!after.output.contains("device phone-1"))

        crm.requester.stop()
        phone.requester.stop()
        chimed.process.terminate()
        await chimed.process.waitForExit(timeout: .seconds(20))
        await broker.stop()
    }
}
