import ChimeCore
import ChimeCrypto
import ChimeHTTPClient
import ChimeSupport
import Dispatch
import Foundation
import Synchronization

/// Makes push attempts off the worker's loop, and reports how each ended through `report`, as the
/// MQTT client reports a PUBACK.
///
/// ``send(_:)`` only queues the job: a thread of its own builds each request (PushPayloads), signs
/// it with the provider's credentials (tokens cached, ``ProviderTokens``), encrypts a Web Push
/// body (RFC 8291), and hands it to the provider's HTTP client, one for each provider so that one
/// service's connections and queue never hold another's.
public final class PushService: Sendable {
    private let configuration: PushConfiguration
    private let clients: [PushRegistration.Provider: HTTPClient]
    private let requests = Requests()
    private let tokens: ProviderTokens
    private let now: @Sendable () -> Instant
    private let report: @Sendable (PushJobKey, PushAttemptResult) -> Void
    private let queue = WorkQueue()

    /// What each request in flight is for.
    enum Purpose: Sendable {
        /// A push, and the provider token or access token it carries (none for Web Push).
        case push(PushJobKey, PushRegistration.Provider, credential: String?)
        case fcmToken
    }

    /// The requests in flight by id, across the clients.
    final class Requests: Sendable {
        private let state = Mutex<(next: UInt64, purposes: [UInt64: Purpose])>((1, [:]))

        func add(_ purpose: Purpose) -> UInt64 {
            state.withLock { s in
                let id = s.next
                s.next += 1
                s.purposes[id] = purpose
                return id
            }
        }

        func take(_ id: UInt64) -> Purpose? { state.withLock { $0.purposes.removeValue(forKey: id) } }
    }

    /// Jobs handed over by the loop, for the preparing thread.
    final class WorkQueue: Sendable {
        private let state = Mutex<(jobs: [PushJob], stopped: Bool)>(([], false))
        private let wakeup = DispatchSemaphore(value: 0)

        func push(_ job: PushJob) {
            state.withLock { $0.jobs.append(job) }
            wakeup.signal()
        }

        /// The jobs queued, waiting for one; nil once stopped.
        func take() -> [PushJob]? {
            while true {
                let (jobs, stopped) = state.withLock { s -> ([PushJob], Bool) in
                    defer { s.jobs.removeAll(keepingCapacity: true) }
                    return (s.jobs, s.stopped)
                }
                if stopped { return nil }
                if !jobs.isEmpty { return jobs }
                wakeup.wait()
            }
        }

        func stop() {
            state.withLock { $0.stopped = true }
            wakeup.signal()
        }
    }

    /// - Parameter report: called on another thread (the preparing one, or an HTTP client's) when
    ///   an attempt ends.
    public init(
        configuration: PushConfiguration,
        now: @escaping @Sendable () -> Instant,
        report: @escaping @Sendable (PushJobKey, PushAttemptResult) -> Void
    ) throws(HTTPClientError) {
        self.configuration = configuration
        self.now = now
        self.report = report
        let tokens = ProviderTokens(configuration: configuration)
        self.tokens = tokens
        var http = HTTPClientConfiguration()
        http.caFile = configuration.caFile
        http.defaultTimeout = .seconds(configuration.timeout)
        http.maxInFlight = configuration.inFlight + 16
        http.addressPolicy = AddressPolicy(
            allowLoopback: configuration.endpoints.allowLoopback,
            allowPrivate: configuration.endpoints.allowPrivate
        )
        http.userAgent = "chimed/\(chimeVersion)"
        // Completions find the service through this box, set once it exists.
        let box = ServiceBox()
        var clients: [PushRegistration.Provider: HTTPClient] = [:]
        for provider in configuration.providers {
            clients[provider] = try HTTPClient(configuration: http) { id, result in
                box.service.withLock { $0 }?.completed(id, result)
            }
        }
        self.clients = clients
        // The box holds the service until shutdown, which empties it.
        self.box = box
        box.service.withLock { $0 = self }
        let queue = self.queue
        let thread = Thread { [weak self] in
            while let jobs = queue.take() {
                guard let self else { return }
                for job in jobs {
                    if let failure = self.start(job) { self.report(job.key, failure) }
                }
            }
        }
        thread.name = "chimed-push"
        thread.start()
    }

    private let box: ServiceBox

    /// Where the clients' completions find the service (set after it is made).
    final class ServiceBox: Sendable {
        let service = Mutex<PushService?>(nil)
    }

    /// Stops the preparing thread and the HTTP clients; attempts in flight end as cancelled
    /// (transient: a later start makes them again).
    public func shutdown() {
        queue.stop()
        for client in clients.values { client.shutdown() }
        box.service.withLock { $0 = nil }
    }

    /// Queues one attempt; its end is reported. Never blocks.
    public func send(_ job: PushJob) { queue.push(job) }

    /// A push for a provider this worker has no credentials for (they were taken away since it was
    /// registered): tried again every 5 minutes until it expires, so that credentials given back in
    /// time still deliver it.
    public static func unconfigured(_ what: String) -> PushAttemptResult {
        .transient(reason: "this worker has no \(what)", retryAfter: 300_000)
    }

    // MARK: On the preparing thread

    private func start(_ job: PushJob) -> PushAttemptResult? {
        let at = now()
        switch job.registration.target {
        case .apns(let token, let topic, let sandbox):
            guard let apns = configuration.apns else { return Self.unconfigured("APNs credentials (--apns-key)") }
            let message: PushMessage
            let jwt: String
            do {
                message = try PushPayloads.apns(
                    job.payload,
                    topic: topic,
                    expiresAt: job.expiresAt,
                    registration: job.registration.id
                )
                jwt = try tokens.apns(apns, now: at)
            } catch {
                return .refused(reason: "\(error)")
            }
            let base = apns.url ?? (sandbox ? "https://api.sandbox.push.apple.com" : "https://api.push.apple.com")
            return submit(
                .push(job.key, .apns, credential: jwt),
                url: "\(base)/3/device/\(token)",
                headers: message.headers + [("authorization", "bearer \(jwt)")],
                body: message.body
            )
        case .fcm:
            guard let fcm = configuration.fcm else {
                return Self.unconfigured("FCM credentials (--fcm-service-account)")
            }
            switch tokens.fcmAccessToken(for: job, now: at) {
            case .ready(let token): return submitFCM(job, token: token, now: at)
            case .waiting: return nil
            case .fetch(let assertion):
                let form =
                    "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
                if submit(
                    .fcmToken,
                    url: fcm.tokenURL,
                    headers: [("content-type", "application/x-www-form-urlencoded")],
                    body: Array(form.utf8)
                ) != nil {
                    // Every push that waited for the token, this one among them, ends there.
                    tokenArrived(nil)
                }
                return nil
            case .failed(let reason):
                return .transient(reason: reason, retryAfter: nil)
            }
        case .webPush(let endpoint, let p256dh, let auth):
            guard let vapid = configuration.vapid else { return Self.unconfigured("VAPID key (--vapid-key)") }
            // Checked at registration; checked again, as the flags may have changed since.
            guard let url = PushEndpointURL(endpoint), configuration.endpoints.refusal(endpoint) == nil else {
                return .refused(reason: "the endpoint \(configuration.endpoints.refusal(endpoint) ?? "is not a URL")")
            }
            let message: PushMessage
            do {
                message = try PushPayloads.webPush(job.payload, fireId: job.fireId, now: at, expiresAt: job.expiresAt)
            } catch {
                return .refused(reason: "\(error)")
            }
            guard let publicKey = Base64URL.decode(p256dh), let secret = Base64URL.decode(auth) else {
                return .unregistered(reason: "subscription keys are not base64url")
            }
            let body: [UInt8]
            do {
                body = try WebPushEncryption.encrypt(
                    plaintext: message.body,
                    userAgentPublicKey: publicKey,
                    authSecret: secret
                )
            } catch {
                // A key not on the curve: the subscription can never be pushed to.
                return .unregistered(reason: "subscription keys: \(error.description)")
            }
            let jwt: String
            do {
                jwt = try tokens.vapid(vapid, audience: url.origin, now: at)
            } catch {
                return .refused(reason: "VAPID token: \(error.description)")
            }
            let k = Base64URL.encode(vapid.key.publicKey)
            return submit(
                .push(job.key, .webpush, credential: nil),
                url: endpoint,
                headers: message.headers + [("authorization", "vapid t=\(jwt), k=\(k)")],
                body: body
            )
        }
    }

    /// Hands a request to its provider's client: nil once handed, or why it could not be.
    private func submit(
        _ purpose: Purpose,
        url: String,
        headers: [(name: String, value: String)],
        body: [UInt8]
    ) -> PushAttemptResult? {
        let provider: PushRegistration.Provider
        switch purpose {
        case .push(_, let p, _): provider = p
        case .fcmToken: provider = .fcm
        }
        guard let client = clients[provider] else { return Self.unconfigured("\(provider.rawValue) client") }
        let id = requests.add(purpose)
        let request = HTTPRequest(
            id: id,
            method: "POST",
            url: url,
            headers: headers.map { HTTPHeader($0.name, $0.value) },
            body: body
        )
        guard client.submit(request) else {
            _ = requests.take(id)
            return .transient(reason: "the \(provider.rawValue) client is full or stopped", retryAfter: nil)
        }
        return nil
    }

    private func submitFCM(_ job: PushJob, token: String, now: Instant) -> PushAttemptResult? {
        guard let fcm = configuration.fcm, case .fcm(let registration) = job.registration.target else {
            return .refused(reason: "not an FCM registration")
        }
        let message: PushMessage
        do {
            message = try PushPayloads.fcm(job.payload, token: registration, now: now, expiresAt: job.expiresAt)
        } catch {
            return .refused(reason: "\(error)")
        }
        return submit(
            .push(job.key, .fcm, credential: token),
            url: "\(fcm.url)/v1/projects/\(fcm.projectId)/messages:send",
            headers: message.headers + [("authorization", "Bearer \(token)")],
            body: message.body
        )
    }

    // MARK: On an HTTP client's thread

    private func completed(_ id: UInt64, _ result: Result<HTTPResponse, HTTPClientError>) {
        switch requests.take(id) {
        case .push(let key, let provider, let credential)?:
            report(key, Self.classify(provider, result, credential: credential, tokens: tokens))
        case .fcmToken?: tokenArrived(result)
        case nil: break
        }
    }

    /// The FCM token request ended: the pushes that waited for it go back to the preparing thread
    /// (which finds the token cached), or end transiently.
    private func tokenArrived(_ result: Result<HTTPResponse, HTTPClientError>?) {
        let arrived = tokens.fcmTokenArrived(result, now: now())
        for job in arrived.jobs {
            if arrived.token != nil {
                queue.push(job)
            } else {
                report(job.key, .transient(reason: arrived.failure, retryAfter: nil))
            }
        }
    }

    /// How an attempt ended, from the answer or the failure.
    static func classify(
        _ provider: PushRegistration.Provider,
        _ result: Result<HTTPResponse, HTTPClientError>,
        credential: String? = nil,
        tokens: ProviderTokens
    ) -> PushAttemptResult {
        switch result {
        case .failure(let error):
            switch error.code {
            // No request was made, and none will be: the address the name led to is not allowed,
            // or the URL is one the client cannot call.
            case .addressRefused, .invalidRequest, .protocolRefused:
                return .refused(reason: "\(error.code): \(error.message)")
            default:
                return .transient(reason: "\(error.code): \(error.message)", retryAfter: nil)
            }
        case .success(let response):
            let retryAfter = response.header("retry-after")
            let outcome: PushAttemptResult
            switch provider {
            case .apns:
                outcome = PushResponses.apns(status: response.status, body: response.body, retryAfter: retryAfter)
            case .fcm: outcome = PushResponses.fcm(status: response.status, body: response.body, retryAfter: retryAfter)
            case .webpush: outcome = PushResponses.webPush(status: response.status, retryAfter: retryAfter)
            }
            if case .transient(let reason, _) = outcome, let credential {
                if provider == .apns, reason.hasSuffix("ProviderToken") { tokens.invalidateAPNs(credential) }
                if provider == .fcm, response.status == 401 { tokens.invalidateFCM(credential) }
            }
            return outcome
        }
    }
}
