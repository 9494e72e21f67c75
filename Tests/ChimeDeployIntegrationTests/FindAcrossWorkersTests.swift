import ChimeCore
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Testing

/// `find` across the fleet (PROTOCOL.md section 3.12) with real workers on a real broker: three
/// `chimed --partition k/3`, one query on `P/$fleet/find` answered by each for its own devices, the
/// pages merged and followed to the end.
@Suite(.serialized) struct FindAcrossWorkersTests {
    static let workers = 3

    /// Publishes `query` once and returns each worker's reply, by worker id.
    static func ask(_ client: RecordingClient, _ query: FindQuery, workers: Int) async throws -> [String: JSONObject] {
        let topic = "chime/$reply/tester/find"
        let correlation = Array(UUID().uuidString.utf8)
        let waits = (0..<workers).map { _ in
            client.requester.expectMessage { $0.topic == topic && $0.correlationData == correlation }
        }
        var properties = MQTTPublishProperties()
        properties.responseTopic = topic
        properties.correlationData = correlation
        let code = try await client.requester.publish(
            topic: "chime/$fleet/find",
            payload: JSON.object(query.json).bytes,
            properties: properties,
            timeout: .seconds(10)
        )
        #expect(code < 0x80)
        var replies: [String: JSONObject] = [:]
        for wait in waits {
            let reply = try RecordingClient.object(try await wait.value(timeout: .seconds(10)).payload)
            let worker = try #require(reply["workerId"]?.stringValue)
            #expect(replies[worker] == nil, "\(worker) answered twice")
            replies[worker] = reply
        }
        return replies
    }

    /// Every page of `query` merged over the workers, followed to the end: the devices in the order
    /// listed.
    static func findAll(_ client: RecordingClient, _ query: FindQuery) async throws -> [FoundDevice] {
        var query = query
        var listed: [FoundDevice] = []
        for _ in 0..<200 {
            let replies = try await ask(client, query, workers: workers)
            let pages = try replies.values.map { reply in
                try #require(reply["result"]?.objectValue.flatMap(FindPage.init(result:)), "\(JSON.object(reply).text)")
            }
            let merged = FindPage.merged(pages, limit: query.limit)
            #expect(merged.devices.count <= query.limit)
            listed += merged.devices
            guard let next = merged.next else { return listed }
            query.after = next
        }
        Issue.record("more than 200 pages")
        return listed
    }

    @Test func threeWorkersFindByPrefixAndTagAndListEachDeviceOnceInOrder() async throws {
        let broker = try await TestBroker.start(.init())
        let cluster = try await WorkerCluster.start(broker: broker, count: Self.workers, name: "find")
        let client = try RecordingClient(options: broker.clientOptions(clientId: "find-tester"))
        defer { client.requester.stop() }
        try await client.requester.connect(timeout: .seconds(10))
        try await client.requester.subscribe("chime/$reply/tester/#", timeout: .seconds(10))

        let phones = (0..<45).map { "phone-\($0)" }
        let others = (0..<15).map { "kiosk-\($0)" }
        let spring = Set(phones.enumerated().filter { $0.offset % 4 == 0 }.map(\.element) + ["kiosk-3"])
        var commands: [(device: String, op: ChimeCore.Operation, payload: String)] = (phones + others).map {
            ($0, .schedule, #"{"id":"daily","after":3600}"#)
        }
        commands += spring.map {
            ($0, .schedule, #"{"id":"promo","after":7200,"userInfo":{"campaign":"spring"}}"#)
        }
        for (command, reply) in zip(commands, try await client.send(commands)) {
            #expect(reply["ok"] == true, "\(command.device): \(JSON.object(reply).text)")
        }

        // Every worker answers, each with the devices of its own partition only.
        let all = try await Self.ask(client, FindQuery(limit: 500), workers: Self.workers)
        #expect(Set(all.keys) == Set(cluster.workerIds))
        for (k, id) in cluster.workerIds.enumerated() {
            let page = try #require(all[id]?["result"]?.objectValue.flatMap(FindPage.init(result:)))
            let partition = Partition(index: UInt32(k), count: UInt32(Self.workers))
            #expect(page.devices.map(\.deviceId) == (phones + others).filter(partition.owns).sorted(), "\(id)")
            #expect(page.next == nil)
        }

        // By prefix, seven a page: every phone once, in order, none of the kiosks.
        let byPrefix = try await Self.findAll(client, FindQuery(prefix: "phone-", limit: 7))
        #expect(byPrefix.map(\.deviceId) == phones.sorted())
        #expect(byPrefix.allSatisfy { $0.pending == (spring.contains($0.deviceId) ? 2 : 1) })

        // By tag, across prefixes, five a page; and both.
        let byTag = try await Self.findAll(client, FindQuery(match: ["campaign": "spring"], limit: 5))
        #expect(byTag.map(\.deviceId) == spring.sorted())
        #expect(byTag.allSatisfy { $0.matching == ["promo"] && $0.matchingCount == 1 })
        let both = try await Self.findAll(client, FindQuery(prefix: "kiosk-", match: ["campaign": "spring"]))
        #expect(both.map(\.deviceId) == ["kiosk-3"])

        // Nothing found: each worker says so, with nothing after.
        let none = try await Self.ask(client, FindQuery(prefix: "x"), workers: Self.workers)
        #expect(none.values.allSatisfy { $0["result"]?.objectValue.flatMap(FindPage.init(result:))?.devices == [] })
        // A bad query: each worker says why.
        var tooMany = FindQuery(limit: 500).json
        tooMany["limit"] = 501
        let waits = (0..<Self.workers).map { _ in
            client.requester.expectMessage { $0.topic == "chime/$reply/tester/bad" }
        }
        var properties = MQTTPublishProperties()
        properties.responseTopic = "chime/$reply/tester/bad"
        try await client.requester.publish(
            topic: "chime/$fleet/find",
            payload: JSON.object(tooMany).bytes,
            properties: properties,
            timeout: .seconds(10)
        )
        for wait in waits {
            let reply = try RecordingClient.object(try await wait.value(timeout: .seconds(10)).payload)
            #expect(reply["ok"] == false && reply["error"]?.objectValue?["field"] == "limit")
        }

        await cluster.stop()
        await broker.stop()
    }
}
