import ChimeClient
import ChimeClientMQTT
import ChimeHarness
import ChimeMQTT
import Synchronization

/// A real mosquitto on a free loopback port, a real chimed on it (unless `worker` is false), and
/// the notification centers a test opens: one test's world.
final class ClientWorld: Sendable {
    let broker: TestBroker
    let data: TemporaryDirectory
    let chimed: Chimed?
    private let centers = Mutex<[ChimeNotificationCenter]>([])

    private init(broker: TestBroker, worker: Bool, extra: [String]) throws {
        self.broker = broker
        data = try TemporaryDirectory(prefix: "chime-client-data")
        chimed =
            worker
            ? try Chimed(
                broker: broker,
                dataDirectory: data.path,
                workerId: "client-\(UInt32.random(in: 0...UInt32.max))",
                extra: extra
            ) : nil
    }

    /// `extra`: more of chimed's flags.
    static func start(worker: Bool = true, extra: [String] = []) async throws -> ClientWorld {
        let broker = try await TestBroker.start()
        let world = try ClientWorld(broker: broker, worker: worker, extra: extra)
        try await world.chimed?.start()
        return world
    }

    /// MQTT options for a client of this broker, with a client id of its own.
    func options() -> MQTTOptions {
        var options = broker.clientOptions(clientId: "client-test-\(UInt32.random(in: 0...UInt32.max))")
        options.reconnectDelay = .milliseconds(100) ... .seconds(1)
        return options
    }

    /// A center for `device` over the package's MQTT transport; disconnected by ``stop()``.
    func center(
        _ device: String,
        configuration: ChimeNotificationCenter.Configuration = .init()
    ) throws -> ChimeNotificationCenter {
        try center(device, transport: try MQTTChimeTransport(options: options()), configuration: configuration)
    }

    func center(
        _ device: String,
        transport: any ChimeTransport,
        configuration: ChimeNotificationCenter.Configuration = .init()
    ) throws -> ChimeNotificationCenter {
        let center = try ChimeNotificationCenter(deviceId: device, transport: transport, configuration: configuration)
        centers.withLock { $0.append(center) }
        return center
    }

    func stop() async {
        for center in centers.withLock({ $0 }) {
            await center.disconnect()
        }
        if let chimed {
            chimed.process.kill()
            await chimed.process.waitForExit(timeout: .seconds(10))
        }
        await broker.stop()
    }
}

/// Runs `body` in a fresh world and stops the world afterwards, whatever happened.
func withWorld(
    worker: Bool = true,
    extra: [String] = [],
    _ body: (ClientWorld) async throws -> Void
) async throws {
    let world = try await ClientWorld.start(worker: worker, extra: extra)
    do {
        try await body(world)
    } catch {
        await world.stop()
        throw error
    }
    await world.stop()
}

/// A transport that loses the first reply on `replyTopicPrefix`: a reply lost with a connection.
final class ReplyLosingTransport: ChimeTransport {
    let inner: MQTTChimeTransport
    let incoming: AsyncStream<ChimeTransportMessage>
    private let counter: Counter
    private let forwarding: Task<Void, Never>

    private final class Counter: Sendable {
        let replies = Mutex(0)
    }

    init(_ inner: MQTTChimeTransport, losingFirstReplyOn replyTopicPrefix: String) {
        self.inner = inner
        let (stream, continuation) = AsyncStream.makeStream(of: ChimeTransportMessage.self)
        incoming = stream
        let upstream = inner.incoming
        let counter = Counter()
        self.counter = counter
        forwarding = Task {
            for await message in upstream {
                let drop =
                    message.topic.hasPrefix(replyTopicPrefix)
                    && counter.replies.withLock { count in
                        count += 1
                        return count == 1
                    }
                if !drop { continuation.yield(message) }
            }
            continuation.finish()
        }
    }

    deinit { forwarding.cancel() }

    /// How many replies arrived, the lost one included.
    var replies: Int { counter.replies.withLock { $0 } }

    func connect(timeout: Duration) async throws { try await inner.connect(timeout: timeout) }
    func subscribe(_ filter: String, timeout: Duration) async throws {
        try await inner.subscribe(filter, timeout: timeout)
    }
    func publish(
        topic: String,
        payload: [UInt8],
        qos: Int,
        responseTopic: String?,
        correlationData: [UInt8]?,
        timeout: Duration
    ) async throws {
        try await inner.publish(
            topic: topic,
            payload: payload,
            qos: qos,
            responseTopic: responseTopic,
            correlationData: correlationData,
            timeout: timeout
        )
    }
    func disconnect() async { await inner.disconnect() }
}
