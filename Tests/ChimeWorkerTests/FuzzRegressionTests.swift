import ChimeCore
import Foundation
import Testing

/// What the fuzzers found, checked on every `make test`: each finding has a test of its own that
/// states the bug in the protocol's terms.
@Suite struct FuzzRegressionTests {
    /// A notification scheduled with `"enabled": false` was listed with `enabled` twice (the
    /// scheduled field and the current state), which strict JSON parsers, Chime's own included,
    /// reject: the whole `list` reply became unreadable.
    @Test func listShowsEnabledOnceForANotificationScheduledPaused() throws {
        var engine = Engine()
        var random = SplitMix(state: 7)
        let now = Instant(milliseconds: 1_781_517_600_000)
        let decoder = CommandDecoder()
        func decide(_ op: ChimeCore.Operation, _ payload: String) -> Decision {
            guard case .success(let request) = decoder.decode(deviceId: "d", op: op, payload: Array(payload.utf8))
            else {
                Issue.record("\(payload) does not decode")
                return .reply(Reply(op: op.rawValue, requestId: nil, outcome: .success([:])))
            }
            return engine.decide(request, now: now, random: &random)
        }
        guard case .write(let entry) = decide(.schedule, #"{"id":"off","after":60,"enabled":false}"#) else {
            Issue.record("schedule was refused")
            return
        }
        engine.apply(entry)
        guard case .reply(let reply) = decide(.list, "{}") else {
            Issue.record("list wants to write")
            return
        }
        let parsed = try JSON(parsing: reply.bytes)
        let row = parsed.objectValue?["result"]?.objectValue?["notifications"]?.arrayValue?.first?.objectValue
        #expect(row?["enabled"] == false)
        #expect(row?.keys.filter { $0 == "enabled" }.count == 1)
    }
}

/// SplitMix64: a deterministic generator, so that a test reproduces.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
