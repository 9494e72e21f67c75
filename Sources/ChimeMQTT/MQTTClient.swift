import CMosquitto
import Dispatch
import Foundation
import Synchronization

/// An MQTT client on libmosquitto that keeps itself connected: the adapter the worker and the CLI use.
///
/// **Threading.** `start()` runs one network thread per client. It connects, runs libmosquitto's loop,
/// and reconnects by itself while the broker is unreachable, waiting `options.reconnectDelay` (doubling,
/// capped) between attempts. The event handler is called on that thread, one event at a time, in the
/// order libmosquitto reports them; it **must not block** (hand the event to a queue, a continuation
/// or a Mutex-protected buffer and return), because the network loop does nothing else meanwhile.
/// It may call `publish`, `subscribe` and `stop` (which then does not wait for the thread).
/// `publish`, `subscribe`, `stop` and `isConnected` may be called from any thread.
///
/// **Reconnects** use the same CONNECT, including the MQTT 5 Session Expiry Interval (libmosquitto 2.0
/// keeps the CONNECT properties of the first connect for every reconnect). Each successful one emits
/// `.connected` again: subscribe there, so that subscriptions survive a broker that lost its sessions.
///
/// **Delivery.** QoS 1 publishes are tracked by message id until their PUBACK, reported as
/// `.published(messageId:reasonCode:)`. Those still unacknowledged when the connection drops stay in
/// libmosquitto's queue and are sent again (with DUP set) after the next CONNACK, whether or not the
/// broker kept the session; their PUBACK is then reported under the original id. Publishing while
/// disconnected throws `.noConnection` and queues nothing: publish again after `.connected`. (A QoS 1
/// publish that races with the connection dropping may instead be queued by libmosquitto: it returns
/// an id and goes out after the reconnect, like the unacknowledged ones.) Messages are not re-sent
/// in their original order: those queued behind the in-flight window can overtake the re-sent ones.
///
/// **Lifetime.** A started client runs until `stop()`; its network thread keeps it alive. Call `stop()`
/// to end it, which also drops the event handler (so a handler that captures the client is no cycle).
public final class MQTTClient: Sendable {
    /// The options the client was created with.
    public let options: MQTTOptions
    private let core: Core

    /// Creates a client; it does not connect until `start()`.
    /// - Parameters:
    ///   - options: where and how to connect.
    ///   - onEvent: called on the network thread for every event; must not block.
    /// - Throws: `.invalidArgument` naming the option that is out of range.
    public init(options: MQTTOptions, onEvent: @escaping @Sendable (MQTTEvent) -> Void) throws(MQTTError) {
        try Self.validate(options)
        self.options = options
        self.core = try Core(options: options, onEvent: onEvent)
    }

    deinit {
        core.stop()
    }

    /// Starts the network thread, which connects and keeps reconnecting. Returns at once: the broker
    /// being down is no error (watch for `.connected`). Calling it again while running does nothing.
    /// - Throws: `.invalidArgument` after `stop()`: a client cannot be restarted, create a new one.
    public func start() throws(MQTTError) {
        try core.start()
    }

    /// Disconnects cleanly (a DISCONNECT, so the broker keeps the session and does not publish the
    /// will), ends the network thread and drops the event handler. Waits for the thread, at most a few
    /// seconds, unless called from the event handler. Idempotent.
    ///
    /// Emits `.disconnected(reasonCode: 0)` if a connection was up. Unacknowledged QoS 1 messages are
    /// dropped with the client. If the DISCONNECT cannot be written within 2 seconds the socket is
    /// closed anyway, and then the broker does publish the will.
    public func stop() {
        core.stop()
    }

    /// Whether the broker has accepted our CONNECT and the connection is up.
    public var isConnected: Bool {
        core.router.isConnected
    }

    /// Queues a message for the network thread and returns its message id (1...65535, reused later).
    ///
    /// For QoS 1 wait for `.published(messageId:reasonCode:)`. The properties are MQTT 5 only and are
    /// dropped on MQTT 3.1.1.
    /// - Throws: `.noConnection` while not connected (nothing is queued); `.invalidArgument`,
    ///   `.malformedUTF8`, `.payloadSize`, `.oversizePacket` for a message libmosquitto refuses.
    @discardableResult
    public func publish(
        topic: String,
        payload: [UInt8],
        qos: Int = 1,
        retain: Bool = false,
        properties: MQTTPublishProperties = .init()
    ) throws(MQTTError) -> Int32 {
        guard core.router.isConnected else {
            throw MQTTError(.noConnection, "not connected to the broker", function: "MQTTClient.publish")
        }
        return try core.mosquitto.publish(
            topic: topic,
            payload: payload,
            qos: qos,
            retain: retain,
            properties: properties
        )
    }

    /// Subscribes to a topic filter and returns the SUBSCRIBE's message id (see `.subscribed`).
    /// - Throws: `.noConnection` while not connected; `.invalidArgument` for an invalid filter or QoS.
    @discardableResult
    public func subscribe(_ filter: String, qos: Int = 1) throws(MQTTError) -> Int32 {
        guard core.router.isConnected else {
            throw MQTTError(.noConnection, "not connected to the broker", function: "MQTTClient.subscribe")
        }
        return try core.mosquitto.subscribe(filter, qos: qos)
    }

    /// Ends a subscription (the filter exactly as subscribed).
    /// - Throws: `.noConnection` while not connected; `.invalidArgument` for an invalid filter.
    public func unsubscribe(_ filter: String) throws(MQTTError) {
        guard core.router.isConnected else {
            throw MQTTError(.noConnection, "not connected to the broker", function: "MQTTClient.unsubscribe")
        }
        try core.mosquitto.unsubscribe(filter)
    }

    /// For tests: drops the TCP connection without a DISCONNECT, like a network failure or a crash.
    /// The broker publishes the will; the client reconnects by itself.
    func simulateConnectionLoss() {
        core.mosquitto.simulateConnectionLoss()
    }

    private static func validate(_ options: MQTTOptions) throws(MQTTError) {
        func invalid(_ why: String) -> MQTTError {
            MQTTError(.invalidArgument, why, function: "MQTTClient(options:)")
        }
        guard !options.host.isEmpty else { throw invalid("host is empty") }
        guard (1...65535).contains(options.port) else { throw invalid("port must be 1...65535, got \(options.port)") }
        guard (5...65535).contains(options.keepAlive) else {
            throw invalid("keepAlive must be 5...65535 seconds, got \(options.keepAlive)")
        }
        guard (1...65535).contains(options.maxInflight) else {
            throw invalid("maxInflight must be 1...65535, got \(options.maxInflight)")
        }
        guard (1...65535).contains(options.receiveMaximum) else {
            throw invalid("receiveMaximum must be 1...65535, got \(options.receiveMaximum)")
        }
        guard options.reconnectDelay.lowerBound > .zero else { throw invalid("reconnectDelay must start above 0") }
        if !options.cleanStart && (options.clientId ?? "").isEmpty {
            throw invalid("a persistent session (cleanStart false) needs a clientId")
        }
        if let will = options.will, !(0...2).contains(will.qos) {
            throw invalid("will QoS must be 0, 1 or 2, got \(will.qos)")
        }
    }
}

/// The state shared by the client, its network thread and libmosquitto's callbacks.
private final class Core: Sendable {
    private enum Phase {
        case idle, running, stopped
    }

    let options: MQTTOptions
    let mosquitto: Mosquitto
    let router: EventRouter
    private let phase = Mutex(Phase.idle)
    private let stopRequested = Atomic(false)
    /// The network thread's pthread id (0 before it runs), so `stop()` knows when it is called from it.
    private let networkThread = Atomic<UInt>(0)
    /// Signalled by `stop()` to cut a reconnect delay short.
    private let wake = DispatchSemaphore(value: 0)
    /// Signalled by the network thread when it has finished.
    private let finished = DispatchSemaphore(value: 0)

    init(options: MQTTOptions, onEvent: @escaping @Sendable (MQTTEvent) -> Void) throws(MQTTError) {
        self.options = options
        let router = EventRouter(handler: onEvent)
        self.router = router
        self.mosquitto = try Mosquitto(
            clientId: options.clientId,
            cleanStart: options.cleanStart,
            protocolVersion: options.protocolVersion,
            handler: { router.handle($0) }
        )
        try mosquitto.setOption(MOSQ_OPT_SEND_MAXIMUM, Int32(options.maxInflight))
        try mosquitto.setOption(MOSQ_OPT_RECEIVE_MAXIMUM, Int32(options.receiveMaximum))
        try mosquitto.setOption(MOSQ_OPT_TCP_NODELAY, 1)
        if options.useTLS {
            if let caFile = options.tlsCAFile {
                try mosquitto.setTrustedCertificates(caFile)
            } else {
                try mosquitto.setOption(MOSQ_OPT_TLS_USE_OS_CERTS, 1)
            }
        }
        if options.username != nil || options.password != nil {
            try mosquitto.setCredentials(username: options.username, password: options.password)
        }
        if let will = options.will {
            try mosquitto.setWill(will)
        }
    }

    func start() throws(MQTTError) {
        let shouldStart = try phase.withLock { (phase) throws(MQTTError) -> Bool in
            switch phase {
            case .idle:
                phase = .running
                return true
            case .running:
                return false
            case .stopped:
                throw MQTTError(.invalidArgument, "the client was stopped; create a new one", function: "start()")
            }
        }
        guard shouldStart else { return }
        let thread = Thread { [self] in
            run()
        }
        thread.name = "chime-mqtt"
        thread.start()
    }

    func stop() {
        let wasRunning = phase.withLock { phase in
            defer { phase = .stopped }
            return phase == .running
        }
        guard wasRunning else {
            router.finish()
            return
        }
        if stopRequested.exchange(true, ordering: .acquiringAndReleasing) {
            return  // another stop() is in progress
        }
        // Queues the DISCONNECT and wakes the loop's select; harmless (NO_CONN) while disconnected.
        try? mosquitto.disconnect()
        wake.signal()
        guard pthread_equal(pthread_self(), networkThread.load(ordering: .acquiring)) == 0 else {
            return  // called from the event handler: the thread ends when it returns, and finishes the router
        }
        // At most: a flush of 2 s plus a reconnect attempt in progress (a blocking TCP connect).
        _ = finished.wait(timeout: .now() + .seconds(5))
        router.finish()
    }

    /// The network thread: connect, loop, and on a lost connection wait and reconnect, until `stop()`.
    private func run() {
        networkThread.store(pthread_self(), ordering: .releasing)
        defer {
            router.finish()
            finished.signal()
        }
        let shortestDelay = options.reconnectDelay.lowerBound
        var delay = shortestDelay
        var socketUp: Bool
        do {
            try mosquitto.connect(
                host: options.host,
                port: options.port,
                keepAlive: options.keepAlive,
                sessionExpiryInterval: options.sessionExpiryInterval
            )
            socketUp = true
        } catch {
            socketUp = false
        }
        while !isStopping {
            if socketUp {
                socketUp = loopUntilDisconnectedOrStopped()
                if isStopping { break }
                if router.takeConnectionSucceeded() {
                    delay = shortestDelay
                }
            }
            if wake.wait(timeout: .now() + Self.dispatchInterval(delay)) == .success {
                continue  // woken by stop()
            }
            delay = min(delay * 2, options.reconnectDelay.upperBound)
            do {
                try mosquitto.reconnect()
                socketUp = true
            } catch {
                socketUp = false
            }
        }
        if socketUp {
            flushDisconnect()
        }
    }

    private var isStopping: Bool {
        stopRequested.load(ordering: .acquiring)
    }

    /// Runs libmosquitto's loop. Returns false when the connection is gone, true when stopped while up.
    private func loopUntilDisconnectedOrStopped() -> Bool {
        do {
            while !isStopping {
                try mosquitto.loop(timeoutMilliseconds: 1000)
            }
            return true
        } catch {
            return false
        }
    }

    /// Sends the DISCONNECT (again: `stop()` may have raced with a reconnect) and lets the loop write it.
    private func flushDisconnect() {
        do {
            try mosquitto.disconnect()
        } catch {
            return  // the socket is closed already
        }
        let deadline = ContinuousClock.now + .seconds(2)
        do {
            while ContinuousClock.now < deadline {
                try mosquitto.loop(timeoutMilliseconds: 100)
            }
        } catch {
            // The DISCONNECT was written and the socket closed: the loop reports no connection.
        }
    }

    private static func dispatchInterval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
    }
}

/// Turns libmosquitto's callbacks into `MQTTEvent`s and tracks whether we are connected.
final class EventRouter: Sendable {
    private let connected = Atomic(false)
    /// A CONNACK succeeded since the network thread last looked: the next reconnect delay starts over.
    private let connectionSucceeded = Atomic(false)
    /// The refusal code of the last CONNACK, reported with the disconnect that follows it.
    private let refusal = Atomic<Int32>(0)
    /// The handler, boxed: a bare closure stored in a `Mutex` is re-wrapped in reabstraction thunks by
    /// every `withLock` (read and written back through the generic `inout`), one more layer per event,
    /// until the stack overflows. A class reference is stored as it is.
    private let handler: Mutex<Handler?>

    private final class Handler: Sendable {
        let call: @Sendable (MQTTEvent) -> Void

        init(_ call: @escaping @Sendable (MQTTEvent) -> Void) {
            self.call = call
        }
    }

    init(handler: @escaping @Sendable (MQTTEvent) -> Void) {
        self.handler = Mutex(Handler(handler))
    }

    var isConnected: Bool {
        connected.load(ordering: .acquiring)
    }

    func takeConnectionSucceeded() -> Bool {
        connectionSucceeded.exchange(false, ordering: .acquiringAndReleasing)
    }

    /// Drops the handler: no events after this, and no reference cycle through it.
    func finish() {
        connected.store(false, ordering: .releasing)
        handler.withLock { $0 = nil }
    }

    /// Called by libmosquitto's callbacks on the network thread.
    func handle(_ event: Mosquitto.Event) {
        let mapped: MQTTEvent
        switch event {
        case .connect(let reasonCode, let sessionPresent):
            guard reasonCode == 0 else {
                refusal.store(reasonCode, ordering: .relaxed)
                return
            }
            connected.store(true, ordering: .releasing)
            connectionSucceeded.store(true, ordering: .releasing)
            mapped = .connected(sessionPresent: sessionPresent)
        case .disconnect(let reasonCode):
            let refused = refusal.exchange(0, ordering: .relaxed)
            let wasConnected = connected.exchange(false, ordering: .acquiringAndReleasing)
            guard wasConnected || refused != 0 else { return }
            mapped = .disconnected(reasonCode: refused != 0 ? refused : reasonCode)
        case .message(let message):
            mapped = .message(message)
        case .publish(let messageId, let reasonCode):
            mapped = .published(messageId: messageId, reasonCode: reasonCode)
        case .subscribe(let messageId, let grantedQoS):
            mapped = .subscribed(messageId: messageId, grantedQoS: grantedQoS)
        }
        if let handler = handler.withLock({ $0 }) {
            handler.call(mapped)
        }
    }
}
