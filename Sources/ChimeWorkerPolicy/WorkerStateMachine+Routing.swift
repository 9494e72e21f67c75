import ChimeEngine
import ChimeLog
import ChimeProtocol

/// How a command reaches the worker that serves its slot (`--routing`, slot mode).
public enum CommandRouting: String, Sendable, CaseIterable {
    /// Every worker subscribes to every command and drops those of slots it does not serve: the
    /// broker sends each command once per worker.
    case broadcast
    /// The workers share one subscription (`$share/{group}/P/+/cmd/+`, the group a secret of their
    /// store), so each command reaches one of them; one that does not serve the command's slot forwards it, once, to
    /// `P/$slot/{slot}/{deviceId}/cmd/{op}`, which the slot's owner alone subscribes to: at most two
    /// deliveries a command, whatever the number of workers.
    case slot
}

/// Routing by slot: the worker's half. Which slot a command is for and whether it is served here is
/// ``admission(_:)``'s; this forwards, and keeps a subscription to each slot served.
extension WorkerStateMachine {
    /// Publishes `message` as it came (payload, Response Topic, Correlation Data) on the forwarded
    /// topic of `slot`. Whoever owns the slot answers the sender directly.
    ///
    /// At QoS 0: with clean sessions a QoS 1 forward would be lost in the same cases (a connection
    /// that breaks loses what its session held), and QoS 0 spares the broker, this worker and the
    /// owner a PUBACK each. Its sender resends what gets no reply.
    mutating func forward(_ message: InboundMessage, toSlot slot: Int, _ actions: inout [Action]) {
        stats.commandsForwarded += 1
        actions.append(
            .publish(
                OutboundMessage(
                    topic: policy.topics.forwarded(message.topic, toSlot: slot),
                    payload: message.payload,
                    qos: 0,
                    purpose: .forward,
                    responseTopic: message.responseTopic,
                    correlationData: message.correlationData
                )
            )
        )
    }

    /// A forward the transport refused, or a forward check the broker refused: a command's sender
    /// gets no reply and sends again. Logged at the first and every thousandth, as a broker whose
    /// ACL lacks `P/$slot/#` for workers refuses them all.
    mutating func forwardRefused(because reason: String, _ actions: inout [Action]) {
        stats.forwardsRefused += 1
        guard stats.forwardsRefused == 1 || stats.forwardsRefused % 1000 == 0 else { return }
        log(
            .error,
            "cannot forward a command to its slot's owner (does the broker's ACL let worker accounts write and read "
                + "\(policy.topics.prefix)/$slot/#?)",
            ["reason": reason, "refused": "\(stats.forwardsRefused)"],
            into: &actions
        )
    }

    /// On connecting: a subscription for each slot served (a routing worker's session is clean, so
    /// the broker kept none), and the check that the broker lets this worker forward.
    mutating func connectedForRouting(_ actions: inout [Action]) {
        guard policy.routing == .slot else { return }
        for slot in engines.keys.sorted() { actions.append(.subscribe(.slot(slot))) }
        actions.append(
            .publish(
                OutboundMessage(
                    topic: "\(policy.topics.prefix)/$slot/check",
                    payload: [],
                    qos: 1,
                    purpose: .forwardCheck
                )
            )
        )
    }

    /// A slot's forwarded commands reach this worker from now on (``adopt(slot:epoch:_:now:monotonic:)``),
    /// or no longer (``dropSlot(_:because:_:)``).
    mutating func slotSubscription(_ slot: Int, serving: Bool, _ actions: inout [Action]) {
        guard policy.routing == .slot, isConnected else { return }
        actions.append(serving ? .subscribe(.slot(slot)) : .unsubscribe(.slot(slot)))
    }

    /// The broker refused a slot's subscription: the slot's forwarded commands are lost until the
    /// next connection (an ACL that lacks `P/$slot/#`).
    mutating func slotRefused(_ slot: Int, refusal: Int32, _ actions: inout [Action]) {
        stats.subscriptionRefusals += 1
        log(
            .error,
            "the broker refused a slot's subscription: commands forwarded to it are lost (check the broker's ACL "
                + "for this account)",
            ["filter": policy.topics.slotCommandFilter(slot), "reason": hex(refusal)],
            into: &actions
        )
    }
}
