import ChimeCore
import ChimeJournal
import ChimeTestSupport
import ChimeWorker
import Foundation
import Testing

/// "Whatever chimed acknowledges, it can read back" (``ReadBackCheck``): over generated commands,
/// over the fuzzer's findings and seeds, over a table of worst cases, and for those through a real
/// data directory and `Engine.replaying`, as chimed restarts.
///
/// CPU-bound and broker-free: `make test` runs this suite with the unit tests, not beside the
/// integration tests of this target, whose timeouts it could starve.
@Suite struct ReadBackTests {
    static let environment = ProcessInfo.processInfo.environment
    /// `CHIME_READBACK_CASES` generated cases (default 2000) from `CHIME_READBACK_SEED`.
    static let cases = Int(environment["CHIME_READBACK_CASES"] ?? "") ?? 2000
    static let seed = UInt64(environment["CHIME_READBACK_SEED"] ?? "") ?? 0xC41_3E

    @Test func generatedCommandsReadBack() {
        var generator = ReadBackGenerator(seed: Self.seed)
        var outcomes: [ReadBackCheck.Outcome: Int] = [:]
        var failures = 0
        for i in 0..<Self.cases {
            let c = generator.next()
            do {
                outcomes[try ReadBackCheck.check(op: c.op, payload: c.payload, start: c.start), default: 0] += 1
            } catch {
                failures += 1
                Issue.record("case \(i) of seed \(Self.seed), \(c.what): \(error)")
                if failures == 10 { return }
            }
        }
        guard Self.cases >= 2000 else { return }
        // The cases reach what they are meant to: acknowledged changes of every kind (a fifth of
        // all cases at least), the engine's answers and errors, and the decoder's refusals.
        func count(_ matching: (ReadBackCheck.Outcome) -> Bool) -> Int {
            outcomes.filter { matching($0.key) }.values.reduce(0, +)
        }
        let written = count {
            if case .written = $0 { return true }
            return false
        }
        #expect(written * 5 >= Self.cases, "\(outcomes)")
        // Deliveries, and the acks that need them, are not generated here (ReceiptsTests), nor zone
        // rules, which no command writes (ZoneRulesTests), nor pushes ending (PushTests).
        let notFromCommands: Set<JournalEntry.Kind> = [.delivered, .dropped, .ack, .zoneRules, .pushed]
        for kind in JournalEntry.Kind.allCases where !notFromCommands.contains(kind) {
            #expect(outcomes[.written(kind), default: 0] > 0, "no \(kind.name) was written: \(outcomes)")
        }
        for code in ["malformed_json", "invalid_argument", "unknown_field", "payload_too_large"] {
            #expect(outcomes[.refused(code), default: 0] > 0, "nothing was refused as \(code): \(outcomes)")
        }
        for code in [nil, "not_found", "timezone_required", "never_fires"] {
            #expect(outcomes[.answered(error: code), default: 0] > 0, "nothing answered \(code ?? "ok"): \(outcomes)")
        }
    }

    /// Every input the `readback` fuzz target found (`Fixtures/fuzz/readback/`) or is seeded with.
    @Test func everyInputFoundOrSeededReadsBack() throws {
        try FuzzRegressionTests.expectEveryInput(of: "readback", holds: ReadBackCheck.fuzz)
    }

    @Test(arguments: ReadBackWorstCase.all)
    func worstCase(_ c: ReadBackWorstCase) throws {
        let outcome = try ReadBackCheck.check(op: c.op, payload: c.payload, start: c.start)
        #expect(outcome == c.expected)
    }

    /// The acknowledged worst cases as chimed journals and restarts on them: the prepared state in
    /// the journal and in a snapshot, the command's record after it, the directory recovered by
    /// `Journal.open` and `Engine.replaying`.
    @Test(arguments: ReadBackWorstCase.all.filter(\.isWritten))
    func worstCaseThroughADataDirectory(_ c: ReadBackWorstCase) throws {
        let data = try TemporaryDirectory(prefix: "chime-readback")
        let (engine, records) = try ReadBackCheck.prepared(c.start)
        let (journal, _) = try Journal.open(directory: data.path, options: JournalOptions(fsync: .none))
        for record in records { _ = try journal.append(type: record.kind, payload: record.payload) }
        try journal.commit()
        let writer = try journal.beginSnapshot()
        for entry in ReadBackCheck.entries(engine.snapshot) { try writer.append(entry) }
        try writer.finish()
        try journal.snapshotCompleted(writer)

        guard
            case .success(var request) = ReadBackCheck.decoder.decode(
                deviceId: ReadBackCheck.device,
                op: c.op,
                payload: c.payload
            )
        else {
            Issue.record("does not decode")
            return
        }
        request.key = ReadBackCheck.key(request, c.payload)
        var random = SplitMix64(seed: 2)
        guard case .write(let entry) = engine.decide(request, now: ReadBackCheck.now, random: &random) else {
            Issue.record("is not written")
            return
        }
        _ = try journal.append(type: entry.kind.rawValue, payload: entry.encode(key: request.key))
        try journal.commit()
        engine.apply(entry, key: request.key)
        try journal.close()

        let (reopened, recovery) = try Journal.open(directory: data.path, options: JournalOptions(fsync: .none))
        defer { try? reopened.close() }
        #expect(recovery.snapshot != nil)
        #expect(recovery.records.count == 1)
        let recovered = try Engine.replaying(recovery, directory: data.path)
        let live = try ReadBackCheck.observed(engine, "live")
        let restarted = try ReadBackCheck.observed(recovered, "restarted")
        let same = restarted == live
        #expect(same, "restarted, chimed answers differently: \(ReadBackCheck.difference(live, restarted))")
        #expect(
            recovered.decide(request, now: ReadBackCheck.now, random: &random)
                == engine.decide(request, now: ReadBackCheck.now, random: &random)
        )
    }

    /// Writes the fuzz target's seeds (`Fuzz/corpus/readback`): the setup commands, the worst cases
    /// that fit in the fuzzer's 4096 bytes, generated cases that do, and inputs that stand for
    /// generated cases. Run with `CHIME_READBACK_WRITE_SEEDS=1` after changing them.
    @Test(.enabled(if: environment["CHIME_READBACK_WRITE_SEEDS"] != nil))
    func writeFuzzSeeds() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Fuzz/corpus/readback").standardized
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var seeds = ReadBackCheck.setup.map { Array($0.1.utf8) } + ReadBackWorstCase.all.map(\.payload)
        var generator = ReadBackGenerator(seed: 1)
        for _ in 0..<200 where seeds.count < 120 {
            let c = generator.next()
            if c.payload.count <= 1024 { seeds.append(c.payload) }
        }
        for i in UInt8(0)..<8 { seeds.append([ReadBackCheck.generatedMarker, i]) }
        for seed in seeds where seed.count <= 4096 {
            var h: UInt64 = 0xcbf2_9ce4_8422_2325
            for b in seed { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
            let name = String(h, radix: 16)
            try Data(seed).write(
                to: directory.appendingPathComponent(String(repeating: "0", count: 16 - name.count) + name)
            )
        }
    }
}

/// A hand-written worst case: one command at or past a limit, and what must become of it.
struct ReadBackWorstCase: Sendable, CustomTestStringConvertible {
    var name: String
    var op: ChimeCore.Operation
    var payload: [UInt8]
    var start: ReadBackCheck.Start
    var expected: ReadBackCheck.Outcome

    var testDescription: String { name }

    var isWritten: Bool {
        if case .written = expected { return true }
        return false
    }

    init(
        _ name: String,
        _ op: ChimeCore.Operation,
        _ payload: String,
        on start: ReadBackCheck.Start = .fresh,
        _ expected: ReadBackCheck.Outcome
    ) {
        self.name = name
        self.op = op
        self.payload = Array(payload.utf8)
        self.start = start
        self.expected = expected
    }

    /// A `schedule`.
    init(_ name: String, _ payload: String, on start: ReadBackCheck.Start = .fresh, _ expected: ReadBackCheck.Outcome) {
        self.init(name, .schedule, payload, on: start, expected)
    }

    static let scheduled = ReadBackCheck.Outcome.written(.schedule)
    static func refused(_ code: String) -> ReadBackCheck.Outcome { .refused(code) }

    /// A one-shot an hour from now with these members too.
    static func with(_ members: String) -> String { #"{"id":"w","after":3600,\#(members)}"# }

    static func nested(_ depth: Int) -> String { ReadBackCheck.nested(depth) }

    /// `[[...[1]...]]`, `depth` arrays deep.
    static func arrays(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth)
    }

    static func batch(_ n: Int, _ notification: (Int) -> String = { #"{"id":"n\#($0)","after":3600}"# }) -> String {
        #"{"notifications":[\#((0..<n).map(notification).joined(separator: ","))]}"#
    }

    static let limit = CommandLimits.maximumUserInfoDepth

    static let all: [ReadBackWorstCase] = [
        // Nesting: userInfo to its limit of 32, past it, and past the parser's 64.
        .init("userInfo nested 32 levels", with(#""userInfo":\#(nested(limit))"#), scheduled),
        .init(
            "userInfo nested 32 levels in a batch",
            batch(2) { #"{"id":"n\#($0)","after":60,"userInfo":\#(nested(limit))}"# },
            scheduled
        ),
        .init("userInfo nested 31 levels of arrays", with(#""userInfo":{"a":\#(arrays(limit - 1))}"#), scheduled),
        .init("userInfo nested 33 levels", with(#""userInfo":\#(nested(limit + 1))"#), refused("invalid_argument")),
        .init(
            "userInfo nested 63 levels, the payload 64",
            with(#""userInfo":\#(nested(63))"#),
            refused("invalid_argument")
        ),
        .init(
            "userInfo nested 64 levels, the payload 65",
            with(#""userInfo":\#(nested(64))"#),
            refused("malformed_json")
        ),
        .init("a payload nested 10000 levels", arrays(10_000), refused("malformed_json")),
        .init(
            "a match on userInfo nested 32 levels",
            .cancel,
            #"{"match":{"userInfo":{"deep":\#(nested(limit - 1))}}}"#,
            on: .prepared,
            .written(.cancel)
        ),
        .init(
            "list matching userInfo nested 32 levels",
            .list,
            #"{"match":{"userInfo":\#(nested(limit))},"limit":1000}"#,
            on: .prepared,
            .answered(error: nil)
        ),
        .init(
            "preview of userInfo nested 32 levels",
            .preview,
            #"{"notification":{"after":1,"userInfo":\#(nested(limit))}}"#,
            .answered(error: nil)
        ),
        .init(
            "snooze of a notification with userInfo nested 32 levels",
            .snooze,
            #"{"id":"a","after":315360000}"#,
            on: .prepared,
            .written(.snooze)
        ),

        // Numbers: kept exactly, or refused.
        .init(
            "numbers at the bounds",
            with(
                #""userInfo":{"max":9223372036854775807,"min":-9223372036854775808,"huge":1e308,"#
                    + #""largest":1.7976931348623157e308,"tiny":5e-324,"zero":-0.0,"z":-0,"past53":9007199254740993,"#
                    + #""at53":9007199254740992,"third":0.30000000000000004,"e":1E+2,"small":2.2250738585072014e-308}"#
            ),
            scheduled
        ),
        .init("2^63", with(#""userInfo":{"n":9223372036854775808}"#), refused("invalid_argument")),
        .init("-2^63 - 1", with(#""userInfo":{"n":-9223372036854775809}"#), refused("invalid_argument")),
        .init("30 digits", with(#""userInfo":{"n":123456789012345678901234567890}"#), refused("invalid_argument")),
        .init(
            "a decimal longer than a double holds",
            with(#""userInfo":{"n":0.1000000000000000055511151231257827}"#),
            refused("invalid_argument")
        ),
        .init("1e400", with(#""userInfo":{"n":1e400}"#), refused("malformed_json")),
        .init("1e-400", with(#""userInfo":{"n":1e-400}"#), refused("invalid_argument")),
        .init("after 5e-324 seconds, 0 ms", #"{"id":"w","after":5e-324}"#, refused("invalid_argument")),
        .init("expiresAfter 0.0004 seconds, 0 ms", with(#""expiresAfter":0.0004"#), refused("invalid_argument")),
        .init("expiresAfter 0.0005 seconds, 1 ms", with(#""expiresAfter":0.0005"#), scheduled),
        .init(
            "snooze after 2.2250738585072014e-308 seconds",
            .snooze,
            #"{"id":"a","after":2.2250738585072014e-308}"#,
            on: .prepared,
            refused("invalid_argument")
        ),
        .init("after at its bound", #"{"id":"w","after":315360000}"#, scheduled),
        .init("after just past its bound", #"{"id":"w","after":315360000.001}"#, refused("invalid_argument")),
        .init("leadTime 5e-324 seconds", with(#""leadTime":5e-324"#), scheduled),
        .init("badge at its bound", with(#""badge":1000000"#), scheduled),
        .init("a badge change at its bound", with(#""badge":"-1000000""#), scheduled),
        .init("a badge change of 7 digits past its bound", with(#""badge":"-9999999""#), refused("invalid_argument")),

        // Strings: up to 65536 characters, in any Unicode.
        .init(
            "alertBody of 65536 characters",
            with(#""alertBody":"\#(String(repeating: "x", count: 65_536))""#),
            scheduled
        ),
        .init(
            "alertBody of 65537 characters",
            with(#""alertBody":"\#(String(repeating: "x", count: 65_537))""#),
            refused("invalid_argument")
        ),
        .init(
            "alertBody of 65536 two-byte characters",
            with(#""alertBody":"\#(String(repeating: "\u{E9}", count: 65_536))""#),
            scheduled
        ),
        .init(
            "one character of 60000 combining marks",
            with(#""alertBody":"e\#(String(repeating: "\u{301}", count: 60_000))""#),
            scheduled
        ),
        .init(
            "20000 escaped surrogate pairs",
            with(#""alertTitle":"\#(String(repeating: #"\ud83d\ude00"#, count: 20_000))""#),
            scheduled
        ),
        .init(
            "astral, combining, right-to-left, zero-width and NUL characters",
            #"{"id":"\ud83d\ude00\u0000\u200d\u202e","after":60,"alertTitle":"\u202eשלום مرحبا\u200f","#
                + #""alertBody":"\u0000\u0001\u001f\u2028\u2029\ufeff\uffff\udbff\udfff","category":"e\u0301\u0302","#
                + #""userInfo":{"\u0000":"\u0000","":"","\u200b":"\ud834\udd1e","K":"K"}}"#,
            scheduled
        ),
        // Chime's strings compare by canonical equivalence (Swift's `String`): keys that are
        // spelt differently but mean the same are one key given twice.
        .init("canonically equivalent keys", with(#""userInfo":{"K":1,"\u212a":2}"#), refused("malformed_json")),
        .init("a lone surrogate", with(#""alertBody":"\ud800""#), refused("malformed_json")),
        .init("the longest id, in combining marks", #"{"id":"\#(ReadBackCheck.longestId)","after":60}"#, scheduled),
        .init(
            "an id of 129 characters",
            #"{"id":"\#(String(repeating: "x", count: 129))","after":60}"#,
            refused("invalid_argument")
        ),
        .init(
            "canonically equivalent ids in one batch",
            #"{"notifications":[{"id":"caf\u00e9","after":60},{"id":"cafe\u0301","after":60}]}"#,
            refused("invalid_argument")
        ),
        .init("a canonically equivalent id replaces", #"{"id":"cafe\u0301","after":60}"#, on: .prepared, scheduled),
        .init(
            "a requestId of 128 characters",
            with(#""requestId":"\#(String(repeating: "\u{1F600}", count: 128))""#),
            scheduled
        ),

        // Sizes: userInfo at its 4096 bytes, many keys, batches, the whole payload.
        .init(
            "userInfo of 4096 bytes",
            with(#""userInfo":{"k":"\#(String(repeating: "x", count: 4088))"}"#),
            scheduled
        ),
        .init(
            "userInfo of 4097 bytes",
            with(#""userInfo":{"k":"\#(String(repeating: "x", count: 4089))"}"#),
            refused("payload_too_large")
        ),
        .init(
            "userInfo of 300 keys",
            with(#""userInfo":{\#((0..<300).map { #""k\#($0)":\#($0)"# }.joined(separator: ","))}"#),
            scheduled
        ),
        .init("a batch of 1000", batch(1000), scheduled),
        .init("a batch of 1001", batch(1001), refused("invalid_argument")),
        .init("a batch of 1000 over the quota", batch(1000), on: .prepared, .answered(error: "quota_exceeded")),
        .init(
            "a batch of 999 that replaces everything",
            #"{"notifications":[\#((0..<999).map { #"{"id":"n\#($0)","after":3600}"# }.joined(separator: ","))],"replace":{"all":true}}"#,
            on: .prepared,
            scheduled
        ),
        .init(
            "alertBodies of 1000",
            with(#""alertBodies":[\#(Array(repeating: #""b""#, count: 1000).joined(separator: ","))]"#),
            scheduled
        ),
        .init(
            "alertBodies of 1001",
            with(#""alertBodies":[\#(Array(repeating: #""b""#, count: 1001).joined(separator: ","))]"#),
            refused("invalid_argument")
        ),
        .init("a payload of 262144 bytes", padded(#"{"id":"w","after":60}"#, to: 262_144), scheduled),
        .init(
            "a payload of 262145 bytes",
            padded(#"{"id":"w","after":60}"#, to: 262_145),
            refused("payload_too_large")
        ),
        .init(
            "ids of 1000",
            .cancel,
            #"{"ids":[\#((0..<1000).map { #""n\#($0)""# }.joined(separator: ","))]}"#,
            on: .prepared,
            .answered(error: nil)
        ),

        // Dates: fractions, offsets, the first and last years.
        .init("a fireDate with nanoseconds", #"{"id":"w","fireDate":"2026-07-01T09:00:00.123456789Z"}"#, scheduled),
        .init("the first instant", #"{"id":"w","fireDate":"0001-01-01T00:00:00Z"}"#, scheduled),
        .init("the last instant", #"{"id":"w","fireDate":"9999-12-31T23:59:59.999Z"}"#, scheduled),
        .init("the first instant, with an offset", #"{"id":"w","fireDate":"0001-01-01T00:00:00-23:59"}"#, scheduled),
        .init("the last instant, with an offset", #"{"id":"w","fireDate":"9999-12-31T23:59:59+23:59"}"#, scheduled),
        .init(
            "an offset that takes fireDate into the year 0",
            #"{"id":"w","fireDate":"0001-01-01T00:00:00+01:00"}"#,
            refused("invalid_argument")
        ),
        .init(
            "an offset that takes fireDate into the year 10000",
            #"{"id":"w","fireDate":"9999-12-31T23:59:59-01:00"}"#,
            refused("invalid_argument")
        ),
        .init(
            "an offset that takes an exdate into the year 0",
            #"{"id":"w","fireDate":"2026-07-01T09:00:00Z","repeatInterval":"day","exdates":["0001-01-01T00:00:00+00:01"]}"#,
            refused("invalid_argument")
        ),
        .init(
            "an offset that takes until into the year 10000",
            #"{"id":"w","fireDate":"2026-07-01T09:00:00Z","repeatInterval":"day","until":"9999-12-31T23:00:00-01:00"}"#,
            refused("invalid_argument")
        ),
        .init(
            "a wall-clock fireDate at the end of 9999 in a zone behind UTC",
            #"{"id":"w","fireDate":"9999-12-31T23:59:59","timeZone":"Etc/GMT+12"}"#,
            scheduled
        ),
        .init(
            "exdates with fractions and offsets",
            #"{"id":"w","fireDate":"2026-07-01T09:00:00Z","repeatInterval":"day","#
                + #""exdates":["2026-07-01T09:00:00.500Z","2026-07-02T11:00:00+02:00","2026-07-03T09:00:00"]}"#,
            scheduled
        ),
        .init(
            "until at the end of year 9999",
            #"{"id":"w","fireDate":"2026-07-01T09:00:00Z","repeatInterval":"year","until":"9999-12-31T23:59:59Z"}"#,
            scheduled
        ),

        // Rules: up to 1024 characters.
        .init(
            "an rrule of 1024 characters",
            #"{"id":"w","fireDate":"2026-07-01T09:00:00Z","rrule":"\#(rule(1024))"}"#,
            scheduled
        ),
        .init(
            "an rrule of 1025 characters",
            #"{"id":"w","fireDate":"2026-07-01T09:00:00Z","rrule":"\#(rule(1025))"}"#,
            refused("invalid_argument")
        ),

        // Every other change.
        .init("pause everything", .pause, #"{"all":true}"#, on: .prepared, .written(.setEnabled)),
        .init("resume everything", .resume, #"{"all":true}"#, on: .prepared, .written(.setEnabled)),
        .init("cancel everything", .cancel, #"{"all":true}"#, on: .prepared, .written(.cancel)),
        .init(
            "snooze the longest id",
            .snooze,
            #"{"id":"\#(ReadBackCheck.longestId)","after":1}"#,
            on: .prepared,
            .written(.snooze)
        ),
        .init("clear the quiet hours", .device, #"{"quietHours":null}"#, on: .prepared, .written(.device)),
        .init(
            "move the device",
            .device,
            #"{"timeZone":"Pacific/Kiritimati","badge":1000000}"#,
            on: .prepared,
            .written(.device)
        ),
        .init("read the device", .device, "{}", on: .prepared, .answered(error: nil)),
    ]

    /// `payload` with spaces before its closing brace, `count` bytes in all.
    static func padded(_ payload: String, to count: Int) -> String {
        String(payload.dropLast()) + String(repeating: " ", count: count - payload.utf8.count) + "}"
    }

    /// A valid rule of exactly `length` characters: `BYMONTHDAY=1,15,15,...,0015`.
    static func rule(_ length: Int) -> String {
        var rule = "FREQ=MONTHLY;BYMONTHDAY=1"
        while rule.count + 3 <= length { rule += ",15" }
        return String(rule.dropLast(2)) + String(repeating: "0", count: length - rule.count) + "15"
    }
}
