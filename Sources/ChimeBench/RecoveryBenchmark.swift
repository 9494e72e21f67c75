import ChimeCore
import ChimeJournal
import ChimeSupport
import Foundation

/// Recovery in process (issue 18's recovery target): a data directory with a snapshot of the
/// `scale` workload's shape (one big device, ten notifications to a userInfo tag, a 100-byte
/// body) and a journal tail of a tenth of it as single schedules, then `Journal.open` and
/// `Engine.replaying` on it five times, each in a process of its own, as chimed recovers at start.
/// No broker and no kill: the files are in the page cache, as they are after `kill -9` in
/// `make bench-scale`. The directory is removed at the end.
struct RecoveryBenchmark {
    /// Notifications in all: 1,000,000, or 200,000 with `--quick`.
    var total: Int

    func run() throws {
        let tail = total / 10
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("chime-recovery-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        say("recovery: \(total - tail) notifications in a snapshot and \(tail) records after it, in process")

        let at = Instant(milliseconds: wallMilliseconds())
        let fire = DateTimeValue.instant(at.adding(seconds: 30 * 86_400))
        func spec(tag: Int?) -> NotificationSpec {
            var s = NotificationSpec()
            s.alertBody = SystemBenchmark.body
            if let tag { s.userInfo = ["tag": .string("t\(tag)"), "b": "two", "c": true] }
            return s
        }
        let rssBefore = residentBytes(pid: getpid()) ?? 0
        let engine = Engine()
        var key: UInt64 = 0
        for start in stride(from: 0, to: total - tail, by: 1000) {
            key += 1
            let batch = (start..<min(total - tail, start + 1000)).map {
                ResolvedNotification(id: "g\($0)", fireDate: fire, spec(tag: $0 / 10))
            }
            engine.apply(.schedule(deviceId: "big", at: at, replaced: [], notifications: batch), key: CommandKey(key))
        }
        say(
            String(
                format: "  scheduled in batches of 1,000 in this process: RSS beyond content %.0f B a notification",
                Double((residentBytes(pid: getpid()) ?? 0) - rssBefore) / Double(total - tail)
                    - Double(SystemBenchmark.taggedContentBytes)
            )
        )
        let (journal, _) = try Journal.open(directory: directory, options: JournalOptions(fsync: .none))
        let writer = try journal.beginSnapshot()
        try engine.snapshot.forEachEntry { (entry) throws(JournalError) in try writer.append(entry) }
        try writer.finish()
        try journal.snapshotCompleted(writer)
        let plain = spec(tag: nil)
        for k in 0..<tail {
            key += 1
            let entry = JournalEntry.schedule(
                deviceId: "x\(k % 1000)",
                at: at,
                replaced: [],
                notifications: [ResolvedNotification(id: "x\(k)", fireDate: fire, plain)]
            )
            try journal.append(type: entry.kind.rawValue, payload: entry.encode(key: CommandKey(key)))
        }
        try journal.commit()
        try journal.close()

        // Each recovery in a process of its own, as chimed's start is: a second one in this
        // process would reuse the memory the first freed, and fault in fewer pages.
        var times: [Double] = []
        for run in 1...5 {
            let child = Process()
            child.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
            child.arguments = ["recovery", "--directory", directory, "--expect", "\(total)"]
            let out = Pipe()
            child.standardOutput = out
            try child.run()
            let line = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            child.waitUntilExit()
            guard child.terminationStatus == 0 else { throw BenchError("recovery run \(run) failed") }
            say("  run \(run): " + line.trimmingCharacters(in: .whitespacesAndNewlines))
            times.append(Double(line.prefix { $0.isNumber }) ?? 0)
        }
        times.sort()
        say(
            String(
                format: "  median %.0f ms, %.2f s per million (fastest %.0f ms)",
                times[2],
                times[2] / 1000 / (Double(total) / 1e6),
                times[0]
            )
        )
    }

    /// One recovery of `directory`, in this process: prints its time and phases on one line.
    static func recover(directory: String, expect total: Int) throws {
        let rssBefore = residentBytes(pid: getpid()) ?? 0
        let started = ContinuousClock.now
        var (journal, recovery) = try Journal.open(directory: directory, options: JournalOptions(fsync: .none))
        let read = ContinuousClock.now - started
        var phases: [String: Duration] = [:]
        let recovered = try Engine.replaying(recovery, directory: directory, timings: { phases[$0] = $1 })
        let all = ContinuousClock.now - started
        try journal.close()
        // What the engine holds once recovery's input is gone, beyond the content as make
        // bench-scale counts it (SystemBenchmark.taggedContentBytes; plainContentBytes for the
        // tail's), before and after chimed hands the free memory back.
        recovery = Recovery(snapshot: nil, records: [], lastSequence: 0)
        let content = Double(
            (total - total / 10) * SystemBenchmark.taggedContentBytes + (total / 10) * SystemBenchmark.plainContentBytes
        )
        func perPending() -> Double {
            (Double((residentBytes(pid: getpid()) ?? 0) - rssBefore) - content) / Double(total)
        }
        let held = perPending()
        let trimStarted = ContinuousClock.now
        Memory.releaseFree()
        let trim = ContinuousClock.now - trimStarted
        let trimmed = perPending()
        guard recovered.pendingCount == total else {
            throw BenchError("recovered \(recovered.pendingCount) of \(total)")
        }
        print(
            String(
                format:
                    "%.0f ms (%.2f s per million): read %.0f ms, snapshot %.0f ms, journal %.0f ms, arm %.0f ms; RSS beyond content %.0f B a notification, %.0f B once free memory is handed back (%.0f ms)",
                all.ms,
                all.ms / 1000 / (Double(total) / 1e6),
                read.ms,
                (phases["snapshotMs"] ?? .zero).ms,
                (phases["journalMs"] ?? .zero).ms,
                (phases["armMs"] ?? .zero).ms,
                held,
                trimmed,
                trim.ms
            )
        )
        withExtendedLifetime(recovered) {}
    }
}

extension Duration {
    fileprivate var ms: Double {
        let (s, a) = components
        return Double(s) * 1000 + Double(a) / 1e15
    }
}
