import ChimeCore
import Foundation

/// How long the loop is held while a snapshot is taken, in process and without I/O: engines of
/// the same number of notifications spread over 1 device up to one device each (each device with
/// a recent command key), and for each the time to begin a snapshot, the longest of the parts the
/// loop copies a turn (``Engine/snapshotStep``), the slowest of 100 commands before it began and
/// of 100 right after, and a copy in one go (what a snapshot used to hold the loop for).
struct SnapshotStepsBenchmark {
    var quick: Bool

    func run() {
        let total = quick ? 200_000 : 2_000_000
        let step = Engine.snapshotStep
        say("snapshot steps: \(total) notifications, \(step) copied a turn, in process (no broker, no disk)")
        let at = Instant(milliseconds: wallMilliseconds())
        var spec = NotificationSpec()
        spec.alertBody = String(repeating: "b", count: 100)
        let fire = DateTimeValue.instant(at.adding(seconds: 30 * 86_400))
        for devices in [1, 1_000, 100_000, total] {
            let engine = Engine()
            let perDevice = total / devices
            var key: UInt64 = 0
            for d in 0..<devices {
                for start in stride(from: 0, to: perDevice, by: 1000) {
                    let batch = (start..<min(perDevice, start + 1000)).map {
                        ResolvedNotification(id: "n\($0)", fireDate: fire, spec)
                    }
                    key += 1
                    engine.apply(
                        .schedule(deviceId: "d\(d)", at: at, replaced: [], notifications: batch),
                        key: CommandKey(key)
                    )
                }
            }
            var t = DispatchTime.now().uptimeNanoseconds
            func lap() -> Double {
                let u = DispatchTime.now().uptimeNanoseconds
                defer { t = u }
                return Double(u - t) / 1e6
            }
            func command() -> Double {
                key += 1
                engine.apply(
                    .schedule(
                        deviceId: "d\(key % UInt64(devices))",
                        at: at,
                        replaced: [],
                        notifications: [ResolvedNotification(id: "late\(key)", fireDate: fire, spec)]
                    ),
                    key: CommandKey(key)
                )
                return lap()
            }
            // The slowest of 100 commands before the snapshot begins, and of 100 right after (the
            // first change to each table of command keys copies that table).
            _ = lap()
            let before = (0..<100).map { _ in command() }.max()!
            engine.beginSnapshot()
            let begin = lap()
            let first = (0..<100).map { _ in command() }.max()!
            var longest = 0.0
            var all = 0.0
            var steps = 0
            // Kept, as the writer thread keeps it: freeing it is not the loop's work.
            var frozen: EngineSnapshot?
            while frozen == nil {
                frozen = engine.continueSnapshot(budget: step)
                let took = lap()
                longest = max(longest, took)
                all += took
                steps += 1
            }
            frozen = nil
            _ = lap()
            frozen = engine.snapshot
            let oneGo = lap()
            say(
                String(
                    format:
                        "  %7d devices of %7d: a command at most %.2f ms before, %.2f ms after it began; begin %.2f ms; %d parts, the longest %.2f ms, in all %.0f ms; in one go %.0f ms",
                    devices,
                    perDevice,
                    before,
                    first,
                    begin,
                    steps,
                    longest,
                    all,
                    oneGo
                )
            )
        }
    }
}
