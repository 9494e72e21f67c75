import ChimeCore
import ChimeHarness
import Foundation
import Synchronization
import Testing

@testable import ChimeClient

/// The backend against a fake transport, no broker: each device's reply space, the window's
/// bound and order, cancellation of a waiting call, and deliveries by device.
@Suite struct BackendUnitTests {
    static let settings = FakeTransport.ok("device", FakeTransport.deviceResult)

    @Test func eachDeviceIsAnsweredInItsOwnReplySpaceUnderOneFilter() async throws {
        let transport = FakeTransport { _, _ in Self.settings }
        let backend = try ChimeBackend(transport: transport)
        _ = try await backend.device("phone-1").deviceSettings()
        _ = try await backend.device("phone-2").deviceSettings()
        let sent = transport.published
        try #require(sent.count == 2)
        #expect(sent.map(\.topic) == ["chime/phone-1/cmd/device", "chime/phone-2/cmd/device"])
        let suffix = try #require(backend.replyFilter.split(separator: "/").last.map(String.init))
        #expect(backend.replyFilter == "chime/+/replies/\(suffix)" && suffix.hasPrefix("backend-"))
        #expect(sent[0].responseTopic == "chime/phone-1/replies/\(suffix)")
        #expect(sent[1].responseTopic == "chime/phone-2/replies/\(suffix)")
        #expect(transport.subscriptions == [backend.replyFilter])
        await backend.disconnect()
    }

    /// A command the broker refuses (its PUBACK's reason code) fails at once as `.transport`,
    /// without waiting for a reply that cannot come; the others are answered.
    @Test func aCommandTheBrokerRefusesFailsAtOnce() async throws {
        let transport = FakeTransport(refusing: ["chime/other/cmd/device"]) { _, _ in Self.settings }
        let backend = try ChimeBackend(transport: transport, configuration: .init(timeout: .seconds(60)))
        let started = ContinuousClock.now
        let error = await #expect(throws: ChimeClientError(.transport)) {
            try await backend.device("other").deviceSettings()
        }
        #expect(error?.message.contains("reason code 135") == true)
        #expect(ContinuousClock.now - started < .seconds(30))
        _ = try await backend.device("mine").deviceSettings()
        await backend.disconnect()
    }

    @Test func aBackendRefusesAReplyTopicAndDevicesThatAreNotIds() throws {
        #expect(throws: ChimeClientError(.invalidArgument)) {
            try ChimeBackend(transport: FakeTransport { _, _ in nil }, configuration: .init(replyTopic: "x/y"))
        }
        #expect(throws: ChimeClientError(.invalidArgument)) {
            try ChimeBackend(transport: FakeTransport { _, _ in nil }, configuration: .init(window: 0))
        }
        let backend = try ChimeBackend(transport: FakeTransport { _, _ in nil })
        for bad in ["", "a/b", "+", "#", "$worker", String(repeating: "x", count: 129)] {
            #expect(throws: ChimeClientError(.invalidArgument), "\(bad)") { try backend.device(bad) }
        }
    }

    /// With a window of 3 and replies held back, 10 calls publish 3 commands; each reply lets
    /// one more call publish.
    @Test func theWindowBoundsTheCommandsWaitingForTheirReply() async throws {
        let transport = FakeTransport { _, _ in nil }
        let backend = try ChimeBackend(transport: transport, configuration: .init(window: 3))
        try await backend.connect()
        let calls = (0..<10).map { i in Task { try await backend.device("d\(i)").deviceSettings() } }
        #expect(await eventually { transport.published.count == 3 })
        #expect(backend.commandsInFlight == 3)
        for answered in 0..<10 {
            let sent = transport.published
            // Never more than 3 waiting for a reply.
            #expect(sent.count - answered == min(3, 10 - answered))
            let next = sent[answered]
            transport.receive(
                topic: try #require(next.responseTopic),
                Self.settings,
                correlationData: next.correlationData
            )
            #expect(await eventually { transport.published.count == min(answered + 4, 10) })
        }
        for call in calls { _ = try await call.value }
        #expect(Set(transport.published.map(\.topic)) == Set((0..<10).map { "chime/d\($0)/cmd/device" }))
        #expect(backend.commandsInFlight == 0)
        await backend.disconnect()
    }

    /// Places go to the callers in the order they came.
    @Test func theWindowServesFirstComeFirstServed() async throws {
        let window = RequestWindow(size: 1)
        try await window.take()
        let order = Recorder()
        var callers: [Task<Void, any Error>] = []
        for i in 0..<5 {
            callers.append(
                Task {
                    try await window.take()
                    order.values.withLock { $0.append(i) }
                    window.give()
                }
            )
            #expect(await eventually { window.waiting == i + 1 })
        }
        window.give()
        for caller in callers { try await caller.value }
        #expect(order.values.withLock { $0 } == [0, 1, 2, 3, 4])
        #expect(window.taken == 0 && window.waiting == 0)
    }

    /// A call waiting for a place gives up when its task is cancelled, and the place it would
    /// have had goes to the next one.
    @Test func aCallCancelledWhileWaitingForAPlaceLeavesTheLine() async throws {
        let transport = FakeTransport { _, _ in nil }
        let backend = try ChimeBackend(transport: transport, configuration: .init(window: 1))
        let first = Task { try await backend.device("a").deviceSettings() }
        #expect(await eventually { transport.published.count == 1 })
        let cancelled = Task { try await backend.device("b").deviceSettings() }
        let third = Task { try await backend.device("c").deviceSettings() }
        try await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        await #expect(throws: ChimeClientError(.cancelled)) { try await cancelled.value }
        let sent = try #require(transport.published.first)
        transport.receive(topic: try #require(sent.responseTopic), Self.settings, correlationData: sent.correlationData)
        _ = try await first.value
        #expect(await eventually { transport.published.count == 2 })
        #expect(transport.published.last?.topic == "chime/c/cmd/device")
        await backend.disconnect()
        // Disconnecting fails the call in flight.
        await #expect(throws: ChimeClientError(.cancelled)) { try await third.value }
    }

    @Test func deliveriesGoToTheStreamsOfTheirDevice() async throws {
        let transport = FakeTransport { _, _ in nil }
        let backend = try ChimeBackend(transport: transport)
        let all = try await backend.deliveries()
        let some = try await backend.deliveries(of: ["a", "b"])
        #expect(transport.subscriptions.contains("chime/+/notifications"))
        #expect(transport.subscriptions.contains("chime/a/notifications"))
        #expect(transport.subscriptions.contains("chime/b/notifications"))
        // The broker sends a's delivery once per subscription it matches: each stream gets it once.
        for device in ["c", "a", "a", "b"] {
            transport.receive(
                topic: "chime/\(device)/notifications",
                #"{"deviceId":"\#(device)","id":"tea","fireId":"tea@2026-12-01T10:00:00Z","occurrenceDate":"2026-12-01T10:00:00Z","fireDate":"2026-12-01T10:00:00Z","firedAt":"2026-12-01T10:00:00.010Z"}"#
            )
        }
        // A topic that only looks like a device's is no delivery.
        transport.receive(topic: "chime/a/b/notifications", #"{"id":"x"}"#)
        var seen: [String] = []
        for await delivery in all {
            seen.append(delivery.deviceId)
            if seen.count == 3 { break }
        }
        #expect(seen == ["c", "a", "b"])
        var theirs: [String] = []
        for await delivery in some {
            theirs.append(delivery.deviceId)
            if theirs.count == 2 { break }
        }
        #expect(theirs == ["a", "b"])
        await backend.disconnect()
    }

    /// A campaign: one batch a device, each device once, one device's failure kept to itself.
    @Test func aCampaignSendsOneBatchADeviceAndKeepsEachOutcome() async throws {
        let transport = FakeTransport { message, _ in
            message.topic.hasPrefix("chime/full/")
                ? #"{"ok":false,"op":"schedule","error":{"code":"quota_exceeded","message":"full"}}"#
                : FakeTransport.ok(
                    "schedule",
                    #"{"scheduled":[{"id":"a","nextFireDate":"2030-01-01T00:00:00Z"},{"id":"b","nextFireDate":"2030-01-02T00:00:00Z"}],"replaced":0}"#
                )
        }
        let backend = try ChimeBackend(transport: transport, configuration: .init(window: 2))
        let requests = ["a", "b"].map {
            NotificationRequest(
                identifier: $0,
                content: NotificationContent(body: "spring"),
                trigger: .date(Date(timeIntervalSince1970: 1_893_456_000))
            )
        }
        let outcomes = await backend.add(requests, toEach: ["d1", "full", "d2", "d1", "bad/id"])
        #expect(outcomes.count == 4)
        #expect(try outcomes["d1"]?.get().map(\.identifier) == ["a", "b"])
        #expect(try outcomes["d2"]?.get().count == 2)
        #expect(throws: ChimeClientError(.quotaExceeded)) { try outcomes["full"]?.get() }
        #expect(throws: ChimeClientError(.invalidArgument)) { try outcomes["bad/id"]?.get() }
        let batches = transport.published
        #expect(batches.count == 3)
        for batch in batches {
            #expect(batch.op == "schedule")
            guard case .array(let notifications)? = batch.json["notifications"] else {
                Issue.record("not a batch: \(batch.json)")
                continue
            }
            #expect(notifications.count == 2)
        }
        let tooMany = await backend.add(Array(repeating: requests[0], count: 1001), toEach: ["d1"])
        #expect(throws: ChimeClientError(.invalidArgument)) { try tooMany["d1"]?.get() }
        await backend.disconnect()
    }
}

/// What the callers did, in order.
private final class Recorder: Sendable {
    let values = Mutex<[Int]>([])
}
