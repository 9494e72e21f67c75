import ChimeCore
import ChimeCrypto
import ChimeHTTPClient
import ChimeSupport
import Synchronization

/// Makes push attempts off the worker's loop: builds each request (PushPayloads), signs it with
/// the provider's credentials (tokens cached, ``ProviderTokens``), hands it to the HTTP client's
/// thread, and reports how it ended through `report`, as the MQTT client reports a PUBACK.
public final class PushService: Sendable {
    private let configuration: PushConfiguration
    private let client: HTTPClient
    private let requests: Requests
    private let tokens: ProviderTokens
    private let now: @Sendable () -> Instant

    /// What each request in flight is for.
    enum Purpose: Sendable {
        case push(PushJobKey, PushRegistration.Provider)
        case fcmToken
    }

    /// The requests in flight, and where their completions go: the HTTP client's thread calls in.
    final class Requests: Sendable {
        let state = Mutex<(next: UInt64, purposes: [UInt64: Purpose])>((1, [:]))
        let handler = Mutex<(@Sendable (Purpose, Result<HTTPResponse, HTTPClientError>) -> Void)?>(nil)

        func add(_ purpose: Purpose) -> UInt64 {
            state.withLock { s in
                let id = s.next
                s.next += 1
                s.purposes[id] = purpose
                return id
            }
        }

        func complete(_ id: UInt64, _ result: Result<HTTPResponse, HTTPClientError>) {
            guard let purpose = state.withLock({ $0.purposes.removeValue(forKey: id) }) else { return }
            handler.withLock { $0 }?(purpose, result)
        }
    }

    /// - Parameter report: called on the HTTP client's thread when an attempt ends.
    public init(
        configuration: PushConfiguration,
        now: @escaping @Sendable () -> Instant,
        report: @escaping @Sendable (PushJobKey, PushAttemptResult) -> Void
    ) throws(HTTPClientError) {
        self.configuration = configuration
        self.now = now
        let requests = Requests()
        self.requests = requests
        var http = HTTPClientConfiguration()
        http.caFile = configuration.caFile
        http.defaultTimeout = .seconds(configuration.timeout)
        http.maxInFlight = configuration.inFlight * 3 + 16
        http.addressPolicy = AddressPolicy(
            allowLoopback: configuration.endpoints.allowLoopback,
            allowPrivate: configuration.endpoints.allowPrivate
        )
        http.userAgent = "chimed/\(chimeVersion)"
        client = try HTTPClient(configuration: http) { id, result in requests.complete(id, result) }
        tokens = ProviderTokens(configuration: configuration)
        let tokens = self.tokens
        let client = self.client
        let config = configuration
        requests.handler.withLock {
            $0 = { purpose, result in
                switch purpose {
                case .push(let key, let provider):
                    let outcome = Self.classify(provider, result, tokens: tokens)
                    report(key, outcome)
                case .fcmToken:
                    let arrived = tokens.fcmTokenArrived(result, now: now())
                    for job in arrived.jobs {
                        let failure: PushAttemptResult?
                        if let token = arrived.token {
                            failure = Self.submitFCM(
                                job,
                                token: token,
                                config: config,
                                client: client,
                                requests: requests,
                                now: now()
                            )
                        } else {
                            failure = .transient(reason: arrived.failure, retryAfter: nil)
                        }
                        if let failure { report(job.key, failure) }
                    }
                }
            }
        }
        self.report = report
    }

    private let report: @Sendable (PushJobKey, PushAttemptResult) -> Void

    /// Stops the HTTP client; attempts in flight end as cancelled and are not reported.
    public func shutdown() { client.shutdown() }

    /// Starts one attempt; its end is reported (at once when it cannot start).
    public func send(_ job: PushJob) {
        if let failure = start(job) { report(job.key, failure) }
    }

    private func start(_ job: PushJob) -> PushAttemptResult? {
        let at = now()
        switch job.registration.target {
        case .apns(let token, let topic, let sandbox):
            guard let apns = configuration.apns else { return Self.unconfigured("APNs credentials (--apns-key)") }
            let message: PushMessage
            do {
                message = try PushPayloads.apns(
                    job.payload,
                    topic: topic,
                    expiresAt: job.expiresAt,
                    registration: job.registration.id
                )
            } catch {
                return .refused(reason: error.description)
            }
            let jwt: String
            do {
                jwt = try tokens.apns(apns, now: at)
            } catch {
                return .refused(reason: "APNs token: \(error.description)")
            }
            let base = apns.url ?? (sandbox ? "https://api.sandbox.push.apple.com" : "https://api.push.apple.com")
            return submit(
                .push(job.key, .apns),
                url: "\(base)/3/device/\(token)",
                headers: message.headers + [("authorization", "bearer \(jwt)")],
                body: message.body
            )
        case .fcm:
            guard configuration.fcm != nil else {
                return Self.unconfigured("FCM credentials (--fcm-service-account)")
            }
            switch tokens.fcmAccessToken(for: job, now: at) {
            case .ready(let token):
                return Self.submitFCM(
                    job,
                    token: token,
                    config: configuration,
                    client: client,
                    requests: requests,
                    now: at
                )
            case .waiting: return nil
            case .fetch(let assertion):
                guard let fcm = configuration.fcm else { return nil }
                let form =
                    "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
                let id = requests.add(.fcmToken)
                let request = HTTPRequest(
                    id: id,
                    method: "POST",
                    url: fcm.tokenURL,
                    headers: [HTTPHeader("content-type", "application/x-www-form-urlencoded")],
                    body: Array(form.utf8)
                )
                if !client.submit(request) {
                    _ = requests.state.withLock { $0.purposes.removeValue(forKey: id) }
                    _ = tokens.fcmTokenArrived(nil, now: at)
                    return .transient(reason: "the HTTP client is full", retryAfter: nil)
                }
                return nil
            case .failed(let reason):
                return .refused(reason: reason)
            }
        case .webPush(let endpoint, let p256dh, let auth):
            guard let vapid = configuration.vapid else { return Self.unconfigured("VAPID key (--vapid-key)") }
            // Checked at registration; checked again, as the flags may have changed since.
            if let why = configuration.endpoints.refusal(endpoint) { return .refused(reason: "endpoint \(why)") }
            let message: PushMessage
            do {
                message = try PushPayloads.webPush(job.payload, fireId: job.fireId, now: at, expiresAt: job.expiresAt)
            } catch {
                return .refused(reason: error.description)
            }
            guard let publicKey = Base64URL.decode(p256dh), let secret = Base64URL.decode(auth) else {
                return .unregistered(reason: "subscription keys are not base64url")
            }
            let body: [UInt8]
            let jwt: String
            do {
                body = try WebPushEncryption.encrypt(
                    plaintext: message.body,
                    userAgentPublicKey: publicKey,
                    authSecret: secret
                )
                jwt = try tokens.vapid(vapid, audience: Self.origin(endpoint), now: at)
            } catch {
                // A key not on the curve: the subscription can never be pushed to.
                return .unregistered(reason: "subscription keys: \(error.description)")
            }
            let k = Base64URL.encode(vapid.key.publicKey)
            return submit(
                .push(job.key, .webpush),
                url: endpoint,
                headers: message.headers + [("authorization", "vapid t=\(jwt), k=\(k)")],
                body: body
            )
        }
    }

    /// A push for a provider this worker has no credentials for (they were taken away since it was
    /// registered): tried again every 5 minutes until it expires, so that credentials given back in
    /// time still deliver it.
    public static func unconfigured(_ what: String) -> PushAttemptResult {
        .transient(reason: "this worker has no \(what)", retryAfter: 300_000)
    }

    private func submit(
        _ purpose: Purpose,
        url: String,
        headers: [(name: String, value: String)],
        body: [UInt8]
    ) -> PushAttemptResult? {
        let id = requests.add(purpose)
        let request = HTTPRequest(
            id: id,
            method: "POST",
            url: url,
            headers: headers.map { HTTPHeader($0.name, $0.value) },
            body: body
        )
        guard client.submit(request) else {
            _ = requests.state.withLock { $0.purposes.removeValue(forKey: id) }
            return .transient(reason: "the HTTP client is full", retryAfter: nil)
        }
        return nil
    }

    private static func submitFCM(
        _ job: PushJob,
        token: String?,
        config: PushConfiguration,
        client: HTTPClient,
        requests: Requests,
        now: Instant
    ) -> PushAttemptResult? {
        guard let token, let fcm = config.fcm, case .fcm(let registration) = job.registration.target else {
            return .transient(reason: "no FCM access token", retryAfter: nil)
        }
        let message: PushMessage
        do {
            message = try PushPayloads.fcm(job.payload, token: registration, now: now, expiresAt: job.expiresAt)
        } catch {
            return .refused(reason: error.description)
        }
        let id = requests.add(.push(job.key, .fcm))
        let request = HTTPRequest(
            id: id,
            method: "POST",
            url: "\(fcm.url)/v1/projects/\(fcm.projectId)/messages:send",
            headers: (message.headers + [("authorization", "Bearer \(token)")]).map {
                HTTPHeader($0.name, $0.value)
            },
            body: message.body
        )
        guard client.submit(request) else {
            _ = requests.state.withLock { $0.purposes.removeValue(forKey: id) }
            return .transient(reason: "the HTTP client is full", retryAfter: nil)
        }
        return nil
    }

    /// How an attempt ended, from the answer or the failure.
    static func classify(
        _ provider: PushRegistration.Provider,
        _ result: Result<HTTPResponse, HTTPClientError>,
        tokens: ProviderTokens
    ) -> PushAttemptResult {
        switch result {
        case .failure(let error):
            // The address policy refused where the name led: no request was made, and none will be.
            if error.code == .addressRefused { return .refused(reason: "address refused: \(error.description)") }
            return .transient(reason: error.description, retryAfter: nil)
        case .success(let response):
            let retryAfter = response.header("retry-after")
            let outcome: PushAttemptResult
            switch provider {
            case .apns:
                outcome = PushResponses.apns(status: response.status, body: response.body, retryAfter: retryAfter)
            case .fcm: outcome = PushResponses.fcm(status: response.status, body: response.body, retryAfter: retryAfter)
            case .webpush: outcome = PushResponses.webPush(status: response.status, retryAfter: retryAfter)
            }
            if case .transient(let reason, _) = outcome {
                if provider == .apns, reason.hasSuffix("ProviderToken") { tokens.invalidateAPNs() }
                if provider == .fcm, response.status == 401 { tokens.invalidateFCM() }
            }
            return outcome
        }
    }

    /// `https://host[:port]` of an endpoint: the VAPID token's audience.
    static func origin(_ endpoint: String) -> String {
        let parts = endpoint.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        return parts.prefix(3).joined(separator: "/")
    }
}
