import ChimeCore
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
    public var snapshotDue = false
    public private(set) var snapshotsCompleted = 0
    /// The callback of the snapshot being written: ``finishSnapshot(error:)`` calls it.
    var written: (@Sendable (StoreError?) -> Void)?
    public private(set) var isClosed = false

    public init(timeline: Timeline) { self.timeline = timeline }

    public func append(_ entry: JournalEntry, key: CommandKey?) throws(StoreError) {
        guard !failAppends else { throw StoreError("no space left on device (injected)") }
        timeline.add(.append(entry.kind))
        records.append((entry, key))
    }

    public func commit() throws(StoreError) -> Int64? {
        guard !failCommit else { throw StoreError("fdatasync: input/output error (injected)") }
        timeline.add(.commit)
        let synced = committed < records.count
        committed = records.count
        return synced ? 1 : nil
    }

    public var syncWait: Int64? { nil }

    public var status: StoreStatus {
        StoreStatus(snapshotDue: snapshotDue, bytesSinceSnapshot: records.count, lastSequence: UInt64(records.count))
    }

    public var snapshotRunning: Bool { written != nil }

    public func beginSnapshot(_ frozen: EngineSnapshot, written: @escaping @Sendable (StoreError?) -> Void)
        throws(StoreError) -> UInt64
    {
        timeline.add(.snapshotBegun)
        self.written = written
        return UInt64(records.count)
    }

    /// The background writer finishes: the loop hears of it through its inbox.
    public func finishSnapshot(error: StoreError? = nil) {
        written?(error)
    }

    public func completeSnapshot(writeError: StoreError?) throws(StoreError) -> UInt64 {
        written = nil
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

    public func stop() {
        if !isStopped { timeline.add(.transportStopped) }
        isStopped = true
    }

    /// The publications on `topic`, oldest first.
    public func published(on topic: String) -> [(message: OutboundMessage, messageId: Int32)] {
        published.filter { $0.message.topic == topic }
    }
}
