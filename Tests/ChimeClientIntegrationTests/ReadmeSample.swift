import ChimeClientMQTT  // re-exports ChimeClient
import Foundation

/// Daily medicine at 18:00, and tea in 2 s: returns the first delivery, the tea.
func remindMe(brokerURL: String = "mqtt://127.0.0.1:1883") async throws -> ChimeDelivery? {
    let center = try ChimeNotificationCenter(deviceId: "phone-1", brokerURL: brokerURL)
    try await center.setDeviceSettings(timeZone: "Europe/Paris")
    let deliveries = center.deliveries  // an AsyncSequence of ChimeDelivery, from now on
    try await center.add(
        NotificationRequest(
            identifier: "medicine",
            content: NotificationContent(title: "Medicine", body: "Take your pill", userInfo: ["kind": "med"]),
            trigger: .calendar(matching: DateComponents(hour: 18, minute: 0), repeats: true)  // daily at 18:00
        )
    )
    print(try await center.preview(identifier: "medicine", count: 3))  // when will it fire?
    try await center.add(
        NotificationRequest(
            identifier: "tea",
            content: NotificationContent(body: "Tea is ready", badge: .increment(1), userInfo: ["kind": "tea"]),
            trigger: .timeInterval(2)
        )
    )
    for await delivery in deliveries {
        print(delivery.fireId, delivery.content.body ?? "", delivery.badge ?? 0)  // tea@2026-12-01T... Tea is ready 1
        await center.disconnect()
        return delivery
    }
    return nil
}
