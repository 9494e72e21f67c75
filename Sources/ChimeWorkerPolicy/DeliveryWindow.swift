import ChimeEngine
import ChimeProtocol

/// The deliveries published and not yet acknowledged, by the message id the transport gave each,
/// with their slots and the engine's tokens. (How many may be in flight is
/// ``WorkerStateMachine/Policy/maxDeliveriesInFlight``, counted by the engines, which also hold
/// those handed out and not yet taken by the transport.)
///
/// Pure: the coordinator (``WorkerStateMachine``) fills it as publications are taken and empties
/// it as the broker acknowledges them; the engines keep each delivery's state.
struct DeliveryWindow {
    private var byMessageId: [Int32: (slot: Int, token: UInt64)] = [:]
    /// When the engines were last asked what is due: a long batch of commands does not hold up what
    /// falls due meanwhile (``WorkerStateMachine/Policy/tickInterval``).
    var lastTick: Instant

    init(now: Instant) { lastTick = now }

    /// The transport took a delivery with `messageId`.
    @inline(__always)
    mutating func published(messageId: Int32, slot: Int, token: UInt64) {
        byMessageId[messageId] = (slot, token)
    }

    /// The broker acknowledged `messageId`: the delivery it was, nil when none (a status, a forward
    /// check, a slot dropped meanwhile).
    @inline(__always)
    mutating func acknowledged(messageId: Int32) -> (slot: Int, token: UInt64)? {
        byMessageId.removeValue(forKey: messageId)
    }

    /// Forgets the deliveries of a slot no longer served here: their acknowledgements no longer
    /// matter here.
    mutating func drop(slot: Int) {
        byMessageId = byMessageId.filter { $0.value.slot != slot }
    }
}
