import ChimeCore

// In the test target; the fuzz build compiles SplitMix64.swift in with this file instead.
#if canImport(ChimeTestSupport)
import ChimeTestSupport
#endif

/// "Whatever chimed acknowledges, it can read back", as a property of one command payload.
///
/// Shared by `ReadBackTests` (generated and hand-written cases), `FuzzRegressionTests` (every
/// input the fuzzer found or was seeded with) and the libFuzzer target `readback`
/// (`Fuzz/FuzzReadback.swift`). `scripts/fuzz` compiles this file into the fuzz targets with
/// `FuzzChecks.swift`, `ReadBackGenerator.swift` and ChimeTestSupport's `SplitMix64.swift`: it
/// must import nothing but ChimeCore.
///
/// The payload is decoded as chimed decodes it (``CommandDecoder`` with the default limits of
/// PROTOCOL.md section 3.8) and decided by a fresh or a prepared engine at a fixed clock. What
/// would be acknowledged (a `Decision.write`) is carried through as chimed carries it: its journal
/// record, with the command's ``CommandKey``, must read back as the same entry and key (and encode
/// to the same bytes again); it is applied; then the state is rebuilt the three ways a restart
/// rebuilds it: from a snapshot taken after it, from the journal alone, and from a snapshot taken
/// before it followed by its record. Each rebuilt engine must answer a `list` (limit 1000) and a
/// `device` read with exactly the bytes the live engine answers, and must recognise the command
/// again (a redelivery is answered `duplicate`, as the live engine answers it). Every reply along
/// the way, of the command and of the reads, must parse with Chime's own parser at its default
/// depth: chimed can read what it writes.
enum ReadBackCheck {
    typealias Violation = FuzzChecks.Violation

    /// 2026-06-15T10:00:00.250Z: a clock with milliseconds, as chimed's always has, so that an
    /// `after` resolves to a fire date with a fraction.
    static let now = Instant(milliseconds: 1_781_517_600_250)
    static let device = "rb"
    static let configuration = EngineConfiguration()
    /// As chimed decodes commands by default.
    static let decoder = CommandDecoder()

    /// The engine a command meets.
    enum Start: String, CaseIterable, Hashable, Sendable {
        /// Nothing on any device.
        case fresh
        /// The device of ``setup``: a zone, quiet hours, notifications with deep and odd userInfo,
        /// unusual ids, pending snoozes.
        case prepared
    }

    /// What became of a command, so that tests can check their cases reach what they mean to.
    enum Outcome: Hashable, Sendable, CustomStringConvertible {
        /// Refused by the decoder, with this error code.
        case refused(String)
        /// Answered at once: a read, a change of nothing, or the engine's error (its code).
        case answered(error: String?)
        /// Journaled, applied and read back.
        case written(JournalEntry.Kind)

        var description: String {
            switch self {
            case .refused(let code): return "refused \(code)"
            case .answered(let code?): return "answered \(code)"
            case .answered(nil): return "answered ok"
            case .written(let kind): return "written \(kind.name)"
            }
        }
    }

    /// One journal record, as chimed appends it.
    struct Record: Sendable {
        var kind: UInt8
        var payload: [UInt8]
    }

    /// `{"d":{"d":...{}...}}`, `depth` objects deep.
    static func nested(_ depth: Int) -> String {
        String(repeating: #"{"d":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
    }

    /// 128 characters, 384 bytes: the longest id, in combining marks.
    static let longestId = String(repeating: "e\\u0301", count: 128)

    /// The commands that build the prepared engine: a bit of everything the limits allow.
    static let setup: [(Operation, String)] = [
        (.device, #"{"timeZone":"Europe/Paris","badge":3,"quietHours":{"start":"22:00","end":"07:00"}}"#),
        (
            .schedule,
            #"{"id":"a","after":60,"alertBody":"a \ud83d\ude00 \u0000 \u202e\u200d","badge":"+1","userInfo":{"k":"v","n":1.5,"#
                + #""max":9223372036854775807,"min":-9223372036854775808,"tiny":5e-324,"huge":1e308,"zero":-0.0,"#
                + #""a":[1,"x",null,true],"deep":\#(nested(CommandLimits.maximumUserInfoDepth - 1))}}"#
        ),
        (
            .schedule,
            #"{"id":"b","fireDate":"2026-06-01T09:00:00","rrule":"FREQ=DAILY;BYHOUR=9,21","misfire":"all","#
                + #""exdates":["2026-06-16T09:00:00","2026-06-17T07:00:00Z"],"leadTime":900}"#
        ),
        (
            .schedule,
            #"{"id":"c","fireDate":"2026-06-01T09:00","repeatInterval":"week","enabled":false,"keepAfterFiring":true}"#
        ),
        (
            .schedule,
            #"{"notifications":[{"id":"caf\u00e9","after":3600.5,"alignTo":"12:00","timeZone":"Asia/Kolkata","#
                + #""alertBodies":["x","\ud834\udd1e"],"userInfo":{"":"","\u0000":"\u0000"}},"#
                + #"{"id":"\#(longestId)","fireDate":"2026-12-31T23:59:59.999Z","expiresAfter":0.001,"#
                + #""repeatInterval":"month","count":3,"until":"2027-06-01T00:00:00+14:00"}]}"#
        ),
        (.snooze, #"{"id":"a","after":600}"#),
        (.snooze, #"{"id":"\#(longestId)","after":0.5}"#),
    ]

    // MARK: The property

    /// Checks one payload as one operation on one engine; throws the first violated property.
    @discardableResult
    static func check(op: Operation, payload: [UInt8], start: Start) throws(Violation) -> Outcome {
        do throws(Violation) {
            return try properties(op: op, payload: payload, start: start)
        } catch {
            throw Violation(
                description:
                    "\(op.rawValue) on a \(start) engine: \(error.description)\n  payload (\(payload.count) bytes) "
                    + short(text(payload))
            )
        }
    }

    /// For the fuzzer: the input as a payload of every operation on both engines; an input that
    /// starts with ``generatedMarker`` also stands for the generated case of its other bytes
    /// (``ReadBackGenerator/init(input:)``), which reaches deep nesting and long strings that a
    /// fuzzer's short inputs do not. Returns the first violation, or nil.
    static func fuzz(_ input: [UInt8]) -> String? {
        do throws(Violation) {
            if input.first == generatedMarker {
                var generator = ReadBackGenerator(input: input.dropFirst())
                let c = generator.next()
                do throws(Violation) {
                    try check(op: c.op, payload: c.payload, start: c.start)
                } catch {
                    throw Violation(description: "the generated case \(c.what): \(error.description)")
                }
            }
            for op in Operation.allCases {
                for start in Start.allCases { try check(op: op, payload: input, start: start) }
            }
            return nil
        } catch {
            return error.description
        }
    }

    /// Never the first byte of a JSON text (nor of UTF-8).
    static let generatedMarker: UInt8 = 0xFF

    private static func properties(op: Operation, payload: [UInt8], start: Start) throws(Violation) -> Outcome {
        var request: Request
        switch decoder.decode(deviceId: device, op: op, payload: payload) {
        case .failure(let failure):
            let reply = Reply(op: op.rawValue, requestId: failure.requestId, outcome: .failure(failure.error))
            try requireJSON(reply.bytes, "the error reply")
            return .refused(failure.error.code.wireName)
        case .success(let r):
            request = r
        }
        request.key = key(request, payload)
        var (engine, records) = try prepared(start)
        let before = entries(engine.snapshot)
        var random = SplitMix64(seed: 2)
        let entry: JournalEntry
        switch engine.decide(request, now: now, random: &random) {
        case .reply(let reply):
            try requireJSON(reply.bytes, "the reply")
            if case .failure(let error) = reply.outcome { return .answered(error: error.code.wireName) }
            return .answered(error: nil)
        case .write(let e):
            entry = e
        }
        guard let result = try journal(entry, key: request.key, to: engine, records: &records) else {
            throw Violation(description: "applying the command's journal entry gave no result")
        }
        try requireJSON(Reply(request: request, result: result).bytes, "the acknowledgement")
        let live = try observed(engine, "the live engine")
        let redelivered = engine.decide(request, now: now, random: &random)
        guard case .reply(let again) = redelivered, again.isDuplicate else {
            throw Violation(description: "the live engine does not take a redelivery of the command for one")
        }
        let rebuilt: [(String, [[UInt8]], [Record])] = [
            ("a snapshot taken after the command", entries(engine.snapshot), []),
            ("the journal alone", [], records),
            ("a snapshot taken before the command and its record", before, Array(records.suffix(1))),
        ]
        for (how, snapshot, tail) in rebuilt {
            let restored = try recovered(snapshot: snapshot, records: tail, how)
            // The same bytes as the live engine's, which were checked to parse: not parsed again.
            let seen = try observed(restored, "rebuilt from \(how)", parse: false)
            try require(
                seen == live,
                "rebuilt from \(how), the engine answers differently from the live one: \(difference(live, seen))"
            )
            try require(
                restored.decide(request, now: now, random: &random) == redelivered,
                "rebuilt from \(how), the engine does not take a redelivery of the command for one"
            )
        }
        return .written(entry.kind)
    }

    /// The command's key as chimed computes it for a QoS 1 message without Correlation Data.
    static func key(_ request: Request, _ payload: [UInt8]) -> CommandKey? {
        CommandKey.of(
            op: request.op.rawValue,
            payload: payload,
            correlationData: nil,
            hasRequestId: request.requestId != nil,
            packetId: 1,
            qos: 1
        )
    }

    /// Journals `entry` as chimed does (its record read back first, and checked), then applies it.
    static func journal(
        _ entry: JournalEntry,
        key: CommandKey?,
        to engine: Engine,
        records: inout [Record]
    ) throws(Violation) -> ReplyResult? {
        let payload = entry.encode(key: key)
        let read: (entry: JournalEntry, key: CommandKey?)
        do {
            read = try JournalEntry.decodeRecord(kind: entry.kind.rawValue, payload: payload)
        } catch {
            throw Violation(
                description: "the journal record of an acknowledged \(entry.kind.name) cannot be read back (\(error)): "
                    + short(text(payload))
            )
        }
        try require(
            read.entry == entry,
            "the \(entry.kind.name) entry changes through the journal:\n  acknowledged \(short("\(entry)"))\n"
                + "  read back    \(short("\(read.entry)"))"
        )
        try require(
            read.key == key,
            "the command key \(key.map(\.description) ?? "nil") came back as \(read.key.map(\.description) ?? "nil")"
        )
        let again = read.entry.encode(key: read.key)
        try require(
            again == payload,
            "the \(entry.kind.name) record changes when written again: \(difference(payload, again))"
        )
        records.append(Record(kind: entry.kind.rawValue, payload: payload))
        return engine.apply(entry, key: key)
    }

    /// The engine a command meets, and the journal that built it.
    ///
    /// The prepared engine is built once, live, command by command (and those commands checked as
    /// any other); each case then starts from a snapshot of it, restored, which costs much less
    /// than deciding its repeating schedules again.
    static func prepared(_ start: Start) throws(Violation) -> (Engine, [Record]) {
        guard start == .prepared else { return (Engine(configuration: configuration), []) }
        let (records, snapshot) = try preparedState.get()
        return (try recovered(snapshot: snapshot, records: [], "the prepared state"), records)
    }

    private static let preparedState = Result { () throws(Violation) -> ([Record], [[UInt8]]) in
        let engine = Engine(configuration: configuration)
        var records: [Record] = []
        var random = SplitMix64(seed: 1)
        for (op, text) in setup {
            let payload = Array(text.utf8)
            guard case .success(var request) = decoder.decode(deviceId: device, op: op, payload: payload) else {
                throw Violation(description: "the setup command \(text) does not decode")
            }
            request.key = key(request, payload)
            guard case .write(let entry) = engine.decide(request, now: now, random: &random) else {
                throw Violation(description: "the setup command \(text) was not accepted")
            }
            _ = try journal(entry, key: request.key, to: engine, records: &records)
        }
        let snapshot = entries(engine.snapshot)
        let seen = try observed(engine, "the prepared engine")
        let restored = try observed(try recovered(snapshot: snapshot, records: [], "its snapshot"), "its snapshot")
        try require(restored == seen, "the prepared engine and its snapshot differ: \(difference(seen, restored))")
        return (records, snapshot)
    }

    /// Rebuilds an engine as `Engine.replaying` does: the snapshot's entries, then the records.
    static func recovered(snapshot: [[UInt8]], records: [Record], _ how: String) throws(Violation) -> Engine {
        let restorer = EngineRestorer(configuration: configuration)
        restorer.reserveCapacity(for: SnapshotSizing(snapshot.lazy.map { $0[...] }))
        for entry in snapshot {
            do {
                try restorer.restore(snapshotEntry: entry)
            } catch {
                throw Violation(
                    description: "rebuilding from \(how): a snapshot entry cannot be restored (\(error)): "
                        + short(text(entry))
                )
            }
        }
        for record in records {
            do {
                let (entry, key) = try JournalEntry.decodeRecord(kind: record.kind, payload: record.payload)
                restorer.apply(entry, key: key)
            } catch {
                throw Violation(
                    description:
                        "rebuilding from \(how): a record cannot be read (\(error)): \(short(text(record.payload)))"
                )
            }
        }
        return restorer.finish()
    }

    static func entries(_ snapshot: EngineSnapshot) -> [[UInt8]] {
        var entries: [[UInt8]] = []
        snapshot.forEachEntry { (entry: [UInt8]) in entries.append(entry) }
        return entries
    }

    /// What a client reads of the device: every notification (one page of the largest size) and
    /// the device's settings, as reply bytes, each checked to parse (unless `parse` is false).
    static func observed(_ engine: Engine, _ what: String, parse: Bool = true) throws(Violation) -> [UInt8] {
        var random = SplitMix64(seed: 0)
        var bytes: [UInt8] = []
        let reads: [(Operation, Command)] = [
            (.list, .list(match: nil, limit: 1000, cursor: nil)), (.device, .device(DeviceUpdate())),
        ]
        for (op, command) in reads {
            let request = Request(deviceId: device, op: op, command: command)
            guard case .reply(let reply) = engine.decide(request, now: now, random: &random) else {
                throw Violation(description: "\(what): a \(op.rawValue) read wants to write")
            }
            if parse { try requireJSON(reply.bytes, "\(what): the \(op.rawValue) reply") }
            bytes += reply.bytes
            bytes.append(UInt8(ascii: "\n"))
        }
        return bytes
    }

    // MARK: Helpers

    static func require(_ condition: Bool, _ message: @autoclosure () -> String) throws(Violation) {
        try FuzzChecks.require(condition, message())
    }

    static func requireJSON(_ bytes: [UInt8], _ what: String) throws(Violation) {
        do {
            _ = try JSON(parsing: bytes)
        } catch {
            throw Violation(description: "\(what) is not JSON that chimed reads back (\(error)): \(short(text(bytes)))")
        }
    }

    static func text<C: Collection<UInt8>>(_ bytes: C) -> String { String(decoding: bytes, as: UTF8.self) }

    /// At most 600 characters of `text`, and how long it was.
    static func short(_ text: String) -> String {
        text.count <= 600 ? text : "\(text.prefix(600))… (\(text.count) characters)"
    }

    /// Where two byte strings first differ, with some context.
    static func difference(_ expected: [UInt8], _ actual: [UInt8]) -> String {
        let common = zip(expected, actual).prefix { $0 == $1 }.count
        let from = max(0, common - 120)
        func around(_ bytes: [UInt8]) -> String {
            text(bytes[from..<min(bytes.count, common + 240)]).split(separator: "\n", omittingEmptySubsequences: false)
                .joined(separator: " ⏎ ")
        }
        return "first difference at byte \(common) of \(expected.count) / \(actual.count):\n"
            + "  expected …\(around(expected))\n  actual   …\(around(actual))"
    }
}
