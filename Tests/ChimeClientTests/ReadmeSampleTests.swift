// Imports only what an app imports: the types the API uses come with ChimeClientMQTT.
import ChimeClientMQTT
import Foundation
import Testing

/// The Swift client library's samples, run against the test broker: README's (ReadmeSample.swift)
/// and docs/getting-started.md's backend (BackendSample.swift), which DocSampleTests finds
/// verbatim in those pages.
@Suite struct ReadmeSampleTests {
    @Test func theReadmeSampleRuns() async throws {
        try await withWorld { world in
            let delivery = try #require(try await remindMe(brokerURL: world.broker.url))
            #expect(delivery.fireId.hasPrefix("tea@"))
            #expect(delivery.badge == 1)
            #expect(delivery.userInfo == ["kind": "tea"])
            let center = try ChimeNotificationCenter(deviceId: "phone-1", brokerURL: world.broker.url)
            let pending = try await center.pendingNotificationRequests()
            #expect(pending.map(\.identifier).contains("medicine"), "\(pending)")
            #expect(try await center.preview(identifier: "medicine", count: 3).count == 3)
            await center.disconnect()
        }
    }

    /// docs/getting-started.md's backend sample (BackendSample.swift): 100 phones from one connection, each
    /// delivered once.
    @Test func theBackendSampleRuns() async throws {
        try await withWorld { world in
            let phones = (0..<100).map { "phone-\($0)" }
            let received = try await springCampaign(brokerURL: world.broker.url, phones: phones)
            #expect(received == Dictionary(uniqueKeysWithValues: phones.map { ($0, 1) }))
            let center = try ChimeNotificationCenter(deviceId: "phone-0", brokerURL: world.broker.url)
            #expect(try await center.deviceSettings().timeZoneIdentifier == "Asia/Shanghai")
            await center.disconnect()
        }
    }

    /// The protocol's model types the API takes are there without importing ChimeCore.
    @Test func theModelTypesComeWithTheClient() {
        let info: JSONObject = ["kind": "med", "dose": JSON.int(2)]
        let content = NotificationContent(badge: Badge.increment(1), userInfo: info, misfire: Misfire.skip)
        let quiet = QuietHours(start: TimeOfDay(hour: 22, minute: 0), end: TimeOfDay(hour: 7, minute: 0))
        let trigger = NotificationTrigger.date(Date(), repeatInterval: RepeatUnit.day)
        let cleared: Set<NotificationField> = [.badge]
        let state = DeliveryState.acknowledged
        #expect(content.userInfo == info)
        #expect(quiet.start.hour == 22)
        #expect(trigger.repeats)
        #expect(cleared.contains(.badge))
        #expect(state.rawValue == "acknowledged")
    }
}
