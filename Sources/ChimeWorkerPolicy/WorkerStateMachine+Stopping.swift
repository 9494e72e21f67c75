import ChimeEngine
import ChimeLog
import ChimeProtocol

/// Stats, metrics, a graceful stop, and the policy's log lines.
extension WorkerStateMachine {
    mutating func maybePublishStats(now: Instant, _ actions: inout [Action]) {
        if reports.metricsDue(now: now, every: policy.metricsInterval) {
            actions.append(.exportMetrics(metrics(now: now)))
        }
        guard isConnected, reports.statsDue(now: now, every: policy.statsInterval) else { return }
        actions.append(
            .publish(
                OutboundMessage(
                    topic: policy.topics.workerStats(policy.workerId),
                    payload: JSON.object(metrics(now: now).statsJSON).bytes,
                    qos: 0,
                    purpose: .stats
                )
            )
        )
    }

    /// Every number the worker reports, now.
    public func metrics(now: Instant) -> WorkerMetrics {
        var notReady: [String] = []
        switch session.state {
        case .down: notReady.append("not connected to the broker")
        case .subscribing: notReady.append("waiting for the broker to grant the command subscription")
        case .refused: notReady.append("the broker refused the command subscription")
        case .serving: break
        }
        if snapshots.isDiverged {
            notReady.append("the journal cannot take writes until a snapshot catches up")
        }
        if lifecycle != .running { notReady.append("stopping") }
        var numbers = WorkerMetrics(
            stats: stats,
            pending: engines.values.reduce(0) { $0 + $1.pendingCount },
            devices: engines.values.reduce(0) { $0 + $1.deviceCount },
            inflight: inflightCount,
            store: snapshots.store,
            connected: isConnected,
            notReady: notReady,
            workerId: policy.workerId,
            partition: policy.partition.description,
            instance: policy.instance,
            version: policy.version,
            startedAt: startedAt,
            at: now
        )
        if policy.slots != nil { numbers.slots = engines.keys.sorted() }
        for p in PushRegistration.Provider.allCases { numbers.pushInFlight[p] = pushes.inFlight(p) }
        numbers.pushQueued = pushes.count
        numbers.unresolvedZones = engines.values.reduce(into: Set<String>()) { $0.formUnion($1.unresolvedZones) }.count
        return numbers
    }

    /// Once nothing is in flight (or nothing can be acknowledged, or time is up): `offline`, then
    /// disconnect. After a takeover the status topic belongs to the other holder of this worker id.
    mutating func maybeFinishStopping(now: Instant, _ actions: inout [Action]) {
        // Pushes in flight are waited for too: their outcomes journaled, they are not made again
        // after the restart.
        guard case .stopping(let deadline, let fatal) = lifecycle,
            (inflightCount == 0 || !isConnected) && pushes.totalInFlight == 0 || now >= deadline
        else { return }
        lifecycle = .draining(fatal: fatal)
        if isConnected && fatal == nil {
            let payload = Self.statusPayload("offline", policy: policy)
            actions.append(
                .publish(
                    OutboundMessage(topic: statusTopic, payload: payload, qos: 1, retain: true, purpose: .offlineStatus)
                )
            )
        }
        session.stopped()
        for engine in engines.values { engine.setConnected(false) }
        actions.append(.disconnect)
    }

    func log(
        _ level: LogLevel,
        _ message: @autoclosure () -> String,
        _ metadata: @autoclosure () -> KeyValuePairs<String, String> = [:],
        into actions: inout [Action]
    ) {
        guard level >= policy.logLevel else { return }
        actions.append(.log(WorkerLog(level, message(), Array(metadata()))))
    }

    func hex(_ code: Int32) -> String { "0x\(String(code, radix: 16))" }
}

/// When the stats and the metrics were last handed out.
struct ReportSchedule {
    private var lastStats: Instant
    private var lastMetrics: Instant?

    /// The first stats are due an interval after `now`; the first metrics at once.
    init(now: Instant) { lastStats = now }

    /// Whether the metrics are due now, every `interval` milliseconds (0: never); if so, they are
    /// handed out now.
    mutating func metricsDue(now: Instant, every interval: Int64) -> Bool {
        guard interval > 0, lastMetrics.map({ now.milliseconds - $0.milliseconds >= interval }) ?? true else {
            return false
        }
        lastMetrics = now
        return true
    }

    /// The same for the stats publication; the first comes an interval after start.
    mutating func statsDue(now: Instant, every interval: Int64) -> Bool {
        guard interval > 0, now.milliseconds - lastStats.milliseconds >= interval else { return false }
        lastStats = now
        return true
    }
}
