import ChimeEngine
import ChimeLog
import ChimeProtocol

/// The broker session's events (``BrokerSession`` keeps its state): connecting, subscribing, the
/// retained status, and another client taking the worker's session.
extension WorkerStateMachine {
    mutating func connected(sessionPresent: Bool, now: Instant, _ actions: inout [Action]) {
        session.connected()
        stats.reconnects += 1
        log(.info, "connected", ["sessionPresent": "\(sessionPresent)"], into: &actions)
        // Subscribe on every connection: a broker that lost its sessions forgets them.
        actions.append(.subscribe(.status))
        actions.append(.subscribe(.fleet))
        actions.append(.subscribe(.commands))
        connectedForRouting(&actions)
        for engine in engines.values { engine.setConnected(lifecycle == .running, now: now) }
        lease(.available(true), now: now, monotonic: nil, &actions)
    }

    mutating func disconnected(reason: Int32, now: Instant, _ actions: inout [Action]) {
        session.down()
        for engine in engines.values { engine.setConnected(false) }
        lease(.available(false), now: now, monotonic: nil, &actions)
        if reason == Self.sessionTakenOver {
            tookOver(
                because: "another client connected with this worker's client id and took its session",
                now: now,
                &actions
            )
        } else if lifecycle == .running {
            log(.warning, "disconnected from the broker; reconnecting", ["reason": "\(reason)"], into: &actions)
        }
    }

    /// Our own retained status: written by another process when its instance is not ours. One that
    /// started before us is a previous run of this worker (killed before its will went out), not a
    /// second worker: only the older of two concurrent workers gives way.
    mutating func status(_ message: InboundMessage, now: Instant, _ actions: inout [Action]) {
        guard lifecycle == .running || isStopping, case .object(let status)? = try? JSON(parsing: message.payload),
            status["state"] == "online", let other = status["instance"]?.stringValue, other != policy.instance,
            let otherStart = status["startedAt"]?.stringValue, otherStart >= startedAt.rfc3339()
        else { return }
        tookOver(
            because: "another chimed announced itself online with this worker id (instance \(other))",
            now: now,
            &actions
        )
    }

    var isStopping: Bool {
        if case .stopping = lifecycle { return true }
        return false
    }

    /// Another client took our session: say so, and past the limit stop with a one-line reason so
    /// that a supervisor shows it instead of a flapping pair of workers.
    mutating func tookOver(because cause: String, now: Instant, _ actions: inout [Action]) {
        let takeovers = session.tookOver(now: now)
        stats.takeovers += 1
        let seconds = policy.takeoverWindow / 1000
        log(
            .error,
            "\(cause); is a second chimed running with --worker-id \(policy.workerId)?",
            ["clientId": policy.clientId, "takeovers": "\(takeovers)", "withinSeconds": "\(seconds)"],
            into: &actions
        )
        guard takeovers >= policy.maxTakeovers else { return }
        let fatal = WorkerError(
            "the worker id \(policy.workerId) (client id \(policy.clientId)) was taken over \(takeovers) times "
                + "within \(seconds) s: another client or a second chimed uses it; stopping"
        )
        switch lifecycle {
        case .running, .stopping(_, nil): lifecycle = .stopping(deadline: now, fatal: fatal)
        case .stopping, .draining, .stopped: break
        }
    }

    mutating func subscribed(messageId: Int32, grantedQoS: [Int32], now: Instant, _ actions: inout [Action]) {
        switch session.subscribed(messageId: messageId, grantedQoS: grantedQoS, now: now) {
        case .slot(let slot, let refusal):
            if let refusal { slotRefused(slot, refusal: refusal, &actions) }
        case .refused(let refusal):
            stats.subscriptionRefusals += 1
            log(
                .error,
                "the broker refused the command subscription: no command can reach this worker (check the broker's "
                    + "ACL for its account)",
                ["filter": policy.commandFilter, "reason": hex(refusal)],
                into: &actions
            )
        case .serving:
            // Online only once commands can reach us.
            announceOnline(now: now, &actions)
            log(.notice, "serving", ["commands": policy.commandFilter], into: &actions)
        case .other:
            break
        }
    }

    /// Publishes the retained `online` status; in slot mode it says which slots are served, so it
    /// is published again when they changed (``SlotServing/changed``), a second after the last at the
    /// soonest.
    mutating func announceOnline(now: Instant, _ actions: inout [Action]) {
        guard session.isServing else { return }
        slots?.announced(now: now)
        var extra: JSONObject = ["startedAt": .string(startedAt.rfc3339()), "pid": .int(policy.pid)]
        if !policy.version.isEmpty { extra["version"] = .string(policy.version) }
        if let slots = policy.slots {
            extra["slots"] = .int(Int64(slots.slotCount))
            extra["serving"] = .string(SlotRanges.text(Array(engines.keys)))
        }
        let payload = Self.statusPayload("online", policy: policy, extra: extra)
        actions.append(
            .publish(
                OutboundMessage(topic: statusTopic, payload: payload, qos: 1, retain: true, purpose: .onlineStatus)
            )
        )
    }
}
