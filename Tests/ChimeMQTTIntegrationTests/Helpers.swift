import ChimeMQTT
import ChimeTestSupport
import Synchronization
import Testing

/// A value set after the closure that reads it was created (a client, for its own event handler).
final class Late<Value: Sendable>: Sendable {
    private let value = Mutex<Value?>(nil)

    func set(_ newValue: Value?) {
        value.withLock { $0 = newValue }
    }

    var get: Value? {
        value.withLock { $0 }
    }
}

/// Creates a client, starts it and waits until it is connected.
func connectedClient(_ options: MQTTOptions, _ recorder: MQTTEventRecorder) async throws -> MQTTClient {
    let client = try MQTTClient(options: options, onEvent: recorder.handler)
    try client.start()
    let connected = await recorder.waitUntil { $0.connectedCount >= 1 }
    try #require(connected, "no CONNACK from \(options.host):\(options.port)")
    return client
}

/// Subscribes and waits for the SUBACK.
func subscribe(_ client: MQTTClient, _ recorder: MQTTEventRecorder, _ filter: String, qos: Int = 1) async throws {
    let messageId = try client.subscribe(filter, qos: qos)
    let acknowledged = await recorder.waitUntil { $0.subscribed.contains(messageId) }
    try #require(acknowledged, "no SUBACK for \(filter)")
}

extension Array where Element == UInt8 {
    init(text: String) {
        self = Array(text.utf8)
    }
}
