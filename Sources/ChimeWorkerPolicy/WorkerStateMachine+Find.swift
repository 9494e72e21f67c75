import ChimeEngine
import ChimeLog
import ChimeProtocol

/// `find` across the fleet (PROTOCOL.md section 3.12): a query on `P/$fleet/find`, which every
/// worker receives and answers for the devices it serves. It never reaches ``command(_:now:_:)``'s
/// path for device commands: that path sends it here only once it has found the topic is not a
/// command's.
extension WorkerStateMachine {
    /// Answers a `find` query: to its Response Topic only when that is below `P/$reply/` (else it is
    /// dropped, as is a query that arrives while the worker stops), with the devices of the engines
    /// it serves and does not hand over, after its replies waiting for a commit (the engines may
    /// hold what is not yet durable).
    mutating func find(_ message: InboundMessage, now: Instant, _ actions: inout [Action]) {
        guard lifecycle == .running, let topic = message.responseTopic,
            policy.topics.acceptsFindResponseTopic(topic)
        else {
            log(
                .info,
                "dropping a find query: its Response Topic is not below \(policy.topics.prefix)/$reply/, or the "
                    + "worker is stopping",
                ["responseTopic": String((message.responseTopic ?? "none").prefix(200))],
                into: &actions
            )
            return
        }
        let payload: [UInt8]
        switch intake.decoder.decodeFind(message.payload) {
        case .failure(let failure):
            stats.errorsByCode[failure.error.code.wireName, default: 0] += 1
            payload = FindPage.reply(.failure(failure.error), workerId: policy.workerId, requestId: failure.requestId)
        case .success(let query):
            let served = engines.filter { !isDraining($0.key) }.sorted { $0.key < $1.key }.map(\.value)
            let partition = policy.partition
            let page = Engine.find(query, in: served, serves: { partition.owns($0) })
            payload = FindPage.reply(.success(page), workerId: policy.workerId, requestId: query.requestId)
        }
        commits.queueReply(
            payload,
            to: ReplyDestination(topic: topic, correlationData: message.correlationData, slot: Self.findReplySlot)
        )
    }

    /// The slot a `find`'s reply waits under: none, so that no slot's hand-over drops it.
    static var findReplySlot: Int { -1 }
}
