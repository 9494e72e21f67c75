import ChimeClientMQTT  // re-exports ChimeClient
import Foundation

/// Medicine at 18:00 from Monday to Friday; returns the next five times it fires.
func remindOnWeekdays(brokerURL: String = "mqtt://127.0.0.1:1883") async throws -> [Date] {
    let center = try ChimeNotificationCenter(deviceId: "phone-1", brokerURL: brokerURL)
    try await center.setDeviceSettings(timeZone: "Europe/Paris")  // on the phone: TimeZone.current.identifier
    try await center.add(
        NotificationRequest(
            identifier: "medicine",
            content: NotificationContent(title: "Medicine", body: "Take your pill", sound: "default"),
            trigger: .calendar(matching: DateComponents(hour: 18, minute: 0), on: .weekdays, repeats: true)
        )
    )
    let next = try await center.preview(identifier: "medicine", count: 5)  // Monday to Friday, 18:00
    await center.disconnect()
    return next
}
