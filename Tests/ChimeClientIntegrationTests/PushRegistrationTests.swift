import ChimeClient
import ChimeHarness
import Testing

/// `setDeviceSettings(push:)` against a real chimed with push credentials (the push services'
/// stand-in): a phone's token replaces the one before, a shared device adds and removes by id, and
/// no reply carries a secret.
@Suite(.serialized) struct PushRegistrationTests {
    @Test func aPhoneRegistersItsTokenAndASharedDeviceAddsAndRemoves() async throws {
        let standin = try await PushStandin.start()
        defer { Task { await standin.stop() } }
        try await withWorld(extra: try standin.chimedFlags()) { world in
            let center = try world.center("phone-1")
            let first = String(repeating: "0a1b2c3d", count: 8)
            let apns = PushRegistration(.apns(token: first, topic: "com.example.pills", sandbox: false))
            let settings = try await center.setDeviceSettings(push: .replace([apns]))
            #expect(settings.pushRegistrations.map { $0["id"] } == ["apns-427b2ea0"])
            #expect(settings.pushRegistrations.first?["token"] == "0a1b2c…2c3d")

            // A new token (after a restore) replaces the old one.
            let second = String(repeating: "ffee", count: 16)
            let replaced = try await center.setDeviceSettings(
                push: .replace([PushRegistration(.apns(token: second, topic: "com.example.pills", sandbox: true))])
            )
            #expect(replaced.pushRegistrations.count == 1)
            #expect(replaced.pushRegistrations.first?["environment"] == "sandbox")

            let fcm = PushRegistration(.fcm(token: "fcm-token-1"))
            let added = try await center.setDeviceSettings(push: .add([fcm]))
            #expect(added.pushRegistrations.count == 2)
            #expect(!JSON.array(added.pushRegistrations.map { .object($0) }).text.contains("fcm-token-1"))
            let left = try await center.setDeviceSettings(push: .remove(ids: [fcm.id]))
            #expect(left.pushRegistrations.map { $0["provider"] } == ["apns"])
            #expect(try await center.deviceSettings().pushRegistrations == left.pushRegistrations)

            // One the worker refuses is an error with its code.
            let bad = PushRegistration(.apns(token: "xyz", topic: "com.example.pills", sandbox: false))
            await #expect(throws: ChimeClientError.self) { try await center.setDeviceSettings(push: .add([bad])) }
        }
    }
}
