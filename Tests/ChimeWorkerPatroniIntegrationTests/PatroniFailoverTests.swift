import ChimeCore
import ChimeMQTT
import ChimePostgres
import ChimeSupport
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// Slot mode on PostgreSQL as production runs it highly available: Patroni over etcd
/// (TestPatroni), `synchronous_mode` on, and no human in the failover. Two chimeds share 8 slots
/// (default lease TTL) behind a real mosquitto while schedules flow; the leader node dies with
/// `kill -9` (Patroni, PostgreSQL and its backends at once), or hangs; Patroni promotes the
/// synchronous standby by itself; the workers serve again without a restart, and every
/// acknowledged command is there, once.
///
/// Run by `make test` in PostgreSQL's phase (the Makefile's POSTGRES_TESTS), which installs Patroni
/// and etcd: without them the test fails and says so, it is never skipped.
@Suite(.serialized) struct PatroniFailoverTests {
    static let slots = 8

    /// How the leader's node fails.
    enum Failure: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// `kill -9` of every process of the node: its connections are reset, and its ports
        /// refuse new ones at once.
        case killed
        /// SIGSTOP of every process of the node, as a machine that hangs or is cut off: its
        /// connections stay open and the kernel still accepts new ones, but nothing answers
        /// (chimed's statement and connect timeouts decide). Thawed at the end, it must not take
        /// anything back: Patroni demotes it.
        case frozen

        var testDescription: String { rawValue }
    }

    /// A device in each slot, found by its crc32.
    static let devices: [String] = {
        var found: [Int: String] = [:]
        var i = 0
        while found.count < slots {
            let device = "ha\(i)"
            let slot = Int(crc32(Array(device.utf8)) % UInt32(slots))
            if found[slot] == nil { found[slot] = device }
            i += 1
        }
        return (0..<slots).map { found[$0]! }
    }()

    static func seconds(_ duration: Duration) -> String {
        String(format: "%.1f s", ChimeSupport.seconds(duration))
    }

    /// A schedule sent with its own Correlation Data and `requestId`, so that sending it again is
    /// the same command (PROTOCOL.md, "Idempotency").
    struct Command: Sendable, Hashable {
        var device: String
        var id: String

        var topic: String { "chime/\(device)/cmd/schedule" }
        var payload: [UInt8] { Array(#"{"id":"\#(id)","fireDate":"2099-01-01T09:00:00Z","requestId":"\#(id)"}"#.utf8) }
        var correlation: [UInt8] { Array(id.utf8) }
    }

    /// The broker, the Patroni cluster, two workers in slot mode and a client that sees the
    /// replies, the workers' stats and the deliveries.
    final class World: Sendable {
        let patroni: TestPatroni
        let broker: TestBroker
        let data: TemporaryDirectory
        let client: CommandClient
        let workers: [Chimed]
        let replies = "test/patroni/replies"

        init() async throws {
            patroni = try await TestPatroni.start()
            broker = try await TestBroker.start()
            data = try TemporaryDirectory(prefix: "chime-patroni-workers")
            client = try await CommandClient(broker: broker)
            try await client.requester.subscribe(replies, qos: 1, timeout: .seconds(10))
            try await client.requester.subscribe("chime/$worker/+/stats", qos: 0, timeout: .seconds(10))
            try await client.requester.subscribe("chime/+/notifications", qos: 1, timeout: .seconds(10))
            let (broker, data, uri) = (broker, data, patroni.uri)
            workers = try ["w1", "w2"].map { name in
                try Chimed(
                    broker: broker,
                    dataDirectory: data.appending(name),
                    workerId: name,
                    extra: ["--store", uri, "--slots", "\(PatroniFailoverTests.slots)", "--log-level", "info"]
                )
            }
            for worker in workers { try await worker.start() }
        }

        func stop() async {
            client.stop()
            for worker in workers {
                worker.process.kill()
                await worker.process.waitForExit(timeout: .seconds(10))
            }
            await broker.stop()
            await patroni.stop()
        }

        /// Publishes `command` (again, if sent before: the same bytes and Correlation Data).
        func publish(_ command: Command) async throws {
            var properties = MQTTPublishProperties()
            properties.responseTopic = replies
            properties.correlationData = command.correlation
            try await client.requester.publish(
                topic: command.topic,
                payload: command.payload,
                qos: 1,
                properties: properties,
                timeout: .seconds(5)
            )
        }

        /// Every reply received for `command`, in arrival order.
        func answers(_ command: Command) -> [JSONObject] {
            client.received.withLock {
                $0.filter { $0.topic == replies && $0.correlationData == command.correlation }
            }
            .compactMap { (try? JSON(parsing: $0.payload))?.objectValue }
        }

        /// Sends `command` and waits for its next reply.
        func send(_ command: Command, timeout: Duration) async throws -> JSONObject? {
            let before = answers(command).count
            try await publish(command)
            var reply: JSONObject?
            _ = await eventually(timeout: timeout) {
                let all = answers(command)
                reply = all.count > before ? all[before] : nil
                return reply != nil
            }
            return reply
        }

        /// The slots each worker said it served in its latest stats (every second).
        func served() -> [String: Set<Int>] { client.slotsServed() }

        /// Waits until both workers' latest stats show every slot served, each by one of them,
        /// half each.
        func waitUntilBalanced(timeout: Duration) async -> Bool {
            await client.waitUntilBalanced(among: ["w1", "w2"], slots: PatroniFailoverTests.slots, timeout: timeout)
        }

        /// The leases as `node` holds them: slot → epoch.
        func epochs(on node: TestPatroni.Node) throws -> [Int: Int64] {
            let connection = try PostgresConnection(node.uri)
            defer { connection.close() }
            var epochs: [Int: Int64] = [:]
            for row in try connection.execute("SELECT slot, epoch FROM chime_lease").rows {
                epochs[Int(try row.int64(0))] = try row.int64(1)
            }
            return epochs
        }
    }

    /// Schedules that flow, round-robin over a device in each slot, one at a time: each that gets
    /// an `ok` is kept, with when it was sent and answered.
    final class Traffic: Sendable {
        typealias Acknowledged = (command: Command, sentAt: ContinuousClock.Instant, at: ContinuousClock.Instant)
        let acknowledged = Shared<[Acknowledged]>([])
        let sent = Shared<[Command]>([])
        private let task: Task<Void, Never>

        init(_ world: World) {
            let (acknowledged, sent) = (acknowledged, sent)
            task = Task {
                var k = 0
                while !Task.isCancelled {
                    let command = Command(
                        device: PatroniFailoverTests.devices[k % PatroniFailoverTests.slots],
                        id: "c\(k)"
                    )
                    k += 1
                    sent.withLock { $0.append(command) }
                    let sentAt = ContinuousClock.now
                    if let reply = try? await world.send(command, timeout: .seconds(3)), reply.isOK {
                        acknowledged.withLock { $0.append((command, sentAt, .now)) }
                    }
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
        }

        /// The `ok`s of commands sent after `instant`.
        func acknowledged(sentAfter instant: ContinuousClock.Instant) -> [Acknowledged] {
            acknowledged.value.filter { $0.sentAt > instant }
        }

        func stop() async {
            task.cancel()
            _ = await task.value
        }
    }

    /// Every command of `traffic` that got an `ok` (in time or late) is listed, once, and nothing
    /// else but `others`; each sent again is recognised as applied already (the deduplication
    /// window came through with the journal). Returns what each device lists.
    @discardableResult
    static func everyAcknowledgedIsThereOnce(
        _ world: World,
        _ traffic: Traffic,
        others: [String] = [],
        atLeast: Int
    ) async throws -> [String: [String]] {
        let all = traffic.sent.value
        let promised = Set(all.filter { command in world.answers(command).contains { $0.isOK } })
        #expect(promised.count >= atLeast)
        var listed: [String: [String]] = [:]
        for device in devices {
            listed[device] = try await world.client.listedIds(device)
        }
        for device in devices {
            let ids = listed[device] ?? []
            #expect(Set(ids).count == ids.count, "\(device) lists an id twice: \(ids)")
            let missing = promised.filter { $0.device == device && !ids.contains($0.id) }.map(\.id)
            #expect(missing.isEmpty, "\(device): acknowledged but not on the new primary: \(missing)")
            let unknown = Set(ids).subtracting(all.filter { $0.device == device }.map(\.id) + others)
            #expect(unknown.isEmpty, "\(device): \(unknown)")
        }
        for command in promised.sorted(by: { $0.id < $1.id }) {
            let reply = try await world.send(command, timeout: .seconds(10))
            #expect(reply?["result"]?.objectValue?["duplicate"] == true, "\(command.id): \(String(describing: reply))")
        }
        for device in devices {
            #expect(try await world.client.listedIds(device) == listed[device])
        }
        return listed
    }

    @Test(arguments: Failure.allCases)
    func slotWorkersServeAgainAfterPatroniPromotesTheSynchronousStandby(_ failure: Failure) async throws {
        let world = try await World()
        defer { Task { await world.stop() } }
        let (leader, standby) = try await world.patroni.waitForLeaderAndSynchronousReplica()
        // The standby is synchronous in PostgreSQL's own words: the leader's commits wait for it.
        let sql = try PostgresConnection(leader.uri)
        let replication = try sql.execute("SELECT application_name, sync_state FROM pg_stat_replication").rows
        sql.close()
        #expect(try replication.map { [try $0.text(0), try $0.text(1)] } == [[standby.name, "sync"]])
        let timeline = world.patroni.state()?.leader?.timeline
        #expect(await world.waitUntilBalanced(timeout: .seconds(60)), "\(world.served())")

        let traffic = Traffic(world)
        let acknowledged = traffic.acknowledged
        #expect(await eventually(timeout: .seconds(60)) { acknowledged.value.count >= 40 }, "\(world.workers[0].log)")

        // A notification due while no primary runs, to be delivered after the failover.
        let across = Self.devices[0]
        try await world.client.ok(across, .schedule, #"{"id":"across","after":12,"alertBody":"after"}"#)
        let epochsBefore = try world.epochs(on: leader)

        // The leader's machine dies or hangs: Patroni, PostgreSQL and its backends at once.
        switch failure {
        case .killed: await world.patroni.kill(leader)
        case .frozen: world.patroni.freeze(leader)
        }
        let failedAt = ContinuousClock.now
        let failedWallClock = Date()
        let atFailure = acknowledged.value.count
        let promoted = try await world.patroni.waitForLeader(other: leader, timeout: .seconds(120))
        let promotedAt = ContinuousClock.now
        #expect(promoted === standby, "\(promoted.name) took over, not the synchronous standby \(standby.name)")
        // A new timeline: the promoted standby's history forks from the dead leader's there.
        let newTimeline = await eventually(timeout: .seconds(30)) {
            (world.patroni.state()?.leader?.timeline ?? 0) > (timeline ?? .max)
        }
        #expect(newTimeline, "\(String(describing: world.patroni.state()))")

        // The workers, never restarted, take commands again on the promoted standby: a command sent
        // after the failure can only have been committed there.
        let servedAgain = await eventually(timeout: .seconds(120), every: .milliseconds(50)) {
            acknowledged.value.contains { $0.sentAt > failedAt }
        }
        let firstAfter = acknowledged.value.first { $0.sentAt > failedAt }
        // Nothing is acknowledged while there is no primary (the dead leader's key lives on for
        // ttl − loop_wait, 18 s, at least).
        let withoutPrimary = acknowledged.value.filter { $0.sentAt > failedAt && $0.at - failedAt < .seconds(10) }
        #expect(withoutPrimary.isEmpty, "acknowledged with no primary: \(withoutPrimary.map(\.command.id))")
        #expect(servedAgain, "no ok after the failover:\n\(world.workers.map { $0.log.suffix(4000) })")
        let more = await eventually(timeout: .seconds(60)) {
            acknowledged.value.filter { $0.sentAt > failedAt }.count >= 24
        }
        await traffic.stop()
        #expect(more, "too few ok after the failover: \(acknowledged.value.count - atFailure)")
        #expect(world.workers.allSatisfy { $0.process.isRunning })
        if let firstAfter {
            print(
                "failover, leader \(failure): Patroni promoted \(promoted.name) \(Self.seconds(promotedAt - failedAt)) "
                    + "after \(leader.name) was \(failure); first ok \(Self.seconds(firstAfter.at - failedAt)) after it; "
                    + "\(atFailure) acknowledged before, \(acknowledged.value.count) in all"
            )
        }
        #expect(await world.waitUntilBalanced(timeout: .seconds(60)), "\(world.served())")
        // Every slot was loaded again, from the promoted standby, under a new lease.
        let epochsAfter = try world.epochs(on: promoted)
        #expect(epochsAfter.count == Self.slots)
        for (slot, epoch) in epochsBefore {
            #expect((epochsAfter[slot] ?? 0) > epoch, "slot \(slot): \(epoch) → \(epochsAfter[slot] ?? 0)")
        }

        // The notification due during the outage is delivered (its one occurrence, with one
        // fireId) by a worker that loaded its slot from the promoted standby.
        let delivered = await world.client.waitForDelivery(across, id: "across", timeout: .seconds(60))
        #expect(delivered?["alertBody"] == "after")
        let fireIds = Set(
            world.client.deliveries(across).filter { $0["id"] == "across" }.compactMap { $0["fireId"]?.stringValue }
        )
        #expect(fireIds.count == 1, "\(fireIds)")
        // Due 12 s after it was scheduled, it fell due while no worker could serve its slot (the
        // leader key outlives a dead leader by at least ttl − loop_wait, 18 s): it went out late.
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let firedAt = delivered?["firedAt"]?.stringValue.flatMap { formatter.date(from: $0) }
        #expect(firedAt.map { $0 > failedWallClock } == true, "\(String(describing: delivered))")
        #expect(delivered?["late"] == true, "\(String(describing: delivered))")

        // Every command that got an `ok` (in time or late) is there, once; nothing else is.
        let listed = try await Self.everyAcknowledgedIsThereOnce(
            world,
            traffic,
            others: ["across"],
            atLeast: atFailure + 24
        )

        if failure == .frozen {
            // Thawed, the old leader finds its key gone: Patroni demotes it, and it takes nothing back.
            world.patroni.thaw(leader)
            let demoted = await eventually(timeout: .seconds(60), every: .milliseconds(250)) {
                leader.status().map { !$0.isPrimary } ?? false
            }
            #expect(demoted, "\(world.patroni.report())")
            #expect(world.patroni.leader() === promoted, "\(world.patroni.report())")
            // Commands are acknowledged as before, and are there with everything acknowledged earlier.
            var thawed: [Command] = []
            for k in 0..<Self.slots * 2 {
                let command = Command(device: Self.devices[k % Self.slots], id: "t\(k)")
                let reply = try await world.send(command, timeout: .seconds(30))
                #expect(reply?.isOK == true, "\(command.id): \(String(describing: reply))\n\(world.patroni.report())")
                if reply?.isOK != true { break }
                thawed.append(command)
            }
            for device in Self.devices {
                let ids = Set(try await world.client.listedIds(device))
                let expected = Set((listed[device] ?? []) + thawed.filter { $0.device == device }.map(\.id))
                #expect(ids == expected, "\(device)")
            }
        }
        // Stopped here rather than only by the deferred task, which may not run before the test
        // process exits: the nodes' data directories go with the cluster.
        await world.stop()
    }

    /// A planned switchover under a steady load (`patronictl switchover`, as an operator runs
    /// one): the workers, never restarted, follow the new primary; nothing acknowledged is lost or
    /// applied twice; the pause, the longest time a command sent waited for its `ok`, is printed.
    @Test func aSwitchoverUnderLoadLosesNothing() async throws {
        let world = try await World()
        defer { Task { await world.stop() } }
        let (leader, standby) = try await world.patroni.waitForLeaderAndSynchronousReplica()
        #expect(await world.waitUntilBalanced(timeout: .seconds(60)), "\(world.served())")
        let traffic = Traffic(world)
        #expect(await eventually(timeout: .seconds(60)) { traffic.acknowledged.value.count >= 40 })

        let started = ContinuousClock.now
        let atSwitchover = traffic.acknowledged.value.count
        try await world.patroni.switchover(from: leader, to: standby)
        let promoted = try await world.patroni.waitForLeader(other: leader, timeout: .seconds(60))
        let promotedAt = ContinuousClock.now
        #expect(promoted === standby)
        let more = await eventually(timeout: .seconds(60)) {
            traffic.acknowledged(sentAfter: promotedAt).count >= 24
        }
        await traffic.stop()
        #expect(more, "too few ok after the switchover:\n\(world.workers.map { $0.log.suffix(4000) })")
        #expect(world.workers.allSatisfy { $0.process.isRunning })
        // The old leader runs on, as the new primary's standby.
        let demoted = await eventually(timeout: .seconds(60), every: .milliseconds(250)) {
            leader.status().map { $0.state == "running" && !$0.isPrimary } ?? false
        }
        #expect(demoted, "\(world.patroni.report())")

        // The pause: the longest time without an `ok`, from the last one before the switchover.
        let times = traffic.acknowledged.value.map(\.at).sorted()
        let from = times.lastIndex { $0 < started } ?? 0
        let pause = zip(times[from...], times[from...].dropFirst()).map { $1 - $0 }.max() ?? .zero
        print(
            "switchover under load: \(promoted.name) primary \(Self.seconds(promotedAt - started)) after "
                + "patronictl began; longest time without an ok \(Self.seconds(pause)); \(atSwitchover) "
                + "acknowledged before, \(traffic.acknowledged.value.count) in all"
        )
        try await Self.everyAcknowledgedIsThereOnce(world, traffic, atLeast: atSwitchover + 24)
        await world.stop()
    }
}
