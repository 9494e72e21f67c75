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

    @Test func flagsInvalidDevicesAndOps() {
        #expect(topics.parseCommand("chime/bad id/cmd/list")?.problem?.field == "deviceId")
        #expect(topics.parseCommand("chime/$sys/cmd/list")?.problem?.field == "deviceId")
        #expect(topics.parseCommand("chime//cmd/list")?.problem?.field == "deviceId")
        #expect(topics.parseCommand("chime/\(String(repeating: "x", count: 129))/cmd/list")?.problem != nil)
        #expect(topics.parseCommand("chime/d1/cmd/explode")?.problem?.field == "op")
        #expect(topics.parseCommand("chime/a.b:c@d-e_f/cmd/list")?.problem == nil)
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
