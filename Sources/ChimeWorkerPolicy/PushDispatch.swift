import ChimeEngine
import ChimeProtocol

/// What a push attempt came to, as the push service answered (or did not).
public enum PushAttemptResult: Hashable, Sendable {
    /// Taken: APNs 200, FCM 200, Web Push 201.
    case accepted
    /// The registration is gone (APNs 410 or BadDeviceToken, FCM UNREGISTERED, Web Push 404/410).
    case unregistered(reason: String)
    /// Refused for good, for this push (a payload the service will never take, a request that
    /// cannot be made).
    case refused(reason: String)
    /// Worth another try: 429, 5xx, a timeout, a lost connection, credentials being renewed.
    /// `retryAfter`: what the service asked for, in milliseconds.
    case transient(reason: String, retryAfter: Int64?)
}

/// When each push is attempted: pure, driven by jobs, results and the time, returning what to do.
///
/// Every job is attempted until its push service takes it, refuses it for good, or it expires;
/// transient failures wait 1 s, doubling to 5 minutes, or what `Retry-After` asked (at most an
/// hour). Attempts in flight are bounded per provider and per device, so that a push service that
/// never answers takes up its own share and no other's, and one device cannot take a provider's.
///
/// The work of a turn is what it hands out, drops or moves: jobs ready to go wait in a queue per
/// provider, those waiting out a backoff in a heap by time, those held by their device's bound
/// with their device, so a long queue waiting for a dead provider costs a turn nothing.
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
        var inFlight = false
        /// When the attempt in flight was handed out.
        var sentAt: Int64 = 0
    }

    public let limits: Limits
    private var entries: [PushJobKey: Entry] = [:]
    /// Ready to go, oldest first, per provider.
    private var ready: [PushRegistration.Provider: KeyQueue] = [:]
    /// Waiting out a backoff: when each may go again.
    private var retries = RetryHeap()
    /// Ready but held by their device's bound, until one of its attempts ends.
    private var held: [String: [PushJobKey]] = [:]
    private var inFlightByProvider: [PushRegistration.Provider: Int] = [:]
    private var inFlightByDevice: [String: Int] = [:]
    /// A job came or an attempt ended since the last turn.
    private var changed = false

    public init(limits: Limits = Limits()) { self.limits = limits }

    /// Jobs known (waiting or in flight).
    public var count: Int { entries.count }
    public func inFlight(_ provider: PushRegistration.Provider) -> Int { inFlightByProvider[provider] ?? 0 }
    public var totalInFlight: Int { inFlightByProvider.values.reduce(0, +) }

    /// Takes a job to push; one already known is not taken twice.
    public mutating func add(_ job: PushJob) {
        guard entries[job.key] == nil else { return }
        entries[job.key] = Entry(job: job)
        ready[job.registration.provider, default: KeyQueue()].append(job.key)
        changed = true
    }

    /// Whether ``due(now:isPending:)`` has anything to do.
    public func needsTurn(now: Instant) -> Bool {
        changed || retries.top.map { $0.at <= now.milliseconds } == true
    }

    /// When ``due(now:isPending:)`` has something to do next (nil: not before a job comes or an
    /// attempt ends).
    public var nextWake: Instant? {
        changed ? Instant(milliseconds: 0) : retries.top.map { Instant(milliseconds: $0.at) }
    }

    /// The pushes to attempt now, within the limits, and the ones that expired. `isPending`
    /// says whether the engine still has the job (a `pushed` record, a registration removed, or a
    /// slot moving away ends it): those are dropped as they come up.
    public mutating func due(now: Instant, isPending: (PushJobKey) -> Bool) -> [Step] {
        changed = false
        while let top = retries.top, top.at <= now.milliseconds {
            _ = retries.pop()
            if let entry = entries[top.key], !entry.inFlight {
                ready[entry.job.registration.provider, default: KeyQueue()].append(top.key)
            }
        }
        var steps: [Step] = []
        for provider in PushRegistration.Provider.allCases {
            while inFlight(provider) < limits.perProvider, let key = ready[provider]?.popFirst() {
                guard var entry = entries[key], !entry.inFlight else { continue }
                guard isPending(key) else {
                    entries[key] = nil
                    continue
                }
                if now >= entry.job.expiresAt {
                    entries[key] = nil
                    steps.append(.record(PushRecord(key: key, at: now, outcome: .expired)))
                    continue
                }
                guard inFlightByDevice[key.deviceId, default: 0] < limits.perDevice else {
                    held[key.deviceId, default: []].append(key)
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
        }
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
        // The device's held jobs go back to their queues, ahead of the others.
        for heldKey in (held.removeValue(forKey: key.deviceId) ?? []).reversed() {
            if let heldEntry = entries[heldKey] {
                ready[heldEntry.job.registration.provider, default: KeyQueue()].prepend(heldKey)
            }
        }
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
            entries[key] = entry
            // No later than its expiry, when it is recorded as expired.
            let at = min(now.milliseconds + max(backoff, asked), entry.job.expiresAt.milliseconds)
            retries.push(at: at, key)
            return nil
        }
    }

    /// The wait before attempt `attempt + 1` after a transient failure: 1 s, doubling, at most
    /// 5 minutes.
    public static func backoff(attempt: Int) -> Int64 {
        min(1000 << Int64(min(max(attempt - 1, 0), 20)), 300_000)
    }

    /// `Retry-After` is honoured up to an hour.
    public static let maxRetryAfter: Int64 = 3_600_000
}

/// Keys in order, taken from the front in O(1) amortised.
private struct KeyQueue: Sendable {
    private var items: [PushJobKey] = []
    private var head = 0

    mutating func append(_ key: PushJobKey) { items.append(key) }

    mutating func prepend(_ key: PushJobKey) {
        if head > 0 {
            head -= 1
            items[head] = key
        } else {
            items.insert(key, at: 0)
        }
    }

    mutating func popFirst() -> PushJobKey? {
        guard head < items.count else { return nil }
        defer {
            head += 1
            if head > 1024 && head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            }
        }
        return items[head]
    }
}

/// A binary min-heap of (time, key).
private struct RetryHeap: Sendable {
    private var items: [(at: Int64, key: PushJobKey)] = []

    var top: (at: Int64, key: PushJobKey)? { items.first }

    mutating func push(at: Int64, _ key: PushJobKey) {
        items.append((at, key))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].at < items[parent].at else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (at: Int64, key: PushJobKey)? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let last = items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            guard left < items.count else { break }
            var child = left
            if left + 1 < items.count, items[left + 1].at < items[left].at { child = left + 1 }
            guard items[child].at < items[parent].at else { break }
            items.swapAt(child, parent)
            parent = child
        }
        return last
    }
}
