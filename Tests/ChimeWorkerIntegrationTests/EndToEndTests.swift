import ChimeCore
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Testing

/// The real chimed on a real mosquitto, driven by a real MQTT client.
@Suite(.serialized) struct EndToEndTests {
    @Test(arguments: StoreKind.allCases) func aNotificationScheduledOneSecondAheadArrivesWithItsFields(
        store: StoreKind
    ) async throws {
        let f = try await WorkerFixture.start(store: store)
        defer { Task { await f.stop() } }
        try await f.subscribeDeliveries("phone-1")
        let before = Date()
        let result = try await f.ok(
            "phone-1",
            .schedule,
            #"{"id":"med","after":1,"alertTitle":"Medicine","alertBody":"Take it","soundName":"default","badge":"+1","userInfo":{"tag":"med"},"requestId":"r1"}"#
        )
        #expect(result["scheduled"]?.arrayValue?.first?.objectValue?["id"] == "med")
        let got = await f.waitForDeliveries("phone-1", count: 1, timeout: .seconds(10))
        try #require(got.count == 1)
        let d = got[0]
        let elapsed = Date().timeIntervalSince(before)
        #expect(elapsed >= 1.0, "delivered after \(elapsed) s")
        #expect(d["deviceId"] == "phone-1")
        #expect(d["id"] == "med")
        #expect(d["fireId"] == .string("med@\(d["occurrenceDate"]?.stringValue ?? "?")"))
        #expect(d["occurrence"] == 1)
        #expect(d["last"] == true)
        #expect(d["late"] == false)
        #expect(d["missed"] == 0)
        #expect(d["deferred"] == false)
        #expect(d["alertTitle"] == "Medicine")
        #expect(d["alertBody"] == "Take it")
        #expect(d["soundName"] == "default")
        #expect(d["badge"] == 1)
        #expect(d["userInfo"] == ["tag": "med"])
        // fireDate is when it was due; firedAt within a second of it.
        let fireDate = try #require(DateTimeValue(iso8601: d["fireDate"]?.stringValue ?? ""))
        let firedAt = try #require(DateTimeValue(iso8601: d["firedAt"]?.stringValue ?? ""))
        guard case .instant(let due) = fireDate, case .instant(let fired) = firedAt else {
            Issue.record("times are not absolute")
            return
        }
        #expect(fired >= due)
        #expect(fired.milliseconds - due.milliseconds < 1000)
        // MQTT 5 properties of a delivery.
        let message = f.commands.received.withLock { $0.first { $0.topic == "chime/phone-1/notifications" } }
        #expect(message?.contentType == "application/json")
        #expect(message?.userProperties.contains(MQTTUserProperty("fire-id", d["fireId"]?.stringValue ?? "")) == true)
        // A fired one-shot is gone.
        #expect(try await f.list("phone-1").isEmpty)
    }

    @Test(arguments: StoreKind.allCases) func aNotificationCancelledBeforeItsTimeNeverArrives(
        store: StoreKind
    ) async throws {
        let f = try await WorkerFixture.start(store: store)
        defer { Task { await f.stop() } }
        try await f.subscribeDeliveries("d1")
        // Twenty seconds ahead: a CI machine running the whole suite at once once took more than six
        // for these three round trips, and the notification fired before its cancel was served.
        let start = Date()
        try await f.ok("d1", .schedule, #"{"id":"cancel-me","after":20,"userInfo":{"k":"x"}}"#)
        try await f.ok("d1", .schedule, #"{"id":"keep-me","after":20}"#)
        let cancelled = try await f.ok("d1", .cancel, #"{"match":{"userInfo":{"k":"x"}}}"#)
        let served = Date().timeIntervalSince(start)
        #expect(cancelled["cancelled"] == ["cancel-me"], "the cancel was served \(served) s after the first schedule")
        // A marker due after the cancelled one, on the same topic: deliveries come in due order, so
        // once the marker is here, the cancelled one would have come before it.
        try await f.ok("d1", .schedule, #"{"id":"marker","after":21}"#)
        let got = await f.waitForDeliveries("d1", count: 2, timeout: .seconds(40))
        #expect(got.compactMap { $0["id"]?.stringValue } == ["keep-me", "marker"])
    }

    @Test func mqtt311AndMqtt5ClientsBothGetReplies() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        // MQTT 5 with a Response Topic and Correlation Data: the reply comes back on it.
        let v5 = try await f.send("d5", ChimeCore.Operation.device, #"{"requestId":"five"}"#)
        #expect(v5["ok"] == true)
        #expect(v5["requestId"] == "five")
        #expect(v5["op"] == "device")

        // MQTT 3.1.1 has no Response Topic: the reply goes to P/{deviceId}/replies.
        let old = try MQTTRequester(options: f.broker.clientOptions(clientId: "old-client", protocolVersion: .v311))
        defer { old.stop() }
        try await old.connect(timeout: .seconds(10))
        try await old.subscribe("chime/d3/replies", qos: 1, timeout: .seconds(10))
        let expectation = old.expectMessage { $0.topic == "chime/d3/replies" }
        try await old.publish(
            topic: "chime/d3/cmd/schedule",
            payload: Array(#"{"id":"a","after":60,"requestId":"three"}"#.utf8),
            timeout: .seconds(10)
        )
        let reply = try JSON(parsing: try await expectation.value(timeout: .seconds(10)).payload).objectValue
        #expect(reply?["ok"] == true)
        #expect(reply?["requestId"] == "three")
        #expect(reply?["op"] == "schedule")

        // And the command-line clients people use by hand.
        let rr = try ChildProcess(
            "mosquitto_rr",
            arguments: [
                "-h", "127.0.0.1", "-p", "\(f.broker.port)", "-t", "chime/d3/cmd/list", "-e", "rr/reply", "-m", "{}",
                "-W", "10",
            ]
        )
        try rr.start()
        #expect(await rr.waitForExit(timeout: .seconds(15)) == .exited(0))
        let listed = try JSON(parsing: rr.standardOutputLines.joined()).objectValue
        #expect(listed?["ok"] == true)
        #expect(listed?["result"]?.objectValue?["notifications"]?.arrayValue?.count == 1)
    }

    @Test func badCommandsGetTheirErrorCodeAndChangeNothing() async throws {
        let f = try await WorkerFixture.start(extra: ["--max-command-bytes", "2048", "--max-userinfo-bytes", "64"])
        defer { Task { await f.stop() } }
        let cases: [(topic: String, payload: String, code: String, field: String?)] = [
            ("chime/d1/cmd/schedule", "{not json", "malformed_json", nil),
            ("chime/d1/cmd/schedule", "[1,2]", "malformed_json", nil),
            ("chime/d1/cmd/schedule", #"{"after":10,"alertBdy":"typo"}"#, "unknown_field", "alertBdy"),
            ("chime/d1/cmd/schedule", #"{"after":"10"}"#, "invalid_argument", "after"),
            ("chime/d1/cmd/schedule", #"{"after":-5}"#, "invalid_argument", "after"),
            ("chime/d1/cmd/schedule", #"{"fireDate":"tomorrow"}"#, "invalid_argument", "fireDate"),
            ("chime/d1/cmd/schedule", #"{"fireDate":"2026-02-30T10:00:00Z"}"#, "invalid_argument", "fireDate"),
            (
                "chime/d1/cmd/schedule", #"{"after":10,"userInfo":{"k":"\#(String(repeating: "x", count: 100))"}}"#,
                "payload_too_large", "userInfo"
            ),
            (
                "chime/d1/cmd/schedule", #"{"after":10,"alertBody":"\#(String(repeating: "x", count: 3000))"}"#,
                "payload_too_large", nil
            ),
            ("chime/d1/cmd/cancel", #"{"ids":["a"],"all":true}"#, "invalid_argument", "ids"),
            ("chime/bad device/cmd/schedule", #"{"after":10}"#, "invalid_argument", "deviceId"),
            ("chime/d1/cmd/explode", #"{}"#, "invalid_argument", "op"),
            ("chime/d1/cmd/snooze", #"{"id":"nope","after":10}"#, "not_found", "id"),
        ]
        for c in cases {
            let reply = try await f.send(topic: c.topic, c.payload)
            #expect(reply["ok"] == false, "\(c.topic) \(c.payload)")
            let error = reply["error"]?.objectValue
            #expect(error?["code"] == .string(c.code), "\(c.payload): \(JSON.object(reply).text)")
            if let field = c.field { #expect(error?["field"] == .string(field), "\(c.payload)") }
            #expect((error?["message"]?.stringValue ?? "").isEmpty == false)
        }
        #expect(try await f.list("d1").isEmpty)
        // The worker is still serving.
        try await f.ok("d1", .schedule, #"{"id":"fine","after":60}"#)
        #expect(try await f.list("d1").count == 1)
    }

    @Test(arguments: StoreKind.allCases) func killDashNineLosesNothingThatWasAcknowledged(store: StoreKind) async throws
    {
        let f = try await WorkerFixture.start(store: store)
        defer { Task { await f.stop() } }
        try await f.subscribeDeliveries("d1")
        var ids: [String] = []
        for i in 0..<20 {
            let id = "n\(i)"
            try await f.ok("d1", .schedule, #"{"id":"\#(id)","after":\#(i < 10 ? 4 : 3600),"alertBody":"\#(i)"}"#)
            ids.append(id)
        }
        try await f.ok("d1", .cancel, #"{"ids":["n19"]}"#)
        await f.killWorker()
        try await f.startWorker()
        let listed = try await f.list("d1").compactMap { $0["id"]?.stringValue }
        #expect(listed == ids.dropLast().sorted())
        let got = await f.waitForDeliveries("d1", count: 10, timeout: .seconds(15))
        #expect(Set(got.compactMap { $0["id"]?.stringValue }) == Set((0..<10).map { "n\($0)" }))
    }

    @Test(arguments: StoreKind.allCases) func commandsPublishedWhileTheWorkerIsDownAreServedWhenItIsBack(
        store: StoreKind
    ) async throws {
        let f = try await WorkerFixture.start(store: store)
        defer { Task { await f.stop() } }
        #expect(await f.stopWorker() == .exited(0))
        // The broker keeps the worker's persistent session and queues these for it.
        let replies = "chime/d9/replies"
        try await f.client.subscribe(replies, qos: 1, timeout: .seconds(10))
        for i in 0..<5 {
            try await f.client.publish(
                topic: "chime/d9/cmd/schedule",
                payload: Array(#"{"id":"q\#(i)","after":3600,"requestId":"q\#(i)"}"#.utf8),
                timeout: .seconds(10)
            )
        }
        try await f.startWorker()
        let listed = try await f.list("d9").compactMap { $0["id"]?.stringValue }
        #expect(listed == ["q0", "q1", "q2", "q3", "q4"])
    }

    @Test(arguments: StoreKind.allCases) func aRepeatingNotificationDeliversThreeTimesAndFlagsTheLast(
        store: StoreKind
    ) async throws {
        let f = try await WorkerFixture.start(store: store)
        defer { Task { await f.stop() } }
        try await f.subscribeDeliveries("r1")
        try await f.ok("r1", .schedule, #"{"id":"tick","after":1,"repeatInterval":"second","count":3}"#)
        // A marker due after a fourth tick would be: once it is here, a fourth would be too.
        try await f.ok("r1", .schedule, #"{"id":"marker","after":5}"#)
        let all = await f.waitForDeliveries("r1", count: 4, timeout: .seconds(15))
        #expect(all.last?["id"] == "marker")
        let got = all.filter { $0["id"] == "tick" }
        #expect(got.map { $0["occurrence"] } == [1, 2, 3])
        #expect(got.map { $0["last"] } == [false, false, true])
        #expect(Set(got.compactMap { $0["fireId"]?.stringValue }).count == 3)
        #expect(try await f.list("r1").isEmpty)
    }

    @Test func previewShowsDSTBehaviourWithoutWaiting() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        // 02:30 every day in New York: on 2026-03-08 that time does not exist and moves to 03:30 EDT.
        let result = try await f.ok(
            "p1",
            .preview,
            #"{"notification":{"fireDate":"2026-03-06T02:30","timeZone":"America/New_York","repeatInterval":"day"},"from":"2026-03-06T00:00:00Z","count":4}"#
        )
        #expect(
            result["fireDates"]
                == ["2026-03-06T07:30:00Z", "2026-03-07T07:30:00Z", "2026-03-08T07:30:00Z", "2026-03-09T06:30:00Z"]
        )
        #expect(try await f.list("p1").isEmpty)
    }

    @Test func statusIsRetainedOnlineAndOfflineOnStop() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        let watcher = try MQTTRequester(options: f.broker.clientOptions(clientId: "watcher"))
        defer { watcher.stop() }
        try await watcher.connect(timeout: .seconds(10))
        let status = "chime/$worker/\(f.workerId)/status"
        let online = watcher.expectMessage { $0.topic == status }
        try await watcher.subscribe(status, qos: 1, timeout: .seconds(10))
        let first = try JSON(parsing: try await online.value(timeout: .seconds(10)).payload).objectValue
        #expect(first?["state"] == "online")
        let offline = watcher.expectMessage { $0.topic == status }
        await f.stopWorker()
        let last = try JSON(parsing: try await offline.value(timeout: .seconds(10)).payload).objectValue
        #expect(last?["state"] == "offline")
    }
}
