import ChimeEngine
import ChimeProtocol

/// When a snapshot is taken, and whether memory and the store agree: the store's status after the
/// last commit says a snapshot is due (or SIGUSR1 asks for one); one runs at a time; a failed one
/// waits ``retry`` before the next. When a delivery record cannot be journaled, memory is ahead of
/// the store (*diverged*) until a snapshot that froze everything applied has been written, and
/// commands are refused meanwhile.
///
/// Pure: the coordinator (``WorkerStateMachine``) asks it whether to begin, and tells it how the
/// snapshot went.
struct SnapshotSchedule {
    enum Persistence: Equatable {
        case consistent(Snapshot)
        /// A delivery record could not be journaled: memory is ahead of the store until a snapshot
        /// catches up, and commands are refused meanwhile.
        case diverged(CatchUp)
    }

    enum Snapshot: Equatable {
        /// `requested` by SIGUSR1; none begins before `notBefore` (after a failure).
        case idle(requested: Bool, notBefore: Instant?)
        /// Writing since `since`; `requested` again meanwhile.
        case running(since: Instant, requested: Bool)
    }

    enum CatchUp: Equatable {
        /// The next snapshot begins at `notBefore` (at once when nil).
        case waiting(notBefore: Instant?)
        /// A snapshot froze the state at `since`; `coversMemory` until a record goes unjournaled
        /// after that, which that snapshot does not cover.
        case running(since: Instant, coversMemory: Bool)
    }

    /// How a written snapshot left persistence.
    enum Written: Equatable {
        /// Nothing to say beyond that it was written.
        case done
        /// Memory and the store agree again: commands are accepted.
        case caughtUp
        /// A record went unjournaled while it ran: another one follows.
        case stillBehind
    }

    private(set) var persistence = Persistence.consistent(.idle(requested: false, notBefore: nil))
    /// What the store said after the last commit.
    var store = StoreStatus()
    /// The slot whose engine copies its state for the snapshot begun, until it is handed to the
    /// store; nil when none is being copied.
    var capturing: Int?
    /// The least time between two attempts after one failed or did not catch up.
    let retry: Int64

    init(retry: Int64) { self.retry = retry }

    var isDiverged: Bool {
        if case .diverged = persistence { return true }
        return false
    }

    /// SIGUSR1: one now, whatever the store's size (after the one running, if any).
    mutating func request() {
        switch persistence {
        case .consistent(.idle(_, let notBefore)):
            persistence = .consistent(.idle(requested: true, notBefore: notBefore))
        case .consistent(.running(let since, _)): persistence = .consistent(.running(since: since, requested: true))
        case .diverged: break
        }
    }

    /// Memory goes ahead of the store: a snapshot running now froze the state before this.
    mutating func diverge() {
        switch persistence {
        case .consistent(.idle): persistence = .diverged(.waiting(notBefore: nil))
        case .consistent(.running(let since, _)), .diverged(.running(let since, _)):
            persistence = .diverged(.running(since: since, coversMemory: false))
        case .diverged(.waiting): break
        }
    }

    /// Whether a snapshot begins now, of ``StoreStatus/snapshotSlot``; if so it is running from now.
    mutating func begins(now: Instant) -> Bool {
        switch persistence {
        case .consistent(.idle(let requested, let notBefore)):
            guard store.snapshotDue || requested, notBefore.map({ now >= $0 }) ?? true else { return false }
            persistence = .consistent(.running(since: now, requested: false))
        case .diverged(.waiting(let notBefore)):
            guard notBefore.map({ now >= $0 }) ?? true else { return false }
            persistence = .diverged(.running(since: now, coversMemory: true))
        case .consistent(.running), .diverged(.running):
            return false
        }
        return true
    }

    /// The snapshot that ``begins(now:)`` allowed has nothing to take (its slot is not served here).
    mutating func nothingToTake() {
        persistence = .consistent(.idle(requested: false, notBefore: nil))
    }

    /// The snapshot could not start or failed: the next waits ``retry``.
    mutating func failed() {
        capturing = nil
        switch persistence {
        case .consistent(.running(let since, let requested)):
            persistence = .consistent(.idle(requested: requested, notBefore: since.adding(milliseconds: retry)))
        case .diverged(.running(let since, _)):
            persistence = .diverged(.waiting(notBefore: since.adding(milliseconds: retry)))
        case .consistent(.idle), .diverged(.waiting):
            break
        }
    }

    /// The snapshot was written.
    mutating func written() -> Written {
        switch persistence {
        case .diverged(.running(_, true)):
            persistence = .consistent(.idle(requested: false, notBefore: nil))
            return .caughtUp
        case .diverged(.running(let since, false)):
            persistence = .diverged(.waiting(notBefore: since.adding(milliseconds: retry)))
            return .stillBehind
        case .consistent(.running(_, let requested)):
            persistence = .consistent(.idle(requested: requested, notBefore: nil))
            return .done
        case .consistent(.idle), .diverged(.waiting):
            return .done
        }
    }
}
