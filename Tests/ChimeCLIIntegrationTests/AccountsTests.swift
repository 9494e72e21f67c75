import ChimeCrypto
import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeCLI

/// `chime accounts`: the deny list's text (as strict as the broker's plugin), and the built
/// command's tokens and files. The broker's side is in ChimeDeployIntegrationTests (`DeviceTokenTests`).
@Suite struct AccountsTests {
    @Test func theDenyListReadsWhatItWritesAndRefusesWhatThePluginWould() throws {
        var list = DenyList()
        let disabled = list.disable("phone-1", at: 10)
        let again = list.disable("phone-1", at: 11)
        #expect(disabled && !again)
        list.rotate("phone-1", at: 12)
        list.rotate("phone-1", at: 13)
        list.delete("phone-2", at: 14)
        #expect(try DenyList(text: list.text) == list)
        #expect(list.entries.filter { $0.device == "phone-1" }.map(\.state) == [.disabled, .rotated])
        #expect(list.blocking("phone-1") == .disabled)
        let enabled = try list.enable("phone-1")
        #expect(enabled)
        #expect(list.blocking("phone-1") == nil)
        #expect(list.entries.contains { $0.device == "phone-1" && $0.state == .rotated && $0.time == 13 })
        #expect(throws: AccountsError(.refused)) { try list.enable("phone-2") }
        // A device alone is disabled, as the plugin reads it; comments and blank lines are skipped.
        #expect(try DenyList(text: "# x\n\nphone-9\n").blocking("phone-9") == .disabled)
        for malformed in ["a/b disabled 1", "phone-1 gone 1", "phone-1 rotated", "phone-1 rotated -5", "p d 1 extra"] {
            #expect(throws: AccountsError(.malformedDenyList), "\(malformed)") { try DenyList(text: malformed) }
        }
    }

    @Test func aTokenNamesItsDeviceAndLifetime() throws {
        let token = try DeviceToken.mint(device: "phone-1", issuedAt: 1_000, lifetime: 60, key: .generate())
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        #expect(parts.count == 3)
        #expect(
            Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) } == #"{"alg":"ES256","typ":"JWT"}"#
        )
        #expect(
            Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) }
                == #"{"sub":"phone-1","iat":1000,"exp":1060}"#
        )
        #expect(Base64URL.decode(parts[2])?.count == 64)
        #expect(throws: AccountsError(.invalidDevice)) {
            try DeviceToken.mint(device: "a\",\"sub\":\"b", issuedAt: 0, lifetime: 1, key: .generate())
        }
    }

    @Test func theCommandKeepsItsFiles() async throws {
        let files = try TemporaryDirectory(prefix: "chime-accounts-cli")
        let flags = [
            "--signing-key", files.appending("a.key"), "--public-key", files.appending("a.pub"), "--deny-file",
            files.appending("a.deny"),
        ]
        #expect(try await runChime(["accounts", "keygen"] + flags).status == 0)
        let mode = { (path: String) in
            (try? FileManager.default.attributesOfItem(atPath: files.appending(path))[.posixPermissions] as? Int)
        }
        #expect(mode("a.key") == 0o600)
        #expect(mode("a.pub") == 0o644)
        #expect(try await runChime(["accounts", "keygen"] + flags).status == 1, "replaced the signing key")
        let added = try await runChime(["accounts", "add", "phone-1", "--ttl", "2h"] + flags)
        #expect(added.status == 0 && added.out.count == 1, "\(added)")
        #expect(try await runChime(["accounts", "disable", "phone-1"] + flags).status == 0)
        #expect(mode("a.deny") == 0o644)
        let refused = try await runChime(["accounts", "add", "phone-1"] + flags)
        #expect(refused.status == 1 && refused.out.isEmpty, "\(refused)")
        for arguments in [
            ["accounts", "add", "a/b"], ["accounts", "add", "$SYS"], ["accounts", "add", "phone-1", "--ttl", "367d"],
            ["accounts", "add"], ["accounts", "list", "extra"], ["accounts", "grant", "phone-1"],
        ] {
            let run = try await runChime(arguments + flags)
            #expect(run.status == 2 && run.out.isEmpty, "\(arguments): \(run)")
        }
        let list = try await runChime(["accounts", "list"] + flags)
        #expect(list.out.count == 1 && list.out[0].hasPrefix("phone-1  disabled  "), "\(list)")
    }
}
