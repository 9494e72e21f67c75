import ChimeCore
import ChimeMQTT
import ChimeWorker
import Testing

public func instant(_ text: String) -> Instant {
    guard case .instant(let i)? = DateTimeValue(iso8601: text) else { fatalError("bad instant \(text)") }
    return i
}

/// Drives an ``Engine`` through the worker's own policy and loop (``WorkerTestLoop``: a manual
/// clock, an in-memory journal, a fake broker), so that engine tests keep the worker's ordering
/// of append, apply, commit and reply, and of publish, acknowledgement and record.
public struct Harness {
    public private(set) var worker: WorkerTestLoop
    /// Acknowledge each delivery as soon as it is published.
    public var autoAck = true

    /// Where push attempts go (``RecordingPusher``).
    public let pusher: RecordingPusher

    public init(now: String = "2026-12-01T10:00:00Z", configuration: EngineConfiguration = EngineConfiguration()) {
        let pusher = RecordingPusher()
        self.pusher = pusher
        worker = Self.online(
            WorkerTestLoop(now: instant(now), engine: Engine(configuration: configuration), pusher: pusher)
        )
    }

    private static func online(_ worker: WorkerTestLoop) -> WorkerTestLoop {
        do {
            try worker.online()
        } catch {
            Issue.record("the worker did not come online: \(error)")
        }
        return worker
    }

    /// The engine; setting one (a recovered engine, say) restarts the worker around it at the same time.
    public var engine: Engine {
        get { worker.engine }
        set {
            journaledBefore = journal
            unacked = []
            publishedEarlier = []
            seen = 0
            worker = Self.online(WorkerTestLoop(now: now, engine: newValue, pusher: pusher))
        }
    }

    /// What the workers before the last restart journaled.
    private var journaledBefore: [JournalEntry] = []

    public var now: Instant { worker.clock.now() }

    /// Every entry journaled, in order.
    public var journal: [JournalEntry] { journaledBefore + worker.store.records.map(\.entry) }

    /// Deliveries published and not acknowledged, in order.
    public var unacked: [(message: OutboundMessage, messageId: Int32)] = []

    private func step(_ events: WorkerEvent...) {
        do {
            try worker.step(events)
        } catch {
            Issue.record("the worker stopped: \(error)")
        }
    }

    /// Sends a command and returns its reply.
    @discardableResult
    public mutating func send(_ device: String, _ op: Operation, _ payload: String) -> JSONObject {
        let before = worker.replies(device).count
        step(worker.command(device, op, payload))
        var early = publishedEarlier
        collect(into: &early)
        publishedEarlier = early
        let replies = worker.replies(device)
        #expect(replies.count == before + 1, "one reply per command")
        return replies.last ?? [:]
    }

    /// `result` of an ok reply (fails the test otherwise).
    @discardableResult
    public mutating func ok(_ device: String, _ op: Operation, _ payload: String) -> JSONObject {
        let reply = send(device, op, payload)
        #expect(reply["ok"] == true, "\(JSON.object(reply).text)")
        return reply["result"]?.objectValue ?? [:]
    }

    /// The error code of a failed reply.
    public mutating func errorCode(_ device: String, _ op: Operation, _ payload: String) -> String? {
        let reply = send(device, op, payload)
        return reply["error"]?.objectValue?["code"]?.stringValue
    }

    /// Moves the clock and returns the deliveries published (acknowledged at once unless
    /// `autoAck` is off).
    @discardableResult
    public mutating func advance(to text: String) -> [JSONObject] { advance(to: instant(text)) }

    @discardableResult
    public mutating func advance(seconds: Int64) -> [JSONObject] { advance(to: now.adding(seconds: seconds)) }

    @discardableResult
    public mutating func advance(to target: Instant) -> [JSONObject] {
        var delivered: [JSONObject] = []
        // Step through each wake-up so that repeats fire at their own times, as the worker does.
        tick(&delivered)
        while let wake = engine.nextWake, wake <= target {
            worker.clock.wall = max(now, wake)
            let before = delivered.count
            tick(&delivered)
            // Nothing more can go out until something is acknowledged.
            if delivered.count == before, let next = engine.nextWake, next <= now { break }
        }
        worker.clock.wall = max(now, target)
        tick(&delivered)
        return delivered
    }

    private mutating func tick(_ delivered: inout [JSONObject]) {
        step()
        delivered += publishedEarlier
        publishedEarlier = []
        while true {
            collect(into: &delivered)
            // An acknowledgement makes room, and a repeat can fall due at once.
            guard autoAck, !unacked.isEmpty else { return }
            ackAll()
        }
    }

    /// Deliveries the worker published at the end of a command's batch (due at once), returned
    /// by the next ``advance(to:)``.
    private var publishedEarlier: [JSONObject] = []
    /// How many of the transport's publications have been looked at.
    private var seen = 0

    private mutating func collect(into delivered: inout [JSONObject]) {
        let published = worker.transport.published
        for publication in published.dropFirst(seen) where publication.message.purpose.isDelivery {
            delivered.append(try! JSON(parsing: publication.message.payload).objectValue!)
            unacked.append(publication)
        }
        seen = published.count
    }

    /// The broker acknowledges every delivery in flight.
    public mutating func ackAll() {
        let acks = unacked.map { WorkerEvent.mqtt(.published(messageId: $0.messageId, reasonCode: 0)) }
        unacked = []
        do {
            try worker.step(acks)
        } catch {
            Issue.record("the worker stopped: \(error)")
        }
    }

    /// A fresh engine rebuilt from the journal, as recovery does.
    public func replayed(snapshotAt: Int? = nil) -> Engine {
        let restorer = EngineRestorer(configuration: engine.configuration)
        for entry in journal { restorer.apply(entry) }
        return restorer.finish()
    }

    /// Every notification of the device, page after page (a page also ends by size).
    public func list(_ device: String, engine: Engine? = nil) -> [JSONObject] {
        var copy = self
        if let engine { copy.engine = engine }
        var rows: [JSONObject] = []
        var cursor: String?
        repeat {
            let payload = cursor.map { #"{"limit": 1000, "cursor": "\#($0)"}"# } ?? #"{"limit": 1000}"#
            let result = copy.ok(device, .list, payload)
            rows += result["notifications"]?.arrayValue?.compactMap(\.objectValue) ?? []
            cursor = result["cursor"]?.stringValue
        } while cursor != nil
        return rows
    }
}

extension OutboundMessage.Purpose {
    var isDelivery: Bool {
        if case .delivery = self { return true }
        return false
    }
}
