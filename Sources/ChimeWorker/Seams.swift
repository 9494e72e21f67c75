import ChimeCore
import ChimeMQTT
import ChimePush
import ChimeStore
import ChimeSupport
import Foundation

/// How the worker opens its store, which the executable chooses: ChimeWiring's
/// `StoreOpener.configured(_:logger:fileSystem:)` opens the data directory or the PostgreSQL that the
/// configuration names. ``Worker/run()`` calls one of them once, after the metrics endpoint
/// listens; each throws the line chimed prints when the store cannot be opened.
public struct StoreOpener: Sendable {
    /// Opens the store and reads what the engine is rebuilt from.
    public var recover: @Sendable () throws(WorkerError) -> (store: any WorkerStore, recovery: Recovery)
    /// Slot mode: joins the workers of the store at `uri` as `instance`, with no engine yet.
    public var joinSlots:
        @Sendable (_ slots: (count: Int, leaseTTL: Duration), _ uri: String, _ instance: String) throws(WorkerError) ->
            JoinedSlots

    public init(
        recover: @escaping @Sendable () throws(WorkerError) -> (store: any WorkerStore, recovery: Recovery),
        joinSlots:
            @escaping @Sendable (
                _ slots: (count: Int, leaseTTL: Duration), _ uri: String, _ instance: String
            ) throws(WorkerError) -> JoinedSlots
    ) {
        self.recover = recover
        self.joinSlots = joinSlots
    }
}

/// A store joined in slot mode, and what the worker's policy needs of it.
public struct JoinedSlots {
    public var store: any WorkerStore
    /// The store's number of slots.
    public var slotCount: Int
    /// The workers' shared subscription group.
    public var shareGroup: String

    public init(store: any WorkerStore, slotCount: Int, shareGroup: String) {
        self.store = store
        self.slotCount = slotCount
        self.shareGroup = shareGroup
    }
}

/// How the worker reaches the broker: ChimeMQTT's client.
public protocol WorkerTransport: AnyObject {
    /// - Returns: the message id, to match the broker's PUBACK.
    func publish(_ message: OutboundMessage) throws(TransportError) -> Int32
    /// - Returns: the message id, to match the broker's SUBACK.
    func subscribe(_ filter: String, qos: Int) throws(TransportError) -> Int32
    func unsubscribe(_ filter: String) throws(TransportError)
    func stop()
}

/// The worker's time: the wall clock it schedules by, and a monotonic one to measure with.
public protocol WorkerClock {
    func now() -> Instant
    func monotonic() -> ContinuousClock.Instant
}

// MARK: The production seams

/// ChimeMQTT's client, as the worker's transport.
final class MQTTTransport: WorkerTransport {
    let client: MQTTClient

    init(_ client: MQTTClient) { self.client = client }

    func publish(_ message: OutboundMessage) throws(TransportError) -> Int32 {
        var properties = MQTTPublishProperties()
        properties.contentType = message.contentType
        properties.responseTopic = message.responseTopic
        properties.correlationData = message.correlationData
        properties.userProperties = message.userProperties.map { MQTTUserProperty($0.name, $0.value) }
        properties.messageExpiryInterval = message.messageExpiry
        do {
            return try client.publish(
                topic: message.topic,
                payload: message.payload,
                qos: message.qos,
                retain: message.retain,
                properties: properties
            )
        } catch {
            throw TransportError("\(error)")
        }
    }

    func subscribe(_ filter: String, qos: Int) throws(TransportError) -> Int32 {
        do {
            return try client.subscribe(filter, qos: qos)
        } catch {
            throw TransportError("\(error)")
        }
    }

    func unsubscribe(_ filter: String) throws(TransportError) {
        do {
            try client.unsubscribe(filter)
        } catch {
            throw TransportError("\(error)")
        }
    }

    func stop() { client.stop() }
}

/// The system's clocks.
struct SystemClock: WorkerClock {
    func now() -> Instant { wallClock() }
    func monotonic() -> ContinuousClock.Instant { .now }
}

/// Makes push attempts off the loop and reports each one's end as ``WorkerEvent/push(_:_:)``
/// (ChimePush's `PushService`; a fake in tests).
public protocol PushSender: Sendable {
    func send(_ job: PushJob)
}

extension PushService: PushSender {}
