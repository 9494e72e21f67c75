// Imports only what an app imports: the types the API uses come with ChimeClientMQTT.
import ChimeClientMQTT
import Foundation
import Testing

/// README's "The Swift client library" sample, run: with the test broker's URL, and a delivery
/// one second ahead so that its loop ends.
@Suite struct ReadmeSampleTests {
    @Test func theReadmeSampleRuns() async throws {
        try await withWorld { world in
            let center = try ChimeNotificationCenter(deviceId: "phone-1", brokerURL: world.broker.url)
            try await center.setDeviceSettings(timeZone: "Europe/Paris")
            let deliveries = center.deliveries
            try await center.add(
                NotificationRequest(
                    identifier: "medicine",
                    content: NotificationContent(
                        title: "Medicine",
                        body: "Take your pill",
                        badge: .increment(1),
                        userInfo: ["kind": "med"]
                    ),
                    trigger: .calendar(matching: DateComponents(hour: 18, minute: 0), repeats: true)
                )
            )
            let next = try await center.preview(identifier: "medicine", count: 3)
            #expect(next.count == 3)
            try await center.add(
                NotificationRequest(
                    identifier: "tea",
                    content: NotificationContent(body: "Tea", badge: .increment(1), userInfo: ["kind": "tea"]),
                    trigger: .timeInterval(1)
                )
            )
            for await delivery in deliveries {
                #expect(delivery.fireId.hasPrefix("tea@"))
                #expect(delivery.badge == 1)
                #expect(delivery.userInfo == ["kind": "tea"])
                break
            }
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
