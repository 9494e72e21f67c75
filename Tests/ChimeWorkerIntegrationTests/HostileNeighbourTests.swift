import ChimeCore
import ChimeMQTT
import ChimeSupport
import ChimeTestSupport
import ChimeWorker
import Foundation
import Synchronization
import Testing

/// The hostile-neighbour property, against the real chimed and mosquitto: one device (the
/// attacker) sends random commands of every operation as fast as its replies come back, on a
/// chimed whose per-device flags are at their defaults, their bounds or random values between,
/// while another device (the bystander) has a notification fall due every 100 ms and times a
/// command every 100 ms. The bystander's delivery lateness and round trips stay within a margin of
/// a quiet run of the same chimed (the bystander alone, as long), and none of its notifications is
/// lost.
///
/// A device whose inbox grew large once made each of its deliveries cost what it held, and its own
/// one-shots then held every other device up for seconds: that is the kind of stall this finds,
/// whatever operation or limit causes it.
///
/// `make test` runs one run with every flag at its largest value (phases of 15 s) and one with
/// random flags (10 s), about a minute. `CHIME_HOSTILE_SECONDS` sets the phases' length,
/// `CHIME_HOSTILE_SEEDS` the runs with random flags (default 1), and `CHIME_HOSTILE_SEED` replays a
/// seed; `make soak` runs them at length. A failure names the seed and chimed's flags.
@Suite(.serialized) struct HostileNeighbourTests {
    /// How much later than on a quiet machine the bystander may be (``HostileNeighbour/margin``).
    static let margin = HostileNeighbour.margin

    /// The phases' length: `CHIME_HOSTILE_SECONDS`, else `brief`.
    static func seconds(brief: Double) -> Double {
        ProcessInfo.processInfo.environment["CHIME_HOSTILE_SECONDS"].flatMap(Double.init).map { max(2, $0) } ?? brief
    }

    static var seedFromEnvironment: UInt64? {
        ProcessInfo.processInfo.environment["CHIME_HOSTILE_SEED"].flatMap(UInt64.init)
    }

    /// Every per-device flag at its largest value (inbox and history caps of 100,000 among them),
    /// the attacker filling its inbox while it sends everything else.
    @Test func aDeviceAtEveryLargestLimitStallsNoOther() async throws {
        let seed = Self.seedFromEnvironment ?? UInt64.random(in: 0...UInt64.max)
        try await Self.check(
            HostileFlags.largest(),
            mix: .fillingItsInbox,
            seed: seed,
            seconds: Self.seconds(brief: 15)
        )
    }

    /// Flags and commands both drawn from the seed.
    @Test func aDeviceAtRandomLimitsStallsNoOther() async throws {
        let count = ProcessInfo.processInfo.environment["CHIME_HOSTILE_SEEDS"].flatMap(Int.init) ?? 1
        let seeds =
            Self.seedFromEnvironment.map { [$0] } ?? (0..<max(1, count)).map { _ in UInt64.random(in: 0...UInt64.max) }
        for seed in seeds {
            var random = SplitMix64(seed: seed)
            let flags = HostileFlags.random(&random)
            try await Self.check(flags, mix: .everything, seed: seed, seconds: Self.seconds(brief: 10))
        }
    }

    /// The ranges the test draws from are chimed's: its help shows them and it refuses past them.
    @Test func theFlagsRangesAreChimedsOwn() async throws {
        let help = try ChildProcess(try builtProduct("chimed"), arguments: ["--help"])
        try help.start()
        #expect(await help.waitForExit(timeout: .seconds(30)) == .exited(0))
        for name in HostileFlags.perDevice {
            let spec = try #require(WorkerConfiguration.flagSpecs.first { $0.name == name })
            let range = try #require(spec.range, "--\(name) has no range")
            let shown = "(\(range.lowerBound) to \(range.upperBound), default: \(spec.defaultValue ?? ""))"
            #expect(help.standardOutputLines.contains { $0.contains("--\(name) ") && $0.contains(shown) }, "\(name)")
            let flags = try Flags(
                ["--\(name)", "\(range.upperBound + 1)"],
                specs: WorkerConfiguration.flagSpecs,
                environment: [:]
            )
            #expect(
                throws: UsageError(
                    "--\(name) must be an integer from \(range.lowerBound) to \(range.upperBound), got \"\(range.upperBound + 1)\""
                )
            ) {
                try WorkerConfiguration(flags: flags)
            }
        }
    }

    /// One run: a quiet phase, then the attacked one, each `seconds` long, on one chimed.
    static func check(_ flags: HostileFlags, mix: AttackerMix, seed: UInt64, seconds: Double) async throws {
        // Info, not the harness's debug: a line a command would be most of what chimed does.
        let f = try await WorkerFixture.start(extra: flags.arguments + ["--log-level", "info"])
        defer { Task { await f.stop() } }
        let context = "seed \(seed) (CHIME_HOSTILE_SEED=\(seed) replays the choices), chimed \(flags)"
        let bystander = try await Bystander(broker: f.broker)
        defer { bystander.stop() }

        let stats = f.topics.workerStats(f.workerId)
        try await f.client.subscribe(stats, qos: 0, timeout: .seconds(10))
        /// chimed's own figures (`--stats-interval 1`): deliveries and its loop's longest step so far.
        func worker() -> String {
            guard let last = f.commands.objects(on: stats).last else { return "no stats" }
            let deliveries = AttackerModel.int(last["deliveries"]).map(String.init) ?? "?"
            let step = AttackerModel.int(last["loopStep"]?.objectValue?["max"]).map(String.init) ?? "?"
            return "chimed: \(deliveries) deliveries, longest loop step \(step) ms"
        }
        let quiet = await bystander.run(phase: "q", seconds: seconds)
        let quietWorker = worker()
        try #require(
            quiet.refused.isEmpty && quiet.lost.isEmpty,
            "the bystander alone: \(quiet.refused.prefix(3)) \(quiet.lost.prefix(3)); \(context)"
        )

        let attacker = Attacker(
            client: try await CommandClient(broker: f.broker, clientId: "attacker"),
            model: AttackerModel(seed: seed, flags: flags, mix: mix)
        )
        defer { attacker.client.stop() }
        try await attacker.prepare()
        let attack = Task { await attacker.run(seconds: seconds) }
        let attacked = await bystander.run(phase: "a", seconds: seconds)
        await attack.value
        let held = try? await attacker.client.ok(Attacker.device, .device, "{}")["pending"]

        let summary = """
            \(context)
              quiet:    \(quiet); \(quietWorker)
              attacked: \(attacked); \(worker())
              attacker: \(AttackerModel.int(held).map(String.init) ?? "?") pending, \(attacker.summary)
            """
        print(summary)
        #expect(f.worker?.process.isRunning == true, "chimed stopped; \(context)")
        #expect(
            attacked.lost.isEmpty,
            "bystander notifications never delivered: \(attacked.lost.prefix(5))\n\(summary)"
        )
        #expect(attacked.refused.isEmpty, "bystander commands refused: \(attacked.refused.prefix(3))\n\(summary)")
        #expect(
            attacked.p99Lateness <= quiet.p99Lateness + margin,
            "the bystander's deliveries were held up\n\(summary)"
        )
        #expect(
            attacked.p99RoundTrip <= quiet.p99RoundTrip + margin,
            "the bystander's commands were held up\n\(summary)"
        )
        #expect(attacker.unanswered == 0, "attacker commands without a reply\n\(summary)")
    }
}

// MARK: - chimed's flags

/// chimed's per-device flags for one run, each with the range and default chimed itself declares
/// (``WorkerConfiguration/flagSpecs``), so that a limit changed there is what this test runs with.
struct HostileFlags: CustomStringConvertible, Sendable {
    /// The flags that bound what one device may do or hold.
    static let perDevice = [
        "max-pending-per-device", "max-bytes-per-device", "max-command-bytes", "max-userinfo-bytes", "device-rate",
        "device-burst", "inbox-ttl", "max-inbox-per-device", "max-inbox-bytes-per-device", "history-per-device",
    ]

    /// The least the bystander needs, whatever the run: 20 notifications pending (one falls due
    /// 1 s after it is scheduled, ten a second) in 16 KiB, and engine time for ten commands a
    /// second. Below them it is refused by its own quota, which is no neighbour's doing. Device
    /// rate 0 is no limit at all, which leaves no share to keep.
    static let floors = [
        "max-pending-per-device": 20, "max-bytes-per-device": 16_384, "device-rate": 100, "device-burst": 100,
    ]

    private(set) var values: [(name: String, value: String)]

    var arguments: [String] { values.flatMap { ["--\($0.name)", $0.value] } }
    var description: String { arguments.joined(separator: " ") }
    func integer(_ name: String) -> Int {
        values.first { $0.name == name }.flatMap { Int($0.value) } ?? Self.bounds(name).default
    }

    /// A flag's allowed values (above the bystander's floor) and its default, from chimed's specs.
    static func bounds(_ name: String) -> (range: ClosedRange<Int>, default: Int) {
        guard let spec = WorkerConfiguration.flagSpecs.first(where: { $0.name == name }), let range = spec.range,
            let value = spec.defaultValue.flatMap(Int.init)
        else { fatalError("--\(name) is no integer flag with a range and a default") }
        let floor = max(range.lowerBound, floors[name] ?? range.lowerBound)
        return (floor...range.upperBound, value)
    }

    /// Every flag at its largest value, receipts on.
    static func largest() -> HostileFlags {
        HostileFlags(values: perDevice.map { ($0, "\(bounds($0).range.upperBound)") } + [("receipts", "true")])
    }

    /// Each flag at its default, its smallest or largest allowed value, or a value between
    /// (log-uniform, as the ranges span many orders of magnitude).
    static func random(_ random: inout SplitMix64) -> HostileFlags {
        var values: [(String, String)] = perDevice.map { name in
            let (range, value) = bounds(name)
            switch random.below(4) {
            case 0: return (name, "\(value)")
            case 1: return (name, "\(range.lowerBound)")
            case 2: return (name, "\(range.upperBound)")
            default:
                let low = Double(max(1, range.lowerBound))
                let high = Double(range.upperBound)
                let u = Double(random.next() >> 11) / Double(1 << 53)
                return (name, "\(min(range.upperBound, max(range.lowerBound, Int(low * pow(high / low, u)))))")
            }
        }
        values.append(("receipts", random.below(3) == 0 ? "false" : "true"))
        return HostileFlags(values: values)
    }
}

// MARK: - The bystander

/// What the bystander measured in one phase, in milliseconds.
struct Measured: CustomStringConvertible {
    /// Arrival minus `fireDate`, of each delivery.
    var lateness: [Double] = []
    var roundTrips: [Double] = []
    /// Scheduled (ok) and never delivered.
    var lost: [String] = []
    /// Replies that were not ok, and commands that got none.
    var refused: [String] = []

    static func p99(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return 0 }
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)]
    }

    var p99Lateness: Double { Self.p99(lateness) }
    var p99RoundTrip: Double { Self.p99(roundTrips) }

    var description: String {
        func ms(_ v: Double) -> String { String(format: "%.0f", v) }
        return "lateness p99 \(ms(p99Lateness)) max \(ms(lateness.max() ?? 0)) ms over \(lateness.count), "
            + "round trip p99 \(ms(p99RoundTrip)) max \(ms(roundTrips.max() ?? 0)) ms over \(roundTrips.count)"
    }
}

/// A device that schedules a one-shot due 1 s later every 100 ms and times each reply, on a client
/// of its own whose network thread stamps what arrives (so that a busy test process does not
/// count as lateness).
final class Bystander: Sendable {
    static let device = "bystander"
    let topics = Topics(prefix: "chime")
    let replyTopic = "chime/bystander/replies/timed"
    let client: MQTTClient
    /// Arrival times (wall clock, ms) of replies by requestId, and of deliveries by id with their
    /// `fireDate`.
    private let replies = Shared<[String: (at: Double, ok: Bool, text: String)]>([:])
    private let deliveries = Shared<[String: (at: Double, due: Double)]>([:])
    private let subscribed = Shared(0)

    init(broker: TestBroker) async throws {
        let replies = self.replies
        let deliveries = self.deliveries
        let subscribed = self.subscribed
        let notifications = topics.notifications(Self.device)
        let replyTopic = self.replyTopic
        client = try MQTTClient(options: broker.clientOptions(clientId: "bystander")) { event in
            switch event {
            case .message(let message):
                let at = Date().timeIntervalSince1970 * 1000
                guard let object = (try? JSON(parsing: message.payload))?.objectValue else { return }
                if message.topic == replyTopic, let id = object["requestId"]?.stringValue {
                    let ok = object["ok"] == true
                    let text = String(decoding: message.payload, as: UTF8.self)
                    replies.withLock { $0[id] = (at, ok, text) }
                } else if message.topic == notifications, let id = object["id"]?.stringValue,
                    let fireDate = object["fireDate"]?.stringValue,
                    case .instant(let due)? = DateTimeValue(iso8601: fireDate)
                {
                    deliveries.withLock { $0[id] = $0[id] ?? (at, Double(due.milliseconds)) }
                }
            case .subscribed: subscribed.withLock { $0 += 1 }
            default: break
            }
        }
        try client.start()
        guard await eventually(timeout: .seconds(10), { client.isConnected }) else {
            throw HarnessError("the bystander did not connect")
        }
        try client.subscribe(notifications)
        try client.subscribe(replyTopic)
        guard await eventually(timeout: .seconds(10), { subscribed.value == 2 }) else {
            throw HarnessError("the bystander's subscriptions were not acknowledged")
        }
    }

    func stop() { client.stop() }

    /// Schedules `{"id": "<phase><i>", "after": 1}` every 100 ms for `seconds`, each after the
    /// previous reply, then waits until every one scheduled was delivered (or a minute passed).
    func run(phase: String, seconds: Double) async -> Measured {
        var measured = Measured()
        var scheduled: [String] = []
        let start = ContinuousClock.now
        var i = 0
        while ContinuousClock.now < start + .seconds(seconds) {
            // Pacing, not synchronisation: a command every 100 ms, or at once after a slow one.
            let tick = start + .milliseconds(100 * i)
            if ContinuousClock.now < tick { try? await Task.sleep(until: tick) }
            let id = "\(phase)\(i)"
            i += 1
            let payload = #"{"id":"\#(id)","after":1,"requestId":"\#(id)"}"#
            var properties = MQTTPublishProperties()
            properties.responseTopic = replyTopic
            let sent = Date().timeIntervalSince1970 * 1000
            do {
                try client.publish(
                    topic: topics.command(Self.device, .schedule),
                    payload: Array(payload.utf8),
                    properties: properties
                )
            } catch {
                measured.refused.append("\(id): \(error)")
                continue
            }
            // Waits for the network thread to stamp the reply; the timeout only ends a failing run.
            var reply: (at: Double, ok: Bool, text: String)?
            _ = await eventually(timeout: .seconds(30), every: .milliseconds(2)) {
                reply = replies.withLock { $0[id] }
                return reply != nil
            }
            guard let reply else {
                measured.refused.append("\(id): no reply within 30 s")
                measured.roundTrips.append(30_000)
                continue
            }
            measured.roundTrips.append(reply.at - sent)
            if reply.ok { scheduled.append(id) } else { measured.refused.append(reply.text) }
        }
        _ = await eventually(timeout: .seconds(60), every: .milliseconds(50)) {
            deliveries.withLock { d in scheduled.allSatisfy { d[$0] != nil } }
        }
        let arrived = deliveries.value
        for id in scheduled {
            if let d = arrived[id] { measured.lateness.append(d.at - d.due) } else { measured.lost.append(id) }
        }
        return measured
    }
}

// MARK: - The attacker

/// The attacker's device: `window` commands in flight, each sent when one before it is answered.
final class Attacker: Sendable {
    static let device = "attacker"
    /// Enough that chimed always has its next command at hand (it answers a turn's commands at the
    /// turn's end), few enough that the test process is no flood of its own.
    static let window = 4
    let client: CommandClient
    let model: Mutex<AttackerModel>
    private let unansweredCount = Mutex(0)

    init(client: CommandClient, model: AttackerModel) {
        self.client = client
        self.model = Mutex(model)
    }

    var unanswered: Int { unansweredCount.withLock { $0 } }
    var summary: String { model.withLock { $0.summary } }

    /// A zone, so that wall-clock times without one are the device's, and receipts on whatever
    /// `--receipts` says, so that its inbox fills.
    func prepare() async throws {
        try await client.ok(Self.device, .device, #"{"timeZone":"Europe/Paris","receipts":true}"#)
    }

    func run(seconds: Double) async {
        let end = ContinuousClock.now + .seconds(seconds)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<Self.window {
                group.addTask { await self.sendUntil(end) }
            }
        }
    }

    private func sendUntil(_ end: ContinuousClock.Instant) async {
        while ContinuousClock.now < end {
            let command = model.withLock { $0.next() }
            var reply: JSONObject?
            while ContinuousClock.now < end {
                let sent = ContinuousClock.now
                reply = try? await client.send(Self.device, command.op, command.payload, timeout: .seconds(30))
                let took = sent.duration(to: .now)
                model.withLock { $0.timed(command, took) }
                // A limited command is sent again as it was, after a breath: the flood that would
                // follow at once is for the broker's limits (docs/production.md), not this property.
                guard reply?.errorCode == "rate_limited" else { break }
                model.withLock { $0.count(command.op, "rate_limited") }
                try? await Task.sleep(for: .milliseconds(5))
            }
            guard let reply else {
                if ContinuousClock.now < end { unansweredCount.withLock { $0 += 1 } }
                continue
            }
            if reply.errorCode != "rate_limited" { model.withLock { $0.observe(command, reply) } }
        }
    }
}

/// How often the attacker sends each kind of command, in percent.
struct AttackerMix: Sendable {
    enum Kind: CaseIterable, Sendable {
        case single, batch, update, cancel, pause, resume, snooze, device, ack, inbox, history, list, preview
    }

    var weights: [(Kind, Int)]
    /// How often a schedule falls due during the run (within the ration).
    var nearPercent: Int

    /// A bit of everything.
    static let everything = AttackerMix(
        weights: [
            (.single, 10), (.batch, 20), (.update, 8), (.cancel, 5), (.pause, 5), (.resume, 5), (.snooze, 5),
            (.device, 6), (.ack, 6), (.inbox, 14), (.history, 6), (.list, 7), (.preview, 3),
        ],
        nearPercent: 60
    )

    /// Everything, weighted towards what fills its inbox: batches that fall due during the run, read
    /// (inbox pages) and seldom acknowledged. A device at the largest caps matters once it fills them.
    static let fillingItsInbox = AttackerMix(
        weights: [
            (.single, 5), (.batch, 40), (.update, 4), (.cancel, 2), (.pause, 2), (.resume, 2), (.snooze, 3),
            (.device, 3), (.ack, 2), (.inbox, 20), (.history, 5), (.list, 8), (.preview, 4),
        ],
        nearPercent: 90
    )

    func draw(_ random: inout SplitMix64) -> Kind {
        var pick = random.below(weights.reduce(0) { $0 + $1.1 })
        for (kind, weight) in weights {
            if pick < weight { return kind }
            pick -= weight
        }
        return weights[0].0
    }
}

/// One command of the attacker.
struct AttackerCommand: Sendable {
    var op: ChimeCore.Operation
    var payload: String
    /// Ids it schedules.
    var ids: [String] = []
    /// How many of them fall due during the run.
    var near = 0
}

/// Draws the attacker's commands from the seed and from what its replies told it: the ids it
/// scheduled, the fireIds and cursors its inbox gave.
///
/// Its notifications due during the run are rationed (``nearPerSecond``): one device's own
/// deliveries are bounded by its quota, not by a share of the worker (a million due at one instant
/// are sent in turn, `make bench`'s burst), and that volume is not what this property is about. Up
/// to the ration they come in bursts (a batch due at one instant), and the rest falls due hours to
/// years ahead, repeats and wall-clock times included.
struct AttackerModel: Sendable {
    /// Deliveries the attacker may make fall due during the run, per second and at once.
    static let nearPerSecond = 4_000.0
    /// Notifications of a batch that repeat (a `repeatInterval` or an `rrule`); the rest are
    /// one-shots. A batch of 1,000 ordinary yearly rules once held the loop for seconds; the rules of
    /// a command now share one allowance (`RecurrenceLimitTests`, `chime-bench maxima`: 1,000 in
    /// 27 ms in release), and a hundred keep each batch in this debug build well within ``margin``.
    /// `CHIME_HOSTILE_RULES=1000` lets every notification of a batch repeat.
    static let rulesPerBatch =
        ProcessInfo.processInfo.environment["CHIME_HOSTILE_RULES"].flatMap(Int.init).map { min(1000, max(0, $0)) }
        ?? 100
    /// About as many notifications as the attacker keeps: a command that touches all a device holds
    /// (cancel, pause or resume all, a new zone, the first match) costs up to about 100 µs a
    /// notification with rules in this debug build (5 µs in release), so 5,000 keep each under
    /// half a second here.
    static let pendingCeiling = 5_000
    static let zones = ["Europe/Paris", "Asia/Shanghai", "America/New_York", "Pacific/Kiritimati", "Etc/UTC"]
    static let farRules = [
        "FREQ=DAILY;BYHOUR=9,18", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "FREQ=MONTHLY;BYMONTHDAY=-1",
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29", "FREQ=MONTHLY;BYDAY=-1FR;COUNT=20", "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO",
        "FREQ=MINUTELY;INTERVAL=30;BYHOUR=9", "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=8;BYMONTHDAY=15",
        "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=BACKWARD", "FREQ=HOURLY;BYSETPOS=-1;BYMINUTE=0,15,30,45",
        // Never fires (`never_fires`): keep it last.
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
    ]
    static let units = ["year", "quarter", "month", "week", "day", "weekday", "hour", "minute", "second"]

    var random: SplitMix64
    let mix: AttackerMix
    let maxUserInfo: Int
    let maxCommand: Int
    /// Whether a tag (`{"t":12,"n":123456}`) fits `--max-userinfo-bytes`.
    var userInfoFits: Bool { maxUserInfo >= 32 }
    var serial = 0
    /// Rings of the ids it scheduled (far ahead, and due during the run) and the fireIds its inbox
    /// showed.
    var ids: [String] = []
    var nearIds: [String] = []
    var fireIds: [String] = []
    var inboxCursor: String?
    var listCursor: String?
    /// The ration of deliveries due during the run, and when it was last topped up.
    var tokens = nearPerSecond
    var toppedUp = ContinuousClock.now
    /// One-shots with `keepAfterFiring` due during the run: a resume fires those that fired again.
    var kept = 0
    /// Replies by `op outcome`.
    var outcomes: [String: Int] = [:]
    var inboxDeliveries = 0
    var nearScheduled = 0
    var acknowledged = 0
    /// What it holds: as its `device` replies said, counted on by its schedules and cancels (those
    /// that fired since are not subtracted, so it errs high).
    var pending = 0
    /// The slowest round trips, with what they were.
    var slowest: [(Duration, String)] = []
    var largestDropped = 0

    init(seed: UInt64, flags: HostileFlags, mix: AttackerMix) {
        random = SplitMix64(seed: seed ^ 0xA77A_C4E2)
        self.mix = mix
        maxUserInfo = flags.integer("max-userinfo-bytes")
        maxCommand = flags.integer("max-command-bytes")
    }

    var summary: String {
        let total = outcomes.values.reduce(0, +)
        return "\(total) replies, \(nearScheduled) scheduled to fall due in the run, \(inboxDeliveries) deliveries "
            + "read from its inbox (dropped \(largestDropped)), \(acknowledged) acknowledged: "
            + outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            + "; slowest: " + slowest.map { "\($0.0) \($0.1)" }.joined(separator: " | ")
    }

    static func int(_ value: JSON?) -> Int? {
        if case .int(let n)? = value { Int(n) } else { nil }
    }

    mutating func timed(_ command: AttackerCommand, _ took: Duration) {
        slowest.append((took, "\(command.op.rawValue) \(command.payload.utf8.count) B \(command.payload.prefix(80))"))
        slowest.sort { $0.0 > $1.0 }
        if slowest.count > 3 { slowest.removeLast() }
    }

    mutating func count(_ op: ChimeCore.Operation, _ outcome: String) {
        outcomes["\(op.rawValue) \(outcome)", default: 0] += 1
    }

    mutating func observe(_ command: AttackerCommand, _ reply: JSONObject) {
        count(command.op, reply.isOK ? "ok" : reply.errorCode ?? "?")
        guard reply.isOK, let result = reply["result"]?.objectValue else { return }
        switch command.op {
        case .schedule:
            if command.near > 0 { remember(&nearIds, command.ids) } else { remember(&ids, command.ids) }
            nearScheduled += command.near
            pending += (result["scheduled"]?.arrayValue?.count ?? 0) - (Self.int(result["replaced"]) ?? 0)
        case .cancel: pending -= result["cancelled"]?.arrayValue?.count ?? 0
        case .ack: acknowledged += Self.int(result["acknowledged"]) ?? 0
        case .device: pending = Self.int(result["pending"]) ?? pending
        case .inbox:
            let seen = (result["deliveries"]?.arrayValue ?? []).compactMap { $0.objectValue?["fireId"]?.stringValue }
            inboxDeliveries += seen.count
            remember(&fireIds, seen)
            inboxCursor = result["cursor"]?.stringValue
            if case .int(let n)? = result["dropped"] { largestDropped = max(largestDropped, Int(n)) }
        case .list: listCursor = result["cursor"]?.stringValue
        default: break
        }
    }

    private func remember(_ ring: inout [String], _ new: [String]) {
        ring += new
        if ring.count > 8_192 { ring.removeFirst(ring.count - 4_096) }
    }

    // MARK: Drawing

    mutating func chance(_ percent: Int) -> Bool { random.below(100) < percent }
    mutating func pick<T>(_ items: [T]) -> T { items[random.below(items.count)] }
    /// 1...n, small numbers as likely as large ones in order of magnitude.
    mutating func logUniform(_ n: Int) -> Int {
        let u = Double(random.next() >> 11) / Double(1 << 53)
        return max(1, min(n, Int(pow(Double(n), u).rounded())))
    }
    mutating func seconds(_ range: ClosedRange<Double>) -> Double {
        let u = Double(random.next() >> 11) / Double(1 << 53)
        return ((range.lowerBound + u * (range.upperBound - range.lowerBound)) * 1000).rounded() / 1000
    }

    /// Takes `n` from the ration of deliveries due during the run, if that many are left.
    mutating func ration(_ n: Int) -> Bool {
        let now = ContinuousClock.now
        let elapsed = now - toppedUp
        toppedUp = now
        let added = (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        tokens = min(Self.nearPerSecond, tokens + added * Self.nearPerSecond)
        guard tokens >= Double(n) else { return false }
        tokens -= Double(n)
        return true
    }

    func instant(in seconds: Double) -> String {
        Instant(milliseconds: wallClock().milliseconds + Int64(seconds * 1000)).rfc3339(fractional: true)
    }

    /// A wall-clock time 3 to 400 days ahead: ahead in every zone, whatever zone the device moves to.
    mutating func wallClockAhead() -> String {
        let days = Int64(3 + random.below(400))
        let text = Instant(seconds: wallClock().milliseconds / 1000 + days * 86_400 + Int64(random.below(86_400)))
            .rfc3339()
        return String(text.dropLast())
    }

    /// An id it scheduled: mostly one of those far ahead, so that most of what falls due during the
    /// run is delivered and its inbox fills.
    mutating func someId() -> String {
        let ring = chance(5) && !nearIds.isEmpty ? nearIds : ids
        return ring.isEmpty ? "none" : pick(ring)
    }

    /// A `userInfo` tag: 0 to 7 on what falls due far ahead, 8 to 15 on what falls due during the
    /// run; selectors mostly match the former.
    mutating func tag(near: Bool) -> Int { (near ? 8 : 0) + random.below(8) }

    mutating func selector() -> String {
        switch random.below(100) {
        case 0: return #""all":true"#
        case 1..<40:
            let n = logUniform(50)
            let chosen = (0..<n).map { _ in someId() }
            return #""ids":[\#(chosen.map { "\"\($0)\"" }.joined(separator: ","))]"#
        default:
            guard userInfoFits || chance(5) else { return #""ids":["\#(someId())"]"# }
            return #""match":{"userInfo":{"t":\#(tag(near: chance(3)))}}"#
        }
    }

    mutating func content(small: Bool, near: Bool) -> [String] {
        var fields: [String] = []
        switch random.below(4) {
        case 0: fields.append(#""alertBodies":["one","two","\#(String(repeating: "w", count: 1 + random.below(64)))"]"#)
        default:
            let length = small ? random.below(80) : (chance(5) ? random.below(4_000) : random.below(400))
            fields.append(#""alertBody":"\#(String(repeating: "b", count: length))""#)
        }
        if chance(30) { fields.append(#""alertTitle":"t\#(random.below(100))","soundName":"default""#) }
        if chance(20) { fields.append(#""category":"c","alertAction":"open","hasAction":\#(chance(50))"#) }
        switch random.below(5) {
        case 0: fields.append(#""badge":\#(random.below(1_000_001))"#)
        case 1: fields.append(#""badge":"\#(chance(50) ? "+" : "-")\#(logUniform(1_000_000))""#)
        // Past the limit: refused, and in a batch it would refuse the whole batch.
        case 2 where !small && chance(10): fields.append(#""badge":1000001"#)
        default: break
        }
        // Under a `--max-userinfo-bytes` too small for a tag, seldom any (each is refused).
        guard userInfoFits || (!small && chance(5)) else { return fields }
        var userInfo = #""t":\#(tag(near: near)),"n":\#(serial)"#
        if chance(small ? 2 : 15) {
            // Up to the limit, and now and then past it.
            let room = max(0, maxUserInfo - 40)
            let pad = !small && chance(20) && maxUserInfo < 65_536 ? maxUserInfo + 1 : random.below(min(room, 3_000))
            userInfo += #","pad":"\#(String(repeating: "p", count: pad))""#
        }
        if chance(5) { userInfo += #","deep":{"a":{"b":{"c":[1,2,{"d":0.1}]}}}"# }
        fields.append(#""userInfo":{\#(userInfo)}"#)
        if chance(20) { fields.append(#""misfire":"\#(pick(["coalesce", "skip", "all"]))""#) }
        return fields
    }

    /// When a notification fires: during the run, from the ration, or far ahead. `at` is a shared
    /// instant for a batch that falls due at once.
    mutating func timing(at shared: String? = nil, near: Bool, small: Bool, repeats: Bool) -> [String] {
        if near {
            // Never held by quiet hours (they could release many at once), at most once each
            // unless repeating with a count, or kept and resumed (counted in `kept`).
            var fields = [#""ignoreQuietHours":true"#]
            if let shared { return fields + [#""fireDate":"\#(shared)""#] }
            switch repeats ? random.below(6) : 2 {
            case 0:
                fields += [#""after":\#(seconds(0.5...3)),"repeatInterval":"second","count":\#(2 + random.below(3))"#]
            case 1:
                let rule = "FREQ=SECONDLY;INTERVAL=\(1 + random.below(2));COUNT=\(2 + random.below(3))"
                fields += [#""fireDate":"\#(instant(in: seconds(0.5...3)))","rrule":"\#(rule)""#]
            default:
                fields.append(#""after":\#(seconds(0.2...4))"#)
                if kept < 64 && chance(5) {
                    kept += 1
                    fields.append(#""keepAfterFiring":true"#)
                }
            }
            if chance(10) { fields.append(#""expiresAfter":\#(1 + random.below(10))"#) }
            if chance(5) { fields.append(#""enabled":false"#) }
            return fields
        }
        var fields: [String] = []
        switch random.below(6) {
        case 0: fields.append(#""after":\#(7_200 + random.below(315_352_800))"#)
        case 1: fields.append(#""after":\#(86_400 + random.below(864_000)),"alignTo":"\#(10 + random.below(10)):30""#)
        case 2: fields.append(#""fireDate":"\#(instant(in: Double(86_400 * (3 + random.below(900)))))""#)
        default:
            fields.append(#""fireDate":"\#(wallClockAhead())""#)
            switch random.below(4) {
            case 0: fields.append(#""timeZone":"\#(pick(Self.zones))""#)
            case 1: fields.append(#""timeZone":"device""#)
            default: break
            }
        }
        switch repeats ? random.below(6) : 5 {
        case 0: fields.append(#""repeatInterval":"\#(pick(Self.units))""#)
        case 1: fields.append(#""repeatInterval":"\#(pick(Self.units))","count":\#(logUniform(1000))"#)
        case 2:
            // The rule that never fires only alone: in a batch it would refuse the batch.
            fields.append(#""rrule":"\#(pick(small ? Array(Self.farRules.dropLast()) : Self.farRules))""#)
            if chance(30) { fields.append(#""exdates":["\#(wallClockAhead())","\#(wallClockAhead())"]"#) }
        default: break
        }
        if chance(10) { fields.append(#""leadTime":\#(random.below(3_600))"#) }
        if chance(5) { fields.append(#""enabled":false"#) }
        if chance(10) { fields.append(#""expiresAfter":\#(logUniform(86_400))"#) }
        return fields
    }

    /// A new id, or one it scheduled before (a replacement), always the latter once it holds about
    /// ``pendingCeiling``.
    mutating func newId(near: Bool) -> String {
        serial += 1
        if near { return "n\(serial)" }
        return !ids.isEmpty && (pending >= Self.pendingCeiling || chance(20)) ? pick(ids) : "a\(serial)"
    }

    mutating func notification(
        id: String,
        at shared: String? = nil,
        near: Bool,
        small: Bool,
        repeats: Bool = true
    ) -> String {
        let fields = timing(at: shared, near: near, small: small, repeats: repeats) + content(small: small, near: near)
        return "{" + ([#""id":"\#(id)""#] + fields).joined(separator: ",") + "}"
    }

    mutating func next() -> AttackerCommand {
        let requestId = chance(50) ? #""requestId":"r\#(serial)-\#(random.below(1 << 20))""# : ""
        func with(_ body: String) -> String {
            "{" + [body, requestId].filter { !$0.isEmpty }.joined(separator: ",") + "}"
        }
        switch mix.draw(&random) {
        case .single:
            // Up to 4: a repeating one falls due a few times.
            let near = chance(mix.nearPercent) && ration(4)
            let id = newId(near: near)
            let n = notification(id: id, near: near, small: false)
            return AttackerCommand(
                op: .schedule,
                payload: with(String(n.dropFirst().dropLast())),
                ids: [id],
                near: near ? 1 : 0
            )
        case .batch:
            // Mostly within `--max-command-bytes` (at about 300 bytes a notification).
            let n = chance(90) ? logUniform(max(1, min(1000, maxCommand / 300))) : logUniform(1000)
            // Most batches fall due at one instant, when the ration allows: a burst of deliveries.
            let shared = chance(mix.nearPercent) && ration(n) ? instant(in: seconds(0.5...4)) : nil
            let near = shared != nil || (chance(40) && ration(n * 4))
            // Distinct ids: one given twice refuses the batch.
            var distinct = Set<String>()
            let batchIds = (0..<n).map { _ in
                let id = newId(near: near)
                return distinct.insert(id).inserted ? id : "a\(serial)"
            }
            var items = batchIds.enumerated().map { i, id in
                notification(id: id, at: shared, near: near, small: true, repeats: i < Self.rulesPerBatch)
            }
            // Now and then one invalid item, which refuses the whole batch.
            if chance(5) { items[random.below(items.count)] = #"{"id":"bad","after":-1}"# }
            var body = #""notifications":[\#(items.joined(separator: ","))]"#
            if chance(30) { body += ",\"replace\":{\(selector())}" }
            return AttackerCommand(op: .schedule, payload: with(body), ids: batchIds, near: near ? n : 0)
        case .update:
            let id = someId()
            var fields: [String] = []
            for _ in 0...random.below(3) {
                switch random.below(7) {
                case 0: fields.append(#""alertBody":"\#(String(repeating: "u", count: random.below(200)))""#)
                case 1: fields.append(#""alertBody":null"#)
                case 2: fields.append(#""userInfo":{"t":\#(tag(near: false)),"u":true}"#)
                case 3: fields.append(#""badge":"+1""#)
                case 4:
                    fields.append(ration(4) ? #""after":\#(seconds(0.5...3))"# : #""fireDate":"\#(wallClockAhead())""#)
                case 5: fields.append(ration(1) ? #""enabled":true"# : #""enabled":false"#)
                default: fields.append(#""rrule":"\#(pick(Self.farRules))","fireDate":"\#(wallClockAhead())""#)
                }
            }
            // A field given twice is malformed JSON: keep the first of each.
            var seen = Set<String>()
            fields = fields.filter { seen.insert(String($0.prefix { $0 != ":" })).inserted }
            return AttackerCommand(op: .update, payload: with(#""id":"\#(id)","# + fields.joined(separator: ",")))
        case .cancel: return AttackerCommand(op: .cancel, payload: with(selector()))
        case .pause: return AttackerCommand(op: .pause, payload: with(selector()))
        case .resume:
            // A resume fires again the kept one-shots that fired: rationed too.
            guard ration(kept + 1) else { return AttackerCommand(op: .pause, payload: with(selector())) }
            return AttackerCommand(op: .resume, payload: with(selector()))
        case .snooze:
            let id = someId()
            let after = ration(1) ? seconds(0.2...3) : Double(3_600 + random.below(86_400))
            return AttackerCommand(op: .snooze, payload: with(#""id":"\#(id)","after":\#(after)"#))
        case .device:
            var fields: [String] = []
            if chance(60) { fields.append(#""timeZone":"\#(chance(3) ? "Mars/Olympus_Mons" : pick(Self.zones))""#) }
            if chance(20) { fields.append(#""badge":\#(random.below(1_000_001))"#) }
            if chance(20) {
                let start = "\(10 + random.below(14)):\(10 + random.below(50))"
                fields.append(
                    chance(30)
                        ? #""quietHours":null"#
                        : #""quietHours":{"start":"\#(start)","end":"0\#(random.below(10)):00"}"#
                )
            }
            // Receipts off empties the inbox: now and then only, so that it mostly grows.
            if chance(20) { fields.append(#""receipts":\#(!chance(5))"#) }
            if chance(10) { fields.append(#""history":\#(chance(80))"#) }
            return AttackerCommand(op: .device, payload: with(fields.joined(separator: ",")))
        case .ack:
            let n = logUniform(1000)
            var chosen = (0..<n).map { _ in fireIds.isEmpty ? "none@2026-01-01T00:00:00Z" : pick(fireIds) }
            if chance(10) { chosen.append("a0@2026-01-01T00:00:00Z") }
            let badge = chance(30) ? #","badge":"-1""# : ""
            return AttackerCommand(
                op: .ack,
                payload: with(#""fireIds":[\#(chosen.map { "\"\($0)\"" }.joined(separator: ","))]\#(badge)"#)
            )
        case .inbox:
            var body = #""limit":\#(logUniform(1000))"#
            if chance(3) {
                body += #","cursor":"99999999999""#
            } else if let cursor = inboxCursor, chance(80) {
                body += #","cursor":"\#(cursor)""#
            }
            return AttackerCommand(op: .inbox, payload: with(body))
        case .history:
            var body = #""limit":\#(logUniform(1000))"#
            if chance(40) { body += #","since":"\#(instant(in: -seconds(0...30)))""# }
            return AttackerCommand(op: .history, payload: with(body))
        case .list:
            var body = #""limit":\#(logUniform(1000))"#
            if chance(userInfoFits ? 40 : 2) { body += #","match":{"userInfo":{"t":\#(tag(near: chance(50)))}}"# }
            if let cursor = listCursor, chance(60) { body += #","cursor":"\#(cursor)""# }
            return AttackerCommand(op: .list, payload: with(body))
        case .preview:
            let count = logUniform(1000)
            if chance(50), !ids.isEmpty {
                return AttackerCommand(op: .preview, payload: with(#""id":"\#(someId())","count":\#(count)"#))
            }
            let n = notification(id: "p", near: false, small: true)
            return AttackerCommand(op: .preview, payload: with(#""notification":\#(n),"count":\#(count)"#))
        }
    }
}
