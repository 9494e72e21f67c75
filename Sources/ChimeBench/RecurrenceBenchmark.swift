import ChimeHarness
import ChimeTime
import Foundation

/// Times `Recurrence.first(atOrAfter:)` and `next(after:)` call by call over a varied set of schedules,
/// and prints median, p99 and max per family and overall, in microseconds.
///
/// Every schedule starts years before the instants asked about, as a reminder created long ago would:
/// `first(atOrAfter:)` must jump to the asked period rather than walk from DTSTART.
struct RecurrenceBenchmark {
    var quick: Bool

    struct Schedule {
        var family: String
        var zone: String
        var start: String
        var pattern: Recurrence.Pattern
        var count: Int?
    }

    static func rule(_ text: String) -> Recurrence.Pattern {
        do {
            return .rule(try RecurrenceRule(parsing: text))
        } catch {
            fatalError("benchmark rule \(text): \(error)")
        }
    }

    /// The schedules, each in several zones and with starts 1 to 20 years back.
    func schedules() -> [Schedule] {
        let zones = ["America/New_York", "Europe/Paris", "Australia/Lord_Howe", "Asia/Shanghai", "UTC"]
        let starts = ["2006-03-12T09:00:00", "2015-10-25T01:30:00", "2021-01-31T07:45:00", "2025-11-02T02:30:00"]
        let families: [(String, [Recurrence.Pattern], Bool)] = [
            ("daily", [Self.rule("FREQ=DAILY"), Self.rule("FREQ=DAILY;INTERVAL=3;BYHOUR=8,20;BYMINUTE=15")], true),
            (
                "weekday-byday",
                [
                    Self.rule("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=8;BYMINUTE=30"),
                    Self.rule("FREQ=DAILY;BYDAY=MO,WE,FR"), Self.rule("FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH;WKST=SU"),
                ], true
            ),
            (
                "monthly-setpos",
                [
                    Self.rule("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1"), Self.rule("FREQ=MONTHLY;BYDAY=-1FR"),
                    Self.rule("FREQ=MONTHLY;BYMONTHDAY=1,15,-1;BYHOUR=9"),
                ], true
            ),
            (
                "yearly-byweekno",
                [
                    Self.rule("FREQ=YEARLY;BYWEEKNO=1,20,40;BYDAY=MO"), Self.rule("FREQ=YEARLY;BYWEEKNO=-1;BYDAY=FR"),
                    Self.rule("FREQ=YEARLY;BYMONTH=3,11;BYDAY=2SU"),
                ], true
            ),
            (
                "hourly-dst",
                [
                    Self.rule("FREQ=HOURLY"), Self.rule("FREQ=HOURLY;INTERVAL=2;BYDAY=MO,TU,WE,TH,FR"),
                    Self.rule("FREQ=MINUTELY;INTERVAL=15;BYHOUR=1,2,3"),
                ], true
            ),
            (
                "rare",
                [
                    Self.rule("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO"),
                    Self.rule("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29"), Self.rule("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30"),
                ], false
            ),
            (
                "repeatInterval",
                [
                    .interval(.day), .interval(.weekOfYear), .interval(.month), .interval(.year), .interval(.hour),
                    .interval(.minute),
                ],
                true
            ),
        ]
        var out: [Schedule] = []
        for (family, patterns, withCount) in families {
            for pattern in patterns {
                for (i, zone) in zones.enumerated() {
                    let start = starts[i % starts.count]
                    out.append(Schedule(family: family, zone: zone, start: start, pattern: pattern))
                    if withCount {
                        let counted: Recurrence.Pattern
                        var count: Int?
                        if case .rule(let r) = pattern {
                            counted = Self.rule(r.description + ";COUNT=100000")
                        } else {
                            counted = pattern
                            count = 100_000
                        }
                        out.append(
                            Schedule(
                                family: family + " +COUNT",
                                zone: zone,
                                start: start,
                                pattern: counted,
                                count: count
                            )
                        )
                    }
                }
            }
        }
        return out
    }

    func run() {
        let firstCalls = quick ? 20 : 200
        let nextCalls = quick ? 50 : 500
        var samples: [String: [Double]] = [:]
        var cpuMax: [String: Double] = [:]
        var inits: [Double] = []
        var failures = 0
        var rng = SplitMix64(seed: 2026)
        let from = Instant(seconds: 1_767_225_600)  // 2026-01-01T00:00:00Z
        let clock = ContinuousClock()
        func micros(_ d: Duration) -> Double {
            Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
        }
        for schedule in schedules() {
            guard let zone = Zone(identifier: schedule.zone), let start = DateTimeValue(iso8601: schedule.start) else {
                fatalError("bad schedule \(schedule)")
            }
            var made: Recurrence?
            let initTime = clock.measure {
                made = try? Recurrence(start: start, zone: zone, pattern: schedule.pattern, count: schedule.count)
            }
            inits.append(micros(initTime))
            guard let recurrence = made else {
                failures += 1
                continue
            }
            var firsts: [Double] = []
            var nexts: [Double] = []
            var firstCPU = 0.0
            var nextCPU = 0.0
            var last: Occurrence?
            for _ in 0..<firstCalls {
                let at = from.adding(seconds: Int64(rng.next() % (2 * 365 * 86_400)))
                var found: Occurrence?
                let cpu = threadCPUMicros()
                let d = clock.measure { found = try? recurrence.first(atOrAfter: at) }
                firstCPU = max(firstCPU, threadCPUMicros() - cpu)
                firsts.append(micros(d))
                last = found ?? last
            }
            var current = last
            for _ in 0..<nextCalls {
                guard let occurrence = current else { break }
                let cpu = threadCPUMicros()
                let d = clock.measure { current = try? recurrence.next(after: occurrence) }
                nextCPU = max(nextCPU, threadCPUMicros() - cpu)
                nexts.append(micros(d))
            }
            samples[schedule.family + " first", default: []] += firsts
            samples[schedule.family + " next", default: []] += nexts
            cpuMax[schedule.family + " first"] = max(cpuMax[schedule.family + " first"] ?? 0, firstCPU)
            cpuMax[schedule.family + " next"] = max(cpuMax[schedule.family + " next"] ?? 0, nextCPU)
        }
        print("recurrence benchmark (\(quick ? "quick" : "full")): microseconds per call (wall clock; the last")
        print("column is the largest thread CPU time of a call, which leaves out time the thread was descheduled)")
        print(pad("family", 30) + pad("calls", 8) + pad("median", 10) + pad("p99", 10) + pad("max", 10) + "max cpu")
        var all: [Double] = []
        for key in samples.keys.sorted() {
            let values = samples[key] ?? []
            all += values
            print(row(key, values) + format(cpuMax[key] ?? 0))
        }
        print(row("overall first/next", all) + format(cpuMax.values.max() ?? 0))
        print(row("init (Recurrence.init)", inits))
        if failures > 0 { print("\(failures) schedules could not be built") }
    }

    func row(_ name: String, _ values: [Double]) -> String {
        guard !values.isEmpty else { return pad(name, 30) + "-" }
        let sorted = values.sorted()
        func at(_ q: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))] }
        return pad(name, 30) + pad(String(sorted.count), 8) + pad(format(at(0.5)), 10) + pad(format(at(0.99)), 10)
            + pad(format(sorted[sorted.count - 1]), 10)
    }

    func format(_ value: Double) -> String { String(format: "%.2f", value) }
    func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}

/// CPU time of the calling thread, in microseconds.
func threadCPUMicros() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) * 1e6 + Double(ts.tv_nsec) / 1e3
}
