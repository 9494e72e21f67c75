import ChimeTestSupport
import Synchronization
import Testing

@testable import ChimeMQTT

@Suite("Reconnects, in-flight messages and publishing while disconnected")
struct ReconnectTests {
    @Test("reconnects by itself after the broker restarts, emits .connected again, and refuses publishes meanwhile")
    func reconnectsAfterRestart() async throws {
        let broker = try await TestBroker.start()
        var options = broker.clientOptions(clientId: "reconnector")
        options.reconnectDelay = .milliseconds(50) ... .milliseconds(400)
        // Subscribe in the connected handler, as the worker does: the restarted broker lost every session.
        let client = Late<MQTTClient>()
        let recorder = MQTTEventRecorder(onConnected: { _ in _ = try? client.get?.subscribe("again/#") })
        client.set(try MQTTClient(options: options, onEvent: recorder.handler))
        let reconnector = try #require(client.get)
        defer { reconnector.stop() }
        try reconnector.start()
        #expect(await recorder.waitUntil { $0.subscribed.count == 1 })

        await broker.stop()
        #expect(await recorder.waitUntil { $0.disconnections.count == 1 })
        #expect(!reconnector.isConnected)
        #expect(recorder.disconnections.first != 0, "not a disconnect we asked for")
        // Disconnected: publish refuses at once and queues nothing.
        #expect(throws: MQTTError(.noConnection)) {
            try reconnector.publish(topic: "again/lost", payload: [0])
        }
        #expect(throws: MQTTError(.noConnection)) {
            try reconnector.subscribe("again/#")
        }
        // The outage (not a wait for anything): long enough for attempts at 50 and 150 ms to fail
        // against the closed port.
        try await Task.sleep(for: .milliseconds(300))

        try await broker.restart()
        #expect(await recorder.waitUntil { $0.connectedCount == 2 && $0.subscribed.count == 2 })
        // Events come in order from the network thread: any a failed attempt emitted came before
        // the .connected of the reconnection.
        #expect(recorder.disconnections.count == 1, "failed attempts emit nothing")
        #expect(recorder.connections == [false, false])
        #expect(reconnector.isConnected)
        let messageId = try reconnector.publish(topic: "again/back", payload: [1])
        #expect(await recorder.waitUntil { $0.published[messageId] == 0 && $0.messages.count == 1 })
        #expect(recorder.messages.map(\.topic) == ["again/back"])
        await broker.stop()
    }

    /// What the worker relies on for at-least-once delivery. Observed with libmosquitto 2.0.11:
    /// QoS 1 messages whose PUBACK had not arrived when the connection dropped stay queued in the
    /// client; after the automatic reconnect those that were on the wire are sent again with DUP set
    /// (the restarted broker logs `d1`), those still waiting for a place in the window are sent for the
    /// first time, and every PUBACK is reported under the original message id.
    ///
    /// How many are on the wire is the broker's Receive Maximum: mosquitto announces its
    /// `max_inflight_messages` (default 20); with `max_inflight_messages 0` it announces none and our
    /// `maxInflight` (1000) applies.
    @Test(
        "QoS 1 messages in flight when the broker dies are re-sent after the reconnect and acknowledged",
        arguments: [(nil, 20), ("max_inflight_messages 0", 50)] as [(String?, Int)]
    )
    func inFlightResent(brokerSetting: String?, onTheWire: Int) async throws {
        let configuration = TestBroker.Configuration(
            persistence: true,
            verboseLog: true,
            extraLines: brokerSetting.map { [$0] } ?? []
        )
        let broker = try await TestBroker.start(configuration)
        var options = broker.clientOptions()
        options.reconnectDelay = .milliseconds(50) ... .milliseconds(400)

        // A persistent subscriber whose session is saved to mosquitto.db by a clean broker stop, so
        // the broker killed later comes back with it and queues the re-sent messages for it.
        var subscriberOptions = options
        subscriberOptions.clientId = "inflight-subscriber"
        subscriberOptions.cleanStart = false
        subscriberOptions.sessionExpiryInterval = 300
        let received = MQTTEventRecorder()
        let subscriber = try await connectedClient(subscriberOptions, received)
        defer { subscriber.stop() }
        try await subscribe(subscriber, received, "inflight/#")
        try await broker.restart()
        #expect(await received.waitUntil { $0.connectedCount == 2 })

        options.clientId = "inflight-publisher"
        let recorder = MQTTEventRecorder()
        let publisher = try await connectedClient(options, recorder)
        defer { publisher.stop() }

        // Frozen broker: the PUBLISHes reach its socket buffer, no PUBACK comes back.
        broker.pause()
        var messageIds: [Int32] = []
        for index in 0..<50 {
            messageIds.append(try publisher.publish(topic: "inflight/\(index)", payload: Array(text: "m\(index)")))
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(recorder.acknowledgements.isEmpty)

        // Killed: what it had not processed is gone; it restarts from the session saved above.
        await broker.kill()
        #expect(await recorder.waitUntil { $0.disconnections.count == 1 })
        #expect(throws: MQTTError(.noConnection)) {
            try publisher.publish(topic: "inflight/late", payload: [0])
        }
        try await broker.restart()

        #expect(await recorder.waitUntil { $0.connectedCount == 2 })
        #expect(await recorder.waitUntil { Set($0.published.keys).isSuperset(of: messageIds) })
        #expect(recorder.acknowledgements.count == 50, "one PUBACK per message id")
        #expect(await received.waitUntil { Set($0.messages.map(\.topic)).count == 50 })
        #expect(Set(received.messages.map(\.payload)) == Set((0..<50).map { Array(text: "m\($0)") }))
        #expect(!received.messages.contains { $0.topic == "inflight/late" })
        let resent = broker.log.split(separator: "\n").filter {
            $0.contains("Received PUBLISH from inflight-publisher (d1, q1")
        }
        #expect(resent.count == onTheWire, "those on the wire are re-sent with DUP set")
        print(
            "unacknowledged at the kill: \(messageIds.count), PUBACKs after reconnect: \(recorder.acknowledgements.count),",
            "DUP publishes logged: \(resent.count), delivered: \(received.messages.count)"
        )
        await broker.stop()
    }

    /// libmosquitto's own behaviour underneath: `mosquitto_publish` of a QoS 1 message while the socket
    /// is down returns MOSQ_ERR_NO_CONN but has queued the message, which goes out after the next
    /// connect. `Mosquitto.publish` reports that as success; `MQTTClient.publish` does not get that far
    /// while disconnected (it throws `.noConnection`, so nothing piles up in memory during an outage).
    @Test("libmosquitto queues a QoS 1 publish made while disconnected and sends it after reconnecting")
    func libraryQueuesWhileDisconnected() async throws {
        let broker = try await TestBroker.start()
        let observed = MQTTEventRecorder()
        let observer = try await connectedClient(broker.clientOptions(clientId: "raw-observer"), observed)
        defer { observer.stop() }
        try await subscribe(observer, observed, "raw/#")
        await broker.stop()

        let events = Mutex<[Mosquitto.Event]>([])
        let mosquitto = try Mosquitto(clientId: "raw", cleanStart: true, protocolVersion: .v5) { event in
            events.withLock { $0.append(event) }
        }
        #expect(throws: MQTTError(.system), "ECONNREFUSED: nothing listens") {
            try mosquitto.connect(host: broker.host, port: broker.port, keepAlive: 30, sessionExpiryInterval: 0)
        }
        let messageId = try mosquitto.publish(topic: "raw/1", payload: [42], qos: 1, retain: false, properties: .init())
        #expect(messageId > 0)
        #expect(throws: MQTTError(.noConnection), "QoS 0 is not queued") {
            try mosquitto.publish(topic: "raw/0", payload: [0], qos: 0, retain: false, properties: .init())
        }

        try await broker.restart()
        #expect(await observed.waitUntil { $0.connectedCount == 2 })
        try await subscribe(observer, observed, "raw/#")
        try mosquitto.reconnect()
        func acknowledged() -> Bool {
            events.withLock { $0.contains { if case .publish(messageId, 0) = $0 { true } else { false } } }
        }
        // This client has no network thread: each check runs its loop once.
        let wasAcknowledged = try await eventually(timeout: .seconds(10), every: .zero) {
            try mosquitto.loop(timeoutMilliseconds: 20)
            return acknowledged()
        }
        #expect(wasAcknowledged)
        #expect(await observed.waitUntil { $0.messages.count == 1 })
        #expect(observed.messages.first?.topic == "raw/1")
        #expect(observed.messages.first?.payload == [42])
        await broker.stop()
    }
}
