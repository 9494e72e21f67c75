import ChimeHarness
import ChimeMQTT
import Synchronization

/// Records the events of an `MQTTClient` for assertions; pass `recorder.handler` as `onEvent`.
///
/// ```swift
/// let recorder = MQTTEventRecorder()
/// let client = try MQTTClient(options: options, onEvent: recorder.handler)
/// try client.start()
/// #expect(await recorder.waitUntil { $0.connectedCount == 1 })
/// ```
public final class MQTTEventRecorder: Sendable {
    private let events = Mutex<[MQTTEvent]>([])
    private let onConnected: (@Sendable (Bool) -> Void)?

    /// - Parameter onConnected: also called (on the network thread) on every `.connected`, with
    ///   `sessionPresent`; the place to subscribe, as the worker does.
    public init(onConnected: (@Sendable (Bool) -> Void)? = nil) {
        self.onConnected = onConnected
    }

    /// The event handler to give the client.
    public var handler: @Sendable (MQTTEvent) -> Void {
        { [self] event in
            events.withLock { $0.append(event) }
            if case .connected(let sessionPresent) = event {
                onConnected?(sessionPresent)
            }
        }
    }

    /// Every event so far, in order.
    public var all: [MQTTEvent] {
        events.withLock { $0 }
    }

    /// `sessionPresent` of each `.connected`, in order.
    public var connections: [Bool] {
        all.compactMap { if case .connected(let present) = $0 { present } else { nil } }
    }

    public var connectedCount: Int {
        connections.count
    }

    /// The reason codes of each `.disconnected`, in order.
    public var disconnections: [Int32] {
        all.compactMap { if case .disconnected(let code) = $0 { code } else { nil } }
    }

    public var messages: [MQTTMessage] {
        all.compactMap { if case .message(let message) = $0 { message } else { nil } }
    }

    /// The `(messageId, reasonCode)` of each `.published`, in order.
    public var acknowledgements: [(messageId: Int32, reasonCode: Int32)] {
        all.compactMap { if case .published(let id, let code) = $0 { (id, code) } else { nil } }
    }

    /// PUBACK reason code by message id (the last one when an id was reused).
    public var published: [Int32: Int32] {
        Dictionary(acknowledgements.map { ($0.messageId, $0.reasonCode) }, uniquingKeysWith: { $1 })
    }

    public var subscribed: Set<Int32> {
        Set(all.compactMap { if case .subscribed(let id, _) = $0 { id } else { nil } })
    }

    /// Forgets what was recorded.
    public func reset() {
        events.withLock { $0.removeAll() }
    }

    /// ``eventually(timeout:every:_:)`` on what was recorded.
    /// - Returns: whether `condition` held before `timeout`.
    public func waitUntil(
        timeout: Duration = .seconds(10),
        _ condition: (MQTTEventRecorder) -> Bool
    ) async -> Bool {
        await eventually(timeout: timeout, every: .milliseconds(5)) { condition(self) }
    }
}
