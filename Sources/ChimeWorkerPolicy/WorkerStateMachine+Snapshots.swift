import ChimeEngine
import ChimeLog
import ChimeProtocol

/// Snapshots (``SnapshotSchedule`` decides when): begun by the store, copied from the engine a part
/// per turn, written off the loop.
extension WorkerStateMachine {
    mutating func maybeSnapshot(now: Instant, _ actions: inout [Action]) {
        guard snapshots.begins(now: now) else { return }
        let slot = snapshots.store.snapshotSlot
        guard engines[slot] != nil else { return snapshots.nothingToTake() }
        snapshots.capturing = slot
        actions.append(.startSnapshot(slot: slot))
    }

    /// The store began the snapshot: the engine's state as of now is what it covers. It is
    /// copied a part per turn (``continueSnapshot(_:)``), while the engine goes on.
    mutating func snapshotStarted(_ outcome: Result<UInt64, StoreError>, now: Instant, _ actions: inout [Action]) {
        switch outcome {
        case .success(let sequence):
            log(.info, "snapshot started", ["sequence": "\(sequence)"], into: &actions)
            if let slot = snapshots.capturing { engines[slot]?.beginSnapshot() }
            continueSnapshot(&actions)
        case .failure(let error):
            log(.error, "cannot start a snapshot", ["error": "\(error)"], into: &actions)
            snapshots.failed()
        }
    }

    /// Copies the next part of the snapshot being taken, and hands it to the store once complete.
    mutating func continueSnapshot(_ actions: inout [Action]) {
        guard let slot = snapshots.capturing else { return }
        guard let engine = engines[slot], engine.isTakingSnapshot else {
            // Its slot was dropped (slot mode), or loaded again as a new engine.
            snapshots.capturing = nil
            actions.append(.abandonSnapshot)
            return
        }
        guard let frozen = engine.continueSnapshot(budget: policy.snapshotStep) else { return }
        snapshots.capturing = nil
        actions.append(.writeSnapshot(frozen))
    }

    mutating func snapshotFinished(_ outcome: Result<UInt64, StoreError>, now: Instant, _ actions: inout [Action]) {
        switch outcome {
        case .failure(let error):
            log(.error, "snapshot failed", ["error": "\(error)"], into: &actions)
            snapshots.failed()
        case .success(let sequence):
            switch snapshots.written() {
            case .caughtUp:
                log(.notice, "journal caught up through a snapshot; accepting commands again", into: &actions)
            case .stillBehind:
                log(
                    .warning,
                    "a delivery record was not journaled while the snapshot ran; another snapshot follows",
                    into: &actions
                )
            case .done:
                break
            }
            log(.info, "snapshot written", ["sequence": "\(sequence)"], into: &actions)
        }
    }
}
