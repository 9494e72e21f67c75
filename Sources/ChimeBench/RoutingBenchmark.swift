import ChimeCore
import Foundation

/// `chime-bench system --only routing` (`make bench-routing`): slot mode with broadcast commands
/// against routing by slot (`--routing slot`), for 1, 2, 4 and 8 workers on one PostgreSQL, in one
/// run: broker deliveries per command (counted by the workers that received them), the CPU of
/// all workers and of each per command, and the round trip of a command (a `list`, one every
/// 20 ms) with the forwarding hop and without. Two cores cannot show throughput scaling with
/// workers; deliveries and CPU per command they can count.
extension SystemBenchmark {
    mutating func routing(url: String, chimed: String) throws {
        let workerCounts = quick ? [1, 2, 4] : [1, 2, 4, 8]
        let (commands, far) = Self.ingestCommands(quick ? 5000 : 20_000)
        say(
            "routing: \(commands.count) schedules through \(workerCounts.map(String.init).joined(separator: ", ")) "
                + "workers on \(Self.slotCount) slots, broadcast against --routing slot"
        )
        var figures: [String: Any] = ["commands": commands.count, "slots": Self.slotCount]
        for count in workerCounts {
            var cpuByMode: [String: Double] = [:]
            for mode in ["broadcast", "slot"] {
                let cluster = try SlotCluster(chimed: chimed, url: url, routing: mode)
                defer { cluster.stopAll() }
                try cluster.start(count: count)
                let before = cluster.statuses.commandsReceived()
                let ingest = try slotIngest(cluster, commands: commands, far: far, workers: count)
                // slotIngest sends 2,000 warm-up commands first: they are counted too.
                let sent = commands.count + 2000
                guard waitUntil(timeout: 30, { (cluster.statuses.commandsReceived() - before).handled >= sent }) else {
                    throw BenchError("routing: the workers' stats counted fewer commands than \(sent)")
                }
                let received = cluster.statuses.commandsReceived() - before
                let deliveries = Double(received.deliveries) / Double(sent)
                let device = "probe-rt"
                let prober = try Prober(url: url, device: device)
                let start = monotonicSeconds()
                Thread.sleep(forTimeInterval: quick ? 3 : 6)
                prober.stop()
                let trips = prober.roundTrips(sentAfter: start + 0.5)
                cpuByMode[mode] = ingest.cpu
                say(
                    String(
                        format:
                            "  %d worker(s), %@: %.2f deliveries a command (%d forwarded), CPU %.1f µs a command "
                            + "(%.1f µs each worker), round trip p50 %.2f ms p99 %.2f ms",
                        count,
                        mode,
                        deliveries,
                        received.forwarded,
                        ingest.cpu * 1e6,
                        ingest.cpu * 1e6 / Double(count),
                        trips.quantile(0.5),
                        trips.quantile(0.99)
                    )
                )
                figures["\(mode)\(count)"] = [
                    "deliveriesPerCommand": deliveries, "forwarded": received.forwarded,
                    "handled": received.handled, "leftToOthers": received.leftToOthers,
                    "cpuMicrosPerCommand": ingest.cpu * 1e6,
                    "cpuMicrosPerCommandEachWorker": ingest.cpu * 1e6 / Double(count),
                    "ingestRepliesPerSecond": ingest.rate, "roundTripMs": quantiles(trips),
                ]
                rows.append(
                    (
                        "routing, \(count) worker\(count == 1 ? "" : "s"), \(mode): deliveries a command; CPU a command "
                            + "(all workers); round trip p50/p99",
                        String(
                            format: "%.2f; %.1f µs; %.2f/%.2f ms",
                            deliveries,
                            ingest.cpu * 1e6,
                            trips.quantile(0.5),
                            trips.quantile(0.99)
                        ),
                        mode == "slot" ? ratio(ingest.cpu / cpuByMode["broadcast"]!) : "",
                        mode == "slot" ? "≤ 2 deliveries" : ""
                    )
                )
            }
        }
        results["routing"] = figures
    }
}
