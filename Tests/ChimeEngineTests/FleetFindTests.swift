import ChimeCore
import ChimeMQTT
import ChimeTestSupport
import Testing

/// `find` across the fleet (PROTOCOL.md section 3.12): the query's decoding and bounds, one
/// worker's walk over its devices in id order (its engines, its partition, its caps), and the
/// merge of several workers' pages into the fleet's.
@Suite struct FleetFindTests {
    static let replies = "chime/$reply/backend/find-1"

    /// A worker's engine holding `devices`, each with a notification tagged `campaign` = its value
    /// in `tagged` (when there is one) and one untagged.
    static func harness(_ devices: [String], tagged: [String: String] = [:]) -> Harness {
        var h = Harness()
        for device in devices {
            h.ok(device, .schedule, #"{"id":"plain","after":3600}"#)
            if let campaign = tagged[device] {
                h.ok(device, .schedule, #"{"id":"promo","after":3600,"userInfo":{"campaign":"\#(campaign)"}}"#)
            }
        }
        return h
    }

    /// Sends a `find` on `P/$fleet/find` through the worker and returns its reply.
    static func ask(_ h: Harness, _ payload: String, responseTopic: String? = replies) throws -> JSONObject? {
        let before = h.worker.transport.published(on: responseTopic ?? replies).count
        var message = MQTTMessage(topic: "chime/$fleet/find", payload: Array(payload.utf8), qos: 1)
        message.responseTopic = responseTopic
        message.correlationData = [1, 2, 3]
        try h.worker.step(.mqtt(.message(message)))
        let published = h.worker.transport.published(on: responseTopic ?? replies)
        guard published.count > before, let last = published.last else { return nil }
        #expect(last.message.correlationData == [1, 2, 3])
        return try JSON(parsing: last.message.payload).objectValue
    }

    static func ids(_ page: FindPage) -> [String] { page.devices.map(\.deviceId) }

    @Test func theWorkerAnswersByPrefixAndByTagInIdOrderOnItsResponseTopic() throws {
        let h = Self.harness(
            ["phone-2", "phone-10", "tablet-1", "phone-1"],
            tagged: ["phone-2": "spring", "tablet-1": "spring", "phone-1": "autumn"]
        )
        let byPrefix = try #require(try Self.ask(h, #"{"prefix":"phone-","requestId":"r1"}"#))
        #expect(byPrefix["ok"] == true && byPrefix["op"] == "find" && byPrefix["workerId"] == "w1")
        #expect(byPrefix["requestId"] == "r1")
        let page = try #require(byPrefix["result"]?.objectValue.flatMap(FindPage.init(result:)))
        #expect(Self.ids(page) == ["phone-1", "phone-10", "phone-2"])
        #expect(page.next == nil)
        #expect(page.devices.first == FoundDevice(deviceId: "phone-1", pending: 2))

        let byTag = try #require(try Self.ask(h, #"{"match":{"userInfo":{"campaign":"spring"}}}"#))
        let tagged = try #require(byTag["result"]?.objectValue.flatMap(FindPage.init(result:)))
        #expect(Self.ids(tagged) == ["phone-2", "tablet-1"])
        #expect(tagged.devices[0].matching == ["promo"] && tagged.devices[0].matchingCount == 1)

        let both = try #require(try Self.ask(h, #"{"prefix":"tab","match":{"userInfo":{"campaign":"spring"}}}"#))
        #expect(both["result"]?.objectValue.flatMap(FindPage.init(result:)).map(Self.ids) == ["tablet-1"])
    }

    @Test func aQueryWithoutAReplySpaceOfABackendIsDroppedAndABadOneAnsweredWithItsError() throws {
        let h = Self.harness(["phone-1"])
        // A device's topics, a worker's status, none: no reply anywhere.
        for topic in ["chime/phone-1/replies", "chime/$worker/w1/status", "chime/$reply/+/x", "chime/$reply/x"] {
            #expect(try Self.ask(h, "{}", responseTopic: topic) == nil, "\(topic)")
        }
        #expect(try Self.ask(h, "{}", responseTopic: nil) == nil)
        // The positive control: the same query with a backend's reply space.
        #expect(try Self.ask(h, "{}")?["ok"] == true)

        for (payload, code, field) in [
            (#"{"limit":0}"#, "invalid_argument", "limit"),
            (#"{"limit":501}"#, "invalid_argument", "limit"),
            (#"{"prefix":"a/b"}"#, "invalid_argument", "prefix"),
            (#"{"after":"$x"}"#, "invalid_argument", "after"),
            (#"{"match":{"userInfo":{}}}"#, "invalid_argument", "match.userInfo"),
            (#"{"prefx":"a"}"#, "unknown_field", nil),
            ("[1]", "malformed_json", nil),
        ] as [(String, String, String?)] {
            let reply = try #require(try Self.ask(h, payload))
            #expect(reply["ok"] == false && reply["workerId"] == "w1", "\(payload)")
            let error = reply["error"]?.objectValue
            #expect(error?["code"]?.stringValue == code, "\(payload)")
            if let field { #expect(error?["field"]?.stringValue == field, "\(payload)") }
        }
    }

    @Test func aPageEndsAtItsLimitAndTheNextGoesOnFromItsCursorWithoutLossOrRepeat() throws {
        let devices = (0..<23).map { "d-\(String($0 + 100))" }
        let h = Self.harness(devices.shuffled())
        var after: String?
        var seen: [String] = []
        var pages = 0
        repeat {
            var query = FindQuery(prefix: "d-", limit: 5)
            query.after = after
            let page = Engine.find(query, in: [h.engine])
            #expect(page.devices.count <= 5)
            seen += Self.ids(page)
            after = page.next
            pages += 1
        } while after != nil && pages < 10
        #expect(seen == devices.sorted())
        #expect(pages == 5)
    }

    @Test func theWorkPerQueryIsCappedAndTheCursorSaysWhereTheWalkStopped() throws {
        let devices = (0..<30).map { "d-\(String($0 + 100))" }
        let tagged = Dictionary(
            uniqueKeysWithValues: devices.enumerated().filter { $0.offset % 10 == 9 }.map {
                ($0.element, "spring")
            }
        )
        let h = Self.harness(devices, tagged: tagged)
        let query = FindQuery(match: ["campaign": "spring"], limit: 50)
        // At most 7 devices examined a query: the first page stops at the seventh, having found none.
        let first = Engine.find(query, in: [h.engine], maximumDevices: 7)
        #expect(first.devices.isEmpty && first.examined == 7 && first.next == "d-106")
        var all: [String] = []
        var after: String?
        var queries = 0
        repeat {
            var q = query
            q.after = after
            let page = Engine.find(q, in: [h.engine], maximumDevices: 7)
            all += Self.ids(page)
            after = page.next
            queries += 1
        } while after != nil && queries < 20
        #expect(all == ["d-109", "d-119", "d-129"])
        #expect(queries == 5)
        // Notifications read count too: four of them, one a device here.
        let byReading = Engine.find(query, in: [h.engine], maximumNotifications: 4)
        #expect(byReading.examined == 4 && byReading.next == "d-103")
    }

    @Test func devicesMadeOrDroppedAfterAQueryAreFoundOrNotByTheNext() throws {
        var h = Self.harness(["b", "d"])
        #expect(Self.ids(Engine.find(FindQuery(), in: [h.engine])) == ["b", "d"])
        h.ok("a", .schedule, #"{"id":"x","after":3600}"#)
        h.ok("c", .schedule, #"{"id":"x","after":3600}"#)
        h.ok("b", .cancel, #"{"all":true}"#)
        #expect(Self.ids(Engine.find(FindQuery(), in: [h.engine])) == ["a", "c", "d"])
        // Many dropped: the engine compacts its order of devices, and the directory is built again.
        for i in 0..<10 { h.ok("z\(i)", .schedule, #"{"id":"x","after":3600}"#) }
        for i in 0..<10 { h.ok("z\(i)", .cancel, #"{"all":true}"#) }
        h.ok("e", .schedule, #"{"id":"x","after":3600}"#)
        #expect(Self.ids(Engine.find(FindQuery(), in: [h.engine])) == ["a", "c", "d", "e"])
    }

    /// A device dropped after the directory's devices were merged into one sorted list, and made
    /// again since, is in the directory twice (the dropped one among the sorted, the new one among
    /// the recent): listed once, even when a page ends at it.
    @Test func aDeviceDroppedAndMadeAgainIsListedOnceWhereverAPageEnds() throws {
        // More than are kept apart as recent: the first query merges them all.
        var h = Self.harness((0..<4200).map { "a\($0)" } + ["b"])
        #expect(Engine.find(FindQuery(prefix: "b"), in: [h.engine]).devices.map(\.deviceId) == ["b"])
        h.ok("b", .cancel, #"{"all":true}"#)
        h.ok("b", .schedule, #"{"id":"again","after":3600}"#)
        var all: [String] = []
        var after: String?
        var pages = 0
        repeat {
            var q = FindQuery(prefix: "b", limit: 1)
            q.after = after
            let page = Engine.find(q, in: [h.engine], maximumDevices: 1)
            all += Self.ids(page)
            after = page.next
            pages += 1
        } while after != nil && pages < 10
        #expect(all == ["b"])
        let b = try #require(Engine.find(FindQuery(prefix: "b"), in: [h.engine]).devices.first)
        #expect(b.pending == 1)
    }

    @Test func aWorkerListsOnlyTheDevicesOfItsPartition() throws {
        let devices = (0..<40).map { "dev-\($0)" }
        let h = Self.harness(devices)
        let partition = Partition(index: 1, count: 3)
        let page = Engine.find(FindQuery(limit: 500), in: [h.engine], serves: partition.owns)
        #expect(Self.ids(page) == devices.filter(partition.owns).sorted())
        #expect(page.examined == 40)
    }

    /// Several workers (or one worker's slots), each with its own devices and small caps: the merged
    /// pages, followed to the end, list every device once, in order, whatever the page size.
    @Test(arguments: [1, 3, 7, 50])
    func mergedPagesOfSeveralWorkersListEachDeviceOnceInOrder(limit: Int) throws {
        var random = SplitMix64(seed: UInt64(limit))
        let devices = (0..<60).map { "dev-\(String($0, radix: 7))-\($0 % 5)" }
        var shares: [[String]] = [[], [], []]
        var tagged: [String: String] = [:]
        for device in devices {
            shares[Int(random.next() % 3)].append(device)
            if random.next() % 3 == 0 { tagged[device] = "spring" }
        }
        let workers = shares.map { Self.harness($0, tagged: tagged) }
        for match in [nil, ["campaign": JSON.string("spring")]] as [JSONObject?] {
            var after: String?
            var listed: [String] = []
            var rounds = 0
            repeat {
                let query = FindQuery(prefix: "dev-", match: match, after: after, limit: limit)
                // Each worker its own caps: one examines 5 devices a query, one 11, one 100.
                let pages = zip(workers, [5, 11, 100]).map { w, cap in
                    Engine.find(query, in: [w.engine], maximumDevices: cap)
                }
                let merged = FindPage.merged(pages, limit: limit)
                #expect(merged.devices.count <= limit)
                if let last = merged.devices.last, let next = merged.next { #expect(last.deviceId <= next) }
                listed += Self.ids(merged)
                after = merged.next
                rounds += 1
            } while after != nil && rounds < 200
            let expected = devices.filter { match == nil || tagged[$0] != nil }.sorted()
            #expect(listed == expected, "match \(String(describing: match))")
        }
        // One worker serving all three as slots walks them as one.
        let slots = Engine.find(FindQuery(limit: 500), in: workers.map(\.engine))
        #expect(Self.ids(slots) == devices.sorted())
    }

    @Test func mergingKeepsWhatEveryWorkerHasLookedAtAndTheFirstLimit() {
        let a = FindPage(
            devices: [FoundDevice(deviceId: "a1", pending: 1), FoundDevice(deviceId: "c1", pending: 1)],
            next: nil,
            examined: 2
        )
        let b = FindPage(devices: [FoundDevice(deviceId: "b1", pending: 1)], next: "b5", examined: 9)
        // b looked up to b5 only: c1 waits for the next page.
        let merged = FindPage.merged([a, b], limit: 10)
        #expect(merged.devices.map(\.deviceId) == ["a1", "b1"])
        #expect(merged.next == "b5" && merged.examined == 11)
        // Past the limit: cut, and the next page goes on after the last listed.
        let cut = FindPage.merged(
            [a, FindPage(devices: [FoundDevice(deviceId: "b1", pending: 1)], next: nil)],
            limit: 2
        )
        #expect(cut.devices.map(\.deviceId) == ["a1", "b1"] && cut.next == "b1")
        #expect(FindPage.merged([a], limit: 2).next == nil)
    }

    @Test func theReplyTopicMustBeABackendsReplySpace() {
        let topics = Topics(prefix: "chime")
        for ok in ["chime/$reply/backend/x", "chime/$reply/crm/console-1/find"] {
            #expect(topics.acceptsFindResponseTopic(ok), "\(ok)")
        }
        for refused in [
            "chime/$reply/backend", "chime/$reply//x", "chime/$reply/+/x", "chime/$reply/a/#", "chime/phone/replies",
            "chime/$worker/w1/status", "other/$reply/a/b", "chime/$fleet/find",
        ] {
            #expect(!topics.acceptsFindResponseTopic(refused), "\(refused)")
        }
    }

    @Test func aQueryRoundTripsThroughItsJSON() throws {
        let query = FindQuery(prefix: "ph", match: ["k": 1], after: "ph-3", limit: 7, requestId: "r")
        let decoded = try CommandDecoder().decodeFind(JSON.object(query.json).bytes).get()
        #expect(decoded == query)
        let defaults = try CommandDecoder().decodeFind(Array("{}".utf8)).get()
        #expect(defaults == FindQuery(limit: FleetFind.defaultLimit))
        let tooLarge = CommandDecoder(limits: CommandLimits(maxCommandBytes: 256, maxUserInfoBytes: 64))
        #expect(throws: CommandDecoder.Failure.self) {
            try tooLarge.decodeFind(
                Array(#"{"match":{"userInfo":{"k":"\#(String(repeating: "v", count: 100))"}}}"#.utf8)
            )
            .get()
        }
    }
}
