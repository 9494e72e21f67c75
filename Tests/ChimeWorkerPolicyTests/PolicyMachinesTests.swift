import ChimeCore
import Testing

@testable import ChimeWorkerPolicy

/// The small machines the worker's policy is composed of, each on its own: fed events with a
/// given `now`, checked for what they answer and what they keep.
@Suite struct PolicyMachinesTests {
    let t0 = Instant(milliseconds: 1_000_000)

    // MARK: BrokerSession

    func session() -> BrokerSession { BrokerSession(resubscribeDelay: 10_000, takeoverWindow: 60_000) }

    @Test func theCommandSubscriptionGrantedServes() {
        var s = session()
        #expect(!s.isConnected)
        s.connected()
        s.subscribeSent(.commands, messageId: 7)
        #expect(s.state == .subscribing(messageId: 7))
        // A SUBACK for another filter (the status, the fleet) changes nothing.
        #expect(s.subscribed(messageId: 6, grantedQoS: [1], now: t0) == .other)
        #expect(s.subscribed(messageId: 7, grantedQoS: [1], now: t0) == .serving)
        #expect(s.isServing)
        #expect(s.retryAt == nil)
    }

    @Test func aRefusedSubscriptionIsAskedForAgainAfterTheDelay() {
        var s = session()
        s.connected()
        s.subscribeSent(.commands, messageId: 7)
        #expect(s.subscribed(messageId: 7, grantedQoS: [0x87], now: t0) == .refused(0x87))
        #expect(s.retryAt == t0.adding(milliseconds: 10_000))
        #expect(!s.resubscribeIfDue(now: t0.adding(milliseconds: 9_999)))
        #expect(s.resubscribeIfDue(now: t0.adding(milliseconds: 10_000)))
        #expect(s.state == .subscribing(messageId: nil))
        // No code at all is a refusal too.
        s.subscribeSent(.commands, messageId: 8)
        #expect(s.subscribed(messageId: 8, grantedQoS: [], now: t0) == .refused(0x80))
    }

    @Test func aSubscriptionTheTransportRefusedIsRetriedOnlyWhileConnected() {
        var s = session()
        s.subscribeFailed(now: t0)
        #expect(s.state == .down)
        s.connected()
        s.subscribeFailed(now: t0)
        #expect(s.retryAt == t0.adding(milliseconds: 10_000))
    }

    @Test func slotSubacksAreMatchedOnceByMessageId() {
        var s = session()
        s.connected()
        s.subscribeSent(.slot(3), messageId: 9)
        s.subscribeSent(.slot(4), messageId: 10)
        #expect(s.subscribed(messageId: 10, grantedQoS: [0x87], now: t0) == .slot(4, refusal: 0x87))
        #expect(s.subscribed(messageId: 9, grantedQoS: [1], now: t0) == .slot(3, refusal: nil))
        #expect(s.subscribed(messageId: 9, grantedQoS: [1], now: t0) == .other)
    }

    @Test func theStatusAndTheForwardCheckPubacksAreTheSessions() {
        var s = session()
        s.connected()
        s.subscribeSent(.commands, messageId: 1)
        _ = s.subscribed(messageId: 1, grantedQoS: [1], now: t0)
        s.statusSent(messageId: 2)
        s.forwardCheckSent(messageId: 3)
        #expect(s.acknowledged(messageId: 4, reasonCode: 0) == .other)
        #expect(s.acknowledged(messageId: 2, reasonCode: 0x87) == .status(refusal: 0x87))
        #expect(s.acknowledged(messageId: 2, reasonCode: 0) == .other)
        #expect(s.acknowledged(messageId: 3, reasonCode: 0) == .forwardCheck(refusal: nil))
        #expect(s.acknowledged(messageId: 3, reasonCode: 0) == .other)
    }

    @Test func goingDownForgetsWhatWaitedForTheBroker() {
        var s = session()
        s.connected()
        s.forwardCheckSent(messageId: 3)
        s.subscribeSent(.slot(1), messageId: 5)
        s.down()
        #expect(s.state == .down)
        #expect(s.acknowledged(messageId: 3, reasonCode: 0) == .other)
        #expect(s.subscribed(messageId: 5, grantedQoS: [1], now: t0) == .other)
        // The status of a session that is not serving is not waited for.
        s.statusSent(messageId: 6)
        #expect(s.acknowledged(messageId: 6, reasonCode: 0) == .other)
    }

    @Test func takeoversAreCountedWithinTheWindow() {
        var s = session()
        #expect(s.tookOver(now: t0) == 1)
        #expect(s.tookOver(now: t0.adding(milliseconds: 30_000)) == 2)
        #expect(s.tookOver(now: t0.adding(milliseconds: 60_000)) == 3)
        // The first is now more than a window old.
        #expect(s.tookOver(now: t0.adding(milliseconds: 60_001)) == 3)
        #expect(s.tookOver(now: t0.adding(milliseconds: 200_000)) == 1)
    }

    // MARK: SnapshotSchedule

    @Test func aSnapshotBeginsWhenDueOrAskedForAndOneAtATime() {
        var s = SnapshotSchedule(retry: 5000)
        #expect(!s.begins(now: t0))
        s.store.snapshotDue = true
        #expect(s.begins(now: t0))
        #expect(!s.begins(now: t0), "one runs already")
        // Asked for while one runs: the next begins once it is written, due or not.
        s.request()
        s.store.snapshotDue = false
        #expect(s.written() == .done)
        #expect(s.begins(now: t0))
        #expect(s.written() == .done)
        #expect(!s.begins(now: t0))
    }

    @Test func aFailedSnapshotWaitsBeforeTheNext() {
        var s = SnapshotSchedule(retry: 5000)
        s.store.snapshotDue = true
        #expect(s.begins(now: t0))
        s.capturing = 0
        s.failed()
        #expect(s.capturing == nil)
        #expect(!s.begins(now: t0.adding(milliseconds: 4999)))
        #expect(s.begins(now: t0.adding(milliseconds: 5000)))
    }

    @Test func divergedMemoryIsCaughtUpBySnapshotThatCoversIt() {
        var s = SnapshotSchedule(retry: 5000)
        s.diverge()
        #expect(s.isDiverged)
        // Asking changes nothing: the catch-up begins at once anyway.
        s.request()
        #expect(s.begins(now: t0))
        #expect(s.written() == .caughtUp)
        #expect(!s.isDiverged)
    }

    @Test func aRecordLostWhileTheSnapshotRunsNeedsAnother() {
        var s = SnapshotSchedule(retry: 5000)
        s.store.snapshotDue = true
        #expect(s.begins(now: t0))
        s.diverge()
        #expect(s.written() == .stillBehind)
        #expect(s.isDiverged)
        #expect(!s.begins(now: t0.adding(milliseconds: 4999)))
        #expect(s.begins(now: t0.adding(milliseconds: 5000)))
        #expect(s.written() == .caughtUp)
    }

    @Test func aSnapshotWithNothingToTakeLeavesTheScheduleIdle() {
        var s = SnapshotSchedule(retry: 5000)
        s.store.snapshotDue = true
        #expect(s.begins(now: t0))
        s.nothingToTake()
        s.store.snapshotDue = false
        #expect(!s.begins(now: t0))
        #expect(s.persistence == .consistent(.idle(requested: false, notBefore: nil)))
    }

    // MARK: CommitQueue

    @Test func appendResultsFindTheirWriteInAnyOrder() {
        var q = CommitQueue()
        let entries = (0..<3).map {
            JournalEntry.zoneRules(at: t0, zones: [ZoneRulesRecord(zone: "Z\($0)", fingerprint: 1)])
        }
        let ids = entries.enumerated().map { q.add(.record($1, slot: $0)) }
        #expect(Set(ids).count == 3)
        guard case .record(_, let slot1)? = q.take(ids[1]) else { Issue.record("not the second write"); return }
        #expect(slot1 == 1)
        #expect(q.take(ids[1]) == nil, "taken once")
        guard case .record(_, let slot0)? = q.take(ids[0]), case .record(_, let slot2)? = q.take(ids[2]) else {
            Issue.record("not the first and third writes")
            return
        }
        #expect([slot0, slot2] == [0, 2])
    }

    @Test func repliesLeaveInOrderAndDropWithTheirSlot() {
        var q = CommitQueue()
        for (i, slot) in [0, 1, 0, 2].enumerated() {
            q.queueReply([UInt8(i)], to: ReplyDestination(topic: "r/\(i)", correlationData: [9], slot: slot))
        }
        #expect(q.replyCount == 4)
        q.dropReplies(slot: 1)
        let sent = q.takeReplies()
        #expect(sent.map(\.topic) == ["r/0", "r/2", "r/3"])
        #expect(sent.allSatisfy { $0.qos == 1 && $0.purpose == .reply && $0.correlationData == [9] })
        #expect(!q.hasReplies)
        q.queueReply([1], to: ReplyDestination(topic: "r", correlationData: nil, slot: 0))
        q.dropReplies()
        #expect(q.takeReplies().isEmpty)
    }

    // MARK: DeliveryWindow

    @Test func deliveriesInFlightAreFoundByMessageIdOnce() {
        var w = DeliveryWindow(now: t0)
        w.published(messageId: 1, slot: 0, token: 10)
        w.published(messageId: 2, slot: 5, token: 20)
        w.published(messageId: 3, slot: 5, token: 30)
        w.drop(slot: 5)
        #expect(w.acknowledged(messageId: 2) == nil)
        #expect(w.acknowledged(messageId: 1).map { [$0.slot, Int($0.token)] } == [0, 10])
        #expect(w.acknowledged(messageId: 1) == nil)
    }

    // MARK: ZoneChecks and ReportSchedule

    @Test func theZoneDatabaseIsReadEveryIntervalAndNeverWithoutOne() {
        var off = ZoneChecks(interval: 0, toCompare: [])
        #expect(!off.periodicDue(now: t0))
        #expect(!off.periodicDue(now: t0.adding(milliseconds: 10_000_000)))
        var z = ZoneChecks(interval: 1000, toCompare: [0])
        #expect(!z.periodicDue(now: t0), "the first turn schedules the first reading")
        #expect(!z.periodicDue(now: t0.adding(milliseconds: 999)))
        #expect(z.periodicDue(now: t0.adding(milliseconds: 1000)))
        // A reading (periodic or SIGHUP) puts the next an interval away.
        z.checking(now: t0.adding(milliseconds: 1500))
        #expect(!z.periodicDue(now: t0.adding(milliseconds: 2499)))
        #expect(z.periodicDue(now: t0.adding(milliseconds: 2500)))
    }

    @Test func metricsAreDueAtOnceAndStatsAnIntervalAfterStart() {
        var r = ReportSchedule(now: t0)
        #expect(!r.metricsDue(now: t0, every: 0))
        #expect(r.metricsDue(now: t0, every: 1000))
        #expect(!r.metricsDue(now: t0.adding(milliseconds: 999), every: 1000))
        #expect(r.metricsDue(now: t0.adding(milliseconds: 1000), every: 1000))
        #expect(!r.statsDue(now: t0, every: 5000))
        #expect(!r.statsDue(now: t0.adding(milliseconds: 10_000), every: 0))
        #expect(r.statsDue(now: t0.adding(milliseconds: 5000), every: 5000))
        #expect(!r.statsDue(now: t0.adding(milliseconds: 9999), every: 5000))
    }

    // MARK: CommandIntake

    @Test func aCommandsCostIsChargedToItsDeviceOnce() {
        var intake = CommandIntake(
            decoder: CommandDecoder(limits: CommandLimits()),
            budget: DeviceBudget(rate: 100, burst: 50)
        )
        // Nothing is charged before a command is handled.
        intake.charge(milliseconds: 1000)
        #expect(intake.budget.admits("d", now: t0).admitted)
        intake.charging("d", at: t0)
        intake.charge(milliseconds: 60)
        #expect(!intake.budget.admits("d", now: t0).admitted)
        #expect(intake.budget.admits("e", now: t0).admitted)
        // Charged once: a second report is not the device's.
        intake.charge(milliseconds: 1000)
        #expect(intake.budget.admits("d", now: t0.adding(milliseconds: 200)).admitted)
    }
}
