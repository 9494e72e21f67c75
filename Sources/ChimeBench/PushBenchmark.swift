import ChimeHarness
import ChimeMQTT
import Foundation

/// `chime-bench system --only push` (`make bench-push`): 1,000, 10,000 and 100,000 deliveries due at
/// one instant over 1,000 devices, each device with an APNs registration, pushed to the local push
/// stand-in (Tests/PushStandin: HTTP/2 over TLS, every request's JWT verified with PyJWT); and the
/// same burst without registrations, in the same run. Reports pushes accepted a second (from the
/// due instant to the last accepted), chimed's CPU a push (the CPU of the run with pushes less the
/// run without, a delivery), and the MQTT deliveries a second with pushes on ÷ off.
extension SystemBenchmark {
    mutating func push(url: String, chimed: String) throws {
        let counts = quick ? [1000, 10_000] : [1000, 10_000, 100_000]
        let devices = 1000
        say(
            "push: deliveries due at one instant over \(devices) devices, each with an APNs registration (on) "
                + "or none (off)"
        )
        let standin = try runSync { try await PushStandin.start() }
        defer { _ = try? runSync { await standin.stop() } }
        var figures: [[String: Any]] = []
        for n in counts {
            let off = try pushRound(url: url, chimed: chimed, standin: standin, count: n, devices: devices, push: false)
            let on = try pushRound(url: url, chimed: chimed, standin: standin, count: n, devices: devices, push: true)
            let pushRate = Double(n) / on.pushSeconds
            let cpuPerPush = (on.cpu - off.cpu) / Double(n)
            say(
                String(
                    format:
                        "  %6d due: %6.0f pushes accepted/s; chimed CPU %.1f µs a push (%.1f µs a delivery with, %.1f without); MQTT %6.0f ÷ %6.0f deliveries/s = %.2f",
                    n,
                    pushRate,
                    cpuPerPush * 1e6,
                    on.cpu / Double(n) * 1e6,
                    off.cpu / Double(n) * 1e6,
                    on.mqttRate,
                    off.mqttRate,
                    on.mqttRate / off.mqttRate
                )
            )
            rows.append(("push \(n): pushes accepted/s", String(format: "%.0f", pushRate), "", ""))
            rows.append(("push \(n): chimed CPU a push", String(format: "%.1f µs", cpuPerPush * 1e6), "", ""))
            rows.append(
                (
                    "push \(n): MQTT deliveries/s, pushes on ÷ off",
                    String(format: "%.0f ÷ %.0f", on.mqttRate, off.mqttRate), ratio(on.mqttRate / off.mqttRate), ""
                )
            )
            figures.append([
                "due": n, "pushesPerSecond": pushRate, "cpuMicrosPerPush": cpuPerPush * 1e6,
                "cpuMicrosPerDeliveryWithPush": on.cpu / Double(n) * 1e6,
                "cpuMicrosPerDeliveryWithoutPush": off.cpu / Double(n) * 1e6,
                "mqttDeliveriesPerSecondWithPush": on.mqttRate,
                "mqttDeliveriesPerSecondWithoutPush": off.mqttRate, "mqttRatio": on.mqttRate / off.mqttRate,
            ])
        }
        results["push"] = figures
    }

    /// One burst on a fresh data directory: MQTT deliveries a second, and with `push`, the seconds
    /// from the due instant until the stand-in has accepted every push; chimed's CPU seconds from
    /// the due instant until then.
    private func pushRound(
        url: String,
        chimed: String,
        standin: PushStandin,
        count n: Int,
        devices: Int,
        push: Bool
    ) throws -> (mqttRate: Double, pushSeconds: Double, cpu: Double) {
        try standin.reset()
        let data = try TemporaryDirectory(prefix: "chime-bench")
        let flags = try standin.chimedFlags()
        let worker = try startChimed(chimed, url: url, data: data.path, perDeviceLimits: true, extra: flags)
        defer { stop(worker) }
        let measured = try DeliveryCollector(url: url, measure: true)
        try measured.start(filter: "\(Self.prefix)/+/notifications")
        defer { measured.stop() }
        let load = try LoadClient(url: url, clientId: "bench-load-push", window: 20)
        try load.start()
        defer { load.stop() }
        if push {
            let registrations = (0..<devices).map { k -> (String, [UInt8]) in
                let token = String(repeating: "0", count: 56) + String(format: "%08x", k)
                return (
                    "\(Self.prefix)/burst-\(k)/cmd/device",
                    Array(#"{"push":[{"apns":{"token":"\#(token)","topic":"com.example.bench"}}]}"#.utf8)
                )
            }
            _ = try load.run(registrations, timeout: 600)
        }
        let due = try loadDueAtOneInstant(load: load, count: n, devices: devices)
        let dueMono = monotonicSeconds() + Double(due.milliseconds - wallMilliseconds()) / 1000
        if dueMono > monotonicSeconds() + 0.05 { usleep(UInt32((dueMono - monotonicSeconds() - 0.05) * 1e6)) }
        let cpu0 = cpuSeconds(pid: worker.process.pid) ?? 0
        guard waitUntil(timeout: 900, { measured.count >= n }) else {
            throw BenchError("push: only \(measured.count) of \(n) delivered")
        }
        var pushSeconds = 0.0
        if push {
            // Polled every 0.2 s: each poll walks the stand-in's record of every request. The time
            // is the stand-in's: when the last push accepted arrived.
            var apns: [String: Double] = [:]
            guard
                waitUntil(
                    timeout: 1800,
                    {
                        usleep(200_000)
                        apns = (try? standin.counts())?["apns"] ?? [:]
                        return (apns["200"] ?? 0) >= Double(n)
                    }
                )
            else { throw BenchError("push: the stand-in accepted only \(apns["200"] ?? 0) of \(n)") }
            pushSeconds = (apns["last"] ?? 0) - Double(due.milliseconds) / 1000
        }
        let cpu = (cpuSeconds(pid: worker.process.pid) ?? 0) - cpu0
        let b = measured.snapshot
        return (Double(b.count) / (b.last - dueMono), pushSeconds, cpu)
    }
}
