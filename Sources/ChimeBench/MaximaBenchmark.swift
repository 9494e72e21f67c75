import ChimeCore
import ChimeHarness
import ChimeMQTT
import ChimeWorker
import Foundation

/// `chime-bench maxima`: how long one command holds the worker's loop at the largest values the
/// limits allow, in process (the worker's own loop and policy, no broker, no disk): the commands
/// that cost most for their size at each `--max-command-bytes`, the commands whose cost grows with
/// what one device holds at each `--max-pending-per-device`, and what a device whose inbox and
/// history are full at `--max-inbox-per-device` and `--history-per-device` costs per delivery, ack
/// and page. A command that holds the loop delays every other device's deliveries and commands by
/// that long, so these figures are how the maxima in PROTOCOL.md section 3.8 were chosen.
struct MaximaBenchmark {
    var quick: Bool

    /// One figure: what was measured and how long the loop was held, in milliseconds.
    struct Row {
        var limit: String
        var value: Int
        var command: String
        var milliseconds: Double
        var reply: String
    }

    func run() throws {
        say("maxima: one command's hold on the loop at each limit's value, in process (no broker, no disk)")
        var rows: [Row] = []
        let sizes = quick ? [262_144, 1_048_576] : [262_144, 524_288, 1_048_576, 4_194_304]
        for size in sizes { rows += try commandSize(size) }
        let pending = quick ? [1_000, 10_000, 100_000] : [1_000, 10_000, 100_000, 1_000_000]
        for p in pending { rows += try deviceSize(p) }
        rows += receipts(cap: quick ? 20_000 : 100_000)
        rows += try rules()
        rows += try heldRules(DeviceLimits.maxPendingPerDevice)
        rows += try fleetFind(devices: quick ? 100_000 : 1_000_000)
        for r in rows {
            say(
                String(
                    format: "  %-28@ %9d  %-44@ %9.2f ms  %@",
                    r.limit,
                    r.value,
                    r.command,
                    r.milliseconds,
                    r.reply
                )
            )
        }
        let json = rows.map {
            ["limit": $0.limit, "value": $0.value, "command": $0.command, "ms": $0.milliseconds, "reply": $0.reply]
                as [String: Any]
        }
        try FileManager.default.createDirectory(atPath: "bench-results", withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: ["rows": json], options: [.prettyPrinted, .sortedKeys])
            .write(to: URL(fileURLWithPath: "bench-results/maxima.json"))
        say("figures written to bench-results/maxima.json")
    }

    /// The wall time of one turn of the loop holding `payload` on `device`'s `op` topic, with its reply.
    func turn(
        _ loop: WorkerLoop<CountingStore, TakingTransport, BenchClock>,
        _ transport: TakingTransport,
        device: String,
        op: String,
        _ payload: [UInt8]
    ) throws -> (Double, String) {
        transport.readsReplies = true
        var message = MQTTMessage(topic: "chime/\(device)/cmd/\(op)", payload: payload, qos: 1)
        message.messageId = 1
        let start = DispatchTime.now().uptimeNanoseconds
        try loop.step(transport.takeAcknowledgements() + [.mqtt(.message(message))])
        let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
        return (ms, transport.lastReplyOutcome)
    }

    /// The costliest commands for their size at `--max-command-bytes` `size` (and
    /// `--max-userinfo-bytes` as large), each on a device of its own, median of three.
    func commandSize(_ size: Int) throws -> [Row] {
        let limits = CommandLimits(maxCommandBytes: size, maxUserInfoBytes: size)
        let depth = CommandLimits.maximumUserInfoDepth
        // Members `"k12345":0,` until the command is just under the limit: parsed, then refused.
        let keys = (0..<(size - 64) / 12).map { String(format: #""k%06d":0"#, $0) }.joined(separator: ",")
        // 1000 notifications, each with a userInfo of as many small members as fit.
        let perNotification = (size - 200) / 1000
        func wide(_ n: Int) -> String {
            var members: [String] = []
            var bytes = 2
            while bytes + 12 < perNotification - 40 {
                members.append(#""u\#(members.count)":0"#)
                bytes += members.last!.utf8.count + 1
            }
            return #"{"id":"w\#(n)","after":3600,"userInfo":{\#(members.joined(separator: ","))}}"#
        }
        let nested = String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
        let deepOne = #"{"id":"dNNNN","after":3600,"userInfo":\#(nested)}"#
        let deepCount = min(1000, (size - 100) / (deepOne.utf8.count + 1))
        let deep = (0..<deepCount).map { #"{"id":"d\#($0)","after":3600,"userInfo":\#(nested)}"# }
        let attacks: [(String, String)] = [
            ("an object of \(size / 12) members", "{\(keys)}"),
            (
                "1000 notifications of wide userInfo",
                #"{"notifications":[\#((0..<1000).map(wide).joined(separator: ","))]}"#
            ),
            (
                "\(deepCount) notifications nested \(depth) deep",
                #"{"notifications":[\#(deep.joined(separator: ","))]}"#
            ),
        ]
        var rows: [Row] = []
        for (name, payload) in attacks {
            var times: [Double] = []
            var reply = ""
            for round in 0..<3 {
                // The most bytes a device may hold, so that the batches are carried out, not refused.
                let engine = Engine(configuration: EngineConfiguration(maxBytesPerDevice: 1 << 40))
                let (loop, _, transport) = try BenchLoop.online(limits: limits, engine: engine)
                let (ms, r) = try turn(loop, transport, device: "a\(round)", op: "schedule", Array(payload.utf8))
                times.append(ms)
                reply = r
            }
            rows.append(
                Row(
                    limit: "--max-command-bytes",
                    value: size,
                    command: "\(name) (\(payload.utf8.count / 1024) KiB)",
                    milliseconds: median(times),
                    reply: reply
                )
            )
        }
        return rows
    }

    /// Commands whose rules cost the most to check, bounded together by one ``RecurrenceAllowance``: a
    /// batch of everyday rules (carried out), one of costly rules (refused once the allowance is used)
    /// and a preview of a thousand occurrences of a costly rule (ends early). Median of three.
    func rules() throws -> [Row] {
        let everyday = [
            "FREQ=DAILY", "FREQ=DAILY;BYHOUR=9,18", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "FREQ=MONTHLY;BYMONTHDAY=-1",
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO", "FREQ=HOURLY;BYMINUTE=0,30",
            "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
        ]
        let costly = HostileRules.all.first { $0.name == "monthly-setpos-89280" }!.rule
        func batch(_ rule: (Int) -> String) -> String {
            let items = (0..<1000).map { #"{"id":"r\#($0)","fireDate":"2027-01-01T09:15:30Z","rrule":"\#(rule($0))"}"# }
            return #"{"notifications":[\#(items.joined(separator: ","))]}"#
        }
        let commands: [(String, String, String)] = [
            ("schedule", batch { everyday[$0 % everyday.count] }, "1000 everyday rules"),
            ("schedule", batch { _ in costly }, "1000 costly rules (monthly-setpos)"),
            (
                "preview",
                #"{"notification":{"fireDate":"2027-01-01T09:15:30Z","rrule":"\#(costly)"},"count":1000}"#,
                "preview of 1000 of a costly rule"
            ),
        ]
        let limits = CommandLimits(maxCommandBytes: CommandLimits.largestCommandBytes, maxUserInfoBytes: 4096)
        return try commands.map { op, payload, name in
            var times: [Double] = []
            var reply = ""
            for round in 0..<3 {
                let engine = Engine(configuration: EngineConfiguration(maxBytesPerDevice: 1 << 40))
                let (loop, _, transport) = try BenchLoop.online(limits: limits, engine: engine)
                let (ms, r) = try turn(loop, transport, device: "r\(round)", op: op, Array(payload.utf8))
                times.append(ms)
                reply = r
            }
            return Row(
                limit: "rules: one allowance",
                value: RecurrenceAllowance.perCommand,
                command: name,
                milliseconds: median(times),
                reply: reply
            )
        }
    }

    /// A device that gathers costly rules following its zone, two a command (each within its
    /// allowance), on a worker allowing `count` a device, until it may hold no more
    /// (``EngineConfiguration/maxRuleWorkPerDevice``): what a command that computes them all again
    /// holds the loop.
    func heldRules(_ count: Int) throws -> [Row] {
        let engine = Engine(configuration: EngineConfiguration(maxPendingPerDevice: count, maxBytesPerDevice: 1 << 40))
        let limits = CommandLimits(maxCommandBytes: CommandLimits.largestCommandBytes, maxUserInfoBytes: 4096)
        let (loop, _, transport) = try BenchLoop.online(
            limits: limits,
            budget: DeviceBudget(rate: 0, burst: 1000),
            engine: engine
        )
        let rule = HostileRules.all.first { $0.name == "monthly-setpos-89280" }!.rule
        _ = try turn(loop, transport, device: "held", op: "device", Array(#"{"timeZone":"Europe/Paris"}"#.utf8))
        var held = 0
        var refusal = ""
        while held < count {
            let items = (held..<min(count, held + 2)).map {
                #"{"id":"r\#($0)","fireDate":"2027-01-01T09:00:00","timeZone":"device","rrule":"\#(rule)"}"#
            }
            let payload = #"{"notifications":[\#(items.joined(separator: ","))]}"#
            let (_, reply) = try turn(loop, transport, device: "held", op: "schedule", Array(payload.utf8))
            guard reply == "ok" else {
                refusal = reply
                break
            }
            held += items.count
        }
        say("  held rules: \(held) costly rules held, then \(refusal.isEmpty ? "the limit" : refusal)")
        let commands: [(String, String, String)] = [
            ("device", #"{"timeZone":"Asia/Shanghai"}"#, "device: a new zone, \(held) costly rules"),
            ("pause", #"{"all":true}"#, "pause all, \(held) costly rules"),
            ("resume", #"{"all":true}"#, "resume all, \(held) costly rules"),
        ]
        return try commands.map { op, payload, name in
            let (ms, reply) = try turn(loop, transport, device: "held", op: op, Array(payload.utf8))
            return Row(limit: "--max-pending-per-device", value: count, command: name, milliseconds: ms, reply: reply)
        }
    }

    /// A `find` across the fleet (PROTOCOL.md section 3.12) on a worker holding `devices` devices,
    /// one notification each (a tag on every hundredth): the first query, which sorts every device
    /// id into the directory queries walk; the same query again; one by tag, which examines up to
    /// ``FleetFind/maximumDevicesExamined`` devices; and a query after 1,000 new devices, which
    /// merges them in.
    func fleetFind(devices: Int) throws -> [Row] {
        let engine = Engine(configuration: EngineConfiguration(maxBytesPerDevice: 1 << 40))
        let at = Instant(milliseconds: wallMilliseconds())
        func add(_ range: Range<Int>) {
            for i in range {
                var spec = NotificationSpec()
                spec.alertBody = "b"
                if i % 100 == 0 { spec.userInfo = ["campaign": "spring"] }
                let n = ResolvedNotification(id: "n", fireDate: .instant(at.adding(milliseconds: 86_400_000)), spec)
                // Ids in random order, as devices come.
                let id = "d" + String(UInt64(i).multipliedFullWidth(by: 0x9E37_79B9_7F4A_7C15).low, radix: 36)
                engine.apply(
                    .schedule(deviceId: id, at: at, replaced: [], notifications: [n]),
                    key: CommandKey(UInt64(i + 1))
                )
            }
        }
        add(0..<devices)
        let (loop, _, transport) = try BenchLoop.online(budget: DeviceBudget(rate: 0, burst: 1000), engine: engine)
        func query(_ payload: String) throws -> (Double, String) {
            transport.readsReplies = true
            var message = MQTTMessage(topic: "chime/$fleet/find", payload: Array(payload.utf8), qos: 1)
            message.messageId = 1
            message.responseTopic = "chime/$reply/bench/find"
            let start = DispatchTime.now().uptimeNanoseconds
            try loop.step(transport.takeAcknowledgements() + [.mqtt(.message(message))])
            return (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6, transport.lastReplyOutcome)
        }
        var rows: [Row] = []
        func row(_ name: String, _ payload: String) throws {
            let (ms, reply) = try query(payload)
            rows.append(Row(limit: "find: devices held", value: devices, command: name, milliseconds: ms, reply: reply))
        }
        try row("find by prefix, the first query", #"{"prefix":"d1","limit":500}"#)
        try row("find by prefix, again", #"{"prefix":"d1","limit":500}"#)
        try row("find by tag (examines 10,000)", #"{"match":{"userInfo":{"campaign":"spring"}},"limit":500}"#)
        add(devices..<devices + 1000)
        try row("find after 1,000 new devices", #"{"prefix":"d1","limit":500}"#)
        return rows
    }

    /// The commands whose work grows with what one device holds, on a device holding `count`
    /// notifications (wall-clock times that follow its zone, a tag on each tenth).
    func deviceSize(_ count: Int) throws -> [Row] {
        let configuration = EngineConfiguration(maxPendingPerDevice: count, maxBytesPerDevice: 1 << 40)
        let engine = Engine(configuration: configuration)
        let at = Instant(milliseconds: wallMilliseconds())
        for start in stride(from: 0, to: count, by: 1000) {
            let batch = (start..<min(count, start + 1000)).map { i in
                var spec = NotificationSpec()
                spec.alertBody = "b"
                spec.userInfo = ["tag": .string("t\(i % 10)")]
                spec.timeZone = .device
                return ResolvedNotification(
                    id: "n\(i)",
                    fireDate: .local(LocalDateTime(year: 2027, month: 1, day: 1, hour: 9)),
                    spec
                )
            }
            engine.apply(
                .schedule(deviceId: "big", at: at, replaced: [], notifications: batch),
                key: CommandKey(UInt64(start + 1))
            )
        }
        let (loop, _, transport) = try BenchLoop.online(budget: DeviceBudget(rate: 0, burst: 1000), engine: engine)
        let commands: [(String, String, String)] = [
            ("list", #"{"match":{"userInfo":{"tag":"t1"}},"limit":1000}"#, "list by tag"),
            ("device", #"{"timeZone":"Asia/Shanghai"}"#, "device: a new zone (all computed again)"),
            ("pause", #"{"all":true}"#, "pause all"),
            ("resume", #"{"all":true}"#, "resume all"),
            ("cancel", #"{"match":{"userInfo":{"tag":"t1"}}}"#, "cancel a tenth by tag"),
            ("cancel", #"{"all":true}"#, "cancel all"),
        ]
        return try commands.map { op, payload, name in
            let (ms, reply) = try turn(loop, transport, device: "big", op: op, Array(payload.utf8))
            return Row(limit: "--max-pending-per-device", value: count, command: name, milliseconds: ms, reply: reply)
        }
    }

    /// A device with receipts whose inbox and history hold `cap` deliveries each: the engine's cost
    /// per delivery recorded, per ack of 1000 fireIds, and per page (the loop runs these for it).
    func receipts(cap: Int) -> [Row] {
        var configuration = EngineConfiguration()
        configuration.receipts.maxInboxPerDevice = cap
        configuration.receipts.historyPerDevice = cap
        configuration.receipts.maxInboxBytesPerDevice = 1 << 28
        let engine = Engine(configuration: configuration)
        let start = Instant(milliseconds: wallMilliseconds())
        engine.apply(.device(deviceId: "r", at: start, update: DeviceUpdate(receipts: true)))
        func fireId(_ i: Int) -> String { "n\(i)@" + Instant(milliseconds: start.milliseconds + Int64(i)).rfc3339() }
        func record(_ i: Int) {
            let at = Instant(milliseconds: start.milliseconds + Int64(i))
            let payload = Array(#"{"deviceId":"r","id":"n\#(i)","fireId":"\#(fireId(i))","alertBody":"b"}"#.utf8)
            engine.apply(
                .delivered(
                    OccurrenceRecord(
                        deviceId: "r",
                        id: "n\(i)",
                        version: 1,
                        index: 0,
                        occurrence: at,
                        at: at,
                        last: true,
                        badge: nil,
                        receipt: ReceiptCapture(payload: payload, expiresAt: at.milliseconds + 86_400_000, late: false)
                    )
                )
            )
        }
        for i in 0..<cap { record(i) }
        func timed(_ body: () -> Void) -> Double {
            let t = DispatchTime.now().uptimeNanoseconds
            body()
            return Double(DispatchTime.now().uptimeNanoseconds - t) / 1e6
        }
        let deliveries = timed { for i in cap..<(cap + 1000) { record(i) } }
        let ack = timed {
            let ids = (0..<1000).map { fireId(cap / 2 + $0 * 7) }
            engine.apply(
                .ack(
                    deviceId: "r",
                    at: Instant(milliseconds: start.milliseconds + Int64(cap + 1000)),
                    fireIds: ids,
                    badge: nil
                )
            )
        }
        var random = SystemRandomNumberGenerator()
        let now = Instant(milliseconds: start.milliseconds + Int64(cap + 1000))
        let page = timed {
            _ = engine.decide(
                Request(deviceId: "r", op: .inbox, command: .inbox(limit: 1000, cursor: "\(cap / 2)")),
                now: now,
                random: &random
            )
        }
        let history = timed {
            _ = engine.decide(
                Request(deviceId: "r", op: .history, command: .history(since: nil, limit: 1000)),
                now: now,
                random: &random
            )
        }
        return [
            Row(
                limit: "--max-inbox-per-device",
                value: cap,
                command: "1000 deliveries recorded, inbox full",
                milliseconds: deliveries,
                reply: "-"
            ),
            Row(
                limit: "--max-inbox-per-device",
                value: cap,
                command: "ack of 1000 fireIds",
                milliseconds: ack,
                reply: "-"
            ),
            Row(
                limit: "--max-inbox-per-device",
                value: cap,
                command: "inbox page of 1000 from a cursor",
                milliseconds: page,
                reply: "-"
            ),
            Row(
                limit: "--history-per-device",
                value: cap,
                command: "history page of 1000",
                milliseconds: history,
                reply: "-"
            ),
        ]
    }
}
