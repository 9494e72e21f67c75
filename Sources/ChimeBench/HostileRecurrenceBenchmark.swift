import ChimeHarness
import ChimeTime
import Foundation

/// Times every call on the rules built to cost as much as the recurrence limits allow (`HostileRules`, the
/// list `NeverHangsTests` bounds by candidates examined), and prints the thread CPU time of each, in
/// milliseconds: construction, the first search, the next occurrence, the worst of searches far away
/// (years 2199, 2300 and 9999, the last two outside the zone table), and the spacing check. The last line is
/// the worst call, which the limits are chosen to keep to about 50 ms.
struct HostileRecurrenceBenchmark {
    func run() {
        print("hostile recurrence benchmark: thread CPU milliseconds per call (release builds only mean anything)")
        print(
            pad("rule", 36) + pad("zone", 18) + pad("init", 9) + pad("first", 9) + pad("next", 9) + pad("far", 9)
                + pad("spacing", 9) + "outcome"
        )
        let far = [
            "2199-06-01T00:00:00Z", "2300-06-01T00:00:00Z", "9999-06-01T00:00:00Z", "9999-12-31T23:59:59Z",
        ].compactMap(Self.instant)
        var worst = (ms: 0.0, what: "")
        for zoneName in ["UTC", "America/New_York", "Australia/Lord_Howe"] {
            guard let zone = Zone(identifier: zoneName) else { fatalError("no zone \(zoneName)") }
            for hostile in HostileRules.all {
                var outcome = ""
                var times: [Double] = []
                func timed<T>(_ body: () -> T) -> T {
                    let before = threadCPUMicros()
                    let result = body()
                    times.append((threadCPUMicros() - before) / 1000)
                    return result
                }
                guard let start = DateTimeValue(iso8601: hostile.start) else { fatalError("bad \(hostile.start)") }
                let made: Result<Recurrence, RecurrenceError> = timed {
                    do throws(RecurrenceError) {
                        let rule = try RecurrenceRule(parsing: hostile.rule)
                        return .success(try Recurrence(start: start, zone: zone, pattern: .rule(rule)))
                    } catch {
                        return .failure(error)
                    }
                }
                guard case .success(let recurrence) = made else {
                    if case .failure(let error) = made { outcome = "refused (\(error.code))" }
                    print(row(hostile.name, zoneName, times, outcome))
                    if let ms = times.first, ms > worst.ms { worst = (ms, "\(hostile.name) in \(zoneName), init") }
                    continue
                }
                let from = hostile.from.flatMap(Self.instant) ?? start.resolved(in: zone)
                let first = timed { Result { () throws(RecurrenceError) in try recurrence.first(atOrAfter: from) } }
                outcome += describe("first", first)
                if case .success(let found?) = first {
                    let next = timed { Result { () throws(RecurrenceError) in try recurrence.next(after: found) } }
                    outcome += describe(" next", next)
                } else {
                    times.append(0)
                }
                var farthest = 0.0
                for instant in far {
                    let before = threadCPUMicros()
                    let result = Result { () throws(RecurrenceError) in try recurrence.first(atOrAfter: instant) }
                    farthest = max(farthest, (threadCPUMicros() - before) / 1000)
                    if case .failure(let error) = result { outcome += " far \(instant): \(error.code)" }
                }
                times.append(farthest)
                let spacing = timed { Result { () throws(RecurrenceError) in try recurrence.smallestSpacing() } }
                switch spacing {
                case .success(let seconds): outcome += " spacing \(seconds.map(String.init) ?? "none")"
                case .failure(let error): outcome += " spacing: \(error.code)"
                }
                print(row(hostile.name, zoneName, times, outcome))
                let labels = ["init", "first", "next", "far", "spacing"]
                for (label, ms) in zip(labels, times) where ms > worst.ms {
                    worst = (ms, "\(hostile.name) in \(zoneName), \(label)")
                }
            }
        }
        print(String(format: "worst call: %.2f ms (%@)", worst.ms, worst.what))
    }

    static func instant(_ text: String) -> Instant? {
        guard case .instant(let instant)? = DateTimeValue(iso8601: text) else { return nil }
        return instant
    }

    func describe(_ label: String, _ result: Result<Occurrence?, RecurrenceError>) -> String {
        switch result {
        case .success(let occurrence?): return "\(label) \(occurrence.instant)"
        case .success(nil): return "\(label) none"
        case .failure(let error): return "\(label): \(error.code)"
        }
    }

    func row(_ name: String, _ zone: String, _ times: [Double], _ outcome: String) -> String {
        var text = pad(name, 36) + pad(zone, 18)
        for ms in times { text += pad(String(format: "%.2f", ms), 9) }
        text += String(repeating: " ", count: max(0, 5 - times.count) * 9)
        return text + outcome
    }

    func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
