import ChimeCore
import ChimeCrypto
import ChimeHTTPClient
import Synchronization

/// The credentials' tokens, made once and reused until shortly before they expire, as the
/// platforms require: an APNs provider token lives an hour and is renewed after 50 minutes (not
/// per request: Apple refuses tokens renewed too often); a VAPID token per push service origin
/// for 12 hours (at most 24, RFC 8292); an FCM OAuth 2.0 access token until 5 minutes before
/// its `expires_in`, fetched with a JWT-bearer grant signed by the service account (RS256).
final class ProviderTokens: Sendable {
    private struct State {
        var apns: (token: String, issued: Int64)?
        var vapid: [String: (token: String, expires: Int64)] = [:]
        var fcm: (token: String, expires: Int64)?
        var fcmFetching = false
        /// FCM pushes waiting for the access token being fetched.
        var fcmWaiting: [PushJob] = []
    }

    private let state = Mutex(State())
    private let configuration: PushConfiguration

    static let apnsRenewal: Int64 = 50 * 60_000
    static let vapidLifetime: Int64 = 12 * 3_600_000
    static let fcmMargin: Int64 = 5 * 60_000
    /// FCM pushes that wait for one access token, at most (the rest are tried again later).
    static let maxFCMWaiting = 10_000

    init(configuration: PushConfiguration) { self.configuration = configuration }

    private static func json(_ o: JSONObject) -> [UInt8] { JSON.object(o).bytes }

    func apns(_ apns: PushConfiguration.APNs, now: Instant) throws(CryptoError) -> String {
        if let cached = state.withLock({ $0.apns }), now.milliseconds - cached.issued < Self.apnsRenewal {
            return cached.token
        }
        let token = try JSONWebToken.es256(
            header: Self.json(["alg": "ES256", "kid": .string(apns.keyId)]),
            claims: Self.json(["iss": .string(apns.teamId), "iat": .int(now.milliseconds / 1000)]),
            key: apns.key
        )
        state.withLock { $0.apns = (token, now.milliseconds) }
        return token
    }

    /// Forgets the APNs provider token `used` once APNs refused it; a newer one made since stays,
    /// so that the answers of requests that carried the old one do not make a token each (Apple
    /// refuses tokens renewed more often than every 20 minutes: `TooManyProviderTokenUpdates`).
    func invalidateAPNs(_ used: String) { state.withLock { if $0.apns?.token == used { $0.apns = nil } } }

    func vapid(_ vapid: PushConfiguration.VAPID, audience: String, now: Instant) throws(CryptoError) -> String {
        if let cached = state.withLock({ $0.vapid[audience] }), cached.expires - now.milliseconds > 3_600_000 {
            return cached.token
        }
        let expires = now.milliseconds + Self.vapidLifetime
        let token = try JSONWebToken.es256(
            header: Self.json(["typ": "JWT", "alg": "ES256"]),
            claims: Self.json([
                "aud": .string(audience), "exp": .int(expires / 1000), "sub": .string(vapid.subject),
            ]),
            key: vapid.key
        )
        state.withLock { s in
            // Bounded: past 1024 origins, the one that expires first makes room.
            if s.vapid.count >= 1024, let first = s.vapid.min(by: { $0.value.expires < $1.value.expires }) {
                s.vapid.removeValue(forKey: first.key)
            }
            s.vapid[audience] = (token, expires)
        }
        return token
    }

    /// What an FCM push does about its access token.
    enum FCMToken {
        case ready(String)
        /// Queued until the token being fetched arrives.
        case waiting
        /// Queued; fetch a token with this assertion.
        case fetch(assertion: String)
        case failed(String)
    }

    func fcmAccessToken(for job: PushJob, now: Instant) -> FCMToken {
        let cached: String? = state.withLock { s in
            guard let t = s.fcm, t.expires - now.milliseconds > Self.fcmMargin else { return nil }
            return t.token
        }
        if let cached { return .ready(cached) }
        let mustFetch: Bool? = state.withLock { s in
            guard s.fcmWaiting.count < Self.maxFCMWaiting else { return nil }
            s.fcmWaiting.append(job)
            defer { s.fcmFetching = true }
            return !s.fcmFetching
        }
        guard let mustFetch else { return .failed("too many FCM pushes wait for an access token") }
        guard mustFetch, let fcm = configuration.fcm else { return .waiting }
        let iat = now.milliseconds / 1000
        do {
            let assertion = try JSONWebToken.rs256(
                header: Self.json(["alg": "RS256", "typ": "JWT"]),
                claims: Self.json([
                    "iss": .string(fcm.clientEmail),
                    "scope": "https://www.googleapis.com/auth/firebase.messaging",
                    "aud": .string(fcm.tokenURL), "iat": .int(iat), "exp": .int(iat + 3600),
                ]),
                key: fcm.key
            )
            return .fetch(assertion: assertion)
        } catch {
            _ = fcmTokenArrived(nil, now: now)
            return .failed("FCM assertion: \(error.description)")
        }
    }

    /// The token request ended (nil: it could not be made): the token, if one came, and the
    /// pushes that waited for it.
    func fcmTokenArrived(
        _ result: Result<HTTPResponse, HTTPClientError>?,
        now: Instant
    ) -> (
        token: String?, jobs: [PushJob], failure: String
    ) {
        var token: String?
        var expires: Int64 = 0
        var failure = "the FCM token request could not be made"
        switch result {
        case .success(let response) where response.status == 200:
            if case .object(let o)? = try? JSON(parsing: response.body), case .string(let t)? = o["access_token"],
                !t.isEmpty, t.utf8.count <= 4096
            {
                token = t
                var lifetime: Int64 = 3600
                if case .int(let n)? = o["expires_in"], n > 0 { lifetime = min(n, 86_400) }
                expires = now.milliseconds + lifetime * 1000
            } else {
                failure = "the FCM token answer has no access_token"
            }
        case .success(let response): failure = "the FCM token request got HTTP \(response.status)"
        case .failure(let error): failure = "the FCM token request failed: \(error.description)"
        case nil: break
        }
        return state.withLock { s in
            s.fcmFetching = false
            if let token { s.fcm = (token, expires) }
            defer { s.fcmWaiting.removeAll() }
            return (token, s.fcmWaiting, failure)
        }
    }

    /// Forgets the FCM access token `used` once FCM refused it; a newer one fetched since stays.
    func invalidateFCM(_ used: String) { state.withLock { if $0.fcm?.token == used { $0.fcm = nil } } }
}
