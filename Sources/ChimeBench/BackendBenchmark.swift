import ChimeClientMQTT
import ChimeHarness
import ChimeSupport
import Foundation

/// `chime-bench system --only backend` (`make bench-backend`): the ingest workload (schedule
/// commands over 2,000 devices, 1,000 in flight, each on a fresh chimed) sent by the raw load
/// client and by one `ChimeBackend` connection, alternating round after round in one run. Reports
/// the backend's ok replies a second ÷ the load client's (the goal is ≥ 0.8: the library's
/// correlation, window and typed results cost little beside chimed's own ingest), with chimed's
/// CPU a command under each and the backend's own CPU a command.
extension SystemBenchmark {
    mutating func backend(url: String, chimed: String) throws {
        let n = quick ? 10_000 : 50_000
        let window = 1000
        let rounds = quick ? 2 : 3
        let (commands, far) = Self.ingestCommands(n)
        say(
            "backend: \(n) schedule commands over 2,000 devices, window \(window), load client and backend alternate, \(rounds) rounds"
        )
        var loadRates: [Double] = []
        var backendRates: [Double] = []
        var backendChimedCPU: [Double] = []
        var loadChimedCPU: [Double] = []
        var clientCPU: [Double] = []
        for _ in 0..<rounds {
            let (loadRate, loadCPU) = try chimedRound(commands, url: url, chimed: chimed, far: far, store: .directory)
            loadRates.append(loadRate)
            loadChimedCPU.append(loadCPU)
            let round = try backendRound(n, window: window, url: url, chimed: chimed)
            backendRates.append(round.rate)
            backendChimedCPU.append(round.chimedCPU)
            clientCPU.append(round.clientCPU)
            say(
                String(
                    format:
                        "  load client: %8.0f ok/s, chimed %.1f µs a command; backend: %8.0f ok/s, chimed %.1f µs, backend %.1f µs a command",
                    loadRate,
                    loadCPU * 1e6,
                    round.rate,
                    round.chimedCPU * 1e6,
                    round.clientCPU * 1e6
                )
            )
        }
        let ratios = zip(backendRates, loadRates).map { $0 / $1 }
        let rate = median(backendRates)
        let load = median(loadRates)
        rows.append(
            (
                "backend: ok replies/s ÷ load client's", String(format: "%.0f ÷ %.0f", rate, load),
                String(format: "%.2f (%.2f–%.2f)", median(ratios), ratios.min() ?? 0, ratios.max() ?? 0), "≥ 0.8"
            )
        )
        rows.append(
            (
                "backend: its own CPU a command", String(format: "%.1f µs", median(clientCPU) * 1e6), "", ""
            )
        )
        results["backend"] = [
            "commands": n, "window": window, "backendRepliesPerSecond": backendRates,
            "loadClientRepliesPerSecond": loadRates, "ratios": ratios,
            "chimedCPUMicrosPerCommandBackend": backendChimedCPU.map { $0 * 1e6 },
            "chimedCPUMicrosPerCommandLoadClient": loadChimedCPU.map { $0 * 1e6 },
            "backendCPUMicrosPerCommand": clientCPU.map { $0 * 1e6 },
        ]
    }

    /// One round on a fresh data directory: `n` adds through one backend connection, `window` at
    /// once, over 2,000 devices, the same notifications as ``ingestCommands(_:)``.
    func backendRound(
        _ n: Int,
        window: Int,
        url: String,
        chimed: String
    ) throws -> (rate: Double, chimedCPU: Double, clientCPU: Double) {
        let data = try TemporaryDirectory(prefix: "chime-bench")
        let worker = try startChimed(chimed, url: url, data: data.path, perDeviceLimits: true, store: .directory)
        defer { stop(worker) }
        let body = Self.body
        let when = Date().addingTimeInterval(30 * 86_400)
        return try runSync {
            let backend = try ChimeBackend(
                brokerURL: url,
                clientId: "bench-backend",
                configuration: .init(window: window)
            )
            func add(_ range: Range<Int>, device: @escaping @Sendable (Int) -> String) async throws {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for lane in 0..<window {
                        group.addTask {
                            for i in stride(from: range.lowerBound + lane, to: range.upperBound, by: window) {
                                try await backend.device(device(i)).add(
                                    NotificationRequest(
                                        identifier: "i\(i)",
                                        content: NotificationContent(
                                            body: body,
                                            userInfo: ["a": 1, "b": "two", "c": true]
                                        ),
                                        trigger: .date(when)
                                    )
                                )
                            }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await add(0..<2000) { "warm\($0 % 100)" }
            let cpu0 = cpuSeconds(pid: worker.process.pid) ?? 0
            let own0 = cpuSeconds(pid: getpid()) ?? 0
            let start = ContinuousClock.now
            try await add(0..<n) { "d\($0 % 2000)" }
            let elapsed = ContinuousClock.now - start
            let cpu = (cpuSeconds(pid: worker.process.pid) ?? 0) - cpu0
            let own = (cpuSeconds(pid: getpid()) ?? 0) - own0
            await backend.disconnect()
            return (Double(n) / seconds(elapsed), cpu / Double(n), own / Double(n))
        }
    }
}
