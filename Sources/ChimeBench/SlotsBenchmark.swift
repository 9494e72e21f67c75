import ChimeCore
import ChimeHarness
import ChimeMQTT
import Foundation
import Synchronization

/// `chime-bench system --only slots`: slot mode (docs/production.md, "Slots") on one PostgreSQL (fsync on):
/// ingest and burst with 1, 2 and 3 workers, then, with three, the time from `kill -9` of a
/// worker to the first command answered for one of its slots, and the same for a graceful stop
/// (SIGTERM: its slots handed over). Every worker shares the machine with the broker, the load
/// generator and PostgreSQL.
extension SystemBenchmark {
    static let slotCount = 256

    mutating func slots(url: String, chimed: String) throws {
        let workerCounts = [1, 2, 3]
        let runs = quick ? 3 : 5
        say(
            "slots: \(Self.slotCount) slots on one PostgreSQL (fsync on), --lease-ttl 10; ingest and burst with "
                + "\(workerCounts.map(String.init).joined(separator: ", ")) workers, failover and hand-over with 3 "
                + "(\(runs) runs each)"
        )
        var figures: [String: Any] = ["slots": Self.slotCount, "leaseTTLSeconds": 10]
        var ingestRates: [Int: Double] = [:]
        var burstRates: [Int: Double] = [:]
        // The reference: one chimed on a PostgreSQL of its own, without slots, in the same run.
        let (commands, far) = Self.ingestCommands(sizes.ingest)
        let single = try chimedRound(commands, url: url, chimed: chimed, far: far, store: .postgres)
        say(
            String(format: "  without slots: ingest %8.0f replies/s, %.1f µs CPU per command", single.0, single.1 * 1e6)
        )
        figures["withoutSlots"] = ["ingestRepliesPerSecond": single.0, "ingestCPUMicrosPerCommand": single.1 * 1e6]
        rows.append(
            (
                "slots: the same ingest on PostgreSQL without --slots",
                String(format: "%.0f; %.1f µs", single.0, single.1 * 1e6),
                "", ""
            )
        )
        for count in workerCounts {
            let cluster = try SlotCluster(chimed: chimed, url: url)
            defer { cluster.stopAll() }
            try cluster.start(count: count)
            let ingest = try slotIngest(cluster, commands: commands, far: far, workers: count)
            ingestRates[count] = ingest.rate
            let burst = try slotBurst(cluster, url: url, workers: count)
            burstRates[count] = burst.rate
            figures["workers\(count)"] = [
                "ingestRepliesPerSecond": ingest.rate, "ingestCPUMicrosPerCommand": ingest.cpu * 1e6,
                "burstDeliveriesPerSecond": burst.rate, "burstLatenessMs": quantiles(burst.lateness),
            ]
            rows.append(
                (
                    "slots, \(count) worker\(count == 1 ? "" : "s"): ingest ok replies/s; CPU per command, all workers",
                    String(format: "%.0f; %.1f µs", ingest.rate, ingest.cpu * 1e6),
                    count == 1 ? "" : ratio(ingest.rate / ingestRates[1]!), ""
                )
            )
            rows.append(
                (
                    "slots, \(count) worker\(count == 1 ? "" : "s"): burst deliveries/s; lateness p99",
                    String(format: "%.0f; %.0f ms", burst.rate, burst.lateness.quantile(0.99)),
                    count == 1 ? "" : ratio(burst.rate / burstRates[1]!), ""
                )
            )
        }

        let cluster = try SlotCluster(chimed: chimed, url: url)
        defer { cluster.stopAll() }
        try cluster.start(count: 3)
        // Something to load: each slot holds notifications when it moves.
        let load = try LoadClient(url: url, clientId: "bench-slots-fill", window: 200)
        try load.start()
        let month = Instant(milliseconds: wallMilliseconds() + 30 * 86_400_000)
        _ = try load.run(
            Self.batches(prefix: "fill", count: quick ? 20_000 : 100_000, devices: 2000, batch: 100) { _ in month }
        )
        load.stop()
        for graceful in [false, true] {
            var times: [Double] = []
            var allServed: [Double] = []
            var handovers: [Int] = []
            for run in 0..<runs {
                let victim = "w\(run % 3 + 1)"
                let moved = try cluster.move(victim, graceful: graceful)
                times.append(moved.firstAnswer)
                allServed.append(moved.allServed)
                handovers += moved.handoverMs
                say(
                    String(
                        format:
                            "  %@ %@: first command of a moved slot answered after %.2f s, all its slots after %.2f s",
                        graceful ? "SIGTERM" : "kill -9",
                        victim,
                        moved.firstAnswer,
                        moved.allServed
                    )
                )
            }
            let label = graceful ? "handover" : "failover"
            var entry: [String: Any] = [
                "secondsToFirstAnswer": median(times), "runs": times, "secondsToAllSlotsServed": allServed,
            ]
            if graceful { entry["handoverMs"] = handovers }
            figures[label] = entry
            let what =
                graceful
                ? "slots: SIGTERM of 1 of 3 workers to the first command answered for one of its slots"
                : "slots: kill -9 of 1 of 3 workers to the first command answered for one of its slots"
            rows.append(
                (
                    what + " (median of \(runs))",
                    String(
                        format: "%.2f s (%@)",
                        median(times),
                        times.map { String(format: "%.2f", $0) }.joined(separator: ", ")
                    ),
                    "", graceful ? "" : "≤ 2 × TTL + load"
                )
            )
            if graceful, let longest = handovers.max() {
                rows.append(
                    (
                        "slots: hand-over of a slot, drain to release (longest of \(handovers.count))", "\(longest) ms",
                        "", ""
                    )
                )
            }
        }
        results["slots"] = figures
    }

    /// The ingest workload's commands on `cluster`: ok replies per second, and the CPU seconds of
    /// all workers together per command (every worker receives every command).
    func slotIngest(
        _ cluster: SlotCluster,
        commands: [(String, [UInt8])],
        far: String,
        workers: Int
    ) throws -> (rate: Double, cpu: Double) {
        let n = commands.count
        let load = try LoadClient(url: cluster.url, clientId: "bench-slots-ingest", window: 1000)
        try load.start()
        defer { load.stop() }
        _ = try load.run(
            (0..<2000).map { i in
                ("\(Self.prefix)/warm\(i % 100)/cmd/schedule", Array(#"{"id":"w\#(i)","fireDate":"\#(far)"}"#.utf8))
            }
        )
        let cpu0 = cluster.totalCPUSeconds()
        let result = try load.run(commands)
        let cpu = cluster.totalCPUSeconds() - cpu0
        guard result.ok == n else { throw BenchError("slots ingest: \(result.ok) ok replies of \(n)") }
        let rate = Double(result.replies) / result.seconds
        say(
            String(
                format: "  %d worker(s): ingest %8.0f replies/s, %.1f µs CPU per command",
                workers,
                rate,
                cpu / Double(n) * 1e6
            )
        )
        return (rate, cpu / Double(n))
    }

    /// The burst workload (at half size: it loads through every worker) on `cluster`.
    func slotBurst(_ cluster: SlotCluster, url: String, workers: Int) throws -> (rate: Double, lateness: Samples) {
        let n = sizes.burst / 2
        let measured = try DeliveryCollector(url: url, measure: true)
        try measured.start(filter: "\(Self.prefix)/+/notifications")
        defer { measured.stop() }
        let load = try LoadClient(url: url, clientId: "bench-slots-burst", window: 20)
        try load.start()
        defer { load.stop() }
        let due = try loadDueAtOneInstant(load: load, count: n, devices: 1000)
        let dueMono = monotonicSeconds() + Double(due.milliseconds - wallMilliseconds()) / 1000
        guard waitUntil(timeout: 900, { measured.count >= n }) else {
            throw BenchError("slots burst: only \(measured.count) of \(n) delivered")
        }
        let b = measured.snapshot
        let rate = Double(b.count) / (b.last - dueMono)
        say(
            String(
                format: "  %d worker(s): burst of %d, %8.0f deliveries/s; lateness p50 %.0f ms, p99 %.0f ms",
                workers,
                n,
                rate,
                b.worker.quantile(0.5),
                b.worker.quantile(0.99)
            )
        )
        return (rate, b.worker)
    }
}

/// Workers `w1`, `w2`, ... in slot mode on a PostgreSQL of their own, and what their retained
/// statuses say they serve.
final class SlotCluster {
    let server: TestPostgres
    let chimed: String
    let url: String
    let statuses: StatusWatcher
    /// `--routing` of every worker.
    let routing: String
    /// `--slots` of every worker.
    let slotCount: Int
    var workers: [String: Chimed] = [:]

    init(chimed: String, url: String, routing: String = "broadcast", slots: Int = SystemBenchmark.slotCount) throws {
        server = try runSync { try await TestPostgres.start(.init(fsync: true)) }
        self.chimed = chimed
        self.url = url
        self.routing = routing
        slotCount = slots
        statuses = try StatusWatcher(url: url, slotCount: slots)
    }

    func start(count: Int) throws {
        for k in 1...count { try start("w\(k)") }
        guard statuses.waitUntilBalanced(among: Set(workers.keys), timeout: 120) else {
            throw BenchError("slots: \(count) workers did not share the slots within 120 s: \(statuses.serving())")
        }
    }

    func start(_ name: String) throws {
        let worker = try Chimed(
            executable: chimed,
            arguments: [
                "--broker", url, "--worker-id", name, "--store", server.uri, "--slots", "\(slotCount)",
                "--log-level", "info", "--stats-interval", "1", "--routing", routing, "--fsync", "always",
                "--max-pending-per-device",
                "\(DeviceLimits.maxPendingPerDevice)", "--max-bytes-per-device", "1099511627776", "--device-rate", "0",
            ]
        )
        try worker.startServing()
        workers[name] = worker
    }

    /// CPU seconds of every worker so far.
    func totalCPUSeconds() -> Double {
        workers.values.reduce(0) { $0 + (cpuSeconds(pid: $1.process.pid) ?? 0) }
    }

    /// What moving `victim`'s slots took: kill -9 (or SIGTERM when `graceful`) while a command
    /// for a device of one of its slots is sent every 20 ms; the seconds from the signal to the
    /// first answer of one sent after it, and to every slot served by the others; then the victim
    /// starts again and the three share the slots.
    func move(_ victim: String, graceful: Bool) throws -> (firstAnswer: Double, allServed: Double, handoverMs: [Int]) {
        guard let slot = statuses.serving()[victim]?.first, let worker = workers[victim] else {
            throw BenchError("slots: \(victim) serves nothing")
        }
        var k = 0
        while deviceBucket("probe-\(k)", among: UInt32(slotCount)) != slot { k += 1 }
        let prober = try Prober(url: url, device: "probe-\(k)")
        defer { prober.stop() }
        guard waitUntil(timeout: 30, { prober.firstAnswer(sentAfter: 0) != nil }) else {
            throw BenchError("slots: no answer for slot \(slot) before the move")
        }
        let signalled = monotonicSeconds()
        if graceful { worker.process.terminate() } else { worker.process.kill() }
        guard waitUntil(timeout: 120, { prober.firstAnswer(sentAfter: signalled) != nil }) else {
            throw BenchError("slots: slot \(slot) of \(victim) not answered within 120 s")
        }
        let answered = prober.firstAnswer(sentAfter: signalled)! - signalled
        let others = Set(workers.keys).subtracting([victim])
        guard statuses.waitUntilBalanced(among: others, timeout: 120) else {
            throw BenchError("slots: the slots of \(victim) not all served within 120 s: \(statuses.serving())")
        }
        let allServed = monotonicSeconds() - signalled
        _ = try runSync { await worker.process.waitForExit(timeout: .seconds(30)) }
        let handovers = worker.process.standardErrorLines.compactMap { line -> Int? in
            guard line.contains("handed a slot over"), let range = line.range(of: "handoverMs=") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        try start(victim)
        guard statuses.waitUntilBalanced(among: Set(workers.keys), timeout: 120) else {
            throw BenchError("slots: \(victim) back, but the slots not shared within 120 s: \(statuses.serving())")
        }
        return (answered, allServed, handovers)
    }

    func stopAll() {
        for worker in workers.values {
            worker.process.terminate()
            _ = try? runSync { await worker.process.waitForExit(timeout: .seconds(60)) }
        }
        workers.removeAll()
        statuses.stop()
        let server = self.server
        _ = try? runSync { await server.stop() }
    }
}

/// The retained statuses of the workers: which slots each online one serves; and from their latest
/// stats (every second), the commands each received.
final class StatusWatcher: Sendable {
    private let latest = Locked<[String: [Int]]>([:])
    private let received = Locked<[String: CommandsReceived]>([:])
    private let client: MQTTClient
    private let slotCount: Int

    init(url: String, slotCount: Int) throws {
        self.slotCount = slotCount
        var options = try MQTTOptions(url: url)
        options.clientId = "bench-slots-status-\(UInt32.random(in: 0...UInt32.max))"
        let latest = self.latest
        let received = self.received
        let subscribed = Locked(0)
        client = try MQTTClient(options: options) { event in
            switch event {
            case .subscribed: subscribed.value.withLock { $0 += 1 }
            case .message(let m):
                let parts = m.topic.split(separator: "/")
                guard parts.count == 4, case .object(let o)? = try? JSON(parsing: m.payload) else { return }
                if parts[3] == "stats" {
                    received.value.withLock { $0[String(parts[2])] = CommandsReceived(stats: o) }
                    return
                }
                let slots =
                    o["state"] == "online"
                    ? SlotRanges.slots(o["serving"]?.stringValue ?? "", count: slotCount) : nil
                latest.value.withLock { $0[String(parts[2])] = slots }
            default: break
            }
        }
        try client.start()
        guard waitUntil(timeout: 30, { client.isConnected }) else { throw BenchError("status watcher: no connection") }
        _ = try client.subscribe("\(SystemBenchmark.prefix)/$worker/+/status", qos: 1)
        _ = try client.subscribe("\(SystemBenchmark.prefix)/$worker/+/stats", qos: 0)
        guard waitUntil(timeout: 30, { subscribed.value.withLock { $0 } == 2 }) else {
            throw BenchError("status watcher: no SUBACK")
        }
    }

    func serving() -> [String: [Int]] { latest.value.withLock { $0 } }

    /// What the workers' latest stats say they received, summed.
    func commandsReceived() -> CommandsReceived {
        received.value.withLock { $0.values.reduce(CommandsReceived(), +) }
    }

    /// Every slot served by exactly one of `names`, in shares that differ by one at most.
    func waitUntilBalanced(among names: Set<String>, timeout: Double) -> Bool {
        waitUntil(timeout: timeout) {
            let served = serving().filter { names.contains($0.key) }
            let all = served.values.flatMap { $0 }
            let shares = served.values.map(\.count)
            return served.count == names.count && all.count == slotCount
                && Set(all).count == slotCount && shares.max()! - shares.min()! <= 1
        }
    }

    func stop() { client.stop() }
}

/// Sends a read-only `list` for one device every 20 ms and keeps when each was sent and when its
/// answer came (monotonic seconds).
final class Prober: Sendable {
    struct Answer: Sendable {
        var sent: Double
        var answered: Double
    }

    private let answers = Locked<[Answer]>([])
    private let client: MQTTClient
    private let running = Locked(true)

    init(url: String, device: String) throws {
        var options = try MQTTOptions(url: url)
        let id = "bench-slots-probe-\(UInt32.random(in: 0...UInt32.max))"
        options.clientId = id
        let answers = self.answers
        let subscribed = Locked(false)
        client = try MQTTClient(options: options) { event in
            switch event {
            case .subscribed: subscribed.value.withLock { $0 = true }
            case .message(let m):
                guard let data = m.correlationData, data.count == 8 else { return }
                let bits = data.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                answers.value.withLock {
                    $0.append(Answer(sent: Double(bitPattern: bits), answered: monotonicSeconds()))
                }
            default: break
            }
        }
        try client.start()
        guard waitUntil(timeout: 30, { client.isConnected }) else { throw BenchError("prober: no connection") }
        let replies = "bench/\(id)/reply"
        _ = try client.subscribe(replies, qos: 1)
        guard waitUntil(timeout: 30, { subscribed.value.withLock { $0 } }) else {
            throw BenchError("prober: no SUBACK")
        }
        let publisher = self.client
        let running = self.running
        let sender = Thread {
            while running.value.withLock({ $0 }) {
                var properties = MQTTPublishProperties()
                properties.responseTopic = replies
                let sent = monotonicSeconds().bitPattern
                properties.correlationData = (0..<8).map { UInt8(truncatingIfNeeded: sent >> (8 * (7 - $0))) }
                _ = try? publisher.publish(
                    topic: "\(SystemBenchmark.prefix)/\(device)/cmd/list",
                    payload: Array(#"{"limit":1}"#.utf8),
                    qos: 1,
                    properties: properties
                )
                usleep(20_000)
            }
        }
        sender.start()
    }

    /// The round trips, in milliseconds, of the commands sent at `sentAfter` or later.
    func roundTrips(sentAfter: Double) -> Samples {
        var samples = Samples()
        for answer in answers.value.withLock({ $0 }) where answer.sent >= sentAfter {
            samples.add((answer.answered - answer.sent) * 1000)
        }
        return samples
    }

    /// When the first answer to a command sent at `sentAfter` or later came.
    func firstAnswer(sentAfter: Double) -> Double? {
        answers.value.withLock { $0.filter { $0.sent >= sentAfter }.map(\.answered).min() }
    }

    func stop() {
        running.value.withLock { $0 = false }
        client.stop()
    }
}

/// The commands workers received, by what they did with them (their stats): each is one delivery
/// by the broker.
struct CommandsReceived {
    var handled = 0
    var forwarded = 0
    var leftToOthers = 0

    init() {}

    init(stats o: JSONObject) {
        func int(_ value: JSON?) -> Int { if case .int(let n)? = value { Int(n) } else { 0 } }
        handled = o["commands"]?.objectValue?.reduce(0) { $0 + int($1.value) } ?? 0
        forwarded = int(o["commandsForwarded"])
        leftToOthers = int(o["commandsForOtherSlots"])
    }

    var deliveries: Int { handled + forwarded + leftToOthers }

    static func + (a: Self, b: Self) -> Self {
        var sum = a
        sum.handled += b.handled
        sum.forwarded += b.forwarded
        sum.leftToOthers += b.leftToOthers
        return sum
    }

    static func - (a: Self, b: Self) -> Self {
        var difference = a
        difference.handled -= b.handled
        difference.forwarded -= b.forwarded
        difference.leftToOthers -= b.leftToOthers
        return difference
    }
}
