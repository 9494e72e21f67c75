import ChimeTestSupport
import Testing

@testable import ChimeMQTT

@Suite("MQTTClient lifecycle and options")
struct LifecycleTests {
    @Test("invalid options are refused when the client is created, naming the option")
    func invalidOptions() {
        var options = MQTTOptions()
        options.cleanStart = false
        #expect(throws: MQTTError(.invalidArgument)) { try MQTTClient(options: options) { _ in } }
        let cases: [(inout MQTTOptions) -> Void] = [
            { $0.keepAlive = 2 },
            { $0.port = 0 },
            { $0.host = "" },
            { $0.maxInflight = 0 },
            { $0.receiveMaximum = 70000 },
            { $0.reconnectDelay = .zero ... .seconds(1) },
            { $0.will = MQTTWill(topic: "w", payload: [], qos: 3) },
        ]
        for change in cases {
            var options = MQTTOptions()
            change(&options)
            #expect(throws: MQTTError(.invalidArgument)) { try MQTTClient(options: options) { _ in } }
        }
    }

    @Test("stop before start, twice, and from the event handler; no restart after stop")
    func startStop() async throws {
        let idle = try MQTTClient(options: MQTTOptions()) { _ in }
        idle.stop()
        idle.stop()
        #expect(throws: MQTTError(.invalidArgument)) { try idle.start() }

        let broker = try await TestBroker.start()
        await broker.stop()
        let unlucky = try MQTTClient(options: broker.clientOptions(clientId: "unlucky")) { _ in }
        try unlucky.start()
        try unlucky.start()  // running (and retrying): nothing happens
        unlucky.stop()
        try await broker.restart()

        let client = Late<MQTTClient>()
        let recorder = MQTTEventRecorder(onConnected: { _ in client.get?.stop() })
        client.set(try MQTTClient(options: broker.clientOptions(clientId: "selfstop"), onEvent: recorder.handler))
        let selfStopping = try #require(client.get)
        try selfStopping.start()
        #expect(await recorder.waitUntil { $0.disconnections == [0] })
        #expect(!selfStopping.isConnected)
        selfStopping.stop()
        await broker.stop()
    }

    @Test("a refused CONNACK is reported with its reason code and the client keeps trying")
    func refused() async throws {
        let broker = try await TestBroker.start(.init(extraLines: ["allow_anonymous false"]))
        for (version, code) in [(MQTTOptions.ProtocolVersion.v5, Int32(0x87)), (.v311, 5)] {
            var options = broker.clientOptions(clientId: "stranger", protocolVersion: version)
            options.reconnectDelay = .milliseconds(20) ... .milliseconds(40)
            let recorder = MQTTEventRecorder()
            let client = try MQTTClient(options: options, onEvent: recorder.handler)
            try client.start()
            #expect(await recorder.waitUntil { $0.disconnections.count >= 2 })
            #expect(recorder.disconnections.allSatisfy { $0 == code }, "\(recorder.disconnections)")
            #expect(recorder.connectedCount == 0)
            #expect(!client.isConnected)
            client.stop()
        }
        await broker.stop()
    }
}
