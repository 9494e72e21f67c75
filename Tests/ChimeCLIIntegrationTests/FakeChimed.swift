import ChimeCore
import ChimeMQTT
import ChimeTestSupport
import Synchronization

/// A stand-in for chimed on a test broker, for replies a real worker never sends (a cursor that
/// repeats, ids with control characters): answers each command on `P/+/cmd/+` with what `reply`
/// returns for its op and payload, on the command's Response Topic with its Correlation Data.
final class FakeChimed: Sendable {
    let requester: MQTTRequester
    private let serving: Task<Void, Never>
    private let tally = Tally()

    /// Commands answered so far, by op.
    var answered: [String: Int] { tally.counts.withLock { $0 } }

    private final class Tally: Sendable {
        let counts = Mutex<[String: Int]>([:])
    }

    /// Connects to `broker` and answers from the SUBACK on.
    /// - Parameters:
    ///   - limit: answers at most this many commands, then none (so that a client that would
    ///     follow its replies forever ends with a timeout instead).
    ///   - reply: the whole reply object for an op and its payload; nil answers nothing.
    static func start(
        _ broker: TestBroker,
        prefix: String = "chime",
        limit: Int = .max,
        reply: @escaping @Sendable (_ op: String, _ payload: JSONObject) -> JSONObject?
    ) async throws -> FakeChimed {
        let requester = try MQTTRequester(options: broker.clientOptions())
        try await requester.connect(timeout: .seconds(10))
        let fake = FakeChimed(requester: requester, prefix: prefix, limit: limit, reply: reply)
        try await requester.subscribe("\(prefix)/+/cmd/+", qos: 1, timeout: .seconds(10))
        return fake
    }

    private init(
        requester: MQTTRequester,
        prefix: String,
        limit: Int,
        reply: @escaping @Sendable (_ op: String, _ payload: JSONObject) -> JSONObject?
    ) {
        self.requester = requester
        let tally = tally
        serving = Task {
            for await message in requester.messages {
                guard let op = message.topic.split(separator: "/").last.map(String.init),
                    let responseTopic = message.responseTopic,
                    case .object(let payload)? = try? JSON(parsing: message.payload),
                    var answer = reply(op, payload)
                else { continue }
                let within = tally.counts.withLock { counts in
                    guard counts.values.reduce(0, +) < limit else { return false }
                    counts[op, default: 0] += 1
                    return true
                }
                guard within else { continue }
                answer["op"] = .string(op)
                if let requestId = payload["requestId"] { answer["requestId"] = requestId }
                var properties = MQTTPublishProperties()
                properties.correlationData = message.correlationData
                _ = try? await requester.publish(
                    topic: responseTopic,
                    payload: JSON.object(answer).bytes,
                    properties: properties,
                    timeout: .seconds(10)
                )
            }
        }
    }

    func stop() async {
        requester.stop()
        await serving.value
    }

    /// `{"ok": true, "result": result}`.
    static func ok(_ result: JSONObject) -> JSONObject { ["ok": true, "result": .object(result)] }

    /// The result of `device` for a device without a zone.
    static let device: JSONObject = [
        "deviceId": "d1", "timeZone": .null, "badge": 0, "quietHours": .null, "pending": 1, "receipts": true,
        "history": true,
    ]
}

/// Publishes one retained message on `broker` and disconnects.
func publishRetained(_ broker: TestBroker, _ topic: String, _ payload: JSONObject) async throws {
    let requester = try MQTTRequester(options: broker.clientOptions())
    defer { requester.stop() }
    try await requester.connect(timeout: .seconds(10))
    try await requester.publish(topic: topic, payload: JSON.object(payload).bytes, retain: true, timeout: .seconds(10))
}
