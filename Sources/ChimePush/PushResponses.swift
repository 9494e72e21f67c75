import ChimeCore

/// What each push service's answer means for a push (PROTOCOL.md section 3.11): pure.
public enum PushResponses {
    /// An APNs answer: 200 taken; 410, or 400 `BadDeviceToken` / `DeviceTokenNotForTopic`, the
    /// token is gone; 403 `ExpiredProviderToken` / `InvalidProviderToken` is tried again with a new
    /// token; 429 and 5xx again later; any other 4xx refuses this push.
    public static func apns(status: Int, body: [UInt8], retryAfter: String?) -> PushAttemptResult {
        let reason = member("reason", of: body) ?? "HTTP \(status)"
        switch status {
        case 200: return .accepted
        case 410: return .unregistered(reason: reason)
        case 400 where reason == "BadDeviceToken" || reason == "DeviceTokenNotForTopic":
            return .unregistered(reason: reason)
        case 403 where reason == "ExpiredProviderToken" || reason == "InvalidProviderToken":
            return .transient(reason: reason, retryAfter: nil)
        case 429, 500...599: return .transient(reason: reason, retryAfter: seconds(retryAfter))
        default: return .refused(reason: reason)
        }
    }

    /// An FCM HTTP v1 answer: 200 taken; `UNREGISTERED` (404) or `SENDER_ID_MISMATCH` (403), the
    /// token is gone, and so is a 400 `INVALID_ARGUMENT` whose message is about the registration
    /// token (FCM's answer to a token that is not one: other invalid arguments refuse this push
    /// only); 401 is tried again with a new access token; 429 and 5xx again later; any other 4xx
    /// refuses this push. A 404 without `UNREGISTERED` (a wrong `--fcm-url` or project) removes
    /// nothing.
    public static func fcm(status: Int, body: [UInt8], retryAfter: String?) -> PushAttemptResult {
        let code = fcmErrorCode(body)
        let reason = code ?? member("status", of: body, in: "error") ?? "HTTP \(status)"
        let aboutTheToken =
            member("message", of: body, in: "error")?.lowercased().contains("registration token") ?? false
        switch status {
        case 200: return .accepted
        case _ where code == "UNREGISTERED" || code == "SENDER_ID_MISMATCH": return .unregistered(reason: reason)
        case 400 where reason == "INVALID_ARGUMENT" && aboutTheToken: return .unregistered(reason: reason)
        case 401: return .transient(reason: reason, retryAfter: nil)
        case 429, 500...599: return .transient(reason: reason, retryAfter: seconds(retryAfter))
        default: return .refused(reason: reason)
        }
    }

    /// A Web Push answer (RFC 8030): 201 (or any 2xx) taken; 404 and 410, the subscription is
    /// gone; 429 and 5xx again later; 413 and other 4xx refuse this push. A redirect is not
    /// followed: it refuses the push.
    public static func webPush(status: Int, retryAfter: String?) -> PushAttemptResult {
        switch status {
        case 200...299: return .accepted
        case 404, 410: return .unregistered(reason: "HTTP \(status)")
        case 429, 500...599: return .transient(reason: "HTTP \(status)", retryAfter: seconds(retryAfter))
        default: return .refused(reason: "HTTP \(status)")
        }
    }

    /// `Retry-After` in milliseconds: delta seconds only (an HTTP date is read as none, and the
    /// backoff applies).
    static func seconds(_ value: String?) -> Int64? {
        guard let value, let n = Int64(value.filter { $0 != " " }), n >= 0 else { return nil }
        return min(n, 86_400) * 1000
    }

    /// A string member of the body's JSON object (or of its object `in`), at most 128 characters.
    static func member(_ key: String, of body: [UInt8], in outer: String? = nil) -> String? {
        guard body.count <= 65_536, case .object(var o)? = try? JSON(parsing: body) else { return nil }
        if let outer {
            guard case .object(let inner)? = o[outer] else { return nil }
            o = inner
        }
        guard case .string(let s)? = o[key] else { return nil }
        return String(s.prefix(128))
    }

    /// FCM's `errorCode` in `error.details[]` (type `google.firebase.fcm.v1.FcmError`).
    static func fcmErrorCode(_ body: [UInt8]) -> String? {
        guard body.count <= 65_536, case .object(let o)? = try? JSON(parsing: body),
            case .object(let error)? = o["error"], case .array(let details)? = error["details"]
        else { return nil }
        for case .object(let d) in details {
            if case .string(let code)? = d["errorCode"] { return String(code.prefix(64)) }
        }
        return nil
    }
}
