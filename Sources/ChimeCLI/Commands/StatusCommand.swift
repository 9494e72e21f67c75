import ChimeCore
import ChimeMQTT
import ChimeSupport
import Foundation
import Synchronization

/// `chime status`: the workers on the broker and their latest stats; with `--worker`, a readiness
/// check of one worker fit for a container health probe.
struct StatusCommand: Command {
    static let name = "status"
    static let summary = "show the workers and their stats; --worker ID: readiness probe"
    static let synopsis = "chime status [--worker ID] [--samples N] [--json] [options]"
    static let discussion = """
        Without --worker: reads every worker's retained status (P/$worker/+/status) and waits for
        --samples stats messages of each online worker (P/$worker/+/stats, published every
        --stats-interval seconds of chimed, default 10), up to --timeout for each sample, connecting
        included. Then prints
        each worker: state, partition, pid, uptime, the latest gauges, totals, commands and errors by
        kind, lateness (the worker's, and "expected": a past date, a catch-up, quiet hours) and journal
        sync times, the journal, in slot mode the slots served (from the
        retained status) with lease renewal, slot load and hand-over times, per-second rates between
        the first and the last sample, and any numeric stat this version does not know under "other".
        A worker that sent fewer samples in time is named on standard error, with why. Exits 0 when at
        least one worker is online, 1 when none is.

        With --worker ID: exits 0 only when that worker is ready: its retained status is online AND it
        answers a command, all within --timeout. The probe is a read-only `list` (limit 1) for a device
        id that the worker's own partition serves (chime-probe, or chime-probe-N chosen by the CRC-32
        rule of --partition k/N, or for a large N a name built to have CRC-32 k), so only that
        worker's partition can answer it; in slot mode (chimed --slots), for a
        device in the first slot the worker's retained status says it serves (a worker that serves
        none is ready once online). Exits 1 when the worker is unknown,
        offline or does not answer within --timeout, 3 when the broker cannot be reached. Use it as a
        container readiness or health probe: `chime status --worker $(hostname) --timeout 3s`, with a
        broker account of its own (never chimed's: where the broker names sessions after accounts, as
        the deploy configuration does, it would take over chimed's session; deploy/container/chime-env
        health does this right).
        """
    static let specs: [Flags.Spec] =
        [
            .init("worker", env: false, "check that this worker is online and answering (exit 0 or 1)"),
            .init(
                "samples",
                env: false,
                "wait for this many stats messages of each online worker, 1 to 100 (default 2: rates need "
                    + "two; 1 answers sooner, without rates)"
            ),
            .init("json", value: false, env: false, "one JSON object a line per worker: status, latest stats, rates"),
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        ("every worker, with rates (two stats messages, --stats-interval apart)", "chime status"),
        ("rates over a minute of a worker with the default --stats-interval", "chime status --samples 7"),
        ("the latest stats only, without waiting for a second message", "chime status --samples 1"),
        ("readiness probe of the worker named after this host", "chime status --worker \"$(hostname)\" --timeout 3s"),
    ]

    let connection: ConnectionOptions
    let worker: String?
    let samples: Int
    let json: Bool

    init(_ flags: Flags) throws(UsageError) {
        try flags.expectNoPositional()
        connection = try ConnectionOptions(flags)
        worker = flags["worker"]
        if let worker, worker.isEmpty || worker.contains("/") || worker.contains("+") || worker.contains("#") {
            throw UsageError("--worker: \"\(worker)\" is not a worker id")
        }
        samples = try Parse.integer(flags, "samples", in: 1...100) ?? 2
        json = flags.isSet("json")
        if worker != nil && (flags["samples"] != nil || json) {
            throw UsageError("--worker is a check: it takes neither --samples nor --json")
        }
    }

    func run(_ console: Console) async throws(CLIFailure) {
        // The whole command, connecting included, waits at most --timeout (the check), or
        // --timeout for each sample (the overview).
        let deadline = ContinuousClock.now + connection.timeout * (worker == nil ? samples : 1)
        let broker = try await Connection.open(connection, deadline: deadline)
        defer { broker.close() }
        if let worker {
            try await probe(worker, broker, console)
        } else {
            try await overview(broker, console)
        }
    }

    // MARK: Readiness

    /// Slot mode: the number of slots and those served, from a worker's status (`slots`,
    /// `serving`), or nil when they are not a number of slots a store may have and ranges of it.
    static func servedSlots(_ status: JSONObject) -> (count: Int, serving: [Int])? {
        guard let number = status["slots"]?.numberValue, let count = Int(exactly: number),
            let serving = SlotRanges.slots(status["serving"]?.stringValue ?? "", count: count)
        else { return nil }
        return (count, serving)
    }

    /// How many of `chime-probe-1`, `chime-probe-2`, ... the probe tries before it builds a name.
    static let probeTries = 1000

    /// A device whose CRC-32 modulo `modulus` is `remainder` (a partition k/N, or a slot of S):
    /// `chime-probe` or the first such of `chime-probe-1` ... `chime-probe-1000`, else one built
    /// to have `remainder` as its CRC-32 (``device(withCRC:)``). The work is bounded whatever the
    /// modulus, up to 2^32 - 1.
    static func probeDevice(remainder: UInt32, modulus: UInt32) -> String {
        func serves(_ device: String) -> Bool { deviceBucket(device, among: modulus) == remainder }
        if serves("chime-probe") { return "chime-probe" }
        if let n = (1...probeTries).first(where: { serves("chime-probe-\($0)") }) { return "chime-probe-\(n)" }
        return device(withCRC: remainder)
    }

    /// `chime-probe-` and 24 letters of d, e, f and g, chosen so that the CRC-32 of the whole is
    /// `target`. CRC-32 is affine over GF(2): flipping a bit of a message of a given length changes
    /// its CRC by a vector that does not depend on the other bits. The two low bits of each letter
    /// give 48 such vectors, which span all 32 bits (a test checks it); Gaussian elimination finds
    /// the flips whose vectors sum to what `target` needs.
    static func device(withCRC target: UInt32) -> String {
        let prefix = Array("chime-probe-".utf8)
        var letters = [UInt8](repeating: UInt8(ascii: "d"), count: 24)
        let base = crc32(prefix + letters)
        // basis[b]: a vector whose highest bit is b, and the flips that sum to it.
        var basis = [(vector: UInt32, flips: UInt64)?](repeating: nil, count: 32)
        for flip in 0..<(2 * letters.count) {
            var message = prefix + letters
            message[prefix.count + flip / 2] ^= 1 << (flip % 2)
            var vector = crc32(message) ^ base
            var flips: UInt64 = 1 << flip
            while vector != 0 {
                let bit = 31 - vector.leadingZeroBitCount
                guard let row = basis[bit] else {
                    basis[bit] = (vector, flips)
                    break
                }
                vector ^= row.vector
                flips ^= row.flips
            }
        }
        var needed = target ^ base
        var flips: UInt64 = 0
        while needed != 0 {
            let row = basis[31 - needed.leadingZeroBitCount]!
            needed ^= row.vector
            flips ^= row.flips
        }
        for flip in 0..<(2 * letters.count) where flips & (1 << flip) != 0 {
            letters[flip / 2] ^= 1 << (flip % 2)
        }
        return String(decoding: prefix + letters, as: UTF8.self)
    }

    func probe(_ worker: String, _ broker: Connection, _ console: Console) async throws(CLIFailure) {
        let topic = broker.topics.workerStatus(worker)
        let requester = broker.requester
        let expectation = requester.expectMessage { $0.topic == topic }
        let message: MQTTMessage
        do {
            try await requester.subscribe(topic, qos: 1, timeout: broker.waitLimit)
            message = try await expectation.value(timeout: broker.waitLimit)
        } catch {
            throw CLIFailure(
                .failed,
                "not ready: worker \(worker) has no status on \(topic) (none within \(connection.timeoutText))"
            )
        }
        guard case .object(let status)? = try? JSON(parsing: message.payload) else {
            throw CLIFailure(.failed, "not ready: the status of worker \(worker) is not a JSON object")
        }
        guard status["state"] == "online" else {
            throw CLIFailure(.failed, "not ready: worker \(worker) is \(status["state"]?.plainText ?? "in no state")")
        }
        let device: String
        let serves: String
        if status["slots"] != nil {
            let servingText = status["serving"]?.stringValue ?? ""
            guard let (slotCount, serving) = Self.servedSlots(status) else {
                throw CLIFailure(
                    .failed,
                    "not ready: worker \(worker) reports serving \"\(servingText)\" of \(status["slots"]!.plainText) slots"
                )
            }
            guard let first = serving.first else {
                console.out("ready: worker \(worker) is online and serves none of the \(slotCount) slots now")
                return
            }
            device = Self.probeDevice(remainder: UInt32(first), modulus: UInt32(slotCount))
            serves = "slots \(servingText) of \(slotCount)"
        } else {
            let partitionText = status["partition"]?.stringValue ?? "0/1"
            guard let partition = Partition(parsing: partitionText) else {
                throw CLIFailure(.failed, "not ready: worker \(worker) reports partition \"\(partitionText)\", not k/N")
            }
            device = Self.probeDevice(remainder: partition.index, modulus: partition.count)
            serves = "partition \(partition)"
        }
        let started = ContinuousClock.now
        do {
            _ = try await broker.send(.list, device: device, ["limit": 1])
        } catch let failure where failure.kind == .reply {
            // An error reply is still an answer: the worker is serving.
        } catch {
            throw CLIFailure(
                .failed,
                "not ready: worker \(worker) is online but did not answer a list for device \(device) "
                    + "within \(connection.timeoutText)"
            )
        }
        let elapsed = ContinuousClock.now - started
        let ms = milliseconds(elapsed)
        console.out(
            "ready: worker \(worker) is online (\(serves)) and answered a list for device \(device) in \(ms) ms"
        )
    }

    // MARK: Overview

    /// What was heard of one worker.
    struct Heard: Sendable {
        var status: JSONObject?
        var first: (at: ContinuousClock.Instant, stats: JSONObject)?
        var latest: (at: ContinuousClock.Instant, stats: JSONObject)?
        var sampleCount = 0

        var isOnline: Bool { status?["state"] == "online" }
    }

    /// The messages of the status and stats topics, gathered as they arrive.
    final class Collector: Sendable {
        let workers = Mutex<[String: Heard]>([:])
        let topics: Topics

        init(topics: Topics) { self.topics = topics }

        func take(_ message: MQTTMessage) {
            guard let (id, kind) = topics.parseWorkerTopic(message.topic),
                case .object(let object)? = try? JSON(parsing: message.payload)
            else { return }
            let now = ContinuousClock.now
            workers.withLock { workers in
                var heard = workers[id] ?? Heard()
                switch kind {
                case .status:
                    heard.status = object
                case .stats:
                    if heard.first == nil { heard.first = (now, object) }
                    heard.latest = (now, object)
                    heard.sampleCount += 1
                }
                workers[id] = heard
            }
        }

        /// Every online worker has `samples` stats; none online after the retained statuses had time
        /// to arrive also ends the wait.
        func isComplete(samples: Int, settled: Bool) -> Bool {
            workers.withLock { workers in
                let online = workers.values.filter(\.isOnline)
                if online.isEmpty { return settled }
                return online.allSatisfy { $0.sampleCount >= samples }
            }
        }
    }

    func overview(_ broker: Connection, _ console: Console) async throws(CLIFailure) {
        let requester = broker.requester
        let collector = Collector(topics: broker.topics)
        let stream = requester.messages
        // Up to --timeout for each sample: stats come once per --stats-interval. Nothing is read
        // after the deadline, however many messages wait.
        let started = ContinuousClock.now
        let deadline = broker.deadline ?? started + connection.timeout * samples
        let gathering = Task {
            for await message in stream {
                if ContinuousClock.now >= deadline { break }
                collector.take(message)
            }
        }
        do {
            try await requester.subscribe(broker.topics.workerStatus("+"), qos: 1, timeout: broker.waitLimit)
            try await requester.subscribe(broker.topics.workerStats("+"), qos: 0, timeout: broker.waitLimit)
        } catch {
            throw CLIFailure(.unreachable, "cannot subscribe to the worker topics: \(error.message)")
        }
        // Retained statuses follow the SUBACK at once; give them a moment before deciding that no
        // worker is online.
        let settleAt = ContinuousClock.now + .milliseconds(500)
        while ContinuousClock.now < deadline {
            if collector.isComplete(samples: samples, settled: ContinuousClock.now >= settleAt) { break }
            try? await Task.sleep(for: .milliseconds(25))
        }
        requester.stop()
        await gathering.value
        let workers = collector.workers.withLock { $0 }.sorted { $0.key < $1.key }
        let waited = ContinuousClock.now - started
        for (id, heard) in workers where heard.isOnline && heard.sampleCount < samples {
            console.err(
                "chime status: worker \(id): \(heard.sampleCount) of \(samples) stats messages within "
                    + "\(TimeDisplay.elapsed(milliseconds: milliseconds(waited))) (chimed sends one every --stats-interval "
                    + "seconds, default 10, none when 0): give a --timeout longer than that interval, or fewer --samples"
            )
        }
        if json {
            console.exact(lines: workers.map { JSON.object(Self.json($0.key, $0.value)).text })
        } else if workers.isEmpty {
            console.out("no worker has published a status or stats under \(broker.topics.prefix)/$worker/")
        } else {
            console.out(lines: workers.flatMap { Self.describe($0.key, $0.value, waited: connection.timeoutText) })
        }
        guard workers.contains(where: { $0.value.isOnline }) else {
            throw CLIFailure(.failed, "no worker is online")
        }
    }

    /// The numeric stats chimed publishes (PROTOCOL.md, "Worker status and stats"), by the line
    /// that shows them; anything else is shown under "other". The CLI's tests check that chimed's
    /// stats message has nothing for "other".
    static let gauges = ["pending", "devices", "inflight"]
    static let totals = [
        "deliveries", "lateDeliveries", "refusedDeliveries", "errors", "rateLimited", "duplicates", "zoneRulesChanges",
    ]
    static let broker = ["reconnects", "subscriptionRefusals", "takeovers", "invalidTopics"]
    /// Counts keyed by op and by error code.
    static let tallies = [("commands", "commands"), ("errorsByCode", "errors")]
    /// Histograms in milliseconds, by key and label (the last three in slot mode only).
    /// `expected`: the lateness the worker did not cause (a past date, a catch-up, quiet hours).
    static let histograms = [
        ("lateness", "lateness"), ("expectedLateness", "expected"), ("fsync", "fsync"), ("loopStep", "loopStep"),
        ("leaseRenew", "leaseRenew"), ("slotLoad", "slotLoad"), ("handover", "handover"),
    ]
    /// Slot mode: the slots served (a list, shown from the status) and the counts of hand-overs.
    static let slotCounts = [
        ("slotsLoaded", "loaded"), ("slotsDropped", "dropped"), ("commandsForOtherSlots", "commands for others"),
        ("commandsForwarded", "forwarded"),
        ("forwardsRefused", "forwards refused"),
    ]
    static let journal = [("journalSequence", "sequence"), ("journalBytesSinceSnapshot", "bytes since snapshot")]
    static let known: Set<String> = Set(
        gauges + totals + broker + tallies.map(\.0) + histograms.map(\.0) + journal.map(\.0) + slotCounts.map(\.0)
            + ["workerId", "at", "slots"]
    )

    /// The lines shown for one worker.
    static func describe(_ id: String, _ heard: Heard, waited: String) -> [String] {
        var head = ["worker \(id)"]
        let status = heard.status ?? [:]
        head.append(status["state"]?.plainText ?? "unknown (no status)")
        if let partition = status["partition"]?.stringValue { head.append("partition \(partition)") }
        if let pid = status["pid"] { head.append("pid \(pid.plainText)") }
        if heard.isOnline, let started = status["startedAt"]?.stringValue,
            case .instant(let since)? = DateTimeValue(iso8601: started)
        {
            head.append("up \(TimeDisplay.elapsed(milliseconds: wallClock().milliseconds - since.milliseconds))")
        }
        var lines = [head.joined(separator: "  ")]
        guard let latest = heard.latest else {
            if heard.isOnline { lines.append("  stats     none within \(waited)") }
            return lines
        }
        let stats = latest.stats
        var table = Table([])
        func numbers(_ label: String, _ keys: [(key: String, name: String)]) {
            let shown = keys.compactMap { key, name in stats[key].map { "\(name) \($0.plainText)" } }
            if !shown.isEmpty { table.append(["  " + label, shown.joined(separator: "  ")]) }
        }
        numbers("counts", gauges.map { ($0, $0) })
        numbers("totals", totals.map { ($0, $0) })
        numbers("broker", broker.map { ($0, $0) })
        for (key, label) in tallies {
            if case .object(let counts)? = stats[key], !counts.isEmpty {
                table.append(["  " + label, counts.map { "\($0.key) \($0.value.plainText)" }.joined(separator: ", ")])
            }
        }
        for (key, label) in histograms {
            guard case .object(let histogram)? = stats[key] else { continue }
            let maximum = histogram["max"]?.numberValue
            let parts = ["count", "p50", "p99", "max", "mean"].compactMap { part -> String? in
                guard let value = histogram[part] else { return nil }
                guard part != "count" else { return "\(part) \(value.plainText)" }
                guard var number = value.numberValue else { return "\(part) -" }
                // A chimed before 0.2.0 sent a bucket's bound as its p99, above the max it sent.
                if part.hasPrefix("p"), let maximum { number = min(number, maximum) }
                return "\(part) \(format(number)) ms"
            }
            table.append(["  " + label, parts.joined(separator: "  ")])
        }
        numbers("journal", journal)
        if let slotCount = status["slots"]?.plainText {
            let serving = status["serving"]?.stringValue ?? ""
            let count = servedSlots(status).map { "\($0.serving.count)" } ?? "unreadable"
            let shown = slotCounts.compactMap { key, name in stats[key].map { "\(name) \($0.plainText)" } }
            table.append(
                [
                    "  slots",
                    (["serving \(count) of \(slotCount): \(serving.isEmpty ? "none" : serving)"] + shown).joined(
                        separator: "  "
                    ),
                ]
            )
        }
        if let rates = rates(heard) {
            let text = rates.values.map { "\($0.key) \(format($0.value))/s" }.joined(separator: "  ")
            table.append(["  rates", text + "  (over \(format(rates.seconds)) s)"])
        }
        let others = otherNumbers(stats)
        if !others.isEmpty {
            table.append(["  other", others.map { "\($0.key) \(format($0.value))" }.joined(separator: "  ")])
        }
        var when = "\(heard.sampleCount) sample\(heard.sampleCount == 1 ? "" : "s")"
        if let at = stats["at"]?.stringValue { when = "\(TimeDisplay(zone: nil).both(at)), " + when }
        table.append(["  stats at", when])
        lines += table.lines
        return lines
    }

    /// Per-second rates of the counters between the first and the latest sample.
    static func rates(_ heard: Heard) -> (values: [(key: String, value: Double)], seconds: Double)? {
        guard heard.sampleCount >= 2, let first = heard.first, let latest = heard.latest else { return nil }
        let seconds = ChimeSupport.seconds(latest.at - first.at)
        guard seconds > 0.05 else { return nil }
        func total(_ stats: JSONObject) -> Double {
            guard case .object(let commands)? = stats["commands"] else { return 0 }
            return commands.reduce(0) { $0 + ($1.value.numberValue ?? 0) }
        }
        var values: [(key: String, value: Double)] = [
            ("commands", (total(latest.stats) - total(first.stats)) / seconds)
        ]
        for key in ["deliveries", "errors"] {
            if let a = first.stats[key]?.numberValue, let b = latest.stats[key]?.numberValue {
                values.append((key, (b - a) / seconds))
            }
        }
        return (values, seconds)
    }

    /// Numeric stats this version does not know, nested objects flattened with dots.
    static func otherNumbers(_ stats: JSONObject, prefix: String = "") -> [(key: String, value: Double)] {
        var found: [(key: String, value: Double)] = []
        for (key, value) in stats {
            if prefix.isEmpty && known.contains(key) { continue }
            if let number = value.numberValue {
                found.append((prefix + key, number))
            } else if case .object(let nested) = value {
                found += otherNumbers(nested, prefix: prefix + key + ".")
            }
        }
        return found
    }

    static func format(_ value: Double) -> String {
        if value == value.rounded() && abs(value) < 1e15 { return String(Int64(value)) }
        return String(format: "%.2f", value)
    }

    static func json(_ id: String, _ heard: Heard) -> JSONObject {
        var o: JSONObject = [
            "workerId": .string(id),
            "status": heard.status.map(JSON.object) ?? .null,
            "stats": heard.latest.map { .object($0.stats) } ?? .null,
            "samples": .int(Int64(heard.sampleCount)),
        ]
        if let rates = rates(heard) {
            var r = JSONObject()
            for (key, value) in rates.values { r[key] = .double(value) }
            r["seconds"] = .double(rates.seconds)
            o["rates"] = .object(r)
        }
        return o
    }
}
