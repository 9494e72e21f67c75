import ChimeCore
import ChimeHarness
import Foundation

/// `chime-bench system --only slot-load` (`make bench-slot-load`): how long a slot takes to load
/// with 10,000, 100,000 and 1,000,000 notifications, and what a worker's memory is with many slots.
///
/// - **Load.** One worker on `--slots 1` (so every notification is in the one slot) fills the slot
///   through batch commands and stops with SIGTERM; a second worker takes the slot: the time from
///   its lease to serving the slot (its `serving a slot` line's `loadMs`), from its start to the
///   slot served, and its RSS with the slot loaded against a worker serving an empty slot.
/// - **Many slots.** One worker on `--slots S` for S from 1 to 65,536 (the largest `--slots`
///   takes): the time from its start to every slot served and its RSS then, empty and with 100,000
///   notifications spread over the slots.
extension SystemBenchmark {
    mutating func slotLoad(url: String, chimed: String) throws {
        let sizes = quick ? [10_000, 100_000] : [10_000, 100_000, 1_000_000]
        say(
            "slot-load: one slot of \(sizes.map { "\($0)" }.joined(separator: ", ")) notifications loaded by a "
                + "second worker; then one worker on --slots 1 to 65,536 (one PostgreSQL, fsync on)"
        )
        var figures: [String: Any] = [:]
        var loads: [[String: Any]] = []
        for count in sizes {
            let load = try slotLoadRound(url: url, chimed: chimed, notifications: count)
            loads.append(load)
            rows.append(
                (
                    "slot-load: a slot of \(count) notifications, lease to serving; start to serving; RSS a notification",
                    String(
                        format: "%.0f ms; %.2f s; %.0f B",
                        load["loadMs"] as? Double ?? 0,
                        load["startToServingSeconds"] as? Double ?? 0,
                        load["rssBytesPerNotification"] as? Double ?? 0
                    ),
                    "", ""
                )
            )
        }
        figures["load"] = loads
        var many: [[String: Any]] = []
        let slotCounts = quick ? [1, 256, 4096] : [1, 256, 4096, 65536]
        for slots in slotCounts {
            for notifications in [0, 100_000] {
                let round = try manySlotsRound(url: url, chimed: chimed, slots: slots, notifications: notifications)
                many.append(round)
                rows.append(
                    (
                        "slot-load: --slots \(slots), \(notifications) notifications: start to all served; RSS; "
                            + "CPU a command of 100",
                        String(
                            format: "%.1f s; %.0f MiB; %.0f µs",
                            round["startToAllServedSeconds"] as? Double ?? 0,
                            (round["rssBytes"] as? Double ?? 0) / 1_048_576,
                            round["cpuMicrosPerCommand"] as? Double ?? 0
                        ),
                        "", ""
                    )
                )
            }
        }
        figures["manySlots"] = many
        results["slotLoad"] = figures
    }

    /// The content of a notification of ``batches(prefix:count:devices:batch:due:)`` as memory
    /// figures count it: its body, userInfo and an id of about 10 bytes.
    private static var batchContentBytes: Int { body.utf8.count + userInfo.utf8.count + 10 }

    /// Fills one slot with `notifications` through a first worker, stops it, and measures a second
    /// one taking the slot.
    private func slotLoadRound(url: String, chimed: String, notifications: Int) throws -> [String: Any] {
        let cluster = try SlotCluster(chimed: chimed, url: url, slots: 1)
        defer { cluster.stopAll() }
        try cluster.start(count: 1)
        let filler = cluster.workers["w1"]!
        let emptyRSS = Double(residentBytes(pid: filler.process.pid) ?? 0)
        let fillSeconds = try fill(url: url, notifications: notifications, slots: 1)
        filler.process.terminate()
        _ = try runSync { await filler.process.waitForExit(timeout: .seconds(120)) }
        cluster.workers["w1"] = nil

        let started = monotonicSeconds()
        try cluster.start("w2")
        guard cluster.statuses.waitUntilBalanced(among: ["w2"], timeout: 600) else {
            throw BenchError("slot-load: the slot of \(notifications) not served within 600 s")
        }
        let startToServing = monotonicSeconds() - started
        let loader = cluster.workers["w2"]!
        let line = loader.process.standardErrorLines.last { $0.contains("serving a slot") } ?? ""
        let loadMs = Self.number(after: "loadMs=", in: line) ?? 0
        let loaded = Self.number(after: "notifications=", in: line) ?? 0
        guard Int(loaded) == notifications else {
            throw BenchError("slot-load: the slot loaded with \(Int(loaded)) notifications, not \(notifications)")
        }
        let rss = Double(residentBytes(pid: loader.process.pid) ?? 0)
        let perNotification = (rss - emptyRSS) / Double(notifications)
        let (records, snapshotEntries) = try Self.slotJournal(cluster.server)
        say(
            String(
                format:
                    "  %7d notifications (filled in %.1f s; a snapshot of %d entries and %d records after it): "
                    + "lease to serving %.0f ms, start to serving %.2f s, RSS %.0f B a notification (%d B of content)",
                notifications,
                fillSeconds,
                snapshotEntries,
                records,
                loadMs,
                startToServing,
                perNotification,
                Self.batchContentBytes
            )
        )
        return [
            "notifications": notifications, "loadMs": loadMs, "startToServingSeconds": startToServing,
            "rssBytesPerNotification": perNotification, "contentBytes": Self.batchContentBytes,
            "snapshotEntries": snapshotEntries, "recordsAfterSnapshot": records, "fillSeconds": fillSeconds,
        ]
    }

    /// One worker on `--slots slots`, with `notifications` spread over the slots.
    private func manySlotsRound(url: String, chimed: String, slots: Int, notifications: Int) throws -> [String: Any] {
        let cluster = try SlotCluster(chimed: chimed, url: url, slots: slots)
        defer { cluster.stopAll() }
        let started = monotonicSeconds()
        try cluster.start("w1")
        guard cluster.statuses.waitUntilBalanced(among: ["w1"], timeout: 1800) else {
            throw BenchError("slot-load: --slots \(slots) not all served within 1800 s")
        }
        let allServed = monotonicSeconds() - started
        let worker = cluster.workers["w1"]!
        var cpuPerCommand = 0.0
        if notifications > 0 {
            let cpu = cpuSeconds(pid: worker.process.pid) ?? 0
            _ = try fill(url: url, notifications: notifications, slots: slots)
            cpuPerCommand = ((cpuSeconds(pid: worker.process.pid) ?? 0) - cpu) / Double(notifications / 100)
        }
        let rss = Double(residentBytes(pid: worker.process.pid) ?? 0)
        say(
            String(
                format:
                    "  --slots %5d, %6d notifications: all served %.1f s after the start, RSS %.0f MiB, "
                    + "%.0f µs CPU a command of 100",
                slots,
                notifications,
                allServed,
                rss / 1_048_576,
                cpuPerCommand * 1e6
            )
        )
        return [
            "slots": slots, "notifications": notifications, "startToAllServedSeconds": allServed, "rssBytes": rss,
            "cpuMicrosPerCommand": cpuPerCommand * 1e6,
        ]
    }

    /// Schedules `notifications` a month ahead in batches of 100, over enough devices that none
    /// holds more than 100: the seconds it took.
    private func fill(url: String, notifications: Int, slots: Int) throws -> Double {
        let load = try LoadClient(url: url, clientId: "bench-slot-load-fill", window: 100)
        try load.start()
        defer { load.stop() }
        let month = Instant(milliseconds: wallMilliseconds() + 30 * 86_400_000)
        let commands = Self.batches(
            prefix: "load",
            count: notifications,
            devices: max(100, notifications / 100),
            batch: 100
        ) { _ in month }
        let started = monotonicSeconds()
        let result = try load.run(commands, timeout: 1800)
        guard result.ok == commands.count else {
            throw BenchError("slot-load: \(result.ok) ok replies of \(commands.count) filling \(slots) slots")
        }
        return monotonicSeconds() - started
    }

    /// The records of slot 0 after its newest snapshot, and that snapshot's entries.
    private static func slotJournal(_ server: TestPostgres) throws -> (records: Int, snapshotEntries: Int) {
        let psql = Process()
        psql.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        psql.arguments = [
            server.uri, "-At", "-c",
            "SELECT (SELECT count(*) FROM chime_slot_journal WHERE slot = 0), "
                + "(SELECT coalesce(max(entries), 0) FROM chime_slot_snapshot WHERE slot = 0)",
        ]
        let pipe = Pipe()
        psql.standardOutput = pipe
        try psql.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        psql.waitUntilExit()
        let fields = output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
        guard fields.count == 2, let records = Int(fields[0]), let entries = Int(fields[1]) else {
            throw BenchError("slot-load: psql said \(output)")
        }
        return (records, entries)
    }

    /// The number after `key` in a log line (`key=123`).
    private static func number(after key: String, in line: String) -> Double? {
        guard let range = line.range(of: key) else { return nil }
        return Double(line[range.upperBound...].prefix { $0.isNumber || $0 == "." })
    }
}
