import ChimeHarness
import Foundation

/// The peer (issue 18): NATS JetStream message schedules, set up as a user would for durable
/// reminders, behind `scripts/nats-peer` on the same broker, driven by the same load client:
/// ingest (schedules acknowledged per second) and burst (deliveries per second for N due at once),
/// with `sync_interval: always` (the comparison) and with NATS' default sync (for information).
/// Compared with chimed's ingest and burst of the same run.
extension SystemBenchmark {
    /// Where `make bench` installs the peer (`scripts/nats-peer --install`), from the repository's root.
    static let peerPython = ".build/peer-venv/bin/python"
    static let peerScript = "scripts/nats-peer"

    mutating func peer(url: String) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.peerPython) else {
            throw BenchError(
                "\(Self.peerPython) is missing: run from the repository's root after `scripts/nats-peer --install` (make bench does)"
            )
        }
        // NATS takes about a tenth of chimed's rate with sync always: a tenth of the counts keeps
        // each run to seconds.
        let n = quick ? 5_000 : 20_000
        say("peer: NATS JetStream message schedules (scripts/nats-peer), \(n) schedules ingested, \(n) due at once")
        let (commands, _) = Self.ingestCommands(n)
        var figures: [String: Any] = [:]
        // Schedules acknowledged and deliveries a second, by sync.
        var measured: [String: (ingest: Double, burst: Double)] = [:]
        for sync in ["always", "default"] {
            let rounds = sync == "always" ? (quick ? 2 : 3) : 1
            var rates: [Double] = []
            for _ in 0..<rounds {
                let peer = try startPeer(url: url, sync: sync)
                defer { stopPeer(peer) }
                let load = try LoadClient(url: url, clientId: "bench-load-peer", window: 1000)
                try load.start()
                let r = try load.run(commands, timeout: 1200)
                load.stop()
                guard r.ok == commands.count else {
                    throw BenchError("peer ingest: \(r.ok) ok replies, expected \(commands.count)")
                }
                rates.append(Double(r.replies) / r.seconds)
                say(String(format: "  NATS (sync %@): %8.0f schedules acknowledged/s", sync, rates.last!))
            }
            let peer = try startPeer(url: url, sync: sync)
            defer { stopPeer(peer) }
            let collector = try DeliveryCollector(url: url, measure: true)
            try collector.start(filter: "\(Self.prefix)/+/notifications")
            let load = try LoadClient(url: url, clientId: "bench-load-peer-burst", window: 20)
            try load.start()
            let due = try loadDueAtOneInstant(load: load, count: n, devices: 1000)
            let dueMono = monotonicSeconds() + Double(due.milliseconds - wallMilliseconds()) / 1000
            guard waitUntil(timeout: 1200, { collector.count >= n }) else {
                throw BenchError("peer burst: only \(collector.count) of \(n) delivered (sync \(sync))")
            }
            let b = collector.snapshot
            collector.stop()
            load.stop()
            let burst = Double(b.count) / (b.last - dueMono)
            say(
                String(
                    format:
                        "  NATS (sync %@): %8.0f deliveries/s from the due instant; arrival lateness p50 %.0f ms, max %.0f ms",
                    sync,
                    burst,
                    b.arrival.quantile(0.5),
                    b.arrival.max
                )
            )
            measured[sync] = (median(rates), burst)
            figures[sync == "always" ? "syncAlways" : "syncDefault"] = [
                "schedules": n, "ingestPerSecond": median(rates), "ingestRuns": rates,
                "burstDeliveriesPerSecond": burst,
                "arrivalLatenessMs": quantiles(b.arrival),
            ]
        }
        let (ingest, burst) = measured["always"]!
        // chimed's figures from this run, when its ingest and burst ran.
        let chimedIngest = (results["ingest"] as? [String: Any])?["chimedRepliesPerSecond"] as? Double
        let chimedBurst = (results["burst"] as? [String: Any])?["chimedDeliveriesPerSecond"] as? Double
        if let chimedIngest { figures["ingestRatio"] = chimedIngest / ingest }
        if let chimedBurst { figures["burstRatio"] = chimedBurst / burst }
        results["peer"] = figures
        rows.append(
            (
                "ingest: chimed ÷ NATS JetStream (sync always), schedules acknowledged/s",
                chimedIngest.map { String(format: "%.0f ÷ %.0f", $0, ingest) } ?? String(format: "? ÷ %.0f", ingest),
                chimedIngest.map { ratio($0 / ingest) } ?? "run ingest too", "≥ 5"
            )
        )
        rows.append(
            (
                "burst: chimed ÷ NATS JetStream (sync always), deliveries/s",
                chimedBurst.map { String(format: "%.0f ÷ %.0f", $0, burst) } ?? String(format: "? ÷ %.0f", burst),
                chimedBurst.map { ratio($0 / burst) } ?? "run burst too", "≥ 20"
            )
        )
        let loose = measured["default"]!
        rows.append(
            (
                "NATS with its default sync (every 2 min): ingest / burst, for information",
                String(format: "%.0f / %.0f per second", loose.ingest, loose.burst), "", ""
            )
        )
    }

    /// Starts `scripts/nats-peer` (its own nats-server, in a fresh store) and waits until it serves.
    func startPeer(url: String, sync: String) throws -> (process: ChildProcess, store: TemporaryDirectory) {
        let store = try TemporaryDirectory(prefix: "nats-peer")
        let process = try ChildProcess(
            Self.peerPython,
            arguments: [
                Self.peerScript, "--broker", url, "--prefix", Self.prefix, "--sync", sync, "--store", store.path,
            ]
        )
        try process.start()
        guard try runSync({ await process.waitForLine(timeout: .seconds(60)) { $0 == "ready" } }) != nil else {
            throw BenchError("nats-peer did not start:\n\(process.standardErrorLines.joined(separator: "\n"))")
        }
        return (process, store)
    }

    func stopPeer(_ peer: (process: ChildProcess, store: TemporaryDirectory)) {
        peer.process.terminate()
        _ = try? runSync { await peer.process.waitForExit(timeout: .seconds(30)) }
    }
}
