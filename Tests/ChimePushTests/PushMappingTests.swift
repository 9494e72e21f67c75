import ChimeCore
import ChimeHTTPClient
import ChimeSupport
import ChimeTestSupport
import Foundation
import Testing

@testable import ChimePush

/// ChimePush's pure parts: each delivery as each platform takes it, what each answer means, where
/// a Web Push token's audience is, and the key files' checks. The services' side of each is
/// checked end to end against the stand-in (PushDeliveryTests).
@Suite struct PushMappingTests {
    static let delivery =
        #"{"deviceId":"d","id":"pill","fireId":"pill@2026-12-01T10:00:00Z","alertTitle":"18:00","#
        + #""alertBody":"Take it","badge":3,"soundName":"default","category":"MED","threadId":"meds","#
        + #""interruptionLevel":"timeSensitive","userInfo":{"kind":"pill","dose":2,"aps":"x","chime":"y","#
        + #""googleUserId":"1","gcmx":"2","message_type":"3","from":"4","ok":"5"}}"#
    static let now = Instant(milliseconds: 1_800_000_000_000)
    static let expires = now.adding(milliseconds: 3_600_000)

    func object(_ bytes: [UInt8]) throws -> JSONObject { try #require(try JSON(parsing: bytes).objectValue) }

    func header(_ message: PushMessage, _ name: String) -> String? {
        message.headers.first { $0.name == name }?.value
    }

    @Test func apnsGetsApsTheIdentityAndUserInfoAtTheTop() throws {
        let message = try PushPayloads.apns(
            Array(Self.delivery.utf8),
            topic: "com.example.pills",
            expiresAt: Self.expires,
            registration: "apns-1"
        )
        let body = try object(message.body)
        let aps = try #require(body["aps"]?.objectValue)
        #expect(aps["alert"] == ["title": "18:00", "body": "Take it"])
        #expect(aps["badge"] == 3)
        #expect(aps["sound"] == "default")
        #expect(aps["category"] == "MED")
        #expect(aps["thread-id"] == "meds")
        #expect(aps["interruption-level"] == "time-sensitive")
        #expect(body["chime"]?.objectValue?["fireId"] == "pill@2026-12-01T10:00:00Z")
        #expect(body["kind"] == "pill" && body["dose"] == 2)
        #expect(body["aps"]?.objectValue != nil, "userInfo's aps does not replace Apple's")
        #expect(header(message, "apns-push-type") == "alert")
        #expect(header(message, "apns-priority") == "10")
        #expect(header(message, "apns-expiration") == "\(Self.expires.milliseconds / 1000)")
        // The same id for the same delivery and registration, whenever it is made.
        let id = try #require(header(message, "apns-id"))
        #expect(id == PushPayloads.requestId(fireId: "pill@2026-12-01T10:00:00Z", registration: "apns-1"))
        #expect(id != PushPayloads.requestId(fireId: "pill@2026-12-01T10:00:00Z", registration: "apns-2"))
        #expect(id.split(separator: "-").map(\.count) == [8, 4, 4, 4, 12])
    }

    @Test func aDeliveryThatShowsNothingIsABackgroundPush() throws {
        let silent = #"{"deviceId":"d","id":"s","fireId":"s@2026-12-01T10:00:00Z","userInfo":{"sync":true}}"#
        let message = try PushPayloads.apns(Array(silent.utf8), topic: "t", expiresAt: Self.expires, registration: "r")
        #expect(try object(message.body)["aps"] == ["content-available": 1])
        #expect(header(message, "apns-push-type") == "background")
        #expect(header(message, "apns-priority") == "5")
        let fcm = try object(
            try PushPayloads.fcm(Array(silent.utf8), token: "t", now: Self.now, expiresAt: Self.expires).body
        )
        #expect(fcm["message"]?.objectValue?["notification"] == nil)
        #expect(fcm["message"]?.objectValue?["android"]?.objectValue?["priority"] == "NORMAL")
    }

    @Test func fcmGetsStringDataWithoutTheKeysItRefuses() throws {
        let message = try PushPayloads.fcm(
            Array(Self.delivery.utf8),
            token: "tok",
            now: Self.now,
            expiresAt: Self.expires
        )
        let m = try #require(try object(message.body)["message"]?.objectValue)
        #expect(m["token"] == "tok")
        #expect(m["notification"] == ["title": "18:00", "body": "Take it"])
        let data = try #require(m["data"]?.objectValue)
        #expect(Set(data.keys) == ["fireId", "id", "deviceId", "kind", "dose", "aps", "chime", "ok"])
        #expect(data["dose"] == "2", "a number as its JSON, in a string")
        let android = try #require(m["android"]?.objectValue)
        #expect(android["ttl"] == "3600s")
        #expect(android["priority"] == "HIGH")
        #expect(android["notification"]?.objectValue?["notification_count"] == 3)
        #expect(android["notification"]?.objectValue?["tag"] == "meds")
    }

    /// FCM counts keys and values, not the request's JSON: userInfo values that are not strings
    /// travel as JSON text inside strings, whose quotes the request escapes once more, and a
    /// delivery that fits every platform must not be refused for those escapes.
    @Test func fcmCountsItsPayloadAsFCMDoes() throws {
        let quoted = Array(repeating: #""\"q\"""#, count: 450).joined(separator: ",")
        let delivery = #"{"deviceId":"d","id":"n","fireId":"n@x","alertBody":"b","userInfo":{"list":[\#(quoted)]}}"#
        #expect(delivery.utf8.count <= PushPayloads.maxWebPushPlaintext)
        let message = try PushPayloads.fcm(Array(delivery.utf8), token: "tok", now: Self.now, expiresAt: Self.expires)
        #expect(message.body.count > PushPayloads.maxFCMBytes + 100, "the request's JSON is larger than FCM counts")
        let m = try #require(try object(message.body)["message"]?.objectValue)
        #expect(PushPayloads.fcmPayloadBytes(m) <= delivery.utf8.count)

        let tooMuch = #"{"id":"n","fireId":"n@x","userInfo":{"k":"\#(String(repeating: "v", count: 4100))"}}"#
        #expect(throws: PushPayloadError.self) {
            try PushPayloads.fcm(Array(tooMuch.utf8), token: "tok", now: Self.now, expiresAt: Self.expires)
        }
    }

    @Test func webPushCarriesTheDeliveryItself() throws {
        let message = try PushPayloads.webPush(
            Array(Self.delivery.utf8),
            fireId: "pill@2026-12-01T10:00:00Z",
            now: Self.now,
            expiresAt: Self.expires
        )
        #expect(message.body == Array(Self.delivery.utf8))
        #expect(header(message, "ttl") == "3600")
        #expect(header(message, "urgency") == "high")
        let topic = try #require(header(message, "topic"))
        #expect(topic.count == 32 && topic.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        #expect(
            topic
                == header(
                    try PushPayloads.webPush(
                        [],
                        fireId: "pill@2026-12-01T10:00:00Z",
                        now: Self.now,
                        expiresAt: Self.expires
                    ),
                    "topic"
                )
        )
        let big = [UInt8](repeating: 0x20, count: PushPayloads.maxWebPushPlaintext + 1)
        #expect(throws: PushPayloadError.self) {
            try PushPayloads.webPush(big, fireId: "f", now: Self.now, expiresAt: Self.expires)
        }
    }

    @Test func eachAnswerMeansWhatTheServiceSays() {
        func body(_ s: String) -> [UInt8] { Array(s.utf8) }
        #expect(PushResponses.apns(status: 200, body: [], retryAfter: nil) == .accepted)
        #expect(
            PushResponses.apns(status: 410, body: body(#"{"reason":"Unregistered"}"#), retryAfter: nil)
                == .unregistered(reason: "Unregistered")
        )
        #expect(
            PushResponses.apns(status: 400, body: body(#"{"reason":"BadDeviceToken"}"#), retryAfter: nil)
                == .unregistered(reason: "BadDeviceToken")
        )
        #expect(
            PushResponses.apns(status: 400, body: body(#"{"reason":"BadTopic"}"#), retryAfter: nil)
                == .refused(reason: "BadTopic")
        )
        #expect(
            PushResponses.apns(status: 403, body: body(#"{"reason":"ExpiredProviderToken"}"#), retryAfter: nil)
                == .transient(reason: "ExpiredProviderToken", retryAfter: nil)
        )
        #expect(
            PushResponses.apns(status: 429, body: body(#"{"reason":"TooManyRequests"}"#), retryAfter: "7")
                == .transient(reason: "TooManyRequests", retryAfter: 7000)
        )
        let unregistered =
            #"{"error":{"code":404,"status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#
        #expect(
            PushResponses.fcm(status: 404, body: body(unregistered), retryAfter: nil)
                == .unregistered(reason: "UNREGISTERED")
        )
        // A 404 from something that is not FCM's answer about the token removes nothing.
        #expect(
            PushResponses.fcm(status: 404, body: body("<html>Not Found</html>"), retryAfter: nil)
                == .refused(reason: "HTTP 404")
        )
        // FCM's answer to a token that is not one removes it; another invalid argument does not.
        let invalidToken =
            #"{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}"#
        #expect(
            PushResponses.fcm(status: 400, body: body(invalidToken), retryAfter: nil)
                == .unregistered(reason: "INVALID_ARGUMENT")
        )
        let invalidMessage =
            #"{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"INVALID_ARGUMENT"}]}}"#
        #expect(
            PushResponses.fcm(status: 400, body: body(invalidMessage), retryAfter: nil)
                == .refused(reason: "INVALID_ARGUMENT")
        )
        #expect(
            PushResponses.fcm(status: 401, body: [], retryAfter: nil) == .transient(reason: "HTTP 401", retryAfter: nil)
        )
        #expect(
            PushResponses.fcm(status: 503, body: [], retryAfter: "x") == .transient(reason: "HTTP 503", retryAfter: nil)
        )
        #expect(PushResponses.webPush(status: 201, retryAfter: nil) == .accepted)
        #expect(PushResponses.webPush(status: 410, retryAfter: nil) == .unregistered(reason: "HTTP 410"))
        #expect(PushResponses.webPush(status: 307, retryAfter: nil) == .refused(reason: "HTTP 307"))
        #expect(PushResponses.webPush(status: 413, retryAfter: nil) == .refused(reason: "HTTP 413"))
    }

    /// A P-256 key in PKCS#8, as Apple's .p8, readable by its owner alone.
    static func makeAPNsKey(at path: String) throws {
        try makeKey(at: path, ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out"])
    }

    /// A key made by `openssl` with `arguments` (which end with the option naming its file), readable
    /// by its owner alone.
    static func makeKey(at path: String, _ arguments: [String]) throws {
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = arguments + [path]
        try openssl.run()
        openssl.waitUntilExit()
        chmod(path, 0o600)
    }

    /// A provider token is made once and kept for 50 minutes; a refusal forgets it only while it
    /// is still the current one, so that the answers of requests that carried an older one do not
    /// make a token each (Apple refuses tokens renewed more often than every 20 minutes).
    @Test func aRefusedProviderTokenIsForgottenOnlyWhileItIsTheCurrentOne() throws {
        let directory = try TemporaryDirectory(prefix: "chime-push-apns")
        let key = directory.appending("apns.p8")
        try Self.makeAPNsKey(at: key)
        let configuration = try PushConfiguration(
            flags: Flags(
                ["--apns-key", key, "--apns-key-id", "ABC123DEFG", "--apns-team-id", "TEAM123456"],
                specs: PushConfiguration.flagSpecs,
                environment: [:]
            )
        )
        let apns = try #require(configuration.apns)
        let tokens = ProviderTokens(configuration: configuration)
        let first = try tokens.apns(apns, now: Self.now)
        #expect(try tokens.apns(apns, now: Self.now.adding(milliseconds: 49 * 60_000)) == first)

        let refused = HTTPResponse(status: 403, body: Array(#"{"reason":"ExpiredProviderToken"}"#.utf8), httpVersion: 2)
        let outcome = PushService.classify(.apns, .success(refused), credential: first, tokens: tokens)
        #expect(outcome == .transient(reason: "ExpiredProviderToken", retryAfter: nil))
        let second = try tokens.apns(apns, now: Self.now.adding(milliseconds: 1000))
        #expect(second != first)
        // Another request that carried the first is refused too: the second stays.
        _ = PushService.classify(.apns, .success(refused), credential: first, tokens: tokens)
        #expect(try tokens.apns(apns, now: Self.now.adding(milliseconds: 2000)) == second)
        // Kept for 50 minutes from when it was made, then made anew.
        #expect(try tokens.apns(apns, now: Self.now.adding(milliseconds: 1000 + 50 * 60_000)) != second)
    }

    /// The FCM service account file is checked at start like the other keys; and keys may come
    /// from `CHIME_*` variables instead of flags.
    @Test func aServiceAccountMustBeOneAndKeysMayComeFromTheEnvironment() throws {
        let directory = try TemporaryDirectory(prefix: "chime-push-fcm")
        func refusal(_ text: String, mode: mode_t = 0o600) throws -> String? {
            let path = directory.appending("sa-\(UInt32.random(in: 0...UInt32.max)).json")
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, mode)
            do {
                _ = try PushConfiguration(
                    flags: Flags(["--fcm-service-account", path], specs: PushConfiguration.flagSpecs, environment: [:])
                )
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(try refusal("not json")?.contains("is not a JSON object") == true)
        #expect(
            try refusal(#"{"type":"service_account","client_email":"a@b","project_id":"p"}"#)?.contains("private_key")
                == true
        )
        let notRSA =
            #"{"type":"service_account","client_email":"a@b","project_id":"p","token_uri":"https://oauth2.googleapis.com/token","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}"#
        #expect(try refusal(notRSA)?.contains("not an RSA key") == true)
        #expect(try refusal("{}", mode: 0o644) != nil, "readable by others")

        let key = directory.appending("apns.p8")
        try Self.makeAPNsKey(at: key)
        let fromEnvironment = try PushConfiguration(
            flags: Flags(
                [],
                specs: PushConfiguration.flagSpecs,
                environment: [
                    "CHIME_APNS_KEY": key, "CHIME_APNS_KEY_ID": "ABC123DEFG", "CHIME_APNS_TEAM_ID": "TEAM123456",
                ]
            )
        )
        #expect(fromEnvironment.apns?.keyId == "ABC123DEFG")
    }

    @Test func aRequestThatCannotBeMadeIsNotTriedAgain() throws {
        let configuration = try PushConfiguration(
            flags: Flags([], specs: PushConfiguration.flagSpecs, environment: [:])
        )
        let tokens = ProviderTokens(configuration: configuration)
        for code in [HTTPClientError.Code.invalidRequest, .protocolRefused, .addressRefused] {
            guard case .refused = PushService.classify(.webpush, .failure(HTTPClientError(code)), tokens: tokens) else {
                Issue.record("\(code) is tried again")
                continue
            }
        }
        for code in [HTTPClientError.Code.timeout, .connectFailed, .tls, .cancelled] {
            guard case .transient = PushService.classify(.apns, .failure(HTTPClientError(code)), tokens: tokens) else {
                Issue.record("\(code) is not tried again")
                continue
            }
        }
    }

    @Test(arguments: [
        ("https://fcm.googleapis.com:443/fcm/send/x", "https://fcm.googleapis.com"),
        ("HTTPS://FCM.googleapis.com/fcm/send/x", "https://fcm.googleapis.com"),
        ("https://fcm.googleapis.com?x=1", "https://fcm.googleapis.com"),
        ("https://127.0.0.1:8443/wp/1", "https://127.0.0.1:8443"),
        ("https://[::1]:8443/wp/1", "https://[::1]:8443"),
    ])
    func theVAPIDAudienceIsTheEndpointsOrigin(_ endpoint: String, _ origin: String) throws {
        #expect(try #require(PushEndpointURL(endpoint)).origin == origin)
    }

    @Test func aKeyFileMustExistBeAKeyAndBeReadableByNoOneElse() throws {
        let directory = try TemporaryDirectory(prefix: "chime-push-keys")
        func configuration(_ key: String) throws -> PushConfiguration {
            try PushConfiguration(
                flags: Flags(
                    ["--vapid-key", key, "--vapid-subject", "mailto:ops@example.com"],
                    specs: PushConfiguration.flagSpecs,
                    environment: [:]
                )
            )
        }
        let key = directory.appending("vapid.pem")
        try Self.makeKey(at: key, ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out"])
        #expect(try configuration(key).vapid != nil)
        chmod(key, 0o640)
        #expect(try configuration(key).vapid != nil, "a group that may read it (a Kubernetes secret's fsGroup)")
        chmod(key, 0o644)
        #expect(throws: UsageError.self) { try configuration(key) }
        #expect(throws: UsageError.self) { try configuration(directory.appending("missing.pem")) }
        let garbage = directory.appending("garbage.pem")
        try "not a key".write(toFile: garbage, atomically: true, encoding: .utf8)
        chmod(garbage, 0o600)
        #expect(throws: UsageError.self) { try configuration(garbage) }
        #expect(throws: UsageError.self) {
            try PushConfiguration(
                flags: Flags(["--vapid-key", key], specs: PushConfiguration.flagSpecs, environment: [:])
            )
        }
    }
}
