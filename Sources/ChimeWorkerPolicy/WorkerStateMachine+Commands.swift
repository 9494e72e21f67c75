import ChimeEngine
import ChimeLog
import ChimeProtocol

/// A command's path: admitted by its topic and its device's budget, decoded, decided by the
/// engine, appended to the store, applied once appended, and answered once committed
/// (``CommitQueue``).
extension WorkerStateMachine {
    /// Where a message stands before its payload is read: the one admission that ``command(_:now:_:)``
    /// and ``predecodable(_:now:)`` both follow.
    enum Admission {
        /// Not on a command topic.
        case notACommand
        /// Another worker's: another partition, or (`otherSlot`) a slot not served here, or one being
        /// loaded or handed over, which answers nothing (its next owner answers the resend).
        case elsewhere(otherSlot: Bool)
        /// Served here, by the engine of `slot`.
        case here(Topics.CommandAddress, slot: Int, engine: Engine)
        /// Routing by slot: received through the shared subscription for `slot`, served elsewhere;
        /// forwarded to its owner.
        case forward(slot: Int)
    }

    func admission(_ topic: String) -> Admission {
        guard let address = policy.topics.parseCommand(topic) else { return .notACommand }
        guard policy.partition.owns(address.deviceId) else { return .elsewhere(otherSlot: false) }
        let slot = slot(of: address.deviceId)
        // A forwarded command names its device's slot; one that does not was not forwarded by a
        // worker of this store (another number of slots): left alone.
        if let forwarded = address.forwardedSlot, forwarded != slot { return .elsewhere(otherSlot: true) }
        guard let engine = engines[slot], !isDraining(slot) else {
            // Forwarded once at most: a forwarded command, or one for a slot this worker is taking
            // or handing over (no other worker subscribes to it yet), is left to a resend.
            if policy.routing == .slot, address.forwardedSlot == nil, engines[slot] == nil, slots?.loading[slot] == nil
            {
                return .forward(slot: slot)
            }
            return .elsewhere(otherSlot: policy.slots != nil)
        }
        return .here(address, slot: slot, engine: engine)
    }

    /// Decides a command: refused before it is parsed when its device has used its share, answered
    /// at once when it changes nothing, else appended to the store (``appended(_:_:)`` applies it).
    mutating func command(_ message: InboundMessage, now: Instant, _ actions: inout [Action]) {
        guard lifecycle != .stopped else { return }
        let address: Topics.CommandAddress
        let slot: Int
        let engine: Engine
        switch admission(message.topic) {
        case .notACommand:
            // Off the path of every command: the one other topic a worker subscribes to for queries.
            if message.topic == policy.topics.fleetFind {
                find(message, now: now, &actions)
                return
            }
            stats.invalidTopics += 1
            log(.debug, "ignoring a message on a topic that is not a command", ["topic": message.topic], into: &actions)
            return
        case .elsewhere(let otherSlot):
            if otherSlot { stats.commandsForOtherSlots += 1 }
            return
        case .forward(let slot):
            forward(message, toSlot: slot, &actions)
            return
        case .here(let a, let s, let e):
            (address, slot, engine) = (a, s, e)
        }
        // Op names come from the topic: count the unknown ones under one name, so that a client
        // cannot grow the stats (and the metrics' label values) without bound.
        stats.countCommand(address.op)
        let replyTo = replyDestination(message, address, slot: slot)
        if let problem = address.problem {
            guard let replyTo else {
                stats.invalidTopics += 1
                log(
                    .info,
                    "dropping a command on an invalid topic",
                    ["topic": String(message.topic.prefix(200))],
                    into: &actions
                )
                return
            }
            queueReply(Reply(op: address.opName, requestId: nil, outcome: .failure(problem)), to: replyTo)
            return
        }
        guard let replyTo else { return }
        // Each device pays for the engine time its commands take; one that has used its share is
        // refused before its command is even parsed.
        let admission = intake.budget.admits(address.deviceId, now: now)
        guard admission.admitted else {
            let error = ChimeError(
                .rateLimited,
                "device \(address.deviceId) used its share of the worker (--device-rate \(Int(intake.budget.rate)) ms/s); "
                    + "try again in \(admission.retryAfterMs) ms"
            )
            queueReply(Reply(op: address.opName, requestId: nil, outcome: .failure(error)), to: replyTo)
            return
        }
        intake.charging(address.deviceId, at: now)
        let op = address.op!
        var request: Request
        let decoded =
            message.decoded.flatMap { $0.deviceId == address.deviceId && $0.op == op ? $0.outcome : nil }
            ?? intake.decoder.decode(deviceId: address.deviceId, op: op, payload: message.payload)
        switch decoded {
        case .failure(let failure):
            log(
                .debug,
                "rejected",
                ["device": address.deviceId, "op": op.rawValue, "code": failure.error.code.wireName],
                into: &actions
            )
            queueReply(
                Reply(op: op.rawValue, requestId: failure.requestId, outcome: .failure(failure.error)),
                to: replyTo
            )
            return
        case .success(let decoded):
            request = decoded
        }
        // Only what can change state is kept to recognise a redelivery; reads are answered again.
        if op.changesState {
            request.key = CommandKey.of(
                op: op.rawValue,
                payload: message.payload,
                correlationData: message.correlationData,
                hasRequestId: request.requestId != nil,
                packetId: message.messageId,
                qos: message.qos
            )
        }
        switch engine.decide(request, now: now, random: &random) {
        case .reply(let reply):
            if reply.isDuplicate {
                stats.duplicates += 1
                log(
                    .info,
                    "a command was received again and not applied again",
                    ["device": address.deviceId],
                    into: &actions
                )
            }
            queueReply(reply, to: replyTo)
        case .write(let entry):
            if snapshots.isDiverged {
                let error = ChimeError(.unavailable, "the journal cannot take writes; nothing was changed")
                queueReply(Reply(request: request, error: error), to: replyTo)
                return
            }
            append(.command(request, entry, replyTo), entry, key: request.key, slot: slot, &actions)
        }
    }

    /// Which of the messages that arrived together the loop may decode in parallel, before it
    /// hands them to the machine in order (decoding is pure; see ``PredecodedCommand``): the
    /// commands ``command(_:now:_:)`` would decode now, at most ``CommandLimits/maxCommandBytes``
    /// of them a device, so that a device that runs out of its share of the worker meanwhile has
    /// at most that much decoded for nothing. Only commands of ``minimumPredecodedBytes`` or more
    /// (batches): a smaller one costs less to decode than to hand to another thread. None unless
    /// there are two.
    public func predecodable(
        _ messages: [InboundMessage],
        now: Instant
    ) -> [(
        index: Int, deviceId: String, op: Operation
    )] {
        guard lifecycle != .stopped else { return [] }
        var picked: [(index: Int, deviceId: String, op: Operation)] = []
        var bytesByDevice: [String: Int] = [:]
        for (i, message) in messages.enumerated()
        where message.payload.count >= Self.minimumPredecodedBytes && message.topic != statusTopic {
            guard case .here(let address, _, _) = admission(message.topic), address.problem == nil, let op = address.op,
                intake.budget.admits(address.deviceId, now: now).admitted
            else { continue }
            let bytes = bytesByDevice[address.deviceId, default: 0] + message.payload.count
            guard bytes <= intake.decoder.limits.maxCommandBytes else { continue }
            bytesByDevice[address.deviceId] = bytes
            picked.append((i, address.deviceId, op))
        }
        return picked.count >= 2 ? picked : []
    }

    public static let minimumPredecodedBytes = 4096

    /// What decodes commands: limits as configured; pure, so any thread may use it.
    public var commandDecoder: CommandDecoder { intake.decoder }

    /// Where a reply goes: the MQTT 5 Response Topic (if `acceptsResponseTopic` allows it), else
    /// `P/{deviceId}/replies` when the device id is valid, else nowhere.
    func replyDestination(
        _ message: InboundMessage,
        _ address: Topics.CommandAddress,
        slot: Int
    ) -> ReplyDestination? {
        if let topic = message.responseTopic, !topic.isEmpty, !Topics.hasWildcard(topic),
            policy.topics.acceptsResponseTopic(topic, forCommandOn: address.deviceId)
        {
            return ReplyDestination(topic: topic, correlationData: message.correlationData, slot: slot)
        }
        if address.problem?.field == "deviceId" { return nil }
        return ReplyDestination(topic: policy.topics.replies(address.deviceId), correlationData: nil, slot: slot)
    }

    mutating func queueReply(_ reply: Reply, to destination: ReplyDestination) {
        if case .failure(let error) = reply.outcome { stats.errorsByCode[error.code.wireName, default: 0] += 1 }
        commits.queueReply(reply.bytes, to: destination)
    }

    /// Asks the owner to append `entry`, and keeps what to do once it is appended.
    mutating func append(
        _ write: CommitQueue.Write,
        _ entry: JournalEntry,
        key: CommandKey?,
        slot: Int,
        _ actions: inout [Action]
    ) {
        let id = commits.add(write)
        actions.append(.append(entry, key: key, slot: slot, id: id))
    }

    mutating func appended(
        _ id: AppendId,
        _ outcome: Result<Void, StoreError>,
        now: Instant,
        _ actions: inout [Action]
    ) {
        // On the taken write itself, not a copy of it: its request and entry move out of it.
        switch commits.take(id) {
        case nil:
            log(.error, "an append was reported that is not waiting", ["id": "\(id.value)"], into: &actions)
        case .command(let request, let entry, let replyTo)?:
            switch outcome {
            case .success:
                // A command entry always has a result (nil is for delivery records).
                let reply =
                    engines[replyTo.slot]?.apply(entry, key: request.key).map { Reply(request: request, result: $0) }
                    ?? Reply(request: request, error: ChimeError(.internal, "the command had no result"))
                queueReply(reply, to: replyTo)
            case .failure(let error):
                log(.error, "journal write failed; command refused", ["error": "\(error)"], into: &actions)
                let refusal = ChimeError(.unavailable, "the journal cannot take writes: \(error.message)")
                queueReply(Reply(request: request, error: refusal), to: replyTo)
            }
        case .record(let entry, let slot)?:
            // The delivery happened: memory goes ahead even when the store cannot take its record,
            // and a snapshot is forced so that the store catches up. In slot mode the store is the
            // truth: the slot is dropped, to be loaded again from it.
            if case .failure(let error) = outcome, policy.slots != nil {
                log(
                    .error,
                    "cannot journal a delivery record; dropping its slot",
                    ["slot": "\(slot)", "error": "\(error)"],
                    into: &actions
                )
                lease(.fenced([slot]), now: now, monotonic: nil, &actions)
                return
            }
            if case .failure(let error) = outcome {
                log(
                    .error,
                    "journal write failed; refusing commands until a snapshot succeeds",
                    ["error": "\(error)"],
                    into: &actions
                )
                snapshots.diverge()
            }
            engines[slot]?.apply(entry)
        case .zoneRules(let records, let changed, let slot)?:
            if case .failure(let error) = outcome {
                log(
                    .error,
                    "cannot journal new zone rules; computing with them all the same",
                    ["error": "\(error)"],
                    into: &actions
                )
            }
            zoneRulesAppended(records, changed: changed, slot: slot, &actions)
        }
    }

    /// Journals an entry the engine produced itself (delivery records), then applies it.
    mutating func record(_ entry: JournalEntry, slot: Int, _ actions: inout [Action]) {
        guard engines[slot] != nil else { return }
        if snapshots.isDiverged {
            snapshots.diverge()
            engines[slot]?.apply(entry)
            return
        }
        append(.record(entry, slot: slot), entry, key: nil, slot: slot, &actions)
    }

    /// After the commit: the replies of what it made durable, then what is due.
    mutating func committed(_ store: StoreStatus, now: Instant, _ actions: inout [Action]) {
        snapshots.store = store
        commits.sendReplies { actions.append(.publish($0)) }
        finishDraining(now: now, &actions)
        if session.resubscribeIfDue(now: now) {
            actions.append(.subscribe(.status))
            actions.append(.subscribe(.commands))
        }
        maybeSnapshot(now: now, &actions)
        maybePublishStats(now: now, &actions)
        maybeFinishStopping(now: now, &actions)
    }

}

/// What a command meets before the engine: its decoder, with the limits as configured, and its
/// device's share of the worker (``DeviceBudget``), charged with the engine time its command took.
struct CommandIntake {
    let decoder: CommandDecoder
    var budget: DeviceBudget
    /// The device that pays for the command being handled, and when it arrived.
    private var payer: (device: String, at: Instant)?

    init(decoder: CommandDecoder, budget: DeviceBudget) {
        self.decoder = decoder
        self.budget = budget
    }

    /// The command being handled is `device`'s, which arrived at `at`.
    @inline(__always)
    mutating func charging(_ device: String, at: Instant) { payer = (device, at) }

    /// What the command took (``WorkerStateMachine/ActionResult/commandCost(milliseconds:)``) is
    /// charged to its device.
    @inline(__always)
    mutating func charge(milliseconds: Double) {
        if let (device, at) = payer { budget.charge(device, milliseconds: milliseconds, now: at) }
        payer = nil
    }
}
