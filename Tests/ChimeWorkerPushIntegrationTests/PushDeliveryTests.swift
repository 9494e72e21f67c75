import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// Push delivery against the real thing (PROTOCOL.md section 3.11): the built chimed, mosquitto,
/// and the push services' stand-in, which checks every request with PyJWT, cryptography and
/// http_ece (Tests/PushStandin).
@Suite(.serialized) struct PushDeliveryTests {
    static let token = String(repeating: "0a1b2c3d", count: 8)

    /// A world with a stand-in, and chimed pointed at it with every provider's credentials.
    struct World {
        let standin: PushStandin
        let fixture: WorkerFixture

        static func start(extra: [String] = []) async throws -> World {
            let standin = try await PushStandin.start()
            let fixture = try await WorkerFixture.start(extra: try standin.chimedFlags() + extra)
            return World(standin: standin, fixture: fixture)
        }

        func stop() async {
            await fixture.stop()
            await standin.stop()
        }

        /// Registers the phone's three registrations; returns the Web Push subscription's id.
        @discardableResult
        func register(_ device: String, fcm: String = "fcm-token-1") async throws -> String {
            let subscription = try standin.subscription()
            let endpoint = subscription["endpoint"]?.stringValue ?? ""
            let body =
                #"{"history":true,"push":[{"apns":{"token":"\#(PushDeliveryTests.token)","topic":"com.example.pills"}},"#
                + #"{"fcm":{"token":"\#(fcm)"}},{"webpush":\#(JSON.object(subscription).text)}]}"#
            let result = try await fixture.ok(device, .device, body)
            #expect(result["push"]?.arrayValue?.count == 3)
            return String(endpoint.split(separator: "/").last ?? "")
        }

        /// The pushes the stand-in answered (scripts and failures included), by service.
        func pushes(_ service: String) throws -> [JSONObject] { try standin.received(service: service) }

        /// Waits until `service` has answered `status` `count` times.
        func waitFor(_ service: String, status: Int, count: Int = 1, timeout: Duration = .seconds(30)) async -> Bool {
            await eventually(timeout: timeout) {
                ((try? pushes(service)) ?? []).filter { $0["status"] == .int(Int64(status)) }.count >= count
            }
        }

        func history(_ device: String) async throws -> [JSONObject] {
            try await fixture.ok(device, .history, "{}")["deliveries"]?.arrayValue?.compactMap(\.objectValue) ?? []
        }
    }

    @Test func theEvenReminderReachesAPNsFCMWebPushAndMQTT() async throws {
        let world = try await World.start()
        defer { Task { await world.stop() } }
        let fixture = world.fixture
        try await fixture.subscribeDeliveries("phone")
        try await world.register("phone")
        try await fixture.ok(
            "phone",
            .schedule,
            #"{"id":"pill","after":1,"alertTitle":"18:00","alertBody":"Take your medicine","badge":"+1","#
                + #""soundName":"default","category":"MED","userInfo":{"kind":"pill","dose":2}}"#
        )
        let delivered = await fixture.waitForDeliveries("phone", count: 1, timeout: .seconds(20))
        let fireId = try #require(delivered.first?["fireId"]?.stringValue)
        #expect(await world.waitFor("apns", status: 200))
        #expect(await world.waitFor("fcm", status: 200))
        #expect(await world.waitFor("webpush", status: 201))

        // Every request passed every check of the stand-in (signatures, headers, decryption).
        for service in ["apns", "fcm-token", "fcm", "webpush"] {
            let received = try world.pushes(service)
            #expect(!received.isEmpty, "\(service)")
            for request in received {
                #expect(request["checks"] == [], "\(service): \(request["checks"] ?? .null)")
            }
        }
        let apns = try #require(try world.pushes("apns").first)
        let aps = apns["body"]?.objectValue?["aps"]?.objectValue
        #expect(aps?["alert"]?.objectValue?["title"] == "18:00")
        #expect(aps?["alert"]?.objectValue?["body"] == "Take your medicine")
        #expect(aps?["badge"] == 1)
        #expect(aps?["sound"] == "default")
        #expect(aps?["category"] == "MED")
        #expect(apns["body"]?.objectValue?["chime"]?.objectValue?["fireId"]?.stringValue == fireId)
        #expect(apns["body"]?.objectValue?["kind"] == "pill")
        #expect(apns["headers"]?.objectValue?["apns-topic"] == "com.example.pills")
        #expect(apns["headers"]?.objectValue?["apns-push-type"] == "alert")

        let fcm = try #require(try world.pushes("fcm").first?["body"]?.objectValue?["message"]?.objectValue)
        #expect(fcm["token"] == "fcm-token-1")
        #expect(fcm["notification"]?.objectValue?["title"] == "18:00")
        #expect(fcm["data"]?.objectValue?["fireId"]?.stringValue == fireId)
        #expect(fcm["data"]?.objectValue?["dose"] == "2")
        #expect(fcm["android"]?.objectValue?["notification"]?.objectValue?["notification_count"] == 1)

        // The browser gets the delivery itself, decrypted by the stand-in with the subscription's key.
        let web = try #require(try world.pushes("webpush").first)
        #expect(web["body"]?.objectValue == delivered.first)
        #expect(web["headers"]?.objectValue?["content-encoding"] == "aes128gcm")

        // History says each channel's outcome.
        var outcomes: [String] = []
        _ = await eventually(timeout: .seconds(10)) {
            let row = try? await world.history("phone").first
            outcomes = row?["push"]?.arrayValue?.compactMap { $0.objectValue?["outcome"]?.stringValue } ?? []
            return outcomes.count == 3
        }
        #expect(outcomes == ["accepted", "accepted", "accepted"])
    }

    @Test func aRegistrationThePushServiceSaysIsGoneIsRemovedAndNotTriedAgain() async throws {
        let world = try await World.start()
        defer { Task { await world.stop() } }
        let fixture = world.fixture
        let subscription = try await world.register("phone", fcm: "fcm-gone")
        try world.standin.script("apns", key: Self.token, #"[{"status":410}]"#)
        try world.standin.script("fcm", key: "fcm-gone", #"[{"status":404}]"#)
        try world.standin.unsubscribe(subscription)
        try await fixture.ok("phone", .schedule, #"{"id":"pill","after":1,"repeatInterval":"second","alertBody":"x"}"#)
        var push: [JSON] = [JSON.null]
        let removed = await eventually(timeout: .seconds(30)) {
            push = (try? await fixture.ok("phone", .device, "{}"))?["push"]?.arrayValue ?? []
            return push.isEmpty
        }
        #expect(removed, "\(push)")
        let reasons = try await world.history("phone").flatMap { $0["push"]?.arrayValue ?? [] }
            .compactMap(\.objectValue)
        #expect(Set(reasons.compactMap { $0["outcome"]?.stringValue }) == ["unregistered"])
        #expect(reasons.contains { $0["reason"] == "Unregistered" })
        #expect(reasons.contains { $0["reason"] == "UNREGISTERED" })
        // What each removed registration was sent, each push named by what identifies it: its
        // apns-id, its FCM data.fireId, its Web Push Topic.
        let removedKeys = [Self.token, "fcm-gone", subscription]
        func sent(to key: String) throws -> [String] {
            try world.standin.received().filter { $0["key"]?.stringValue == key }.map { entry in
                let headers = entry["headers"]?.objectValue
                let fcm = entry["body"]?.objectValue?["message"]?.objectValue?["data"]?.objectValue?["fireId"]
                return headers?["apns-id"]?.stringValue ?? headers?["topic"]?.stringValue ?? fcm?.stringValue ?? "?"
            }
        }
        let before = try removedKeys.map { try sent(to: $0) }
        #expect(before.allSatisfy { !$0.isEmpty }, "each was tried, and answered gone: \(before)")
        #expect(before.allSatisfy { Set($0).count == $0.count }, "a push to a gone one is not tried again: \(before)")

        // The notification keeps firing every second: a new registration gets its pushes, the
        // removed ones nothing more.
        try await fixture.ok("phone", .device, #"{"addPush":[{"fcm":{"token":"fcm-new"}}]}"#)
        let flowing = await eventually(timeout: .seconds(20)) {
            ((try? world.pushes("fcm")) ?? []).filter { $0["key"] == "fcm-new" && $0["status"] == 200 }.count >= 2
        }
        #expect(flowing)
        #expect(try removedKeys.map { try sent(to: $0) } == before)
    }

    /// Credentials are made once and kept: one APNs provider token for every request (Apple
    /// refuses one renewed more often than every 20 minutes), one FCM access token until FCM
    /// refuses it, then one more, and the push it refused is taken.
    @Test func providerTokensAreMadeOnceAndRenewedOnlyWhenRefused() async throws {
        let world = try await World.start()
        defer { Task { await world.stop() } }
        try await world.register("phone")
        try await world.fixture.ok("phone", .schedule, #"{"id":"pill","after":1,"repeatInterval":"second","count":3}"#)
        #expect(await world.waitFor("apns", status: 200, count: 3))
        #expect(await world.waitFor("fcm", status: 200, count: 3))
        let apnsTokens = try world.pushes("apns").compactMap {
            $0["headers"]?.objectValue?["authorization"]?.stringValue
        }
        #expect(apnsTokens.count >= 3)
        #expect(Set(apnsTokens).count == 1, "one provider token for every request")
        #expect(try world.pushes("fcm-token").count == 1, "one access token for every push")

        try world.standin.expireTokens()
        try await world.fixture.ok("phone", .schedule, #"{"id":"more","after":1,"alertBody":"x"}"#)
        #expect(await world.waitFor("fcm", status: 200, count: 4))
        #expect(try world.pushes("fcm").filter { $0["status"] == 401 }.count == 1)
        #expect(try world.pushes("fcm-token").count == 2, "a new access token once the old one is refused")
    }

    @Test func tooManyRequestsWaitsForRetryAfterAndUnavailableIsTriedUntilTaken() async throws {
        let world = try await World.start()
        defer { Task { await world.stop() } }
        try await world.register("phone")
        try world.standin.script(
            "apns",
            key: Self.token,
            #"[{"status":429,"headers":{"retry-after":"2"}},{"status":503},{"status":503}]"#
        )
        try await world.fixture.ok("phone", .schedule, #"{"id":"pill","after":1,"alertBody":"x"}"#)
        #expect(await world.waitFor("apns", status: 200, timeout: .seconds(40)))
        let attempts = try world.pushes("apns")
        #expect(attempts.map { $0["status"] } == [429, 503, 503, 200])
        let times = attempts.compactMap { item -> Double? in
            if case .double(let t)? = item["time"] { return t }
            if case .int(let t)? = item["time"] { return Double(t) }
            return nil
        }
        #expect(times.count == 4)
        if times.count == 4 {
            #expect(times[1] - times[0] >= 1.9, "Retry-After: 2 is honoured")
            #expect(times[3] - times[2] >= 1.9, "the backoff doubles")
        }
        // Every attempt carries the same apns-id: a duplicate is one push.
        #expect(Set(attempts.compactMap { $0["headers"]?.objectValue?["apns-id"]?.stringValue }).count == 1)
    }

    @Test func aPushInFlightAtAKillIsMadeAgainAfterTheRestart() async throws {
        let world = try await World.start()
        defer { Task { await world.stop() } }
        let fixture = world.fixture
        try await fixture.subscribeDeliveries("phone")
        try await world.register("phone")
        for service in ["apns", "fcm", "webpush"] { try world.standin.blackhole(service, true) }
        try await fixture.ok("phone", .schedule, #"{"id":"pill","after":1,"alertBody":"x"}"#)
        let delivered = await fixture.waitForDeliveries("phone", count: 1, timeout: .seconds(20))
        let fireId = try #require(delivered.first?["fireId"]?.stringValue)
        // Taken by the services and never answered: in flight.
        let held = await eventually(timeout: .seconds(20)) {
            ["apns", "fcm", "webpush"].allSatisfy { !((try? world.pushes($0)) ?? []).isEmpty }
        }
        #expect(held)
        await fixture.killWorker()
        for service in ["apns", "fcm", "webpush"] { try world.standin.blackhole(service, false) }
        try await fixture.startWorker()
        #expect(await world.waitFor("apns", status: 200))
        #expect(await world.waitFor("fcm", status: 200))
        #expect(await world.waitFor("webpush", status: 201))
        let apns = try world.pushes("apns").filter { $0["status"] == 200 }
        #expect(apns.first?["body"]?.objectValue?["chime"]?.objectValue?["fireId"]?.stringValue == fireId)
        let fcm = try world.pushes("fcm").filter { $0["status"] == 200 }
        #expect(
            fcm.first?["body"]?.objectValue?["message"]?.objectValue?["data"]?.objectValue?["fireId"]?.stringValue
                == fireId
        )
        let webPush = try world.pushes("webpush").filter { $0["status"] == 201 }
        #expect(webPush.first?["body"]?.objectValue?["fireId"]?.stringValue == fireId)
    }

    @Test func aBlackHoledPushServiceHoldsOnlyItsOwnShare() async throws {
        // APNs takes every request and never answers. One device holds at most 4 of its attempts
        // in flight; three together fill the provider's share (8 here), never more. A bystander's
        // MQTT deliveries and FCM pushes go on as in a quiet run: its lateness p99 within the
        // hostile-neighbour margin of the quiet one.
        let world = try await World.start(extra: ["--push-timeout", "300", "--push-inflight", "8"])
        defer { Task { await world.stop() } }
        let fixture = world.fixture
        try await fixture.subscribeDeliveries("bystander")
        try await fixture.ok("bystander", .device, #"{"push":[{"fcm":{"token":"bystander-token"}}]}"#)
        var round = 0
        /// Twenty one-shots a tenth of a second apart: their lateness (`firedAt` - `fireDate`), in ms.
        func bystanderLateness() async throws -> [Double] {
            round += 1
            let batch = (0..<20).map { #"{"id":"b\#(round)-\#($0)","after":\#(1 + Double($0) / 10),"alertBody":"y"}"# }
            try await fixture.ok("bystander", .schedule, #"{"notifications":[\#(batch.joined(separator: ","))]}"#)
            let arrived = await fixture.waitForDeliveries("bystander", count: 20 * round, timeout: .seconds(20))
            #expect(arrived.count == 20 * round)
            return arrived.suffix(20).compactMap { d -> Double? in
                guard case .instant(let fire)? = d["fireDate"]?.stringValue.flatMap(DateTimeValue.init(iso8601:)),
                    case .instant(let fired)? = d["firedAt"]?.stringValue.flatMap(DateTimeValue.init(iso8601:))
                else { return nil }
                return Double(fired.milliseconds - fire.milliseconds)
            }
        }
        let quiet = try await bystanderLateness()
        #expect(await world.waitFor("fcm", status: 200, count: 20))

        try world.standin.blackhole("apns", true)
        func pushy(_ device: String) async throws {
            let token = String(repeating: device.last.map(String.init) ?? "1", count: 64)
            try await fixture.ok(
                device,
                .device,
                #"{"push":[{"apns":{"token":"\#(token)","topic":"com.example.pills"}}]}"#
            )
            let batch = (0..<50).map { #"{"id":"p\#($0)","after":1,"alertBody":"x"}"# }.joined(separator: ",")
            try await fixture.ok(device, .schedule, #"{"notifications":[\#(batch)]}"#)
        }
        func hanging() -> Int { Int((try? world.standin.counts())?["apns"]?["none"] ?? 0) }
        try await pushy("pushy-1")
        #expect(await eventually(timeout: .seconds(20)) { hanging() >= 4 })
        try await Task.sleep(for: .seconds(2))
        #expect(hanging() == 4, "one device holds at most 4 attempts in flight")
        try await pushy("pushy-2")
        try await pushy("pushy-3")
        #expect(await eventually(timeout: .seconds(20)) { hanging() >= 8 }, "APNs holds its whole share")

        let attacked = try await bystanderLateness()
        #expect(await world.waitFor("fcm", status: 200, count: 40, timeout: .seconds(20)))
        let p99 = { (v: [Double]) in v.sorted()[max(0, Int((Double(v.count) * 0.99).rounded(.up)) - 1)] }
        #expect(quiet.count == 20 && attacked.count == 20)
        if quiet.count == 20, attacked.count == 20 {
            #expect(
                p99(attacked) <= p99(quiet) + HostileNeighbour.margin,
                "bystander lateness p99: quiet \(p99(quiet)) ms, with APNs black-holed \(p99(attacked)) ms"
            )
        }
        // No more than the share was ever taken from APNs.
        #expect(try world.pushes("apns").count == 8)
    }

    @Test func aDeviceCannotMakeTheWorkerCallWhereItShouldNot() async throws {
        // The name is allowed; where it leads (loopback) is not: no request reaches the stand-in.
        let standin = try await PushStandin.start()
        defer { Task { await standin.stop() } }
        var flags = try standin.chimedFlags()
        if let i = flags.firstIndex(of: "--webpush-allowed-hosts") { flags[i + 1] = "localhost,push.example.com" }
        if let i = flags.firstIndex(of: "--push-allow-loopback") { flags[i + 1] = "false" }
        let fixture = try await WorkerFixture.start(extra: flags)
        defer { Task { await fixture.stop() } }
        let subscription = try standin.subscription()
        let keys = subscription["keys"].map { JSON.object($0.objectValue ?? [:]).text } ?? "{}"
        func register(_ endpoint: String) async throws -> JSONObject {
            try await fixture.send(
                "phone",
                .device,
                #"{"push":[{"webpush":{"endpoint":"\#(endpoint)","keys":\#(keys)}}]}"#
            )
        }
        for endpoint in [
            "https://127.0.0.1:\(standin.port)/wp/x", "https://10.0.0.7/wp/x", "https://169.254.169.254/latest",
            "https://[::1]:\(standin.port)/wp/x", "https://evil.example/wp/x", "http://push.example.com/wp/x",
        ] {
            let reply = try await register(endpoint)
            #expect(reply["error"]?.objectValue?["code"] == "invalid_argument", "\(endpoint)")
        }
        let path = subscription["endpoint"]?.stringValue?.split(separator: "/").suffix(2).joined(separator: "/") ?? ""
        let viaName = try await register("https://localhost:\(standin.port)/\(path)")
        #expect(viaName["ok"] == true, "\(viaName)")
        try await fixture.ok("phone", .device, #"{"history":true}"#)
        try await fixture.ok("phone", .schedule, #"{"id":"n","after":1,"alertBody":"x"}"#)
        var trail: [JSONObject] = []
        _ = await eventually(timeout: .seconds(20)) {
            trail =
                (try? await fixture.ok("phone", .history, "{}"))?["deliveries"]?.arrayValue?.first?.objectValue?[
                    "push"
                ]?.arrayValue?.compactMap(\.objectValue) ?? []
            return !trail.isEmpty
        }
        #expect(trail.first?["outcome"] == "refused", "\(trail)")
        #expect(trail.first?["reason"]?.stringValue?.contains("address") == true)
        #expect(try standin.received(service: "webpush").isEmpty, "no request was made")
    }

    @Test func aRedirectIsNotFollowed() async throws {
        let world = try await World.start()
        defer { Task { await world.stop() } }
        let subscription = try await world.register("phone")
        try world.standin.script(
            "webpush",
            key: subscription,
            #"[{"status":307,"headers":{"location":"https://127.0.0.1:\#(world.standin.controlPort)/received"}}]"#
        )
        try await world.fixture.ok("phone", .schedule, #"{"id":"n","after":1,"alertBody":"x"}"#)
        #expect(await world.waitFor("webpush", status: 307))
        try await Task.sleep(for: .seconds(2))
        #expect(try world.pushes("webpush").count == 1)
        let trail = try await world.history("phone").first?["push"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(trail.contains { $0["outcome"] == "refused" && $0["reason"] == "HTTP 307" })
    }

    @Test func aKeyFileThatIsMissingMalformedOrReadableByOthersStopsTheStart() async throws {
        let standin = try await PushStandin.start()
        defer { Task { await standin.stop() } }
        let broker = try await TestBroker.start()
        defer { Task { await broker.stop() } }
        let data = try TemporaryDirectory(prefix: "chime-data")
        let scratch = try TemporaryDirectory(prefix: "chime-keys")
        let open = scratch.appending("open.p8")
        try FileManager.default.copyItem(atPath: standin.keys + "/apns-key.p8", toPath: open)
        chmod(open, 0o644)
        let garbage = scratch.appending("garbage.p8")
        try "not a key\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        chmod(garbage, 0o600)
        for (key, reason) in [
            (open, "readable by others"), (garbage, "is not an EC P-256 private key"),
            (scratch.appending("missing.p8"), "does not exist"),
        ] {
            let chimed = try Chimed(
                broker: broker,
                dataDirectory: data.path,
                workerId: "w",
                extra: ["--apns-key", key, "--apns-key-id", "ABCDEFGHIJ", "--apns-team-id", "KLMNOPQRST"]
            )
            try chimed.process.start()
            let exit = await chimed.process.waitForExit(timeout: .seconds(20))
            #expect(exit != .exited(0) && exit != nil, "\(key)")
            #expect(chimed.log.contains(reason), "\(chimed.log)")
            #expect(!chimed.log.contains("BEGIN"), "no key material in the log")
        }
    }
}
