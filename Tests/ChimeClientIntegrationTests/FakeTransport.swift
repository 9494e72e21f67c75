import ChimeClient
import ChimeCore
import Synchronization

/// A transport that records what the center publishes and answers as the test says: the
/// commands and replies of a center without a broker.
final class FakeTransport: ChimeTransport {
    /// One message the center published.
    struct Published: Sendable, Hashable {
        var topic: String
        var payload: [UInt8]
        var responseTopic: String?
        var correlationData: [UInt8]?

        /// The payload as JSON.
        var json: JSONObject { (try? JSON(parsing: payload))?.objectValue ?? [:] }
        var op: String { topic.split(separator: "/").last.map(String.init) ?? "" }
    }

    let incoming: AsyncStream<ChimeTransportMessage>
    private let continuation: AsyncStream<ChimeTransportMessage>.Continuation
    private let log = Mutex<[Published]>([])
    private let filters = Mutex<[String]>([])
    /// What to answer the `index`th message (0-based) with: the reply's JSON text, or nil for none.
    private let answer: @Sendable (_ message: Published, _ index: Int) -> String?

    /// Commands published on these topics are refused by ``publishCommand``.
    let refusedTopics: Set<String>

    init(
        refusing refusedTopics: Set<String> = [],
        answer: @escaping @Sendable (_ message: Published, _ index: Int) -> String?
    ) {
        (incoming, continuation) = AsyncStream.makeStream(of: ChimeTransportMessage.self)
        self.answer = answer
        self.refusedTopics = refusedTopics
    }

    var published: [Published] { log.withLock { $0 } }
    /// The filters subscribed to, in order.
    var subscriptions: [String] { filters.withLock { $0 } }

    /// Delivers a message on `topic`, as the broker would.
    func receive(topic: String, _ text: String, correlationData: [UInt8]? = nil) {
        continuation.yield(
            ChimeTransportMessage(topic: topic, payload: Array(text.utf8), correlationData: correlationData)
        )
    }

    func connect(timeout: Duration) async throws {}

    func subscribe(_ filter: String, timeout: Duration) async throws {
        filters.withLock { $0.append(filter) }
    }

    func publish(
        topic: String,
        payload: [UInt8],
        qos: Int,
        responseTopic: String?,
        correlationData: [UInt8]?,
        timeout: Duration
    ) async throws {
        let message = Published(
            topic: topic,
            payload: payload,
            responseTopic: responseTopic,
            correlationData: correlationData
        )
        let index = log.withLock { log in
            log.append(message)
            return log.count - 1
        }
        if let reply = answer(message, index), let responseTopic {
            receive(topic: responseTopic, reply, correlationData: correlationData)
        }
    }

    /// As the package's transport: returns before the PUBACK, and reports a refusing one. Refuses
    /// the commands on topics in ``refusedTopics`` (the broker's ACL, say), answers the others as
    /// ``publish(topic:payload:qos:responseTopic:correlationData:timeout:)`` does.
    func publishCommand(
        topic: String,
        payload: [UInt8],
        responseTopic: String,
        correlationData: [UInt8],
        timeout: Duration,
        refused: @escaping @Sendable (String) -> Void
    ) async throws {
        if refusedTopics.contains(topic) {
            refused("refused \(topic) (reason code 135)")
            return
        }
        try await publish(
            topic: topic,
            payload: payload,
            qos: 1,
            responseTopic: responseTopic,
            correlationData: correlationData,
            timeout: timeout
        )
    }

    func disconnect() async {
        continuation.finish()
    }

    static let deviceResult =
        #"{"deviceId":"d1","timeZone":"Europe/Paris","badge":2,"quietHours":null,"pending":0,"receipts":false,"history":false}"#

    static func ok(_ op: String, _ result: String) -> String { #"{"ok":true,"op":"\#(op)","result":\#(result)}"# }
}
