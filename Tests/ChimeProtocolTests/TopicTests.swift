import ChimeCore
import Testing

@Suite struct TopicTests {
    let topics = Topics(prefix: "chime")

    @Test func parsesCommandTopics() {
        let a = topics.parseCommand("chime/phone-1/cmd/schedule")
        #expect(a?.deviceId == "phone-1" && a?.op == .schedule && a?.problem == nil)
        #expect(topics.parseCommand("chime/phone-1/notifications") == nil)
        #expect(topics.parseCommand("other/phone-1/cmd/schedule") == nil)
        #expect(topics.parseCommand("chime/a/b/cmd/schedule") == nil)
    }

    @Test func parsesWorkerTopics() {
        #expect(topics.parseWorkerTopic("chime/$worker/w-1/status")! == ("w-1", .status))
        #expect(topics.parseWorkerTopic("chime/$worker/w-1/stats")! == ("w-1", .stats))
        for topic in [
            "chime/$worker/w-1/other", "chime/$worker/w-1", "chime/$worker/a/b/stats", "other/$worker/w/stats",
        ] {
            #expect(topics.parseWorkerTopic(topic) == nil, "\(topic)")
        }
    }

    /// Routing by slot: a forwarded command keeps its device and op and names its slot; a `$slot`
    /// segment that is not one is a device id like any other (invalid: it starts with `$`).
    @Test func parsesForwardedCommandTopics() {
        let forwarded = topics.forwarded("chime/phone-1/cmd/schedule", toSlot: 17)
        #expect(forwarded == "chime/$slot/17/phone-1/cmd/schedule")
        let a = topics.parseCommand(forwarded)
        #expect(a?.deviceId == "phone-1" && a?.op == .schedule && a?.problem == nil && a?.forwardedSlot == 17)
        #expect(topics.parseCommand("chime/phone-1/cmd/list")?.forwardedSlot == nil)
        #expect(topics.parseCommand("chime/$slot/cmd/list")?.problem?.field == "deviceId")
        for topic in ["chime/$slot/x/d1/cmd/list", "chime/$slot/123456/d1/cmd/list", "chime/$slot//d1/cmd/list"] {
            #expect(topics.parseCommand(topic)?.forwardedSlot == nil, "\(topic)")
        }
        #expect(topics.parseCommand("chime/$slot/3/d1/cmd") == nil)
        #expect(topics.slotCommandFilter(3) == "chime/$slot/3/+/cmd/+")
        #expect(topics.sharedCommandFilter(group: "chimed-0f") == "$share/chimed-0f/chime/+/cmd/+")
        let nested = Topics(prefix: "a/b")
        #expect(nested.parseCommand(nested.forwarded("a/b/d/cmd/ack", toSlot: 0))?.forwardedSlot == 0)
    }

    @Test func flagsInvalidDevicesAndOps() {
        #expect(topics.parseCommand("chime/bad id/cmd/list")?.problem?.field == "deviceId")
        #expect(topics.parseCommand("chime/$sys/cmd/list")?.problem?.field == "deviceId")
        #expect(topics.parseCommand("chime//cmd/list")?.problem?.field == "deviceId")
        #expect(topics.parseCommand("chime/\(String(repeating: "x", count: 129))/cmd/list")?.problem != nil)
        #expect(topics.parseCommand("chime/d1/cmd/explode")?.problem?.field == "op")
        #expect(topics.parseCommand("chime/a.b:c@d-e_f/cmd/list")?.problem == nil)
    }

    @Test func commandTopicsThatAreAlmostCommandsAreNot() {
        for topic in [
            "chime", "chime/", "chime/d1", "chime/d1/cmd", "chime/d1/cmdx/list", "chime/d1/cmd/list/x",
            "chimex/d1/cmd/list",
            "chim/d1/cmd/list", "/chime/d1/cmd/list",
        ] {
            #expect(topics.parseCommand(topic) == nil, "\(topic)")
        }
        #expect(topics.parseCommand("chime/d1/cmd/")?.problem?.field == "op")
        #expect(topics.parseCommand("chime/é/cmd/list")?.problem?.field == "deviceId")
        #expect(Topics(prefix: "a/b").parseCommand("a/b/d1/cmd/inbox")?.op == .inbox)
    }

    /// PROTOCOL.md section 4: a Response Topic under the prefix is honoured only in the commanded
    /// device's own reply spaces.
    @Test(arguments: [
        ("chime/d1/replies", true), ("chime/d1/replies/app-7", true), ("chime/$reply/d1/x", true),
        ("chime/$reply/d1/", true), ("other/anything", true), ("chimex/d2/notifications", true),
        ("chime/d1/repliesx", false), ("chime/d1/replie", false), ("chime/d1/notifications", false),
        ("chime/d2/replies", false), ("chime/d10/replies", false), ("chime/d/replies", false),
        ("chime/$reply/d2/x", false), ("chime/$reply/d1", false), ("chime/$reply/d10/x", false),
        ("chime/$reply", false), ("chime/$worker/w1/status", false), ("chime/", false), ("chime/d1", false),
    ])
    func responseTopicsStayInTheDevicesOwnSpace(topic: String, accepted: Bool) {
        #expect(topics.acceptsResponseTopic(topic, forCommandOn: "d1") == accepted)
    }

    @Test func partitionsByZlibCRC32() {
        #expect(crc32(Array("123456789".utf8)) == 0xCBF4_3926)
        // Values from Python's zlib.crc32.
        #expect(crc32(Array("d1".utf8)) == 295_091_302)
        #expect(Partition(parsing: "1/3")!.owns("d1"))
        #expect(Partition(parsing: "2/3")!.owns("phone-17"))
        #expect(Partition(parsing: "0/3")!.owns("a"))
        let parts = (0..<3).map { Partition(index: UInt32($0), count: 3) }
        for device in ["a", "b", "phone-17", "x@y"] {
            #expect(parts.filter { $0.owns(device) }.count == 1)
        }
        #expect(Partition(parsing: "3/3") == nil)
        #expect(Partition(parsing: "1/0") == nil)
        #expect(Partition(parsing: "x") == nil)
    }
}
