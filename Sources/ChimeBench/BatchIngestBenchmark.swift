import ChimeHarness
import ChimeTime
import Foundation

/// Batch ingest (issue 18): a backend scheduling notifications 100 a command, `--fsync always`,
/// each reply after the sync that made its notifications durable.
extension SystemBenchmark {
    mutating func batchIngest(url: String, chimed: String) throws {
        let perCommand = 100
        let n = quick ? 200_000 : 1_000_000
        let window = 100
        say("batch ingest: \(n) notifications, \(perCommand) a command, \(window) commands in flight, --fsync always")
        let far = Instant(milliseconds: wallMilliseconds() + 30 * 86_400_000)
        let commands = Self.batches(prefix: "batch", count: n, devices: 2000, batch: perCommand) { _ in far }
        var rates: [String: [Double]] = [:]
        var cpus: [String: [Double]] = [:]
        for round in 0..<(quick ? 2 : 3) {
            for variant in variants(chimed: chimed, round: round) where variant.store == .directory {
                let data = try TemporaryDirectory(prefix: "chime-bench")
                let worker = try startChimed(
                    variant.path,
                    url: url,
                    data: data.path,
                    perDeviceLimits: true,
                    store: .directory
                )
                let load = try LoadClient(url: url, clientId: "bench-load-batch", window: window)
                try load.start()
                let cpu0 = cpuSeconds(pid: worker.process.pid) ?? 0
                let result = try load.run(commands, timeout: 1200)
                let cpu = (cpuSeconds(pid: worker.process.pid) ?? 0) - cpu0
                load.stop()
                stop(worker)
                guard result.ok == commands.count else {
                    throw BenchError("batch ingest: \(result.ok) ok replies of \(commands.count): \(result.outcomes)")
                }
                let rate = Double(n) / result.seconds
                rates[variant.name, default: []].append(rate)
                cpus[variant.name, default: []].append(cpu / Double(commands.count))
                say(
                    String(
                        format: "  %8.0f notifications/s (%.0f commands/s), %.0f µs CPU a command (%@)",
                        rate,
                        rate / Double(perCommand),
                        cpu / Double(commands.count) * 1e6,
                        variant.name
                    )
                )
            }
        }
        compare("batch", [("notifications/s", rates, "≥ 1"), ("CPU per command", cpus, "≤ 0.9")])
        let directory = Store.directory.rawValue
        let rate = median(rates[directory]!)
        results["batchIngest"] = [
            "notifications": n, "perCommand": perCommand, "window": window, "notificationsPerSecond": rate,
            "runs": rates[directory]!, "cpuMicrosPerCommand": median(cpus[directory]!) * 1e6,
        ]
        rows.append(
            (
                "batch ingest: notifications/s, \(perCommand) a command, fsync always (median of \(rates[directory]!.count))",
                String(format: "%.0f", rate), "", "≥ 150,000"
            )
        )
    }
}
