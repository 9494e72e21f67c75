import ChimeCore
import ChimeMQTT
import ChimeTestSupport
import ChimeWorker
import Synchronization
import Testing

/// The worker's policy (``WorkerStateMachine``) run by the real ``WorkerLoop`` against a fake
/// store and transport and a manual clock: no broker, no disk, no sleeping. The integration
/// tests prove the same end to end.
@Suite struct WorkerPolicyTests {
    typealias World = WorkerTestLoop

    @Test func commandsThatArriveTogetherShareOneCommitAndAreAnsweredAfterIt() throws {
        let w = World()
        try w.online()
        w.timeline.clear()
        try w.step(
            w.command("d1", .schedule, #"{"id":"a","after":60}"#),
            w.command("d1", .schedule, #"{"id":"b","after":60}"#),
            w.command("d1", .list, #"{}"#)
        )
        let replies = w.topics.replies("d1")
        #expect(
            w.timeline.entries == [
                .append(.schedule), .append(.schedule), .commit,
                .publish(topic: replies), .publish(topic: replies), .publish(topic: replies),
            ]
        )
        #expect(w.replies().map { $0["op"] } == ["schedule", "schedule", "list"])
        #expect(w.replies().allSatisfy { $0["ok"] == true })
        // The list, answered in the same batch, already sees both.
        let listed = w.replies()[2]["result"]?.objectValue?["notifications"]
        #expect(listed.map { "\($0)" }?.contains("\"b\"") == true)
        #expect(w.store.committed == 2)
    }

    /// A batch of `count` notifications for `device`, ids `prefix0`...: about 150 bytes each.
    static func batch(_ prefix: String, count: Int, duplicate: Bool = false) -> String {
        let items = (0..<count).map { i in
            #"{"id":"\#(prefix)\#(duplicate && i == count - 1 ? 0 : i)","after":3600,"alertBody":"\#(String(repeating: "b", count: 100))"}"#
        }
        return #"{"notifications":[\#(items.joined(separator: ","))]}"#
    }

    /// Commands that arrive together are decoded on a second thread ahead of the loop: their
    /// replies and their effect are those of the same commands handled one turn each.
    @Test func commandsDecodedAheadAreAnsweredAsInTurn() throws {
        let together = World()
        let oneByOne = World()
        try together.online()
        try oneByOne.online()
        let events = [
            together.command("d1", .schedule, Self.batch("a", count: 200)),
            together.command("d2", .schedule, Self.batch("b", count: 200, duplicate: true)),
            together.command("d1", .schedule, #"{"id":"single","after":60}"#),
            together.command("d1", .schedule, Self.batch("c", count: 200)),
            together.command("d2", .schedule, Self.batch("e", count: 50) + " x"),
            together.command("d2", .list, #"{}"#),
        ]
        let messages = events.compactMap { event -> InboundMessage? in
            guard case .mqtt(.message(let m)) = event else { return nil }
            return InboundMessage(m)
        }
        // The four batches are decoded ahead (the two devices are far from the per-device cap);
        // the two small commands in turn.
        #expect(together.machine.predecodable(messages, now: together.clock.now()).map(\.index) == [0, 1, 3, 4])
        try together.step(events)
        for event in events { try oneByOne.step(event) }
        for device in ["d1", "d2"] {
            let replies = together.replies(device)
            #expect(replies.count == 3)
            #expect(replies == oneByOne.replies(device))
        }
        #expect(together.replies("d1").allSatisfy { $0["ok"] == true })
        #expect(together.replies("d2").map { $0["ok"] } == [false, false, true])
        #expect(together.engine.pendingCount == 401)
        #expect(oneByOne.engine.pendingCount == 401)
    }

    /// What is not decoded ahead: commands the machine would refuse before decoding (a device
    /// over its share, a topic that is not a command), more than one command's worth of bytes
    /// from one device, and turns with too little to decode to be worth a second thread.
    @Test func predecodingLeavesOutWhatTheMachineWouldNotDecode() throws {
        let w = World(deviceBudget: DeviceBudget(rate: 10, burst: 50))
        try w.online()
        func inbound(_ event: WorkerEvent) -> InboundMessage {
            guard case .mqtt(.message(let m)) = event else { preconditionFailure("a message") }
            return InboundMessage(m)
        }
        let big = Self.batch("a", count: 650)  // about 92 KB: two fit in 256 KiB, three do not
        #expect(big.utf8.count > 262_144 / 3 && big.utf8.count * 2 <= 262_144)
        // Per device, at most --max-command-bytes (256 KiB): the fourth big one of d1 waits its turn.
        let picked = w.machine.predecodable(
            [
                inbound(w.command("d1", .schedule, big)), inbound(w.command("d1", .schedule, big)),
                inbound(w.command("d2", .schedule, big)), inbound(w.command("d1", .schedule, big)),
                inbound(w.command("d1", .schedule, big)),
                InboundMessage(MQTTMessage(topic: "chime/d3/not-a-command", payload: Array(big.utf8), qos: 1)),
            ],
            now: w.clock.now()
        )
        #expect(picked.map(\.index) == [0, 1, 2])
        // Small commands are not worth a second thread, nor is a single batch.
        #expect(
            w.machine.predecodable(
                [inbound(w.command("d1", .list, "{}")), inbound(w.command("d2", .list, "{}"))],
                now: w.clock.now()
            ).isEmpty
        )
        #expect(
            w.machine.predecodable(
                [inbound(w.command("d1", .list, "{}")), inbound(w.command("d2", .schedule, big))],
                now: w.clock.now()
            ).isEmpty
        )
        // d1 uses up its share (each append takes 100 ms of the engine), then is left out.
        w.store.duringAppend = { w.clock.advance(milliseconds: 100) }
        try w.step(w.command("d1", .schedule, #"{"id":"a","after":60}"#))
        w.store.duringAppend = nil
        #expect(
            w.machine.predecodable(
                [
                    inbound(w.command("d1", .schedule, big)), inbound(w.command("d2", .schedule, big)),
                    inbound(w.command("d2", .schedule, big)),
                ],
                now: w.clock.now()
            ).map(\.deviceId) == ["d2", "d2"]
        )
    }

    @Test func eachTurnOfTheLoopIsTimedWhatHoldsItUpIncluded() throws {
        let w = World()
        try w.online()
        let before = w.machine.stats.loopStep
        try w.step(w.command("d1", .list, #"{}"#))
        let quick = w.machine.stats.loopStep
        #expect(quick.total == before.total + 1)
        // A commit that takes 30 ms makes its turn at least that long.
        w.store.duringCommit = { w.clock.advance(milliseconds: 30) }
        try w.step(w.command("d1", .schedule, #"{"id":"a","after":60}"#))
        let slow = w.machine.stats.loopStep
        #expect(slow.total == quick.total + 1)
        #expect(slow.maximum >= 30_000)
        #expect(quick.maximum < 30_000)
        #expect(
            slow.counts[Histogram.bounds.firstIndex(of: 50)!] == quick.counts[Histogram.bounds.firstIndex(of: 50)!] + 1
        )
    }

    @Test func aCommandTheStoreCannotTakeIsRefusedAndChangesNothing() throws {
        let w = World()
        try w.online()
        w.store.failAppends = true
        try w.step(w.command("d1", .schedule, #"{"id":"a","after":60}"#))
        #expect(w.replies().last?["ok"] == false)
        #expect(w.replies().last?["error"]?.objectValue?["code"] == "unavailable")
        #expect(w.engine.pendingCount == 0)
        // A positive control: once the store takes writes the same command is applied.
        w.store.failAppends = false
        try w.step(w.command("d1", .schedule, #"{"id":"a","after":60}"#))
        #expect(w.replies().last?["ok"] == true)
        #expect(w.engine.pendingCount == 1)
    }

    @Test func aFailedCommitStopsTheWorkerWithoutAnsweringTheCommand() throws {
        let w = World()
        try w.online()
        w.store.failCommit = true
        #expect(throws: WorkerError.self) { try w.step(w.command("d1", .schedule, #"{"id":"a","after":60}"#)) }
        #expect(w.replies().isEmpty)
        #expect(w.machine.isFinished)
    }

    @Test func aTransientCommitFailureRefusesCommandsUntilASnapshotCatchesUp() throws {
        let w = World()
        try w.online()
        w.store.failCommitTransiently = true
        // Its commit fails: whether it took effect is unknown, so no reply; memory has it.
        try w.step(w.command("d1", .schedule, #"{"id":"a","after":60}"#))
        #expect(w.replies().isEmpty)
        #expect(!w.machine.isFinished)
        #expect(w.logged("refusing commands until a snapshot catches it up"))
        #expect(w.store.snapshotRunning)
        // Refused while the store is behind; reads are answered.
        try w.step(w.command("d1", .schedule, #"{"id":"b","after":60}"#))
        #expect(w.replies().last?["error"]?.objectValue?["code"] == "unavailable")
        try w.step(w.command("d1", .list, #"{}"#))
        #expect(w.replies().last?["ok"] == true)
        // The snapshot catches the store up: commands are taken again, and the resent first
        // command is recognised.
        w.store.failCommitTransiently = false
        w.store.finishSnapshot()
        try w.stepInbox()
        try w.step(w.command("d1", .schedule, #"{"id":"a","after":60}"#))
        #expect(w.replies().last?["result"]?.objectValue?["duplicate"] == true)
        try w.step(w.command("d1", .schedule, #"{"id":"c","after":60}"#))
        #expect(w.replies().last?["ok"] == true)
        #expect(w.engine.pendingCount == 2)
    }

    @Test func aDeliveryIsRecordedOnlyWhenTheBrokerAcknowledgesIt() throws {
        let w = World()
        try w.online()
        try w.schedule("a", after: 10)
        // Not yet due: nothing is published.
        w.advance(seconds: 9)
        try w.step()
        #expect(w.deliveries().isEmpty)
        let delivery = try w.deliver(after: 1)
        #expect(!w.store.records.contains { $0.entry.kind == .delivered })
        w.timeline.clear()
        try w.step(.mqtt(.published(messageId: delivery.messageId, reasonCode: 0)))
        #expect(w.timeline.entries.prefix(2) == [.append(.delivered), .commit])
        #expect(w.machine.stats.deliveries == 1)
        #expect(w.engine.inflightCount == 0)
    }

    @Test func aRefusedDeliveryStaysDueAndIsRetriedAfterItsBackoff() throws {
        let w = World()
        try w.online()
        try w.schedule("a", after: 10)
        let first = try w.deliver(after: 10)
        try w.step(.mqtt(.published(messageId: first.messageId, reasonCode: 0x87)))
        #expect(w.machine.stats.refusedDeliveries == 1)
        #expect(!w.store.records.contains { $0.entry.kind == .delivered })
        // The first retry waits a second (Engine.refusalBackoff).
        w.advance(seconds: Engine.refusalBackoff(attempt: 1) / 1000 - 1)
        try w.step()
        #expect(w.deliveries().count == 1)
        let again = try w.deliver(after: 1)
        #expect(again.fireId == first.fireId)
        try w.step(.mqtt(.published(messageId: again.messageId, reasonCode: 0)))
        #expect(w.store.records.contains { $0.entry.kind == .delivered })
    }

    @Test func aDeliveryTheClientCannotPublishIsRetriedLikeARefusal() throws {
        let w = World()
        try w.online()
        try w.schedule("a", after: 10)
        w.transport.refuses = { $0.topic.hasSuffix("/notifications") }
        w.advance(seconds: 10)
        try w.step()
        #expect(w.deliveries().isEmpty)
        #expect(w.logged("cannot publish a delivery; it will be retried"))
        w.transport.refuses = { _ in false }
        let delivery = try w.deliver(after: Engine.refusalBackoff(attempt: 1) / 1000)
        #expect(!delivery.fireId.isEmpty)
    }

    /// A delivery record the store cannot take leaves memory ahead of it: commands are refused
    /// until a snapshot that froze the state has been written.
    @Test func commandsAreRefusedWhileDivergedUntilASnapshotCatchesUp() throws {
        let w = World()
        try w.online()
        try w.schedule("a", after: 10)
        let delivery = try w.deliver(after: 10)
        w.store.failAppends = true
        try w.step(.mqtt(.published(messageId: delivery.messageId, reasonCode: 0)))
        #expect(w.logged("refusing commands until a snapshot succeeds"))
        #expect(w.engine.inflightCount == 0)  // memory went ahead: the delivery happened
        #expect(w.store.snapshotRunning)
        w.store.failAppends = false

        try w.step(w.command("d1", .schedule, #"{"id":"b","after":60}"#))
        #expect(w.replies().last?["error"]?.objectValue?["code"] == "unavailable")
        // Reads are answered.
        try w.step(w.command("d1", .list, #"{}"#))
        #expect(w.replies().last?["ok"] == true)

        w.store.finishSnapshot()
        try w.stepInbox()
        #expect(w.logged("journal caught up through a snapshot; accepting commands again"))
        try w.step(w.command("d1", .schedule, #"{"id":"b","after":60}"#))
        #expect(w.replies().last?["ok"] == true)
    }

    @Test func aRecordAppliedWhileTheCatchUpSnapshotRunsNeedsAnotherSnapshot() throws {
        let w = World()
        try w.online()
        try w.schedule("a", after: 10)
        try w.schedule("b", after: 20)
        let a = try w.deliver(after: 10)
        w.store.failAppends = true
        try w.step(.mqtt(.published(messageId: a.messageId, reasonCode: 0)))
        #expect(w.store.snapshotRunning)
        let b = try w.deliver(after: 10)
        // Not journaled (diverged): the running snapshot froze the state before it.
        try w.step(.mqtt(.published(messageId: b.messageId, reasonCode: 0)))
        w.store.failAppends = false
        w.timeline.clear()
        w.store.finishSnapshot()
        try w.stepInbox()
        #expect(w.logged("another snapshot follows"))
        #expect(w.timeline.entries.contains(.snapshotBegun))
        try w.step(w.command("d1", .schedule, #"{"id":"c","after":60}"#))
        #expect(w.replies().last?["error"]?.objectValue?["code"] == "unavailable")
        w.store.finishSnapshot()
        try w.stepInbox()
        try w.step(w.command("d1", .schedule, #"{"id":"c","after":60}"#))
        #expect(w.replies().last?["ok"] == true)
    }

    @Test func aFailedSnapshotIsRetriedAfterFiveSeconds() throws {
        let w = World()
        try w.online()
        w.store.snapshotDue = true
        try w.step()
        #expect(w.store.snapshotRunning)
        w.store.finishSnapshot(error: StoreError("no space left on device (injected)"))
        w.timeline.clear()
        try w.stepInbox()
        #expect(w.logged("snapshot failed"))
        w.advance(seconds: 4)
        try w.step()
        #expect(!w.timeline.entries.contains(.snapshotBegun))
        w.advance(seconds: 1)
        try w.step()
        #expect(w.timeline.entries.contains(.snapshotBegun))
        w.store.finishSnapshot()
        try w.stepInbox()
        #expect(w.store.snapshotsCompleted == 1)
    }

    /// A snapshot is copied a part per turn, while commands go on being answered; what it holds is
    /// the state when it began, and what changed meanwhile is in the journal after it.
    @Test func aSnapshotIsCopiedOverSeveralTurnsWhileCommandsAreAnswered() throws {
        let w = World(snapshotStep: 100)
        try w.online()
        for d in 0..<10 {
            let batch = (0..<50).map { #"{"id":"n\#($0)","after":3600}"# }.joined(separator: ",")
            try w.step(w.command("d\(d)", .schedule, #"{"notifications":[\#(batch)]}"#))
        }
        let atStart = Set(w.engine.snapshot.entries)
        try w.step(.snapshotRequested)
        #expect(w.store.snapshotRunning)
        #expect(w.store.frozen == nil, "not copied in one turn")
        #expect(w.machine.waitTime(now: w.clock.now()) == 0, "the loop goes on copying")
        let covered = try #require(w.store.begun)
        // Meanwhile, in the next turn: a cancel and a schedule on every device, most of them not
        // copied yet, answered in that turn.
        try w.step(
            (0..<10).flatMap { d in
                [
                    w.command("d\(d)", .cancel, #"{"ids":["n0"]}"#),
                    w.command("d\(d)", .schedule, #"{"id":"late","after":3600}"#),
                ]
            }
        )
        for d in 0..<10 { #expect(w.replies("d\(d)").suffix(2).allSatisfy { $0["ok"] == true }) }
        var turns = 2
        while w.store.frozen == nil {
            try w.step()
            turns += 1
        }
        // 500 notifications at 100 a turn (a device of 50 whole).
        #expect(turns >= 4)
        let frozen = try #require(w.store.frozen)
        #expect(Set(frozen.entries) == atStart)
        #expect(frozen.entries.count == atStart.count)
        // What changed meanwhile is in the records after the snapshot.
        #expect(w.store.records.dropFirst(Int(covered)).count == 20)
        w.store.finishSnapshot()
        try w.stepInbox()
        #expect(w.store.snapshotsCompleted == 1)
        #expect(w.machine.waitTime(now: w.clock.now()) > 0)
    }

    @Test func aRequestedSnapshotIsTakenWhateverTheJournalSize() throws {
        let w = World()
        try w.online()
        try w.step()
        #expect(!w.store.snapshotRunning)
        try w.step(.snapshotRequested)
        #expect(w.store.snapshotRunning)
        w.store.finishSnapshot()
        try w.stepInbox()
        #expect(w.store.snapshotsCompleted == 1)
        #expect(!w.store.snapshotRunning)
    }

    @Test func aGracefulStopWaitsForDeliveriesInFlightThenJournalsWhatArrived() throws {
        let w = World()
        try w.online()
        try w.schedule("a", after: 10)
        try w.schedule("b", after: 11)
        let a = try w.deliver(after: 10)
        try w.step(.stop)
        #expect(w.logged("stopping: finishing deliveries in flight"))
        // Waiting for the acknowledgement; nothing new is delivered meanwhile.
        w.advance(seconds: 2)
        try w.step()
        #expect(!w.transport.isStopped)
        #expect(w.deliveries().count == 1)
        // A command that arrived before the disconnect is journaled; its reply cannot be sent.
        w.inbox.push(w.command("d1", .schedule, #"{"id":"c","after":60}"#))
        let repliesBefore = w.replies().count
        w.timeline.clear()
        try w.step(.mqtt(.published(messageId: a.messageId, reasonCode: 0)))
        #expect(
            w.timeline.entries == [
                .append(.delivered), .commit, .publish(topic: w.topics.workerStatus("w1")), .transportStopped,
                .append(.schedule), .closed,
            ]
        )
        #expect(w.statuses.last == "offline")
        #expect(w.replies().count == repliesBefore)
        #expect(w.machine.isFinished)
    }

    @Test func aGracefulStopGivesUpOnUnacknowledgedDeliveriesAfterFiveSeconds() throws {
        let w = World()
        try w.online()
        try w.schedule("a", after: 10)
        _ = try w.deliver(after: 10)
        try w.step(.stop)
        w.advance(seconds: 4)
        try w.step()
        #expect(!w.machine.isFinished)
        w.advance(seconds: 1)
        try w.step()
        #expect(w.machine.isFinished)
        #expect(w.store.isClosed)
        #expect(w.logged("inflightLeft=1"))
    }

    @Test func everyConnectionSubscribesAndIsOnlineOnlyOnceTheCommandSubscriptionIsGranted() throws {
        let w = World()
        try w.step(.mqtt(.connected(sessionPresent: false)))
        #expect(
            w.transport.subscriptions.map(\.filter) == [
                w.topics.workerStatus("w1"), w.topics.fleetFind, w.topics.commandFilter,
            ]
        )
        #expect(w.statuses.isEmpty)
        let first = try #require(w.transport.subscriptions.last)
        // Refused (an ACL): not online, asked again after ten seconds.
        try w.step(.mqtt(.subscribed(messageId: first.messageId, grantedQoS: [0x87])))
        #expect(w.statuses.isEmpty)
        #expect(w.machine.stats.subscriptionRefusals == 1)
        w.advance(seconds: 9)
        try w.step()
        #expect(w.transport.subscriptions.count == 3)
        w.advance(seconds: 1)
        try w.step()
        #expect(w.transport.subscriptions.count == 5)
        let second = try #require(w.transport.subscriptions.last)
        try w.step(.mqtt(.subscribed(messageId: second.messageId, grantedQoS: [1])))
        #expect(w.statuses == ["online"])
        // A lost connection: subscribed again on the next one.
        try w.step(.mqtt(.disconnected(reasonCode: 0)))
        #expect(!w.machine.isConnected)
        try w.step(.mqtt(.connected(sessionPresent: true)))
        #expect(w.transport.subscriptions.count == 8)
        #expect(w.machine.stats.reconnects == 2)
    }

    @Test func aDeliveryInFlightWhenTheConnectionDropsIsRecordedOnItsLaterAcknowledgement() throws {
        let w = World()
        try w.online()
        try w.schedule("a", after: 10)
        let a = try w.deliver(after: 10)
        try w.step(.mqtt(.disconnected(reasonCode: 0)))
        try w.step(.mqtt(.connected(sessionPresent: true)))
        // The client library resends it with the same message id within the resumed session.
        try w.step(.mqtt(.published(messageId: a.messageId, reasonCode: 0)))
        #expect(w.store.records.contains { $0.entry.kind == .delivered })
    }

    @Test func fiveTakeoversWithinAMinuteStopTheWorkerWithAReason() throws {
        let w = World()
        try w.online()
        for i in 1...4 {
            try w.step(.mqtt(.disconnected(reasonCode: WorkerStateMachine.sessionTakenOver)))
            try w.step(.mqtt(.connected(sessionPresent: true)))
            #expect(w.machine.stats.takeovers == i)
            #expect(!w.machine.isFinished)
            w.advance(seconds: 10)
        }
        do {
            try w.step(.mqtt(.disconnected(reasonCode: WorkerStateMachine.sessionTakenOver)))
            Issue.record("the fifth takeover did not stop the worker")
        } catch {
            #expect(error.message.contains("taken over 5 times"))
        }
        #expect(w.machine.isFinished)
        // The status topic belongs to the other holder of the id: no `offline` is published.
        #expect(w.statuses == ["online"])
    }

    @Test func takeoversFurtherApartThanTheWindowDoNotStopTheWorker() throws {
        let w = World()
        try w.online()
        for _ in 1...6 {
            try w.step(.mqtt(.disconnected(reasonCode: WorkerStateMachine.sessionTakenOver)))
            try w.step(.mqtt(.connected(sessionPresent: true)))
            w.advance(seconds: 20)
        }
        #expect(w.machine.stats.takeovers == 6)
        #expect(!w.machine.isFinished)
    }

    /// What `chime status` and the console show of a worker: when it started, its pid, its version.
    @Test func theOnlineStatusSaysWhenItStartedItsPidAndItsVersion() throws {
        let w = World()
        try w.online()
        let status = try #require(w.transport.published(on: w.topics.workerStatus("w1")).last)
        #expect(status.message.retain)
        let o = try #require(try JSON(parsing: status.message.payload).objectValue)
        #expect(o["state"] == "online")
        #expect(o["startedAt"] == "2026-12-01T10:00:00Z")
        #expect(o["pid"] == 1)
        #expect(o["version"] == "0.0.0-test")
    }

    @Test func anotherInstanceOnlineUnderThisIdCountsAsATakeoverAnOlderOneDoesNot() throws {
        let w = World()
        try w.online()
        func status(_ instance: String, startedAt: String) -> WorkerEvent {
            let payload = #"{"state":"online","instance":"\#(instance)","startedAt":"\#(startedAt)"}"#
            return .mqtt(.message(MQTTMessage(topic: w.topics.workerStatus("w1"), payload: Array(payload.utf8))))
        }
        // A previous run of this worker, killed before its will went out.
        try w.step(status("old", startedAt: "2026-12-01T09:00:00Z"))
        // Our own status, back from the broker.
        try w.step(status("this", startedAt: "2026-12-01T10:00:00Z"))
        #expect(w.machine.stats.takeovers == 0)
        try w.step(status("other", startedAt: "2026-12-01T10:00:01Z"))
        #expect(w.machine.stats.takeovers == 1)
    }

    @Test func statsArePublishedAtTheirIntervalWithTheStoreFigures() throws {
        let w = World(statsInterval: 10_000)
        try w.online()
        try w.schedule("a", after: 60)
        let topic = w.topics.workerStats("w1")
        #expect(w.transport.published(on: topic).isEmpty)
        w.advance(seconds: 10)
        try w.step()
        let stats = try #require(w.transport.published(on: topic).last)
        let o = try #require(try JSON(parsing: stats.message.payload).objectValue)
        #expect(o["pending"] == 1)
        #expect(o["journalSequence"] == 1)
        #expect(o["commands"]?.objectValue?["schedule"] == 1)
    }
}

extension WorkerTestLoop {
    /// Schedules `id` for `after` seconds from now and returns once it is acknowledged.
    func schedule(_ id: String, after: Int) throws {
        try step(command("d1", .schedule, #"{"id":"\#(id)","after":\#(after)}"#))
        #expect(replies().last?["ok"] == true)
    }

    /// Lets `seconds` pass and returns the delivery published meanwhile.
    func deliver(after seconds: Int64) throws -> (messageId: Int32, fireId: String) {
        let before = deliveries().count
        advance(seconds: seconds)
        try step()
        return try #require(deliveries().dropFirst(before).first)
    }
}

@Suite struct WorkerMetricsPolicyTests {
    @Test func metricsAreHandedOverAtTheirIntervalAndSayWhyTheWorkerIsNotReady() throws {
        let w = WorkerTestLoop(metricsInterval: 250)
        var exported: [WorkerMetrics] { w.exported }
        try w.step()
        #expect(exported.last?.notReady == ["not connected to the broker"])
        try w.step(.mqtt(.connected(sessionPresent: false)))
        // Within the interval: nothing new.
        #expect(exported.count == 1)
        w.clock.advance(milliseconds: 250)
        try w.step()
        #expect(exported.last?.notReady == ["waiting for the broker to grant the command subscription"])
        let commands = try #require(w.transport.subscriptions.last)
        try w.step(.mqtt(.subscribed(messageId: commands.messageId, grantedQoS: [1])))
        w.clock.advance(milliseconds: 250)
        try w.step()
        #expect(exported.last?.ready == true)
        try w.schedule("a", after: 60)
        w.clock.advance(milliseconds: 250)
        try w.step()
        #expect(exported.last?.pending == 1)
        #expect(exported.last?.stats.commands["schedule"] == 1)
        try w.step(.stop)
        w.clock.advance(milliseconds: 250)
        try w.step(w.command("d1", .list, "{}"))
        #expect(w.machine.isFinished)
        #expect(w.metrics.isStopped.withLock { $0 })
    }

    @Test func noMetricsAreBuiltWithoutAnEndpoint() throws {
        let w = WorkerTestLoop()
        try w.online()
        w.clock.advance(milliseconds: 10_000)
        try w.step()
        #expect(w.exported.isEmpty)
    }

    @Test func errorsAreCountedByCodeAndUnknownOpsUnderOneName() throws {
        let w = WorkerTestLoop()
        try w.online()
        for i in 0..<50 {
            try w.step(.mqtt(.message(MQTTMessage(topic: "chime/d1/cmd/op\(i)", payload: [], qos: 1))))
        }
        try w.step(w.command("d1", .schedule, #"{"id":"a","after":"soon"}"#))
        #expect(w.machine.stats.commands == ["unknown": 50, "schedule": 1])
        #expect(w.machine.stats.errorsByCode == ["invalid_argument": 51])
        #expect(w.machine.stats.errors == 51)
    }
}
