import ChimeEngine
import ChimeProtocol

/// The broker session as the worker's policy sees it: connected or not, whether the command
/// subscription was granted, the retained `online` status and the forward check waiting for their
/// PUBACKs, slot subscriptions waiting for their SUBACKs, and the takeovers of the last window.
///
/// Pure: fed what the transport reported, with `now`; it answers what each report means, and the
/// coordinator (``WorkerStateMachine``) logs and acts on it.
struct BrokerSession {
    enum State: Equatable {
        case down
        /// Connected; the command subscription was asked for (its message id, once known).
        case subscribing(messageId: Int32?)
        /// Connected, but the broker refused the command subscription: no command can reach the
        /// worker. Asked again at `retryAt` (an ACL can be fixed and reloaded without a reconnection).
        case refused(retryAt: Instant)
        /// Connected and subscribed; `statusMessageId` is the retained `online` status waiting for
        /// its PUBACK.
        case serving(statusMessageId: Int32?)
    }

    /// What a SUBACK was for.
    enum Suback: Equatable {
        /// The command subscription was granted: the worker serves from now on.
        case serving
        /// The command subscription was refused, with the broker's reason; asked again later.
        case refused(Int32)
        /// A slot's forwarded commands (routing by slot), and the broker's refusal if it refused.
        case slot(Int, refusal: Int32?)
        /// Nothing waited for it (a SUBACK of an earlier connection, the status or fleet filter).
        case other
    }

    /// What a PUBACK was for, when it was the session's own publication.
    enum Puback: Equatable {
        /// The retained `online` status; the broker's refusal if it refused.
        case status(refusal: Int32?)
        /// Routing by slot: the forward check; the broker's refusal if it refused.
        case forwardCheck(refusal: Int32?)
        /// Not the session's: a delivery's, or nothing waited for it.
        case other
    }

    private(set) var state = State.down
    /// Routing by slot: the message id of this connection's forward check
    /// (``OutboundMessage/Purpose/forwardCheck``) until its PUBACK.
    private var forwardCheckId: Int32?
    /// Routing by slot: slot subscriptions waiting for their SUBACK, by message id.
    private var slotSubscriptions: [Int32: Int] = [:]
    /// When the broker reported the session taken over, within the last takeover window.
    private var takeovers: [Instant] = []
    let resubscribeDelay: Int64
    let takeoverWindow: Int64

    init(resubscribeDelay: Int64, takeoverWindow: Int64) {
        self.resubscribeDelay = resubscribeDelay
        self.takeoverWindow = takeoverWindow
    }

    var isConnected: Bool { state != .down }

    var isServing: Bool {
        if case .serving = state { return true }
        return false
    }

    /// When the refused command subscription is asked for again.
    var retryAt: Instant? {
        if case .refused(let at) = state { return at }
        return nil
    }

    /// Connected: the command subscription is asked for on every connection (a broker that lost its
    /// sessions forgets them).
    mutating func connected() { state = .subscribing(messageId: nil) }

    /// The worker stops: no longer connected as far as the policy goes. What waits for the broker's
    /// answers is kept until the connection is gone (``down()``).
    mutating func stopped() { state = .down }

    /// Disconnected: what waited for the broker's answers is forgotten.
    mutating func down() {
        state = .down
        forwardCheckId = nil
        slotSubscriptions.removeAll()
    }

    /// A subscription was handed to the transport with `messageId`.
    mutating func subscribeSent(_ subscription: WorkerStateMachine.Subscription, messageId: Int32) {
        if subscription == .commands, case .subscribing = state {
            state = .subscribing(messageId: messageId)
        } else if case .slot(let slot) = subscription {
            slotSubscriptions[messageId] = slot
        }
    }

    /// The transport could not take the command subscription: asked again later, if connected.
    mutating func subscribeFailed(now: Instant) {
        if isConnected { state = .refused(retryAt: now.adding(milliseconds: resubscribeDelay)) }
    }

    /// The broker's SUBACK: a code of 0x80 or more (or none at all) is a refusal.
    mutating func subscribed(messageId: Int32, grantedQoS: [Int32], now: Instant) -> Suback {
        let refusal = grantedQoS.first(where: { $0 >= 0x80 }) ?? (grantedQoS.isEmpty ? 0x80 : nil)
        if let slot = slotSubscriptions.removeValue(forKey: messageId) { return .slot(slot, refusal: refusal) }
        guard state == .subscribing(messageId: messageId) else { return .other }
        if let refusal {
            state = .refused(retryAt: now.adding(milliseconds: resubscribeDelay))
            return .refused(refusal)
        }
        state = .serving(statusMessageId: nil)
        return .serving
    }

    /// The refused command subscription is asked for again when its time has come.
    /// - Returns: whether to subscribe again now.
    mutating func resubscribeIfDue(now: Instant) -> Bool {
        guard let at = retryAt, now >= at else { return false }
        state = .subscribing(messageId: nil)
        return true
    }

    /// The transport took the retained `online` status.
    mutating func statusSent(messageId: Int32) {
        if isServing { state = .serving(statusMessageId: messageId) }
    }

    /// The transport took the forward check.
    mutating func forwardCheckSent(messageId: Int32) { forwardCheckId = messageId }

    /// The broker's PUBACK, when it answers one of the session's own publications.
    @inline(__always)
    mutating func acknowledged(messageId: Int32, reasonCode: Int32) -> Puback {
        let refusal = reasonCode >= 0x80 ? reasonCode : nil
        if case .serving(let statusId?) = state, statusId == messageId {
            state = .serving(statusMessageId: nil)
            return .status(refusal: refusal)
        }
        if messageId == forwardCheckId {
            forwardCheckId = nil
            return .forwardCheck(refusal: refusal)
        }
        return .other
    }

    /// Another client took the session.
    /// - Returns: the takeovers within the last ``takeoverWindow``, this one included.
    mutating func tookOver(now: Instant) -> Int {
        takeovers.removeAll { now.milliseconds - $0.milliseconds > takeoverWindow }
        takeovers.append(now)
        return takeovers.count
    }
}
