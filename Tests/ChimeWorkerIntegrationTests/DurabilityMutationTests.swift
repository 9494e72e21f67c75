import ChimeCore
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// Thousands of mutated commands sent to a live chimed: every one gets exactly one reply (an error,
/// or ok when the mutation happens to be a valid command), or, on an invalid topic with no reply
/// destination, is dropped; the worker stays up; and nothing changes on a device unless a command
/// to it was answered ok. The state then survives a restart unchanged.
///
/// The mutations are seeded: a failure prints the seed; `CHIME_MUTATION_SEED=<seed>` replays it
/// and `CHIME_MUTATIONS=<n>` changes how many are sent (default 3000).
@Suite(.serialized) struct DurabilityMutationTests {
    static func device(_ i: Int) -> String { "mut-\(i)" }

    /// What one mutated command was and what came back.
    struct Outcome: Sendable {
        var description: String
        var device: String?
        var op: String
        var replyExpected: Bool
        var reply: JSONObject?
    }

    static let writes: Set<String> = ["schedule", "cancel", "pause", "resume", "device", "snooze"]
    static let errorCodes: Set<String> = [
        "malformed_json", "invalid_argument", "unknown_field", "payload_too_large", "timezone_required", "never_fires",
        "not_found", "quota_exceeded", "unavailable", "internal",
    ]

    @Test(arguments: StoreKind.allCases) func mutatedCommandsGetErrorsAndChangeNothing(store: StoreKind) async throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["CHIME_MUTATION_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64.max)
        let total = environment["CHIME_MUTATIONS"].flatMap(Int.init) ?? 3000
        let f = try await WorkerFixture.start(
            extra: ["--max-command-bytes", "16384", "--max-pending-per-device", "40"],
            store: store
        )
        defer { Task { await f.stop() } }

        // Every device starts with something to lose. About one mutation in 70 happens to be a
        // valid change; enough devices stay untouched by those to check the rest against.
        let deviceCount = max(64, total / 30)
        try await Self.forEachDevice(deviceCount) { i, d in
            if i % 2 == 0 {
                try await f.ok(
                    d,
                    .device,
                    #"{"timeZone":"Europe/Paris","badge":\#(i),"quietHours":{"start":"22:00","end":"07:00"}}"#
                )
            }
            try await f.ok(
                d,
                .schedule,
                #"{"id":"n1","fireDate":"2040-01-01T10:00:00Z","alertBody":"one","userInfo":{"k":"v"}}"#
            )
            try await f.ok(
                d,
                .schedule,
                #"{"id":"r1","fireDate":"2040-01-01T09:00:00","timeZone":"Asia/Tokyo","rrule":"FREQ=WEEKLY;BYDAY=MO,WE","leadTime":60}"#
            )
        }
        let before = try await Self.states(f, deviceCount)

        var generator = MutationGenerator(seed: seed, devices: (0..<deviceCount).map(Self.device))
        let mutations = (0..<total).map { _ in generator.next() }
        let outcomes = Mutex<[Outcome]>([])
        let replyTopic = "test/replies/\(f.workerId)"
        // A few dozen in flight at a time, as many clients would send them.
        for chunk in stride(from: 0, to: mutations.count, by: 32) {
            await withTaskGroup(of: Outcome.self) { group in
                for mutation in mutations[chunk..<min(chunk + 32, mutations.count)] {
                    group.addTask {
                        var outcome = Outcome(
                            description: mutation.description,
                            device: mutation.device,
                            op: mutation.op,
                            replyExpected: mutation.replyExpected,
                            reply: nil
                        )
                        if mutation.replyExpected {
                            let reply = try? await f.client.request(
                                topic: mutation.topic,
                                payload: mutation.payload,
                                responseTopic: replyTopic,
                                timeout: .seconds(20)
                            )
                            outcome.reply = reply.flatMap { (try? JSON(parsing: $0.payload))?.objectValue }
                        } else {
                            _ = try? await f.client.publish(
                                topic: mutation.topic,
                                payload: mutation.payload,
                                timeout: .seconds(20)
                            )
                        }
                        return outcome
                    }
                }
                for await outcome in group { outcomes.withLock { $0.append(outcome) } }
            }
        }
        let results = outcomes.withLock { $0 }
        let context = "seed \(seed) (CHIME_MUTATION_SEED=\(seed) replays it)"

        // Every command with a reply destination got one well-formed reply.
        var changed = Set<String>()
        var okCount = 0
        var errorCount = 0
        for outcome in results where outcome.replyExpected {
            guard let reply = outcome.reply else {
                Issue.record("no reply to \(outcome.description); \(context)")
                continue
            }
            if reply.isOK {
                okCount += 1
                if Self.writes.contains(outcome.op), let device = outcome.device { changed.insert(device) }
            } else {
                errorCount += 1
                let code = reply.errorCode ?? ""
                #expect(
                    Self.errorCodes.contains(code),
                    "\(outcome.description) → \(JSON.object(reply).text); \(context)"
                )
                #expect(code != "internal", "\(outcome.description) → \(JSON.object(reply).text); \(context)")
                let message = reply["error"]?.objectValue?["message"]?.stringValue ?? ""
                #expect(!message.isEmpty, "\(outcome.description); \(context)")
            }
        }
        #expect(errorCount > total / 2, "only \(errorCount) errors of \(total); \(context)")
        // No second reply to anything: unclaimed messages on the reply topic would be one.
        let extra = f.commands.received.withLock { $0.filter { $0.topic == replyTopic } }
        #expect(extra.isEmpty, "\(extra.count) replies nobody waited for; \(context)")

        // The worker is up, serving, and each device unchanged unless a change to it was ok.
        #expect(f.worker?.process.isRunning == true, "\(context)")
        try await f.ok("mut-0", .schedule, #"{"id":"still-serving","after":3600}"#)
        changed.insert("mut-0")
        let after = try await Self.states(f, deviceCount)
        for (device, state) in before where !changed.contains(device) {
            #expect(after[device] == state, "\(device) changed without an ok reply; \(context)")
        }
        #expect(changed.count < deviceCount * 3 / 4, "every device was changed by a valid mutation; \(context)")

        // What the worker journaled replays to the same state.
        #expect(await f.stopWorker() == .exited(0), "\(context)")
        // Counted once the worker has exited, so that its log is complete.
        let dropped = f.worker?.log.components(separatedBy: "dropping a command on an invalid topic").count ?? 1
        #expect(dropped - 1 == mutations.filter { !$0.replyExpected }.count, "\(context)")
        try await f.startWorker()
        #expect(try await Self.states(f, deviceCount) == after, "state changed across a restart; \(context)")
        print(
            "mutations: \(total) sent, \(okCount) ok, \(errorCount) errors, \(changed.count) devices changed; \(context)"
        )
    }

    /// `device` and `list` of every device.
    static func states(_ f: WorkerFixture, _ count: Int) async throws -> [String: JSON] {
        let states = Shared<[String: JSON]>([:])
        try await forEachDevice(count) { _, d in
            let state: JSON = [
                "device": .object(try await f.ok(d, .device, "{}")),
                "list": .object(try await f.ok(d, .list, #"{"limit":1000}"#)),
            ]
            states.withLock { $0[d] = state }
        }
        return states.value
    }

    /// Runs `body` for each of `count` devices, 16 devices at a time.
    static func forEachDevice(_ count: Int, _ body: @escaping @Sendable (Int, String) async throws -> Void) async throws
    {
        for chunk in stride(from: 0, to: count, by: 16) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in chunk..<min(chunk + 16, count) {
                    group.addTask { try await body(i, device(i)) }
                }
                try await group.waitForAll()
            }
        }
    }
}

/// One mutated command.
struct Mutation: Sendable {
    var topic: String
    var payload: [UInt8]
    /// The device the topic addresses, when it is one of the test's devices.
    var device: String?
    var op: String
    /// False for an invalid topic sent without a Response Topic: the worker must drop it.
    var replyExpected: Bool
    var description: String
}

/// Seeded mutations of valid commands: bit flips, truncations, type swaps, huge numbers, deep
/// nesting, invalid UTF-8, wrong topics, invalid device ids, oversized payloads, random RRULEs.
struct MutationGenerator {
    var random: SplitMix64
    let devices: [String]
    var serial = 0

    init(seed: UInt64, devices: [String]) {
        random = SplitMix64(seed: seed)
        self.devices = devices
    }

    static let bases: [(ChimeCore.Operation, String)] = [
        (
            .schedule,
            #"{"id":"n1","fireDate":"2040-01-01T10:00:00Z","alertBody":"hi","badge":"+1","userInfo":{"k":"v","n":[1,2]}}"#
        ),
        (
            .schedule,
            #"{"id":"r2","fireDate":"2040-01-01T09:00:00","timeZone":"Europe/Paris","rrule":"FREQ=MONTHLY;BYDAY=-1FR;COUNT=6","leadTime":900,"exdates":["2040-03-30T09:00:00"]}"#
        ),
        (
            .schedule,
            #"{"id":"i3","after":86400,"alignTo":"12:00","timeZone":"Asia/Tokyo","repeatInterval":"day","count":3}"#
        ),
        (
            .schedule,
            #"{"notifications":[{"id":"b1","fireDate":"2041-01-01T00:00:00Z"},{"id":"b2","after":7200,"misfire":"all"}],"replace":{"ids":["n1"]},"requestId":"rq"}"#
        ),
        (.cancel, #"{"ids":["n1","r1"]}"#),
        (.cancel, #"{"match":{"userInfo":{"k":"v"}}}"#),
        (.pause, #"{"all":true}"#),
        (.resume, #"{"ids":["r1"]}"#),
        (.list, #"{"match":{"userInfo":{"k":"v"}},"limit":10,"cursor":"a"}"#),
        (.preview, #"{"id":"r1","count":5,"from":"2030-01-01T00:00:00Z"}"#),
        (
            .preview,
            #"{"notification":{"fireDate":"2030-01-01T09:00:00Z","rrule":"FREQ=DAILY;BYHOUR=9,21"},"count":20}"#
        ),
        (.device, #"{"timeZone":"Asia/Tokyo","badge":3,"quietHours":{"start":"23:00","end":"06:00"}}"#),
        (.snooze, #"{"id":"n1","after":600}"#),
    ]

    mutating func below(_ n: Int) -> Int { Int(random.next() % UInt64(n)) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    mutating func next() -> Mutation {
        serial += 1
        let (op, base) = Self.bases[below(Self.bases.count)]
        let device = devices[below(devices.count)]
        var payload = Array(base.utf8)
        var what: [String] = []
        for _ in 0..<(1 + below(3)) {
            let (mutated, name) = mutate(payload)
            payload = mutated
            what.append(name)
        }
        var topic = "chime/\(device)/cmd/\(op.rawValue)"
        var addressed: String? = device
        var opName = op.rawValue
        var replyExpected = true
        if chance(8) {
            let (wrong, name, deviceValid) = wrongTopic(device: device, op: op.rawValue)
            topic = wrong
            what.append(name)
            addressed = nil
            opName = String(topic.split(separator: "/", omittingEmptySubsequences: false).last ?? "")
            // Without a Response Topic an invalid device id has nowhere to be answered.
            if !deviceValid && chance(50) {
                replyExpected = false
                what.append("no response topic")
            }
        }
        let text = String(decoding: payload.prefix(120), as: UTF8.self)
        return Mutation(
            topic: topic,
            payload: payload,
            device: addressed,
            op: opName,
            replyExpected: replyExpected,
            description:
                "#\(serial) \(topic) [\(what.joined(separator: ", "))] \(text)\(payload.count > 120 ? "…" : "")"
        )
    }

    mutating func mutate(_ payload: [UInt8]) -> ([UInt8], String) {
        var p = payload
        switch below(12) {
        case 0:
            for _ in 0..<(1 + below(4)) where !p.isEmpty {
                p[below(p.count)] ^= UInt8(1) << UInt8(below(8))
            }
            return (p, "bit flips")
        case 1:
            return (Array(p.prefix(below(p.count + 1))), "truncated")
        case 2:
            return (replaceValue(p, with: typeSwap()), "type swap")
        case 3:
            let huge = [
                "1e308", "-1e309", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
                "123456789012345678901234567890", "1e-400", "0.0000000000000000000001", "-0", "4.9e-324",
            ]
            return (replaceValue(p, with: huge[below(huge.count)]), "huge number")
        case 4:
            let depth = [63, 64, 65, 100, 5000][below(5)]
            let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            return (chance(30) ? Array(nested.utf8) : replaceValue(p, with: nested), "nested \(depth)")
        case 5:
            let bad: [[UInt8]] = [
                [0xC3, 0x28], [0xFF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC0, 0xAF], [0xE2, 0x82],
            ]
            guard let quote = p.indices.filter({ p[$0] == UInt8(ascii: "\"") }).randomElement(using: &random) else {
                return (p, "no string")
            }
            p.insert(contentsOf: bad[below(bad.count)], at: quote + 1)
            return (p, "invalid UTF-8")
        case 6:
            let size = [16_385, 20_000, 300_000][below(3)]
            let body = String(repeating: "x", count: size)
            return (replaceValue(p, with: "\"\(body)\""), "oversized \(size)")
        case 7:
            return (replaceValue(p, with: "\"\(randomRule())\"", key: "rrule"), "random rrule")
        case 8:
            let extras = [
                #""alertBdy":"typo""#, #""id":"dup""#, #""userInfo":{"x":"\#(String(repeating: "y", count: 5000))"}"#,
                #""requestId":"\#(String(repeating: "r", count: 200))""#, #""badge":-1"#, #""badge":"+x""#,
                #""timeZone":"Mars/Olympus""#, #""misfire":"sometimes""#, #""after":0"#, #""count":0"#,
                #""id":"x~snooze""#, #""id":"""#, #""fireDate":"2026-02-30T10:00:00""#, #""limit":1001"#,
            ]
            guard let brace = p.firstIndex(of: UInt8(ascii: "{")) else { return (p, "no object") }
            p.insert(contentsOf: Array((extras[below(extras.count)] + ",").utf8), at: brace + 1)
            return (p, "extra field")
        case 9:
            let whole = ["", " ", "null", "[]", "\"text\"", "42", "{", "}", "{}{}", "{\"a\":1,}", "\u{FEFF}{}", "{} x"]
            return (Array(whole[below(whole.count)].utf8), "not one object")
        case 10:
            // Repeat a slice: duplicate keys, stray commas, garbage.
            guard p.count > 2 else { return (p, "short") }
            let start = below(p.count - 1)
            let end = min(p.count, start + 1 + below(20))
            p.insert(contentsOf: p[start..<end], at: below(p.count))
            return (p, "spliced")
        default:
            let times = [
                "2026-13-01T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2026-03-29T02:30:00", "24:00",
                "12:60", "tomorrow",
            ]
            return (replaceValue(p, with: "\"\(times[below(times.count)])\""), "odd time")
        }
    }

    /// Replaces the value after a random key (or `key`), as text.
    mutating func replaceValue(_ payload: [UInt8], with value: String, key: String? = nil) -> [UInt8] {
        let text = String(decoding: payload, as: UTF8.self)
        var colons: [String.Index] = []
        if let key, let range = text.range(of: "\"\(key)\":") {
            colons = [text.index(before: range.upperBound)]
        } else {
            colons = text.indices.filter { text[$0] == ":" }
        }
        guard let colon = colons.randomElement(using: &random) else { return Array((text + value).utf8) }
        var end = text.index(after: colon)
        var depth = 0
        var inString = false
        var escaped = false
        while end < text.endIndex {
            let c = text[end]
            if inString {
                if escaped {
                    escaped = false
                } else if c == "\\" {
                    escaped = true
                } else if c == "\"" {
                    inString = false
                }
            } else if c == "\"" {
                inString = true
            } else if c == "[" || c == "{" {
                depth += 1
            } else if c == "]" || c == "}" {
                if depth == 0 { break }
                depth -= 1
            } else if c == "," && depth == 0 {
                break
            }
            end = text.index(after: end)
        }
        return Array((String(text[...colon]) + value + String(text[end...])).utf8)
    }

    mutating func typeSwap() -> String {
        let values = [
            "null", "true", "false", "0", "-1", "3.5", "\"\"", "\"x\"", "[]", "[1,\"a\",null]", "{}",
            "{\"a\":{\"b\":[]}}",
        ]
        return values[below(values.count)]
    }

    mutating func randomRule() -> String {
        let freqs = ["SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY", "FORTNIGHTLY", ""]
        let parts: [(inout MutationGenerator) -> String] = [
            { g in "INTERVAL=\([0, 1, 2, 7, 1_000_000_000, -1][g.below(6)])" },
            { g in "COUNT=\([0, 1, 5, 1_000_000_001][g.below(4)])" },
            { g in "UNTIL=\(["20000101T000000Z", "20401231", "20401231T235959", "2040"][g.below(4)])" },
            { g in "BYSECOND=\([0, 59, 60, -1][g.below(4)])" },
            { g in "BYMINUTE=\([0, 30, 59, 60][g.below(4)])" },
            { g in "BYHOUR=\([0, 2, 23, 24][g.below(4)])" },
            { g in "BYDAY=\(["MO", "-1FR", "53SU", "+2TU,WE", "XX", "0MO"][g.below(6)])" },
            { g in "BYMONTHDAY=\([1, -1, 29, 30, 31, 32, 0][g.below(7)])" },
            { g in "BYYEARDAY=\([1, -366, 366, 367][g.below(4)])" },
            { g in "BYWEEKNO=\([1, 53, -53, 54][g.below(4)])" },
            { g in "BYMONTH=\([1, 2, 12, 13][g.below(4)])" },
            { g in "BYSETPOS=\([1, -1, 366, 367, 0][g.below(5)])" },
            { g in "WKST=\(["MO", "SU", "XY"][g.below(3)])" },
        ]
        var rule = ["FREQ=\(freqs[below(freqs.count)])"]
        for _ in 0..<below(5) { rule.append(parts[below(parts.count)](&self)) }
        if chance(10) { rule.shuffle(using: &random) }
        return (chance(20) ? "RRULE:" : "") + rule.joined(separator: ";")
    }

    /// A topic the worker receives (it matches `chime/+/cmd/+`) but whose device id or operation is
    /// invalid; whether the device id is valid (then a reply goes to its replies topic).
    mutating func wrongTopic(device: String, op: String) -> (String, String, Bool) {
        switch below(7) {
        case 0: return ("chime//cmd/\(op)", "empty device id", false)
        case 1: return ("chime/$sys/cmd/\(op)", "device id starting with $", false)
        case 2: return ("chime/bad device/cmd/\(op)", "device id with a space", false)
        case 3: return ("chime/\(String(repeating: "d", count: 129))/cmd/\(op)", "device id of 129", false)
        case 4: return ("chime/ünï/cmd/\(op)", "non-ASCII device id", false)
        case 5: return ("chime/\(device)/cmd/explode", "unknown operation", true)
        default: return ("chime/\(device)/cmd/", "empty operation", true)
        }
    }
}
