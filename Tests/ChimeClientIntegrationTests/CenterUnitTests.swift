import ChimeClient
import ChimeCore
import ChimeHarness
import Foundation
import Testing

/// The center against a fake transport, no broker: correlation, retries with the same bytes,
/// duplicates, error replies, the routing of deliveries and the payloads of composite calls.
@Suite struct CenterUnitTests {
    static func center(
        _ transport: FakeTransport,
        timeout: Duration = .seconds(10),
        attempts: Int = 2
    ) throws -> ChimeNotificationCenter {
        try ChimeNotificationCenter(
            deviceId: "d1",
            transport: transport,
            configuration: .init(timeout: timeout, attempts: attempts)
        )
    }

    @Test func aCommandGoesToItsTopicWithAResponseTopicAndCorrelationData() async throws {
        let transport = FakeTransport { _, _ in FakeTransport.ok("device", FakeTransport.deviceResult) }
        let center = try Self.center(transport)
        let settings = try await center.deviceSettings()
        #expect(settings.timeZoneIdentifier == "Europe/Paris")
        #expect(settings.badge == 2)
        let sent = try #require(transport.published.first)
        #expect(sent.topic == "chime/d1/cmd/device")
        #expect(sent.responseTopic == center.replyTopic)
        #expect(center.replyTopic.hasPrefix("chime/d1/replies/client-"))
        let requestId = try #require(sent.json["requestId"]?.stringValue)
        #expect(sent.correlationData == Array(requestId.utf8))
        #expect(sent.json.keys == ["requestId"])
        await center.disconnect()
    }

    @Test func aCommandWithoutAReplyIsSentAgainWithTheSameBytes() async throws {
        let transport = FakeTransport { _, index in
            index == 0 ? nil : FakeTransport.ok("device", FakeTransport.deviceResult)
        }
        // Long enough for the retry's reply, which the fake sends at once, to beat the timeout on
        // a machine busy with other tests.
        let center = try Self.center(transport, timeout: .seconds(1))
        _ = try await center.deviceSettings()
        let sent = transport.published
        #expect(sent.count == 2)
        #expect(sent.first == sent.last)
        await center.disconnect()
    }

    @Test func noReplyAfterEveryAttemptIsATimeout() async throws {
        let transport = FakeTransport { _, _ in nil }
        let center = try Self.center(transport, timeout: .milliseconds(50), attempts: 3)
        await #expect(throws: ChimeClientError(.timeout)) { try await center.deviceSettings() }
        #expect(transport.published.count == 3)
        #expect(Set(transport.published).count == 1)
        await center.disconnect()
    }

    /// The first attempt was applied and its reply lost: the retry is answered as a duplicate.
    @Test func aDuplicateAnswerStandsForTheLostReply() async throws {
        let transport = FakeTransport { message, index in
            switch index {
            case 0, 2: return nil
            case 1, 3: return FakeTransport.ok(message.op, #"{"duplicate":true}"#)
            default: return FakeTransport.ok("device", FakeTransport.deviceResult)
            }
        }
        let center = try Self.center(transport, timeout: .seconds(1))
        let request = NotificationRequest(identifier: "tea", content: .init(body: "Tea"), trigger: .timeInterval(60))
        #expect(try await center.add(request) == nil)
        // A device change answered as a duplicate is read back.
        let settings = try await center.setDeviceSettings(badge: 2)
        #expect(settings.badge == 2)
        #expect(transport.published.map(\.op) == ["schedule", "schedule", "device", "device", "device"])
        #expect(transport.published.last?.json.keys == ["requestId"])
        await center.disconnect()
    }

    @Test func errorRepliesAreTyped() async throws {
        let transport = FakeTransport { _, _ in
            #"{"ok":false,"op":"snooze","requestId":"x","error":{"code":"not_found","field":"id","message":"id: no notification \"nope\""}}"#
        }
        let center = try Self.center(transport)
        let error = await #expect(throws: ChimeClientError(.notFound)) {
            try await center.snooze(identifier: "nope", for: 60)
        }
        #expect(error?.field == "id")
        #expect(error?.message == #"id: no notification "nope""#)
        await center.disconnect()
    }

    @Test func repliesToOtherCommandsAndOtherTopicsAreIgnored() async throws {
        let transport = FakeTransport { _, _ in nil }
        let center = try Self.center(transport)
        let read = Task { try await center.deviceSettings() }
        let reply = FakeTransport.ok("device", FakeTransport.deviceResult)
        #expect(await eventually { !transport.published.isEmpty })
        let sent = try #require(transport.published.first)
        transport.receive(topic: center.replyTopic, reply, correlationData: Array("other".utf8))
        transport.receive(topic: center.replyTopic, reply)
        transport.receive(topic: "chime/d1/replies", reply, correlationData: sent.correlationData)
        var answer = FakeTransport.deviceResult
        answer = answer.replacingOccurrences(of: #""badge":2"#, with: #""badge":7"#)
        transport.receive(
            topic: center.replyTopic,
            FakeTransport.ok("device", answer),
            correlationData: sent.correlationData
        )
        #expect(try await read.value.badge == 7)
        await center.disconnect()
    }

    @Test func deliveriesReachEverySequence() async throws {
        let transport = FakeTransport { _, _ in FakeTransport.ok("device", FakeTransport.deviceResult) }
        let center = try Self.center(transport)
        try await center.connect()
        let first = center.deliveries
        let second = center.deliveries
        transport.receive(topic: center.notificationsTopic, "not a delivery")
        transport.receive(
            topic: center.notificationsTopic,
            #"{"id":"tea","fireId":"tea@2026-12-01T10:00:00Z","occurrenceDate":"2026-12-01T10:00:00Z","fireDate":"2026-12-01T10:00:00Z","firedAt":"2026-12-01T10:00:00.010Z","alertBody":"Tea","badge":1}"#
        )
        for stream in [first, second] {
            let delivery = await firstElement(of: stream)
            #expect(delivery?.identifier == "tea")
            #expect(delivery?.badge == 1)
        }
        await center.disconnect()
        // Disconnecting ends the sequences, and the center refuses further calls.
        #expect(await firstElement(of: first) == nil)
        await #expect(throws: ChimeClientError(.cancelled)) { try await center.deviceSettings() }
    }

    /// A non-repeating calendar trigger: its rule is previewed (without the lead time), and its
    /// first date scheduled as a one-shot.
    @Test func aCalendarTriggerWithoutRepeatsIsItsFirstDate() async throws {
        let transport = FakeTransport { message, _ in
            message.op == "preview"
                ? FakeTransport.ok("preview", #"{"fireDates":["2026-12-05T17:00:00Z"]}"#)
                : FakeTransport.ok(
                    "schedule",
                    #"{"scheduled":[{"id":"m","nextFireDate":"2026-12-05T16:45:00Z"}],"replaced":0}"#
                )
        }
        let center = try Self.center(transport)
        var trigger = NotificationTrigger.calendar(matching: DateComponents(hour: 18, minute: 0), repeats: false)
        trigger.leadTime = 900
        let next = try await center.add(
            NotificationRequest(identifier: "m", content: .init(body: "Dinner"), trigger: trigger)
        )
        #expect(next == Date(timeIntervalSince1970: 1_796_489_100))
        let sent = transport.published
        #expect(sent.map(\.op) == ["preview", "schedule"])
        let preview = try #require(sent.first?.json)
        #expect(preview["count"] == 1)
        let rule = try #require(preview["notification"]?.objectValue)
        #expect(rule.keys == ["fireDate", "rrule"])
        #expect(rule["rrule"] == "FREQ=DAILY;BYSECOND=0;BYMINUTE=0;BYHOUR=18")
        let schedule = try #require(sent.last?.json)
        #expect(schedule.keys == ["id", "fireDate", "leadTime", "alertBody", "requestId"])
        #expect(schedule["fireDate"] == "2026-12-05T17:00:00Z")
        await center.disconnect()
    }

    /// `update`'s payload: the content's given fields, a trigger as a whole (its other schedule
    /// fields cleared with null), and the cleared fields as null.
    @Test func anUpdateSendsOnlyWhatChanges() async throws {
        let transport = FakeTransport { _, _ in
            FakeTransport.ok("update", #"{"updated":{"id":"med","nextFireDate":"2026-12-05T17:00:00Z"}}"#)
        }
        let center = try Self.center(transport)
        let next = try await center.update(identifier: "med", content: .init(body: "Two pills"), clearing: [.badge])
        #expect(next == Date(timeIntervalSince1970: 1_796_490_000))
        let bodyOnly = try #require(transport.published.last)
        #expect(bodyOnly.topic == "chime/d1/cmd/update")
        #expect(bodyOnly.json.keys == ["id", "alertBody", "badge", "requestId"])
        #expect(bodyOnly.json["badge"] == .null)

        try await center.update(identifier: "med", trigger: .timeInterval(120))
        let schedule = try #require(transport.published.last?.json)
        #expect(schedule["after"] == 120)
        for field in [
            "fireDate", "alignTo", "timeZone", "repeatInterval", "rrule", "count", "until", "exdates", "leadTime",
        ] {
            #expect(schedule[field] == .null, "\(field)")
        }
        #expect(schedule["alertBody"] == nil)

        await #expect(throws: ChimeClientError(.invalidArgument)) {
            try await center.update(identifier: "med", content: .init(body: "x"), clearing: [.alertBody])
        }
        await center.disconnect()
    }

    @Test func invalidDeviceIdsAndConfigurationsAreRefused() {
        let transport = FakeTransport { _, _ in nil }
        for device in ["", "$worker", "a/b", "a+b", String(repeating: "x", count: 129)] {
            #expect(throws: ChimeClientError(.invalidArgument)) {
                try ChimeNotificationCenter(deviceId: device, transport: transport)
            }
        }
        for configuration in [
            ChimeNotificationCenter.Configuration(attempts: 0), .init(pageSize: 1001), .init(topicPrefix: "a/#"),
        ] {
            #expect(throws: ChimeClientError(.invalidArgument)) {
                try ChimeNotificationCenter(deviceId: "d1", transport: transport, configuration: configuration)
            }
        }
    }
}

/// The first element of `stream`, or nil when it ends or nothing comes within `timeout`.
func firstElement<Element: Sendable>(
    of stream: AsyncStream<Element>,
    timeout: Duration = .seconds(20)
) async -> Element? {
    await withTaskGroup(of: Element?.self) { group in
        group.addTask {
            for await element in stream { return element }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
