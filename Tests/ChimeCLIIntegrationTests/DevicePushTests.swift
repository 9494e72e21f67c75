import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// `chime device`'s push options against a real chimed with push credentials (the push services'
/// stand-in, Tests/PushStandin): each registration added, shown by id without its secrets,
/// removed by id and all at once; a token past its bound refused with the field named.
@Suite(.serialized) struct DevicePushTests {
    @Test func pushRegistrationsAreAddedShownWithoutSecretsAndRemoved() async throws {
        let standin = try await PushStandin.start()
        defer { Task { await standin.stop() } }
        let w = try await CLIWorld.start(extra: try standin.chimedFlags())
        defer { Task { await w.stop() } }
        let token = String(repeating: "0a1b2c3d", count: 8)

        // As docs/push.md shows it.
        let apns = try await w.ok(
            "device",
            "--device",
            "phone-1",
            "--apns-token",
            token,
            "--apns-topic",
            "com.example.pills"
        )
        #expect(
            row(apns.out, "push") == "push         apns-427b2ea0 0a1b2c…2c3d com.example.pills production",
            "\(apns)"
        )
        #expect(!apns.stdout.contains(token))

        let subscription = try standin.subscription()
        let auth = subscription["keys"]?.objectValue?["auth"]?.stringValue ?? "?"
        let both = try await w.ok(
            "device",
            "--device",
            "phone-1",
            "--fcm-token",
            "fcm-token-1",
            "--webpush",
            JSON.object(subscription).text
        )
        let rows = both.out.filter { $0.hasPrefix("push ") }
        #expect(rows.count == 3, "\(both)")
        #expect(rows.contains { $0.contains("fcm-") } && rows.contains { $0.contains("webpush-") })
        #expect(!both.stdout.contains(auth) && !both.stdout.contains("fcm-token-1"), "\(both)")

        let removed = try await w.ok("device", "--device", "phone-1", "--remove-push", "apns-427b2ea0")
        #expect(removed.out.filter { $0.hasPrefix("push ") }.count == 2, "\(removed)")
        let none = try await w.ok("device", "--device", "phone-1", "--no-push")
        #expect(none.out.filter { $0.hasPrefix("push ") }.isEmpty, "\(none)")

        // Past its bound (4096 characters): refused, the field named, nothing kept.
        let long = try await w.chime(
            "device",
            "--device",
            "phone-1",
            "--fcm-token",
            String(repeating: "t", count: 4097)
        )
        #expect(long.status == 1, "\(long)")
        #expect(long.stderr.contains("invalid_argument"), "\(long)")
        #expect(long.stderr.contains("fcm"), "\(long)")
        let after = try await w.ok("device", "--device", "phone-1")
        #expect(after.out.filter { $0.hasPrefix("push ") }.isEmpty, "\(after)")
        // Two ways at once is a usage error, before anything is sent.
        let both2 = try await w.chime("device", "--device", "phone-1", "--fcm-token", "x", "--no-push")
        #expect(both2.status == 2, "\(both2)")
    }
}
