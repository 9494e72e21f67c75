import ChimeProtocol
import ChimeTime

/// What the fleet page shows of one worker: its retained status (`P/$worker/{id}/status`,
/// PROTOCOL.md section 1) and its latest stats message (section 7, "Worker"), with rates from the
/// stats message before it when there is one.
///
/// Every number comes from a message anyone who may publish on those topics can write, so none is
/// trusted: sums and differences clamp to `Int64`'s range rather than trap.
public struct FleetWorker: Sendable, Hashable {
    /// The worker's id, from the topic its status came on (not from the payload, which could name
    /// another worker).
    public var id: String
    /// `online`, `offline`, or what the status said.
    public var state: String
    public var isOnline: Bool { state == "online" }
    /// `k/N`, without slots.
    public var partition: String?
    /// With slots: S, and the slots served as ranges (`"0-3,7"`, `""` for none).
    public var slotCount: Int64?
    public var serving: String?
    /// The worker's version, when its status or stats carry one.
    public var version: String?
    public var startedAt: Instant?
    /// When the stats were taken (their `at`).
    public var statsAt: Instant?
    public var pending: Int64?
    public var devices: Int64?
    /// Totals since the worker started: commands of every op, deliveries.
    public var commands: Int64?
    public var deliveries: Int64?
    public var lateDeliveries: Int64?
    public var refusedDeliveries: Int64?
    public var takeovers: Int64?
    /// Per second between the previous stats message and the latest; nil without two of them.
    public var commandsPerSecond: Double?
    public var deliveriesPerSecond: Double?
    public var lateness: HistogramSummary?
    public var loopStep: HistogramSummary?

    /// - Parameters:
    ///   - id: the worker's id in the topics its status and stats came on (`P/$worker/{id}/...`).
    ///   - status: the worker's retained status.
    ///   - stats: its latest stats message, nil when none was heard.
    ///   - previousStats: the one before, for rates.
    public init(id: String, status: JSONObject, stats: JSONObject? = nil, previousStats: JSONObject? = nil) {
        self.id = id
        state = status["state"]?.stringValue ?? "unknown"
        partition = status["partition"]?.stringValue
        slotCount = status["slots"].flatMap(HistogramSummary.integer)
        serving = status["serving"]?.stringValue
        version = status["version"]?.stringValue ?? stats?["version"]?.stringValue
        startedAt = status["startedAt"]?.stringValue.flatMap(ConsoleTime.instant)
        guard let stats else { return }
        statsAt = stats["at"]?.stringValue.flatMap(ConsoleTime.instant)
        func integer(_ key: String) -> Int64? { stats[key].flatMap(HistogramSummary.integer) }
        pending = integer("pending")
        devices = integer("devices")
        commands = Self.commandTotal(stats)
        deliveries = integer("deliveries")
        lateDeliveries = integer("lateDeliveries")
        refusedDeliveries = integer("refusedDeliveries")
        takeovers = integer("takeovers")
        lateness = stats["lateness"]?.objectValue.map(HistogramSummary.init(json:))
        loopStep = stats["loopStep"]?.objectValue.map(HistogramSummary.init(json:))
        guard let previousStats, let statsAt,
            let before = previousStats["at"]?.stringValue.flatMap(ConsoleTime.instant),
            statsAt.milliseconds.saturatingSubtract(before.milliseconds) >= 100
        else { return }
        let seconds = Double(statsAt.milliseconds.saturatingSubtract(before.milliseconds)) / 1000
        func rate(_ now: Int64?, _ then: Int64?) -> Double? {
            guard let now, let then, now >= then else { return nil }  // a restart resets the counters
            return Double(now.saturatingSubtract(then)) / seconds
        }
        commandsPerSecond = rate(commands, Self.commandTotal(previousStats))
        deliveriesPerSecond = rate(deliveries, previousStats["deliveries"].flatMap(HistogramSummary.integer))
    }

    /// The sum of the `commands` object's counts by op, clamped to `Int64`'s range.
    static func commandTotal(_ stats: JSONObject) -> Int64? {
        guard case .object(let byOp)? = stats["commands"] else { return nil }
        return byOp.map { HistogramSummary.integer($0.value) ?? 0 }.saturatingSum()
    }

    /// What it serves: `partition 0/1`, `slots 0-3,7 of 16`, `none of 16 slots`.
    public var serves: String {
        if let slotCount {
            guard let serving, !serving.isEmpty else { return "none of \(slotCount) slots" }
            return "slots \(serving) of \(slotCount)"
        }
        return partition.map { "partition \($0)" } ?? "unknown"
    }
}
