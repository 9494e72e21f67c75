import ChimeTestSupport
import Synchronization
import Testing

@testable import ChimeMQTT

@Suite("MQTTClient against a real mosquitto")
struct MQTTClientTests {
    static let versions: [MQTTOptions.ProtocolVersion] = [.v5, .v311]

    @Test(
        "connects, subscribes, publishes QoS 1, receives it, and reports each PUBACK by message id",
        arguments: versions
    )
    func publishAndReceive(version: MQTTOptions.ProtocolVersion) async throws {
        let broker = try await TestBroker.start()
        let recorder = MQTTEventRecorder()
        let client = try MQTTClient(
            options: broker.clientOptions(clientId: "roundtrip", protocolVersion: version),
            onEvent: recorder.handler
        )
        defer { client.stop() }
        try client.start()
        #expect(await recorder.waitUntil { $0.connectedCount == 1 })
        #expect(client.isConnected)
        #expect(recorder.connections == [false])

        let subscription = try client.subscribe("t/#", qos: 1)
        #expect(await recorder.waitUntil { $0.subscribed.contains(subscription) })

        var messageIds: [Int32] = []
        for index in 0..<20 {
            messageIds.append(try client.publish(topic: "t/\(index)", payload: Array("hello \(index)".utf8)))
        }
        #expect(Set(messageIds).count == 20)
        #expect(await recorder.waitUntil { $0.messages.count == 20 && $0.acknowledgements.count == 20 })
        // One PUBACK per message id, success (a subscriber matched, so not even 0x10).
        #expect(recorder.acknowledgements.map(\.messageId).sorted() == messageIds.sorted())
        #expect(recorder.acknowledgements.allSatisfy { $0.reasonCode == 0 })

        let first = try #require(recorder.messages.first)
        #expect(first.topic == "t/0")
        #expect(first.payload == Array("hello 0".utf8))
        #expect(first.qos == 1)
        #expect(first.retain == false)
        #expect(Set(recorder.messages.map(\.topic)) == Set((0..<20).map { "t/\($0)" }))

        client.stop()
        #expect(!client.isConnected)
        #expect(recorder.disconnections == [0])
        await broker.stop()
    }

    @Test(
        "MQTT 5 properties round trip: response topic, binary correlation data, content type, user properties, expiry"
    )
    func propertiesRoundTrip() async throws {
        let broker = try await TestBroker.start()
        let recorder = MQTTEventRecorder()
        let client = try MQTTClient(options: broker.clientOptions(clientId: "props"), onEvent: recorder.handler)
        defer { client.stop() }
        try client.start()
        #expect(await recorder.waitUntil { $0.connectedCount == 1 })
        let subscription = try client.subscribe("props/#")
        #expect(await recorder.waitUntil { $0.subscribed.contains(subscription) })

        let correlation: [UInt8] = [0, 1, 2, 0xFF, 0, 0x80, 0x7F]
        let properties = MQTTPublishProperties(
            responseTopic: "props/reply/42",
            correlationData: correlation,
            contentType: "application/json",
            userProperties: [.init("fire-id", "med@2026-12-01T10:00:00Z"), .init("k", "v1"), .init("k", "v2")],
            messageExpiryInterval: 3600
        )
        try client.publish(topic: "props/a", payload: Array(#"{"x":1}"#.utf8), properties: properties)
        #expect(await recorder.waitUntil { $0.messages.count == 1 })

        let message = try #require(recorder.messages.first)
        #expect(message.responseTopic == "props/reply/42")
        #expect(message.correlationData == correlation)
        #expect(message.contentType == "application/json")
        #expect(
            message.userProperties == [
                .init("fire-id", "med@2026-12-01T10:00:00Z"), .init("k", "v1"), .init("k", "v2"),
            ]
        )
        #expect(message.userProperty("fire-id") == "med@2026-12-01T10:00:00Z")
        let expiry = try #require(message.messageExpiryInterval)
        #expect(expiry <= 3600 && expiry > 3500)
        await broker.stop()
    }

    @Test("MQTT 3.1.1 publishes with properties, which are dropped")
    func propertiesIgnoredOnV311() async throws {
        let broker = try await TestBroker.start()
        let recorder = MQTTEventRecorder()
        let client = try MQTTClient(
            options: broker.clientOptions(clientId: "props311", protocolVersion: .v311),
            onEvent: recorder.handler
        )
        defer { client.stop() }
        try client.start()
        #expect(await recorder.waitUntil { $0.connectedCount == 1 })
        let subscription = try client.subscribe("p311/#")
        #expect(await recorder.waitUntil { $0.subscribed.contains(subscription) })
        let properties = MQTTPublishProperties(
            responseTopic: "r",
            correlationData: [1],
            contentType: "text/plain",
            userProperties: [.init("a", "b")],
            messageExpiryInterval: 60
        )
        try client.publish(topic: "p311/a", payload: [1, 2, 3], properties: properties)
        #expect(await recorder.waitUntil { $0.messages.count == 1 })
        let message = try #require(recorder.messages.first)
        var expected = MQTTMessage(topic: "p311/a", payload: [1, 2, 3], qos: 1)
        expected.messageId = message.messageId
        #expect(message == expected)
        #expect(message.messageId != 0, "a QoS 1 message carries its packet id")
        await broker.stop()
    }
}

@Suite("MQTTClient under load")
struct LoadTests {
    @Test("the event router survives many events (a closure kept in a Mutex grew a thunk per event)")
    func routerManyEvents() {
        let count = Atomic(0)
        let router = EventRouter { _ in count.add(1, ordering: .relaxed) }
        for messageId in 0..<100_000 {
            router.handle(.publish(messageId: Int32(messageId & 0xFFFF), reasonCode: 0))
        }
        #expect(count.load(ordering: .relaxed) == 100_000)
        router.finish()
        router.handle(.publish(messageId: 1, reasonCode: 0))
        #expect(count.load(ordering: .relaxed) == 100_000, "no events after finish()")
    }

    @Test("5000 QoS 1 messages round trip, each acknowledged once")
    func manyMessages() async throws {
        let broker = try await TestBroker.start(.init(extraLines: ["max_inflight_messages 0"]))
        let received = Atomic(0)
        let acknowledged = Atomic(0)
        let recorder = MQTTEventRecorder()
        let client = try MQTTClient(options: broker.clientOptions(clientId: "load")) { event in
            switch event {
            case .message: received.add(1, ordering: .relaxed)
            case .published: acknowledged.add(1, ordering: .relaxed)
            default: recorder.handler(event)
            }
        }
        defer { client.stop() }
        try client.start()
        #expect(await recorder.waitUntil { $0.connectedCount == 1 })
        try await subscribe(client, recorder, "load/#")
        let payload = [UInt8](repeating: 0x41, count: 256)
        for index in 0..<5000 {
            try client.publish(topic: "load/\(index % 50)", payload: payload)
        }
        #expect(await eventually { received.load(ordering: .relaxed) == 5000 })
        #expect(await eventually { acknowledged.load(ordering: .relaxed) == 5000 })
        await broker.stop()
    }
}

@Suite("TLS")
struct TLSTests {
    @Test("mqtts:// connects over TLS, verifying the broker against the given CA; a wrong CA never connects")
    func tls() async throws {
        let directory = try TemporaryDirectory(prefix: "chime-tls")
        let certificates = try await TestCertificates.make(in: directory)
        let broker = try await TestBroker.start(.init(tls: certificates))
        var options = try MQTTOptions(url: broker.url)
        #expect(options.useTLS && options.host == "localhost")
        options.tlsCAFile = certificates.caFile
        options.clientId = "tls"

        let recorder = MQTTEventRecorder()
        let client = try await connectedClient(options, recorder)
        try await subscribe(client, recorder, "tls/#")
        let messageId = try client.publish(topic: "tls/1", payload: [1, 2, 3])
        #expect(await recorder.waitUntil { $0.published[messageId] == 0 && $0.messages.count == 1 })
        client.stop()

        // The system's CAs do not know our test CA: the handshake fails, over and over, without a crash.
        var untrusting = options
        untrusting.tlsCAFile = nil
        untrusting.clientId = "untrusting"
        untrusting.reconnectDelay = .milliseconds(20) ... .milliseconds(40)
        let refused = MQTTEventRecorder()
        let stranger = try MQTTClient(options: untrusting, onEvent: refused.handler)
        try stranger.start()
        let failures = await eventually {
            broker.log.components(separatedBy: "\n").filter { $0.contains("OpenSSL Error") }.count >= 2
        }
        #expect(failures, "broker log: \(broker.log)")
        #expect(refused.connectedCount == 0)
        stranger.stop()
        await broker.stop()
    }
}
