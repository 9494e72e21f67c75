import ChimeTestSupport
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

/// The badge counter has one maximum, `Badge.maximum`, on the wire, in the engine and in what it
/// restores (PROTOCOL.md section 3.8).
@Suite struct BadgeTests {
    @Test func theCounterSaturatesAtTheMaximumAndNeverPassesIt() {
        var h = Harness()
        h.ok("d1", .device, #"{"badge":\#(Badge.maximum - 1)}"#)
        for i in 0..<3 { h.ok("d1", .schedule, #"{"id":"b\#(i)","after":1,"badge":"+\#(Badge.maximum)"}"#) }
        let delivered = h.advance(seconds: 2)
        #expect(delivered.map { $0["badge"] } == Array(repeating: .int(Int64(Badge.maximum)), count: 3))
        #expect(h.ok("d1", .device, "{}")["badge"] == .int(Int64(Badge.maximum)))
        h.ok("d1", .schedule, #"{"id":"down","after":1,"badge":"-\#(Badge.maximum)"}"#)
        #expect(h.advance(seconds: 2).first?["badge"] == 0)
    }

    @Test(arguments: [
        #"{"id":"x","after":1,"badge":"+9999999"}"#, #"{"id":"x","after":1,"badge":"-1000001"}"#,
        #"{"id":"x","after":1,"badge":1000001}"#, #"{"id":"x","after":1,"badge":-1}"#,
    ])
    func aBadgePastTheMaximumIsRefused(payload: String) {
        var h = Harness()
        let reply = h.send("d1", .schedule, payload)
        #expect(reply["error"]?.objectValue?["field"] == "badge")
        #expect(h.errorCode("d1", .device, #"{"badge":\#(Badge.maximum + 1)}"#) == "invalid_argument")
        #expect(h.errorCode("d1", .ack, #"{"fireIds":["a"],"badge":"+\#(Badge.maximum + 1)"}"#) == "invalid_argument")
    }

    /// A counter past the maximum, as an older chimed could leave in a snapshot or journal (300
    /// deliveries of "+9999999"), is read back saturated, and so is a reply that carries one.
    @Test func aCounterWrittenPastTheMaximumIsReadBackSaturated() throws {
        let big = 2_999_999_700
        let entry = SnapshotCoding.encode(EngineSnapshot.Device(id: "d1", timeZone: nil, badge: big, quietHours: nil))
        let restorer = EngineRestorer(configuration: EngineConfiguration())
        try restorer.restore(snapshotEntry: entry)
        restorer.apply(.device(deviceId: "d2", at: Instant(milliseconds: 0), update: DeviceUpdate(badge: big)))
        let engine = restorer.finish()
        var h = Harness()
        h.engine = engine
        #expect(h.ok("d1", .device, "{}")["badge"] == .int(Int64(Badge.maximum)))
        #expect(h.ok("d2", .device, "{}")["badge"] == .int(Int64(Badge.maximum)))

        let reply: JSONObject = [
            "deviceId": "d1", "timeZone": .null, "badge": .int(Int64(big)), "quietHours": .null, "pending": 0,
        ]
        guard case .device(let status) = try ReplyResult(op: .device, json: reply) else {
            Issue.record("not a device reply")
            return
        }
        #expect(status.badge == Badge.maximum)
    }
}
