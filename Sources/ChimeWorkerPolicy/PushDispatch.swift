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
/// hour). Attempts in flight are bounded per provider, and per device and provider, so that a push
/// service that never answers takes up its own share and no other's, and one device cannot take a
/// provider's. A job that waits (for its provider, its device, or a retry) expires at its time.
///
/// The work of a turn is what it hands out, drops, expires or moves: jobs ready to go wait in a
/// queue per provider, those waiting out a backoff in a heap by time, those held by their device's
/// bound in a queue of the device's, and every expiry in a heap, so a long queue waiting for a dead
/// provider costs a turn nothing.
public struct PushDispatch: Sendable {
    public struct Limits: Hashable, Sendable {
        /// Attempts in flight per provider (`--push-inflight`).
        public var perProvider: Int
        /// Attempts in flight per device and provider.
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
    private var retries = TimeHeap<PushJobKey>()
    /// When each job not in flight expires (an entry whose job went or is in flight is passed over).
    private var expiries = TimeHeap<PushJobKey>()
    /// Ready but held by their device's bound, until one of its attempts to the provider ends.
    private var held: [DeviceProvider: KeyQueue] = [:]
    private var inFlightByProvider: [PushRegistration.Provider: Int] = [:]
    private var inFlightByDevice: [DeviceProvider: Int] = [:]

    private struct DeviceProvider: Hashable, Sendable {
        var deviceId: String
        var provider: PushRegistration.Provider

        init(_ key: PushJobKey, _ provider: PushRegistration.Provider) {
            deviceId = key.deviceId
            self.provider = provider
        }
    }
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
        expiries.push(at: job.expiresAt.milliseconds, job.key)
        changed = true
    }

    /// Whether ``due(now:isPending:)`` has anything to do.
    public func needsTurn(now: Instant) -> Bool {
        changed || (nextWake.map { $0 <= now } ?? false)
    }

    /// When ``due(now:isPending:)`` has something to do next (nil: not before a job comes or an
    /// attempt ends).
    public var nextWake: Instant? {
        // Asked every turn of the loop: no array, no allocation.
        if changed { return Instant(milliseconds: 0) }
        switch (retries.top?.at, expiries.top?.at) {
        case (let a?, let b?): return Instant(milliseconds: min(a, b))
        case (let a?, nil), (nil, let a?): return Instant(milliseconds: a)
        case (nil, nil): return nil
        }
    }

    /// ``due(now:current:)`` for jobs that do not change while they wait.
    public mutating func due(now: Instant, isPending: (PushJobKey) -> Bool) -> [Step] {
        due(now: now) { key, job in isPending(key) ? job : nil }
    }

    /// The pushes to attempt now, within the limits, and the ones that expired. `current` gives
    /// the job as the engine holds it now (its registration may have been replaced under its id),
    /// or nil when the engine no longer has it (a `pushed` record, a registration removed, or a
    /// slot moving away ends it): those are dropped as they come up.
    public mutating func due(now: Instant, current: (PushJobKey, PushJob) -> PushJob?) -> [Step] {
        changed = false
        var steps: [Step] = []
        // Whatever waits past its expiry ends now, wherever it waits.
        while let top = expiries.top, top.at <= now.milliseconds {
            _ = expiries.pop()
            guard let entry = entries[top.key], !entry.inFlight, now >= entry.job.expiresAt else { continue }
            entries[top.key] = nil
            if current(top.key, entry.job) != nil {
                steps.append(.record(PushRecord(key: top.key, at: now, outcome: .expired)))
            }
        }
        while let top = retries.top, top.at <= now.milliseconds {
            _ = retries.pop()
            if let entry = entries[top.key], !entry.inFlight {
                ready[entry.job.registration.provider, default: KeyQueue()].append(top.key)
            }
        }
        for provider in PushRegistration.Provider.allCases {
            while inFlight(provider) < limits.perProvider, let key = ready[provider]?.popFirst() {
                let device = DeviceProvider(key, provider)
                guard var entry = entries[key], !entry.inFlight, let job = current(key, entry.job),
                    now < entry.job.expiresAt
                else {
                    if let gone = entries[key], !gone.inFlight {
                        entries[key] = nil
                        if current(key, gone.job) != nil {
                            steps.append(.record(PushRecord(key: key, at: now, outcome: .expired)))
                        }
                    }
                    // A job that had room (released from its device's held ones) and went: the
                    // room goes to the next held one.
                    release(device)
                    continue
                }
                guard inFlightByDevice[device, default: 0] < limits.perDevice else {
                    held[device, default: KeyQueue()].append(key)
                    continue
                }
                entry.job = job
                entry.inFlight = true
                entry.sentAt = now.milliseconds
                entry.attempts += 1
                entries[key] = entry
                inFlightByProvider[provider, default: 0] += 1
                inFlightByDevice[device, default: 0] += 1
                steps.append(.send(entry.job, attempt: entry.attempts))
            }
        }
        return steps
    }

    /// The registration the attempt in flight for `key` was made to.
    public func attemptRegistration(_ key: PushJobKey) -> PushRegistration? {
        guard let entry = entries[key], entry.inFlight else { return nil }
        return entry.job.registration
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
        let device = DeviceProvider(key, provider)
        inFlightByProvider[provider, default: 1] -= 1
        inFlightByDevice[device, default: 1] -= 1
        if inFlightByDevice[device] == 0 { inFlightByDevice[device] = nil }
        // The room this attempt leaves goes to the device's oldest held job, ahead of the others.
        release(device)
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
            retries.push(at: now.milliseconds + max(backoff, asked), key)
            expiries.push(at: entry.job.expiresAt.milliseconds, key)
            return nil
        }
    }

    /// Moves the device's oldest held job to the front of its provider's queue, if the device has
    /// room for it.
    private mutating func release(_ device: DeviceProvider) {
        guard inFlightByDevice[device, default: 0] < limits.perDevice, let next = held[device]?.popFirst() else {
            return
        }
        if held[device]?.isEmpty == true { held[device] = nil }
        ready[device.provider, default: KeyQueue()].prepend(next)
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

    var isEmpty: Bool { head >= items.count }

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
