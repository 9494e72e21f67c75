import ChimeEngine
import ChimeProtocol

/// Every number the worker reports, at one moment: the source of both the stats message on
/// `P/$worker/{id}/stats` (``statsJSON``) and the Prometheus endpoint (``prometheusText``).
public struct WorkerMetrics: Hashable, Sendable {
    public var stats: WorkerStats
    public var pending: Int
    public var devices: Int
    public var inflight: Int
    public var store: StoreStatus
    public var connected: Bool
    /// Why the worker does not serve commands now; empty when it does.
    public var notReady: [String]
    public var workerId: String
    public var partition: String
    public var instance: String
    public var version: String
    public var startedAt: Instant
    public var at: Instant
    /// Slot mode: the slots served now, ascending; nil without slots.
    public var slots: [Int]? = nil
    /// Zones in use that the zone database does not have (``Engine/unresolvedZones``).
    public var unresolvedZones = 0
    /// Push attempts in flight, by provider, and pushes known to the dispatch (waiting or in flight).
    public var pushInFlight: [PushRegistration.Provider: Int] = [:]
    public var pushQueued = 0

    public var ready: Bool { notReady.isEmpty }

    /// The stats message (PROTOCOL.md, "Worker status and stats").
    public var statsJSON: JSONObject {
        var o = stats.json
        o["workerId"] = .string(workerId)
        o["pending"] = .int(Int64(pending))
        o["devices"] = .int(Int64(devices))
        o["inflight"] = .int(Int64(inflight))
        o["journalBytesSinceSnapshot"] = .int(Int64(store.bytesSinceSnapshot))
        o["journalSequence"] = .int(Int64(store.lastSequence))
        o["at"] = .string(at.rfc3339())
        if let slots {
            o["slots"] = .array(slots.map { .int(Int64($0)) })
            o["commandsForOtherSlots"] = .int(Int64(stats.commandsForOtherSlots))
            o["commandsForwarded"] = .int(Int64(stats.commandsForwarded))
            o["forwardsRefused"] = .int(Int64(stats.forwardsRefused))
            o["slotsLoaded"] = .int(Int64(stats.slotsLoaded))
            o["slotsDropped"] = .int(Int64(stats.slotsDropped))
            o["leaseRenew"] = .object(stats.leaseRenew.json)
            o["slotLoad"] = .object(stats.slotLoad.json)
            o["handover"] = .object(stats.handover.json)
        }
        return o
    }

    /// The metric families ``prometheusText`` exposes, with their type: what dashboards and
    /// alerting rules may name (docs/production.md, "Metrics and health").
    public static let families: [(name: String, type: String, help: String)] = [
        ("chime_commands_total", "counter", "Commands received, by op (unknown for an op that does not exist)."),
        ("chime_command_errors_total", "counter", "Commands answered with an error, by error code."),
        ("chime_duplicate_commands_total", "counter", "Commands received again and not applied again."),
        ("chime_invalid_topics_total", "counter", "Messages on topics that are not commands."),
        ("chime_deliveries_total", "counter", "Deliveries the broker acknowledged."),
        (
            "chime_late_deliveries_total", "counter",
            "Deliveries the worker published a second or more after they were due (expected lateness aside)."
        ),
        ("chime_refused_deliveries_total", "counter", "Deliveries the broker refused; each stays due."),
        ("chime_subscription_refusals_total", "counter", "Command subscriptions the broker refused."),
        ("chime_broker_connections_total", "counter", "Connections to the broker, the first one included."),
        ("chime_takeovers_total", "counter", "Times another client took this worker's session."),
        ("chime_zone_rules_changes_total", "counter", "Zones whose rules changed (a tzdata upgrade) while in use."),
        (
            "chime_delivery_lateness_seconds", "histogram",
            "From when a delivery was due to when it was published, for lateness the running worker caused."
        ),
        (
            "chime_delivery_expected_lateness_seconds", "histogram",
            "The same for lateness it did not cause: a date in the past, a catch-up after an outage, quiet hours."
        ),
        ("chime_journal_sync_seconds", "histogram", "How long each journal sync took."),
        (
            "chime_loop_step_seconds", "histogram",
            "How long each turn of the worker's loop took: the longest the engine was busy at once."
        ),
        ("chime_pending_notifications", "gauge", "Notifications waiting to fire."),
        ("chime_devices", "gauge", "Devices with state."),
        ("chime_deliveries_in_flight", "gauge", "Deliveries published and not yet acknowledged."),
        ("chime_journal_unsnapshotted_bytes", "gauge", "Journal bytes written since the newest snapshot."),
        ("chime_journal_sequence", "gauge", "Sequence number of the last journal record."),
        (
            "chime_unresolved_zones", "gauge",
            "Zones in use that the zone database lacks: their wall-clock times are read in UTC."
        ),
        ("chime_broker_connected", "gauge", "1 while connected to the broker."),
        ("chime_ready", "gauge", "1 while serving commands: connected, subscribed, journal writable."),
        ("chime_start_time_seconds", "gauge", "When this process started, in seconds since the epoch."),
        ("chime_worker_info", "gauge", "The worker's id, partition, instance and version, as labels."),
    ]

    /// The push families (PROTOCOL.md section 3.11), each with a sample per provider.
    public static let pushFamilies: [(name: String, type: String, help: String)] = [
        ("chime_push_attempts_total", "counter", "Push attempts handed to the HTTP client, by provider."),
        ("chime_push_retries_total", "counter", "Push attempts that were not the first of their push."),
        ("chime_push_transient_failures_total", "counter", "Push attempts to be tried again: 429, 5xx, timeouts."),
        (
            "chime_pushes_total", "counter",
            "Pushes ended, by provider and outcome (accepted, refused, unregistered, expired)."
        ),
        (
            "chime_push_failures_total", "counter",
            "Push attempts not taken, by provider and reason (http_410, timeout, BadDeviceToken, ...)."
        ),
        ("chime_push_in_flight", "gauge", "Push attempts waiting for their push service's answer."),
        ("chime_push_queued", "gauge", "Pushes not yet ended: waiting to be tried, or in flight."),
        ("chime_push_seconds", "histogram", "From a push attempt's start to its push service's answer."),
    ]

    /// The families exposed in slot mode (`--slots`) only, after the others.
    public static let slotFamilies: [(name: String, type: String, help: String)] = [
        ("chime_slots_served", "gauge", "Slots this worker serves now."),
        ("chime_slot_loads_total", "counter", "Slots taken and loaded."),
        ("chime_slot_drops_total", "counter", "Slots given up: handed over, lost or expired."),
        (
            "chime_commands_for_other_slots_total", "counter",
            "Commands left to another worker's slot or one in hand-over."
        ),
        (
            "chime_commands_forwarded_total", "counter",
            "Routing by slot: commands forwarded to the owner of their slot."
        ),
        ("chime_forwards_refused_total", "counter", "Routing by slot: forwarded commands the broker refused."),
        ("chime_lease_renew_seconds", "histogram", "Round trips of lease renewals to the store."),
        ("chime_slot_load_seconds", "histogram", "From taking a slot's lease to serving it."),
        ("chime_slot_handover_seconds", "histogram", "From starting to hand a slot over to releasing its lease."),
    ]

    /// The Prometheus text exposition format (version 0.0.4).
    public var prometheusText: String {
        var out = PrometheusWriter()
        // Each family's header comes right before its samples.
        func family(_ name: String) {
            out.header((Self.families + Self.pushFamilies + Self.slotFamilies).first { $0.name == name }!)
        }
        family("chime_commands_total")
        for (op, n) in stats.commands.sorted(by: { $0.key < $1.key }) {
            out.sample("chime_commands_total", ["op": op], Double(n))
        }
        family("chime_command_errors_total")
        for (code, n) in stats.errorsByCode.sorted(by: { $0.key < $1.key }) {
            out.sample("chime_command_errors_total", ["code": code], Double(n))
        }
        let counters: [(String, Int)] = [
            ("chime_duplicate_commands_total", stats.duplicates),
            ("chime_invalid_topics_total", stats.invalidTopics),
            ("chime_deliveries_total", stats.deliveries),
            ("chime_late_deliveries_total", stats.lateDeliveries),
            ("chime_refused_deliveries_total", stats.refusedDeliveries),
            ("chime_subscription_refusals_total", stats.subscriptionRefusals),
            ("chime_broker_connections_total", stats.reconnects),
            ("chime_takeovers_total", stats.takeovers),
            ("chime_zone_rules_changes_total", stats.zoneRulesChanges),
        ]
        for (name, value) in counters {
            family(name)
            out.sample(name, [:], Double(value))
        }
        family("chime_delivery_lateness_seconds")
        out.histogram("chime_delivery_lateness_seconds", stats.lateness)
        family("chime_delivery_expected_lateness_seconds")
        out.histogram("chime_delivery_expected_lateness_seconds", stats.expectedLateness)
        family("chime_journal_sync_seconds")
        out.histogram("chime_journal_sync_seconds", stats.fsync)
        family("chime_loop_step_seconds")
        out.histogram("chime_loop_step_seconds", stats.loopStep)
        let gauges: [(String, Double)] = [
            ("chime_pending_notifications", Double(pending)),
            ("chime_devices", Double(devices)),
            ("chime_deliveries_in_flight", Double(inflight)),
            ("chime_journal_unsnapshotted_bytes", Double(store.bytesSinceSnapshot)),
            ("chime_journal_sequence", Double(store.lastSequence)),
            ("chime_unresolved_zones", Double(unresolvedZones)),
            ("chime_broker_connected", connected ? 1 : 0),
            ("chime_ready", ready ? 1 : 0),
            ("chime_start_time_seconds", Double(startedAt.milliseconds) / 1000),
        ]
        for (name, value) in gauges {
            family(name)
            out.sample(name, [:], value)
        }
        family("chime_worker_info")
        out.sample(
            "chime_worker_info",
            ["worker_id": workerId, "partition": partition, "instance": instance, "version": version],
            1
        )
        let providers = PushRegistration.Provider.allCases
        for (name, counts) in [
            ("chime_push_attempts_total", stats.push.attempts), ("chime_push_retries_total", stats.push.retries),
            ("chime_push_transient_failures_total", stats.push.transient),
        ] {
            family(name)
            for p in providers { out.sample(name, ["provider": p.rawValue], Double(counts[p] ?? 0)) }
        }
        family("chime_pushes_total")
        for p in providers {
            for outcome in PushOutcome.allCases {
                let n = stats.push.ended[PushStats.Key(provider: p, outcome: outcome)] ?? 0
                out.sample("chime_pushes_total", ["provider": p.rawValue, "outcome": outcome.rawValue], Double(n))
            }
        }
        family("chime_push_failures_total")
        let failures = stats.push.failures.sorted {
            ($0.key.provider.rawValue, $0.key.reason) < ($1.key.provider.rawValue, $1.key.reason)
        }
        for (key, n) in failures {
            let labels: KeyValuePairs = ["provider": key.provider.rawValue, "reason": key.reason]
            out.sample("chime_push_failures_total", labels, Double(n))
        }
        family("chime_push_in_flight")
        for p in providers {
            out.sample("chime_push_in_flight", ["provider": p.rawValue], Double(pushInFlight[p] ?? 0))
        }
        family("chime_push_queued")
        out.sample("chime_push_queued", [:], Double(pushQueued))
        family("chime_push_seconds")
        for p in providers {
            out.histogram(
                "chime_push_seconds",
                stats.push.latency[p] ?? Histogram(),
                labels: [("provider", p.rawValue)]
            )
        }
        if let slots {
            family("chime_slots_served")
            out.sample("chime_slots_served", [:], Double(slots.count))
            for (name, value) in [
                ("chime_slot_loads_total", stats.slotsLoaded), ("chime_slot_drops_total", stats.slotsDropped),
                ("chime_commands_for_other_slots_total", stats.commandsForOtherSlots),
                ("chime_commands_forwarded_total", stats.commandsForwarded),
                ("chime_forwards_refused_total", stats.forwardsRefused),
            ] {
                family(name)
                out.sample(name, [:], Double(value))
            }
            for (name, histogram) in [
                ("chime_lease_renew_seconds", stats.leaseRenew), ("chime_slot_load_seconds", stats.slotLoad),
                ("chime_slot_handover_seconds", stats.handover),
            ] {
                family(name)
                out.histogram(name, histogram)
            }
        }
        return out.text
    }
}

/// Writes samples in the Prometheus text format: `# HELP` and `# TYPE` lines, escaped label
/// values, cumulative histogram buckets in seconds.
struct PrometheusWriter {
    var text = ""

    mutating func header(_ family: (name: String, type: String, help: String)) {
        text += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.type)\n"
    }

    mutating func sample(
        _ name: String,
        _ labels: KeyValuePairs<String, String>,
        _ value: Double,
        also extra: [(String, String)] = []
    ) {
        text += name
        let all = extra + labels.map { ($0.key, $0.value) }
        if !all.isEmpty {
            text += "{" + all.map { "\($0.0)=\"\(Self.escape($0.1))\"" }.joined(separator: ",") + "}"
        }
        text += " \(Self.number(value))\n"
    }

    /// A histogram as one in seconds: the buckets' upper bounds become `le`.
    mutating func histogram(_ name: String, _ h: Histogram, labels: [(String, String)] = []) {
        var cumulative = 0
        for (i, bound) in Histogram.bounds.enumerated() {
            cumulative += h.counts[i]
            sample(name + "_bucket", ["le": Self.number(Double(bound) / 1000)], Double(cumulative), also: labels)
        }
        sample(name + "_bucket", ["le": "+Inf"], Double(h.total), also: labels)
        sample(name + "_sum", [:], Double(h.sum) / 1_000_000, also: labels)
        sample(name + "_count", [:], Double(h.total), also: labels)
    }

    static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    static func escape(_ value: String) -> String {
        var out = ""
        for c in value {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }
}
