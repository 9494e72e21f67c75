import ChimeCore
import ChimeMQTT
import ChimePostgres
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// Slot mode with real processes: several chimeds on one PostgreSQL and one mosquitto, sharing 64
/// slots through leases (TTL 2 s, so that the tests take seconds), killed, paused, added and
/// stopped under load.
@Suite(.serialized) struct SlotWorkersTests {
    static let slots = 64
    static let ttl = 2

    /// One test's world: a broker, a PostgreSQL, the workers, a client that sees every delivery
    /// and every worker's stats.
    final class Cluster: Sendable {
        let broker: TestBroker
        let postgres: TestPostgres
        let data: TemporaryDirectory
        let workers = Mutex<[String: Chimed]>([:])
        let client: CommandClient
        /// `--routing`: broadcast (every worker gets every command) or slot.
        let routing: String

        init(routing: String = "broadcast") async throws {
            self.routing = routing
            broker = try await TestBroker.start()
            postgres = try await TestPostgres.start()
            data = try TemporaryDirectory(prefix: "chime-slots")
            client = try await CommandClient(broker: broker)
            try await client.requester.subscribe("chime/+/notifications", qos: 1, timeout: .seconds(10))
            try await client.requester.subscribe("chime/$worker/+/stats", qos: 0, timeout: .seconds(10))
        }

        func start(_ name: String) async throws {
            let chimed = try Chimed(
                broker: broker,
                dataDirectory: data.appending(name),
                workerId: name,
                extra: [
                    "--store", postgres.uri, "--slots", "\(SlotWorkersTests.slots)", "--lease-ttl",
                    "\(SlotWorkersTests.ttl)", "--log-level", "info", "--routing", routing,
                ]
            )
            workers.withLock { $0[name] = chimed }
            try await chimed.start()
        }

        func worker(_ name: String) -> Chimed { workers.withLock { $0[name]! } }

        func stop() async {
            client.stop()
            for chimed in workers.withLock({ Array($0.values) }) {
                chimed.process.kill()
                await chimed.process.waitForExit(timeout: .seconds(10))
            }
            await broker.stop()
            await postgres.stop()
        }

        /// The slots each worker said it served in its latest stats (every second).
        func served() -> [String: Set<Int>] { client.slotsServed() }

        /// Waits until the given workers' latest stats show every slot served between them, each
        /// slot once, with even shares.
        func waitUntilBalanced(among names: Set<String>, timeout: Duration = .seconds(40)) async -> Bool {
            await client.waitUntilBalanced(among: names, slots: SlotWorkersTests.slots, timeout: timeout)
        }

        /// Deliveries received for notification `id` of `device`.
        func deliveries(_ device: String, _ id: String) -> [JSONObject] {
            client.deliveries(device).filter { $0["id"]?.stringValue == id }
        }

        /// Runs the `chime` CLI against the broker: how it ended, standard output and error.
        func chime(_ arguments: [String]) async throws -> (end: ChildProcess.Termination?, output: [String]) {
            let process = try ChildProcess(try builtProduct("chime"), arguments: arguments + ["--broker", broker.url])
            try process.start()
            let end = await process.waitForExit(timeout: .seconds(30))
            return (end, process.standardOutputLines + process.standardErrorLines)
        }

        /// The store's rows, to check what each worker wrote.
        func query(_ sql: String) throws -> PostgresResult {
            let connection = try PostgresConnection(postgres.uri)
            defer { connection.close() }
            return try connection.execute(sql)
        }
    }

    /// A device in each slot, found by its crc32.
    static let devices: [String] = {
        var found: [Int: String] = [:]
        var i = 0
        while found.count < slots {
            let device = "dev\(i)"
            let slot = Int(crc32(Array(device.utf8)) % UInt32(slots))
            if found[slot] == nil { found[slot] = device }
            i += 1
        }
        return (0..<slots).map { found[$0]! }
    }()

    @Test(arguments: ["broadcast", "slot"])
    func threeWorkersShareTheSlotsAndAnswerEveryDeviceOnce(routing: String) async throws {
        let cluster = try await Cluster(routing: routing)
        defer { Task { await cluster.stop() } }
        for name in ["w1", "w2", "w3"] { try await cluster.start(name) }
        #expect(await cluster.waitUntilBalanced(among: ["w1", "w2", "w3"]), "\(cluster.served())")

        // A command for a device in every slot, each answered once, each delivered.
        for (k, device) in Self.devices.enumerated() {
            let result = try await cluster.client.ok(device, .schedule, #"{"id":"n\#(k)","after":2}"#)
            #expect(result["scheduled"] != nil)
        }
        for (k, device) in Self.devices.enumerated() {
            #expect(await cluster.client.waitForDelivery(device, id: "n\(k)") != nil, "\(device)")
        }
        // Each slot's journal was written under one lease, by the worker serving it.
        let writers = try cluster.query("SELECT slot, count(DISTINCT epoch) FROM chime_slot_journal GROUP BY slot")
        #expect(writers.rows.count == Self.slots)
        for row in writers.rows { #expect(try row.int64(1) == 1) }

        // chime status: the retained statuses say which worker serves which slots, each slot once,
        // and the probe of each worker is answered by a device in one of its own slots.
        let status = try await cluster.chime(["status", "--samples", "1", "--json"])
        #expect(status.end == .exited(0), "\(status.output)")
        var serving: [String: [Int]] = [:]
        for line in status.output {
            guard case .object(let o)? = try? JSON(parsing: line), let id = o["workerId"]?.stringValue,
                let s = o["status"]?.objectValue, s["slots"] == .int(Int64(Self.slots)),
                let ranges = s["serving"]?.stringValue
            else { continue }
            serving[id] = SlotRanges.slots(ranges, count: Self.slots)
            #expect(o["stats"]?.objectValue?["slotLoad"]?.objectValue?["count"] != nil, "\(line)")
        }
        #expect(serving.keys.sorted() == ["w1", "w2", "w3"], "\(status.output)")
        #expect(serving.values.flatMap { $0 }.sorted() == Array(0..<Self.slots), "\(serving)")
        let text = try await cluster.chime(["status", "--samples", "1"])
        #expect(text.output.filter { $0.hasPrefix("  slots ") }.count == 3, "\(text.output)")
        #expect(text.output.filter { $0.hasPrefix("  leaseRenew ") }.count == 3, "\(text.output)")
        #expect(!text.output.contains { $0.hasPrefix("  other ") }, "\(text.output)")
        for name in ["w1", "w2", "w3"] {
            let probe = try await cluster.chime(["status", "--worker", name, "--timeout", "5s"])
            #expect(probe.end == .exited(0), "\(probe.output)")
            #expect(probe.output.first?.hasPrefix("ready: worker \(name) is online (slots ") == true, "\(probe.output)")
        }
    }

    /// Routing by slot: each command reaches one worker through the shared subscription, and its
    /// slot's owner through the slot's topic when that worker is another: at most two broker
    /// deliveries a command with three workers (broadcast: three), each applied by one worker once.
    @Test func routedCommandsReachTheirOwnerInAtMostTwoDeliveries() async throws {
        let cluster = try await Cluster(routing: "slot")
        defer { Task { await cluster.stop() } }
        for name in ["w1", "w2", "w3"] { try await cluster.start(name) }
        #expect(await cluster.waitUntilBalanced(among: ["w1", "w2", "w3"]), "\(cluster.served())")
        let rounds = 3
        for round in 0..<rounds {
            for device in Self.devices {
                let reply = try await cluster.client.send(device, .device, "{}", timeout: .seconds(5))
                #expect(reply.isOK, "round \(round), \(device): \(reply)")
            }
        }
        let sent = rounds * Self.slots
        /// What the workers' latest stats count: commands handled, forwarded, left to another.
        func counted() -> (handled: Int, forwarded: Int, left: Int) {
            var latest: [String: JSONObject] = [:]
            for stats in cluster.client.received.withLock({ $0.filter { $0.topic.hasSuffix("/stats") } }) {
                guard let o = (try? JSON(parsing: stats.payload))?.objectValue, let id = o["workerId"]?.stringValue
                else { continue }
                latest[id] = o
            }
            func int(_ value: JSON?) -> Int { if case .int(let n)? = value { Int(n) } else { 0 } }
            return latest.values.reduce(into: (0, 0, 0)) { sum, o in
                sum.handled += o["commands"]?.objectValue?.reduce(0) { $0 + int($1.value) } ?? 0
                sum.forwarded += int(o["commandsForwarded"])
                sum.left += int(o["commandsForOtherSlots"])
            }
        }
        #expect(await eventually(timeout: .seconds(10)) { counted().handled >= sent }, "\(counted())")
        let (handled, forwarded, left) = counted()
        #expect(handled == sent, "each command applied by one worker: \(handled) of \(sent)")
        #expect(left == 0, "commands dropped: \(left)")
        #expect(forwarded > 0 && forwarded < sent, "forwarded \(forwarded) of \(sent)")
        let deliveries = Double(handled + forwarded + left) / Double(sent)
        #expect(deliveries <= 2, "\(deliveries) deliveries a command")

        // A command sent again as it was (same bytes and Correlation Data, as a client that got no
        // reply would) is recognised by its slot's owner, whichever worker the broker hands it to.
        let replies = "test/routed/replies"
        try await cluster.client.requester.subscribe(replies, qos: 1, timeout: .seconds(10))
        func send(_ device: String, _ k: Int) async throws -> JSONObject {
            let correlation = Array("again-\(k)".utf8)
            var properties = MQTTPublishProperties()
            properties.responseTopic = replies
            properties.correlationData = correlation
            let reply = cluster.client.requester.expectMessage {
                $0.topic == replies && $0.correlationData == correlation
            }
            try await cluster.client.requester.publish(
                topic: "chime/\(device)/cmd/schedule",
                payload: Array(#"{"id":"r\#(k)","after":3600}"#.utf8),
                qos: 1,
                properties: properties,
                timeout: .seconds(5)
            )
            return try JSON(parsing: try await reply.value(timeout: .seconds(10)).payload).objectValue ?? [:]
        }
        for (k, device) in Self.devices.enumerated().prefix(16) {
            let first = try await send(device, k)
            let again = try await send(device, k)
            #expect(first.isOK && first["result"]?.objectValue?["duplicate"] == nil, "\(first)")
            #expect(again["result"]?.objectValue?["duplicate"] == true, "\(again)")
            #expect(try await cluster.client.listedIds(device).filter { $0 == "r\(k)" }.count == 1)
        }
        print("routed: \(forwarded) of \(sent) commands forwarded, \(deliveries) deliveries a command")
    }

    /// The store keeps the number of slots it was created with: a worker given another refuses to
    /// start, with both numbers, and the others go on.
    @Test func aWorkerWithAnotherNumberOfSlotsRefusesToStart() async throws {
        let cluster = try await Cluster()
        defer { Task { await cluster.stop() } }
        try await cluster.start("w1")
        let odd = try Chimed(
            broker: cluster.broker,
            dataDirectory: cluster.data.appending("odd"),
            workerId: "odd",
            extra: ["--store", cluster.postgres.uri, "--slots", "32"]
        )
        try odd.process.start()
        #expect(await odd.process.waitForExit(timeout: .seconds(20)) == .exited(1), "\(odd.log)")
        #expect(odd.log.contains("the store has \(Self.slots) slots; --slots 32 was given"), "\(odd.log)")
        #expect(await cluster.waitUntilBalanced(among: ["w1"]), "\(cluster.served())")
    }

    @Test(arguments: ["broadcast", "slot"])
    func aKilledWorkersSlotsAreServedAgainAndNothingAcknowledgedIsLost(routing: String) async throws {
        let cluster = try await Cluster(routing: routing)
        defer { Task { await cluster.stop() } }
        for name in ["w1", "w2", "w3"] { try await cluster.start(name) }
        #expect(await cluster.waitUntilBalanced(among: ["w1", "w2", "w3"]), "\(cluster.served())")
        let victimSlots = cluster.served()["w2"] ?? []
        #expect(!victimSlots.isEmpty)

        // Load on every slot: one-shots due 3 s later; the ones acknowledged must all arrive.
        let acknowledged = Mutex<[(device: String, id: String)]>([])
        let loading = Task {
            var k = 0
            while !Task.isCancelled {
                let device = Self.devices[k % Self.slots]
                let id = "l\(k)"
                if let reply = try? await cluster.client.send(
                    device,
                    .schedule,
                    #"{"id":"\#(id)","after":3}"#,
                    timeout: .seconds(2)
                ),
                    reply.isOK
                {
                    acknowledged.withLock { $0.append((device, id)) }
                }
                k += 1
            }
        }
        try await Task.sleep(for: .seconds(2))
        let victim = cluster.worker("w2")
        victim.process.kill()
        await victim.process.waitForExit(timeout: .seconds(10))
        let killedAt = ContinuousClock.now

        // The other slots answer throughout: with routing by slot, the dead worker left the shared
        // subscription with its connection (a persistent session would keep its share of every
        // slot's commands queued until it came back).
        let others = (0..<Self.slots).filter { !victimSlots.contains($0) }
        var unanswered: [Int] = []
        for k in 0..<30 {
            let slot = others[k * 7 % others.count]
            let reply = try? await cluster.client.send(Self.devices[slot], .device, "{}", timeout: .seconds(2))
            if reply?.isOK != true { unanswered.append(slot) }
        }
        #expect(unanswered.isEmpty, "\(routing): slots of live workers unanswered after the kill: \(unanswered)")

        // Its slots answer again: a command for a device in each, within 2 × TTL plus loading.
        var servedAgain: [Int: Duration] = [:]
        while servedAgain.count < victimSlots.count, ContinuousClock.now - killedAt < .seconds(30) {
            for slot in victimSlots.sorted() where servedAgain[slot] == nil {
                if let reply = try? await cluster.client.send(
                    Self.devices[slot],
                    .device,
                    "{}",
                    timeout: .milliseconds(300)
                ),
                    reply.isOK
                {
                    servedAgain[slot] = ContinuousClock.now - killedAt
                }
            }
        }
        loading.cancel()
        _ = await loading.result
        #expect(
            servedAgain.count == victimSlots.count,
            "slots not served again: \(victimSlots.subtracting(servedAgain.keys))"
        )
        let slowest = servedAgain.values.max() ?? .zero
        // 2 × TTL for the leases to expire and be taken, one round (TTL / 3) to notice, loading.
        #expect(slowest <= .seconds(2 * Self.ttl) + .seconds(3), "slowest slot back after \(slowest)")

        // Everything acknowledged is delivered (late, by misfire policy, for the moved slots).
        let promised = acknowledged.withLock { $0 }
        #expect(promised.count >= 20, "too little load to tell: \(promised.count)")
        let delivered = await eventually(timeout: .seconds(30), every: .milliseconds(250)) {
            promised.allSatisfy { !cluster.deliveries($0.device, $0.id).isEmpty }
        }
        let missing = promised.filter { cluster.deliveries($0.device, $0.id).isEmpty }
        #expect(delivered, "\(missing.count) of \(promised.count) acknowledged never delivered: \(missing.prefix(10))")
        // Every delivery carries a fireId, and repeats of one (at least once) keep it.
        for (device, id) in promised {
            let fireIds = Set(cluster.deliveries(device, id).compactMap { $0["fireId"]?.stringValue })
            #expect(fireIds.count == 1, "\(device)/\(id): \(fireIds)")
        }
        #expect(await cluster.waitUntilBalanced(among: ["w1", "w3"]), "\(cluster.served())")
    }

    @Test func aPausedWorkerAnswersAndWritesNothingForTheSlotsItLost() async throws {
        let cluster = try await Cluster()
        defer { Task { await cluster.stop() } }
        for name in ["w1", "w2"] { try await cluster.start(name) }
        #expect(await cluster.waitUntilBalanced(among: ["w1", "w2"]), "\(cluster.served())")
        let paused = cluster.worker("w1")
        let epochs = try Dictionary(
            uniqueKeysWithValues: cluster.query("SELECT slot, epoch FROM chime_lease WHERE owner = 'w1'").rows.map {
                row throws(PostgresError) in (Int(try row.int64(0)), try row.int64(1))
            }
        )
        #expect(Set(epochs.keys) == cluster.served()["w1"])
        let replies = "test/paused/replies"
        try await cluster.client.requester.subscribe(replies, qos: 1, timeout: .seconds(10))
        let devices = epochs.keys.sorted().map { Self.devices[$0] }
        /// The same command each time, as a client resends one it got no reply to: same bytes, same
        /// Correlation Data.
        func send(_ k: Int) async throws {
            var properties = MQTTPublishProperties()
            properties.responseTopic = replies
            properties.correlationData = Array("p\(k)".utf8)
            try await cluster.client.requester.publish(
                topic: "chime/\(devices[k])/cmd/schedule",
                payload: Array(#"{"id":"p\#(k)","after":600}"#.utf8),
                qos: 1,
                properties: properties,
                timeout: .seconds(5)
            )
        }
        func answers(_ k: Int, _ prefix: String = "p") -> [JSONObject] {
            cluster.client.received.withLock {
                $0.filter { $0.topic == replies && $0.correlationData == Array("\(prefix)\(k)".utf8) }
            }
            .compactMap { (try? JSON(parsing: $0.payload))?.objectValue }
        }
        /// The rows written under w1's leases so far.
        func writtenUnderTheOldLeases() throws -> Int64 {
            let pairs = epochs.map { "(\($0.key), \($0.value))" }.joined(separator: ",")
            let rows = try cluster.query("SELECT count(*) FROM chime_slot_journal WHERE (slot, epoch) IN (\(pairs))")
            return try rows.rows.first?.int64(0) ?? -1
        }

        // SIGSTOP past its leases. Its commands arrive meanwhile: its MQTT library holds them.
        paused.process.signal(SIGSTOP)
        let writtenBefore = try writtenUnderTheOldLeases()
        for k in devices.indices { try await send(k) }
        // And reads, which need no commit: answered at once by whoever serves the slot.
        for k in devices.indices {
            var properties = MQTTPublishProperties()
            properties.responseTopic = replies
            properties.correlationData = Array("r\(k)".utf8)
            try await cluster.client.requester.publish(
                topic: "chime/\(devices[k])/cmd/list",
                payload: Array("{}".utf8),
                qos: 1,
                properties: properties,
                timeout: .seconds(5)
            )
        }
        #expect(await cluster.waitUntilBalanced(among: ["w2"], timeout: .seconds(20)), "\(cluster.served())")
        // Unanswered, the client sends them again: w2 serves the slots now and applies them.
        for k in devices.indices { try await send(k) }
        #expect(await eventually(timeout: .seconds(10)) { devices.indices.allSatisfy { answers($0).count == 1 } })

        // SIGCONT: w1 drops the slots whose leases expired before it handles what it held.
        paused.process.signal(SIGCONT)
        #expect(await cluster.waitUntilBalanced(among: ["w1", "w2"]), "\(cluster.served())")
        // Sent a third time, each is recognised as applied already, by whichever worker serves it.
        for k in devices.indices { try await send(k) }
        #expect(await eventually(timeout: .seconds(10)) { devices.indices.allSatisfy { answers($0).count == 2 } })
        for k in devices.indices {
            let all = answers(k)
            #expect(all.first?["ok"] == true && all.first?["result"]?.objectValue?["duplicate"] == nil, "\(all)")
            #expect(all.last?["result"]?.objectValue?["duplicate"] == true, "p\(k): \(all)")
        }
        // w1 answered nothing it held while paused, not even the reads (it dropped the expired
        // slots before it handled them), and the store has nothing more under the leases it lost.
        try await Task.sleep(for: .seconds(1))
        #expect(devices.indices.allSatisfy { answers($0).count == 2 })
        let staleReads = devices.indices.flatMap { answers($0, "r") }
        #expect(staleReads.isEmpty, "answered after the leases expired: \(staleReads)")
        #expect(try writtenUnderTheOldLeases() == writtenBefore)
    }

    /// The store killed under running workers: every commit and lease call fails; the workers drop
    /// their slots (memory is no longer known to match the store) and, once PostgreSQL is back,
    /// take their own leases again at once (a new epoch) and load the slots from it.
    @Test func theStoreKilledUnderTheWorkersLosesNothingAndEverySlotIsServedAgain() async throws {
        let cluster = try await Cluster()
        defer { Task { await cluster.stop() } }
        for name in ["w1", "w2"] { try await cluster.start(name) }
        #expect(await cluster.waitUntilBalanced(among: ["w1", "w2"]), "\(cluster.served())")
        for (k, device) in Self.devices.enumerated() {
            try await cluster.client.ok(device, .schedule, #"{"id":"s\#(k)","after":3600}"#)
        }
        await cluster.postgres.kill()
        // Meanwhile nothing is acknowledged: a command gets `unavailable` or no reply.
        let during = try? await cluster.client.send(
            Self.devices[0],
            .schedule,
            #"{"id":"x","after":3600}"#,
            timeout: .seconds(2)
        )
        #expect(during?.isOK != true, "acknowledged with the store down: \(String(describing: during))")
        try await Task.sleep(for: .seconds(1))
        try await cluster.postgres.restart()
        let back = ContinuousClock.now
        // Every slot answers again; a worker's own leases are taken again without waiting for them
        // to expire (so well within one TTL of the first round after the restart).
        var answered: Set<Int> = []
        while answered.count < Self.slots, ContinuousClock.now - back < .seconds(30) {
            for slot in 0..<Self.slots where !answered.contains(slot) {
                if let reply = try? await cluster.client.send(
                    Self.devices[slot],
                    .list,
                    "{}",
                    timeout: .milliseconds(300)
                ),
                    reply.isOK
                {
                    answered.insert(slot)
                }
            }
        }
        #expect(answered.count == Self.slots, "not served again: \(Set(0..<Self.slots).subtracting(answered))")
        for (k, device) in Self.devices.enumerated() {
            #expect(try await cluster.client.listedIds(device).contains("s\(k)"), "\(device)")
        }
        #expect(await cluster.waitUntilBalanced(among: ["w1", "w2"]), "\(cluster.served())")
    }

    @Test func workersJoinAndLeaveUnderLoadAndAllStartingAgainFindsEverything() async throws {
        let cluster = try await Cluster()
        defer { Task { await cluster.stop() } }
        for name in ["w1", "w2", "w3"] { try await cluster.start(name) }
        #expect(await cluster.waitUntilBalanced(among: ["w1", "w2", "w3"]), "\(cluster.served())")
        var scheduled: [(String, String)] = []
        for (k, device) in Self.devices.enumerated() {
            try await cluster.client.ok(device, .schedule, #"{"id":"a\#(k)","after":3600}"#)
            scheduled.append((device, "a\(k)"))
        }
        // A fourth joins: it takes its share from the others without waiting for an expiry.
        try await cluster.start("w4")
        #expect(
            await cluster.waitUntilBalanced(among: ["w1", "w2", "w3", "w4"], timeout: .seconds(Double(Self.ttl) * 3)),
            "\(cluster.served())"
        )
        // One leaves gracefully: its slots are handed over at once.
        let leaver = cluster.worker("w1")
        leaver.process.terminate()
        #expect(await leaver.process.waitForExit(timeout: .seconds(20)) == .exited(0))
        #expect(
            await cluster.waitUntilBalanced(among: ["w2", "w3", "w4"], timeout: .seconds(Double(Self.ttl) * 2)),
            "\(cluster.served())"
        )
        let left = try cluster.query("SELECT count(*) FROM chime_lease WHERE owner = 'w1'")
        #expect(try left.rows.first?.int64(0) == 0)

        // All stop; two start: everything is there.
        for name in ["w2", "w3", "w4"] {
            let w = cluster.worker(name)
            w.process.terminate()
            #expect(await w.process.waitForExit(timeout: .seconds(20)) == .exited(0))
        }
        for name in ["w5", "w6"] { try await cluster.start(name) }
        #expect(await cluster.waitUntilBalanced(among: ["w5", "w6"]), "\(cluster.served())")
        for (device, id) in scheduled {
            #expect(try await cluster.client.listedIds(device) == [id], "\(device)")
        }
    }
}
