import ChimeTestSupport
import Testing

@testable import ChimeMQTT

@Suite("MQTTRequester")
struct MQTTRequesterTests {
    /// A responder like chimed: replies to the Response Topic with the Correlation Data copied.
    static func responder(_ broker: TestBroker) async throws -> MQTTClient {
        let client = Late<MQTTClient>()
        let recorder = MQTTEventRecorder()
        let responder = try MQTTClient(options: broker.clientOptions(clientId: "responder")) { event in
            recorder.handler(event)
            guard case .message(let request) = event, let replyTo = request.responseTopic else { return }
            _ = try? client.get?.publish(
                topic: replyTo,
                payload: Array(text: "re: ") + request.payload,
                properties: .init(correlationData: request.correlationData, contentType: "text/plain")
            )
        }
        client.set(responder)
        try responder.start()
        #expect(await recorder.waitUntil { $0.connectedCount == 1 })
        try await subscribe(responder, recorder, "svc/+/cmd")
        return responder
    }

    @Test("request/response: the reply with our correlation data comes back")
    func requestResponse() async throws {
        let broker = try await TestBroker.start()
        let responder = try await Self.responder(broker)
        defer { responder.stop() }
        let requester = try MQTTRequester(options: broker.clientOptions(clientId: "requester"))
        defer { requester.stop() }
        try await requester.connect(timeout: .seconds(10))

        async let first = requester.request(
            topic: "svc/d1/cmd",
            payload: Array(text: "one"),
            responseTopic: "svc/replies/requester",
            timeout: .seconds(10)
        )
        async let second = requester.request(
            topic: "svc/d2/cmd",
            payload: Array(text: "two"),
            responseTopic: "svc/replies/requester",
            timeout: .seconds(10)
        )
        let (one, two) = try await (first, second)
        #expect(one.payload == Array(text: "re: one"))
        #expect(two.payload == Array(text: "re: two"))
        #expect(one.topic == "svc/replies/requester")
        #expect(one.contentType == "text/plain")
        #expect(one.correlationData?.count == 16)
        #expect(one.correlationData != two.correlationData)
        await broker.stop()
    }

    @Test("a request nobody answers ends with a timeout error")
    func requestTimesOut() async throws {
        let broker = try await TestBroker.start()
        let requester = try MQTTRequester(options: broker.clientOptions(clientId: "lonely"))
        defer { requester.stop() }
        try await requester.connect(timeout: .seconds(10))
        let error = await #expect(throws: MQTTError(.timeout)) {
            try await requester.request(
                topic: "nobody/cmd",
                payload: [1],
                responseTopic: "nobody/replies",
                timeout: .milliseconds(200)
            )
        }
        #expect(error?.message.contains("no reply on 'nobody/replies'") == true)
        await broker.stop()
    }

    @Test("publish waits for the PUBACK and returns its reason code (0x10: no subscriber matched)")
    func publishAwaitsPuback() async throws {
        let broker = try await TestBroker.start()
        let requester = try MQTTRequester(options: broker.clientOptions(clientId: "acked"))
        defer { requester.stop() }
        try await requester.connect(timeout: .seconds(10))
        #expect(try await requester.publish(topic: "void", payload: [1], timeout: .seconds(10)) == 0x10)
        try await requester.subscribe("void", timeout: .seconds(10))
        #expect(try await requester.publish(topic: "void", payload: [2], timeout: .seconds(10)) == 0)
        #expect(try await requester.publish(topic: "void", payload: [3], qos: 0, timeout: .seconds(10)) == 0)

        // Both come back on the stream (no waiter took them).
        var iterator = requester.messages.makeAsyncIterator()
        #expect(await iterator.next()?.payload == [2])
        #expect(await iterator.next()?.payload == [3])
        await broker.stop()
    }

    @Test("an expectation registered before publishing takes the first matching message; others go to the stream")
    func nextMessage() async throws {
        let broker = try await TestBroker.start()
        let requester = try MQTTRequester(options: broker.clientOptions(clientId: "picky", protocolVersion: .v311))
        defer { requester.stop() }
        try await requester.connect(timeout: .seconds(10))
        try await requester.subscribe("chime/+/replies", timeout: .seconds(10))
        let reply = requester.expectMessage {
            String(decoding: $0.payload, as: UTF8.self).contains(#""requestId":"r2""#)
        }
        let sender = try MQTTRequester(options: broker.clientOptions(clientId: "sender"))
        defer { sender.stop() }
        try await sender.connect(timeout: .seconds(10))
        try await sender.publish(
            topic: "chime/d1/replies",
            payload: Array(text: #"{"requestId":"r1"}"#),
            timeout: .seconds(10)
        )
        try await sender.publish(
            topic: "chime/d1/replies",
            payload: Array(text: #"{"requestId":"r2"}"#),
            timeout: .seconds(10)
        )
        #expect(try await reply.value(timeout: .seconds(10)).payload == Array(text: #"{"requestId":"r2"}"#))
        var iterator = requester.messages.makeAsyncIterator()
        #expect(await iterator.next()?.payload == Array(text: #"{"requestId":"r1"}"#))

        await #expect(throws: MQTTError(.notSupported), "no Response Topic on MQTT 3.1.1") {
            _ = try await requester.request(topic: "x", payload: [], responseTopic: "y", timeout: .seconds(1))
        }
        await broker.stop()
    }

    @Test("connect times out while nothing listens; stop() fails the waits and finishes the stream")
    func connectTimeoutAndStop() async throws {
        let broker = try await TestBroker.start()
        await broker.stop()  // its port stays bound, not listening, until a restart
        let requester = try MQTTRequester(options: broker.clientOptions(clientId: "patient"))
        await #expect(throws: MQTTError(.timeout)) {
            try await requester.connect(timeout: .milliseconds(200))
        }
        let waiting = requester.expectMessage { _ in true }
        requester.stop()
        await #expect(throws: MQTTError(.noConnection)) {
            try await waiting.value(timeout: .seconds(30))
        }
        var iterator = requester.messages.makeAsyncIterator()
        #expect(await iterator.next() == nil)
    }

    @Test("a cancelled wait ends at once")
    func cancellation() async throws {
        let broker = try await TestBroker.start()
        let requester = try MQTTRequester(options: broker.clientOptions(clientId: "cancelled"))
        defer { requester.stop() }
        try await requester.connect(timeout: .seconds(10))
        let task = Task {
            try await requester.nextMessage(timeout: .seconds(60)) { _ in true }
        }
        task.cancel()
        await #expect(throws: MQTTError(.timeout)) {
            try await task.value
        }
        await broker.stop()
    }
}
