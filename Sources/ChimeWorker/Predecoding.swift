import ChimeCore
import ChimeSupport
import Dispatch
import Synchronization

/// The commands of one turn of the loop, decoded ahead on a second thread while the loop hands
/// the ones before them to the machine: decoding is pure, and a batch of commands costs as much
/// to decode as the machine spends on it. Both threads take the next command to decode from one
/// counter, so the loop never waits for one it could decode itself: when it needs a command no
/// thread has taken yet, it decodes that one; when the helper has taken it, it waits for it.
final class Predecoding: Sendable {
    private let work: [(deviceId: String, op: Operation, payload: [UInt8])]
    private let decoder: CommandDecoder
    /// The next command no thread has taken.
    private let next = Atomic(0)
    private let results: Mutex<[PredecodedCommand?]>
    /// Signalled once each command is decoded, by the thread that took it.
    private let decoded: [DispatchSemaphore]
    /// Which command each of the turn's events is, by the event's index.
    private let commandOfEvent: [Int: Int]

    private init(
        work: [(deviceId: String, op: Operation, payload: [UInt8])],
        commandOfEvent: [Int: Int],
        decoder: CommandDecoder
    ) {
        self.work = work
        self.commandOfEvent = commandOfEvent
        self.decoder = decoder
        results = Mutex([PredecodedCommand?](repeating: nil, count: work.count))
        decoded = work.map { _ in DispatchSemaphore(value: 0) }
    }

    /// Whether `events` hold two commands large enough to decode ahead: most turns hold none, and
    /// then the machine is not even asked (``start(_:machine:now:)`` takes a copy of it).
    static func mayHelp(_ events: [WorkerEvent]) -> Bool {
        var large = 0
        for case .mqtt(.message(let m)) in events where m.payload.count >= WorkerStateMachine.minimumPredecodedBytes {
            large += 1
            if large == 2 { return true }
        }
        return false
    }

    /// Starts decoding the commands among `events` that the machine says may be
    /// (``WorkerStateMachine/predecodable(_:now:)``); nil when there are none.
    static func start(_ events: [WorkerEvent], machine: WorkerStateMachine, now: Instant) -> Predecoding? {
        var messages: [InboundMessage] = []
        var eventIndex: [Int] = []
        for (i, event) in events.enumerated() {
            if case .mqtt(.message(let message)) = event {
                messages.append(InboundMessage(message))
                eventIndex.append(i)
            }
        }
        let picked = machine.predecodable(messages, now: now)
        guard !picked.isEmpty else { return nil }
        var commandOfEvent: [Int: Int] = [:]
        for (k, p) in picked.enumerated() { commandOfEvent[eventIndex[p.index]] = k }
        let job = Predecoding(
            work: picked.map { ($0.deviceId, $0.op, messages[$0.index].payload) },
            commandOfEvent: commandOfEvent,
            decoder: machine.commandDecoder
        )
        DispatchQueue.global(qos: .userInitiated).async { job.help() }
        return job
    }

    /// The helper thread: decodes commands in order until none is left.
    private func help() {
        while true {
            let k = next.add(1, ordering: .relaxed).oldValue
            guard k < work.count else { return }
            decode(k)
        }
    }

    private func decode(_ k: Int) {
        let started = ContinuousClock.now
        let (deviceId, op, payload) = work[k]
        let outcome = decoder.decode(deviceId: deviceId, op: op, payload: payload)
        let command = PredecodedCommand(
            deviceId: deviceId,
            op: op,
            outcome: outcome,
            milliseconds: seconds(ContinuousClock.now - started) * 1000
        )
        results.withLock { $0[k] = command }
        decoded[k].signal()
    }

    /// The decoded command of the turn's event `index`, if it is one of those decoded ahead.
    /// The loop asks in event order.
    func command(forEvent index: Int) -> PredecodedCommand? {
        guard let k = commandOfEvent[index] else { return nil }
        // Everything before k was asked for already, so the counter is at k or beyond: at k,
        // no thread has taken it yet and this one decodes it.
        if next.compareExchange(expected: k, desired: k + 1, ordering: .relaxed).exchanged {
            decode(k)
        }
        decoded[k].wait()
        return results.withLock { $0[k] }
    }
}
