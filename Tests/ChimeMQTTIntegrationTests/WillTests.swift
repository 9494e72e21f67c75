import ChimeTestSupport
import Glibc
import Testing

@testable import ChimeMQTT

@Suite("Will messages")
struct WillTests {
    static func will(_ name: String) -> MQTTWill {
        MQTTWill(
            topic: "will/\(name)",
            payload: Array(text: #"{"state":"offline"}"#),
            qos: 1,
            retain: true,
            properties: .init(contentType: "application/json", userProperties: [.init("worker", name)])
        )
    }

    @Test("the broker publishes our retained will when the connection drops without a DISCONNECT")
    func willOnAbnormalDisconnect() async throws {
        let broker = try await TestBroker.start()
        let observed = MQTTEventRecorder()
        let observer = try await connectedClient(broker.clientOptions(clientId: "will-observer"), observed)
        defer { observer.stop() }
        try await subscribe(observer, observed, "will/#")

        var options = broker.clientOptions(clientId: "mortal")
        options.will = Self.will("mortal")
        options.reconnectDelay = .milliseconds(50) ... .milliseconds(400)
        let recorder = MQTTEventRecorder()
        let client = try await connectedClient(options, recorder)
        defer { client.stop() }
        client.simulateConnectionLoss()

        #expect(await observed.waitUntil { $0.messages.count == 1 })
        let will = try #require(observed.messages.first)
        #expect(will.topic == "will/mortal")
        #expect(will.payload == Array(text: #"{"state":"offline"}"#))
        #expect(will.qos == 1)
        #expect(will.contentType == "application/json")
        #expect(will.userProperty("worker") == "mortal")

        // Retained: a client that subscribes later gets it too.
        let late = MQTTEventRecorder()
        let latecomer = try await connectedClient(broker.clientOptions(clientId: "will-latecomer"), late)
        defer { latecomer.stop() }
        try await subscribe(latecomer, late, "will/mortal")
        #expect(await late.waitUntil { $0.messages.count == 1 })
        #expect(late.messages.first?.retain == true)

        // And the client reconnects by itself.
        #expect(await recorder.waitUntil { $0.connectedCount == 2 })
        await broker.stop()
    }

    @Test("a process killed with SIGKILL leaves its will (mosquitto_sub in a ChildProcess)")
    func willOfKilledProcess() async throws {
        let broker = try await TestBroker.start()
        let observed = MQTTEventRecorder()
        let observer = try await connectedClient(broker.clientOptions(clientId: "kill-observer"), observed)
        defer { observer.stop() }
        try await subscribe(observer, observed, "will/#")

        let child = try ChildProcess(
            "mosquitto_sub",
            arguments: [
                "-h", broker.host, "-p", String(broker.port), "-V", "5", "-i", "doomed", "-d", "-t", "nothing",
                "--will-topic", "will/doomed", "--will-payload", "gone", "--will-qos", "1",
            ]
        )
        try child.start()
        // Its own output is block-buffered into our socket; the broker's log tells when it is in.
        let connected = await eventually { broker.log.contains("as doomed (p5") }
        #expect(connected, "broker log: \(broker.log)")
        child.kill()
        #expect(await child.waitForExit(timeout: .seconds(10)) == .signalled(SIGKILL))

        #expect(await observed.waitUntil { $0.messages.count == 1 })
        #expect(observed.messages.first?.topic == "will/doomed")
        #expect(observed.messages.first?.payload == Array(text: "gone"))
        await broker.stop()
    }

    @Test("stop() disconnects cleanly: no will, live or retained")
    func noWillOnStop() async throws {
        let broker = try await TestBroker.start()
        let observed = MQTTEventRecorder()
        let observer = try await connectedClient(broker.clientOptions(clientId: "polite-observer"), observed)
        defer { observer.stop() }
        try await subscribe(observer, observed, "will/#")

        var options = broker.clientOptions(clientId: "polite")
        options.will = Self.will("polite")
        let recorder = MQTTEventRecorder()
        let client = try await connectedClient(options, recorder)
        client.stop()
        #expect(recorder.disconnections == [0])

        // Once the broker has handled the DISCONNECT, a will would have been published already.
        let handled = await eventually { broker.log.contains("Client polite disconnected") }
        #expect(handled, "broker log: \(broker.log)")
        let late = MQTTEventRecorder()
        let latecomer = try await connectedClient(broker.clientOptions(clientId: "polite-latecomer"), late)
        defer { latecomer.stop() }
        try await subscribe(latecomer, late, "will/#")
        try latecomer.publish(topic: "will/marker", payload: [1])
        #expect(await late.waitUntil { !$0.messages.isEmpty })
        #expect(await observed.waitUntil { !$0.messages.isEmpty })
        #expect(late.messages.map(\.topic) == ["will/marker"], "no retained will before the marker")
        #expect(observed.messages.map(\.topic) == ["will/marker"], "no live will before the marker")
        await broker.stop()
    }
}
