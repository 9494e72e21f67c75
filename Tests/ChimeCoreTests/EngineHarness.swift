import ChimeCore
import ChimeTestSupport
import Testing

func instant(_ text: String) -> Instant {
    guard case .instant(let i)? = DateTimeValue(iso8601: text) else { fatalError("bad instant \(text)") }
    return i
}

/// Drives an ``Engine`` the way the worker does, with a manual clock and an in-memory journal.
struct Harness {
    var engine: Engine
    var journal: [JournalEntry] = []
    var now: Instant
    var random = SplitMix64(seed: 42)
    var decoder = CommandDecoder()
    /// Deliveries published and not acknowledged, in order.
    var unacked: [Delivery] = []
    var autoAck = true

    init(now: String = "2026-12-01T10:00:00Z", configuration: EngineConfiguration = EngineConfiguration()) {
        self.now = instant(now)
        engine = Engine(configuration: configuration)
        engine.setConnected(true)
    }

    /// Sends a command and returns its reply.
    @discardableResult
    mutating func send(_ device: String, _ op: Operation, _ payload: String) -> JSONObject {
        switch decoder.decode(deviceId: device, op: op, payload: Array(payload.utf8)) {
        case .failure(let failure):
            return Reply(op: op.rawValue, requestId: failure.requestId, outcome: .failure(failure.error)).json
        case .success(let request):
            switch engine.decide(request, now: now, random: &random) {
            case .reply(let reply):
                return reply.json
            case .write(let entry):
                // The journal round trip is part of every write, as in the worker.
                let stored = try! JournalEntry.decode(kind: entry.kind.rawValue, payload: entry.encode())
                #expect(stored == entry)
                journal.append(stored)
                guard let result = engine.apply(stored) else {
                    Issue.record("\(op.rawValue): applying its journal entry gave no result")
                    return [:]
                }
                return Reply(request: request, result: result).json
            }
        }
    }

    /// `result` of an ok reply (fails the test otherwise).
    @discardableResult
    mutating func ok(_ device: String, _ op: Operation, _ payload: String) -> JSONObject {
        let reply = send(device, op, payload)
        #expect(reply["ok"] == true, "\(JSON.object(reply).text)")
        return reply["result"]?.objectValue ?? [:]
    }

    /// The error code of a failed reply.
    mutating func errorCode(_ device: String, _ op: Operation, _ payload: String) -> String? {
        let reply = send(device, op, payload)
        return reply["error"]?.objectValue?["code"]?.stringValue
    }

    /// Moves the clock and returns the deliveries published (acknowledged at once unless
    /// `autoAck` is off).
    mutating func advance(to text: String) -> [JSONObject] { advance(to: instant(text)) }

    mutating func advance(seconds: Int64) -> [JSONObject] { advance(to: now.adding(seconds: seconds)) }

    mutating func advance(to target: Instant) -> [JSONObject] {
        var delivered: [JSONObject] = []
        // Step through each wake-up so that repeats fire at their own times, as the worker does.
        // After a tick the next wake-up is always later than `now`.
        tick(&delivered)
        while let wake = engine.nextWake, wake <= target {
            now = max(now, wake)
            tick(&delivered)
        }
        now = max(now, target)
        tick(&delivered)
        return delivered
    }

    private mutating func tick(_ delivered: inout [JSONObject]) {
        for output in engine.tick(now: now) {
            switch output {
            case .publish(let delivery):
                delivered.append(try! JSON(parsing: delivery.payload).objectValue!)
                unacked.append(delivery)
            case .write(let entry):
                journal.append(entry)
                engine.apply(entry)
            }
        }
        if autoAck { ackAll() }
    }

    mutating func ackAll() {
        for delivery in unacked {
            if let entry = engine.acknowledged(delivery.token) {
                journal.append(entry)
                engine.apply(entry)
            }
        }
        unacked = []
    }

    /// A fresh engine rebuilt from the journal, as recovery does.
    func replayed(snapshotAt: Int? = nil) -> Engine {
        let fresh = Engine(configuration: engine.configuration)
        fresh.beginRecovery()
        for entry in journal { fresh.apply(entry) }
        fresh.finishRecovery()
        fresh.setConnected(true)
        return fresh
    }

    /// Every notification of the device, page after page (a page also ends by size).
    func list(_ device: String, engine: Engine? = nil) -> [JSONObject] {
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

extension JSON {
    var arrayValue: [JSON]? {
        if case .array(let a) = self { return a }
        return nil
    }
}
