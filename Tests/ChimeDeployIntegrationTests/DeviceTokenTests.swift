import ChimeCLI
import ChimeCore
import ChimeCrypto
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Testing

/// Device tokens on the production broker of deploy/mosquitto (its mosquitto.conf with the
/// device-token plugin, deploy/mosquitto/plugin/chime_auth.c, its ACL verbatim) with the real
/// chimed: a token of `chime accounts add` works at once, `disable`, `delete` and `rotate` cut a
/// device off, and no forged, expired, mismatched or malformed token gets in, nor takes the broker
/// down. docs/accounts.md says the same.
@Suite(.serialized) struct DeviceTokenTests {
    static let notAuthorized: Int32 = 0x87

    @Test func aTokenFromChimeAccountsAddWorksAtOnce() async throws {
        let d = try await SecuredDeployment.start(devices: [], credentials: .token)
        defer { Task { await d.stop() } }
        let tokens = try #require(d.tokens)
        let backend = try await d.client("backend")
        // A backend's client reads the deliveries of all its devices.
        try await backend.requester.subscribe("chime/+/notifications", timeout: .seconds(10))

        // Signed up after the broker started: no reload, no restart.
        let token = try await tokens.add("phone-new")
        let phone = try await Self.client(d, "phone-new", token)
        try await phone.requester.subscribe("chime/phone-new/notifications", timeout: .seconds(10))
        let scheduled = try await phone.request(
            "chime/phone-new/cmd/schedule",
            #"{"id":"hello","after":1,"alertBody":"welcome"}"#,
            responseTopic: "chime/phone-new/replies/app"
        )
        #expect(scheduled["ok"] == true, "\(JSON.object(scheduled).text)")
        let delivered = await phone.wait(timeout: .seconds(20)) { messages in
            messages.contains { $0.topic == "chime/phone-new/notifications" }
        }
        #expect(delivered, "no delivery: \(d.chimed.log.suffix(2000))")
        let seenByBackend = await backend.wait(timeout: .seconds(20)) { messages in
            messages.contains { $0.topic == "chime/phone-new/notifications" }
        }
        #expect(seenByBackend, "the backend did not read the device's delivery")
    }

    /// A device never joins a shared subscription: in the workers' group (chimed --routing slot) it
    /// would take a share of every device's commands and drop them.
    @Test func aTokenDeviceCannotJoinASharedSubscription() async throws {
        let d = try await SecuredDeployment.start(devices: [], credentials: .token)
        defer { Task { await d.stop() } }
        let tokens = try #require(d.tokens)
        let phone = try await Self.client(d, "phone-share", try await tokens.add("phone-share"))
        let shared = try? await phone.requester.subscribe("$share/chimed/chime/+/cmd/+", timeout: .seconds(10))
        #expect(shared.map { $0 >= 0x80 } ?? true, "granted \(String(describing: shared))")
        // Its own topics it may subscribe to.
        let own = try await phone.requester.subscribe("chime/phone-share/notifications", timeout: .seconds(10))
        #expect(own < 0x80)
    }

    @Test(arguments: ["disable", "delete"])
    func aDisabledOrDeletedDeviceIsCutOffAndCannotReconnect(action: String) async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a", "phone-b"], credentials: .token)
        defer { Task { await d.stop() } }
        let tokens = try #require(d.tokens)
        let a = try await Probe.connect(d, "phone-a", d.passwords["phone-a"] ?? "")
        defer { a.stop() }
        let b = try await d.client("phone-b")

        let (status, _, errors) = try await tokens.chimeAccounts([action, "phone-a"])
        #expect(status == .exited(0), "\(errors)")
        // Its connection is closed within about a second (the plugin looks at the deny list once a
        // second), and it cannot come back with the same token.
        let cutOff = await a.recorder.waitUntil(timeout: .seconds(10)) { !$0.disconnections.isEmpty }
        #expect(cutOff, "phone-a stayed connected: \(d.broker.log.suffix(1500))")
        #expect(try await Probe.attempt(d, "phone-a", d.passwords["phone-a"] ?? "") == false)
        // Nor does it get a new token.
        let refusedAdd = try await tokens.chimeAccounts(["add", "phone-a"])
        #expect(refusedAdd.status == .exited(1) && refusedAdd.output.isEmpty, "\(refusedAdd)")
        // Another device is untouched and served.
        let listed = try await b.request("chime/phone-b/cmd/list", "{}", responseTopic: "chime/phone-b/replies/app")
        #expect(listed["ok"] == true)

        let list = try await tokens.chimeAccounts(["list"])
        #expect(list.output.count == 1 && list.output.first?.hasPrefix("phone-a  \(action)d ") == true, "\(list)")
        let enable = try await tokens.chimeAccounts(["enable", "phone-a"])
        if action == "disable" {
            #expect(enable.status == .exited(0))
            #expect(try await tokens.chimeAccounts(["list"]).output.isEmpty)
            #expect(try await Probe.attempt(d, "phone-a", d.passwords["phone-a"] ?? "") == true)
        } else {
            #expect(enable.status == .exited(1), "a deleted device was enabled")
            #expect(try await Probe.attempt(d, "phone-a", d.passwords["phone-a"] ?? "") == false)
        }
        #expect(d.broker.isRunning)
    }

    @Test func rotateRefusesEarlierTokensAndClosesTheirConnections() async throws {
        let d = try await SecuredDeployment.start(devices: [], credentials: .token)
        defer { Task { await d.stop() } }
        let tokens = try #require(d.tokens)
        let key = try P256PrivateKey(pem: String(contentsOfFile: tokens.signingKey, encoding: .utf8))
        let now = Int64(Date().timeIntervalSince1970)
        // A token issued a minute ago, which the device is connected with.
        let old = try DeviceToken.mint(device: "phone-a", issuedAt: now - 60, lifetime: 3600, key: key)
        let connected = try await Probe.connect(d, "phone-a", old)
        defer { connected.stop() }

        let (status, output, errors) = try await tokens.chimeAccounts(["rotate", "phone-a", "--ttl", "1h"])
        #expect(status == .exited(0), "\(errors)")
        let fresh = try #require(output.first)
        let cutOff = await connected.recorder.waitUntil(timeout: .seconds(10)) { !$0.disconnections.isEmpty }
        #expect(cutOff, "the connection with the earlier token stayed up")
        #expect(try await Probe.attempt(d, "phone-a", old) == false)
        #expect(try await Probe.attempt(d, "phone-a", fresh) == true)
    }

    @Test func forgedExpiredMismatchedAndMalformedTokensAreRefused() async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a"], credentials: .token)
        defer { Task { await d.stop() } }
        let tokens = try #require(d.tokens)
        let watch = try await WorkerWatch.start(d)
        let key = try P256PrivateKey(pem: String(contentsOfFile: tokens.signingKey, encoding: .utf8))
        let now = Int64(Date().timeIntervalSince1970)
        func signed(_ claims: String, header: String = #"{"alg":"ES256","typ":"JWT"}"#) throws -> String {
            try JSONWebToken.es256(header: Array(header.utf8), claims: Array(claims.utf8), key: key)
        }
        let good = try DeviceToken.mint(device: "phone-a", issuedAt: now, lifetime: 3600, key: key)
        let parts = good.split(separator: ".").map(String.init)
        var flipped = Array(parts[2].utf8)
        flipped[10] = flipped[10] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        let nested = String(repeating: "[", count: 50) + String(repeating: "]", count: 50)
        let cases: [(what: String, user: String, token: String, reason: String?)] = [
            (
                "a forged token (another key)", "phone-a",
                try DeviceToken.mint(device: "phone-a", issuedAt: now, lifetime: 3600, key: .generate()),
                "the signature is not by a known key"
            ),
            (
                "an expired token", "phone-a",
                try DeviceToken.mint(device: "phone-a", issuedAt: now - 7200, lifetime: 3600, key: key), "expired"
            ),
            (
                "a token issued in the future", "phone-a",
                try DeviceToken.mint(device: "phone-a", issuedAt: now + 3600, lifetime: 3600, key: key),
                "issued in the future (iat)"
            ),
            (
                "a lifetime past max_lifetime", "phone-a",
                try DeviceToken.mint(
                    device: "phone-a",
                    issuedAt: now,
                    lifetime: DeviceToken.maxLifetimeSeconds + 1,
                    key: key
                ), "its lifetime (exp - iat) is longer than max_lifetime"
            ),
            ("sub is another device", "phone-b", good, "sub is not the user name"),
            (
                "a password-file account (backend)", "backend",
                try DeviceToken.mint(device: "backend", issuedAt: now, lifetime: 3600, key: key), nil
            ),
            (
                "a password-file account (chimed)", "chimed",
                try DeviceToken.mint(device: "chimed", issuedAt: now, lifetime: 3600, key: key), nil
            ),
            (
                "alg none", "phone-a",
                try signed(#"{"sub":"phone-a","iat":\#(now),"exp":\#(now + 60)}"#, header: #"{"alg":"none"}"#).split(
                    separator: "."
                ).prefix(2).joined(separator: ".") + ".", "the header's alg is not ES256"
            ),
            (
                "alg HS256", "phone-a",
                try signed(#"{"sub":"phone-a","iat":\#(now),"exp":\#(now + 60)}"#, header: #"{"alg":"HS256"}"#),
                "the header's alg is not ES256"
            ),
            (
                "a flipped signature bit", "phone-a",
                parts[0] + "." + parts[1] + "." + String(decoding: flipped, as: UTF8.self),
                "the signature is not by a known key"
            ),
            (
                "the signature of another token", "phone-a",
                parts[0] + "." + parts[1] + "."
                    + (try DeviceToken.mint(device: "phone-a", issuedAt: now - 1, lifetime: 3600, key: key)).split(
                        separator: "."
                    )[2], "the signature is not by a known key"
            ),
            (
                "sub given twice", "phone-a",
                try signed(#"{"sub":"phone-a","sub":"phone-b","iat":\#(now),"exp":\#(now + 60)}"#),
                "the claims are not a JSON object"
            ),
            (
                "an escaped sub", "phone-a", try signed(#"{"sub":"phone\u002da","iat":\#(now),"exp":\#(now + 60)}"#),
                "sub is not the user name"
            ),
            (
                "exp not whole seconds", "phone-a",
                try signed(#"{"sub":"phone-a","iat":\#(now),"exp":\#(now + 60).5}"#),
                "iat, exp and nbf must be whole seconds"
            ),
            ("no exp", "phone-a", try signed(#"{"sub":"phone-a","iat":\#(now)}"#), "sub, iat or exp is missing"),
            (
                "nesting deeper than 8", "phone-a",
                try signed(#"{"x":\#(nested),"sub":"phone-a","iat":\#(now),"exp":\#(now + 60)}"#),
                "the claims are not a JSON object"
            ),
            ("claims that are not JSON", "phone-a", try signed("not json"), "the claims are not a JSON object"),
            (
                "crit in the header", "phone-a",
                try signed(
                    #"{"sub":"phone-a","iat":\#(now),"exp":\#(now + 60)}"#,
                    header: #"{"alg":"ES256","crit":["x"]}"#
                ), "the header has crit"
            ),
            (
                "a token over 2048 bytes", "phone-a",
                try signed(
                    #"{"pad":"\#(String(repeating: "p", count: 1500))","sub":"phone-a","iat":\#(now),"exp":\#(now + 60)}"#
                ), "the token is longer than 2048 bytes"
            ),
            ("no token", "phone-a", "", nil),
            ("garbage", "phone-a", "hello", "not a compact JWT (three parts)"),
            ("empty parts", "phone-a", "..", "the header is not a JSON object"),
            (
                "padding in base64url", "phone-a", parts[0] + "=." + parts[1] + "." + parts[2],
                "a part is not base64url (or too long)"
            ),
            ("a user name that is not a device id", "phone/a", good, "the user name is not a device id"),
            (
                "oversize garbage", "phone-a", String(repeating: "eyJ.", count: 5000),
                "the token is longer than 2048 bytes"
            ),
        ]
        func count(_ line: String) -> Int { d.broker.log.components(separatedBy: line).count - 1 }
        for (what, user, token, reason) in cases {
            // Each is refused for its own reason, which the broker logs (a password-file account's
            // by the password file, after the plugin deferred).
            let line = reason.map {
                DeviceID.isValid(user)
                    ? "chime_auth: refused device \(user): \($0)\n" : "chime_auth: refused a client: \($0)\n"
            }
            let before = line.map(count) ?? 0
            #expect(try await Probe.attempt(d, user, token) == false, "\(what) was accepted")
            if let line {
                #expect(count(line) == before + 1, "\(what): no \(line) in \(d.broker.log.suffix(600))")
            }
        }
        #expect(!d.broker.log.contains("refused device backend") && !d.broker.log.contains("refused device chimed"))
        // The positive control, and the broker is up and chimed never lost its connection.
        #expect(try await Probe.attempt(d, "phone-a", good) == true)
        #expect(d.broker.isRunning)
        await watch.fence()
        #expect(watch.states == ["online"])
    }

    @Test func aDeviceCannotCreateOrChangeCredentials() async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a"], credentials: .token)
        defer { Task { await d.stop() } }
        let tokens = try #require(d.tokens)
        // The broker holds only the public key; the signing key never leaves the backend.
        let brokerKey = try String(contentsOfFile: tokens.publicKey, encoding: .utf8)
        #expect(brokerKey.contains("BEGIN PUBLIC KEY") && !brokerKey.contains("PRIVATE"))
        let a = try await d.client("phone-a")
        for topic in [
            "$CONTROL/dynamic-security/v1", "$CONTROL/chime/v1", "$CONTROL/broker/v1", "chime/$worker/chimed/status",
            "chime/phone-b/cmd/list", "chime/phone-a/notifications", "chime/phone-a/replies",
        ] {
            let code = try await a.requester.publish(
                topic: topic,
                payload: Array(#"{"commands":[{"command":"createClient","username":"x","password":"y"}]}"#.utf8),
                timeout: .seconds(10)
            )
            #expect(code == Self.notAuthorized, "\(topic): PUBACK \(code)")
        }
        // The positive control: its own command topic.
        let own = try await a.requester.publish(
            topic: "chime/phone-a/cmd/list",
            payload: Array("{}".utf8),
            timeout: .seconds(10)
        )
        #expect(own < 0x80)
    }

    @Test func hostileTokensLeaveTheBrokerUp() async throws {
        let d = try await SecuredDeployment.start(devices: ["phone-a"], credentials: .token)
        defer { Task { await d.stop() } }
        let tokens = try #require(d.tokens)
        let key = try P256PrivateKey(pem: String(contentsOfFile: tokens.signingKey, encoding: .utf8))
        let good = d.passwords["phone-a"] ?? ""
        let seed =
            UInt64(ProcessInfo.processInfo.environment["CHIME_FUZZ_SEED"] ?? "") ?? UInt64.random(in: 0...UInt64.max)
        var random = SplitMix64(seed: seed)
        let alphabet = Array(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.={}\":,[]\\ é€".unicodeScalars
        )
        func text(_ count: Int) -> String {
            String(String.UnicodeScalarView((0..<count).map { _ in alphabet[random.below(alphabet.count)] }))
        }
        let rounds = Int(ProcessInfo.processInfo.environment["CHIME_FUZZ_TOKENS"] ?? "") ?? 200
        for round in 0..<rounds {
            var token: String
            switch round % 4 {
            case 0:  // anything
                token = text(random.below(5000))
            case 1:  // three parts of base64url-ish text
                token = text(random.below(200)) + "." + text(random.below(1200)) + "." + text(random.below(100))
            case 2:  // a good token, mutated
                var bytes = Array(good.unicodeScalars)
                for _ in 0...random.below(4) where !bytes.isEmpty {
                    let at = random.below(bytes.count)
                    switch random.below(3) {
                    case 0: bytes[at] = alphabet[random.below(alphabet.count)]
                    case 1: bytes.remove(at: at)
                    default: bytes.insert(alphabet[random.below(alphabet.count)], at: at)
                    }
                }
                token = String(String.UnicodeScalarView(bytes))
                if token == good { continue }
            default:  // signed with the right key, claims of any shape
                token = try JSONWebToken.es256(
                    header: Array(#"{"alg":"ES256"}"#.utf8),
                    claims: Array(text(random.below(900)).utf8),
                    key: key
                )
            }
            let accepted = try await Probe.attempt(d, "phone-a", token)
            #expect(!accepted, "seed \(seed), round \(round): accepted \(token.prefix(200))")
            guard d.broker.isRunning else {
                Issue.record("seed \(seed), round \(round): the broker stopped: \(d.broker.log.suffix(2000))")
                return
            }
        }
        #expect(try await Probe.attempt(d, "phone-a", good) == true, "seed \(seed)")
        #expect(d.broker.isRunning)
    }

    /// A connected client of `user` with `password` (a token).
    static func client(_ d: SecuredDeployment, _ user: String, _ password: String) async throws -> RecordingClient {
        var options = d.options(nil)
        options.clientId = "\(user)-app"
        options.username = user
        options.password = password
        let client = try RecordingClient(options: options)
        try await client.requester.connect(timeout: .seconds(10))
        return client
    }
}

/// One connection attempt that records its events and never reconnects.
final class Probe: Sendable {
    let client: MQTTClient
    let recorder = MQTTEventRecorder()

    private init(options: MQTTOptions) throws {
        client = try MQTTClient(options: options, onEvent: recorder.handler)
    }

    private static func start(_ d: SecuredDeployment, _ user: String, _ password: String) throws -> Probe {
        var options = d.options(nil)
        options.clientId = "\(user)-probe"
        options.username = user
        options.password = password
        options.reconnectDelay = .seconds(600) ... .seconds(600)
        let probe = try Probe(options: options)
        try probe.client.start()
        return probe
    }

    /// Connects and waits for the CONNACK; fails the test when the broker refuses.
    static func connect(_ d: SecuredDeployment, _ user: String, _ password: String) async throws -> Probe {
        let probe = try start(d, user, password)
        let connected = await probe.recorder.waitUntil { $0.connectedCount >= 1 }
        try #require(connected, "\(user) could not connect: \(d.broker.log.suffix(1000))")
        return probe
    }

    /// Whether the broker accepts `user` with `password`: true at a successful CONNACK, false at a
    /// refusal (or a connection the broker closes before one).
    static func attempt(_ d: SecuredDeployment, _ user: String, _ password: String) async throws -> Bool {
        let probe = try start(d, user, password)
        defer { probe.stop() }
        let settled = await probe.recorder.waitUntil { $0.connectedCount >= 1 || !$0.disconnections.isEmpty }
        guard settled else { throw HarnessError("no answer to \(user)'s CONNECT: \(d.broker.log.suffix(1000))") }
        return probe.recorder.connectedCount >= 1
    }

    func stop() { client.stop() }
}
