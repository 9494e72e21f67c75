import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// What the fuzzers (`make fuzz`, `Fuzz/`) found, checked on every `make test`: each input in
/// `Fixtures/fuzz/<target>/` and each checked-in seed in `Fuzz/corpus/<target>/` must satisfy the
/// fuzz target's properties (``FuzzChecks``; the `readback` target's, ``ReadBackCheck``, are
/// checked by `ReadBackTests`), and each finding has a test of its own below that states the bug
/// in the protocol's terms.
@Suite struct FuzzRegressionTests {
    static func inputs(_ target: String) throws -> [(name: String, bytes: [UInt8])] {
        let fixtures = try #require(Bundle.module.path(forResource: "Fixtures", ofType: nil))
        let seeds = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/corpus/\(target)").standardized.path
        var inputs: [(String, [UInt8])] = []
        for directory in [fixtures + "/fuzz/\(target)", seeds] {
            let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
            for name in names where !name.hasPrefix(".") {
                let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
                inputs.append((name, Array(data)))
            }
        }
        return inputs
    }

    /// Checks every input of `target` (more than 20 of them) with `check`, which returns the
    /// violated property, or nil.
    static func expectEveryInput(of target: String, holds check: ([UInt8]) -> String?) throws {
        let inputs = try inputs(target)
        #expect(inputs.count > 20)
        for input in inputs {
            let problem = check(input.bytes)
            #expect(problem == nil, "\(input.name): \(problem ?? "")")
        }
    }

    /// Expects the decoder to refuse `payload` with `invalid_argument` naming `field`.
    static func expectRefused(_ payload: String, as op: ChimeCore.Operation = .schedule, field: String) {
        guard case .failure(let failure) = CommandDecoder().decode(deviceId: "d", op: op, payload: Array(payload.utf8))
        else {
            Issue.record("\(payload) was accepted")
            return
        }
        #expect(failure.error.code == .invalidArgument, "\(payload)")
        #expect(failure.error.field == field, "\(payload)")
    }

    @Test func everyCommandInputFoundOrSeededHoldsTheProperties() throws {
        try Self.expectEveryInput(of: "commands", holds: FuzzChecks.command)
    }

    @Test func everyRecurrenceInputFoundOrSeededHoldsTheProperties() throws {
        try Self.expectEveryInput(of: "recurrence") { FuzzChecks.recurrence(String(decoding: $0, as: UTF8.self)) }
    }

    /// A notification scheduled with `"enabled": false` was listed with `enabled` twice (the
    /// scheduled field and the current state), which strict JSON parsers, Chime's own included,
    /// reject: the whole `list` reply became unreadable.
    @Test func listShowsEnabledOnceForANotificationScheduledPaused() throws {
        let engine = Engine()
        var random = SplitMix64(seed: 7)
        let now = Instant(milliseconds: 1_781_517_600_000)
        let decoder = CommandDecoder()
        func decide(_ op: ChimeCore.Operation, _ payload: String) -> Decision {
            guard case .success(let request) = decoder.decode(deviceId: "d", op: op, payload: Array(payload.utf8))
            else {
                Issue.record("\(payload) does not decode")
                return .reply(Reply(op: op.rawValue, requestId: nil, outcome: .failure(ChimeError(.internal, payload))))
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

extension FuzzRegressionTests {
    /// `BYDAY` ordinals were range-checked only on the first entry that had one, so
    /// `FREQ=MONTHLY;BYDAY=1SU,-11SA` was accepted while `BYDAY=-11SA,1SU` was refused. The
    /// journal stores a rule in its canonical form, which sorts `-11SA` first: a schedule with such
    /// a rule was acknowledged, and then its journal record could not be read, so chimed refused to
    /// start on its own data directory.
    @Test(arguments: [
        "FREQ=MONTHLY;BYDAY=1SU,-11SA", "FREQ=MONTHLY;BYDAY=-11SA,1SU", "FREQ=YEARLY;BYMONTH=3;BYDAY=1SU,20SA",
        "FREQ=WEEKLY;BYDAY=SU,1MO",
    ])
    func everyByDayOrdinalIsChecked(rule: String) throws {
        #expect(throws: RecurrenceError(.invalidRule)) { try RecurrenceRule(parsing: rule) }
        Self.expectRefused(#"{"id":"r","fireDate":"2026-07-05T09:00:00Z","rrule":"\#(rule)"}"#, field: "rrule")
    }

}

extension FuzzRegressionTests {
    /// A snapshot taken while a snooze was pending could not be restored: the snoozed copy's id
    /// (`{id}~snooze`) was checked as if a client had sent it (reserved suffix, 128 characters at
    /// most), so chimed refused to start on its own data directory.
    @Test(arguments: ["med", String(repeating: "x", count: 128)])
    func aSnapshotWithAPendingSnoozeRestores(id: String) throws {
        let engine = Engine()
        var random = SplitMix64(seed: 7)
        let now = Instant(milliseconds: 1_781_517_600_000)
        let decoder = CommandDecoder()
        for (op, payload) in [
            (ChimeCore.Operation.schedule, #"{"id":"\#(id)","after":3600,"alertBody":"pill"}"#),
            (.snooze, #"{"id":"\#(id)","after":600}"#),
        ] {
            guard case .success(let request) = decoder.decode(deviceId: "d", op: op, payload: Array(payload.utf8)),
                case .write(let entry) = engine.decide(request, now: now, random: &random)
            else {
                Issue.record("\(payload) was refused")
                return
            }
            engine.apply(entry)
        }
        let restoredRestorer = EngineRestorer()
        var entries = 0
        try engine.snapshot.forEachEntry { (entry: [UInt8]) throws(RecoveryError) in
            try restoredRestorer.restore(snapshotEntry: entry)
            entries += 1
        }
        let restored = restoredRestorer.finish()
        #expect(entries == 4)  // header, device, the notification, its snooze
        #expect(restored.pendingCount == 1)
        // The snooze is still due: it fires ten minutes later with the original's content.
        restored.setConnected(true)
        let fired = restored.tick(now: now.adding(seconds: 601)).compactMap { output -> String? in
            guard case .publish(let delivery) = output else { return nil }
            return delivery.fireId
        }
        #expect(fired == ["\(id)~snooze@2026-06-15T10:10:00Z"])
    }
}

extension FuzzRegressionTests {
    /// An absolute date-time whose offset takes it out of the years 0001 to 9999 was accepted:
    /// `0001-01-01T00:00:00+01:00` is 23:00 on 31 December of the year 0, which the journal wrote
    /// as `0000-12-31T23:00:00Z` (and `9999-12-31T23:59:59-01:00` as `10000-01-01T00:59:59Z`), text
    /// that its own reader refuses. chimed acknowledged the schedule, and then could not replay its
    /// record (nor restore a snapshot holding such an `until` or exdate): it refused to start on
    /// its own data directory. Found by the readback property (`ReadBackTests`).
    @Test(arguments: [
        ("fireDate", "0001-01-01T00:00:00+01:00"), ("fireDate", "9999-12-31T23:59:59-01:00"),
        ("until", "9999-12-31T23:00:00-01:00"), ("exdates[0]", "0001-01-01T00:00:00+00:01"),
    ])
    func aDateTimeOutsideTheYears0001To9999IsRefused(field: String, value: String) throws {
        #expect(DateTimeValue(iso8601: value) == nil)
        let daily = #""fireDate":"2026-07-01T09:00:00Z","repeatInterval":"day""#
        let members = [
            "fireDate": #""fireDate":"\#(value)""#, "until": #"\#(daily),"until":"\#(value)""#,
            "exdates[0]": #"\#(daily),"exdates":["\#(value)"]"#,
        ]
        Self.expectRefused(#"{"id":"y",\#(members[field]!)}"#, field: field)
        // The ends of the range themselves are kept, and read back.
        for edge in ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00-23:59", "9999-12-31T23:59:59.999Z"] {
            let value = try #require(DateTimeValue(iso8601: edge))
            #expect(DateTimeValue(iso8601: value.description) == value)
        }
    }

    /// A duration that must be more than 0 (`expiresAfter`, `after`, snooze's `after`) was checked
    /// before being rounded to the millisecond Chime keeps: `"expiresAfter": 0.0004` (or `5e-324`)
    /// passed as more than 0 and was stored as 0 ms, which the journal, reading it back under the
    /// same bound, refused. chimed acknowledged the schedule, then refused to start. Found by the
    /// readback property (`ReadBackTests`).
    @Test(arguments: ["0.0004", "5e-324", "2.2250738585072014e-308"])
    func aDurationThatRoundsToNoMillisecondIsRefused(seconds: String) throws {
        Self.expectRefused(#"{"id":"y","after":60,"expiresAfter":\#(seconds)}"#, field: "expiresAfter")
        Self.expectRefused(#"{"id":"y","after":\#(seconds)}"#, field: "after")
        Self.expectRefused(#"{"id":"y","after":\#(seconds)}"#, as: .snooze, field: "after")
        // Half a millisecond rounds to 1 ms, which is kept and read back.
        let payload = Array(#"{"id":"y","after":60,"expiresAfter":0.0005}"#.utf8)
        guard case .success(let request) = CommandDecoder().decode(deviceId: "d", op: .schedule, payload: payload),
            case .schedule(let specs, _, _) = request.command
        else {
            Issue.record("half a millisecond was refused")
            return
        }
        #expect(specs.first?.expiresAfter == 1)
        #expect(ReadBackCheck.fuzz(payload) == nil)
    }
}
