import Synchronization

/// async/await conveniences on one `MQTTClient`, for the CLI and for tests: connect and wait,
/// subscribe and wait for the SUBACK, publish and wait for the PUBACK, request/response with
/// MQTT 5 Response Topic and Correlation Data, and a stream of the messages that arrive.
///
/// Every wait has a timeout and ends with `MQTTError` code `.timeout` when it expires (or when the
/// waiting task is cancelled). A message that a waiter (`request`, `nextMessage`) takes is not also
/// yielded to `messages`.
public final class MQTTRequester: Sendable {
    /// The client underneath, for anything the conveniences do not cover.
    public let client: MQTTClient
    /// Messages on our subscriptions that no waiter took, in arrival order (buffered without limit).
    public let messages: AsyncStream<MQTTMessage>
    private let shared: Shared

    /// Creates the requester and its client; nothing connects before `connect(timeout:)`.
    /// - Throws: what `MQTTClient.init` throws for invalid options.
    public init(options: MQTTOptions) throws(MQTTError) {
        let (stream, continuation) = AsyncStream.makeStream(of: MQTTMessage.self, bufferingPolicy: .unbounded)
        let shared = Shared(continuation: continuation)
        self.messages = stream
        self.shared = shared
        self.client = try MQTTClient(options: options) { event in
            shared.handle(event)
        }
        shared.client.withLock { $0 = client }
    }

    deinit {
        stop()
    }

    /// Starts the client if needed and waits until the broker accepts the connection.
    /// - Throws: `.timeout` if not connected in time (the client keeps trying until `stop()`).
    public func connect(timeout: Duration) async throws(MQTTError) {
        let slot = OneShot<Void>()
        let token = shared.state.withLock { state in
            state.register(connection: slot)
        }
        defer { shared.state.withLock { $0.connectWaiters[token] = nil } }
        try client.start()
        if client.isConnected {
            slot.resolve(.success(()))
        }
        let what = "not connected to \(client.options.host):\(client.options.port)"
        try await slot.wait(timeout: timeout, what)
    }

    /// Subscribes and waits for the SUBACK. A granted filter is subscribed again after every reconnect.
    /// - Returns: the SUBACK's code for the filter: the granted QoS, or 0x80 and above when the broker
    ///   refused it (0x87: not authorized).
    /// - Throws: `.noConnection` when not connected, `.timeout` without a SUBACK in time.
    @discardableResult
    public func subscribe(_ filter: String, qos: Int = 1, timeout: Duration) async throws(MQTTError) -> Int32 {
        let slot = OneShot<Int32>()
        let messageId = try shared.track(slot, in: \.subscribeAcks) { () throws(MQTTError) -> Int32 in
            try client.subscribe(filter, qos: qos)
        }
        defer { shared.state.withLock { $0.subscribeAcks.waiters[messageId] = nil } }
        let code = try await slot.wait(timeout: timeout, "no SUBACK for '\(filter)'")
        if code < 0x80 { shared.state.withLock { $0.filters[filter] = qos } }
        return code
    }

    /// Publishes and, for QoS 1 and 2, waits for the broker's acknowledgement.
    /// - Returns: the PUBACK reason code: below 0x80 is success (0x10: no subscriber matched),
    ///   0x80 and above a refusal (0x87: not authorized); always 0 for QoS 0 and on MQTT 3.1.1.
    /// - Throws: `.noConnection` when not connected, `.timeout` without a PUBACK in time.
    @discardableResult
    public func publish(
        topic: String,
        payload: [UInt8],
        qos: Int = 1,
        retain: Bool = false,
        properties: MQTTPublishProperties = .init(),
        timeout: Duration
    ) async throws(MQTTError) -> Int32 {
        guard qos > 0 else {
            try client.publish(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties)
            return 0
        }
        let slot = OneShot<Int32>()
        let messageId = try shared.track(slot, in: \.publishAcks) { () throws(MQTTError) -> Int32 in
            try client.publish(topic: topic, payload: payload, qos: qos, retain: retain, properties: properties)
        }
        defer { shared.state.withLock { $0.publishAcks.waiters[messageId] = nil } }
        return try await slot.wait(timeout: timeout, "no PUBACK for message \(messageId) on '\(topic)'")
    }

    /// Publishes at QoS 1 or 2 without waiting: `acknowledged` gets the PUBACK's (or PUBCOMP's)
    /// reason code when it comes (below 0x80 success, 0x87 not authorized, ...), on the network
    /// thread: it must not block. Nothing calls it if the connection is lost first (libmosquitto
    /// sends the message again after a reconnect).
    /// - Throws: `.noConnection` when not connected.
    public func publish(
        topic: String,
        payload: [UInt8],
        qos: Int = 1,
        properties: MQTTPublishProperties = .init(),
        acknowledged: @escaping @Sendable (Int32) -> Void
    ) throws(MQTTError) {
        guard qos > 0 else {
            throw MQTTError(.invalidArgument, "QoS 0 has no acknowledgement", function: "MQTTRequester.publish")
        }
        _ = try shared.track(AckCallback(acknowledged), in: \.publishAcks) { () throws(MQTTError) -> Int32 in
            try client.publish(topic: topic, payload: payload, qos: qos, properties: properties)
        }
    }

    /// Publishes a request with an MQTT 5 Response Topic and fresh Correlation Data, and waits for the
    /// message on `responseTopic` that carries the same Correlation Data. Subscribes to `responseTopic`
    /// first unless already subscribed.
    /// - Throws: `.notSupported` on MQTT 3.1.1 (use `nextMessage`), `.noConnection`, `.timeout` when
    ///   nobody answers in time.
    public func request(
        topic: String,
        payload: [UInt8],
        responseTopic: String,
        properties: MQTTPublishProperties = .init(),
        timeout: Duration
    ) async throws(MQTTError) -> MQTTMessage {
        guard client.options.protocolVersion == .v5 else {
            throw MQTTError(.notSupported, "request/response needs MQTT 5", function: "MQTTRequester.request")
        }
        let deadline = ContinuousClock.now + timeout
        // A filter subscribed already may cover it (`P/+/replies/cli-1`): one subscription for the
        // replies of every device, not one more for each.
        if shared.state.withLock({ !$0.filters.keys.contains { MQTTTopicFilter.matches($0, responseTopic) } }) {
            try await subscribe(responseTopic, qos: 1, timeout: timeout)
        }
        let correlation = Self.newCorrelationData()
        let expected = correlation
        let slot = OneShot<MQTTMessage>()
        let token = shared.state.withLock { state in
            state.register(
                message: slot,
                matching: { $0.topic == responseTopic && $0.correlationData == expected }
            )
        }
        defer { shared.state.withLock { $0.removeMessageWaiter(token) } }
        var requestProperties = properties
        requestProperties.responseTopic = responseTopic
        requestProperties.correlationData = correlation
        try client.publish(topic: topic, payload: payload, qos: 1, properties: requestProperties)
        return try await slot.wait(timeout: deadline - ContinuousClock.now, "no reply on '\(responseTopic)'")
    }

    /// 16 random bytes: Correlation Data that no other request of anyone shares.
    public static func newCorrelationData() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in generator.next() }
    }

    /// Registers a wait for the next message that satisfies `predicate`, from now on: create it before
    /// publishing what triggers the message (an MQTT 3.1.1 command whose reply goes to a fixed topic),
    /// then await `value(timeout:)`. The first matching message is taken by it, not yielded to `messages`.
    public func expectMessage(
        where predicate: @escaping @Sendable (MQTTMessage) -> Bool
    ) -> MQTTMessageExpectation {
        let slot = OneShot<MQTTMessage>()
        let token = shared.state.withLock { $0.register(message: slot, matching: predicate) }
        return MQTTMessageExpectation(shared: shared, token: token, slot: slot)
    }

    /// Waits for the next message that satisfies `predicate` (arriving from now on) and takes it.
    /// - Throws: `.timeout` if none arrives in time.
    public func nextMessage(
        timeout: Duration,
        where predicate: @escaping @Sendable (MQTTMessage) -> Bool
    ) async throws(MQTTError) -> MQTTMessage {
        try await expectMessage(where: predicate).value(timeout: timeout)
    }

    /// Stops the client, fails the waits in progress with `.noConnection` and finishes `messages`.
    public func stop() {
        client.stop()
        shared.close()
    }
}

/// A registered wait for a message, from `MQTTRequester.expectMessage(where:)`. Await `value` once;
/// dropping it unawaited cancels the registration.
public final class MQTTMessageExpectation: Sendable {
    private let shared: Shared
    private let token: UInt64
    private let slot: OneShot<MQTTMessage>

    fileprivate init(shared: Shared, token: UInt64, slot: OneShot<MQTTMessage>) {
        self.shared = shared
        self.token = token
        self.slot = slot
    }

    deinit {
        shared.state.withLock { $0.removeMessageWaiter(token) }
    }

    /// The matching message.
    /// - Throws: `.timeout` if none arrived within `timeout` (counted from this call), `.noConnection`
    ///   if the requester was stopped.
    public func value(timeout: Duration) async throws(MQTTError) -> MQTTMessage {
        defer { shared.state.withLock { $0.removeMessageWaiter(token) } }
        return try await slot.wait(timeout: timeout, "no matching message")
    }
}

/// The requester's state, reached from the client's event handler on the network thread.
private final class Shared: Sendable {
    struct Acks {
        var waiters: [Int32: any AckReceiver] = [:]
        /// Acknowledgements that arrived before their waiter was registered (the network thread can
        /// beat the caller between `publish` returning the id and the registration). Kept only while
        /// such a registration is pending, so stale entries cannot match a reused message id later.
        var early: [Int32: Int32] = [:]
        var pending = 0

        mutating func acknowledge(_ messageId: Int32, _ code: Int32) -> (any AckReceiver)? {
            if let waiter = waiters.removeValue(forKey: messageId) { return waiter }
            if pending > 0 { early[messageId] = code }
            return nil
        }
    }

    struct MessageWaiter {
        let token: UInt64
        let predicate: @Sendable (MQTTMessage) -> Bool
        let slot: OneShot<MQTTMessage>
    }

    struct State {
        var nextToken: UInt64 = 0
        var connectWaiters: [UInt64: OneShot<Void>] = [:]
        var messageWaiters: [MessageWaiter] = []
        var publishAcks = Acks()
        var subscribeAcks = Acks()
        /// Filters to subscribe again after a reconnect, with their QoS.
        var filters: [String: Int] = [:]
        var closed = false

        mutating func register(connection slot: OneShot<Void>) -> UInt64 {
            nextToken += 1
            connectWaiters[nextToken] = slot
            return nextToken
        }

        mutating func register(
            message slot: OneShot<MQTTMessage>,
            matching predicate: @escaping @Sendable (MQTTMessage) -> Bool
        ) -> UInt64 {
            nextToken += 1
            messageWaiters.append(MessageWaiter(token: nextToken, predicate: predicate, slot: slot))
            return nextToken
        }

        mutating func removeMessageWaiter(_ token: UInt64) {
            messageWaiters.removeAll { $0.token == token }
        }
    }

    let state = Mutex(State())
    let client = Mutex<MQTTClient?>(nil)
    private let continuation: AsyncStream<MQTTMessage>.Continuation

    init(continuation: AsyncStream<MQTTMessage>.Continuation) {
        self.continuation = continuation
    }

    /// Runs `operation` (a publish or subscribe returning a message id) and registers `slot` for its
    /// acknowledgement, resolving it at once if the acknowledgement came first.
    func track(
        _ slot: any AckReceiver,
        in acks: WritableKeyPath<State, Acks>,
        _ operation: () throws(MQTTError) -> Int32
    ) throws(MQTTError) -> Int32 {
        state.withLock { $0[keyPath: acks].pending += 1 }
        let messageId: Int32
        do {
            messageId = try operation()
        } catch {
            state.withLock { Self.endPending(&$0[keyPath: acks]) }
            throw error
        }
        let early = state.withLock { state -> Int32? in
            defer { Self.endPending(&state[keyPath: acks]) }
            if let code = state[keyPath: acks].early.removeValue(forKey: messageId) { return code }
            state[keyPath: acks].waiters[messageId] = slot
            return nil
        }
        if let early {
            slot.resolve(.success(early))
        }
        return messageId
    }

    private static func endPending(_ acks: inout Acks) {
        acks.pending -= 1
        if acks.pending == 0 { acks.early.removeAll() }
    }

    /// The client's event handler: resolves waiters and yields the other messages. Never blocks.
    func handle(_ event: MQTTEvent) {
        switch event {
        case .connected:
            let (waiters, filters) = state.withLock { state in
                defer { state.connectWaiters.removeAll() }
                return (Array(state.connectWaiters.values), state.filters)
            }
            if !filters.isEmpty, let client = client.withLock({ $0 }) {
                for (filter, qos) in filters {
                    _ = try? client.subscribe(filter, qos: qos)
                }
            }
            for waiter in waiters {
                waiter.resolve(.success(()))
            }
        case .disconnected:
            break
        case .message(let message):
            let taker = state.withLock { state -> OneShot<MQTTMessage>? in
                guard let index = state.messageWaiters.firstIndex(where: { $0.predicate(message) }) else { return nil }
                return state.messageWaiters.remove(at: index).slot
            }
            if let taker {
                taker.resolve(.success(message))
            } else {
                continuation.yield(message)
            }
        case .published(let messageId, let reasonCode):
            let waiter = state.withLock { $0.publishAcks.acknowledge(messageId, reasonCode) }
            waiter?.resolve(.success(reasonCode))
        case .subscribed(let messageId, let grantedQoS):
            let code = grantedQoS.first { $0 >= 0x80 } ?? 0
            let waiter = state.withLock { $0.subscribeAcks.acknowledge(messageId, code) }
            waiter?.resolve(.success(code))
        }
    }

    /// Fails every wait in progress and finishes the stream.
    func close() {
        let slots = state.withLock { state -> [any Resolvable] in
            state.closed = true
            var slots: [any Resolvable] = Array(state.connectWaiters.values)
            slots += state.messageWaiters.map(\.slot) as [any Resolvable]
            slots += Array(state.publishAcks.waiters.values) as [any Resolvable]
            slots += Array(state.subscribeAcks.waiters.values) as [any Resolvable]
            state.connectWaiters.removeAll()
            state.messageWaiters.removeAll()
            state.publishAcks.waiters.removeAll()
            state.subscribeAcks.waiters.removeAll()
            return slots
        }
        let error = MQTTError(.noConnection, "the requester was stopped", function: "MQTTRequester.stop")
        for slot in slots {
            slot.fail(error)
        }
        client.withLock { $0 = nil }
        continuation.finish()
    }
}

private protocol Resolvable: Sendable {
    func fail(_ error: MQTTError)
}

/// What waits for a PUBACK or SUBACK: a caller (``OneShot``), or a callback.
private protocol AckReceiver: Resolvable {
    func resolve(_ result: Result<Int32, MQTTError>)
}

/// Calls `acknowledged` with the reason code when the acknowledgement comes; nothing when the
/// connection is lost first.
private final class AckCallback: AckReceiver {
    let acknowledged: @Sendable (Int32) -> Void

    init(_ acknowledged: @escaping @Sendable (Int32) -> Void) { self.acknowledged = acknowledged }

    func resolve(_ result: Result<Int32, MQTTError>) {
        if case .success(let code) = result { acknowledged(code) }
    }

    func fail(_ error: MQTTError) {}
}

extension OneShot: AckReceiver where Value == Int32 {}

/// A value that arrives once, from the event handler, a timeout or a cancellation, whichever is first.
/// Its continuation is resumed exactly once: the stage moves under the lock, and only the caller that
/// moves it to `.finished` resumes.
final class OneShot<Value: Sendable>: Sendable, Resolvable {
    private enum Stage {
        case pending
        case resolved(Result<Value, MQTTError>)
        case waiting(CheckedContinuation<Result<Value, MQTTError>, Never>)
        case finished
    }

    private let stage = Mutex(Stage.pending)

    /// Delivers the outcome; later calls are ignored.
    func resolve(_ result: Result<Value, MQTTError>) {
        let waiting = stage.withLock { stage -> CheckedContinuation<Result<Value, MQTTError>, Never>? in
            switch stage {
            case .pending:
                stage = .resolved(result)
                return nil
            case .waiting(let continuation):
                stage = .finished
                return continuation
            case .resolved, .finished:
                return nil
            }
        }
        waiting?.resume(returning: result)
    }

    func fail(_ error: MQTTError) {
        resolve(.failure(error))
    }

    /// Waits for the outcome, at most `timeout`.
    /// - Throws: the failure it was resolved with; `.timeout` ("`what` within ...") when time runs out
    ///   or the task is cancelled.
    func wait(timeout: Duration, _ what: @autoclosure () -> String) async throws(MQTTError) -> Value {
        let expired = MQTTError(.timeout, "\(what()) within \(timeout)", function: "MQTTRequester")
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            self?.resolve(.failure(expired))
        }
        defer { timer.cancel() }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = stage.withLock { stage -> Result<Value, MQTTError>? in
                    switch stage {
                    case .pending:
                        stage = .waiting(continuation)
                        return nil
                    case .resolved(let result):
                        stage = .finished
                        return result
                    case .waiting, .finished:
                        return .failure(MQTTError(.invalidArgument, "awaited twice", function: "MQTTRequester"))
                    }
                }
                if let ready {
                    continuation.resume(returning: ready)
                }
            }
        } onCancel: {
            resolve(.failure(MQTTError(.timeout, "cancelled while waiting: \(expired.message)")))
        }
        return try result.get()
    }
}
