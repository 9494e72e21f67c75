import ChimeProtocol
import Synchronization

/// One transport and what travels on it: the connection of a ``ChimeNotificationCenter`` of its
/// own, or the one a ``ChimeBackend`` shares among all its devices' centers.
///
/// It connects once (again after a failure), subscribes to its reply space and to the deliveries
/// asked for, matches each reply to its command by Correlation Data, hands each delivery to the
/// streams that want its device, and keeps at most ``Configuration/window`` commands waiting for
/// their reply: one more waits for a place, in order (back-pressure, never a growing queue).
final class ChimeConnection: Sendable {
    /// Where replies come: one topic (a device's own center), or one per device below the same
    /// name (a backend: `P/{deviceId}/replies/backend-<random>`, read through `P/+/replies/...`).
    /// Deliveries come in a space per device too, `P/{deviceId}/notifications`.
    enum TopicSpace: Sendable, Hashable {
        case topic(String)
        case perDevice(prefix: String, suffix: String)

        /// The filter subscribed to.
        var filter: String {
            switch self {
            case .topic(let topic): topic
            case .perDevice(let prefix, let suffix): prefix + "+" + suffix
            }
        }

        /// The Response Topic of a command for `deviceId`.
        func topic(for deviceId: String) -> String {
            switch self {
            case .topic(let topic): topic
            case .perDevice(let prefix, let suffix): prefix + deviceId + suffix
            }
        }

        func contains(_ topic: String) -> Bool {
            switch self {
            case .topic(let own): topic == own
            case .perDevice: device(of: topic) != nil
            }
        }

        /// The device `topic` is of, when it is one of this space's per-device topics.
        func device(of topic: String) -> String? {
            guard case .perDevice(let prefix, let suffix) = self, topic.hasPrefix(prefix), topic.hasSuffix(suffix),
                topic.utf8.count > prefix.utf8.count + suffix.utf8.count
            else { return nil }
            let device = Substring(topic.utf8.dropFirst(prefix.utf8.count).dropLast(suffix.utf8.count))
            return device.contains("/") ? nil : String(device)
        }
    }

    private enum Arrival: Sendable {
        case reply(ChimeTransportMessage)
        /// The broker refused the command (its PUBACK's reason code), with the transport's words.
        case refused(String)
        case timedOut
        case closed
    }

    /// A command waiting for its reply, from before its first publish until its call returns.
    private struct Waiter {
        /// The attempt being waited for (1 for the first publish).
        var attempt = 1
        /// Set while the call waits; what ends the wait resumes it and clears it.
        var continuation: CheckedContinuation<Arrival, Never>?
        /// What came while the call was not waiting (a reply before `publish` returned, or the
        /// attempt's deadline before the wait began).
        var early: Arrival?
    }

    /// When an attempt stops waiting for its reply.
    private struct Deadline {
        var at: ContinuousClock.Instant
        var correlation: [UInt8]
        var attempt: Int
    }

    private struct Subscriber {
        /// nil: every device's deliveries.
        var devices: Set<String>?
        var continuation: AsyncStream<ChimeDelivery>.Continuation
    }

    private struct State {
        var connecting: Task<Void, any Error>?
        var router: Task<Void, Never>?
        /// The commands waiting for their reply, by Correlation Data.
        var waiters: [[UInt8]: Waiter] = [:]
        /// Every attempt's deadline, oldest first: each is now + the one timeout, taken under
        /// the lock, so they come in order and the expired ones are always at the front. Those
        /// before `deadlinesStart` are done.
        var deadlines: [Deadline] = []
        var deadlinesStart = 0
        var sweeper: Task<Void, Never>?
        var subscribers: [UInt64: Subscriber] = [:]
        var nextSubscriber: UInt64 = 0
        /// Delivery filters subscribed to (or being), beyond those of ``initialFilters``.
        var deliveryFilters: Set<String> = []
        /// The latest deliveries handed on: the broker sends a delivery once per subscription it
        /// matches (`P/+/notifications` and `P/d/notifications` both), and a stream gets it once.
        var recent = RecentDeliveries()
        var closed = false
    }

    let transport: any ChimeTransport
    let configuration: ChimeNotificationCenter.Configuration
    let replies: TopicSpace
    /// Subscribed at every connect: the reply space, and a device center's own deliveries.
    private let initialFilters: [String]
    private let state = Mutex(State())
    private let window: RequestWindow
    /// Deliveries arrive on `P/{deviceId}/notifications`.
    private let deliveries: TopicSpace

    init(
        transport: any ChimeTransport,
        configuration: ChimeNotificationCenter.Configuration,
        replies: TopicSpace,
        deliveriesOf deviceId: String?
    ) {
        self.transport = transport
        self.configuration = configuration
        self.replies = replies
        self.window = RequestWindow(size: configuration.window)
        let deliveries = TopicSpace.perDevice(prefix: configuration.topicPrefix + "/", suffix: "/notifications")
        self.deliveries = deliveries
        self.initialFilters = [replies.filter] + (deviceId.map { [deliveries.topic(for: $0)] } ?? [])
    }

    deinit {
        let (tasks, subscribers) = state.withLock { ([$0.router, $0.sweeper], Array($0.subscribers.values)) }
        for task in tasks { task?.cancel() }
        for subscriber in subscribers { subscriber.continuation.finish() }
    }

    /// `P/{deviceId}/notifications`, or `P/+/notifications` for nil.
    func notifications(of deviceId: String?) -> String {
        deviceId.map(deliveries.topic(for:)) ?? deliveries.filter
    }

    /// How many commands are waiting for their reply now.
    var inFlight: Int { window.taken }

    // MARK: - Connection

    func connect() async throws(ChimeClientError) {
        let task = state.withLock { state -> Task<Void, any Error>? in
            if state.closed { return nil }
            if let connecting = state.connecting { return connecting }
            if state.router == nil {
                let incoming = transport.incoming
                state.router = Task { [weak self] in
                    for await message in incoming {
                        guard let self else { return }
                        self.route(message)
                    }
                }
            }
            let connecting = Task { try await self.establish() }
            state.connecting = connecting
            return connecting
        }
        guard let task else { throw Self.ended }
        do {
            try await task.value
        } catch {
            state.withLock { state in
                if state.connecting == task { state.connecting = nil }
            }
            throw error as? ChimeClientError ?? ChimeClientError(.transport, "\(error)")
        }
    }

    private func establish() async throws(ChimeClientError) {
        do {
            try await transport.connect(timeout: configuration.timeout)
        } catch {
            throw ChimeClientError(.transport, "cannot connect to the broker: \(error)")
        }
        for filter in initialFilters { try await subscribe(filter) }
    }

    private func subscribe(_ filter: String) async throws(ChimeClientError) {
        do {
            try await transport.subscribe(filter, timeout: configuration.timeout)
        } catch {
            throw ChimeClientError(.transport, "cannot subscribe to \(filter): \(error)")
        }
    }

    /// Connects, then subscribes to the deliveries of `deviceId` (`nil`: of every device) unless
    /// an earlier call did.
    func subscribeDeliveries(of deviceId: String?) async throws(ChimeClientError) {
        try await connect()
        let filter = notifications(of: deviceId)
        guard !initialFilters.contains(filter) else { return }
        let new = state.withLock { $0.deliveryFilters.insert(filter).inserted }
        guard new else { return }
        do {
            try await subscribe(filter)
        } catch {
            state.withLock { _ = $0.deliveryFilters.remove(filter) }
            throw error
        }
    }

    /// Ends the connection: disconnects the transport, finishes every delivery stream and fails
    /// the calls in progress (and those waiting for a place) with `.cancelled`.
    func disconnect() async {
        let (waiters, subscribers, tasks) = state.withLock { state in
            state.closed = true
            defer {
                state.waiters.removeAll()
                state.subscribers.removeAll()
                state.deadlines.removeAll()
                state.router = nil
                state.sweeper = nil
            }
            return (
                state.waiters.values.compactMap(\.continuation), Array(state.subscribers.values),
                [state.router, state.sweeper]
            )
        }
        window.close()
        for waiter in waiters { waiter.resume(returning: .closed) }
        for subscriber in subscribers { subscriber.continuation.finish() }
        await transport.disconnect()
        for task in tasks { task?.cancel() }
    }

    /// The deliveries of `devices` (nil: of every device this connection receives) that arrive
    /// from now on; the stream ends with ``disconnect()``.
    func deliveries(of devices: Set<String>?) -> AsyncStream<ChimeDelivery> {
        let (stream, continuation) = AsyncStream.makeStream(of: ChimeDelivery.self)
        let id = state.withLock { state -> UInt64? in
            guard !state.closed else { return nil }
            state.nextSubscriber += 1
            state.subscribers[state.nextSubscriber] = Subscriber(devices: devices, continuation: continuation)
            return state.nextSubscriber
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    private func route(_ message: ChimeTransportMessage) {
        if replies.contains(message.topic) {
            guard let correlation = message.correlationData else { return }
            let waiter = state.withLock { state in
                Self.arrive(.reply(message), at: correlation, in: &state)
            }
            waiter?.resume(returning: .reply(message))
        } else if let device = deliveries.device(of: message.topic) {
            // A payload that is not a delivery is not one of chimed's: dropped.
            guard let delivery = try? ChimeDelivery(payload: message.payload) else { return }
            let subscribers = state.withLock { state in
                guard state.recent.insert(device: device, fireId: delivery.fireId) else { return [Subscriber]() }
                return state.subscribers.values.filter { $0.devices?.contains(device) ?? true }
            }
            for subscriber in subscribers { subscriber.continuation.yield(delivery) }
        }
    }

    // MARK: - Commands and replies

    /// Sends a command to `P/{deviceId}/cmd/{op}` and waits for its reply, sending the same bytes
    /// again after each timeout; first waits for a place in the window.
    /// - Returns: the reply's `result`; nil when chimed recognised the command as a duplicate.
    /// - Throws: the error reply as ``ChimeClientError``; `.timeout`, `.transport`, `.cancelled`,
    ///   `.invalidReply`.
    func send(_ deviceId: String, _ op: String, _ command: JSONObject) async throws(ChimeClientError) -> JSONObject? {
        try await connect()
        try await window.take()
        defer { window.give() }
        var payload = command
        let requestId = Self.randomToken()
        payload["requestId"] = .string(requestId)
        let bytes = JSON.object(payload).bytes
        let correlation = Array(requestId.utf8)
        let topic = "\(configuration.topicPrefix)/\(deviceId)/cmd/\(op)"
        let registered = state.withLock { state in
            guard !state.closed else { return false }
            state.waiters[correlation] = Waiter()
            return true
        }
        guard registered else { throw Self.ended }
        defer { state.withLock { _ = $0.waiters.removeValue(forKey: correlation) } }
        let timeout = configuration.timeout
        for attempt in 1...configuration.attempts {
            do {
                try await transport.publishCommand(
                    topic: topic,
                    payload: bytes,
                    responseTopic: replies.topic(for: deviceId),
                    correlationData: correlation,
                    timeout: timeout
                ) { [weak self] message in
                    let waiter = self?.state.withLock { Self.arrive(.refused(message), at: correlation, in: &$0) }
                    waiter?.resume(returning: .refused(message))
                }
            } catch {
                throw ChimeClientError(.transport, "cannot publish \(op) to \(topic): \(error)")
            }
            switch await arrival(correlation, attempt: attempt) {
            case .reply(let message): return try Self.result(of: message, op: op)
            case .refused(let message): throw ChimeClientError(.transport, message)
            case .timedOut: continue
            case .closed: throw ChimeClientError(.cancelled, "cancelled while waiting for the reply to \(op)")
            }
        }
        let attempts = configuration.attempts
        throw ChimeClientError(
            .timeout,
            "no reply to \(op) on \(topic) within \(timeout)\(attempts > 1 ? ", \(attempts) attempts" : ""): "
                + "is chimed running and serving device \(deviceId)?"
        )
    }

    /// Waits until the reply to `correlation` comes (to this attempt or an earlier one), the
    /// attempt's deadline passes, or the call's task is cancelled or the connection ends.
    private func arrival(_ correlation: [UInt8], attempt: Int) async -> Arrival {
        let deadline = ContinuousClock.now + configuration.timeout
        state.withLock { state in
            state.waiters[correlation]?.attempt = attempt
            state.deadlines.append(Deadline(at: deadline, correlation: correlation, attempt: attempt))
            guard state.sweeper == nil, !state.closed else { return }
            state.sweeper = Task { [weak self] in
                while let next = self?.sweep() {
                    do { try await Task.sleep(until: next, clock: .continuous) } catch { return }
                }
            }
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Arrival, Never>) in
                let now = state.withLock { state -> Arrival? in
                    guard !state.closed, !Task.isCancelled, var waiter = state.waiters[correlation] else {
                        return .closed
                    }
                    if let early = waiter.early {
                        waiter.early = nil
                        state.waiters[correlation] = waiter
                        return early
                    }
                    waiter.continuation = continuation
                    state.waiters[correlation] = waiter
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { Self.arrive(.closed, at: correlation, in: &$0) }
            waiter?.resume(returning: .closed)
        }
    }

    /// Hands `arrival` to the call waiting on `correlation`: returns its continuation to resume
    /// (outside the lock), or keeps the arrival for when it waits. A reply or a cancellation
    /// that finds an earlier one kept replaces a timeout, never the other way round.
    private static func arrive(
        _ arrival: Arrival,
        at correlation: [UInt8],
        in state: inout State
    )
        -> CheckedContinuation<Arrival, Never>?
    {
        guard var waiter = state.waiters[correlation] else { return nil }
        if let continuation = waiter.continuation {
            waiter.continuation = nil
            state.waiters[correlation] = waiter
            return continuation
        }
        if case .timedOut = arrival, waiter.early != nil { return nil }
        waiter.early = arrival
        state.waiters[correlation] = waiter
        return nil
    }

    /// Ends the waits whose deadline passed, oldest first, and returns when to look again: the
    /// oldest deadline left, or one timeout from now (any deadline set meanwhile is later), nil
    /// once the connection ended. One task does this for all the commands in flight.
    private func sweep() -> ContinuousClock.Instant? {
        let now = ContinuousClock.now
        let (expired, next) = state.withLock {
            state -> ([CheckedContinuation<Arrival, Never>], ContinuousClock.Instant?) in
            if state.closed { return ([], nil) }
            var expired: [CheckedContinuation<Arrival, Never>] = []
            while state.deadlinesStart < state.deadlines.count, state.deadlines[state.deadlinesStart].at <= now {
                let due = state.deadlines[state.deadlinesStart]
                state.deadlinesStart += 1
                // Only the attempt still waited for times out: an answered one left its waiter.
                guard state.waiters[due.correlation]?.attempt == due.attempt else { continue }
                if let continuation = Self.arrive(.timedOut, at: due.correlation, in: &state) {
                    expired.append(continuation)
                }
            }
            if state.deadlinesStart > 1024, state.deadlinesStart * 2 > state.deadlines.count {
                state.deadlines.removeFirst(state.deadlinesStart)
                state.deadlinesStart = 0
            }
            let oldest = state.deadlinesStart < state.deadlines.count ? state.deadlines[state.deadlinesStart].at : nil
            return (expired, oldest ?? now + configuration.timeout)
        }
        for continuation in expired { continuation.resume(returning: .timedOut) }
        return next
    }

    /// A reply's `result` (nil for a duplicate), or its error.
    private static func result(of message: ChimeTransportMessage, op: String) throws(ChimeClientError) -> JSONObject? {
        guard case .object(let reply)? = try? JSON(parsing: message.payload) else {
            throw ChimeClientError(.invalidReply, "the reply to \(op) is not a JSON object")
        }
        switch reply["ok"] {
        case .bool(true)?:
            guard case .object(let result)? = reply["result"] else {
                throw ChimeClientError(.invalidReply, "an ok reply to \(op) without a result")
            }
            if result.count == 1, result["duplicate"] == true { return nil }
            return result
        case .bool(false)?:
            let error = WireReader(object: try WireReader(object: reply, what: op).object("error") ?? [:], what: op)
            guard let code = try error.string("code") else {
                throw ChimeClientError(.invalidReply, "an error reply to \(op) without a code")
            }
            throw ChimeClientError(
                ChimeClientError.Code(wireName: code),
                field: try error.string("field"),
                try error.string("message") ?? code
            )
        default:
            throw ChimeClientError(.invalidReply, "the reply to \(op) is neither ok nor an error")
        }
    }

    static let ended = ChimeClientError(.cancelled, "the connection was disconnected")

    /// 128 random bits, as 1 to 26 characters of base 36.
    static func randomToken() -> String {
        var random = SystemRandomNumberGenerator()
        return String(random.next() as UInt64, radix: 36) + String(random.next() as UInt64, radix: 36)
    }
}

/// The last 1024 deliveries' device and `fireId`, to drop the copies a broker sends for
/// overlapping subscriptions (they arrive together). At least once stays the promise: a delivery
/// chimed sends again later is handed on again once it has left this window.
struct RecentDeliveries {
    private var order: [String?] = Array(repeating: nil, count: 1024)
    private var next = 0
    private var members: Set<String> = []

    /// Whether the delivery is new here (and remembers it).
    mutating func insert(device: String, fireId: String) -> Bool {
        let key = device + "\u{0}" + fireId
        guard members.insert(key).inserted else { return false }
        if let old = order[next] { members.remove(old) }
        order[next] = key
        next = (next + 1) % order.count
        return true
    }
}

/// At most `size` commands waiting for their reply; the next caller waits for a place, first
/// come first served, and gives up with `.cancelled` when its task is cancelled or the window
/// closes.
final class RequestWindow: Sendable {
    private struct State {
        var free: Int
        var taken = 0
        /// Waiting callers by ticket; tickets are served in order, cancelled ones skipped.
        var waiting: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        var nextTicket: UInt64 = 0
        var nextServed: UInt64 = 0
        var closed = false
    }

    private let state: Mutex<State>

    init(size: Int) {
        state = Mutex(State(free: size))
    }

    var taken: Int { state.withLock { $0.taken } }
    /// Callers waiting for a place.
    var waiting: Int { state.withLock { $0.waiting.count } }

    func take() async throws(ChimeClientError) {
        // The ticket is drawn and the caller registered in one step under the lock, so that
        // `give` never passes over a ticket whose caller is not waiting yet; a cancellation reads
        // it under the same lock.
        let ticket = Mutex<UInt64?>(nil)
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let outcome = state.withLock { state -> Result<Void, any Error>? in
                        if state.closed { return .failure(ChimeConnection.ended) }
                        if Task.isCancelled { return .failure(CancellationError()) }
                        if state.free > 0, state.waiting.isEmpty {
                            state.free -= 1
                            state.taken += 1
                            return .success(())
                        }
                        state.nextTicket += 1
                        state.waiting[state.nextTicket] = continuation
                        ticket.withLock { $0 = state.nextTicket }
                        return nil
                    }
                    if let outcome { continuation.resume(with: outcome) }
                }
            } onCancel: {
                let waiter = state.withLock { state in
                    ticket.withLock { $0 }.flatMap { state.waiting.removeValue(forKey: $0) }
                }
                waiter?.resume(throwing: CancellationError())
            }
        } catch let error as ChimeClientError {
            throw error
        } catch {
            throw ChimeClientError(.cancelled, "cancelled while waiting for a place among the commands in flight")
        }
    }

    func give() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            while state.nextServed < state.nextTicket {
                state.nextServed += 1
                if let waiter = state.waiting.removeValue(forKey: state.nextServed) { return waiter }
            }
            state.free += 1
            state.taken -= 1
            return nil
        }
        next?.resume()
    }

    func close() {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiting.removeAll() }
            return Array(state.waiting.values)
        }
        for waiter in waiters { waiter.resume(throwing: ChimeConnection.ended) }
    }
}
