import ChimeCore
import ChimeMQTT
import Dispatch
import Synchronization

/// What reaches the worker's loop from other threads.
public enum WorkerEvent: Sendable {
    case mqtt(MQTTEvent)
    /// The store's background snapshot was written, or failed.
    case snapshotWritten(StoreError?)
    case snapshotRequested
    /// SIGHUP: read the zone database again.
    case zoneCheckRequested
    /// A push attempt ended.
    case push(PushJobKey, PushAttemptResult)
    case stop
}

/// A queue of events for one consumer thread that sleeps until an event arrives or a deadline
/// passes. Producers (the MQTT network thread, signal handlers, the snapshot thread) never block
/// on the consumer: they append under a short lock and signal only when it sleeps.
public final class Inbox: Sendable {
    private struct State {
        var events: [WorkerEvent] = []
        var sleeping = false
    }

    private let state = Mutex(State())
    private let wakeup = DispatchSemaphore(value: 0)

    public init() {}

    public func push(_ event: WorkerEvent) {
        let wake = state.withLock { s -> Bool in
            s.events.append(event)
            defer { s.sleeping = false }
            return s.sleeping
        }
        if wake { wakeup.signal() }
    }

    /// Everything queued; waits up to `timeout` seconds when nothing is.
    public func take(timeout seconds: Double) -> [WorkerEvent] {
        let ready = state.withLock { s -> [WorkerEvent] in
            if s.events.isEmpty {
                s.sleeping = true
                return []
            }
            defer { s.events.removeAll(keepingCapacity: true) }
            return s.events
        }
        if !ready.isEmpty { return ready }
        if seconds > 0 {
            _ = wakeup.wait(timeout: .now() + .nanoseconds(Int(min(seconds, 3600) * 1e9)))
        }
        return state.withLock { s -> [WorkerEvent] in
            s.sleeping = false
            defer { s.events.removeAll(keepingCapacity: true) }
            return s.events
        }
    }
}
