import ChimeMQTT
import Dispatch
import Foundation
import Synchronization

/// Seconds since an arbitrary start, monotonic.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Milliseconds since the epoch, wall clock.
func wallMilliseconds() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

/// CPU seconds (user + system) a process has used, from /proc.
func cpuSeconds(pid: Int32) -> Double? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return nil }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // After the command: state is field 3; utime and stime are fields 14 and 15.
    guard fields.count > 13, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
    return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Resident set size of a process, in bytes.
func residentBytes(pid: Int32) -> Int? { statusBytes(pid: pid, "VmRSS:") }

/// The most resident memory a process has had (VmHWM, which writing 5 to its clear_refs resets),
/// in bytes.
func peakResidentBytes(pid: Int32) -> Int? { statusBytes(pid: pid, "VmHWM:") }

/// A size in /proc/PID/status (given there in kB), in bytes.
private func statusBytes(pid: Int32, _ field: String) -> Int? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    for line in text.split(separator: "\n") where line.hasPrefix(field) {
        let parts = line.split(separator: " ", omittingEmptySubsequences: true)
        if parts.count >= 2, let kb = Int(parts[1]) { return kb * 1024 }
    }
    return nil
}

/// The median of `v` (not empty): the middle value, or the mean of the two middle ones.
func median(_ v: [Double]) -> Double {
    let s = v.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// Sorted samples and their quantiles.
struct Samples {
    var values: [Double] = []

    mutating func add(_ v: Double) { values.append(v) }

    func quantile(_ q: Double) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let index = Swift.min(sorted.count - 1, Swift.max(0, Int((Double(sorted.count) * q).rounded(.up)) - 1))
        return sorted[index]
    }

    var max: Double { values.max() ?? .nan }
    var count: Int { values.count }

    /// `[q, value]` pairs from the median to the maximum, spaced evenly on a log scale of
    /// 1 / (1 - q) (20 a decade, as latency plots show a distribution), for `scripts/plot-lateness`.
    var distribution: [[Double]] {
        guard !values.isEmpty else { return [] }
        let sorted = values.sorted()
        var pairs: [[Double]] = []
        for k in 0...100 {
            let q = 1 - 0.5 * pow(10, -Double(k) / 20)
            if Double(sorted.count) * (1 - q) < 1 { break }
            let index = Swift.min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)
            pairs.append([q, sorted[index]])
        }
        pairs.append([1, sorted[sorted.count - 1]])
        return pairs
    }
}

/// Waits until `condition` holds, checking every few milliseconds; false after `timeout` seconds.
func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = monotonicSeconds() + timeout
    while !condition() {
        if monotonicSeconds() > deadline { return false }
        usleep(2000)
    }
    return true
}

/// An MQTT client for the load generator: publishes commands pipelined up to a window of
/// outstanding requests, each with a Response Topic, and counts the replies.
final class LoadClient: Sendable {
    private struct State {
        var connected = false
        var subscribed: Set<Int32> = []
        var replies = 0
        var okReplies = 0
        var lastReply = 0.0
        /// Replies by ``LoadClient/outcome(_:ok:)``, since the current run started.
        var outcomes: [String: Int] = [:]
        /// Send times of requests in flight, by correlation number, for latency samples.
        var sentAt: [UInt64: Double] = [:]
        var latencies: [Double] = []
    }

    let client: MQTTClient
    let replyTopic: String
    private let shared = Locked(State())
    private let window: DispatchSemaphore

    /// - Parameter tallyOutcomes: count replies by ``outcome(_:ok:)`` (``Result/outcomes``); off, the
    ///   client reads no more of a reply than its first bytes, so that it takes as little of the
    ///   cores it shares with chimed as the relay's client does.
    init(url: String, clientId: String, window: Int, tallyOutcomes: Bool = false) throws {
        var options = try MQTTOptions(url: url)
        options.clientId = clientId
        options.receiveMaximum = 65535
        options.maxInflight = 65535
        replyTopic = "bench/\(clientId)/reply"
        // Created at 0 and raised: libdispatch traps when a semaphore is freed below its initial
        // value, which happens when a request is given up on.
        let semaphore = DispatchSemaphore(value: 0)
        for _ in 0..<window { semaphore.signal() }
        self.window = semaphore
        let window = semaphore
        let shared = self.shared
        client = try MQTTClient(options: options) { event in
            switch event {
            case .connected: shared.value.withLock { $0.connected = true }
            case .disconnected: shared.value.withLock { $0.connected = false }
            case .subscribed(let id, _): shared.value.withLock { _ = $0.subscribed.insert(id) }
            case .message(let m):
                let ok = m.payload.starts(with: Array(#"{"ok":true"#.utf8))
                let outcome = tallyOutcomes ? LoadClient.outcome(m.payload, ok: ok) : nil
                let now = monotonicSeconds()
                var number: UInt64 = 0
                for b in m.correlationData ?? [] { number = number << 8 | UInt64(b) }
                shared.value.withLock { s in
                    s.replies += 1
                    if ok { s.okReplies += 1 }
                    if let outcome { s.outcomes[outcome, default: 0] += 1 }
                    s.lastReply = now
                    if let sent = s.sentAt.removeValue(forKey: number) { s.latencies.append(now - sent) }
                }
                window.signal()
            default: break
            }
        }
    }

    func start() throws {
        try client.start()
        guard waitUntil(timeout: 30, { shared.value.withLock { $0.connected } }) else {
            throw BenchError("load client: no connection")
        }
        let id = try client.subscribe(replyTopic, qos: 1)
        guard waitUntil(timeout: 30, { shared.value.withLock { $0.subscribed.contains(id) } }) else {
            throw BenchError("load client: no SUBACK")
        }
    }

    func stop() { client.stop() }

    /// What one run got back: every figure counts that run's replies only.
    struct Result {
        var seconds: Double
        var replies: Int
        var ok: Int
        var latencies: Samples
        var outcomes: [String: Int]
    }

    /// Sends every command (topic, payload) keeping at most `window` unanswered, and waits for all
    /// replies. `measureLatency` keeps the round-trip time of each.
    func run(_ commands: [(String, [UInt8])], measureLatency: Bool = false, timeout: Double = 600) throws -> Result {
        try run(count: commands.count, measureLatency: measureLatency, timeout: timeout) { commands[$0] }
    }

    /// Sends `command(0)`, `command(1)`, ... (topic, payload), `count` of them or as many as go out
    /// before `deadline` (monotonic seconds), keeping at most `window` unanswered, and waits for
    /// the replies of all that were sent.
    func run(
        count: Int,
        until deadline: Double = .infinity,
        measureLatency: Bool = false,
        timeout: Double = 600,
        _ command: (Int) -> (String, [UInt8])
    ) throws -> Result {
        let before = shared.value.withLock { s -> Int in
            s.latencies.removeAll()
            s.okReplies = 0
            s.outcomes.removeAll()
            return s.replies
        }
        let start = monotonicSeconds()
        var number: UInt64 = UInt64(before) << 20
        var sent = 0
        while sent < count {
            window.wait()
            if monotonicSeconds() >= deadline {
                window.signal()
                break
            }
            let (topic, payload) = command(sent)
            sent += 1
            number += 1
            var properties = MQTTPublishProperties()
            properties.responseTopic = replyTopic
            var correlation = [UInt8](repeating: 0, count: 8)
            for i in 0..<8 { correlation[i] = UInt8(truncatingIfNeeded: number >> (8 * (7 - i))) }
            properties.correlationData = correlation
            if measureLatency {
                let n = number
                shared.value.withLock { $0.sentAt[n] = monotonicSeconds() }
            }
            while true {
                do {
                    try client.publish(topic: topic, payload: payload, qos: 1, properties: properties)
                    break
                } catch {
                    usleep(10_000)  // reconnecting
                }
            }
        }
        let expected = before + sent
        guard waitUntil(timeout: timeout, { shared.value.withLock { $0.replies >= expected } }) else {
            throw BenchError("only \(shared.value.withLock { $0.replies } - before) of \(sent) replies arrived")
        }
        return shared.value.withLock { s in
            Result(
                seconds: s.lastReply - start,
                replies: s.replies - before,
                ok: s.okReplies,
                latencies: Samples(values: s.latencies),
                outcomes: s.outcomes
            )
        }
    }

    /// What a reply says, for tallies: `ok` or its error code, after the part of its requestId
    /// before a `.` when it has one (a reply to `"requestId":"keys.7"` refused `unknown_field` is
    /// `keys unknown_field`). Reads only the head of the reply, where chimed writes these.
    static func outcome(_ payload: [UInt8], ok: Bool) -> String {
        payload.prefix(400).withUnsafeBufferPointer { p in
            // The string after `key` up to its closing quote or, with `end`, up to `end` (nil when
            // `end` does not come first).
            func string(after key: StaticString, end: UInt8? = nil) -> String? {
                guard let from = indexAfter(key, in: p) else { return nil }
                var i = from
                while i < p.count && p[i] != UInt8(ascii: "\"") && p[i] != end { i += 1 }
                if end != nil && (i == p.count || p[i] != end) { return nil }
                return String(decoding: UnsafeBufferPointer(rebasing: p[from..<i]), as: UTF8.self)
            }
            let code = ok ? "ok" : string(after: #""code":""#) ?? "?"
            guard let tag = string(after: #""requestId":""#, end: UInt8(ascii: ".")) else { return code }
            return tag + " " + code
        }
    }
}

/// Subscribes to every device's deliveries and records when each arrives and how late it was.
final class DeliveryCollector: Sendable {
    /// The bytes of the deliveries received so far.
    var payloadBytes: Int { shared.value.withLock { $0.bytes } }

    private struct State {
        var connected = false
        var subscribed: Set<Int32> = []
        var count = 0
        var first = 0.0
        var last = 0.0
        /// Milliseconds from `fireDate` to arrival here, and from `fireDate` to `firedAt`.
        var arrival = Samples()
        var worker = Samples()
        var fireIds: Set<String>?
        var duplicates = 0
        /// The bytes of every delivery received.
        var bytes = 0
    }

    let client: MQTTClient
    private let shared = Locked(State())

    /// - Parameter only: counts only deliveries whose topic starts with this (another device's are
    ///   dropped unread).
    init(url: String, measure: Bool, only: String? = nil) throws {
        var options = try MQTTOptions(url: url)
        options.clientId = "bench-collector-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        options.receiveMaximum = 65535
        let shared = self.shared
        client = try MQTTClient(options: options) { event in
            switch event {
            case .connected: shared.value.withLock { $0.connected = true }
            case .subscribed(let id, _): shared.value.withLock { _ = $0.subscribed.insert(id) }
            case .message(let m):
                if let only, !m.topic.hasPrefix(only) { return }
                let now = monotonicSeconds()
                var arrival: Double?
                var worker: Double?
                if measure {
                    let received = wallMilliseconds()
                    if let fire = DeliveryCollector.field(m.payload, "\"fireDate\":\""),
                        let fired = DeliveryCollector.field(m.payload, "\"firedAt\":\"")
                    {
                        arrival = Double(received - fire)
                        worker = Double(fired - fire)
                    }
                }
                shared.value.withLock { s in
                    if s.count == 0 { s.first = now }
                    s.count += 1
                    s.bytes += m.payload.count
                    s.last = now
                    if let arrival { s.arrival.add(arrival) }
                    if let worker { s.worker.add(worker) }
                }
            default: break
            }
        }
    }

    /// The instant in a `"key":"2026-...Z"` member of a delivery, in epoch milliseconds. A plain
    /// byte scan: the subscriber shares the cores with what it measures, so it must stay cheap.
    static func field(_ payload: [UInt8], _ key: StaticString) -> Int64? {
        payload.withUnsafeBufferPointer { p in
            indexAfter(key, in: p).flatMap { parseRFC3339(UnsafeBufferPointer(rebasing: p[$0...])) }
        }
    }

    func start(filter: String) throws {
        try client.start()
        guard waitUntil(timeout: 30, { shared.value.withLock { $0.connected } }) else {
            throw BenchError("collector: no connection")
        }
        let id = try client.subscribe(filter, qos: 1)
        guard waitUntil(timeout: 30, { shared.value.withLock { $0.subscribed.contains(id) } }) else {
            throw BenchError("collector: no SUBACK")
        }
    }

    func reset() {
        shared.value.withLock { s in
            s.count = 0
            s.arrival = Samples()
            s.worker = Samples()
        }
    }

    var count: Int { shared.value.withLock { $0.count } }

    struct Snapshot {
        var count: Int
        var first: Double
        var last: Double
        var arrival: Samples
        var worker: Samples
    }

    var snapshot: Snapshot {
        shared.value.withLock {
            Snapshot(count: $0.count, first: $0.first, last: $0.last, arrival: $0.arrival, worker: $0.worker)
        }
    }

    func stop() { client.stop() }
}

/// The index just past the first occurrence of `key` in `p`, by a plain byte scan.
func indexAfter(_ key: StaticString, in p: UnsafeBufferPointer<UInt8>) -> Int? {
    let k = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
    guard p.count >= k.count else { return nil }
    var i = 0
    while i <= p.count - k.count {
        var j = 0
        while j < k.count && p[i + j] == k[j] { j += 1 }
        if j == k.count { return i + j }
        i += 1
    }
    return nil
}

/// `2026-12-01T10:00:00Z` or `...00.123Z` (what `b` starts with) to epoch milliseconds.
func parseRFC3339(_ b: UnsafeBufferPointer<UInt8>) -> Int64? {
    guard b.count >= 20 else { return nil }
    func num(_ from: Int, _ count: Int) -> Int? {
        var v = 0
        for i in from..<(from + count) {
            guard b[i] >= 48, b[i] <= 57 else { return nil }
            v = v * 10 + Int(b[i] - 48)
        }
        return v
    }
    guard let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let h = num(11, 2), let mi = num(14, 2),
        let s = num(17, 2)
    else { return nil }
    var ms = 0
    if b.count >= 24, b[19] == UInt8(ascii: "."), let f = num(20, 3) { ms = f }
    // days from civil (H. Hinnant)
    let yy = mo <= 2 ? y - 1 : y
    let era = (yy >= 0 ? yy : yy - 399) / 400
    let yoe = yy - era * 400
    let doy = (153 * (mo > 2 ? mo - 3 : mo + 9) + 2) / 5 + d - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    let days = era * 146_097 + doe - 719_468
    return (Int64(days) * 86_400 + Int64(h * 3600 + mi * 60 + s)) * 1000 + Int64(ms)
}

/// A `Mutex` in a class, so that closures can share it.
final class Locked<T: Sendable>: Sendable {
    let value: Mutex<T>
    init(_ initial: T) { value = Mutex(initial) }
}

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

/// Prints a line at once, even when standard output is a file.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
