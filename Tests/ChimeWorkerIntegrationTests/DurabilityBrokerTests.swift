import ChimeCore
import ChimeMQTT
import ChimeSupport
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// mosquitto stopped and started again under a running chimed: what fell due meanwhile is delivered
/// after the reconnection, flagged `late`, as each notification's `misfire` says; and commands in
/// flight when the broker goes away are never acknowledged and then lost.
@Suite(.serialized) struct DurabilityBrokerTests {
    /// A delivery's occurrence index and flags.
    struct Seen: CustomStringConvertible {
        var index: Int
        var late: Bool
        var missed: Int
        var occurrence: Instant
        var fireDate: Instant
        var firedAt: Instant

        init?(_ d: JSONObject) {
            guard case .int(let index)? = d["occurrence"], case .bool(let late)? = d["late"],
                case .int(let missed)? = d["missed"],
                case .instant(let occurrence)? = d["occurrenceDate"]?.stringValue.flatMap(DateTimeValue.init(iso8601:)),
                case .instant(let fireDate)? = d["fireDate"]?.stringValue.flatMap(DateTimeValue.init(iso8601:)),
                case .instant(let firedAt)? = d["firedAt"]?.stringValue.flatMap(DateTimeValue.init(iso8601:))
            else { return nil }
            self.index = Int(index)
            self.late = late
            self.missed = Int(missed)
            self.occurrence = occurrence
            self.fireDate = fireDate
            self.firedAt = firedAt
        }

        var description: String { "#\(index)\(late ? " late" : "")\(missed > 0 ? " missed \(missed)" : "")" }
    }

    @Test(arguments: StoreKind.allCases)
    func whatFellDueWhileTheBrokerWasDownIsDeliveredByMisfirePolicy(store: StoreKind) async throws {
        let f = try await WorkerFixture.start(brokerConfiguration: .init(persistence: true), store: store)
        defer { Task { await f.stop() } }
        // A persistent session: the broker keeps the subscription and queues deliveries for it
        // across its own restart, whichever of chimed and this client reconnects first.
        let c = try await CommandClient(broker: f.broker, clientId: "watcher-\(f.workerId)", persistent: true)
        defer { c.stop() }
        let device = "b1"
        try await c.subscribeDeliveries(device)

        // Every 2 s, 12 times; the broker is down for several occurrences in the middle, and the
        // series goes on well past the worker's reconnection (its attempts, 0.5 s doubling to 5 s,
        // may come up to 5 s after the broker is back).
        let count = 12
        for policy in ["coalesce", "skip", "all"] {
            try await c.ok(
                device,
                .schedule,
                #"{"id":"\#(policy)","after":1,"rrule":"FREQ=SECONDLY;INTERVAL=2;COUNT=\#(count)","misfire":"\#(policy)"}"#
            )
        }
        try await c.ok(device, .schedule, #"{"id":"once","after":4}"#)
        for policy in ["coalesce", "skip", "all"] {
            try #require(await c.waitForDelivery(device, id: policy) != nil)
        }
        await f.broker.stop()
        let down = wallClock()
        try await Task.sleep(for: .seconds(5))
        try await f.broker.restart()
        let up = wallClock()

        // Wait for the end of the series.
        let finished = await eventually(timeout: .seconds(40), every: .milliseconds(200)) {
            ["coalesce", "skip", "all"].allSatisfy { policy in
                c.deliveries(device).contains { $0["id"]?.stringValue == policy && $0["last"] == true }
            } && c.deliveries(device).contains { $0["id"] == "once" }
        }
        #expect(finished, "\(c.deliveries(device).map { JSON.object($0).text })")
        func seen(_ id: String) -> [Seen] {
            c.deliveries(device).filter { $0["id"]?.stringValue == id }.compactMap(Seen.init)
        }
        // During the outage: occurrences due after the broker went down and more than a second
        // before it was back (the worker cannot have been connected for them).
        let firstOccurrence = try #require(seen("all").map(\.occurrence).min())
        let outage = (1...count).filter { k in
            let due = firstOccurrence.adding(seconds: Int64(2 * (k - 1)))
            return due > down && due.adding(seconds: 1) < up
        }
        try #require(outage.count >= 2, "the outage \(down)...\(up) covers too few occurrences: \(outage)")
        let context = "outage \(down)...\(up), missed \(outage)"

        // Every delivery says whether it was late, truthfully.
        for d in c.deliveries(device).compactMap(Seen.init) {
            #expect(d.late == (d.firedAt.milliseconds - d.fireDate.milliseconds >= 1000), "\(d); \(context)")
        }

        // all: every occurrence, the missed ones late, oldest first.
        let all = seen("all")
        #expect(Set(all.map(\.index)) == Set(1...count), "all: \(all); \(context)")
        for k in outage {
            #expect(all.contains { $0.index == k && $0.late }, "all: #\(k) not delivered late: \(all); \(context)")
        }
        let afterReconnect = all.filter { $0.firedAt >= up }.map(\.index)
        #expect(afterReconnect == afterReconnect.sorted(), "all, after the reconnection: \(afterReconnect)")

        // coalesce: one late delivery stands for the missed ones; none of them on its own.
        let coalesce = seen("coalesce")
        let standIn = coalesce.filter { $0.missed > 0 }
        #expect(standIn.count == 1, "coalesce: \(coalesce); \(context)")
        if let s = standIn.first {
            // For the newest occurrence due when the worker was back: late, unless that one had
            // just fallen due (PROTOCOL.md section 7).
            #expect(s.late || s.fireDate.adding(seconds: 2) >= up, "coalesce: \(coalesce); \(context)")
            let covered = Set((s.index - s.missed)...s.index)
            #expect(covered.isSuperset(of: outage), "coalesce: \(coalesce); \(context)")
            let alone = coalesce.filter { covered.contains($0.index) && $0.index != s.index }
            #expect(alone.isEmpty, "coalesce: \(coalesce); \(context)")
        }
        let coveredByCoalesce = coalesce.reduce(into: Set<Int>()) { set, d in
            for k in (d.index - d.missed)...d.index { set.insert(k) }
        }
        #expect(coveredByCoalesce == Set(1...count), "coalesce: \(coalesce)")

        // skip: none of the missed ones; the series goes on to its end, on time.
        let skip = seen("skip")
        #expect(Set(skip.map(\.index)).isDisjoint(with: outage), "skip: \(skip); \(context)")
        #expect(skip.allSatisfy { !$0.late && $0.missed == 0 }, "skip: \(skip)")
        #expect(skip.contains { $0.index == count }, "skip: \(skip)")

        // A one-shot due during the outage: delivered once back, late.
        let once = seen("once")
        #expect(once.count >= 1 && once.allSatisfy(\.late), "once: \(once); \(context)")
    }

    /// Commands in flight when the broker stops (SIGTERM: it saves its sessions) or dies (SIGKILL:
    /// it loses what changed since its last save): none is acknowledged and then lost. The client
    /// does what PROTOCOL.md tells one without a reply to do: it sends the same command again
    /// (scheduling by id is idempotent), until it gets an answer.
    @Test(arguments: ["stop", "kill"], StoreKind.allCases)
    func commandsInFlightWhenTheBrokerGoesAwayAreNeverAcknowledgedAndLost(
        how: String,
        store: StoreKind
    ) async throws {
        let f = try await WorkerFixture.start(brokerConfiguration: .init(persistence: true), store: store)
        defer { Task { await f.stop() } }
        let c = try await CommandClient(broker: f.broker, clientId: "sender-\(f.workerId)", persistent: true)
        defer { c.stop() }
        let device = "b2"
        let total = 300
        let acknowledged = Shared<Set<String>>([])
        let refused = Shared<[String]>([])
        let attempts = Shared(0)

        let sender = Task {
            await withTaskGroup(of: Void.self) { group in
                for i in 0..<total {
                    let id = "c\(i)"
                    group.addTask {
                        for _ in 0..<20 {
                            attempts.withLock { $0 += 1 }
                            do {
                                let reply = try await c.send(
                                    device,
                                    .schedule,
                                    #"{"id":"\#(id)","after":3600}"#,
                                    timeout: .seconds(4)
                                )
                                if reply.isOK {
                                    acknowledged.withLock { _ = $0.insert(id) }
                                } else {
                                    refused.withLock { $0.append("\(id): \(JSON.object(reply).text)") }
                                }
                                return
                            } catch {
                                // No connection, or no reply: send it again.
                                try? await Task.sleep(for: .milliseconds(250))
                            }
                        }
                    }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
        }
        // Let some commands through, then take the broker away in the middle of the stream.
        _ = await eventually { acknowledged.value.count >= 30 }
        if how == "stop" { await f.broker.stop() } else { await f.broker.kill() }
        try await Task.sleep(for: .seconds(2))
        try await f.broker.restart()
        await sender.value

        let ok = acknowledged.value
        #expect(refused.value.isEmpty, "\(refused.value)")
        #expect(ok.count == total, "\(total - ok.count) never acknowledged")
        let listed = Set(try await c.listedIds(device))
        #expect(ok.isSubset(of: listed), "acknowledged but not listed: \(ok.subtracting(listed).sorted())")

        // Durable, not only in memory.
        await f.killWorker()
        try await f.startWorker()
        let relisted = Set(try await c.listedIds(device))
        #expect(ok.isSubset(of: relisted), "acknowledged but lost: \(ok.subtracting(relisted).sorted())")
        print("broker \(how): \(ok.count) of \(total) acknowledged after \(attempts.value) attempts")
    }
}
