import ChimeCore
import Testing

/// Routing by slot (`--routing slot`), the worker's policy driven by hand: what it subscribes to,
/// which commands it forwards and where, that a forwarded command is never forwarded again, and
/// that the owner answers the original sender.
@Suite struct RoutingPolicyTests {
    typealias Slots = SlotWorkerPolicyTests
    static let t0 = Slots.t0

    /// A routing worker serving slots 0 and 1; slot 3 fenced away (another worker's), slot 2 loading.
    static func worker() -> WorkerStateMachine {
        var (m, _) = Slots.worker(loaded: [0, 1, 3], routing: .slot)
        _ = m.report(.committed(syncMicroseconds: nil, store: StoreStatus(), fenced: [3]), now: t0)
        return m
    }

    static func forwards(_ actions: [WorkerStateMachine.Action]) -> [OutboundMessage] {
        actions.compactMap { if case .publish(let m) = $0, m.purpose == .forward { m } else { nil } }
    }

    static func subscriptions(_ actions: [WorkerStateMachine.Action]) -> [WorkerStateMachine.Subscription] {
        actions.compactMap { if case .subscribe(let s) = $0 { s } else { nil } }
    }

    @Test func onConnectingItTakesItsShareOfCommandsAndItsSlotsForwardedOnes() {
        var (m, _) = Slots.worker(loaded: [0, 1], routing: .slot)
        let actions = m.handle(.connected(sessionPresent: false), now: Self.t0)
        let subscriptions = Self.subscriptions(actions)
        #expect(subscriptions == [.status, .fleet, .commands, .slot(0), .slot(1)])
        #expect(
            subscriptions.map { $0.filter(m.policy) }.dropFirst() == [
                "chime/$fleet/find", "$share/chimed/chime/+/cmd/+", "chime/$slot/0/+/cmd/+", "chime/$slot/1/+/cmd/+",
            ]
        )
        // Broadcast subscribes to every command, and to no slot.
        var (b, _) = Slots.worker(loaded: [0, 1])
        let connected = b.handle(.connected(sessionPresent: false), now: Self.t0)
        #expect(
            Self.subscriptions(connected).map { $0.filter(b.policy) } == [
                "chime/$worker/a/status", "chime/$fleet/find", "chime/+/cmd/+",
            ]
        )
        #expect(!connected.contains { if case .publish(let p) = $0 { p.purpose == .forwardCheck } else { false } })
    }

    @Test func aSlotTakenOrGivenUpIsSubscribedToOrNoLonger() {
        var (m, c0) = Slots.worker(loaded: [0, 1], routing: .slot)
        let adopted = m.adopt(slot: 2, epoch: 1, Engine(), now: Self.t0, monotonic: c0)
        #expect(Self.subscriptions(adopted) == [.slot(2)])
        let fenced = m.report(.committed(syncMicroseconds: nil, store: StoreStatus(), fenced: [0]), now: Self.t0)
        #expect(fenced.contains { if case .unsubscribe(.slot(0)) = $0 { true } else { false } })
    }

    @Test func aCommandForASlotServedElsewhereIsForwardedWithItsReplyAddress() throws {
        var m = Self.worker()
        let device = Slots.devices[3]
        let actions = m.handle(Slots.schedule(device, "x"), now: Self.t0)
        let forwarded = try #require(Self.forwards(actions).first)
        #expect(Self.forwards(actions).count == 1)
        #expect(forwarded.topic == "chime/$slot/3/\(device)/cmd/schedule")
        #expect(forwarded.payload == Array(#"{"id":"x","after":3600}"#.utf8))
        #expect(forwarded.responseTopic == "r" && forwarded.correlationData == Array("x".utf8))
        #expect(forwarded.qos == 0)
        #expect(Slots.appendedSlots(actions).isEmpty)
        #expect(m.stats.commandsForwarded == 1)
        // A slot being loaded here is not forwarded: no one else subscribes to it.
        #expect(m.handle(Slots.schedule(Slots.devices[2], "y"), now: Self.t0).isEmpty)
        #expect(m.stats.commandsForOtherSlots == 1)
    }

    @Test func aForwardedCommandIsAnsweredByTheOwnerAndNeverForwardedAgain() {
        var m = Self.worker()
        func forwarded(_ slot: Int, _ device: String) -> WorkerStateMachine.Event {
            .message(
                InboundMessage(
                    topic: "chime/$slot/\(slot)/\(device)/cmd/schedule",
                    payload: Array(#"{"id":"f","after":3600}"#.utf8),
                    messageId: 2,
                    responseTopic: "chime/\(device)/replies/cli-1",
                    correlationData: [9]
                )
            )
        }
        // Forwarded under a slot that is not its device's: not applied, even where that slot is served.
        #expect(m.handle(forwarded(1, Slots.devices[0]), now: Self.t0).isEmpty)
        // Not served here: dropped, not forwarded (a loop is impossible).
        #expect(m.handle(forwarded(3, Slots.devices[3]), now: Self.t0).isEmpty)
        #expect(m.stats.commandsForwarded == 0 && m.stats.commandsForOtherSlots == 2)
        // Served here: applied, and the reply goes to the sender's Response Topic.
        let after = Slots.handleAndAppend(&m, forwarded(0, Slots.devices[0]))
        #expect(after.isEmpty)
        let committed = m.report(.committed(syncMicroseconds: nil, store: StoreStatus()), now: Self.t0)
        let replies = committed.compactMap { if case .publish(let r) = $0, r.purpose == .reply { r } else { nil } }
        #expect(replies.map(\.topic) == ["chime/\(Slots.devices[0])/replies/cli-1"])
        #expect(replies.first?.correlationData == [9])
    }

    /// Forwards go at QoS 0, which a broker refuses silently: one QoS 1 check a connection, on a
    /// topic no one subscribes to, says whether the ACL lets this worker forward.
    @Test func eachConnectionChecksThatTheBrokerLetsItForward() throws {
        var (m, _) = Slots.worker(loaded: [0, 1], routing: .slot)
        let connected = m.handle(.connected(sessionPresent: false), now: Self.t0)
        let checks = connected.compactMap {
            if case .publish(let p) = $0, p.purpose == .forwardCheck { p } else { nil }
        }
        #expect(checks.map(\.topic) == ["chime/$slot/check"])
        #expect(checks.first?.qos == 1)
        _ = m.report(.published(.forwardCheck, .success(41)), now: Self.t0)
        _ = m.handle(.acknowledged(messageId: 41, reasonCode: 0x87), now: Self.t0)
        #expect(m.stats.forwardsRefused == 1)
        #expect(m.metrics(now: Self.t0).prometheusText.contains("chime_forwards_refused_total 1"))
        // Accepted (no subscriber: 0x10) on the next connection: nothing more counted.
        _ = m.handle(.disconnected(reasonCode: 0), now: Self.t0)
        _ = m.handle(.connected(sessionPresent: false), now: Self.t0)
        _ = m.report(.published(.forwardCheck, .success(42)), now: Self.t0)
        _ = m.handle(.acknowledged(messageId: 42, reasonCode: 0x10), now: Self.t0)
        #expect(m.stats.forwardsRefused == 1)
        // A forward the transport cannot take counts too.
        _ = m.report(.published(.forward, .failure(TransportError("not connected"))), now: Self.t0)
        #expect(m.stats.forwardsRefused == 2)
    }

    @Test func broadcastNeverForwards() {
        var (m, _) = Slots.worker(loaded: [0, 1, 3])
        _ = m.report(.committed(syncMicroseconds: nil, store: StoreStatus(), fenced: [3]), now: Self.t0)
        #expect(m.handle(Slots.schedule(Slots.devices[3], "x"), now: Self.t0).isEmpty)
        #expect(m.stats.commandsForwarded == 0 && m.stats.commandsForOtherSlots == 1)
    }
}
