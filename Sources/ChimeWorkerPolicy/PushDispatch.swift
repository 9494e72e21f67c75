import ChimeEngine
import ChimeProtocol

/// What a push attempt came to, as the push service answered (or did not).
public enum PushAttemptResult: Hashable, Sendable {
    /// Taken: APNs 200, FCM 200, Web Push 201.
    case accepted
    /// The registration is gone (APNs 410 or BadDeviceToken, FCM UNREGISTERED, Web Push 404/410).
    case unregistered(reason: String)
    /// Refused for good, for this push (a payload the service will never take).
    case refused(reason: String)
    /// Worth another try: 429, 5xx, a timeout, a lost connection, credentials being renewed.
    /// `retryAfter`: what the service asked for, in milliseconds.
    case transient(reason: String, retryAfter: Int64?)
}

/// When each push is attempted: pure, driven by jobs, results and the time, returning what to do.
///
/// Every job is attempted until its push service takes it, refuses it for good, or it expires;
/// transient failures wait 1 s, doubling to 5 minutes, or what `Retry-After` asked (at most an
/// hour). Pushes in flight are bounded per provider and per device, so that a push service that
/// never answers takes up its own share and no other's, and one device cannot take a provider's.
public struct PushDispatch: Sendable {
    public struct Limits: Hashable, Sendable {
        /// Attempts in flight per provider (`--push-inflight`).
        public var perProvider: Int
        /// Attempts in flight per device.
        public var perDevice: Int

        public init(perProvider: Int = 1000, perDevice: Int = 4) {
            self.perProvider = perProvider
            self.perDevice = perDevice
        }
    }

    /// A push to make now (`attempt` counts from 1), or one that ended.
    public enum Step: Hashable, Sendable {
        case send(PushJob, attempt: Int)
        case record(PushRecord)
    }

    private struct Entry: Sendable {
        var job: PushJob
        var attempts = 0
        var notBefore: Int64
        var inFlight = false
        /// When the attempt in flight was handed out.
        var sentAt: Int64 = 0
    }

    public let limits: Limits
    private var entries: [PushJobKey: Entry] = [:]
    /// Keys in the order they arrived: the queue ``due(now:isPending:)`` walks.
    private var order: [PushJobKey] = []
    private var inFlightByProvider: [PushRegistration.Provider: Int] = [:]
    private var inFlightByDevice: [String: Int] = [:]
    /// Something changed since the last walk (a job came, an attempt ended).
    private var changed = false
    /// The earliest time a waiting job may be attempted or expires, as of the last walk.
    private var wake: Int64?

    public init(limits: Limits = Limits()) { self.limits = limits }

    /// Jobs known (waiting or in flight).
    public var count: Int { entries.count }
    public func inFlight(_ provider: PushRegistration.Provider) -> Int { inFlightByProvider[provider] ?? 0 }

    /// Takes a job to push; one already known is not taken twice.
    public mutating func add(_ job: PushJob, now: Instant) {
        guard entries[job.key] == nil else { return }
        entries[job.key] = Entry(job: job, notBefore: now.milliseconds)
        order.append(job.key)
        changed = true
    }

    /// Whether ``due(now:isPending:)`` has anything to do: the queue is walked only then, so a
    /// long queue waiting out a backoff costs the loop nothing.
    public func needsWalk(now: Instant) -> Bool {
        changed || wake.map { $0 <= now.milliseconds } == true
    }

    /// The pushes to attempt now, within the limits, and the ones that expired. `isPending`
    /// says whether the engine still has the job (a `pushed` record or a slot moving away ends it).
    public mutating func due(now: Instant, isPending: (PushJobKey) -> Bool) -> [Step] {
        var steps: [Step] = []
        changed = false
        wake = nil
        var kept: [PushJobKey] = []
        kept.reserveCapacity(order.count)
        for key in order {
            guard var entry = entries[key] else { continue }
            if entry.inFlight {
                kept.append(key)
                continue
            }
            guard isPending(key) else {
                entries[key] = nil
                continue
            }
            if now >= entry.job.expiresAt {
                entries[key] = nil
                steps.append(.record(PushRecord(key: key, at: now, outcome: .expired)))
                continue
            }
            kept.append(key)
            let provider = entry.job.registration.provider
            guard entry.notBefore <= now.milliseconds else {
                wake = min(wake ?? .max, entry.notBefore, entry.job.expiresAt.milliseconds)
                continue
            }
            // Held by a limit: walked again when an attempt ends (which sets `changed`), or at expiry.
            guard inFlight(provider) < limits.perProvider, inFlightByDevice[key.deviceId, default: 0] < limits.perDevice
            else {
                wake = min(wake ?? .max, entry.job.expiresAt.milliseconds)
                continue
            }
            entry.inFlight = true
            entry.sentAt = now.milliseconds
            entry.attempts += 1
            entries[key] = entry
            inFlightByProvider[provider, default: 0] += 1
            inFlightByDevice[key.deviceId, default: 0] += 1
            steps.append(.send(entry.job, attempt: entry.attempts))
        }
        order = kept
        return steps
    }

    /// How long the attempt in flight for `key` has taken so far, in milliseconds (nil: none is).
    public func elapsed(_ key: PushJobKey, now: Instant) -> Int64? {
        guard let entry = entries[key], entry.inFlight else { return nil }
        return now.milliseconds - entry.sentAt
    }

    /// An attempt ended: the record to journal, or nil when it is to be tried again.
    public mutating func finished(_ key: PushJobKey, _ result: PushAttemptResult, now: Instant) -> PushRecord? {
        guard var entry = entries[key], entry.inFlight else { return nil }
        entry.inFlight = false
        changed = true
        let provider = entry.job.registration.provider
        inFlightByProvider[provider, default: 1] -= 1
        inFlightByDevice[key.deviceId, default: 1] -= 1
        if inFlightByDevice[key.deviceId] == 0 { inFlightByDevice[key.deviceId] = nil }
        switch result {
        case .accepted:
            entries[key] = nil
            return PushRecord(key: key, at: now, outcome: .accepted)
        case .unregistered(let reason):
            entries[key] = nil
            return PushRecord(key: key, at: now, outcome: .unregistered, reason: reason)
        case .refused(let reason):
            entries[key] = nil
            return PushRecord(key: key, at: now, outcome: .refused, reason: reason)
        case .transient(_, let retryAfter):
            let backoff = Self.backoff(attempt: entry.attempts)
            let asked = min(max(retryAfter ?? 0, 0), Self.maxRetryAfter)
            entry.notBefore = now.milliseconds + max(backoff, asked)
            entries[key] = entry
            return nil
        }
    }

    /// Forgets the jobs of a slot that moved away: its next owner pushes them.
    public mutating func forget(where isGone: (PushJobKey) -> Bool) {
        for (key, entry) in entries where isGone(key) {
            if entry.inFlight {
                let provider = entry.job.registration.provider
                inFlightByProvider[provider, default: 1] -= 1
                inFlightByDevice[key.deviceId, default: 1] -= 1
                if inFlightByDevice[key.deviceId] == 0 { inFlightByDevice[key.deviceId] = nil }
            }
            entries[key] = nil
        }
        order.removeAll { entries[$0] == nil }
        changed = true
    }

    /// When ``due(now:isPending:)`` has something to do (nil: not before an attempt ends).
    public var nextWake: Instant? {
        changed ? Instant(milliseconds: 0) : wake.map { Instant(milliseconds: $0) }
    }

    /// The wait before attempt `attempt + 1` after a transient failure: 1 s, doubling, at most
    /// 5 minutes.
    public static func backoff(attempt: Int) -> Int64 {
        min(1000 << Int64(min(max(attempt - 1, 0), 20)), 300_000)
    }

    /// `Retry-After` is honoured up to an hour.
    public static let maxRetryAfter: Int64 = 3_600_000
}
