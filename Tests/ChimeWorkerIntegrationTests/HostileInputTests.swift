import ChimeCore
import ChimeJournal
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Testing

/// The findings of a hostile review, each against the real chimed and mosquitto: what chimed
/// acknowledges it can read back, numbers stay exact, no device writes into another's replies,
/// refused deliveries are not lost, a redelivered command is applied once, and a flooding device
/// is slowed down while others are served.
@Suite(.serialized) struct HostileInputTests {
    /// `{"k":{"k":...{"k":1}...}}`, `depth` levels deep.
    static func nested(_ depth: Int) -> String {
        String(repeating: #"{"k":"#, count: depth - 1) + #"{"k":1}"# + String(repeating: "}", count: depth - 1)
    }

    @Test func whateverIsAcknowledgedIsReadBackAfterARestart() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        let deepest = CommandLimits.maximumUserInfoDepth
        // The deepest accepted, alone and in a batch (one more level of wrapping in the command).
        try await f.ok("deep", .schedule, #"{"id":"a","after":3600,"userInfo":\#(Self.nested(deepest))}"#)
        try await f.ok(
            "deep",
            .schedule,
            #"{"notifications":[{"id":"b","after":3600,"userInfo":\#(Self.nested(deepest))}]}"#
        )
        // One level more, and what used to be acknowledged and then refused at recovery.
        for depth in [deepest + 1, 62, 63] {
            let reply = try await f.send(
                "deep",
                .schedule,
                #"{"id":"c","after":3600,"userInfo":\#(Self.nested(depth))}"#
            )
            #expect(reply.errorCode == "invalid_argument", "depth \(depth): \(JSON.object(reply).text)")
            #expect(reply.errorField == "userInfo")
        }
        let before = try await f.list("deep")
        #expect(before.count == 2)

        // A snapshot holds one, the journal after it the other.
        try await f.ok("deep", .schedule, #"{"id":"d","after":3600,"userInfo":\#(Self.nested(deepest))}"#)
        f.worker?.process.signal(SIGUSR1)
        #expect(
            await f.worker?.process.waitForLine(onStandardError: true, timeout: .seconds(20)) {
                $0.contains("snapshot written")
            } != nil
        )
        try await f.ok("deep", .schedule, #"{"id":"e","after":3600,"userInfo":\#(Self.nested(deepest))}"#)
        let listed = try await f.list("deep")
        await f.killWorker()
        // verify reads everything chimed will (exit 0), and chimed starts.
        let verify = try ChildProcess(try builtProduct("chime"), arguments: ["journal", "verify", f.data.path])
        try verify.start()
        #expect(await verify.waitForExit(timeout: .seconds(30)) == .exited(0), "\(verify.standardOutputLines)")
        try await f.startWorker()
        #expect(try await f.list("deep") == listed)
        #expect(listed.count == 4)
        #expect(listed.allSatisfy { $0["userInfo"].map { JSON.object(["u": $0]).depth } == deepest + 1 })
    }

    /// A directory whose structure is sound but whose records chimed cannot read (as the old
    /// deep-userInfo records were): verify fails, as chimed's start does.
    @Test func verifyFailsWhereChimedCannotStart() async throws {
        let data = try TemporaryDirectory(prefix: "chime-data")
        let (journal, _) = try Journal.open(directory: data.path)
        let deep = Self.nested(63)
        let record =
            #"{"device":"d","at":0,"notifications":[{"id":"x","fireDate":"2026-12-01T00:00:00Z","userInfo":\#(deep)}]}"#
        try journal.append(type: JournalEntry.Kind.schedule.rawValue, payload: Array(record.utf8))
        try journal.commit()
        try journal.close()
        let verify = try ChildProcess(try builtProduct("chime"), arguments: ["journal", "verify", data.path])
        try verify.start()
        #expect(await verify.waitForExit(timeout: .seconds(30)) == .exited(1))
        #expect(verify.standardErrorLines.joined().contains("cannot be replayed"), "\(verify.standardErrorLines)")
        let broker = try await TestBroker.start()
        defer { Task { await broker.stop() } }
        let chimed = try Chimed(broker: broker, dataDirectory: data.path, workerId: "unreadable")
        try chimed.process.start()
        #expect(await chimed.process.waitForExit(timeout: .seconds(30)) == .exited(1), "chimed refuses it too")
    }

    @Test func numbersAreKeptExactlyOrRefused() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        let refused = try await f.send(
            "n",
            .schedule,
            #"{"id":"x","after":3600,"userInfo":{"order":12345678901234567890}}"#
        )
        #expect(refused.errorCode == "invalid_argument", "\(JSON.object(refused).text)")
        #expect(try await f.list("n").isEmpty)

        // 2^53 + 1 and 2^53 are different integers, though a double cannot tell them apart.
        try await f.ok("n", .schedule, #"{"id":"a","after":3600,"userInfo":{"order":9007199254740993}}"#)
        try await f.ok("n", .schedule, #"{"id":"b","after":3600,"userInfo":{"order":9007199254740992}}"#)
        try await f.ok("n", .schedule, #"{"id":"c","after":3600,"userInfo":{"price":0.1,"big":1.5e300}}"#)
        let cancelled = try await f.ok("n", .cancel, #"{"match":{"userInfo":{"order":9007199254740993}}}"#)
        #expect(cancelled["cancelled"] == ["a"])
        let rows = try await f.list("n")
        #expect(rows.map { $0["id"] } == ["b", "c"])
        #expect(rows.first?["userInfo"] == ["order": .int(9_007_199_254_740_992)])
        #expect(JSON.object(rows.last?["userInfo"]?.objectValue ?? [:]).text == #"{"price":0.1,"big":1.5e+300}"#)
    }

    @Test func aDeviceCannotAimItsRepliesIntoAnotherDevicesReplySpace() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        try await f.client.subscribe("chime/phone-a/replies", timeout: .seconds(10))
        try await f.client.subscribe("chime/$reply/#", timeout: .seconds(10))
        func list(requestId: String, responseTopic: String) async throws {
            var properties = MQTTPublishProperties()
            properties.responseTopic = responseTopic
            try await f.client.publish(
                topic: "chime/phone-a/cmd/list",
                payload: Array(#"{"requestId":"\#(requestId)"}"#.utf8),
                properties: properties,
                timeout: .seconds(10)
            )
        }
        // Its own space under $reply is honoured: the positive control.
        try await list(requestId: "own", responseTopic: "chime/$reply/phone-a/x")
        try await list(requestId: "other", responseTopic: "chime/$reply/backend/x")
        func replies(_ topic: String) -> [String] {
            f.commands.objects(on: topic).compactMap { $0["requestId"]?.stringValue }
        }
        #expect(await eventually { replies("chime/phone-a/replies") == ["other"] })
        #expect(replies("chime/$reply/phone-a/x") == ["own"])
        #expect(replies("chime/$reply/backend/x").isEmpty)
    }

    @Test func anObjectWithManyKeysIsAnsweredAndOthersAreServed() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        let members = (0..<23_000).map { "\"k\($0)\":1" }.joined(separator: ",")
        let reply = try await f.send("big", .schedule, "{" + members + "}")
        #expect(reply.errorCode == "unknown_field")
        let duplicate = try await f.send("big", .schedule, "{" + members + ",\"k22999\":2}")
        #expect(duplicate.errorCode == "malformed_json")
        #expect(try await f.ok("other", .schedule, #"{"id":"fine","after":3600}"#)["scheduled"] != nil)
    }

    /// A broker ACL that refuses chimed's deliveries to one device: they stay due, are retried
    /// with backoff, survive a restart, and go out once the ACL allows them.
    @Test func aRefusedDeliveryStaysDueUntilTheBrokerTakesIt() async throws {
        let acl = try TemporaryDirectory(prefix: "chime-acl")
        let aclFile = acl.appending("acl")
        func writeACL(blocking: Bool) throws {
            let lines =
                blocking ? ["topic deny chime/blocked/notifications", "topic readwrite #"] : ["topic readwrite #"]
            try (lines.joined(separator: "\n") + "\n").write(toFile: aclFile, atomically: true, encoding: .utf8)
        }
        try writeACL(blocking: true)
        let f = try await WorkerFixture.start(
            brokerConfiguration: .init(extraLines: ["allow_anonymous true", "acl_file \(aclFile)"])
        )
        defer { Task { await f.stop() } }
        try await f.subscribeDeliveries("blocked")
        try await f.subscribeDeliveries("open")
        try await f.ok("blocked", .schedule, #"{"id":"held","after":0.5}"#)
        try await f.ok("open", .schedule, #"{"id":"control","after":0.5}"#)
        #expect(await f.commands.waitForDelivery("open", id: "control") != nil)
        let refusals = { (chimed: Chimed?) in
            chimed?.process.standardErrorLines.filter { $0.contains("the broker refused a delivery") }.count ?? 0
        }
        // Refused, then retried after a second (the first backoff).
        #expect(await eventually { refusals(f.worker) >= 2 })
        #expect(try await f.list("blocked").count == 1, "a refused one-shot is still pending")

        // Not journaled as delivered: after a restart it is refused again.
        await f.stopWorker()
        try await f.startWorker()
        #expect(await eventually { refusals(f.worker) >= 1 })
        #expect(f.deliveries("blocked").isEmpty)

        try writeACL(blocking: false)
        f.broker.reload()
        let delivered = await f.commands.waitForDelivery("blocked", id: "held", timeout: .seconds(30))
        #expect(delivered?["late"] == true)
        #expect(try await eventually { try await f.list("blocked").isEmpty })
    }

    /// A SUBACK that refuses the command subscription (mosquitto's dynamic security plugin with
    /// subscriptions denied by default): chimed does not announce itself online, says why, and
    /// asks again a while later.
    @Test func aRefusedCommandSubscriptionIsNotServing() async throws {
        let plugin = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"
        try #require(FileManager.default.fileExists(atPath: plugin), "Debian's mosquitto package ships \(plugin)")
        let config = try TemporaryDirectory(prefix: "chime-dynsec")
        let file = config.appending("dynsec.json")
        try #"""
        {"defaultACLAccess":{"publishClientSend":true,"publishClientReceive":true,"subscribe":false,"unsubscribe":true},
         "clients":[],"groups":[{"groupname":"anon","roles":[]}],"roles":[],"anonymousGroup":"anon"}
        """#.write(toFile: file, atomically: true, encoding: .utf8)
        let broker = try await TestBroker.start(
            .init(extraLines: ["allow_anonymous true", "plugin \(plugin)", "plugin_opt_config_file \(file)"])
        )
        defer { Task { await broker.stop() } }
        let data = try TemporaryDirectory(prefix: "chime-data")
        let chimed = try Chimed(broker: broker, dataDirectory: data.path, workerId: "refused")
        try chimed.process.start()
        defer { chimed.process.kill() }
        let refusals = { chimed.process.standardErrorLines.filter { $0.contains("refused the command subscription") } }
        #expect(await eventually(timeout: .seconds(30)) { refusals().count >= 2 }, "\(chimed.log)")
        #expect(refusals().first?.contains("reason=0x87") == true)
        #expect(!chimed.log.contains(" serving "))
        #expect(chimed.log.contains(" connected "), "the positive control: it did connect")
    }

    /// Two chimed with one worker id knock each other off the broker (session taken over): one
    /// of them stops with a one-line reason instead of flapping for ever, and the other serves.
    @Test func twoWorkersWithOneIdEndInOneClearError() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.stop() } }
        let first = try Chimed(
            broker: broker,
            dataDirectory: try TemporaryDirectory(prefix: "chime-a").path,
            workerId: "same"
        )
        let second = try Chimed(
            broker: broker,
            dataDirectory: try TemporaryDirectory(prefix: "chime-b").path,
            workerId: "same"
        )
        try await first.start()
        try second.process.start()
        defer {
            first.process.kill()
            second.process.kill()
        }
        var exited: (Chimed, ChildProcess.Termination)?
        _ = await eventually(timeout: .seconds(90), every: .milliseconds(200)) { () -> Bool in
            for chimed in [first, second] {
                if let status = chimed.process.termination {
                    exited = (chimed, status)
                    return true
                }
            }
            return false
        }
        let (loser, status) = try #require(exited, "neither worker stopped")
        #expect(status == .exited(1))
        #expect(loser.log.contains("was taken over 5 times"), "\(loser.log.suffix(2000))")
        #expect(loser.log.contains("is a second chimed running with --worker-id same"))
        // The other one goes on serving.
        let winner = loser === first ? second : first
        let client = try await CommandClient(broker: broker)
        defer { client.stop() }
        #expect(try await client.ok("d", .schedule, #"{"id":"n","after":3600}"#)["scheduled"] != nil)
        #expect(winner.process.isRunning)
    }

    /// The broker sends a command again when chimed applied it but its PUBACK never arrived
    /// (here: chimed frozen while the broker restarts, so the PUBACK goes to a dead connection).
    /// With a requestId, and without one (the broker keeps the packet id), it is applied once.
    ///
    /// Whether the frozen chimed reads the first copy before it sees the broker go is a race: when
    /// it does not, the redelivery is the first copy it applies and the run shows nothing about
    /// duplicates. So the scenario runs until one run has the duplicate (at most 4), and every run
    /// must have applied the command exactly once.
    @Test(arguments: [true, false])
    func aRedeliveredCommandIsAppliedOnce(withRequestId: Bool) async throws {
        var sawDuplicate = false
        for _ in 1...4 where !sawDuplicate {
            sawDuplicate = try await redeliveredAfterABrokerRestart(withRequestId: withRequestId)
        }
        #expect(sawDuplicate, "no run had chimed read the first copy before the broker went")
    }

    /// One run of the scenario above; returns whether chimed recognised the redelivery.
    private func redeliveredAfterABrokerRestart(withRequestId: Bool) async throws -> Bool {
        let f = try await WorkerFixture.start(brokerConfiguration: .init(persistence: true, verboseLog: true))
        defer { Task { await f.stop() } }
        let chimed = try #require(f.worker)
        try await f.client.subscribe("chime/twice/replies", timeout: .seconds(10))
        let payload = withRequestId ? #"{"after":3600,"requestId":"once"}"# : #"{"after":3600}"#

        chimed.process.signal(SIGSTOP)
        try await f.client.publish(
            topic: "chime/twice/cmd/schedule",
            payload: Array(payload.utf8),
            timeout: .seconds(10)
        )
        // The broker has sent it to the frozen chimed (it is in chimed's socket, unacknowledged).
        let clientId = "chimed-\(f.workerId)"
        #expect(await eventually { f.broker.log.contains("Sending PUBLISH to \(clientId)") })
        await f.broker.stop()
        chimed.process.signal(SIGCONT)
        try await f.broker.restart()

        // The redelivery is answered as a duplicate, when chimed had applied the first copy.
        let duplicate = await eventually(timeout: .seconds(10)) {
            chimed.log.contains("a command was received again and not applied again")
        }
        // Applied once, whichever copy chimed applied; every reply that reached the client is ok.
        #expect(try await f.list("twice").count == 1)
        #expect(f.commands.objects(on: "chime/twice/replies").allSatisfy { $0["ok"] == true })
        #expect(f.broker.log.contains("Sending PUBLISH to \(clientId) (d1"), "the broker sent it again")
        return duplicate
    }

    /// The keys that recognise a redelivery survive a snapshot and a kill -9.
    @Test func theDuplicateWindowSurvivesSnapshotsAndRestarts() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        try await f.client.subscribe("chime/keys/replies", timeout: .seconds(10))
        func publish(_ payload: String) async throws {
            try await f.client.publish(
                topic: "chime/keys/cmd/schedule",
                payload: Array(payload.utf8),
                timeout: .seconds(10)
            )
        }
        func replyCount() -> Int { f.commands.objects(on: "chime/keys/replies").count }
        try await publish(#"{"after":3600,"requestId":"in-snapshot"}"#)
        #expect(await eventually { replyCount() == 1 })
        f.worker?.process.signal(SIGUSR1)
        #expect(
            await f.worker?.process.waitForLine(onStandardError: true, timeout: .seconds(20)) {
                $0.contains("snapshot written")
            } != nil
        )
        try await publish(#"{"after":3600,"requestId":"in-journal"}"#)
        #expect(await eventually { replyCount() == 2 })
        await f.killWorker()
        try await f.startWorker()

        try await publish(#"{"after":3600,"requestId":"in-snapshot"}"#)
        try await publish(#"{"after":3600,"requestId":"in-journal"}"#)
        // The same requestId with another payload is another command.
        try await publish(#"{"after":7200,"requestId":"in-journal"}"#)
        #expect(await eventually { replyCount() == 5 })
        let last = f.commands.objects(on: "chime/keys/replies").suffix(3).compactMap { $0["result"]?.objectValue }
        #expect(last.map { $0["duplicate"] == true } == [true, true, false])
        #expect(try await f.list("keys").count == 3)
    }

    /// A device that floods is answered `rate_limited` while another device is served.
    @Test func aFloodingDeviceIsRateLimitedAndOthersAreServed() async throws {
        let f = try await WorkerFixture.start(extra: ["--device-rate", "10", "--device-burst", "20"])
        defer { Task { await f.stop() } }
        try await f.client.subscribe("chime/flood/replies", timeout: .seconds(10))
        for i in 0..<100 {
            try await f.client.publish(
                topic: "chime/flood/cmd/preview",
                payload: Array(
                    #"{"notification":{"fireDate":"2026-01-01T00:00:00Z","rrule":"FREQ=DAILY"},"count":1000,"requestId":"\#(i)"}"#
                        .utf8
                ),
                qos: 0,
                timeout: .seconds(10)
            )
        }
        let replies = { f.commands.objects(on: "chime/flood/replies") }
        #expect(await eventually { replies().count == 100 })
        let limited = replies().filter { $0.errorCode == "rate_limited" }
        #expect(limited.count >= 50, "\(limited.count) of 100 rate limited")
        #expect(replies().contains { $0["ok"] == true })
        #expect(try await f.ok("bystander", .schedule, #"{"id":"n","after":3600}"#)["scheduled"] != nil)
    }
}

/// Storage per device: a byte quota beside the count, and `list` pages no larger than a broker
/// takes.
@Suite(.serialized) struct DeviceStorageTests {
    @Test func aDeviceFillingItsByteQuotaIsRefusedWhileAnotherIsServed() async throws {
        let f = try await WorkerFixture.start(extra: ["--max-bytes-per-device", "65536"])
        defer { Task { await f.stop() } }
        let body = String(repeating: "x", count: 3000)
        var scheduled = 0
        var refused: JSONObject?
        for i in 0..<40 {
            let reply = try await f.send("full", .schedule, #"{"id":"n\#(i)","after":3600,"alertBody":"\#(body)"}"#)
            if reply.isOK {
                scheduled += 1
            } else {
                refused = reply
                break
            }
        }
        #expect(refused?.errorCode == "quota_exceeded", "\(refused.map { JSON.object($0).text } ?? "none refused")")
        #expect((18...21).contains(scheduled), "\(scheduled) of 3 KB fit in 64 KB")
        // Replacing one by a smaller one still fits; the bystander is served.
        try await f.ok("full", .schedule, #"{"id":"n0","after":3600,"alertBody":"small"}"#)
        try await f.ok("other", .schedule, #"{"id":"fine","after":3600,"alertBody":"\#(body)"}"#)
        // The 3 KB that replacing n0 freed take one more, and then the device is full again.
        try await f.ok("full", .schedule, #"{"id":"refill","after":3600,"alertBody":"\#(body)"}"#)
        #expect(
            try await f.send("full", .schedule, #"{"id":"more","after":3600,"alertBody":"\#(body)"}"#).errorCode
                == "quota_exceeded"
        )
        // A restart rebuilds the same accounting.
        await f.killWorker()
        try await f.startWorker()
        let again = try await f.send("full", .schedule, #"{"id":"more","after":3600,"alertBody":"\#(body)"}"#)
        #expect(again.errorCode == "quota_exceeded")
    }

    @Test func listPagesStayUnderTheBrokersMessageSize() async throws {
        let f = try await WorkerFixture.start(extra: ["--max-bytes-per-device", "1048576"])
        defer { Task { await f.stop() } }
        let body = String(repeating: "y", count: 60_000)
        for i in 0..<8 {
            try await f.ok("wide", .schedule, #"{"id":"w\#(i)","after":3600,"alertBody":"\#(body)"}"#)
        }
        var cursor: String?
        var ids: [String] = []
        var pages = 0
        repeat {
            let payload = cursor.map { #"{"limit":1000,"cursor":"\#($0)"}"# } ?? #"{"limit":1000}"#
            let reply = try await f.commands.requester.request(
                topic: "chime/wide/cmd/list",
                payload: Array(payload.utf8),
                responseTopic: f.commands.replyTopic,
                timeout: .seconds(10)
            )
            #expect(reply.payload.count <= 262_144, "page \(pages) is \(reply.payload.count) bytes")
            let result = try #require(try JSON(parsing: reply.payload).objectValue?["result"]?.objectValue)
            ids += (result["notifications"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
            cursor = result["cursor"]?.stringValue
            pages += 1
        } while cursor != nil && pages < 20
        #expect(ids == (0..<8).map { "w\($0)" })
        #expect(pages >= 3, "480 KB of notifications take more than one page")
    }
}
