import ChimeProtocol

/// A delivery (PROTOCOL.md section 5) as each push service takes it (PROTOCOL.md section 3.11):
/// pure mapping, from the delivery's JSON to a request's headers and body, before credentials.
public struct PushMessage: Hashable, Sendable {
    /// Headers of the request, credentials aside.
    public var headers: [(name: String, value: String)]
    /// The body: JSON for APNs and FCM, the plaintext to encrypt for Web Push.
    public var body: [UInt8]

    public static func == (a: PushMessage, b: PushMessage) -> Bool {
        a.body == b.body && a.headers.map { "\($0.name):\($0.value)" } == b.headers.map { "\($0.name):\($0.value)" }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(body)
        for h in headers {
            hasher.combine(h.name)
            hasher.combine(h.value)
        }
    }
}

/// Why a delivery cannot be pushed to a platform: refused for good.
public struct PushPayloadError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
}

public enum PushPayloads {
    /// APNs takes at most 4096 bytes of payload (the body's JSON).
    public static let maxAPNsBytes = 4096
    /// FCM takes at most 4096 bytes of payload, counted as the keys and values of `notification`
    /// and `data` (not the request's JSON, whose escapes do not count).
    public static let maxFCMBytes = 4096
    /// A Web Push body is at most 4096 bytes once encrypted: 86 bytes of header, the 16-byte tag
    /// and the 1-byte delimiter leave 3993 for the plaintext.
    public static let maxWebPushPlaintext = 4096 - 86 - 16 - 1

    /// The members of a delivery that the mapping reads.
    struct DeliveryFields {
        var object: JSONObject
        var title: String?
        var body: String?
        var badge: Int64?
        var sound: String?
        var category: String?
        var threadId: String?
        /// `interruptionLevel`; nil reads as `active`.
        var level: InterruptionLevel?
        var fireId: String
        var id: String
        var deviceId: String
        var userInfo: JSONObject

        init(_ payload: [UInt8]) throws(PushPayloadError) {
            guard case .object(let o)? = try? JSON(parsing: payload) else {
                throw PushPayloadError(description: "the delivery is not a JSON object")
            }
            object = o
            func string(_ key: String) -> String? {
                if case .string(let s)? = o[key] { return s }
                return nil
            }
            title = string("alertTitle")
            body = string("alertBody")
            if case .int(let n)? = o["badge"] { badge = n }
            sound = string("soundName")
            category = string("category")
            threadId = string("threadId")
            level = string("interruptionLevel").flatMap(InterruptionLevel.init(rawValue:))
            fireId = string("fireId") ?? ""
            id = string("id") ?? ""
            deviceId = string("deviceId") ?? ""
            if case .object(let info)? = o["userInfo"] { userInfo = info } else { userInfo = [:] }
        }

        /// Whether it shows something (else it is a silent, background push).
        var isAlert: Bool { title != nil || body != nil }
    }

    /// The `chime` member of APNs payloads, and the `data` keys of FCM: what matches a push to
    /// its delivery (and drops a duplicate).
    static func identity(_ d: DeliveryFields) -> [(String, String)] {
        [("fireId", d.fireId), ("id", d.id), ("deviceId", d.deviceId)]
    }

    /// A request id derived from the delivery and the registration, so that an attempt made
    /// again (after a timeout, or a restart) carries the same one: a UUID's shape
    /// (8-4-4-4-12 hex digits) of a hash of both.
    public static func requestId(fireId: String, registration: String) -> String {
        var a: UInt64 = 0xcbf2_9ce4_8422_2325
        var b: UInt64 = 0x8422_2325_cbf2_9ce4
        for byte in fireId.utf8 + [0] + registration.utf8 {
            a = (a ^ UInt64(byte)) &* 0x100_0000_01b3
            b = (b &+ UInt64(byte)) &* 0x9E37_79B9_7F4A_7C15
        }
        func hex(_ v: UInt64) -> String {
            let s = String(v, radix: 16)
            return String(repeating: "0", count: 16 - s.count) + s
        }
        let h = hex(a) + hex(b)
        let c = Array(h)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-"
            + String(c[20..<32])
    }

    /// The APNs request for a delivery: `apns-push-type` alert (or background when it shows
    /// nothing), `apns-expiration`, `apns-priority`, `apns-id`; the body's `aps` from the content,
    /// `chime` with its identity, and `userInfo`'s members at the top level (Apple's custom keys;
    /// a member named `aps` or `chime` is not carried).
    public static func apns(
        _ payload: [UInt8],
        topic: String,
        expiresAt: Instant,
        registration: String
    ) throws(PushPayloadError) -> PushMessage {
        let d = try DeliveryFields(payload)
        var aps = JSONObject()
        if d.isAlert {
            var alert = JSONObject()
            if let title = d.title { alert.append("title", .string(title)) }
            if let body = d.body { alert.append("body", .string(body)) }
            aps.append("alert", .object(alert))
            if let sound = d.sound { aps.append("sound", .string(sound)) }
        } else {
            aps.append("content-available", .int(1))
        }
        if let badge = d.badge { aps.append("badge", .int(badge)) }
        if let category = d.category { aps.append("category", .string(category)) }
        if let thread = d.threadId { aps.append("thread-id", .string(thread)) }
        if d.isAlert, let level = d.level {
            let names: [InterruptionLevel: String] = [
                .passive: "passive", .active: "active", .timeSensitive: "time-sensitive", .critical: "critical",
            ]
            aps.append("interruption-level", .string(names[level] ?? "active"))
        }
        var body: JSONObject = ["aps": .object(aps)]
        body.append("chime", .object(JSONObject(identity(d).map { ($0.0, JSON.string($0.1)) })))
        for (key, value) in d.userInfo where key != "aps" && key != "chime" { body.append(key, value) }
        let bytes = JSON.object(body).bytes
        guard bytes.count <= maxAPNsBytes else {
            throw PushPayloadError(description: "APNs payload of \(bytes.count) bytes, more than \(maxAPNsBytes)")
        }
        return PushMessage(
            headers: [
                ("apns-push-type", d.isAlert ? "alert" : "background"),
                ("apns-topic", topic),
                ("apns-expiration", String(max(1, (expiresAt.milliseconds + 999) / 1000))),
                ("apns-priority", d.isAlert && d.level != .passive ? "10" : "5"),
                ("apns-id", requestId(fireId: d.fireId, registration: registration)),
                ("content-type", "application/json"),
            ],
            body: bytes
        )
    }

    /// The `data` keys FCM refuses ("from", "message_type", any word starting with "google" or
    /// "gcm"), and "notification" and "collapse_key", which its older APIs read: such userInfo
    /// members are not carried.
    static func reservedFCMKey(_ key: String) -> Bool {
        let lower = key.lowercased()
        return ["from", "notification", "message_type", "collapse_key"].contains(lower) || lower.hasPrefix("google")
            || lower.hasPrefix("gcm") || key.isEmpty
    }

    /// The FCM HTTP v1 `messages:send` body: `notification` (title, body), `data` (the identity,
    /// then each userInfo member as a string: a string as it is, any other value as its JSON),
    /// and `android` (`ttl`, `priority`, sound, badge as `notification_count`, category as
    /// `click_action`).
    public static func fcm(
        _ payload: [UInt8],
        token: String,
        now: Instant,
        expiresAt: Instant
    ) throws(PushPayloadError) -> PushMessage {
        let d = try DeliveryFields(payload)
        var message: JSONObject = ["token": .string(token)]
        if d.isAlert {
            var notification = JSONObject()
            if let title = d.title { notification.append("title", .string(title)) }
            if let body = d.body { notification.append("body", .string(body)) }
            message.append("notification", .object(notification))
        }
        var data = JSONObject(identity(d).map { ($0.0, JSON.string($0.1)) })
        for (key, value) in d.userInfo where !reservedFCMKey(key) && data[key] == nil {
            if case .string(let s) = value {
                data.append(key, .string(s))
            } else {
                data.append(key, .string(value.text))
            }
        }
        message.append("data", .object(data))
        let ttl = max(0, (expiresAt.milliseconds - now.milliseconds) / 1000)
        let priority = d.level == .passive || !d.isAlert ? "NORMAL" : "HIGH"
        var android: JSONObject = ["ttl": .string("\(ttl)s"), "priority": .string(priority)]
        var androidNotification = JSONObject()
        if d.isAlert, let sound = d.sound { androidNotification.append("sound", .string(sound)) }
        if d.isAlert, let badge = d.badge { androidNotification.append("notification_count", .int(badge)) }
        if d.isAlert, let category = d.category { androidNotification.append("click_action", .string(category)) }
        if d.isAlert, let thread = d.threadId { androidNotification.append("tag", .string(thread)) }
        if !androidNotification.isEmpty { android.append("notification", .object(androidNotification)) }
        message.append("android", .object(android))
        let counted = fcmPayloadBytes(message)
        guard counted <= maxFCMBytes else {
            throw PushPayloadError(description: "FCM payload of \(counted) bytes, more than \(maxFCMBytes)")
        }
        return PushMessage(
            headers: [("content-type", "application/json")],
            body: JSON.object(["message": .object(message)]).bytes
        )
    }

    /// What FCM counts against its limit: the UTF-8 bytes of each key and string value of the
    /// message's `notification` and `data`. It is never more than the delivery's own JSON: each
    /// of these is a member of the delivery, under a name no longer, unquoted.
    static func fcmPayloadBytes(_ message: JSONObject) -> Int {
        var count = 0
        for part in ["notification", "data"] {
            guard case .object(let members)? = message[part] else { continue }
            for (key, value) in members {
                count += key.utf8.count + (value.stringValue?.utf8.count ?? 0)
            }
        }
        return count
    }

    /// The Web Push plaintext is the delivery itself (what an MQTT subscriber gets), for the
    /// service worker to show; the headers say how long the push service keeps it (`TTL`) and a
    /// `Topic` of the delivery, so that the service replaces rather than repeats a push sent again.
    public static func webPush(
        _ payload: [UInt8],
        fireId: String,
        now: Instant,
        expiresAt: Instant
    ) throws(PushPayloadError) -> PushMessage {
        guard payload.count <= maxWebPushPlaintext else {
            throw PushPayloadError(
                description: "Web Push plaintext of \(payload.count) bytes, more than \(maxWebPushPlaintext)"
            )
        }
        let ttl = max(0, (expiresAt.milliseconds - now.milliseconds) / 1000)
        let urgency: String
        switch (try? DeliveryFields(payload))?.level {
        case .passive: urgency = "low"
        case .timeSensitive, .critical: urgency = "high"
        case .active, nil: urgency = "normal"
        }
        return PushMessage(
            headers: [
                ("ttl", String(ttl)), ("urgency", urgency), ("topic", topic(fireId)),
                ("content-encoding", "aes128gcm"), ("content-type", "application/octet-stream"),
            ],
            body: payload
        )
    }

    /// A Web Push `Topic` (RFC 8030 section 5.4: at most 32 characters of the base64url
    /// alphabet) for a delivery: 32 characters of a hash of its fireId.
    static func topic(_ fireId: String) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        var out = ""
        for round in 0..<4 {
            for byte in fireId.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
            h = (h ^ UInt64(round)) &* 0x100_0000_01b3
            var v = h
            for _ in 0..<8 {
                out.append(alphabet[Int(v & 63)])
                v >>= 6
            }
        }
        return out
    }
}
