import ChimeCore

// In the test target; the fuzz build compiles SplitMix64.swift in with this file instead.
#if canImport(ChimeTestSupport)
import ChimeTestSupport
#endif

/// Command payloads for ``ReadBackCheck``, the same for the same seed: valid-looking commands of
/// every operation, most of them schedules, at and past every limit of PROTOCOL.md section 3.8,
/// and some of them mutated.
///
/// What they are made of: userInfo nested to 32 levels (the limit), 33, and past the parser's 64;
/// numbers near the 64-bit integer bounds, `1e308`, `5e-324`, `-0.0`, 2⁵³ ± 1 and long decimals
/// that must be refused; strings up to and past 65536 characters; astral, combining, right-to-left
/// and zero-width characters, escaped surrogate pairs, `\u0000`, canonically equivalent spellings;
/// objects of many keys; batches up to and past 1000; dates at the ends of years 0001 and 9999, with
/// fractions and offsets; rules near the 1024-character limit.
///
/// Compiled into the fuzz targets too (see ``ReadBackCheck``): it must import nothing but ChimeCore.
struct ReadBackGenerator {
    struct Case: Sendable, CustomStringConvertible {
        var op: Operation
        var payload: [UInt8]
        var start: ReadBackCheck.Start
        /// What was generated, for a failure's message.
        var what: String

        var description: String {
            "\(what) (\(op.rawValue) on a \(start) engine, \(payload.count) bytes): "
                + ReadBackCheck.short(ReadBackCheck.text(payload))
        }
    }

    private var random: SplitMix64
    /// A string of more than a few thousand characters was made for this case: one is enough.
    private var madeLong = false

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    /// Seeded by the bytes of a fuzzer's input (their FNV-1a digest).
    init<C: Collection<UInt8>>(input: C) {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in input { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        self.init(seed: h)
    }

    mutating func below(_ n: Int) -> Int { random.below(n) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    mutating func next() -> Case {
        madeLong = false
        let start: ReadBackCheck.Start = chance(50) ? .prepared : .fresh
        let op: Operation
        let text: String
        var what: String
        switch below(100) {
        case 0..<47:
            op = .schedule
            text = notification(withRequestId: true)
            what = "schedule"
        case 47..<52:
            op = .update
            text = update()
            what = "update"
        case 52..<64:
            op = .schedule
            let n = pick([1, 1, 2, 3, 5, 10, 40]) + (chance(1) ? pick([960, 999, 1000]) : 0)
            text = batch(n)
            what = "batch of \(n)"
        case 64..<72:
            op = pick([.cancel, .pause, .resume])
            text = object(selector() + requestId())
            what = op.rawValue
        case 72..<78:
            op = .list
            text = list()
            what = "list"
        case 78..<85:
            op = .preview
            text = preview()
            what = "preview"
        case 85..<93:
            op = .device
            text = deviceUpdate()
            what = "device"
        case 93..<96:
            // Acknowledges nothing the generator delivered: answered, never journaled (the
            // receipts tests deliver first).
            op = pick([.ack, .inbox, .history])
            var m = maybe(90, "fireIds") { "[" + $0.quote($0.id() + "@2026-12-01T10:00:00Z") + "]" }
            m += maybe(20, "badge") { $0.pick(Self.badges) }
            text = object(op == .ack ? m + requestId() : requestId())
            what = op.rawValue
        default:
            op = .snooze
            var m = maybe(80, "id") { $0.id() }
            m += maybe(95, "after") { $0.duration() }
            text = object(m + requestId())
            what = "snooze"
        }
        var payload = Array(text.utf8)
        if chance(10) {
            for _ in 0...below(3) {
                let (mutated, name) = mutate(payload)
                payload = mutated
                what += ", " + name
            }
        }
        return Case(op: op, payload: payload, start: start, what: what)
    }

    // MARK: Commands

    typealias Members = [(key: String, value: String)]

    /// A JSON object's text from members already written as JSON: sometimes in another order,
    /// sometimes with a member twice (which the parser refuses).
    mutating func object(_ members: Members) -> String {
        var members = members
        if members.count > 1 && chance(10) { members.shuffle(using: &random) }
        if !members.isEmpty && below(200) == 0 { members.append(pick(members)) }
        let space = chance(5) ? " \n\t" : ""
        return "{" + space + members.map { "\(quote($0.key)):\(space)\($0.value)" }.joined(separator: ",") + space + "}"
    }

    /// The member `key` with the value `make` writes, `percent` times in a hundred.
    mutating func maybe(_ percent: Int, _ key: String, _ make: (inout ReadBackGenerator) -> String) -> Members {
        guard chance(percent) else { return [] }
        return [(key, make(&self))]
    }

    mutating func requestId() -> Members {
        maybe(25, "requestId") {
            $0.chance(80) ? $0.quote($0.pick(["r1", "é", "\u{1F600}", "رقم"])) : $0.string(limit: 128)
        }
    }

    /// A notification object (PROTOCOL.md section 2); `withRequestId`: a command of its own.
    mutating func notification(withRequestId: Bool = false) -> String {
        var m: Members = []
        m += maybe(80, "id") { $0.id() }
        switch below(100) {
        case 0..<47: m.append(("fireDate", date()))
        case 47..<95:
            m.append(("after", duration()))
            m += maybe(25, "alignTo") { $0.quote($0.pick(["12:00", "00:00", "23:59:59", "02:30", "24:00", "7:00"])) }
        case 95..<97:
            m += [("fireDate", date()), ("after", "60")]
        default: break
        }
        m += maybe(40, "timeZone") { $0.zone() }
        switch below(100) {
        case 0..<25:
            m.append(("repeatInterval", quote(pick(Self.units))))
            m += maybe(30, "count") { $0.pick(["1", "3", "1000000000", "2.0", "5", "1000000001", "0"]) }
            m += maybe(25, "until") { $0.date() }
        case 25..<50:
            m.append(("rrule", quote(rrule())))
        default: break
        }
        if chance(15) { m.append(("exdates", array((0...below(4)).map { _ in date() }))) }
        m += maybe(12, "leadTime") { $0.chance(30) ? "0" : $0.duration() }
        m += maybe(30, "alertTitle") { $0.string() }
        if chance(15) {
            let n = chance(95) ? 1 + below(4) : pick([1000, 1001])
            m.append(("alertBodies", array((0..<n).map { _ in chance(98) ? string() : quote("b") })))
        } else {
            m += maybe(65, "alertBody") { $0.string() }
        }
        m += maybe(10, "alertAction") { $0.string() }
        m += maybe(10, "hasAction") { $0.pick(["true", "false", "true", "false", "1"]) }
        m += maybe(20, "soundName") { $0.chance(50) ? $0.quote("default") : $0.string() }
        m += maybe(15, "category") { $0.string() }
        m += maybe(30, "badge") { $0.pick($0.chance(95) ? Self.badges : Self.badBadges) }
        m += maybe(55, "userInfo") { $0.userInfo() }
        m += maybe(18, "expiresAfter") { $0.duration() }
        m += maybe(18, "misfire") {
            $0.quote($0.pick(["coalesce", "skip", "all", "coalesce", "skip", "all", "never"]))
        }
        m += maybe(8, "ignoreQuietHours") { $0.pick(["true", "false"]) }
        m += maybe(12, "enabled") { $0.pick(["true", "false"]) }
        m += maybe(8, "keepAfterFiring") { $0.pick(["true", "false"]) }
        if withRequestId { m += requestId() }
        if chance(3) { m.append((pick(["alertBdy", "fire_date", "seed", "", "ID"]), "1")) }
        return object(m)
    }

    /// An `update`: an id (mostly a prepared one) and a few fields, some of them `null`.
    mutating func update() -> String {
        var m: Members = [("id", id())]
        m += maybe(30, "alertBody") { $0.chance(20) ? "null" : $0.string() }
        m += maybe(10, "alertBodies") { $0.array([$0.string(), $0.string()]) }
        m += maybe(20, "fireDate") { $0.chance(10) ? "null" : $0.date() }
        m += maybe(15, "after") { $0.duration() }
        m += maybe(10, "alignTo") { $0.quote("12:00") }
        m += maybe(15, "rrule") { $0.chance(10) ? "null" : $0.quote($0.rrule()) }
        m += maybe(15, "repeatInterval") { $0.quote($0.pick(Self.units)) }
        m += maybe(8, "count") { $0.pick(["3", "null", "0"]) }
        m += maybe(20, "userInfo") { $0.chance(20) ? "null" : $0.userInfo() }
        m += maybe(15, "enabled") { $0.pick(["true", "false", "null"]) }
        m += maybe(15, "badge") { $0.pick(Self.badges) }
        m += maybe(10, "leadTime") { $0.duration() }
        m += maybe(10, "timeZone") { $0.zone() }
        m += maybe(5, "applicationIconBadgeNumber") { $0.pick(["3", "\"+1\""]) }
        m += maybe(5, "nextFireDate") { $0.date() }
        return object(m + requestId())
    }

    mutating func batch(_ n: Int) -> String {
        var m: Members = [("notifications", array((0..<n).map { _ in notification() }))]
        m += maybe(25, "replace") { $0.object($0.selector()) }
        return object(m + requestId())
    }

    /// Exactly one of `ids`, `match` and `all`, mostly.
    mutating func selector() -> Members {
        switch below(10) {
        case 0..<4:
            let n = chance(97) ? 1 + below(4) : pick([1000, 1001])
            return [("ids", array((0..<n).map { _ in id() }))]
        case 4..<7: return [("match", object([("userInfo", matchUserInfo())]))]
        case 7..<9: return [("all", chance(90) ? "true" : "false")]
        default: return [("ids", array([id()])), ("all", "true")]
        }
    }

    /// A `match`'s userInfo: mostly members the prepared notifications have.
    mutating func matchUserInfo() -> String {
        switch below(5) {
        case 0: return #"{"k":"v"}"#
        case 1: return #"{"n":1.50,"k":"v"}"#
        case 2: return "{\"deep\":\(ReadBackCheck.nested(pick([31, 32])))}"
        case 3: return #"{"\u0000":"\u0000"}"#
        default: return userInfo()
        }
    }

    mutating func list() -> String {
        var m: Members = []
        m += maybe(30, "match") { $0.object([("userInfo", $0.matchUserInfo())]) }
        m += maybe(40, "limit") { $0.pick(["1", "2", "100", "1000", "1001", "0", "1.0", "-1"]) }
        m += maybe(25, "cursor") {
            $0.chance(70) ? $0.quote($0.pick(["a", "b", "c", "caf\u{E9}", "z"])) : $0.string(limit: 257)
        }
        return object(m + requestId())
    }

    mutating func preview() -> String {
        var m: Members = []
        if chance(50) {
            m += [("id", id())]
        } else {
            m += [("notification", notification())]
        }
        m += maybe(40, "count") { $0.pick(["1", "10", "1000", "1001", "0"]) }
        m += maybe(30, "from") { $0.date() }
        return object(m + requestId())
    }

    mutating func deviceUpdate() -> String {
        var m: Members = []
        m += maybe(50, "timeZone") { $0.zone() }
        m += maybe(40, "badge") { $0.pick($0.chance(95) ? Self.badges : Self.badBadges) }
        m += maybe(40, "quietHours") { $0.pick(Self.quietHours) }
        m += maybe(15, "receipts") { $0.pick(["true", "false", "1", "null"]) }
        m += maybe(15, "history") { $0.pick(["true", "false", "\"yes\""]) }
        return object(m + requestId())
    }

    // MARK: Values

    static let zones = [
        "Europe/Paris", "device", "UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Kiritimati", "Pacific/Chatham",
        "Etc/GMT+12", "Etc/GMT-14", "Australia/Lord_Howe", "America/New_York", "Asia/Shanghai",
    ]

    mutating func zone() -> String {
        quote(chance(95) ? pick(Self.zones) : pick(["europe/paris", "Mars/Olympus", "", "Europe/Paris "]))
    }
    static let badges = ["0", "3", "1000000", #""+1""#, #""-2""#, #""+1000000""#, "0", "1", #""+1""#, "7"]
    static let badBadges = ["1000001", "-1", #""+""#, "1.0", #""+12345678""#, "null"]
    static let quietHours = [
        #"{"start":"22:00","end":"07:00"}"#, "null", #"{"start":"00:00","end":"00:00"}"#,
        #"{"start":"23:59:59","end":"00:00:01"}"#, #"{"start":"25:00","end":"07:00"}"#, #"{"start":"22:00"}"#, "[]",
    ]
    static let units = [
        "none", "year", "quarter", "month", "weekOfYear", "week", "day", "weekday", "hour", "minute", "second",
        "fortnight",
    ]

    /// An id, as a JSON string: mostly the prepared notifications' (and canonical equivalents of
    /// them), and the longest and odd ones.
    mutating func id() -> String {
        switch below(60) {
        case 0..<4, 13..<33: return quote(pick(["a", "b", "c"]))
        case 4: return quote("caf\u{E9}")
        case 5: return #""cafe\u0301""#  // canonically equivalent to the prepared café
        case 6: return quote(ReadBackCheck.longestId, escaped: true)
        case 7: return quote(String(repeating: "x", count: 128))
        case 8: return quote(String(repeating: "x", count: 129))
        case 9: return quote(pick(["x~snooze", "a~snooze", "", " ", "\u{200B}", "\u{202E}di"]))
        case 10: return quote(pick(["\u{1F469}\u{200D}\u{1F4BB}", "\u{1F1EB}\u{1F1F7}", "\u{10FFFF}", "שלום"]))
        case 11: return #""\ud83d\ude00\u0000""#
        case 12: return pick(["1", "null", "[]"])
        default: return string(limit: 140, pieces: 1...5)
        }
    }

    /// A date-time as a JSON string: in the past and future, wall-clock and absolute, at the ends of
    /// the years Chime deals in, with fractions, offsets and lower-case letters; now and then one
    /// that is refused, or that an offset takes out of those years.
    mutating func date() -> String {
        quote(chance(90) ? pick(Self.dates) : pick(Self.edgeDates))
    }

    static let dates = [
        "2026-07-01T09:00:00Z", "2026-07-01T09:00:00", "2026-07-01T09:00", "2026-06-15T10:00:00.250Z",
        "2026-06-15T10:00:00.5Z", "2026-07-01T09:00:00.123456789Z", "2026-07-01T09:00:00,5Z",
        "2026-07-01T09:00:00+05:30", "2026-07-01T09:00:00-0930", "2026-07-01t09:00:00z", "2026-07-01 09:00:00Z",
        "2026-03-29T02:30:00", "2026-10-25T02:30:00", "2020-01-01T00:00:00Z", "2028-02-29T12:00:00",
        "0001-01-01T00:00:00Z", "0001-01-01T00:00:00-23:59", "9999-12-31T23:59:59Z", "9999-12-31T23:59:59.999Z",
        "9999-12-31T23:59:59+23:59", "9999-12-31T23:59:59",
    ]
    static let edgeDates = [
        "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "2026-02-29T12:00:00", "2026-07-01T09:00:00.5",
        "2026-07-01T24:00:00", "2026-07-01", "tomorrow", "",
    ]

    /// An RRULE value: mostly valid, sometimes long (near the 1024-character limit).
    mutating func rrule() -> String {
        if chance(10) {
            // Long and repetitive: the canonical form drops duplicates and a `+`.
            let name = pick(["BYYEARDAY", "BYMONTHDAY", "BYSETPOS"])
            var rule = pick(["RRULE:", "", "rrule:"]) + "FREQ=YEARLY;BYMONTH=1,7;\(name)="
            let target = pick([1000, 1020, 1024, 1025, 1100])
            var values: [String] = []
            while rule.count + values.joined(separator: ",").count < target - 4 {
                values.append(pick(["+1", "1", "-1", "15", "+28", "-7"]))
            }
            rule += values.joined(separator: ",")
            if name == "BYSETPOS" { rule += ";BYDAY=MO" }
            return String(rule.prefix(target))
        }
        let freq =
            chance(95)
            ? pick(["DAILY", "WEEKLY", "MONTHLY", "YEARLY", "HOURLY"]) : pick(["MINUTELY", "SECONDLY", "X"])
        var parts = ["FREQ=" + freq]
        let options: [String] = [
            "INTERVAL=\(pick([1, 2, 7, 1_000_000_000]))", "COUNT=\(pick([1, 5, 1_000_000_000]))",
            "UNTIL=\(pick(["20401231T235959Z", "20401231", "99991231T235959Z", "20260101T000000Z"]))",
            "BYHOUR=\(pick(["9", "9,21", "0,23", "24"]))", "BYMINUTE=\(pick(["0", "30", "0,30"]))",
            "BYDAY=\(pick(["MO", "-1FR", "MO,WE,FR", "+2TU", "1SU,-1SA", "53MO"]))",
            "BYMONTHDAY=\(pick(["1", "-1", "29,30,31", "15"]))", "BYMONTH=\(pick(["2", "1,7", "12"]))",
            "BYSETPOS=\(pick(["1", "-1", "2"]))", "WKST=\(pick(["MO", "SU"]))", "BYWEEKNO=\(pick(["1", "53", "-1"]))",
            "BYYEARDAY=\(pick(["1", "-1", "366"]))",
        ]
        for _ in 0..<below(4) { parts.append(pick(options)) }
        return (chance(15) ? "RRULE:" : "") + parts.joined(separator: ";")
    }

    /// A number as its JSON text: mostly ones kept exactly, some refused.
    mutating func number() -> String {
        switch below(100) {
        case 0..<57: return pick(Self.exactNumbers)
        case 55..<65: return String(Int64(bitPattern: random.next()))
        case 65..<80:
            let d = Double(bitPattern: random.next())
            return d.isFinite ? "\(d)" : "1e-300"
        case 80..<93: return String(Double(below(1_000_000)) / 1000)
        case 93..<96: return pick(Self.inexactNumbers)
        default:
            // More digits than any 64-bit number holds: refused.
            return (0..<(20 + below(30))).map { i in String(i == 0 ? 1 + below(9) : below(10)) }.joined()
        }
    }

    static let exactNumbers = [
        "0", "-0", "0.0", "-0.0", "1", "-1", "1.5", "0.1", "0.30000000000000004", "1e308", "-1e308",
        "1.7976931348623157e308", "5e-324", "-5e-324", "4.9e-324", "2.2250738585072014e-308", "0.0004", "0.0005",
        "1E+2", "1e-7", "9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740993",
        "9223372036854775807", "-9223372036854775808", "315360000", "1.0", "100000000000000000000",
    ]
    static let inexactNumbers = [
        "9223372036854775808", "-9223372036854775809", "18446744073709551616", "123456789012345678901234567890",
        "1e400", "-1e400", "1e-400", "0.1000000000000000055511151231257827", "12345678901234567.0", "01", "1.", ".5",
        "+1", "NaN", "Infinity",
    ]

    /// Seconds, for `after`, `leadTime` and `expiresAfter`: mostly ordinary, sometimes at the
    /// bounds or below a millisecond, sometimes any number.
    mutating func duration() -> String {
        switch below(20) {
        case 0..<17: return pick(["60", "3600", "86400", "0.5", "1", "90.25", "1e2", "604800"])
        case 17..<19:
            return pick(["0.001", "0.0005", "0.0004", "5e-324", "315360000", "315360000.0004", "315360001", "0", "-1"])
        default: return number()
        }
    }

    /// A userInfo object: mostly shallow, sometimes nested to the limit of 32 levels and past it
    /// (and past the parser's 64), sometimes of many keys.
    mutating func userInfo() -> String {
        if chance(20) {
            let depth = pick([2, 5, 16, 31, 32, 32, 32, 32, 32, 33, 34, 62, 63, 64, 65, 100])
            return nested(depth)
        }
        if chance(8) {
            // Many keys, around the 4096-byte limit.
            let n = pick([100, 400, 560, 600, 1000])
            return object((0..<n).map { i in ("k\(i)" + (chance(10) ? "é" : ""), chance(50) ? "\(i)" : "1.5") })
        }
        var m: Members = []
        for i in 0..<(1 + below(5)) {
            m.append((key(i), value(depth: 3)))
        }
        return object(m)
    }

    /// An object `depth` levels deep (itself level 1), through objects and arrays, with values on
    /// the way.
    mutating func nested(_ depth: Int) -> String {
        var inner = value(depth: 0)
        for level in stride(from: depth, through: 2, by: -1) {
            if chance(30) {
                inner = "[" + (chance(30) ? number() + "," : "") + inner + "]"
            } else {
                inner = "{" + (chance(20) ? "\"s\(level)\":" + string(limit: 8) + "," : "") + "\"k\":" + inner + "}"
            }
        }
        return "{\"deep\":" + inner + "}"
    }

    /// A key, unique by `i` in its object.
    mutating func key(_ i: Int) -> String {
        pick(["k", "n", "type", "", "é", "e\u{301}x", "\u{1F600}", "\u{202E}", "\u{200D}", "K\u{212A}", "t\u{0}"])
            + String(i)
    }

    mutating func value(depth: Int) -> String {
        switch below(depth > 0 ? 8 : 6) {
        case 0, 1: return string()
        case 2, 3: return number()
        case 4: return pick(["true", "false"])
        case 5: return "null"
        case 6: return array((0..<below(4)).map { _ in value(depth: depth - 1) })
        default: return object((0..<below(4)).map { i in (key(i), value(depth: depth - 1)) })
        }
    }

    func array(_ elements: [String]) -> String { "[" + elements.joined(separator: ",") + "]" }

    /// Pieces of strings, as JSON string contents (escapes already written).
    static let pieces = [
        "a", "hello", "caf\u{E9}", "cafe\u{301}", "e\u{301}\u{302}\u{303}", "\u{1F600}", "\u{1F469}\u{200D}\u{1F4BB}",
        "\u{1F1EB}\u{1F1F7}", "\u{10FFFF}", "\u{FFFF}", "\u{FFFE}", "\u{202E}abc\u{202C}", "\u{200F}", "שלום", "مرحبا",
        "\u{200B}", "\u{200D}", "\u{FEFF}", "\u{2028}\u{2029}", "\u{212A}", "\u{37E}", "\u{600}", "\u{E9}\u{301}",
        "𝄞", "한국어", "\\u0000", "\\ud83d\\ude00", "\\uD834\\uDD1E", "\\n\\t\\r\\b\\f", "\\\"", "\\\\", "\\/",
        "\\u00e9", "\\u0301", "\\uffff", "\\u001f", "\\u2028", " ",
    ]
    /// Pieces the parser refuses.
    static let badPieces = ["\\ud800", "\\udc00x", "\\ud83d\\u0041", "\\x", "\u{1}", "\\u12", "\t"]

    /// A JSON string literal: mostly short, sometimes long (up to and past 65536 characters, or
    /// one character of thousands of combining marks), rarely one the parser refuses.
    mutating func string(limit: Int = 65_536, pieces: ClosedRange<Int> = 0...5) -> String {
        if below(300) == 0 { return "\"" + pick(Self.badPieces) + "\"" }
        if !madeLong && chance(3) {
            madeLong = true
            switch below(4) {
            case 0: return "\"" + String(repeating: "x", count: limit + pick([-1, 0, 0, 1])) + "\""
            case 1: return "\"" + String(repeating: "\u{E9}", count: limit + pick([0, 1])) + "\""
            case 2: return "\"e" + String(repeating: "\u{301}", count: 20_000) + "\""
            default: return "\"" + String(repeating: "\\ud83d\\ude00", count: min(limit, 20_000)) + "\""
            }
        }
        var s = ""
        for _ in 0..<(pieces.lowerBound + below(pieces.count)) { s += pick(Self.pieces) }
        return "\"" + s + "\""
    }

    /// `text` as a JSON string literal; `escaped`: it is already JSON string contents.
    func quote(_ text: String, escaped: Bool = false) -> String {
        if escaped { return "\"" + text + "\"" }
        var out: [UInt8] = []
        JSON.writeString(text, to: &out)
        return ReadBackCheck.text(out)
    }

    // MARK: Mutations

    static let fragments = [
        #""id":"dup","#, #"{"k":"#, #"[[[[[[[["#, "]]]]", #""userInfo":{"#, "1e309", "-0", #"\u0000"#, ",", ":",
        #""after":0.0004,"#, #""expiresAfter":5e-324,"#, #""limit":1000,"#, "\u{FEFF}", "null",
    ]

    /// One mutation of a payload's bytes, and its name.
    mutating func mutate(_ payload: [UInt8]) -> ([UInt8], String) {
        var p = payload
        guard !p.isEmpty else { return (Array("{}".utf8), "empty") }
        switch below(7) {
        case 0:
            return (Array(p.prefix(below(p.count))), "truncated")
        case 1:
            for _ in 0...below(3) { p[below(p.count)] ^= UInt8(1) << UInt8(below(8)) }
            return (p, "bits flipped")
        case 2:
            p.insert(contentsOf: Array(pick(Self.fragments).utf8), at: below(p.count + 1))
            return (p, "fragment inserted")
        case 3:
            let start = below(p.count)
            let end = min(p.count, start + 1 + below(40))
            p.insert(contentsOf: p[start..<end], at: below(p.count + 1))
            return (p, "slice repeated")
        case 4:
            // A run of digits becomes another number.
            let digits = p.indices.filter { p[$0] >= UInt8(ascii: "0") && p[$0] <= UInt8(ascii: "9") }
            guard !digits.isEmpty else { return (p, "no number") }
            let at = digits[below(digits.count)]
            var end = at
            while end < p.count && (p[end] >= UInt8(ascii: "0") && p[end] <= UInt8(ascii: "9")) { end += 1 }
            p.replaceSubrange(at..<end, with: Array(number().utf8))
            return (p, "number replaced")
        case 5:
            let quotes = p.indices.filter { p[$0] == UInt8(ascii: "\"") }
            guard !quotes.isEmpty else { return (p, "no string") }
            p.insert(
                contentsOf: pick([[0xC3, 0x28], [0xFF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xC0, 0xAF]]),
                at: quotes[below(quotes.count)] + 1
            )
            return (p, "invalid UTF-8")
        default:
            let depth = pick([31, 32, 33, 63, 64, 65])
            let deep = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            let colons = p.indices.filter { p[$0] == UInt8(ascii: ":") }
            guard !colons.isEmpty else { return (Array(deep.utf8), "nested \(depth)") }
            p.insert(contentsOf: Array((deep + ",").utf8), at: colons[below(colons.count)] + 1)
            return (p, "nested \(depth) inserted")
        }
    }
}
