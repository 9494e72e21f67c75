import ChimeCore
import ChimeJournal
import ChimeMQTT
import ChimeSupport
import ChimeTime
import ChimeWorker
import Foundation

/// `chime-bench hot-path`: the CPU chimed's loop spends on a command, in process, with neither
/// broker nor disk: the worker's own loop and policy (``WorkerLoop``, ``WorkerStateMachine``) over a
/// store that encodes and checksums each record as the journal does and a transport that takes
/// every publication at once. Run by `make bench-quick`, in seconds, and compared with the figure
/// recorded for this kind of machine in docs/bench/hot-path.json: the guard a developer sees
/// before a commit lands (CONTRIBUTING.md). It measures; it asserts nothing.
struct HotPathBenchmark {
    var quick: Bool
    /// Where the recorded figures are (`--record` writes this run's there).
    var recordPath = "docs/bench/hot-path.json"
    var record = false
    /// Only the workloads whose name starts with this (`single`, `batch`), for a profiler.
    var only: String?

    /// A workload: commands as the broker hands them over, each with the device its topic names.
    struct Workload {
        var name: String
        var commands: [MQTTMessage]
        /// What one command carries, for the per-notification figure.
        var notificationsPerCommand: Int
    }

    static func workloads(count: Int) -> [Workload] {
        let far = Instant(milliseconds: wallMilliseconds() + 30 * 86_400_000).rfc3339()
        func message(_ device: String, _ i: Int, _ payload: String) -> MQTTMessage {
            var m = MQTTMessage(topic: "chime/\(device)/cmd/schedule", payload: Array(payload.utf8), qos: 1)
            m.messageId = Int32(truncatingIfNeeded: i % 65_535 + 1)
            m.responseTopic = "chime/\(device)/replies/bench"
            m.correlationData = withUnsafeBytes(of: UInt64(i).bigEndian) { Array($0) }
            return m
        }
        // The ingest workload's commands: one notification each over 2,000 devices.
        let single = (0..<count).map { i in
            message(
                "d\(i % 2000)",
                i,
                #"{"id":"i\#(i)","fireDate":"\#(far)","alertBody":"\#(SystemBenchmark.body)","userInfo":\#(SystemBenchmark.userInfo)}"#
            )
        }
        // The batch workload's: 100 notifications a command.
        let batches = (0..<max(1, count / 100)).map { k in
            let items = (0..<100).map { j in
                #"{"id":"b\#(k)-\#(j)","fireDate":"\#(far)","alertBody":"\#(SystemBenchmark.body)"}"#
            }
            return message("b\(k % 2000)", k, #"{"notifications":[\#(items.joined(separator: ","))]}"#)
        }
        return [
            Workload(name: "single schedule", commands: single, notificationsPerCommand: 1),
            Workload(name: "batch of 100", commands: batches, notificationsPerCommand: 100),
        ]
    }

    func run() throws {
        let count = quick ? 20_000 : 100_000
        say("hot path: the worker's loop in process (no broker, no disk), default flags, best of 5 passes")
        var figures: [String: Double] = [:]
        for workload in Self.workloads(count: count) where only.map({ workload.name.hasPrefix($0) }) ?? true {
            var best = Double.infinity
            for _ in 0..<5 { best = min(best, try pass(workload)) }
            figures[workload.name] = best * 1e6
            say(
                String(
                    format: "  %-16@ %7.2f µs CPU a command (%.2f a notification)",
                    workload.name,
                    best * 1e6,
                    best * 1e6 / Double(workload.notificationsPerCommand)
                )
            )
        }
        try compare(figures)
    }

    /// One pass over fresh state: CPU seconds (both threads: the loop and its decoding helper) a command.
    func pass(_ workload: Workload) throws -> Double {
        let (loop, store, transport) = try BenchLoop.online()
        let before = processCPUSeconds()
        // Turns of 100 commands, as a busy loop takes them; the replies acknowledged the next turn.
        var i = 0
        while i < workload.commands.count {
            let end = min(i + 100, workload.commands.count)
            var events = transport.takeAcknowledgements()
            events += workload.commands[i..<end].map { WorkerEvent.mqtt(.message($0)) }
            try loop.step(events)
            i = end
        }
        let spent = processCPUSeconds() - before
        guard store.appended == workload.commands.count, transport.replies == workload.commands.count else {
            throw BenchError(
                "hot path: \(store.appended) records and \(transport.replies) replies for \(workload.commands.count) commands"
            )
        }
        return spent / Double(workload.commands.count)
    }

    /// Prints this run's figures against those recorded for this machine's kind, or records them.
    func compare(_ figures: [String: Double]) throws {
        let machine =
            "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB"
        if record {
            let json: [String: Any] = [
                "machine": machine, "date": String(Instant(milliseconds: wallMilliseconds()).rfc3339().prefix(10)),
                "microsecondsPerCommand": figures,
            ]
            try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys])
                .write(to: URL(fileURLWithPath: recordPath))
            say("recorded in \(recordPath)")
            return
        }
        guard let data = FileManager.default.contents(atPath: recordPath),
            let recorded = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let was = recorded["microsecondsPerCommand"] as? [String: Double]
        else {
            say("nothing recorded in \(recordPath) to compare with (chime-bench hot-path --record writes it)")
            return
        }
        say(
            "against \(recordPath) (\(recorded["date"] ?? "?"), \(recorded["machine"] ?? "?"); this machine: \(machine)):"
        )
        for (name, now) in figures.sorted(by: { $0.key < $1.key }) {
            guard let then = was[name] else { continue }
            let change = (now / then - 1) * 100
            say(
                String(
                    format: "  %-16@ %7.2f µs, recorded %7.2f µs: %+.1f %%%@",
                    name,
                    now,
                    then,
                    change,
                    change > 5 ? " — more than 5 % slower: say why in the commit message" : ""
                )
            )
        }
    }
}

/// The worker's own loop and policy over the in-memory store and transport below, online.
enum BenchLoop {
    static func online(
        limits: CommandLimits = CommandLimits(),
        budget: DeviceBudget = DeviceBudget(rate: 250, burst: 1000),
        engine: Engine = Engine(configuration: EngineConfiguration())
    ) throws -> (WorkerLoop<CountingStore, TakingTransport, BenchClock>, CountingStore, TakingTransport) {
        let store = CountingStore()
        let transport = TakingTransport()
        let clock = BenchClock()
        var policy = WorkerStateMachine.Policy(
            workerId: "bench",
            instance: "bench",
            pid: 1,
            clientId: "chimed-bench",
            topics: Topics(prefix: "chime"),
            partition: .all,
            limits: limits,
            deviceBudget: budget,
            statsInterval: 0,
            logLevel: .info
        )
        policy.metricsInterval = 0
        let loop = WorkerLoop(
            machine: WorkerStateMachine(
                policy: policy,
                engine: engine,
                now: clock.now(),
                random: SystemRandomNumberGenerator()
            ),
            store: store,
            transport: transport,
            clock: clock,
            logger: Logger(level: .warning, format: .text) { _ in },
            inbox: Inbox()
        )
        try loop.step([.mqtt(.connected(sessionPresent: false))])
        try loop.step(transport.subscribed.map { .mqtt(.subscribed(messageId: $0, grantedQoS: [1])) })
        return (loop, store, transport)
    }
}

/// A store in memory that does the journal's CPU work for each record: encodes it and checksums it.
final class CountingStore: WorkerStore {
    private(set) var appended = 0
    private(set) var bytes = 0
    private(set) var sequence: UInt64 = 0
    var checksum: UInt32 = 0

    func append(_ entry: JournalEntry, key: CommandKey?) throws(StoreError) {
        let payload = entry.encode(key: key)
        checksum = CRC32C.checksum(payload, continuing: checksum)
        bytes += payload.count
        sequence += 1
        if case .schedule = entry.kind { appended += 1 }
    }

    func commit() throws(StoreError) -> Int64? { nil }
    var syncWait: Int64? { nil }
    var status: StoreStatus { StoreStatus(lastSequence: sequence) }
    func beginSnapshot(slot: Int) throws(StoreError) -> UInt64 { sequence }
    func writeSnapshot(_ frozen: EngineSnapshot, written: @escaping @Sendable (StoreError?) -> Void) { written(nil) }
    func completeSnapshot(writeError: StoreError?) throws(StoreError) -> UInt64 { sequence }
    func close() throws(StoreError) {}
}

/// A transport that takes every publication at once and acknowledges it on the next turn.
final class TakingTransport: WorkerTransport {
    private var nextId: Int32 = 0
    private var unacknowledged: [Int32] = []
    private(set) var subscribed: [Int32] = []
    private(set) var replies = 0
    /// Read each reply for ``lastReplyOutcome`` (not in the hot path's passes: it costs).
    var readsReplies = false
    /// The last reply's `error.code`, or `ok`.
    private(set) var lastReplyOutcome = ""

    func publish(_ message: OutboundMessage) throws(TransportError) -> Int32 {
        nextId = nextId % 65_535 + 1
        if case .reply = message.purpose {
            replies += 1
            if readsReplies {
                let reply = try? JSON(parsing: message.payload).objectValue
                lastReplyOutcome = reply?["error"]?.objectValue?["code"]?.stringValue ?? "ok"
            }
        }
        if message.qos > 0 { unacknowledged.append(nextId) }
        return nextId
    }

    func unsubscribe(_ filter: String) throws(TransportError) {}

    func subscribe(_ filter: String, qos: Int) throws(TransportError) -> Int32 {
        nextId += 1
        subscribed.append(nextId)
        return nextId
    }

    func takeAcknowledgements() -> [WorkerEvent] {
        defer { unacknowledged.removeAll(keepingCapacity: true) }
        return unacknowledged.map { .mqtt(.published(messageId: $0, reasonCode: 0)) }
    }

    func stop() {}
}

/// The system's clocks, as chimed's loop reads them.
struct BenchClock: WorkerClock {
    func now() -> Instant { Instant(milliseconds: wallMilliseconds()) }
    func monotonic() -> ContinuousClock.Instant { .now }
}

/// User and system CPU seconds of this process, all its threads.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
