import ChimeCore
import ChimeHarness
import ChimeMQTT
import ChimeTime
import Foundation
import Synchronization

/// `chime-bench system [--quick] [--json FILE]`: starts its own mosquitto and release chimed,
/// runs the workloads of the performance issue and prints a table; figures that depend on the
/// machine are given as ratios to the broker's own ceiling, measured in the same run by the relay
/// and the pump (see ``Baselines``).
struct SystemBenchmark {
    var quick: Bool
    var jsonPath: String
    /// Run only these workloads (ingest, burst, peer, batch, steady, hostile, receipts; slots and scale
    /// only when named); all when empty.
    var only: Set<String> = []
    /// Every chimed serves `/metrics` on this loopback port, scraped every 100 ms while it runs:
    /// what the endpoint costs the workloads.
    var metricsPort: Int?
    /// `--store postgres`: ingest and burst run on both stores in the same run (the data directory,
    /// then PostgreSQL, each round), the other workloads on PostgreSQL only. Every chimed on
    /// PostgreSQL keeps its journal in a server of its own (TestPostgres, fsync on, as a server
    /// would run), started fresh with it as a data directory would be.
    var postgres = false
    /// `--baseline PATH`: an earlier chimed (scripts/build-baseline) that ingest, burst and batch
    /// also run, round after round beside this one (``Variant``), each figure then given as this
    /// build ÷ the baseline.
    var baseline: String?
    /// `--pending N`: the scale workload at N pending only, instead of 1, 2, 5 and 10 million.
    var scalePending: Int?

    enum Store: String {
        case directory = "data directory"
        case postgres = "PostgreSQL"
    }

    /// The stores that ingest and burst compare, the data directory first.
    var stores: [Store] { postgres ? [.directory, .postgres] : [.directory] }
    /// The store of the other workloads.
    var store: Store { postgres ? .postgres : .directory }

    struct Sizes {
        var ingest: Int
        var burst: Int
        var pendingBig: Int
        var steadyRate: Int
        var steadySeconds: Int
        var extraRecords: Int
        var cancelSamples: Int
        var hostileRate: Int
        var hostileSeconds: Int
    }

    var sizes: Sizes {
        quick
            ? Sizes(
                ingest: 20_000,
                burst: 100_000,
                pendingBig: 80_000,
                steadyRate: 2000,
                steadySeconds: 10,
                extraRecords: 10_000,
                cancelSamples: 30,
                hostileRate: 500,
                hostileSeconds: 15
            )
            : Sizes(
                ingest: 200_000,
                burst: 1_000_000,
                pendingBig: 880_000,
                steadyRate: 2000,
                steadySeconds: 60,
                extraRecords: 100_000,
                cancelSamples: 50,
                hostileRate: 500,
                hostileSeconds: 60
            )
    }

    static let body = String(repeating: "b", count: 100)
    /// The content of a pending workload's big-device notification as the memory figures count it:
    /// its id, body and 3-key userInfo (142 bytes).
    static let taggedContentBytes =
        body.utf8.count + #"{"tag":"t12345","b":"two","c":true}"#.utf8.count + "g123456".utf8.count
    /// The same for one with a body only and an id of up to 7 bytes (107 bytes at most): the
    /// journal tail's and the steady ones.
    static let plainContentBytes = body.utf8.count + "x123456".utf8.count
    static let userInfo = #"{"a":1,"b":"two","c":true}"#
    static let prefix = "chime"

    var results: [String: Any] = [:]
    var rows: [(String, String, String, String)] = []

    mutating func run() throws {
        let bin = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let chimed = bin.appendingPathComponent("chimed").path
        let me = bin.appendingPathComponent("chime-bench").path
        guard FileManager.default.isExecutableFile(atPath: chimed) else {
            throw BenchError("\(chimed) is missing: build with `swift build -c release` (make bench does)")
        }
        if !bin.path.contains("release") {
            say("warning: \(bin.path) is not a release build; figures will be low")
        }
        say(
            "chime-bench system\(quick ? " --quick" : "")\(postgres ? " --store postgres" : ""): "
                + "\(ProcessInfo.processInfo.activeProcessorCount) cores, "
                + "\(ProcessInfo.processInfo.physicalMemory >> 30) GiB"
        )
        let broker = try runSync {
            try await TestBroker.start(
                .init(
                    extraLines: [
                        "max_inflight_messages 1000", "max_queued_messages 0", "max_queued_bytes 0",
                        "set_tcp_nodelay true",
                    ]
                )
            )
        }
        defer { _ = try? runSync { await broker.stop() } }
        let url = broker.url
        results["machine"] = [
            "cores": ProcessInfo.processInfo.activeProcessorCount,
            "memoryGiB": Int(ProcessInfo.processInfo.physicalMemory >> 30),
            "kernel": (try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines) ?? "?",
        ]
        results["quick"] = quick

        if only.isEmpty || only.contains("ingest") { try ingest(url: url, chimed: chimed, me: me) }
        if only.isEmpty || only.contains("burst") { try burst(url: url, chimed: chimed, me: me) }
        if only.isEmpty || only.contains("peer") { try peer(url: url) }
        if only.isEmpty || only.contains("batch") { try batchIngest(url: url, chimed: chimed) }
        if only.isEmpty || only.contains("steady") { try steady(url: url, chimed: chimed) }
        if only.isEmpty || only.contains("hostile") { try hostile(url: url, chimed: chimed) }
        if only.isEmpty || only.contains("receipts") { try receipts(url: url, chimed: chimed) }
        // Not in the default run: `make bench-slots` and `make bench-scale`.
        if only.contains("slots") { try slots(url: url, chimed: chimed) }
        if only.contains("routing") { try routing(url: url, chimed: chimed) }
        if only.contains("slot-load") { try slotLoad(url: url, chimed: chimed) }
        if only.contains("scale") { try scale(url: url, chimed: chimed) }
        if only.contains("push") { try push(url: url, chimed: chimed) }
        if only.contains("backend") { try backend(url: url, chimed: chimed) }

        say("")
        say(table())
        let data = try JSONSerialization.data(withJSONObject: results, options: [.prettyPrinted, .sortedKeys])
        try FileManager.default.createDirectory(
            atPath: (jsonPath as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true
        )
        try data.write(to: URL(fileURLWithPath: jsonPath))
        say("\nfigures written to \(jsonPath)")
    }

    // MARK: Workloads

    /// 200k schedule commands pipelined with a Response Topic: the relay, then chimed.
    mutating func ingest(url: String, chimed: String, me: String) throws {
        let n = sizes.ingest
        let (commands, far) = Self.ingestCommands(n)
        let rounds = quick ? 2 : 3
        say(
            "ingest: \(n) schedule commands, window 1000, --fsync always, default limits; relay and chimed "
                + "(\(variants(chimed: chimed).map(\.name).joined(separator: ", "))) alternate, \(rounds) rounds"
        )
        var relayRates: [Double] = []
        var relayCPUs: [Double] = []
        var rates: [String: [Double]] = [:]
        var cpus: [String: [Double]] = [:]
        for round in 0..<rounds {
            let (relayRate, relayCPU) = try relayRound(commands, url: url, me: me)
            relayRates.append(relayRate)
            relayCPUs.append(relayCPU)
            say(String(format: "  relay:  %8.0f replies/s, %.1f µs CPU per command", relayRate, relayCPU * 1e6))
            for variant in variants(chimed: chimed, round: round) {
                let (rate, cpu) = try chimedRound(
                    commands,
                    url: url,
                    chimed: variant.path,
                    far: far,
                    store: variant.store
                )
                rates[variant.name, default: []].append(rate)
                cpus[variant.name, default: []].append(cpu)
                say(
                    String(
                        format: "  chimed: %8.0f replies/s, %.1f µs CPU per command (%@)",
                        rate,
                        cpu * 1e6,
                        variant.name
                    )
                )
            }
        }
        compare(
            "ingest",
            [("ok replies/s", rates, "≥ 1"), ("CPU per command", cpus, "≤ 1")]
        )
        let relayRate = median(relayRates)
        let relayCPU = median(relayCPUs)
        for store in stores {
            let rate = median(rates[store.rawValue]!)
            let cpu = median(cpus[store.rawValue]!)
            let on = store == .directory ? "" : " on \(store.rawValue)"
            var figures: [String: Any] = [
                "commands": n, "relayRepliesPerSecond": relayRate, "chimedRepliesPerSecond": rate,
                "relayCPUMicrosPerCommand": relayCPU * 1e6, "chimedCPUMicrosPerCommand": cpu * 1e6,
                "rateRatio": rate / relayRate, "cpuRatio": cpu / relayCPU, "runs": rates[store.rawValue]!,
            ]
            rows.append(
                (
                    "ingest\(on): ok replies/s ÷ relay's", String(format: "%.0f ÷ %.0f", rate, relayRate),
                    ratio(rate / relayRate), store == .directory ? "≥ 0.9" : ""
                )
            )
            rows.append(
                (
                    "ingest\(on): CPU per command ÷ relay's",
                    String(format: "%.1f µs ÷ %.1f µs", cpu * 1e6, relayCPU * 1e6),
                    ratio(cpu / relayCPU), store == .directory ? "≤ 2" : ""
                )
            )
            if store != .directory {
                let directory = median(rates[Store.directory.rawValue]!)
                figures["directoryRatio"] = rate / directory
                rows.append(
                    (
                        "ingest\(on) ÷ on the data directory", String(format: "%.0f ÷ %.0f", rate, directory),
                        ratio(rate / directory), "≥ 0.5"
                    )
                )
            }
            results[store == .directory ? "ingest" : "ingestPostgres"] = figures
        }
    }

    /// The ingest workload: `n` schedule commands over 2,000 devices, each a notification a
    /// month ahead (the instant returned), with the benchmark's body and userInfo.
    static func ingestCommands(_ n: Int) -> (commands: [(String, [UInt8])], far: String) {
        let far = Instant(milliseconds: wallMilliseconds() + 30 * 86_400_000).rfc3339()
        let commands: [(String, [UInt8])] = (0..<n).map { i in
            (
                "\(prefix)/d\(i % 2000)/cmd/schedule",
                Array(#"{"id":"i\#(i)","fireDate":"\#(far)","alertBody":"\#(body)","userInfo":\#(userInfo)}"#.utf8)
            )
        }
        return (commands, far)
    }

    /// One relay run over `commands`: replies per second and CPU seconds per command.
    func relayRound(_ commands: [(String, [UInt8])], url: String, me: String) throws -> (Double, Double) {
        let relay = try ChildProcess(me, arguments: ["relay", url, Self.prefix])
        try relay.start()
        guard try runSync({ await relay.waitForLine(timeout: .seconds(30)) { $0 == "ready" } }) != nil else {
            throw BenchError("relay did not start")
        }
        let load = try LoadClient(url: url, clientId: "bench-load-relay", window: 1000)
        try load.start()
        _ = try load.run(Array(commands.prefix(2000)))  // warm up
        let cpu0 = cpuSeconds(pid: relay.pid) ?? 0
        let r = try load.run(commands)
        let cpu = (cpuSeconds(pid: relay.pid) ?? 0) - cpu0
        load.stop()
        relay.terminate()
        try runSync { await relay.waitForExit(timeout: .seconds(10)) }
        return (Double(r.replies) / r.seconds, cpu / Double(commands.count))
    }

    /// One chimed run over `commands` on a fresh store: ok replies per second and CPU
    /// seconds per command.
    func chimedRound(
        _ commands: [(String, [UInt8])],
        url: String,
        chimed: String,
        far: String,
        store: Store
    ) throws -> (Double, Double) {
        let data = try TemporaryDirectory(prefix: "chime-bench")
        let worker = try startChimed(chimed, url: url, data: data.path, perDeviceLimits: true, store: store)
        let load = try LoadClient(url: url, clientId: "bench-load-chimed", window: 1000)
        try load.start()
        _ = try load.run(
            (0..<2000).map { i in
                ("\(Self.prefix)/warm\(i % 100)/cmd/schedule", Array(#"{"id":"w\#(i)","fireDate":"\#(far)"}"#.utf8))
            }
        )
        let cpu0 = cpuSeconds(pid: worker.process.pid) ?? 0
        let c = try load.run(commands)
        let cpu = (cpuSeconds(pid: worker.process.pid) ?? 0) - cpu0
        load.stop()
        stop(worker)
        guard c.ok == commands.count else {
            throw BenchError("ingest: \(c.ok) ok replies, expected \(commands.count)")
        }
        return (Double(c.replies) / c.seconds, cpu / Double(commands.count))
    }

    /// A million notifications due at the same instant: the pump, then chimed; round after round
    /// with a baseline.
    mutating func burst(url: String, chimed: String, me: String) throws {
        let n = sizes.burst
        let devices = 1000
        let rounds = baseline == nil ? 1 : (quick ? 2 : 3)
        say("burst: \(n) notifications due at one instant over \(devices) devices, default limits, \(rounds) round(s)")
        var pumpRates: [Double] = []
        var rates: [String: [Double]] = [:]
        var cpus: [String: [Double]] = [:]
        var last: [String: DeliveryCollector.Snapshot] = [:]
        for round in 0..<rounds {
            let pumpRate = try pumpRound(url: url, me: me, count: n, devices: devices)
            pumpRates.append(pumpRate)
            say(String(format: "  pump:   %8.0f deliveries/s", pumpRate))
            for variant in variants(chimed: chimed, round: round) {
                let (rate, cpu, b) = try burstRound(url: url, variant: variant, count: n, devices: devices)
                rates[variant.name, default: []].append(rate)
                cpus[variant.name, default: []].append(cpu)
                last[variant.name] = b
                say(
                    String(
                        format:
                            "  chimed: %8.0f deliveries/s from the due instant to the last arrival, %.1f µs CPU a delivery; lateness p50 %.0f ms, p99 %.0f ms, max %.0f ms (%@)",
                        rate,
                        cpu * 1e6,
                        b.worker.quantile(0.5),
                        b.worker.quantile(0.99),
                        b.worker.max,
                        variant.name
                    )
                )
            }
        }
        compare("burst", [("deliveries/s", rates, "≥ 1"), ("CPU per delivery", cpus, "≤ 1")])
        let pumpRate = median(pumpRates)
        var directoryRate: Double?
        for store in stores {
            let rate = median(rates[store.rawValue]!)
            let b = last[store.rawValue]!
            let lateness = b.worker
            var figures: [String: Any] = [
                "notifications": n, "pumpDeliveriesPerSecond": pumpRate, "chimedDeliveriesPerSecond": rate,
                "ratio": rate / pumpRate, "runs": rates[store.rawValue]!,
                "chimedCPUMicrosPerDelivery": median(cpus[store.rawValue]!) * 1e6,
                "latenessMs": quantiles(lateness), "arrivalLatenessMs": quantiles(b.arrival),
            ]
            let on = store == .directory ? "" : " on \(store.rawValue)"
            rows.append(
                (
                    "burst\(on): deliveries/s ÷ pump's", String(format: "%.0f ÷ %.0f", rate, pumpRate),
                    ratio(rate / pumpRate), store == .directory ? "≥ 0.9" : ""
                )
            )
            rows.append(
                (
                    "burst\(on): lateness p50 / p99 / max",
                    String(
                        format: "%.0f / %.0f / %.0f ms",
                        lateness.quantile(0.5),
                        lateness.quantile(0.99),
                        lateness.max
                    ),
                    "", ""
                )
            )
            if let directoryRate {
                figures["directoryRatio"] = rate / directoryRate
                rows.append(
                    (
                        "burst\(on) ÷ on the data directory", String(format: "%.0f ÷ %.0f", rate, directoryRate),
                        ratio(rate / directoryRate), "≥ 0.8"
                    )
                )
            } else {
                directoryRate = rate
            }
            results[store == .directory ? "burst" : "burstPostgres"] = figures
        }
    }

    /// The pump publishes `count` deliveries as fast as the broker takes them: deliveries per
    /// second as the subscriber received them. The subscriber parses each delivery's times, as
    /// in chimed's rounds, so that its work (it shares the cores) weighs the same.
    func pumpRound(url: String, me: String, count n: Int, devices: Int) throws -> Double {
        let collector = try DeliveryCollector(url: url, measure: true)
        try collector.start(filter: "\(Self.prefix)/+/notifications")
        defer { collector.stop() }
        let pump = try ChildProcess(me, arguments: ["pump", url, Self.prefix, "\(n)", "\(devices)"])
        try pump.start()
        guard waitUntil(timeout: 600, { collector.count >= n }) else {
            throw BenchError("pump: only \(collector.count) of \(n) arrived")
        }
        try runSync { await pump.waitForExit(timeout: .seconds(30)) }
        let p = collector.snapshot
        return Double(p.count) / (p.last - p.first)
    }

    /// One chimed run of the burst on a fresh store: deliveries per second from the due instant
    /// to the last arrival, chimed's CPU seconds a delivery over that time, and the deliveries.
    func burstRound(
        url: String,
        variant: Variant,
        count n: Int,
        devices: Int
    ) throws -> (Double, Double, DeliveryCollector.Snapshot) {
        let data = try TemporaryDirectory(prefix: "chime-bench")
        let worker = try startChimed(
            variant.path,
            url: url,
            data: data.path,
            perDeviceLimits: true,
            store: variant.store
        )
        let measured = try DeliveryCollector(url: url, measure: true)
        try measured.start(filter: "\(Self.prefix)/+/notifications")
        let load = try LoadClient(url: url, clientId: "bench-load-burst", window: 20)
        try load.start()
        let due = try loadDueAtOneInstant(load: load, count: n, devices: devices)
        let dueMono = monotonicSeconds() + Double(due.milliseconds - wallMilliseconds()) / 1000
        if dueMono > monotonicSeconds() + 0.05 { usleep(UInt32((dueMono - monotonicSeconds() - 0.05) * 1e6)) }
        let cpu0 = cpuSeconds(pid: worker.process.pid) ?? 0
        guard waitUntil(timeout: 900, { measured.count >= n }) else {
            throw BenchError("burst: only \(measured.count) of \(n) delivered (\(variant.name))")
        }
        let cpu = (cpuSeconds(pid: worker.process.pid) ?? 0) - cpu0
        let b = measured.snapshot
        measured.stop()
        load.stop()
        stop(worker)
        return (Double(b.count) / (b.last - dueMono), cpu / Double(n), b)
    }

    /// Schedules `count` one-shots due at one instant, far enough ahead for the loading to finish
    /// first (measured on a sample); returns that instant.
    func loadDueAtOneInstant(load: LoadClient, count: Int, devices: Int) throws -> Instant {
        let batch = 500
        let perSecond = try loadingRate(load)
        let due = Instant(milliseconds: firstDue(loading: count, perSecond: perSecond))
        say(String(format: "  loading at about %.0f notifications/s; due at %@", perSecond, due.rfc3339()))
        _ = try load.run(
            Self.batches(prefix: "burst", count: count, devices: devices, batch: batch) { _ in due },
            timeout: 3600
        )
        let left = Double(due.milliseconds - wallMilliseconds()) / 1000
        if left < 1 { say(String(format: "  warning: loading ended %.1f s after the due instant", -left)) }
        return due
    }

    /// Notifications a second that `load` schedules in batches of 500, measured on 10,000 far off
    /// over 20 devices `cal-k`.
    func loadingRate(_ load: LoadClient) throws -> Double {
        let far = Instant(milliseconds: wallMilliseconds() + 30 * 86_400_000)
        let sample = try load.run(Self.batches(prefix: "cal", count: 10_000, devices: 20, batch: 500) { _ in far })
        return Double(10_000) / sample.seconds
    }

    /// The first due instant (epoch ms) for `count` notifications about to be loaded at `perSecond`:
    /// far enough ahead for the loading to finish first.
    func firstDue(loading count: Int, perSecond: Double) -> Int64 {
        wallMilliseconds() + Int64(Double(count) / perSecond * 1500) + 5000
    }

    /// `rate` one-shots a second falling due for `seconds` from `start` (epoch ms), spread over
    /// 1,000 devices `s-k` in batches of 500: the deliveries the steady and hostile workloads time.
    func steadyCommands(rate: Int, seconds: Int, start: Int64) -> [(String, [UInt8])] {
        Self.batches(prefix: "s", count: rate * seconds, devices: 1000, batch: 500) { j in
            Instant(milliseconds: start + Int64(j) * 1000 / Int64(rate))
        }
    }

    /// Waits for the `count` deliveries of ``steadyCommands(rate:seconds:start:)`` and stops
    /// `measured`: what it saw, whose `worker` samples are the lateness the table reports.
    func steadyDeliveries(
        _ measured: DeliveryCollector,
        count: Int,
        seconds: Int,
        workload: String
    ) throws -> DeliveryCollector.Snapshot {
        guard waitUntil(timeout: Double(seconds) + 600, { measured.count >= count }) else {
            throw BenchError("\(workload): only \(measured.count) of \(count) delivered")
        }
        let d = measured.snapshot
        measured.stop()
        return d
    }

    /// Schedule commands of `batch` notifications each, `count` in all, over `devices` devices
    /// `prefix-k`: notification `j` is `prefix` + `j`, due at `due(j)`.
    static func batches(
        prefix: String,
        count: Int,
        devices: Int,
        batch: Int,
        due: (Int) -> Instant
    ) -> [(String, [UInt8])] {
        var out: [(String, [UInt8])] = []
        var i = 0
        while i < count {
            let device = "\(prefix)-\((i / batch) % devices)"
            var items: [String] = []
            for j in i..<min(count, i + batch) {
                items.append(
                    #"{"id":"\#(prefix)\#(j)","fireDate":"\#(due(j).rfc3339())","alertBody":"\#(Self.body)","userInfo":\#(Self.userInfo)}"#
                )
            }
            out.append(
                (
                    "\(Self.prefix)/\(device)/cmd/schedule",
                    Array(#"{"notifications":[\#(items.joined(separator: ","))]}"#.utf8)
                )
            )
            i += batch
        }
        return out
    }

    /// What receipts cost: N deliveries to devices with receipts that never acknowledge, each
    /// kept in an inbox and a history, against the same deliveries without receipts (whose
    /// notifications were loaded and freed alike): the difference in the worker's memory, per
    /// delivery kept, beyond the delivery's own bytes.
    mutating func receipts(url: String, chimed: String) throws {
        let n = sizes.burst / 2
        let devices = 1000
        let perDevice = n / devices
        say("receipts: \(n) deliveries over \(devices) devices, without receipts, then kept unacknowledged")
        let without = try rssAfterDeliveries(url: url, chimed: chimed, count: n, devices: devices, extra: [])
        let with = try rssAfterDeliveries(
            url: url,
            chimed: chimed,
            count: n,
            devices: devices,
            extra: [
                "--receipts", "true", "--max-inbox-per-device", "\(perDevice)", "--history-per-device", "\(perDevice)",
            ]
        )
        let perKept = Double(with.grown - without.grown) / Double(n) - with.payload
        say(
            String(
                format:
                    "  memory: %.0f B RSS per unacknowledged delivery (inbox and history) beyond its %.0f B payload",
                perKept,
                with.payload
            )
        )
        results["receipts"] = [
            "deliveries": n, "devices": devices, "rssGrowthWithout": without.grown, "rssGrowthWith": with.grown,
            "payloadBytes": with.payload, "bytesPerDeliveryBeyondPayload": perKept,
        ]
        rows.append(
            ("receipts: RSS per unacknowledged delivery beyond its payload", String(format: "%.0f B", perKept), "", "")
        )
    }

    /// How much chimed (with `extra` flags) grew from before `count` one-shots were loaded to
    /// after they were all delivered and recorded, and the deliveries' mean size.
    func rssAfterDeliveries(
        url: String,
        chimed: String,
        count n: Int,
        devices: Int,
        extra: [String]
    ) throws
        -> (grown: Int, payload: Double)
    {
        let data = try TemporaryDirectory(prefix: "chime-bench")
        let worker = try startChimed(chimed, url: url, data: data.path, extra: extra)
        let measured = try DeliveryCollector(url: url, measure: false)
        try measured.start(filter: "\(Self.prefix)/+/notifications")
        let load = try LoadClient(url: url, clientId: "bench-load-receipts", window: 20)
        try load.start()
        let rss0 = residentBytes(pid: worker.process.pid) ?? 0
        _ = try loadDueAtOneInstant(load: load, count: n, devices: devices)
        guard waitUntil(timeout: 900, { measured.count >= n }) else {
            throw BenchError("receipts: only \(measured.count) of \(n) delivered")
        }
        // The last deliveries' records follow their PUBACKs; a command answered after them
        // comes after those records.
        _ = try load.run([("\(Self.prefix)/burst-\(devices - 1)/cmd/history", Array(#"{"limit":1}"#.utf8))])
        let rss1 = residentBytes(pid: worker.process.pid) ?? 0
        let payload = Double(measured.payloadBytes) / Double(measured.count)
        load.stop()
        measured.stop()
        stop(worker)
        return (rss1 - rss0, payload)
    }

    /// A million pending, of which 2,000 fall due per second for 60 s; memory per pending;
    /// cancel by tag; a snapshot; recovery time with a snapshot and journal records after it.
    mutating func steady(url: String, chimed: String) throws {
        let f = try pending(url: url, chimed: chimed, big: sizes.pendingBig, extraRecords: sizes.extraRecords)
        rows.append(("memory: RSS per pending beyond content", String(format: "%.0f B", f.perPending), "", "≤ 400 B"))
        rows.append(
            ("memory, with the userInfo index built", String(format: "%.0f B", f.perPendingIndexed), "", "≤ 400 B")
        )
        rows.append(("memory after recovery", String(format: "%.0f B", f.perPendingRecovered), "", ""))
        results["memory"] = [
            "pending": f.total, "rssBefore": f.rss.before, "rssAfter": f.rss.loaded, "rssWithIndex": f.rss.indexed,
            "contentBytes": f.contentBytes, "bytesPerPendingBeyondContent": f.perPending,
            "bytesPerPendingWithIndex": f.perPendingIndexed, "bytesPerPendingAfterRecovery": f.perPendingRecovered,
        ]
        results["cancelByTag"] = [
            "pending": f.total, "medianMs": f.cancel.quantile(0.5), "firstMatchMs": f.firstMatchMs,
            "p99Ms": f.cancel.quantile(0.99), "listByTagMedianMs": f.list.quantile(0.5),
            "deviceReadMedianMs": f.read.quantile(0.5),
        ]
        rows.append(
            (
                "cancel by tag among \(f.total): reply latency (median)",
                String(format: "%.2f ms", f.cancel.quantile(0.5)), "", "≤ 1 ms"
            )
        )
        rows.append(
            ("list by tag (the same lookup, no write)", String(format: "%.2f ms", f.list.quantile(0.5)), "", "")
        )
        let l = f.lateness
        results["steady"] = [
            "pending": f.total, "perSecond": sizes.steadyRate, "seconds": sizes.steadySeconds,
            "latenessMs": quantiles(l), "arrivalLatenessMs": quantiles(f.arrival),
        ]
        rows.append(
            (
                "steady: lateness p50 / p99 / p99.9",
                String(format: "%.0f / %.0f / %.0f ms", l.quantile(0.5), l.quantile(0.99), l.quantile(0.999)), "",
                "p99 ≤ 5 ms"
            )
        )
        results["snapshot"] = f.snapshot.json
        rows.append(
            (
                "snapshot of \(f.total): time, size, longest loop turn meanwhile",
                String(
                    format: "%.1f s, %@, ≤ %.0f ms",
                    f.snapshot.seconds,
                    f.snapshot.size,
                    f.snapshot.longestStepAtMostMs
                ), "", ""
            )
        )
        results["recovery"] = [
            "secondsToFirstCommand": f.recoveryMedian, "runs": f.recovery, "logs": f.recoveryLogs,
        ]
        rows.append(
            (
                "recovery: start to first command served (median of 3)",
                String(
                    format: "%.2f s (%@)",
                    f.recoveryMedian,
                    f.recovery.map { String(format: "%.2f", $0) }.joined(separator: ", ")
                ),
                "", "≤ 3 s"
            )
        )
    }

    // MARK: Helpers

    /// - Parameters:
    ///   - perDeviceLimits: keep chimed's default per-device limits, every protection on (ingest,
    ///     burst, batch, hostile); the others lift them, as one of their devices holds and sends far
    ///     more than one device should.
    ///   - store: where its journal goes; nil: ``store``.
    func startChimed(
        _ path: String,
        url: String,
        data: String,
        perDeviceLimits: Bool = false,
        extra: [String] = [],
        store: Store? = nil
    ) throws -> Chimed {
        var storeFlags: [String] = []
        if (store ?? self.store) == .postgres {
            let server = try runSync { try await TestPostgres.start(.init(fsync: true)) }
            Self.databases.withLock { $0.append(server) }
            storeFlags = ["--store", server.uri]
        }
        let worker = try Chimed(
            dataDirectory: data,
            url: url,
            path: path,
            perDeviceLimits: perDeviceLimits,
            extra: extra + storeFlags + (metricsPort.map { ["--metrics-listen", "127.0.0.1:\($0)"] } ?? [])
        )
        try worker.startServing()
        if let port = metricsPort { Scraper.start(port: port, while: worker) }
        return worker
    }

    func stop(_ worker: Chimed) {
        worker.process.terminate()
        _ = try? runSync { await worker.process.waitForExit(timeout: .seconds(60)) }
        // Its database goes with it, as its data directory does.
        for server in Self.databases.withLock({ list in
            defer { list.removeAll() }; return list
        }) {
            _ = try? runSync { await server.stop() }
        }
    }

    /// The PostgreSQL of the chimed running now (`--store postgres`).
    static let databases = Mutex<[TestPostgres]>([])

    func quantiles(_ s: Samples) -> [String: Any] {
        [
            "p50": s.quantile(0.5), "p90": s.quantile(0.9), "p99": s.quantile(0.99), "p999": s.quantile(0.999),
            "max": s.max, "count": s.count, "distribution": s.distribution,
        ]
    }

    func ratio(_ r: Double) -> String { String(format: "%.2f", r) }

    func table() -> String {
        var lines = ["| workload | measured | ratio | target |", "|---|---|---|---|"]
        for (a, b, c, d) in rows { lines.append("| \(a) | \(b) | \(c) | \(d) |") }
        return lines.joined(separator: "\n")
    }
}

extension Chimed {
    /// Starts it and waits (a minute at most) until it serves.
    func startServing() throws {
        try process.start()
        guard
            try runSync({ [self] in
                await process.waitForLine(onStandardError: true, timeout: .seconds(60)) { $0.contains(" serving ") }
            }) != nil
        else {
            throw BenchError("chimed did not start:\n\(log)")
        }
    }

    /// chimed as the benchmark runs it: release, fsync always, no stats, quiet logs.
    convenience init(
        dataDirectory: String,
        url: String,
        path: String,
        perDeviceLimits: Bool = false,
        extra: [String] = []
    ) throws {
        var arguments = [
            "--broker", url, "--data-dir", dataDirectory, "--worker-id", "bench", "--log-level", "info",
            "--stats-interval", "0", "--fsync", "always",
        ]
        // Devices of the most a device may hold (880,000 notifications, up to 9,880,000 in
        // bench-scale, spread over them), loaded as fast as chimed takes them.
        if !perDeviceLimits {
            arguments += [
                "--max-pending-per-device", "\(DeviceLimits.maxPendingPerDevice)", "--max-bytes-per-device",
                "1099511627776", "--device-rate", "0",
            ]
        }
        try self.init(executable: path, arguments: try Self.arguments(arguments + extra, knownTo: path))
    }
}

/// Runs async test-support code from the synchronous benchmark.
@discardableResult
func runSync<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// Starts `body` on a thread of its own; the function returned waits for its result.
func inBackground<T: Sendable>(_ body: @escaping @Sendable () throws -> T) -> () throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Thread {
        box.result = Result { try body() }
        done.signal()
    }.start()
    return {
        done.wait()
        return try box.result!.get()
    }
}

final class ResultBox<T>: @unchecked Sendable {
    // Written once by the task before it signals; read after the wait.
    var result: Result<T, any Error>?
}

/// Scrapes chimed's `/metrics` every 100 ms, as an eager Prometheus would, until it exits.
enum Scraper {
    static func start(port: Int, while worker: Chimed) {
        Thread.detachNewThread {
            var scrapes = 0
            var failures = 0
            while worker.process.isRunning {
                if (try? HTTPProbe.get(port: port, "/metrics").status) == 200 { scrapes += 1 } else { failures += 1 }
                Thread.sleep(forTimeInterval: 0.1)
            }
            say("  metrics: \(scrapes) scrapes of /metrics while chimed ran (\(failures) failed)")
        }
    }
}
