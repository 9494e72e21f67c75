import ChimeCore
import ChimeHarness
import ChimeTime
import Foundation

/// What one chimed holding many pending notifications costs: the `steady` workload of
/// `make bench` (a million) and each size of `make bench-scale`.
struct PendingFigures {
    var total: Int
    /// From the first command of the load to the steady ones loaded: the memory readings, the
    /// first match and the cancel and list samples between them included.
    var loadSeconds: Double
    /// RSS per pending notification beyond its content, before and after the big device's userInfo
    /// index is built by its first match (which took `firstMatchMs`).
    var perPending: Double
    var perPendingIndexed: Double
    /// The same after the last recovery, once it served (the index is not built then): what a
    /// restarted chimed holds.
    var perPendingRecovered: Double
    var contentBytes: Int
    var rss: (before: Int, loaded: Int, indexed: Int)
    var firstMatchMs: Double
    /// Round trips in milliseconds, one at a time.
    var cancel: Samples
    var list: Samples
    var read: Samples
    /// Steady deliveries: firedAt - fireDate and arrival - fireDate, in milliseconds.
    var lateness: Samples
    var arrival: Samples
    /// Snapshots chimed began on its own (its journal's `--snapshot-bytes`) during the steady window.
    var snapshotsInWindow: Int
    var snapshot: SnapshotFigures
    /// Start to first command served after each kill -9.
    var recovery: [Double]
    var recoveryLogs: [[String]]

    var recoveryMedian: Double { median(recovery) }

    var json: [String: Any] {
        [
            "pending": total, "loadSeconds": loadSeconds, "contentBytes": contentBytes,
            "bytesPerPendingBeyondContent": perPending, "bytesPerPendingWithIndex": perPendingIndexed,
            "bytesPerPendingAfterRecovery": perPendingRecovered,
            "rssBefore": rss.before, "rssAfter": rss.loaded, "rssWithIndex": rss.indexed,
            "firstMatchMs": firstMatchMs,
            "cancelByTagMs": ["median": cancel.quantile(0.5), "p99": cancel.quantile(0.99)],
            "listByTagMedianMs": list.quantile(0.5), "deviceReadMedianMs": read.quantile(0.5),
            "snapshot": snapshot.json, "snapshotsDuringSteady": snapshotsInWindow, "recoverySeconds": recovery,
            "recoveryMedianSeconds": recoveryMedian,
            "recoveryLogs": recoveryLogs,
        ]
    }
}

/// A snapshot of everything pending, requested with SIGUSR1 while nothing else happens.
struct SnapshotFigures {
    /// From the signal to chimed's `snapshot written` line.
    var seconds: Double
    /// The snapshot file's size (the data directory only; nil on PostgreSQL).
    var bytes: Int?
    /// RSS when the snapshot was asked for, and the most it reached until it was written.
    var rssBefore: Int
    var rssPeak: Int
    /// chimed's loop turns meanwhile (its `chime_loop_step_seconds` histogram, read before and
    /// after): how many, how many over 20 ms, and the upper bound of the bucket of the longest.
    var steps: Int
    var stepsOver20ms: Int
    var longestStepAtMostMs: Double

    /// The size for a table: in MB, or why there is none.
    var size: String { bytes.map { String(format: "%.0f MB", Double($0) / 1e6) } ?? "no file (PostgreSQL)" }

    var json: [String: Any] {
        [
            "seconds": seconds, "bytes": bytes ?? NSNull(), "rssBefore": rssBefore, "rssPeak": rssPeak,
            "peakExtraBytes": rssPeak - rssBefore, "loopSteps": steps, "loopStepsOver20ms": stepsOver20ms,
            "longestLoopStepAtMostMs": longestStepAtMostMs,
        ]
    }
}

extension SystemBenchmark {
    /// Loads `big` notifications on devices of the most a device may hold (`big0`, `big1`, ...; ten
    /// to a userInfo tag) and the steady ones
    /// (`steadyRate` a second falling due for `steadySeconds`) over 1,000 others; measures memory,
    /// cancel and list by tag, the steady lateness, a snapshot of it all, and recovery from kill -9
    /// with `extraRecords` journal records after that snapshot (three times).
    mutating func pending(url: String, chimed: String, big bigCount: Int, extraRecords: Int) throws -> PendingFigures {
        let s = sizes
        let data = try TemporaryDirectory(prefix: "chime-bench")
        // Its /metrics tells how long the loop's turns were during the snapshot.
        let metrics = try metricsPort ?? TestBroker.freePort()
        var worker = try startChimed(
            chimed,
            url: url,
            data: data.path,
            extra: metricsPort == nil ? ["--metrics-listen", "127.0.0.1:\(metrics)"] : []
        )
        let rss0 = residentBytes(pid: worker.process.pid) ?? 0
        let load = try LoadClient(url: url, clientId: "bench-load-steady", window: 20)
        try load.start()
        let steadyCount = s.steadyRate * s.steadySeconds
        let total = bigCount + steadyCount
        // Subscribed before anything falls due, so that no delivery is missed.
        let measured = try DeliveryCollector(url: url, measure: true)
        try measured.start(filter: "\(Self.prefix)/+/notifications")
        say("pending: \(total) pending, \(s.steadyRate)/s falling due for \(s.steadySeconds) s")

        // The big devices: tags with ten notifications each, for cancel by tag; each device holds
        // the most a device may. Sent a million at a time, so that the load's own memory stays
        // small beside chimed's.
        let perDevice = DeviceLimits.maxPendingPerDevice
        let far = Instant(milliseconds: wallMilliseconds() + 30 * 86_400_000).rfc3339()
        let loadStart = monotonicSeconds()
        var loadedSeconds = 0.0
        for chunk in stride(from: 0, to: bigCount, by: 1_000_000) {
            var big: [(String, [UInt8])] = []
            for i in stride(from: chunk, to: min(bigCount, chunk + 1_000_000), by: 500) {
                var items: [String] = []
                for j in i..<min(bigCount, i + 500) {
                    items.append(
                        #"{"id":"g\#(j)","fireDate":"\#(far)","alertBody":"\#(Self.body)","userInfo":{"tag":"t\#(j / 10)","b":"two","c":true}}"#
                    )
                }
                big.append(
                    (
                        "\(Self.prefix)/big\(i / perDevice)/cmd/schedule",
                        Array(#"{"notifications":[\#(items.joined(separator: ","))]}"#.utf8)
                    )
                )
            }
            loadedSeconds += try load.run(big, timeout: 3600).seconds
        }
        let perSecond = Double(bigCount) / loadedSeconds

        // Memory, with the big device loaded, once the snapshots its journal set off are written
        // (one in progress holds a frozen copy of the state).
        try snapshotsWritten(worker)
        let rss1 = residentBytes(pid: worker.process.pid) ?? 0
        let content = Self.taggedContentBytes
        let perPending = Double(rss1 - rss0) / Double(bigCount) - Double(content)
        say(
            String(
                format: "  memory: %.0f B RSS per pending notification beyond its %d B of content",
                perPending,
                content
            )
        )

        // Cancel by tag: ten matches among everything a device holds, on the first big device.
        let tags = min(bigCount, perDevice) / 10
        let cancels = (0..<s.cancelSamples).map { k in
            ("\(Self.prefix)/big0/cmd/cancel", Array(#"{"match":{"userInfo":{"tag":"t\#(k * 997 % tags)"}}}"#.utf8))
        }
        let reads = (0..<s.cancelSamples).map { _ in ("\(Self.prefix)/big0/cmd/device", Array("{}".utf8)) }
        // The same lookups without the journal write: a list by tag.
        let lookups = (0..<s.cancelSamples).map { k in
            ("\(Self.prefix)/big0/cmd/list", Array(#"{"match":{"userInfo":{"tag":"t\#((k * 997 + 1) % tags)"}}}"#.utf8))
        }
        let serial = try LoadClient(url: url, clientId: "bench-serial", window: 1)
        try serial.start()
        // The first match on a device builds its userInfo index (see Engine.matching).
        let first = try serial.run(
            [("\(Self.prefix)/big0/cmd/list", Array(#"{"match":{"userInfo":{"tag":"t1"}}}"#.utf8))],
            measureLatency: true
        )
        let firstMs = first.latencies.quantile(0.5) * 1000
        let rss2 = residentBytes(pid: worker.process.pid) ?? 0
        let perPendingIndexed = Double(rss2 - rss0) / Double(bigCount) - Double(content)
        say(
            String(
                format: "  first match on the big device (builds its index): %.0f ms; memory then %.0f B per pending",
                firstMs,
                perPendingIndexed
            )
        )
        let cancelled = try serial.run(cancels, measureLatency: true)
        let read = try serial.run(reads, measureLatency: true)
        let listed = try serial.run(lookups, measureLatency: true)
        serial.stop()
        let cancel = Samples(values: cancelled.latencies.values.map { $0 * 1000 })
        let list = Samples(values: listed.latencies.values.map { $0 * 1000 })
        let deviceRead = Samples(values: read.latencies.values.map { $0 * 1000 })
        say(
            String(
                format:
                    "  cancel by tag: median %.2f ms round trip, with its fdatasync (list by tag: %.2f ms; a device read: %.2f ms)",
                cancel.quantile(0.5),
                list.quantile(0.5),
                deviceRead.quantile(0.5)
            )
        )

        // The steady ones, after the index is built (which holds the loop for as long as it takes):
        // due evenly from T over the window, spread over 1000 devices.
        let start = firstDue(loading: steadyCount, perSecond: perSecond)
        _ = try load.run(steadyCommands(rate: s.steadyRate, seconds: s.steadySeconds, start: start), timeout: 3600)
        let loadSeconds = monotonicSeconds() - loadStart
        say(
            String(
                format: "  loaded in %.0f s with the samples between (the big device at %.0f notifications/s)",
                loadSeconds,
                perSecond
            )
        )

        // The steady window, with the snapshots the journal sets off meanwhile, as in production.
        let startedBefore = Self.snapshotLines(worker, "snapshot started")
        let d = try steadyDeliveries(measured, count: steadyCount, seconds: s.steadySeconds, workload: "steady")
        let snapshotsInWindow = Self.snapshotLines(worker, "snapshot started") - startedBefore
        say(
            String(
                format:
                    "  lateness p50 %.0f ms, p99 %.0f ms, p99.9 %.0f ms (arrival p99 %.0f ms); %d snapshots began meanwhile",
                d.worker.quantile(0.5),
                d.worker.quantile(0.99),
                d.worker.quantile(0.999),
                d.arrival.quantile(0.99),
                snapshotsInWindow
            )
        )

        let snapshot = try snapshotEverything(worker, data: data.path, metricsPort: metrics)

        // Recovery: journal records after the snapshot, then kill -9.
        let extra = (0..<extraRecords).map { k in
            (
                "\(Self.prefix)/x\(k % 1000)/cmd/schedule",
                Array(#"{"id":"x\#(k)","fireDate":"\#(far)","alertBody":"\#(Self.body)"}"#.utf8)
            )
        }
        let window = try LoadClient(url: url, clientId: "bench-load-extra", window: 1000)
        try window.start()
        _ = try window.run(extra, timeout: 3600)
        window.stop()
        load.stop()
        // Killed and started again three times: the figure is the median (this machine's page
        // faults cost more or less from one run to the next).
        var times: [Double] = []
        var logs: [[String]] = []
        for _ in 0..<3 {
            worker.process.kill()
            let killed = worker
            try runSync { await killed.process.waitForExit(timeout: .seconds(30)) }
            let started = monotonicSeconds()
            // The same flags: the same data directory, or the same PostgreSQL (kept running).
            worker = try Chimed(executable: chimed, arguments: killed.arguments)
            try worker.process.start()
            let probe = try LoadClient(url: url, clientId: "bench-probe", window: 1)
            try probe.start()
            var served: Double?
            while served == nil && monotonicSeconds() - started < 600 {
                if let r = try? probe.run([("\(Self.prefix)/big0/cmd/device", Array("{}".utf8))], timeout: 0.05),
                    r.ok > 0
                {
                    served = monotonicSeconds() - started
                }
            }
            probe.stop()
            guard let served else { throw BenchError("recovery: no reply within 600 s") }
            let recoveryLine = worker.process.standardErrorLines.first { $0.contains("snapshotEntries") } ?? ""
            let readyLine = worker.process.standardErrorLines.first { $0.contains(" ready ") } ?? ""
            say(String(format: "  recovery: first command served %.2f s after start", served))
            say("    \(recoveryLine)\n    \(readyLine)")
            times.append(served)
            logs.append([recoveryLine, readyLine])
        }
        // Memory after the last recovery. What it holds is the big device's notifications less
        // the cancelled ones, and the journal tail's and the steady ones not yet delivered
        // (plainContentBytes), as many in all as its ready line says.
        let recovered = logs.last?.last.flatMap { line in
            line.split(separator: " ").first { $0.hasPrefix("notifications=") }.flatMap { Int($0.dropFirst(14)) }
        }
        guard let recovered, recovered > 0 else {
            throw BenchError("recovery: no notification count in its ready line")
        }
        let bigLeft = min(recovered, bigCount - 10 * s.cancelSamples)
        let recoveredContent = bigLeft * content + (recovered - bigLeft) * Self.plainContentBytes
        let perPendingRecovered =
            Double((residentBytes(pid: worker.process.pid) ?? 0) - rss0 - recoveredContent) / Double(recovered)
        say(String(format: "  memory after the last recovery: %.0f B per pending beyond content", perPendingRecovered))
        stop(worker)
        return PendingFigures(
            total: total,
            loadSeconds: loadSeconds,
            perPending: perPending,
            perPendingIndexed: perPendingIndexed,
            perPendingRecovered: perPendingRecovered,
            contentBytes: content,
            rss: (rss0, rss1, rss2),
            firstMatchMs: firstMs,
            cancel: cancel,
            list: list,
            read: deviceRead,
            lateness: d.worker,
            arrival: d.arrival,
            snapshotsInWindow: snapshotsInWindow,
            snapshot: snapshot,
            recovery: times,
            recoveryLogs: logs
        )
    }

    /// Asks `worker` for a snapshot (SIGUSR1) and waits for it: how long it took, its size, the
    /// memory it needed on top, and how long the loop's turns were meanwhile.
    func snapshotEverything(_ worker: Chimed, data: String, metricsPort: Int) throws -> SnapshotFigures {
        try snapshotsWritten(worker)
        let pid = worker.process.pid
        // /metrics shows what the loop handed it last, at most every 250 ms and, when idle, on
        // its wake-up at least once a second: waits on either side put the snapshot's turns
        // between the two readings (with idle wake-ups, a fraction of a millisecond each).
        Thread.sleep(forTimeInterval: 2.5)
        let before = try loopSteps(port: metricsPort)
        // Writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS.
        try? "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
        let rssBefore = residentBytes(pid: pid) ?? 0
        let asked = monotonicSeconds()
        let written = Self.snapshotLines(worker, "snapshot written")
        worker.process.signal(SIGUSR1)
        guard waitUntil(timeout: 1800, { Self.snapshotLines(worker, "snapshot written") > written }) else {
            throw BenchError("no snapshot:\n\(worker.log)")
        }
        let seconds = monotonicSeconds() - asked
        let peak = peakResidentBytes(pid: pid) ?? 0
        Thread.sleep(forTimeInterval: 2.5)
        let after = try loopSteps(port: metricsPort)
        let steps = after.count - before.count
        let over = steps - ((after.buckets[0.02] ?? 0) - (before.buckets[0.02] ?? 0))
        // The longest is in the first bucket that holds every turn made meanwhile.
        let longest =
            after.buckets.keys.sorted().first { after.buckets[$0]! - (before.buckets[$0] ?? 0) >= steps }
            ?? .infinity
        let files = (FileManager.default.enumerator(atPath: data)?.allObjects as? [String] ?? [])
            .filter { $0.hasSuffix(".snap") }
        let bytes = files.compactMap {
            (try? FileManager.default.attributesOfItem(atPath: data + "/" + $0)[.size]) as? Int
        }.max()
        say(
            String(
                format:
                    "  snapshot: %.1f s, %@ bytes, RSS %.0f MiB rising to at most %.0f MiB; %d loop turns meanwhile, %d over 20 ms, the longest at most %.0f ms",
                seconds,
                bytes.map(String.init) ?? "?",
                Double(rssBefore) / 1_048_576,
                Double(peak) / 1_048_576,
                steps,
                over,
                longest * 1000
            )
        )
        return SnapshotFigures(
            seconds: seconds,
            bytes: bytes,
            rssBefore: rssBefore,
            rssPeak: peak,
            steps: steps,
            stepsOver20ms: over,
            longestStepAtMostMs: longest * 1000
        )
    }

    /// How many of chimed's log lines so far say `what` (`snapshot started`, `written`, `failed`).
    static func snapshotLines(_ worker: Chimed, _ what: String) -> Int {
        worker.process.standardErrorLines.reduce(0) { $0 + ($1.contains(what) ? 1 : 0) }
    }

    /// Waits until every snapshot chimed began has been written (or failed).
    func snapshotsWritten(_ worker: Chimed) throws {
        let settled = waitUntil(timeout: 1800) {
            Self.snapshotLines(worker, "snapshot started")
                <= Self.snapshotLines(worker, "snapshot written") + Self.snapshotLines(worker, "snapshot failed")
        }
        guard settled else { throw BenchError("a snapshot was not written within 30 minutes:\n\(worker.log)") }
    }

    /// chimed's `chime_loop_step_seconds` histogram from its `/metrics`: the count, and the
    /// cumulative count at each bucket's upper bound in seconds.
    func loopSteps(port: Int) throws -> (count: Int, buckets: [Double: Int]) {
        let response = try HTTPProbe.get(port: port, "/metrics")
        var count = 0
        var buckets: [Double: Int] = [:]
        for line in response.body.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let value = Int(parts[1]) else { continue }
            if parts[0] == "chime_loop_step_seconds_count" {
                count = value
            } else if parts[0].hasPrefix(#"chime_loop_step_seconds_bucket{le=""#) {
                let bound = parts[0].dropFirst(#"chime_loop_step_seconds_bucket{le=""#.count).dropLast(2)
                buckets[bound == "+Inf" ? .infinity : Double(bound) ?? .infinity] = value
            }
        }
        return (count, buckets)
    }
}
