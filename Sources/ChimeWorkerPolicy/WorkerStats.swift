import ChimeEngine
import ChimeProtocol

/// A histogram of durations over fixed millisecond buckets, with quantiles read from the
/// buckets. Values are kept in microseconds, so that sub-millisecond syncs add up.
public struct Histogram: Hashable, Sendable {
    /// Upper bounds of the buckets, in milliseconds; a last bucket takes everything above.
    public static let bounds: [Int64] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 60000]
    public private(set) var counts = [Int](repeating: 0, count: Histogram.bounds.count + 1)
    public private(set) var total = 0
    /// The largest value and the sum of all, in microseconds.
    public private(set) var maximum: Int64 = 0
    public private(set) var sum: Int64 = 0

    mutating func record(microseconds: Int64) {
        let value = max(0, microseconds)
        let index = Histogram.bounds.firstIndex { value <= $0 * 1000 } ?? Histogram.bounds.count
        counts[index] += 1
        total += 1
        sum += value
        maximum = max(maximum, value)
    }

    mutating func record(_ duration: Duration) {
        record(
            microseconds: duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        )
    }

    /// The largest value in whole milliseconds, as the stats show it.
    public var maximumMilliseconds: Int64 { maximum / 1000 }

    /// Quantile `q` (0...1) in milliseconds: the upper bound of the bucket holding it (an
    /// over-estimate by at most one bucket), or the largest value when that is smaller, so that
    /// no quantile exceeds ``maximumMilliseconds`` (fsync p99 50 ms beside max 45 ms was the
    /// bucket `le50`, not a 50 ms sync).
    public func quantile(_ q: Double) -> Int64? {
        guard total > 0 else { return nil }
        let rank = Int((Double(total) * q).rounded(.up))
        var seen = 0
        for (i, n) in counts.enumerated() {
            seen += n
            if seen >= max(rank, 1), i < Histogram.bounds.count {
                return min(Histogram.bounds[i], maximumMilliseconds)
            }
        }
        return maximumMilliseconds
    }

    var json: JSONObject {
        var buckets = JSONObject()
        for (i, n) in counts.enumerated() where n > 0 {
            buckets.append(i < Histogram.bounds.count ? "le\(Histogram.bounds[i])" : "inf", .int(Int64(n)))
        }
        return [
            "count": .int(Int64(total)),
            "p50": quantile(0.5).map { .int($0) } ?? .null,
            "p99": quantile(0.99).map { .int($0) } ?? .null,
            "max": .int(maximumMilliseconds),
            "mean": total > 0 ? .double((Double(sum) / Double(total) / 100).rounded() / 10) : .null,
            "buckets": .object(buckets),
        ]
    }
}

/// Counters the worker publishes on `P/$worker/{id}/stats`. Owned by the loop thread; counts
/// are totals since start, so rates come from two samples.
public struct WorkerStats: Hashable, Sendable {
    /// Commands received, by op (`unknown` for an op that does not exist).
    public var commands: [String: Int] {
        var byName: [String: Int] = [:]
        for (i, n) in commandCounts.enumerated() where n > 0 {
            byName[i < Operation.allCases.count ? Operation.allCases[i].rawValue : "unknown"] = n
        }
        return byName
    }
    /// ``commands`` by ``Operation``'s order, then `unknown`: counted without hashing the op's name.
    private var commandCounts = [Int](repeating: 0, count: Operation.allCases.count + 1)
    /// Push attempts and outcomes.
    public var push = PushStats()

    mutating func countCommand(_ op: Operation?) {
        commandCounts[op.flatMap { Operation.allCases.firstIndex(of: $0) } ?? Operation.allCases.count] += 1
    }
    /// Commands answered with an error, by error code.
    public internal(set) var errorsByCode: [String: Int] = [:]
    public internal(set) var invalidTopics = 0
    public internal(set) var deliveries = 0
    public internal(set) var lateDeliveries = 0
    public internal(set) var reconnects = 0
    /// Deliveries the broker refused (PUBACK reason 0x80 or more); each stays due and is retried.
    public internal(set) var refusedDeliveries = 0
    /// SUBACKs that refused the command subscription.
    public internal(set) var subscriptionRefusals = 0
    /// Times the broker said another client took our session (MQTT 5 reason 0x8E).
    public internal(set) var takeovers = 0
    /// Commands recognised as a redelivery of one already applied, and not applied again.
    public internal(set) var duplicates = 0
    /// Slot mode: commands for slots this worker does not serve now (another worker's, or one in
    /// hand-over), left to their owner.
    public internal(set) var commandsForOtherSlots = 0
    /// Routing by slot: commands received through the shared subscription for a slot served
    /// elsewhere, forwarded to its owner's topic; and forwards the broker refused (its ACL).
    public internal(set) var commandsForwarded = 0
    public internal(set) var forwardsRefused = 0
    /// Slot mode: slots taken and loaded, and slots given up (handed over, lost or expired).
    public internal(set) var slotsLoaded = 0
    public internal(set) var slotsDropped = 0
    /// Slot mode: round trips of lease renewals to the store; from taking a slot's lease to serving
    /// it (reading its journal included); from starting to hand a slot over to releasing its lease.
    public internal(set) var leaseRenew = Histogram()
    public internal(set) var slotLoad = Histogram()
    public internal(set) var handover = Histogram()
    /// Zones whose rules changed (a tzdata upgrade), noticed on SIGHUP, by the periodic check or at start.
    public internal(set) var zoneRulesChanges = 0
    /// From when a delivery was due to when it was published, for those whose lateness is the
    /// worker's (``Lateness/worker``); ``lateDeliveries`` counts those a second or more late.
    public internal(set) var lateness = Histogram()
    /// The same for deliveries late by design or by an outage (``Lateness/isExpected``): a
    /// one-shot scheduled in the past, a catch-up after chimed or the broker was down, a delivery
    /// held by quiet hours.
    public internal(set) var expectedLateness = Histogram()
    /// How long each journal sync took.
    public internal(set) var fsync = Histogram()
    /// How long each turn of the loop took (``WorkerStateMachine/ActionResult/stepTook(_:)``): the
    /// longest the engine thread was busy at once, so the longest a due delivery could wait for it.
    public internal(set) var loopStep = Histogram()

    /// Commands answered with an error.
    public var errors: Int { errorsByCode.values.reduce(0, +) }

    public var json: JSONObject {
        func counts(_ d: [String: Int]) -> JSON {
            var o = JSONObject()
            for (k, n) in d.sorted(by: { $0.key < $1.key }) { o.append(k, .int(Int64(n))) }
            return .object(o)
        }
        return [
            "commands": counts(commands),
            "errors": .int(Int64(errors)),
            "errorsByCode": counts(errorsByCode),
            "invalidTopics": .int(Int64(invalidTopics)),
            "deliveries": .int(Int64(deliveries)),
            "lateDeliveries": .int(Int64(lateDeliveries)),
            "lateness": .object(lateness.json),
            "expectedLateness": .object(expectedLateness.json),
            "fsync": .object(fsync.json),
            "loopStep": .object(loopStep.json),
            "reconnects": .int(Int64(reconnects)),
            "refusedDeliveries": .int(Int64(refusedDeliveries)),
            "subscriptionRefusals": .int(Int64(subscriptionRefusals)),
            "rateLimited": .int(Int64(errorsByCode[ChimeError.Code.rateLimited.wireName] ?? 0)),
            "takeovers": .int(Int64(takeovers)),
            "duplicates": .int(Int64(duplicates)),
            "zoneRulesChanges": .int(Int64(zoneRulesChanges)),
        ]
    }
}
