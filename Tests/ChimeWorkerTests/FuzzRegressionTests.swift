import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// What the fuzzers (`make fuzz`, `Fuzz/`) found, checked on every `make test`: each input in
/// `Fixtures/fuzz/<target>/` and each checked-in seed in `Fuzz/corpus/<target>/` must satisfy the
/// fuzz target's properties (``FuzzChecks``), and each finding has a test of its own below that
/// states the bug in the protocol's terms.
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

    @Test func everyCommandInputFoundOrSeededHoldsTheProperties() throws {
        let inputs = try Self.inputs("commands")
        #expect(inputs.count > 20)
        for input in inputs {
            let problem = FuzzChecks.command(input.bytes)
            #expect(problem == nil, "\(input.name): \(problem ?? "")")
        }
    }

    @Test func everyRecurrenceInputFoundOrSeededHoldsTheProperties() throws {
        let inputs = try Self.inputs("recurrence")
        #expect(inputs.count > 20)
        for input in inputs {
            let problem = FuzzChecks.recurrence(String(decoding: input.bytes, as: UTF8.self))
            #expect(problem == nil, "\(input.name): \(problem ?? "")")
        }
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
        let payload = #"{"id":"r","fireDate":"2026-07-05T09:00:00Z","rrule":"\#(rule)"}"#
        guard
            case .failure(let failure) = CommandDecoder().decode(
                deviceId: "d",
                op: .schedule,
                payload: Array(payload.utf8)
            )
        else {
            Issue.record("\(rule) was accepted")
            return
        }
        #expect(failure.error.code == .invalidArgument)
        #expect(failure.error.field == "rrule")
    }

    /// The same through chimed: whatever it acknowledges, it can start again on.
    @Test func chimedRestartsAfterEveryRuleItAcknowledged() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        let reply = try await f.send(
            "d1",
            .schedule,
            #"{"id":"r","fireDate":"2026-07-05T09:00:00Z","rrule":"FREQ=MONTHLY;BYDAY=1SU,-11SA"}"#
        )
        #expect(reply.errorCode == "invalid_argument", "\(JSON.object(reply).text)")
        try await f.ok("d1", .schedule, #"{"id":"fine","after":3600}"#)
        #expect(await f.stopWorker() == .exited(0))
        try await f.startWorker()
        #expect(try await f.list("d1").compactMap { $0["id"]?.stringValue } == ["fine"])
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
        let restored = Engine()
        restored.beginRecovery()
        var entries = 0
        try engine.snapshot.forEachEntry { (entry: [UInt8]) throws(RecoveryError) in
            try restored.restore(snapshotEntry: entry)
            entries += 1
        }
        restored.finishRecovery()
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
