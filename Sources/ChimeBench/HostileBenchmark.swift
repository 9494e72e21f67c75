import ChimeCore
import ChimeHarness
import ChimeTime
import Foundation

/// A costly command the hostile device sends, with room in it for a distinct requestId.
struct Attack: Sendable {
    var name: String
    var op: String
    /// The payload, whose requestId is `name.` and nine digits from index `digits` on.
    var template: [UInt8]
    var digits: Int
    /// The attack that must come before this one on the same device: the state it works on.
    var follows: String?
    /// The device it is always sent to (the receipts attacker's, whose inbox is full); nil: the
    /// attacker's.
    var device: String?

    init(
        _ name: String,
        _ op: String,
        follows: String? = nil,
        device: String? = nil,
        limits: CommandLimits = CommandLimits(),
        _ members: String
    ) {
        self.name = name
        self.op = op
        self.follows = follows
        self.device = device
        let head = #"{"requestId":"\#(name)."#
        digits = head.utf8.count
        template = Array((head + #"000000000","# + members + "}").utf8)
        precondition(template.count <= limits.maxCommandBytes, "\(name): \(template.count) bytes")
    }

    /// The command to `device` (or to its own ``device``), its requestId ending in `n`.
    func command(_ device: String, _ n: Int) -> (String, [UInt8]) {
        let device = self.device ?? device
        var payload = template
        var v = n
        for k in (0..<9).reversed() {
            payload[digits + k] = UInt8(ascii: "0") + UInt8(v % 10)
            v /= 10
        }
        return ("\(SystemBenchmark.prefix)/\(device)/cmd/\(op)", payload)
    }

    /// What the attacker sends, round-robin: the worst cases of PROTOCOL.md's limits (section 3.8)
    /// and what reading the engine found costly. The batches replace all the device holds, so
    /// that they stay within its quota and are carried out rather than refused.
    static func all(now: Instant, limits: CommandLimits = CommandLimits()) -> [Attack] {
        let depth = CommandLimits.maximumUserInfoDepth
        func values(_ r: ClosedRange<Int>) -> String { r.map(String.init).joined(separator: ",") }
        func nested(_ levels: Int) -> String {
            String(repeating: #"{"a":"#, count: levels) + "1" + String(repeating: "}", count: levels)
        }
        func batch(_ prefix: String, _ count: Int, _ userInfo: String) -> String {
            let items = (0..<count).map { #"{"id":"\#(prefix)\#($0)","after":3600,"userInfo":\#(userInfo)}"# }
            return #""notifications":[\#(items.joined(separator: ","))],"replace":{"all":true}"#
        }
        // A yearly rule whose every year is 31 million candidates, of which BYSETPOS keeps the last.
        // Scheduled rather than previewed 1000 times: without a work budget for rules, validating
        // it takes the engine minutes, and a preview of 1000 many more.
        let rule =
            "FREQ=YEARLY;BYMONTH=\(values(1...12));BYMONTHDAY=\(values(1...31));BYHOUR=\(values(0...23))"
            + ";BYMINUTE=\(values(0...59));BYSECOND=\(values(0...59));BYSETPOS=-1"
        // Members `"k12345":0,` (11 bytes) until the command is just under --max-command-bytes.
        let keys = (0..<(limits.maxCommandBytes - 64) / 11).map { String(format: #""k%05d":0"#, $0) }
        // A userInfo of exactly --max-userinfo-bytes serialized (or as much as a command of one
        // notification holds, when the two limits are alike), in as many members as fit.
        let wideBytes = min(limits.maxUserInfoBytes, limits.maxCommandBytes - 400)
        var wide = "{"
        while wide.utf8.count < wideBytes - 40 { wide += #""u\#(wide.utf8.count)":0,"# }
        wide += #""pad":""# + String(repeating: "x", count: wideBytes - wide.utf8.count - 9) + #""}"#
        let start = Instant(milliseconds: (now.milliseconds / 60_000 + 1) * 60_000)
        let exdates = (0..<1000).map { #""\#(start.adding(seconds: Int64($0) * 60).rfc3339())""# }
        return [
            Attack(
                "rrule",
                "schedule",
                limits: limits,
                #""id":"r","fireDate":"\#(start.rfc3339())","rrule":"\#(rule)""#
            ),
            Attack("keys", "schedule", limits: limits, keys.joined(separator: ",")),
            Attack(
                "wide",
                "schedule",
                limits: limits,
                batch("w", min(1000, (limits.maxCommandBytes - 200) / (wideBytes + 40)), wide)
            ),
            Attack("deep", "schedule", limits: limits, batch("d", 1000, nested(depth))),
            Attack(
                "match",
                "list",
                follows: "deep",
                limits: limits,
                #""match":{"userInfo":{"a":\#(nested(depth - 1))}},"limit":1000"#
            ),
            Attack(
                "minutely",
                "preview",
                limits: limits,
                #""notification":{"fireDate":"\#(start.rfc3339())","rrule":"FREQ=MINUTELY","exdates":[\#(exdates.joined(separator: ","))]},"count":1000"#
            ),
        ]
    }

    /// The receipts attacker's commands, on ``receiptsDevice`` (whose inbox the run fills first, a
    /// fireId `f<i>@<filled>` each): 1000 one-shots due a second later, each delivery kept in a full
    /// inbox and history; an ack of 1000 of the first deliveries; an inbox page from a cursor; a
    /// history page.
    static func receipts(filled: Instant) -> [Attack] {
        let soon = (0..<1000).map { #"{"id":"n\#($0)","after":1,"alertBody":"b"}"# }.joined(separator: ",")
        let acked = (0..<1000).map { #""f\#($0 * 97)@\#(filled.rfc3339())""# }.joined(separator: ",")
        return [
            Attack("inbox-due", "schedule", device: receiptsDevice, #""notifications":[\#(soon)]"#),
            Attack("inbox-ack", "ack", device: receiptsDevice, #""fireIds":[\#(acked)]"#),
            Attack("inbox-page", "inbox", device: receiptsDevice, #""limit":1000,"cursor":"50000""#),
            Attack("history-page", "history", device: receiptsDevice, #""limit":1000"#),
        ]
    }

    static let receiptsDevice = "inboxer"
}

/// The largest value every limit takes (``DeviceLimits``, ``CommandLimits/largestCommandBytes``,
/// the rate budget's flags): chimed's flags for the hostile run at the maxima.
enum Maxima {
    static let limits = CommandLimits(
        maxCommandBytes: CommandLimits.largestCommandBytes,
        maxUserInfoBytes: CommandLimits.largestCommandBytes
    )
    static let flags = [
        "--max-command-bytes", "\(CommandLimits.largestCommandBytes)",
        "--max-userinfo-bytes", "\(CommandLimits.largestCommandBytes)",
        "--max-pending-per-device", "\(DeviceLimits.maxPendingPerDevice)",
        "--max-bytes-per-device", "\(1 << 40)",
        "--max-inbox-per-device", "\(DeviceLimits.maxInboxPerDevice)",
        "--max-inbox-bytes-per-device", "\(DeviceLimits.maxInboxBytesPerDevice)",
        "--history-per-device", "\(DeviceLimits.maxHistoryPerDevice)",
        "--inbox-ttl", "\(DeviceLimits.largestInboxTTLSeconds)",
        "--device-rate", "\(DeviceBudget.largestRate)",
        "--device-burst", "\(DeviceBudget.largestBurst)",
    ]
}

/// What one run of the hostile workload measured.
struct HostileRun {
    /// The bystanders' deliveries, whose `worker` samples are their lateness.
    var deliveries: DeliveryCollector.Snapshot
    /// Round trips of a bystander's schedule command, in milliseconds.
    var roundTrip: Samples
    /// chimed's CPU time over the window, in cores.
    var chimedCores: Double
    /// Each attack sent alone, on a device of its own: reply time in ms and what the reply said.
    var alone: [(name: String, ms: Double, reply: String)]
    var attacker: LoadClient.Result?
}

extension SystemBenchmark {
    /// Commands the attacker keeps unanswered.
    static let attackWindow = 50
    /// How long the workload waits for a reply: an engine without a work budget for rules spends
    /// minutes on the rrule attack, and every reply waits for it.
    static let hostileReplyTimeout = 1800.0

    /// A hostile neighbour: one device sends the costliest commands it can (``Attack/all(now:)``)
    /// as fast as its replies come back, while 1,000 others receive steady deliveries and one
    /// bystander times a schedule command every 100 ms; beside a quiet run of the same length and
    /// setup. Target: the bystanders' p99 lateness within 100 ms of the quiet run's.
    mutating func hostile(url: String, chimed: String) throws {
        let s = sizes
        let attacks = Attack.all(now: Instant(milliseconds: wallMilliseconds()))
        say(
            "hostile: \(s.hostileRate)/s falling due for \(s.hostileSeconds) s over 1000 devices, a schedule round "
                + "trip every 100 ms; quiet, then beside a device sending "
                + attacks.map { "\($0.name) (\($0.template.count) B)" }.joined(separator: ", ")
                + ", \(Self.attackWindow) in flight"
        )
        let quiet = try hostileRun(url: url, chimed: chimed, attacks: nil)
        say(summary("quiet", quiet))
        let attacked = try hostileRun(url: url, chimed: chimed, attacks: attacks)
        for a in attacked.alone { say(String(format: "  alone: %@ answered in %.1f ms: %@", a.name, a.ms, a.reply)) }
        say(summary("attacked", attacked))
        let attacker = attacked.attacker!
        let sentBytes = (0..<attacker.replies).reduce(0) { $0 + attacks[$1 % attacks.count].template.count }
        var byCode: [String: Int] = [:]
        for (outcome, n) in attacker.outcomes { byCode[String(outcome.split(separator: " ").last!), default: 0] += n }
        let codes = byCode.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let perSecond = Double(attacker.replies) / attacker.seconds
        let megabytes = Double(sentBytes) / attacker.seconds / 1e6
        say(
            String(
                format: "  attacker: %d commands, %.0f/s, %.1f MB/s; replies: ",
                attacker.replies,
                perSecond,
                megabytes
            )
                + attacker.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        )
        let increase = attacked.deliveries.worker.quantile(0.99) - quiet.deliveries.worker.quantile(0.99)
        let met = increase <= 100
        say(
            String(
                format: "  bystander p99 lateness %+.0f ms beside the attacker: target (≤ +100 ms) %@",
                increase,
                met ? "met" : "NOT met"
            )
        )

        func figures(_ r: HostileRun) -> [String: Any] {
            [
                "latenessMs": quantiles(r.deliveries.worker), "arrivalLatenessMs": quantiles(r.deliveries.arrival),
                "roundTripMs": quantiles(r.roundTrip), "chimedCores": r.chimedCores,
            ]
        }
        var attackedJSON = figures(attacked)
        attackedJSON["attacker"] = [
            "commands": attacker.replies, "perSecond": perSecond, "megabytesPerSecond": megabytes,
            "repliesByCode": byCode, "replies": attacker.outcomes,
        ]
        results["hostile"] = [
            "devices": 1000, "perSecond": s.hostileRate, "seconds": s.hostileSeconds, "attackWindow": Self.attackWindow,
            "attackBytes": Dictionary(uniqueKeysWithValues: attacks.map { ($0.name, $0.template.count) }),
            "alone": Dictionary(
                uniqueKeysWithValues: attacked.alone.map {
                    ($0.name, ["ms": $0.ms, "reply": $0.reply] as [String: Any])
                }
            ),
            "quiet": figures(quiet), "attacked": attackedJSON, "p99IncreaseMs": increase, "targetMet": met,
        ]
        func lateness(_ r: HostileRun) -> String {
            let l = r.deliveries.worker
            return String(format: "%.0f / %.0f / %.0f ms", l.quantile(0.5), l.quantile(0.99), l.max)
        }
        func trip(_ r: HostileRun) -> String {
            String(
                format: "%.1f / %.1f ms (%d)",
                r.roundTrip.quantile(0.5),
                r.roundTrip.quantile(0.99),
                r.roundTrip.count
            )
        }
        rows.append(("hostile: bystander lateness p50 / p99 / max, quiet", lateness(quiet), "", ""))
        rows.append(
            (
                "hostile: the same beside the attacker",
                lateness(attacked) + String(format: " (p99 %+.0f ms)", increase),
                met ? "met" : "NOT met", "p99 ≤ quiet + 100 ms"
            )
        )
        rows.append(
            (
                "hostile: bystander schedule round trip p50 / p99, quiet → attacked",
                trip(quiet) + " → " + trip(attacked), "", ""
            )
        )
        rows.append(
            (
                String(
                    format: "hostile: attacker's replies (%d commands, %.0f/s, %.0f MB/s)",
                    attacker.replies,
                    perSecond,
                    megabytes
                ),
                codes, "", ""
            )
        )
        try hostileAtTheMaxima(url: url, chimed: chimed, quiet: quiet)
    }

    /// The same beside two attackers with every limit at the largest value it allows (``Maxima``):
    /// one sending the costliest commands at those sizes, one with receipts whose inbox and
    /// history are full (``Attack/receipts(filled:)``). Target: the bystanders' p99 lateness within
    /// 100 ms of the quiet run's (which ran with the default limits: the bystanders are the same).
    mutating func hostileAtTheMaxima(url: String, chimed: String, quiet: HostileRun) throws {
        let now = Instant(milliseconds: wallMilliseconds())
        let attacks = Attack.all(now: now, limits: Maxima.limits)
        say(
            "hostile at the maxima: chimed with " + Maxima.flags.joined(separator: " ") + "; attackers: "
                + attacks.map { "\($0.name) (\($0.template.count) B)" }.joined(separator: ", ")
                + ", and a device with receipts whose inbox and history hold \(DeviceLimits.maxInboxPerDevice)"
        )
        let run = try hostileRun(url: url, chimed: chimed, attacks: attacks, maxima: true)
        for a in run.alone { say(String(format: "  alone: %@ answered in %.1f ms: %@", a.name, a.ms, a.reply)) }
        say(summary("attacked at the maxima", run))
        let increase = run.deliveries.worker.quantile(0.99) - quiet.deliveries.worker.quantile(0.99)
        let met = increase <= 100
        let attacker = run.attacker!
        say(
            String(format: "  attackers: %d commands; replies: ", attacker.replies)
                + attacker.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        )
        let l = run.deliveries.worker
        rows.append(
            (
                "hostile at the maxima (every limit at its largest, a receipts attacker with a full inbox)",
                String(
                    format: "%.0f / %.0f / %.0f ms (p99 %+.0f ms); round trip p50 / p99 %.1f / %.1f ms",
                    l.quantile(0.5),
                    l.quantile(0.99),
                    l.max,
                    increase,
                    run.roundTrip.quantile(0.5),
                    run.roundTrip.quantile(0.99)
                ),
                met ? "met" : "NOT met", "p99 ≤ quiet + 100 ms"
            )
        )
        results["hostileMaxima"] = [
            "flags": Maxima.flags,
            "alone": Dictionary(
                uniqueKeysWithValues: run.alone.map { ($0.name, ["ms": $0.ms, "reply": $0.reply] as [String: Any]) }
            ),
            "latenessMs": quantiles(l), "arrivalLatenessMs": quantiles(run.deliveries.arrival),
            "roundTripMs": quantiles(run.roundTrip), "chimedCores": run.chimedCores,
            "attackerReplies": attacker.outcomes, "p99IncreaseMs": increase, "targetMet": met,
        ]
    }

    func summary(_ name: String, _ r: HostileRun) -> String {
        let l = r.deliveries.worker
        return String(
            format:
                "  %@: lateness p50 %.0f ms, p99 %.0f ms, max %.0f ms (arrival p99 %.0f ms); round trip p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d); chimed %.2f cores",
            name,
            l.quantile(0.5),
            l.quantile(0.99),
            l.max,
            r.deliveries.arrival.quantile(0.99),
            r.roundTrip.quantile(0.5),
            r.roundTrip.quantile(0.99),
            r.roundTrip.max,
            r.roundTrip.count,
            r.chimedCores
        )
    }

    /// One run on a fresh chimed with its default limits: the bystanders' deliveries loaded, then,
    /// over their window, the round trips and, when `attacks` are given, the attacker.
    /// - Parameter maxima: chimed with every limit at its largest (``Maxima``), and a receipts
    ///   attacker whose inbox is filled first, beside `attacks`.
    func hostileRun(url: String, chimed: String, attacks: [Attack]?, maxima: Bool = false) throws -> HostileRun {
        let s = sizes
        let data = try TemporaryDirectory(prefix: "chime-bench")
        let worker = try startChimed(
            chimed,
            url: url,
            data: data.path,
            perDeviceLimits: true,
            extra: maxima ? Maxima.flags : []
        )
        defer { stop(worker) }
        var alone: [(name: String, ms: Double, reply: String)] = []
        var attacker: LoadClient?
        var attacks = attacks
        if maxima { attacks! += try fillInbox(url: url) }
        if let attacks {
            let client = try LoadClient(
                url: url,
                clientId: "bench-attacker",
                window: Self.attackWindow,
                tallyOutcomes: true
            )
            try client.start()
            // Each alone first, on a device of its own (whose budget is whole): what one costs.
            for a in attacks {
                let r = try client.run(
                    [a.command("lone-\(a.follows ?? a.name)", 0)],
                    measureLatency: true,
                    timeout: Self.hostileReplyTimeout
                )
                let reply = r.outcomes.keys.first.map { String($0.split(separator: " ").last!) } ?? "?"
                alone.append((a.name, r.latencies.quantile(0.5) * 1000, reply))
            }
            attacker = client
        }
        // The bystanders' deliveries only: the receipts attacker's go to the same filter.
        let measured = try DeliveryCollector(url: url, measure: true, only: "\(Self.prefix)/s-")
        try measured.start(filter: "\(Self.prefix)/+/notifications")
        let load = try LoadClient(url: url, clientId: "bench-load-hostile", window: 20, tallyOutcomes: true)
        try load.start()
        let count = s.hostileRate * s.hostileSeconds
        let start = firstDue(loading: count, perSecond: try loadingRate(load))
        _ = try load.run(steadyCommands(rate: s.hostileRate, seconds: s.hostileSeconds, start: start), timeout: 3600)
        load.stop()
        let prober = try LoadClient(url: url, clientId: "bench-roundtrip", window: 1, tallyOutcomes: true)
        try prober.start()
        defer { prober.stop() }

        let begin = monotonicSeconds() + Double(start - wallMilliseconds()) / 1000
        let end = begin + Double(s.hostileSeconds)
        if begin > monotonicSeconds() { usleep(UInt32((begin - monotonicSeconds()) * 1e6)) }
        let cpu0 = cpuSeconds(pid: worker.process.pid) ?? 0
        let far = Instant(milliseconds: wallMilliseconds() + 30 * 86_400_000).rfc3339()
        let roundTrips = inBackground {
            var ms = Samples()
            while monotonicSeconds() < end {
                let sent = monotonicSeconds()
                let command = (
                    "\(Self.prefix)/s-\(ms.count % 1000)/cmd/schedule",
                    Array(#"{"id":"rt","fireDate":"\#(far)"}"#.utf8)
                )
                let r = try prober.run([command], measureLatency: true, timeout: Self.hostileReplyTimeout)
                for v in r.latencies.values { ms.add(v * 1000) }
                let wait = sent + 0.1 - monotonicSeconds()
                if wait > 0 { usleep(UInt32(wait * 1e6)) }
            }
            return ms
        }
        var attack: (() throws -> LoadClient.Result)?
        if let attacks, let attacker {
            attack = inBackground {
                try attacker.run(count: .max, until: end, timeout: Self.hostileReplyTimeout) {
                    attacks[$0 % attacks.count].command("attacker", $0)
                }
            }
        }
        let trips = try roundTrips()
        let attackResult = try attack?()
        let cores = ((cpuSeconds(pid: worker.process.pid) ?? 0) - cpu0) / (monotonicSeconds() - begin)
        attacker?.stop()
        let d = try steadyDeliveries(measured, count: count, seconds: s.hostileSeconds, workload: "hostile")
        return HostileRun(deliveries: d, roundTrip: trips, chimedCores: cores, alone: alone, attacker: attackResult)
    }

    /// Fills the receipts attacker's inbox and history to their largest caps: receipts on, then
    /// that many one-shots due at one instant, delivered before this returns (its collector counts
    /// them); returns the receipts attacker's commands, which name those deliveries.
    func fillInbox(url: String) throws -> [Attack] {
        let device = Attack.receiptsDevice
        let count = DeviceLimits.maxInboxPerDevice
        let load = try LoadClient(url: url, clientId: "bench-inbox-fill", window: 20, tallyOutcomes: true)
        try load.start()
        defer { load.stop() }
        let filled = Instant(milliseconds: (wallMilliseconds() / 1000 + 40) * 1000)
        let collector = try DeliveryCollector(url: url, measure: false, only: "\(Self.prefix)/\(device)/")
        try collector.start(filter: "\(Self.prefix)/\(device)/notifications")
        defer { collector.stop() }
        var commands = [("\(Self.prefix)/\(device)/cmd/device", Array(#"{"receipts":true}"#.utf8))]
        for start in stride(from: 0, to: count, by: 1000) {
            let items = (start..<start + 1000).map { #"{"id":"f\#($0)","fireDate":"\#(filled.rfc3339())"}"# }
            commands.append(
                (
                    "\(Self.prefix)/\(device)/cmd/schedule",
                    Array(#"{"notifications":[\#(items.joined(separator: ","))]}"#.utf8)
                )
            )
        }
        let r = try load.run(commands, timeout: 600)
        guard r.ok == commands.count else { throw BenchError("inbox fill: \(r.outcomes)") }
        guard waitUntil(timeout: 600, { collector.count >= count }) else {
            throw BenchError("inbox fill: \(collector.count) of \(count) delivered")
        }
        say("  the receipts attacker's inbox and history hold \(count) deliveries")
        return Attack.receipts(filled: filled)
    }
}
