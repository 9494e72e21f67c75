import ChimeEngine
import ChimeLog
import ChimeProtocol

/// Push delivery (PROTOCOL.md section 3.11): the engines' outboxes handed to ``PushDispatch``,
/// its attempts carried out off the loop, and how each push ended journaled as a `pushed` record.
extension WorkerStateMachine {
    /// Takes the jobs the engines put in outboxes since the last turn, and starts what is due.
    mutating func pushTurn(now: Instant, _ actions: inout [Action]) {
        for engine in engines.values {
            for job in engine.takeNewPushJobs() { pushes.add(job) }
        }
        guard lifecycle == .running, pushes.needsTurn(now: now) else { return }
        let engines = self.engines
        let policy = self.policy
        // As the engine holds it now: a registration replaced since goes as it is now.
        let steps = pushes.due(now: now) { key, _ in engines[policy.slot(of: key.deviceId)]?.pendingJob(key) }
        for step in steps {
            switch step {
            case .send(let job, let attempt):
                stats.push.attempts[job.registration.provider, default: 0] += 1
                if attempt > 1 { stats.push.retries[job.registration.provider, default: 0] += 1 }
                actions.append(.sendPush(job, attempt: attempt))
            case .record(let record):
                ended(record, provider: nil, &actions)
            }
        }
    }

    mutating func pushFinished(_ key: PushJobKey, _ answer: PushAttemptResult, now: Instant, _ actions: inout [Action])
    {
        var result = answer
        // Made to a registration replaced since under its id: the answer is about the old one.
        if case .unregistered = answer, let used = pushes.attemptRegistration(key),
            let job = engines[slot(of: key.deviceId)]?.pendingJob(key), job.registration != used
        {
            result = .transient(reason: "the registration was replaced while the push was made", retryAfter: nil)
        }
        let provider = PushRegistration.Provider(rawValue: String(key.registration.prefix { $0 != "-" }))
        if let provider, let ms = pushes.elapsed(key, now: now) {
            stats.push.latency[provider, default: Histogram()].record(microseconds: ms * 1000)
        }
        if let provider { stats.push.count(result, provider) }
        if case .transient(let reason, _) = result {
            // At debug: a provider down makes one a push a minute; the metrics and the alert say it.
            log(.debug, "push not taken; it will be tried again", ["push": "\(key)", "reason": reason], into: &actions)
        }
        guard let record = pushes.finished(key, result, now: now) else { return }
        // Ended meanwhile (its registration removed, its slot gone): it has its outcome already.
        guard engines[slot(of: key.deviceId)]?.isPending(key) == true else { return }
        ended(record, provider: provider, &actions)
    }

    /// Journals how a push ended (the engine applies it once appended).
    private mutating func ended(_ pushed: PushRecord, provider: PushRegistration.Provider?, _ actions: inout [Action]) {
        let provider =
            provider ?? PushRegistration.Provider(rawValue: String(pushed.key.registration.prefix { $0 != "-" }))
        if let provider {
            stats.push.ended[PushStats.Key(provider: provider, outcome: pushed.outcome), default: 0] += 1
        }
        if pushed.outcome != .accepted {
            log(
                pushed.outcome == .unregistered ? .notice : .warning,
                pushed.outcome == .unregistered ? "push registration removed" : "push not delivered",
                ["push": "\(pushed.key)", "outcome": pushed.outcome.rawValue, "reason": pushed.reason ?? ""],
                into: &actions
            )
        }
        record(.pushed(pushed), slot: slot(of: pushed.key.deviceId), &actions)
    }
}

/// Push counters, per provider, for the metrics.
public struct PushStats: Hashable, Sendable {
    public struct Key: Hashable, Sendable {
        public var provider: PushRegistration.Provider
        public var outcome: PushOutcome
    }
    /// Attempts made, retries among them, and transient failures.
    public var attempts: [PushRegistration.Provider: Int] = [:]
    public var retries: [PushRegistration.Provider: Int] = [:]
    public var transient: [PushRegistration.Provider: Int] = [:]
    /// Pushes ended, by outcome.
    public var ended: [Key: Int] = [:]
    /// How long attempts took, from being handed out to their answer.
    public var latency: [PushRegistration.Provider: Histogram] = [:]
    /// Attempts not taken, by provider and reason (``reasonLabel(_:)``).
    public var failures: [FailureKey: Int] = [:]

    public struct FailureKey: Hashable, Sendable {
        public var provider: PushRegistration.Provider
        public var reason: String
    }

    /// Distinct reasons kept per provider; the rest count as `other`.
    static let maxReasons = 64

    public init() {}

    mutating func count(_ result: PushAttemptResult, _ provider: PushRegistration.Provider) {
        let reason: String
        switch result {
        case .accepted: return
        case .transient(let r, _):
            transient[provider, default: 0] += 1
            reason = r
        case .refused(let r), .unregistered(let r): reason = r
        }
        var key = FailureKey(provider: provider, reason: Self.reasonLabel(reason))
        if failures[key] == nil, failures.keys.filter({ $0.provider == provider }).count >= Self.maxReasons {
            key.reason = "other"
        }
        failures[key, default: 0] += 1
    }

    /// A metric label for a reason: `http_410` for `HTTP 410`, the word before a colon for the HTTP
    /// client's failures (`timeout`), a service's own reason as it is (`BadDeviceToken`,
    /// `UNREGISTERED`); `other` for anything longer than 40 characters or with other characters.
    static func reasonLabel(_ reason: String) -> String {
        if reason.hasPrefix("HTTP "), reason.count == 8 { return "http_" + reason.dropFirst(5) }
        let word = reason.prefix { $0 != ":" }
        let plain = word.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        guard !word.isEmpty, word.count <= 40, plain else { return "other" }
        return String(word)
    }
}
