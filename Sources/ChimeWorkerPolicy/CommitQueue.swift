import ChimeEngine
import ChimeProtocol

/// What waits on the store: the appends handed to it and not yet reported, each with the identity
/// its result comes back with, and the replies that wait for the commit that makes their commands
/// durable. An `ok` leaves only after that commit.
///
/// Pure: the coordinator (``WorkerStateMachine``) adds and takes; this keeps the order.
struct CommitQueue {
    /// What to do once an append is reported.
    enum Write {
        case command(Request, JournalEntry, ReplyDestination)
        case record(JournalEntry, slot: Int)
        /// Zone rules; `changed`: the zones whose rules changed since the engine computed with them.
        case zoneRules([ZoneRulesRecord], changed: Set<String>, slot: Int)
    }

    /// Appended and not yet reported, oldest first, each with its id.
    private var writes: [(id: WorkerStateMachine.AppendId, write: Write)] = []
    private var lastId: UInt64 = 0
    /// Replies waiting for the commit that makes their commands durable, with their slots.
    private var replies: [(slot: Int, message: OutboundMessage)] = []

    /// Replies wait to be sent.
    var hasReplies: Bool { !replies.isEmpty }
    var replyCount: Int { replies.count }

    /// Keeps `write` until its append is reported.
    /// - Returns: the id its append carries.
    @inline(__always)
    mutating func add(_ write: Write) -> WorkerStateMachine.AppendId {
        lastId += 1
        let id = WorkerStateMachine.AppendId(value: lastId)
        writes.append((id, write))
        return id
    }

    /// The write whose append was reported, nil when none waits with that id. Results come oldest
    /// first, so the search ends at once unless an owner reports out of order.
    @inline(__always)
    mutating func take(_ id: WorkerStateMachine.AppendId) -> Write? {
        guard let index = writes.firstIndex(where: { $0.id == id }) else { return nil }
        return writes.remove(at: index).write
    }

    /// A reply's bytes, sent once what came before it is committed.
    @inline(__always)
    mutating func queueReply(_ payload: [UInt8], to destination: ReplyDestination) {
        replies.append(
            (
                destination.slot,
                OutboundMessage(
                    topic: destination.topic,
                    payload: payload,
                    qos: 1,
                    purpose: .reply,
                    contentType: "application/json",
                    correlationData: destination.correlationData
                )
            )
        )
    }

    /// After a commit: hands `send` the replies it made durable, in order, and forgets them.
    @inline(__always)
    mutating func sendReplies(_ send: (OutboundMessage) -> Void) {
        for reply in replies { send(reply.message) }
        replies.removeAll(keepingCapacity: true)
    }

    /// Drops the replies of a slot no longer served here, or all of them (nil): their commands get
    /// no reply, and their senders send them again.
    mutating func dropReplies(slot: Int? = nil) {
        guard let slot else { return replies.removeAll(keepingCapacity: true) }
        replies.removeAll { $0.slot == slot }
    }
}

/// Where a reply goes: a topic, with the Correlation Data of the command it answers.
struct ReplyDestination {
    var topic: String
    var correlationData: [UInt8]?
    /// The slot whose command is answered (0 without slots): a reply waiting for a commit is
    /// dropped with its slot.
    var slot: Int
}
