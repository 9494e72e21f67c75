import ChimeCore
import ChimeMQTT
import ChimeStore
import ChimeSupport
import ChimeWorker
import Synchronization

/// What the fakes saw, in order, so that tests check the worker's ordering rules (append before
/// apply, replies after the commit).
public final class Timeline: @unchecked Sendable {
    // Only the loop thread of one test touches it (the snapshot callback pushes to the inbox).
    public enum Entry: Hashable, Sendable {
        case append(JournalEntry.Kind)
        case commit
        case publish(topic: String)
        case subscribe(String)
        case snapshotBegun
        case transportStopped
        case closed
    }

    public private(set) var entries: [Entry] = []
    public init() {}
    public func add(_ entry: Entry) { entries.append(entry) }
    public func clear() { entries.removeAll() }
}

/// A manual clock: time moves only when the test says so.
public final class ManualClock: WorkerClock, @unchecked Sendable {
    // Only the loop thread of one test touches it.
    public var wall: Instant
    let base = ContinuousClock.now
    var elapsed: Duration = .zero

    public init(_ wall: Instant) { self.wall = wall }

    public func now() -> Instant { wall }
    public func monotonic() -> ContinuousClock.Instant { base + elapsed }

    public func advance(milliseconds: Int64) {
        wall = wall.adding(milliseconds: milliseconds)
        elapsed += .milliseconds(milliseconds)
    }
}

/// A store in memory whose appends, commits and snapshots the test controls.
public final class FakeStore: WorkerStore {
    public let timeline: Timeline
    /// Records appended, with their keys, in order; `committed` of them are durable.
    public private(set) var records: [(entry: JournalEntry, key: CommandKey?)] = []
    public private(set) var committed = 0
    /// Makes the next appends fail while true.
    public var failAppends = false
    public var failCommit = false
    /// Runs in each commit: a test makes a commit take time with it (``ManualClock/advance(milliseconds:)``).
    public var duringCommit: (() -> Void)?
    /// Runs in each append: a test makes a command take engine time with it.
    public var duringAppend: (() -> Void)?
    /// Makes commits fail as a database whose connection broke does (``StoreError/transient``).
    public var failCommitTransiently = false
    public var snapshotDue = false
    public private(set) var snapshotsCompleted = 0
    /// The callback of the snapshot being written: ``finishSnapshot(error:)`` calls it.
    var written: (@Sendable (StoreError?) -> Void)?
    /// The sequence the snapshot begun covers, until it completes or is abandoned.
    public private(set) var begun: UInt64?
    /// The last snapshot handed over to be written.
    public private(set) var frozen: EngineSnapshot?
    public private(set) var isClosed = false

    public init(timeline: Timeline) { self.timeline = timeline }

    public func append(_ entry: JournalEntry, key: CommandKey?) throws(StoreError) {
        duringAppend?()
        guard !failAppends else { throw StoreError("no space left on device (injected)") }
        // The journal round trip is part of every write, as with the real journal.
        let stored: (entry: JournalEntry, key: CommandKey?)
        do {
            stored = try JournalEntry.decodeRecord(kind: entry.kind.rawValue, payload: entry.encode(key: key))
        } catch {
            throw StoreError("the record does not read back: \(error)")
        }
        guard stored.entry == entry, stored.key == key else {
            throw StoreError("the record reads back different: \(stored) != \(entry)")
        }
        timeline.add(.append(entry.kind))
        records.append(stored)
    }

    public func commit() throws(StoreError) -> Int64? {
        guard !failCommit else { throw StoreError("fdatasync: input/output error (injected)") }
        guard !failCommitTransiently || committed == records.count else {
            records.removeSubrange(committed...)
            throw StoreError("server closed the connection unexpectedly (injected)", transient: true)
        }
        timeline.add(.commit)
        duringCommit?()
        let synced = committed < records.count
        committed = records.count
        return synced ? 100 : nil
    }

    public var syncWait: Int64? { nil }

    public var status: StoreStatus {
        StoreStatus(snapshotDue: snapshotDue, bytesSinceSnapshot: records.count, lastSequence: UInt64(records.count))
    }

    public var snapshotRunning: Bool { begun != nil }

    public func beginSnapshot(slot: Int) throws(StoreError) -> UInt64 {
        timeline.add(.snapshotBegun)
        begun = UInt64(records.count)
        return UInt64(records.count)
    }

    public func writeSnapshot(_ frozen: EngineSnapshot, written: @escaping @Sendable (StoreError?) -> Void) {
        precondition(begun != nil, "a snapshot is written after it was begun")
        self.frozen = frozen
        self.written = written
    }

    /// The background writer finishes: the loop hears of it through its inbox.
    public func finishSnapshot(error: StoreError? = nil) {
        written?(error)
    }

    public func completeSnapshot(writeError: StoreError?) throws(StoreError) -> UInt64 {
        written = nil
        begun = nil
        if let writeError { throw writeError }
        snapshotsCompleted += 1
        snapshotDue = false
        return UInt64(records.count)
    }

    public func close() throws(StoreError) {
        timeline.add(.closed)
        isClosed = true
    }
}

/// A transport that records what is published and hands out message ids.
public final class FakeTransport: WorkerTransport {
    public let timeline: Timeline
    /// Every publication the transport took, with the message id it handed out.
    public private(set) var published: [(message: OutboundMessage, messageId: Int32)] = []
    public private(set) var subscriptions: [(filter: String, messageId: Int32)] = []
    public private(set) var unsubscribed: [String] = []
    public private(set) var isStopped = false
    /// Publications the client library refuses (as when it is not connected).
    public var refuses: (OutboundMessage) -> Bool = { _ in false }
    var nextId: Int32 = 1

    public init(timeline: Timeline) { self.timeline = timeline }

    public func publish(_ message: OutboundMessage) throws(TransportError) -> Int32 {
        guard !refuses(message) else { throw TransportError("the client refused the publication (injected)") }
        timeline.add(.publish(topic: message.topic))
        defer { nextId += 1 }
        published.append((message, nextId))
        return nextId
    }

    public func subscribe(_ filter: String, qos: Int) throws(TransportError) -> Int32 {
        timeline.add(.subscribe(filter))
        defer { nextId += 1 }
        subscriptions.append((filter, nextId))
        return nextId
    }

    public func unsubscribe(_ filter: String) throws(TransportError) {
        unsubscribed.append(filter)
    }

    public func stop() {
        if !isStopped { timeline.add(.transportStopped) }
        isStopped = true
    }

    /// The publications on `topic`, oldest first.
    public func published(on topic: String) -> [(message: OutboundMessage, messageId: Int32)] {
        published.filter { $0.message.topic == topic }
    }
}

/// The lines a logger wrote.
public final class LogLines: Sendable {
    let lines = Mutex<[String]>([])
    public init() {}
    public func append(_ bytes: [UInt8]) { lines.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) } }
    public func contains(_ text: String) -> Bool { lines.withLock { $0.contains { $0.contains(text) } } }
}

/// One worker run by the real ``WorkerLoop`` over a ``FakeStore``, a ``FakeTransport`` and a
/// ``ManualClock``: the worker's policy with no broker, no disk and no sleeping. Worker id `w1`,
/// prefix `chime`, no rate limit unless `deviceBudget` sets one.
public final class WorkerTestLoop {
    public let timeline = Timeline()
    public let store: FakeStore
    public let transport: FakeTransport
    public let clock: ManualClock
    public let inbox = Inbox()
    public let log = LogLines()
    public let metrics = RecordingMetrics()
    public let topics = Topics(prefix: "chime")
    public private(set) var loop: WorkerLoop<FakeStore, FakeTransport, ManualClock>

    /// - Parameters:
    ///   - now: the manual clock's start (default 2026-12-01T10:00:00Z).
    ///   - engine: the engine the worker starts with (a recovered one, say).
    ///   - zoneCheckInterval: milliseconds between readings of the zone database; 0: on SIGHUP only.
    ///   - snapshotStep: notifications copied into a snapshot per turn.
    public init(
        now: Instant = Instant(milliseconds: 1_796_119_200_000),
        engine: Engine = Engine(),
        statsInterval: Int64 = 0,
        metricsInterval: Int64 = 0,
        zoneCheckInterval: Int64 = 0,
        deviceBudget: DeviceBudget = DeviceBudget(rate: 0, burst: 1000),
        snapshotStep: Int = Engine.snapshotStep,
        pusher: (any PushSender)? = nil
    ) {
        clock = ManualClock(now)
        store = FakeStore(timeline: timeline)
        transport = FakeTransport(timeline: timeline)
        var policy = WorkerStateMachine.Policy(
            workerId: "w1",
            instance: "this",
            pid: 1,
            clientId: "chimed-w1",
            topics: topics,
            partition: .all,
            limits: CommandLimits(),
            deviceBudget: deviceBudget,
            statsInterval: statsInterval,
            logLevel: .info
        )
        policy.version = "0.0.0-test"
        policy.metricsInterval = metricsInterval
        policy.zoneCheckInterval = zoneCheckInterval
        policy.snapshotStep = snapshotStep
        let log = self.log
        loop = WorkerLoop(
            machine: WorkerStateMachine(policy: policy, engine: engine, now: now, random: SplitMix64(seed: 7)),
            store: store,
            transport: transport,
            clock: clock,
            logger: Logger(level: .info, format: .text) { log.append($0) },
            inbox: inbox,
            metrics: metrics,
            pusher: pusher
        )
    }

    public var machine: WorkerStateMachine { loop.machine }

    /// What the loop handed to its metrics endpoint, oldest first.
    public var exported: [WorkerMetrics] { metrics.exported.withLock { $0 } }
    public var engine: Engine { loop.machine.engine }

    public func step(_ events: WorkerEvent...) throws(WorkerError) { try loop.step(events) }
    public func step(_ events: [WorkerEvent]) throws(WorkerError) { try loop.step(events) }

    /// Whatever other threads pushed (a finished snapshot).
    public func stepInbox() throws(WorkerError) { try loop.step(inbox.take(timeout: 0)) }

    public func advance(seconds: Int64) { clock.advance(milliseconds: seconds * 1000) }

    /// Connected, and the broker granted the command subscription.
    public func online() throws(WorkerError) {
        try step(.mqtt(.connected(sessionPresent: false)))
        guard let commands = transport.subscriptions.last(where: { $0.filter == topics.commandFilter }) else {
            throw WorkerError("the worker did not subscribe to commands")
        }
        try step(.mqtt(.subscribed(messageId: commands.messageId, grantedQoS: [1])))
    }

    /// A QoS 1 command, as the broker hands it over.
    public func command(_ device: String, _ op: Operation, _ json: String, messageId: Int32 = 0) -> WorkerEvent {
        var message = MQTTMessage(topic: topics.command(device, op), payload: Array(json.utf8), qos: 1)
        message.messageId = messageId
        return .mqtt(.message(message))
    }

    public func replies(_ device: String = "d1") -> [JSONObject] {
        transport.published(on: topics.replies(device)).compactMap {
            try? JSON(parsing: $0.message.payload).objectValue
        }
    }

    /// The deliveries published, as (message id, fireId).
    public func deliveries(_ device: String = "d1") -> [(messageId: Int32, fireId: String)] {
        transport.published(on: topics.notifications(device)).map {
            ($0.messageId, $0.message.userProperties.first { $0.name == "fire-id" }?.value ?? "")
        }
    }

    /// The states of the retained statuses published, in order.
    public var statuses: [String] {
        transport.published(on: topics.workerStatus("w1")).compactMap {
            (try? JSON(parsing: $0.message.payload).objectValue)?["state"]?.stringValue
        }
    }

    public func logged(_ text: String) -> Bool { log.contains(text) }
}

/// A metrics sink that keeps what it was handed.
public final class RecordingMetrics: MetricsSink {
    public let exported = Mutex<[WorkerMetrics]>([])
    public let isStopped = Mutex(false)
    public init() {}
    public func update(_ metrics: WorkerMetrics) { exported.withLock { $0.append(metrics) } }
    public func stopped() { isStopped.withLock { $0 = true } }
}

/// A push sender that keeps each attempt handed to it; a test answers with ``WorkerEvent/push(_:_:)``.
public final class RecordingPusher: PushSender {
    public let sent = Mutex<[PushJob]>([])
    public init() {}
    public func send(_ job: PushJob) { sent.withLock { $0.append(job) } }
    /// The attempts so far, and forgets them.
    public func take() -> [PushJob] {
        sent.withLock { s in
            defer { s.removeAll() }; return s
        }
    }
}
