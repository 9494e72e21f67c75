import ChimeEngine
import ChimeLog
import ChimeProtocol

/// Deliveries: published when an engine says they are due, recorded when the broker acknowledges
/// them (``DeliveryWindow`` keeps those in flight); a refusal leaves them due.
extension WorkerStateMachine {
    mutating func tick(now: Instant, _ actions: inout [Action]) {
        window.lastTick = now
        guard lifecycle == .running else { return }
        var room = policy.maxDeliveriesInFlight - inflightCount
        // What is due first goes first, whichever slot it is in; a slot being handed over fires
        // nothing more (its next owner does).
        let due = engines.compactMap { slot, engine -> (slot: Int, engine: Engine, at: Instant)? in
            guard !isDraining(slot), let at = engine.nextWake, at <= now else { return nil }
            return (slot, engine, at)
        }
        for (slot, engine, _) in due.sorted(by: { $0.at < $1.at }) where room > 0 {
            for output in engine.tick(now: now, limit: room) {
                switch output {
                case .publish(let delivery) where !delivery.mqtt:
                    // Push only: nothing to publish; recorded now, and pushed once recorded.
                    if let entry = engine.acknowledged(delivery.token) { record(entry, slot: slot, &actions) }
                case .publish(let delivery):
                    room -= 1
                    actions.append(
                        .publish(
                            OutboundMessage(
                                topic: policy.topics.notifications(delivery.deviceId),
                                payload: delivery.payload,
                                qos: 1,
                                purpose: .delivery(
                                    token: delivery.token,
                                    fireId: delivery.fireId,
                                    due: delivery.due,
                                    lateness: delivery.lateness,
                                    slot: slot
                                ),
                                contentType: "application/json",
                                userProperties: [.init("fire-id", delivery.fireId)],
                                messageExpiry: delivery.messageExpiry
                            )
                        )
                    )
                case .write(let entry): record(entry, slot: slot, &actions)
                }
            }
        }
    }

    mutating func published(
        _ purpose: OutboundMessage.Purpose,
        _ outcome: Result<Int32, TransportError>,
        now: Instant,
        _ actions: inout [Action]
    ) {
        switch (purpose, outcome) {
        case (.delivery(let token, _, let due, let kind, let slot), .success(let messageId)):
            window.published(messageId: messageId, slot: slot, token: token)
            let lateness = now.milliseconds - due.milliseconds
            // Lateness the worker did not cause (a date in the past, a catch-up, quiet hours) is
            // measured apart, so that it neither hides nor fakes the worker's own.
            if kind.isExpected {
                stats.expectedLateness.record(microseconds: lateness * 1000)
            } else {
                stats.lateness.record(microseconds: lateness * 1000)
                if let engine = engines[slot], lateness >= engine.configuration.lateThreshold {
                    stats.lateDeliveries += 1
                }
            }
        case (.delivery(let token, let fireId, _, _, let slot), .failure(let error)):
            // Retried with the backoff of a refusal: an error such as an oversized packet would
            // otherwise repeat at full speed.
            let retry = engines[slot]?.publishRefused(token, now: now)
            log(
                .warning,
                "cannot publish a delivery; it will be retried",
                ["fireId": fireId, "error": "\(error)", "retryMs": "\(retry ?? 0)"],
                into: &actions
            )
        case (.onlineStatus, .success(let messageId)):
            session.statusSent(messageId: messageId)
        case (.reply, .failure(let error)):
            log(.warning, "cannot send a reply", ["error": "\(error)"], into: &actions)
        case (.onlineStatus, .failure(let error)), (.offlineStatus, .failure(let error)):
            log(.warning, "cannot publish the worker's status", ["error": "\(error)"], into: &actions)
        case (.forwardCheck, .success(let messageId)):
            session.forwardCheckSent(messageId: messageId)
        case (.forward, .failure(let error)), (.forwardCheck, .failure(let error)):
            forwardRefused(because: "\(error)", &actions)
        case (.forward, .success):
            break
        case (.reply, .success), (.offlineStatus, .success), (.stats, _):
            break
        }
    }

    mutating func acknowledged(messageId: Int32, reasonCode: Int32, now: Instant, _ actions: inout [Action]) {
        switch session.acknowledged(messageId: messageId, reasonCode: reasonCode) {
        case .status(let refusal?):
            log(
                .error,
                "the broker refused the worker's status: clients will not see it online (check that the ACL lets "
                    + "this account write \(statusTopic); the deploy ACL names each worker's account after its "
                    + "--worker-id)",
                ["reason": hex(refusal)],
                into: &actions
            )
            return
        case .forwardCheck(let refusal?):
            forwardRefused(because: "reason \(hex(refusal))", &actions)
            return
        case .status(nil), .forwardCheck(nil):
            return
        case .other:
            break
        }
        guard let (slot, token) = window.acknowledged(messageId: messageId), let engine = engines[slot] else { return }
        if reasonCode >= 0x80 {
            // Refused (an ACL, a quota): not delivered. It stays due and is retried later.
            stats.refusedDeliveries += 1
            let retry = engine.publishRefused(token, now: now)
            log(
                .warning,
                "the broker refused a delivery; it stays due",
                ["reason": hex(reasonCode), "retryMs": "\(retry ?? 0)"],
                into: &actions
            )
            return
        }
        if let entry = engine.acknowledged(token) {
            stats.deliveries += 1
            record(entry, slot: slot, &actions)
        }
    }
}
