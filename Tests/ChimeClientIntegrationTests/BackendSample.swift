import ChimeClientMQTT  // re-exports ChimeClient
import Foundation

/// A campaign for many phones from one backend connection; returns each phone's deliveries.
func springCampaign(brokerURL: String, phones: [String]) async throws -> [String: Int] {
    let backend = try ChimeBackend(brokerURL: brokerURL)  // one connection under a backend account
    let deliveries = try await backend.deliveries(of: Set(phones))  // theirs only, from now on
    let outcomes = await backend.add(  // one atomic batch a phone, up to 256 commands in flight
        [
            NotificationRequest(
                identifier: "spring",
                content: NotificationContent(body: "Spring is here", userInfo: ["campaign": "spring"]),
                trigger: .timeInterval(2)
            )
        ],
        toEach: phones
    )
    for (phone, outcome) in outcomes {
        if case .failure(let error) = outcome { print(phone, error) }  // one phone's error is its own
    }
    let phone = try backend.device(phones[0])  // a ChimeNotificationCenter on the same connection
    try await phone.setDeviceSettings(timeZone: "Asia/Shanghai")
    var received: [String: Int] = [:]
    for await delivery in deliveries {
        received[delivery.deviceId, default: 0] += 1
        if received.count == phones.count { break }
    }
    await backend.disconnect()
    return received
}
