import ChimeCore
import ChimeJournal
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// Three `chimed --partition k/3` on one broker, each with its own data directory and worker id:
/// every device is served by exactly one of them.
@Suite(.serialized) struct PartitionedWorkersTests {
    static let partitionCount = 3

    @Test func threeWorkersServeThreeHundredDevicesExactlyOnce() async throws {
        let broker = try await TestBroker.start(
            .init(extraLines: ["max_inflight_messages 1000", "max_queued_messages 100000"])
        )
        let cluster = try await WorkerCluster.start(broker: broker, count: Self.partitionCount, name: "part")
        let client = try RecordingClient(options: broker.clientOptions(clientId: "partition-tester"))
        defer { client.requester.stop() }
        try await client.requester.connect(timeout: .seconds(10))
        try await client.requester.subscribe("chime/+/notifications", timeout: .seconds(10))
        try await client.requester.subscribe("chime/$worker/+/stats", timeout: .seconds(10))

        let devices = (0..<300).map { "device-\($0)" }
        let owner = { (device: String) in
            (0..<Self.partitionCount).first {
                Partition(index: UInt32($0), count: UInt32(Self.partitionCount)).owns(device)
            }!
        }
        let byPartition = Dictionary(grouping: devices, by: owner)
        // CRC-32 spreads 300 devices over three partitions: each worker has work.
        #expect((0..<Self.partitionCount).allSatisfy { (byPartition[$0]?.count ?? 0) > 50 })

        // One notification per device, all due at the same instant a few seconds ahead; ten devices
        // also get a series of three, and twenty a notification cancelled before it is due.
        // Far enough ahead that the cancels below are served before it on a loaded machine.
        let due = Date().addingTimeInterval(15)
        let dueText = ISO8601DateFormatter().string(from: due)
        var commands: [(device: String, op: ChimeCore.Operation, payload: String)] = devices.map {
            ($0, .schedule, #"{"id":"n","fireDate":"\#(dueText)","alertBody":"for \#($0)"}"#)
        }
        let repeating = Array(devices.shuffled().prefix(10))
        let doomed = Array(devices.shuffled().prefix(20))
        commands += repeating.map {
            ($0, .schedule, #"{"id":"series","fireDate":"\#(dueText)","repeatInterval":"second","count":3}"#)
        }
        commands += doomed.map { ($0, .schedule, #"{"id":"doomed","fireDate":"\#(dueText)"}"#) }
        let replies = try await client.send(commands)
        for (command, reply) in zip(commands, replies) {
            #expect(reply["ok"] == true, "\(command.device) \(command.op): \(JSON.object(reply).text)")
        }

        // Cancels and lists reach the worker that owns the device, and only it answers.
        let cancels = doomed.map { (device: $0, op: ChimeCore.Operation.cancel, payload: #"{"ids":["doomed"]}"#) }
        for (device, reply) in zip(doomed, try await client.send(cancels)) {
            #expect(reply.okResult()["cancelled"] == ["doomed"], "\(device)")
        }
        let listed = Array(devices.shuffled().prefix(60))
        let lists = listed.map { (device: $0, op: ChimeCore.Operation.list, payload: "{}") }
        for (device, reply) in zip(listed, try await client.send(lists)) {
            let ids = reply.okResult()["notifications"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue }
            let expected = ["n"] + (repeating.contains(device) ? ["series"] : [])
            #expect(ids == expected, "\(device)")
        }

        // Every delivery exactly once: 300 one-shots and three occurrences of each series.
        let expectedDeliveries = devices.count + 3 * repeating.count
        let arrived = await client.wait(timeout: .seconds(60)) { messages in
            messages.filter { $0.topic.hasSuffix("/notifications") }.count >= expectedDeliveries
        }
        #expect(arrived)
        // A positive control for late duplicates, not a pause: one more notification per device, due
        // after everything above. A device's deliveries come in order on its topic, so once its marker
        // is here, a duplicate of an earlier one would be here too.
        let markers = devices.map {
            (device: $0, op: ChimeCore.Operation.schedule, payload: #"{"id":"end","after":1}"#)
        }
        for (device, reply) in zip(devices, try await client.send(markers)) {
            #expect(reply["ok"] == true, "\(device): \(JSON.object(reply).text)")
        }
        func isMarker(_ message: MQTTMessage) -> Bool {
            message.topic.hasSuffix("/notifications") && (try? RecordingClient.object(message.payload))?["id"] == "end"
        }
        let markersArrived = await client.wait(timeout: .seconds(60)) { messages in
            Set(messages.filter(isMarker).map(\.topic)).count == devices.count
        }
        #expect(markersArrived)
        let sent = commands.count + cancels.count + lists.count + markers.count
        var count: [String: Int] = [:]
        var idsByDevice: [String: [String]] = [:]
        for message in client.messages where message.topic.hasSuffix("/notifications") && !isMarker(message) {
            let delivery = try RecordingClient.object(message.payload)
            let device = delivery["deviceId"]?.stringValue ?? "?"
            #expect(message.topic == "chime/\(device)/notifications")
            count["\(device) \(delivery["fireId"]?.stringValue ?? "?")", default: 0] += 1
            idsByDevice[device, default: []].append(delivery["id"]?.stringValue ?? "?")
        }
        #expect(count.values.allSatisfy { $0 == 1 }, "duplicates: \(count.filter { $0.value > 1 }.keys.sorted())")
        #expect(count.count == expectedDeliveries)
        for device in devices {
            let expected = ["n"] + (repeating.contains(device) ? ["series", "series", "series"] : [])
            #expect(idsByDevice[device]?.sorted() == expected.sorted(), "\(device)")
        }

        // No command was answered twice (a second reply would be left in the stream), and the
        // workers' counters add up to the commands sent, each worker counting its own devices'.
        #expect(client.messages.filter { $0.topic == client.replyTopic }.isEmpty)
        let perWorker = await cluster.commandCounts(in: client, total: sent)
        #expect(perWorker.reduce(0, +) == sent, "counted \(perWorker)")
        for k in 0..<Self.partitionCount {
            let mine = (commands.map(\.device) + doomed + listed + devices).filter { owner($0) == k }.count
            #expect(perWorker[k] == mine, "worker \(k)")
        }

        await cluster.stop()
        await broker.stop()

        // Each data directory holds its partition's devices and no other.
        for k in 0..<Self.partitionCount {
            let devicesOnDisk = try journaledDevices(cluster.data[k].path)
            #expect(devicesOnDisk == Set(byPartition[k] ?? []), "data directory of partition \(k)/3")
        }
    }
}

/// Every device a data directory's journal records mention (records only: a short run writes no
/// snapshot).
func journaledDevices(_ directory: String) throws -> Set<String> {
    var devices: Set<String> = []
    var failures: [String] = []
    try JournalTools.dump(directory: directory) { record in
        do {
            devices.insert(try JournalEntry.decode(kind: record.type, payload: record.payload).deviceId)
        } catch {
            failures.append("\(error)")
        }
    }
    if !failures.isEmpty { throw HarnessError("undecodable records in \(directory): \(failures)") }
    return devices
}

/// `count` chimed workers on one broker, worker `k` running `--partition k/count` on its own data
/// directory.
final class WorkerCluster: Sendable {
    let workers: [Chimed]
    let data: [TemporaryDirectory]
    let workerIds: [String]

    private init(workers: [Chimed], data: [TemporaryDirectory], workerIds: [String]) {
        self.workers = workers
        self.data = data
        self.workerIds = workerIds
    }

    /// Starts the workers; `dataDirectories` (one per worker) default to fresh ones.
    static func start(
        broker: TestBroker,
        count: Int,
        name: String,
        dataDirectories: [TemporaryDirectory]? = nil
    ) async throws -> WorkerCluster {
        let data = try dataDirectories ?? (0..<count).map { _ in try TemporaryDirectory(prefix: "chime-\(name)") }
        let ids = (0..<count).map { "\(name)-\($0)-of-\(count)" }
        let workers = try (0..<count).map {
            try Chimed(
                broker: broker,
                dataDirectory: data[$0].path,
                workerId: ids[$0],
                extra: ["--partition", "\($0)/\(count)"]
            )
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in workers { group.addTask { try await worker.start() } }
            try await group.waitForAll()
        }
        return WorkerCluster(workers: workers, data: data, workerIds: ids)
    }

    /// SIGTERM to each, then waits: each finishes its deliveries in flight and syncs its journal.
    func stop() async {
        for worker in workers { worker.process.terminate() }
        for worker in workers {
            let status = await worker.process.waitForExit(timeout: .seconds(20))
            #expect(status == .exited(0), "\(worker.arguments): \(String(describing: status))\n\(worker.log)")
        }
    }

    /// Each worker's total of commands counted in its stats, once the totals of all add up to
    /// `total` (or the newest seen when they never do).
    func commandCounts(in client: RecordingClient, total: Int) async -> [Int] {
        func latest(_ messages: [MQTTMessage]) -> [Int] {
            workerIds.map { id in
                let stats = messages.last { $0.topic == "chime/$worker/\(id)/stats" }
                let commands = stats.flatMap { try? RecordingClient.object($0.payload) }?["commands"]?.objectValue
                return commands?.reduce(0) { sum, member in
                    if case .int(let n) = member.value { return sum + Int(n) }
                    return sum
                } ?? 0
            }
        }
        _ = await client.wait(timeout: .seconds(10)) { latest($0).reduce(0, +) >= total }
        return latest(client.messages)
    }
}

extension RecordingClient {
    /// The Response Topic `send` uses.
    var replyTopic: String { "test/replies/\(requester.client.options.clientId ?? "client")" }

    /// Sends every command with a Response Topic, twenty at a time, and returns the replies in the
    /// order of `commands`.
    func send(_ commands: [(device: String, op: ChimeCore.Operation, payload: String)]) async throws -> [JSONObject] {
        let topics = Topics(prefix: "chime")
        let replyTopic = self.replyTopic
        try await requester.subscribe(replyTopic, timeout: .seconds(10))
        var replies = [JSONObject?](repeating: nil, count: commands.count)
        try await withThrowingTaskGroup(of: (Int, JSONObject).self) { group in
            var next = 0
            func add() {
                let index = next
                let command = commands[index]
                group.addTask {
                    (
                        index,
                        try await self.request(
                            topics.command(command.device, command.op),
                            command.payload,
                            responseTopic: replyTopic
                        )
                    )
                }
                next += 1
            }
            while next < min(20, commands.count) { add() }
            while let (index, reply) = try await group.next() {
                replies[index] = reply
                if next < commands.count { add() }
            }
        }
        return replies.map { $0 ?? [:] }
    }
}
