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
        let r1 = s.subscribed(messageId: 6, grantedQoS: [1], now: t0)
        #expect(r1 == .other)
        let r2 = s.subscribed(messageId: 7, grantedQoS: [1], now: t0)
        #expect(r2 == .serving)
        #expect(s.isServing)
        #expect(s.retryAt == nil)
    }

    @Test func aRefusedSubscriptionIsAskedForAgainAfterTheDelay() {
        var s = session()
        s.connected()
        s.subscribeSent(.commands, messageId: 7)
        let r3 = s.subscribed(messageId: 7, grantedQoS: [0x87], now: t0)
        #expect(r3 == .refused(0x87))
        #expect(s.retryAt == t0.adding(milliseconds: 10_000))
        let r4 = s.resubscribeIfDue(now: t0.adding(milliseconds: 9_999))
        #expect(!r4)
        let r5 = s.resubscribeIfDue(now: t0.adding(milliseconds: 10_000))
        #expect(r5)
        #expect(s.state == .subscribing(messageId: nil))
        // No code at all is a refusal too.
        s.subscribeSent(.commands, messageId: 8)
        let r6 = s.subscribed(messageId: 8, grantedQoS: [], now: t0)
        #expect(r6 == .refused(0x80))
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
        let r7 = s.subscribed(messageId: 10, grantedQoS: [0x87], now: t0)
        #expect(r7 == .slot(4, refusal: 0x87))
        let r8 = s.subscribed(messageId: 9, grantedQoS: [1], now: t0)
        #expect(r8 == .slot(3, refusal: nil))
        let r9 = s.subscribed(messageId: 9, grantedQoS: [1], now: t0)
        #expect(r9 == .other)
    }

    @Test func theStatusAndTheForwardCheckPubacksAreTheSessions() {
        var s = session()
        s.connected()
        s.subscribeSent(.commands, messageId: 1)
        _ = s.subscribed(messageId: 1, grantedQoS: [1], now: t0)
        s.statusSent(messageId: 2)
        s.forwardCheckSent(messageId: 3)
        let r10 = s.acknowledged(messageId: 4, reasonCode: 0)
        #expect(r10 == .other)
        let r11 = s.acknowledged(messageId: 2, reasonCode: 0x87)
        #expect(r11 == .status(refusal: 0x87))
        let r12 = s.acknowledged(messageId: 2, reasonCode: 0)
        #expect(r12 == .other)
        let r13 = s.acknowledged(messageId: 3, reasonCode: 0)
        #expect(r13 == .forwardCheck(refusal: nil))
        let r14 = s.acknowledged(messageId: 3, reasonCode: 0)
        #expect(r14 == .other)
    }

    @Test func goingDownForgetsWhatWaitedForTheBroker() {
        var s = session()
        s.connected()
        s.forwardCheckSent(messageId: 3)
        s.subscribeSent(.slot(1), messageId: 5)
        s.down()
        #expect(s.state == .down)
        let r15 = s.acknowledged(messageId: 3, reasonCode: 0)
        #expect(r15 == .other)
        let r16 = s.subscribed(messageId: 5, grantedQoS: [1], now: t0)
        #expect(r16 == .other)
        // The status of a session that is not serving is not waited for.
        s.statusSent(messageId: 6)
        let r17 = s.acknowledged(messageId: 6, reasonCode: 0)
        #expect(r17 == .other)
    }

    @Test func takeoversAreCountedWithinTheWindow() {
        var s = session()
        let r18 = s.tookOver(now: t0)
        #expect(r18 == 1)
        let r19 = s.tookOver(now: t0.adding(milliseconds: 30_000))
        #expect(r19 == 2)
        let r20 = s.tookOver(now: t0.adding(milliseconds: 60_000))
        #expect(r20 == 3)
        // The first is now more than a window old.
        let r21 = s.tookOver(now: t0.adding(milliseconds: 60_001))
        #expect(r21 == 3)
        let r22 = s.tookOver(now: t0.adding(milliseconds: 200_000))
        #expect(r22 == 1)
    }

    // MARK: SnapshotSchedule

    @Test func aSnapshotBeginsWhenDueOrAskedForAndOneAtATime() {
        var s = SnapshotSchedule(retry: 5000)
        let r23 = s.begins(now: t0)
        #expect(!r23)
        s.store.snapshotDue = true
        let r24 = s.begins(now: t0)
        #expect(r24)
        let r25 = s.begins(now: t0)
        #expect(!r25, "one runs already")
        // Asked for while one runs: the next begins once it is written, due or not.
        s.request()
        s.store.snapshotDue = false
        let r26 = s.written()
        #expect(r26 == .done)
        let r27 = s.begins(now: t0)
        #expect(r27)
        let r28 = s.written()
        #expect(r28 == .done)
        let r29 = s.begins(now: t0)
        #expect(!r29)
    }

    @Test func aFailedSnapshotWaitsBeforeTheNext() {
        var s = SnapshotSchedule(retry: 5000)
        s.store.snapshotDue = true
        let r30 = s.begins(now: t0)
        #expect(r30)
        s.capturing = 0
        s.failed()
        #expect(s.capturing == nil)
        let r31 = s.begins(now: t0.adding(milliseconds: 4999))
        #expect(!r31)
        let r32 = s.begins(now: t0.adding(milliseconds: 5000))
        #expect(r32)
    }

    @Test func divergedMemoryIsCaughtUpBySnapshotThatCoversIt() {
        var s = SnapshotSchedule(retry: 5000)
        s.diverge()
        #expect(s.isDiverged)
        // Asking changes nothing: the catch-up begins at once anyway.
        s.request()
        let r33 = s.begins(now: t0)
        #expect(r33)
        let r34 = s.written()
        #expect(r34 == .caughtUp)
        #expect(!s.isDiverged)
    }

    @Test func aRecordLostWhileTheSnapshotRunsNeedsAnother() {
        var s = SnapshotSchedule(retry: 5000)
        s.store.snapshotDue = true
        let r35 = s.begins(now: t0)
        #expect(r35)
        s.diverge()
        let r36 = s.written()
        #expect(r36 == .stillBehind)
        #expect(s.isDiverged)
        let r37 = s.begins(now: t0.adding(milliseconds: 4999))
        #expect(!r37)
        let r38 = s.begins(now: t0.adding(milliseconds: 5000))
        #expect(r38)
        let r39 = s.written()
        #expect(r39 == .caughtUp)
    }

    @Test func aSnapshotWithNothingToTakeLeavesTheScheduleIdle() {
        var s = SnapshotSchedule(retry: 5000)
        s.store.snapshotDue = true
        let r40 = s.begins(now: t0)
        #expect(r40)
        s.nothingToTake()
        s.store.snapshotDue = false
        let r41 = s.begins(now: t0)
        #expect(!r41)
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
        let r42 = q.take(ids[1])
        #expect(r42 == nil, "taken once")
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
        var sent: [OutboundMessage] = []
        q.sendReplies { sent.append($0) }
        #expect(sent.map(\.topic) == ["r/0", "r/2", "r/3"])
        #expect(sent.allSatisfy { $0.qos == 1 && $0.purpose == .reply && $0.correlationData == [9] })
        #expect(!q.hasReplies)
        q.queueReply([1], to: ReplyDestination(topic: "r", correlationData: nil, slot: 0))
        q.dropReplies()
        var none: [OutboundMessage] = []
        q.sendReplies { none.append($0) }
        #expect(none.isEmpty)
    }

    // MARK: DeliveryWindow

    @Test func deliveriesInFlightAreFoundByMessageIdOnce() {
        var w = DeliveryWindow(now: t0)
        w.published(messageId: 1, slot: 0, token: 10)
        w.published(messageId: 2, slot: 5, token: 20)
        w.published(messageId: 3, slot: 5, token: 30)
        w.drop(slot: 5)
        let r44 = w.acknowledged(messageId: 2)
        #expect(r44 == nil)
        let r45 = w.acknowledged(messageId: 1)
        #expect(r45.map { [$0.slot, Int($0.token)] } == [0, 10])
        let r46 = w.acknowledged(messageId: 1)
        #expect(r46 == nil)
    }

    // MARK: ZoneChecks and ReportSchedule

    @Test func theZoneDatabaseIsReadEveryIntervalAndNeverWithoutOne() {
        var off = ZoneChecks(interval: 0, toCompare: [])
        let r47 = off.periodicDue(now: t0)
        #expect(!r47)
        let r48 = off.periodicDue(now: t0.adding(milliseconds: 10_000_000))
        #expect(!r48)
        var z = ZoneChecks(interval: 1000, toCompare: [0])
        let r49 = z.periodicDue(now: t0)
        #expect(!r49, "the first turn schedules the first reading")
        let r50 = z.periodicDue(now: t0.adding(milliseconds: 999))
        #expect(!r50)
        let r51 = z.periodicDue(now: t0.adding(milliseconds: 1000))
        #expect(r51)
        // A reading (periodic or SIGHUP) puts the next an interval away.
        z.checking(now: t0.adding(milliseconds: 1500))
        let r52 = z.periodicDue(now: t0.adding(milliseconds: 2499))
        #expect(!r52)
        let r53 = z.periodicDue(now: t0.adding(milliseconds: 2500))
        #expect(r53)
    }

    @Test func metricsAreDueAtOnceAndStatsAnIntervalAfterStart() {
        var r = ReportSchedule(now: t0)
        let r54 = r.metricsDue(now: t0, every: 0)
        #expect(!r54)
        let r55 = r.metricsDue(now: t0, every: 1000)
        #expect(r55)
        let r56 = r.metricsDue(now: t0.adding(milliseconds: 999), every: 1000)
        #expect(!r56)
        let r57 = r.metricsDue(now: t0.adding(milliseconds: 1000), every: 1000)
        #expect(r57)
        let r58 = r.statsDue(now: t0, every: 5000)
        #expect(!r58)
        let r59 = r.statsDue(now: t0.adding(milliseconds: 10_000), every: 0)
        #expect(!r59)
        let r60 = r.statsDue(now: t0.adding(milliseconds: 5000), every: 5000)
        #expect(r60)
        let r61 = r.statsDue(now: t0.adding(milliseconds: 9999), every: 5000)
        #expect(!r61)
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
