import ChimeTestSupport
import Testing

@testable import ChimeMQTT

@Suite("Persistent sessions")
struct SessionTests {
    @Test(
        "a stopped client's session keeps its subscription and queues QoS 1 messages until it returns",
        arguments: [MQTTOptions.ProtocolVersion.v5, .v311]
    )
    func queuedWhileAway(version: MQTTOptions.ProtocolVersion) async throws {
        let broker = try await TestBroker.start()
        var options = broker.clientOptions(clientId: "away-\(version)", protocolVersion: version)
        options.cleanStart = false
        options.sessionExpiryInterval = 300

        let first = MQTTEventRecorder()
        let client = try await connectedClient(options, first)
        #expect(first.connections == [false])
        try await subscribe(client, first, "away/#")
        client.stop()
        #expect(first.disconnections == [0])

        let publisher = try MQTTRequester(options: broker.clientOptions(clientId: "away-publisher"))
        try await publisher.connect(timeout: .seconds(10))
        let reason = try await publisher.publish(
            topic: "away/1",
            payload: Array(text: "while away"),
            timeout: .seconds(10)
        )
        #expect(reason == 0, "0x10 would mean the broker had no matching subscriber: the session was lost")
        publisher.stop()

        let second = MQTTEventRecorder()
        let again = try await connectedClient(options, second)
        defer { again.stop() }
        #expect(second.connections == [true])
        #expect(await second.waitUntil { $0.messages.count == 1 })
        let message = try #require(second.messages.first)
        #expect(message.topic == "away/1")
        #expect(message.payload == Array(text: "while away"))
        #expect(message.qos == 1)
        await broker.stop()
    }

    @Test(
        "the session expiry interval is sent again on automatic reconnects, so the session outlives the next disconnect"
    )
    func expiryKeptAcrossReconnect() async throws {
        let broker = try await TestBroker.start(.init(persistence: true))
        var options = broker.clientOptions(clientId: "keeper")
        options.cleanStart = false
        options.sessionExpiryInterval = 300
        options.reconnectDelay = .milliseconds(50) ... .milliseconds(400)

        let recorder = MQTTEventRecorder()
        let client = try await connectedClient(options, recorder)
        try await subscribe(client, recorder, "keep/#")

        // SIGTERM: mosquitto saves the session and closes the connection; the client reconnects by itself.
        try await broker.restart()
        #expect(await recorder.waitUntil { $0.connectedCount == 2 })
        #expect(recorder.connections == [false, true])

        // A DISCONNECT without a Session Expiry property keeps the interval of the last CONNECT: had the
        // automatic reconnect sent none (0), the broker would drop the session now.
        client.stop()

        let publisher = try MQTTRequester(options: broker.clientOptions(clientId: "keep-publisher"))
        try await publisher.connect(timeout: .seconds(10))
        let reason = try await publisher.publish(topic: "keep/1", payload: [1], timeout: .seconds(10))
        #expect(reason == 0, "0x10: no matching subscriber, the session was dropped")
        publisher.stop()

        let second = MQTTEventRecorder()
        let again = try await connectedClient(options, second)
        defer { again.stop() }
        #expect(second.connections == [true])
        #expect(await second.waitUntil { $0.messages.count == 1 })
        #expect(second.messages.first?.topic == "keep/1")
        await broker.stop()
    }
}
