/// An RFC 5545 recurrence rule (section 3.3.10), parsed and validated, in a canonical form.
///
/// Two rules that mean the same are equal: lists are sorted without duplicates, `INTERVAL=1` and
/// `WKST=MO` are the defaults. ``description`` prints that canonical form, which parses back to an
/// equal rule. Parts are checked against the RFC's ranges and its restrictions per `FREQ` (ordinals in
/// `BYDAY` only with `MONTHLY`/`YEARLY`, `BYWEEKNO` only with `YEARLY`, ...), so that expansion never
/// meets a rule the RFC leaves undefined.
public struct RecurrenceRule: Hashable, Sendable, CustomStringConvertible {
    /// `FREQ`, from the shortest period to the longest.
    public enum Frequency: Int, Hashable, Sendable, Comparable, CaseIterable {
        case secondly, minutely, hourly, daily, weekly, monthly, yearly

        public static func < (lhs: Frequency, rhs: Frequency) -> Bool { lhs.rawValue < rhs.rawValue }

        var name: String {
            switch self {
            case .secondly: return "SECONDLY"
            case .minutely: return "MINUTELY"
            case .hourly: return "HOURLY"
            case .daily: return "DAILY"
            case .weekly: return "WEEKLY"
            case .monthly: return "MONTHLY"
            case .yearly: return "YEARLY"
            }
        }
    }

    /// A `BYDAY` entry: an ISO weekday (1 Monday ... 7 Sunday) with an optional ordinal (`-1FR`: 0 when none).
    public struct WeekdayNum: Hashable, Sendable, Comparable {
        public var ordinal: Int
        public var weekday: Int

        public init(ordinal: Int = 0, weekday: Int) {
            self.ordinal = ordinal
            self.weekday = weekday
        }

        public static func < (lhs: WeekdayNum, rhs: WeekdayNum) -> Bool {
            (lhs.weekday, lhs.ordinal) < (rhs.weekday, rhs.ordinal)
        }
    }

    /// `UNTIL`: a UTC date-time (`...Z`), a wall-clock date-time read in the recurrence's zone, or a date
    /// (read as 00:00:00 that day in the zone, as python-dateutil does).
    public enum Until: Hashable, Sendable {
        case utc(LocalDateTime)
        case local(LocalDateTime)
        case date(LocalDateTime)

        /// The instant this bound means in `zone`.
        public func resolved(in zone: Zone) -> Instant {
            switch self {
            case .utc(let t): return Instant(seconds: t.secondsSinceEpoch)
            case .local(let t), .date(let t): return zone.instant(for: t)
            }
        }
    }

    // Read-only: a rule is built by parsing, which guarantees the ranges expansion relies on.
    public fileprivate(set) var frequency: Frequency
    public fileprivate(set) var interval: Int
    public fileprivate(set) var count: Int?
    public fileprivate(set) var until: Until?
    public fileprivate(set) var bySecond: [Int]
    public fileprivate(set) var byMinute: [Int]
    public fileprivate(set) var byHour: [Int]
    public fileprivate(set) var byDay: [WeekdayNum]
    public fileprivate(set) var byMonthDay: [Int]
    public fileprivate(set) var byYearDay: [Int]
    public fileprivate(set) var byWeekNo: [Int]
    public fileprivate(set) var byMonth: [Int]
    public fileprivate(set) var bySetPos: [Int]
    /// `WKST` as an ISO weekday (1 Monday, the default).
    public fileprivate(set) var weekStart: Int

    /// The largest `INTERVAL` and `COUNT` accepted; larger values are rejected rather than risk overflow.
    public static let maximumInterval = 1_000_000_000
    public static let maximumCount = 1_000_000_000

    /// The most candidate date-times one period of a rule (one year of a `YEARLY` rule, one hour of an
    /// `HOURLY` one, ...) may expand to before `BYSETPOS`, bounded from the rule's lists (the days a period
    /// can select times `BYHOUR` × `BYMINUTE` × `BYSECOND`, those finer than `FREQ`); a ``Recurrence``
    /// refuses a rule over it with ``RecurrenceError/Code/invalidRule``.
    ///
    /// A period is built whole (BYSETPOS picks from all of it), so without this limit one short rule
    /// (`FREQ=YEARLY` with every month, month day, hour, minute and second listed: 31,622,400 date-times a
    /// year) costs a second per period and a minute per schedule. 100,000 admits every second of a day as a
    /// `FREQ=DAILY` rule (86,400), every ten minutes of a year as a `FREQ=YEARLY` one (52,704), and all of
    /// RFC 5545's examples with room to spare. The check is made when the rule is used (by
    /// ``Recurrence/init(start:zone:pattern:count:until:exdates:)``) rather than when it is parsed, so that
    /// a notification stored with such a rule before the limit existed does not stop a journal or a
    /// snapshot from loading.
    public static let maximumCandidatesPerPeriod = 100_000

    /// Parses an RRULE value such as `FREQ=MONTHLY;BYDAY=-1FR;COUNT=6`, with or without the `RRULE:` prefix.
    /// Part names and keywords are case-insensitive.
    ///
    /// - Throws: ``RecurrenceError/Code/invalidRule`` naming the part that is malformed, out of range,
    ///   repeated, unknown, or not allowed with the rule's `FREQ`.
    public init(parsing text: String) throws(RecurrenceError) {
        var body = Substring(text.trimmingSpaces())
        if body.uppercased().hasPrefix("RRULE:") { body = body.dropFirst(6) }
        guard !body.isEmpty else { throw .rule("the rule is empty") }
        var seen: Set<String> = []
        var parsed = RawParts()
        for piece in body.split(separator: ";", omittingEmptySubsequences: false) {
            guard !piece.isEmpty else { throw .rule("empty part (two ';' in a row or a trailing ';')") }
            guard let eq = piece.firstIndex(of: "=") else { throw .rule("expected NAME=VALUE, got \"\(piece)\"") }
            let name = piece[..<eq].uppercased()
            let value = String(piece[piece.index(after: eq)...])
            guard seen.insert(name).inserted else { throw .rule("\(name): appears more than once") }
            guard !value.isEmpty else { throw .rule("\(name): empty value") }
            try parsed.set(name, value)
        }
        self = try parsed.validated()
    }

    public var description: String {
        var parts = ["FREQ=\(frequency.name)"]
        if let until { parts.append("UNTIL=\(until.text)") }
        if let count { parts.append("COUNT=\(count)") }
        if interval != 1 { parts.append("INTERVAL=\(interval)") }
        func list(_ name: String, _ values: [Int]) {
            if !values.isEmpty { parts.append("\(name)=" + values.map(String.init).joined(separator: ",")) }
        }
        list("BYSECOND", bySecond)
        list("BYMINUTE", byMinute)
        list("BYHOUR", byHour)
        if !byDay.isEmpty { parts.append("BYDAY=" + byDay.map(\.text).joined(separator: ",")) }
        list("BYMONTHDAY", byMonthDay)
        list("BYYEARDAY", byYearDay)
        list("BYWEEKNO", byWeekNo)
        list("BYMONTH", byMonth)
        list("BYSETPOS", bySetPos)
        if weekStart != 1 { parts.append("WKST=\(weekdayNames[weekStart - 1])") }
        return parts.joined(separator: ";")
    }
}

extension RecurrenceRule {
    /// An upper bound on the candidate date-times one period expands to, before `BYSETPOS`: the days a
    /// period can select (bounded by its most selective day-level part, a part left out of a `MONTHLY` or
    /// `YEARLY` rule without day parts meaning DTSTART's day) times the date-times the parts finer than
    /// `FREQ` give each of them (`BYHOUR` × `BYMINUTE` × `BYSECOND` for `DAILY` and longer, `BYMINUTE` ×
    /// `BYSECOND` for `HOURLY`, `BYSECOND` for `MINUTELY`, a missing list counting as DTSTART's one value).
    var periodExpansionBound: Int {
        let weekdays = byDay.filter { $0.ordinal == 0 }.count
        let ordinals = byDay.count - weekdays
        let months = byMonth.isEmpty ? 12 : byMonth.count
        let noDayParts = byDay.isEmpty && byMonthDay.isEmpty && byYearDay.isEmpty && byWeekNo.isEmpty
        var days: Int
        switch frequency {
        case .secondly, .minutely, .hourly, .daily:
            days = 1
        case .weekly:
            days = byDay.isEmpty ? 1 : min(7, byDay.count)
        case .monthly:
            days = noDayParts ? 1 : 31
            if !byMonthDay.isEmpty { days = min(days, byMonthDay.count) }
            if !byDay.isEmpty { days = min(days, 5 * weekdays + ordinals) }
        case .yearly:
            days = byMonth.isEmpty ? 366 : min(366, 31 * byMonth.count)
            if noDayParts { days = min(days, byMonth.isEmpty ? 1 : byMonth.count) }
            if !byMonthDay.isEmpty { days = min(days, byMonthDay.count * months) }
            if !byYearDay.isEmpty { days = min(days, byYearDay.count) }
            if !byWeekNo.isEmpty { days = min(days, 7 * byWeekNo.count) }
            if !byDay.isEmpty {
                days = min(days, byMonth.isEmpty ? 53 * weekdays + ordinals : months * (5 * weekdays + ordinals))
            }
        }
        let (hours, minutes, seconds) = (max(byHour.count, 1), max(byMinute.count, 1), max(bySecond.count, 1))
        let times: Int
        switch frequency {
        case .secondly: times = 1
        case .minutely: times = seconds
        case .hourly: times = minutes * seconds
        default: times = hours * minutes * seconds
        }
        return days * times
    }
}

let weekdayNames = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]

extension RecurrenceRule.WeekdayNum {
    /// As `BYDAY` writes it: `MO`, `-1FR`.
    public var text: String { (ordinal == 0 ? "" : String(ordinal)) + weekdayNames[weekday - 1] }
}

extension RecurrenceRule.Until {
    var text: String {
        func digits(_ t: LocalDateTime) -> String { pad(t.year, 4) + pad(t.month, 2) + pad(t.day, 2) }
        func time(_ t: LocalDateTime) -> String { "T" + pad(t.hour, 2) + pad(t.minute, 2) + pad(t.second, 2) }
        switch self {
        case .utc(let t): return digits(t) + time(t) + "Z"
        case .local(let t): return digits(t) + time(t)
        case .date(let t): return digits(t)
        }
    }
}

/// The parts as read, before the checks that need all of them.
private struct RawParts {
    var frequency: RecurrenceRule.Frequency?
    var interval = 1
    var count: Int?
    var until: RecurrenceRule.Until?
    var bySecond: [Int] = []
    var byMinute: [Int] = []
    var byHour: [Int] = []
    var byDay: [RecurrenceRule.WeekdayNum] = []
    var byMonthDay: [Int] = []
    var byYearDay: [Int] = []
    var byWeekNo: [Int] = []
    var byMonth: [Int] = []
    var bySetPos: [Int] = []
    var weekStart = 1

    mutating func set(_ name: String, _ value: String) throws(RecurrenceError) {
        switch name {
        case "FREQ":
            guard let f = RecurrenceRule.Frequency.allCases.first(where: { $0.name == value.uppercased() }) else {
                throw .rule(
                    "FREQ: expected SECONDLY, MINUTELY, HOURLY, DAILY, WEEKLY, MONTHLY or YEARLY, got \"\(value)\""
                )
            }
            frequency = f
        case "INTERVAL": interval = try integer(name, value, 1...RecurrenceRule.maximumInterval)
        case "COUNT": count = try integer(name, value, 1...RecurrenceRule.maximumCount)
        case "UNTIL": until = try parseUntil(value)
        case "BYSECOND": bySecond = try integers(name, value, 0...59)
        case "BYMINUTE": byMinute = try integers(name, value, 0...59)
        case "BYHOUR": byHour = try integers(name, value, 0...23)
        case "BYDAY": byDay = try weekdayList(value)
        case "BYMONTHDAY": byMonthDay = try integers(name, value, -31...31, allowZero: false)
        case "BYYEARDAY": byYearDay = try integers(name, value, -366...366, allowZero: false)
        case "BYWEEKNO": byWeekNo = try integers(name, value, -53...53, allowZero: false)
        case "BYMONTH": byMonth = try integers(name, value, 1...12)
        case "BYSETPOS": bySetPos = try integers(name, value, -366...366, allowZero: false)
        case "WKST":
            guard let d = weekdayNames.firstIndex(of: value.uppercased()) else {
                throw .rule("WKST: expected a weekday (MO, TU, WE, TH, FR, SA, SU), got \"\(value)\"")
            }
            weekStart = d + 1
        case "BYEASTER", "RSCALE", "SKIP":
            throw .rule("\(name): not supported")
        default:
            throw .rule("\(name): unknown rule part")
        }
    }

    func validated() throws(RecurrenceError) -> RecurrenceRule {
        guard let frequency else { throw .rule("FREQ: missing (every rule needs one)") }
        if count != nil && until != nil { throw .rule("COUNT and UNTIL: a rule may have one or the other, not both") }
        if !byWeekNo.isEmpty && frequency != .yearly { throw .rule("BYWEEKNO: only allowed with FREQ=YEARLY") }
        if !byYearDay.isEmpty && [.daily, .weekly, .monthly].contains(frequency) {
            throw .rule("BYYEARDAY: not allowed with FREQ=\(frequency.name)")
        }
        if !byMonthDay.isEmpty && frequency == .weekly { throw .rule("BYMONTHDAY: not allowed with FREQ=WEEKLY") }
        for nth in byDay where nth.ordinal != 0 {
            if frequency != .monthly && frequency != .yearly {
                throw .rule("BYDAY: \(nth.text) has an ordinal, only allowed with FREQ=MONTHLY or FREQ=YEARLY")
            }
            if frequency == .yearly && !byWeekNo.isEmpty {
                throw .rule("BYDAY: \(nth.text) has an ordinal, not allowed with BYWEEKNO")
            }
            if frequency == .monthly && abs(nth.ordinal) > 5 {
                throw .rule("BYDAY: \(nth.text) is out of range -5...5 for FREQ=MONTHLY")
            }
            if frequency == .yearly && !byMonth.isEmpty && abs(nth.ordinal) > 5 {
                throw .rule("BYDAY: \(nth.text) is out of range -5...5 within a BYMONTH")
            }
        }
        let hasOtherBy =
            !(bySecond.isEmpty && byMinute.isEmpty && byHour.isEmpty && byDay.isEmpty && byMonthDay.isEmpty
            && byYearDay.isEmpty && byWeekNo.isEmpty && byMonth.isEmpty)
        if !bySetPos.isEmpty && !hasOtherBy { throw .rule("BYSETPOS: needs another BYxxx part to select from") }
        func canonical(_ values: [Int]) -> [Int] { Array(Set(values)).sorted() }
        var rule = RecurrenceRule(
            frequency: frequency,
            interval: interval,
            count: count,
            until: until,
            bySecond: canonical(bySecond),
            byMinute: canonical(byMinute),
            byHour: canonical(byHour),
            byDay: Array(Set(byDay)).sorted(),
            byMonthDay: canonical(byMonthDay),
            byYearDay: canonical(byYearDay),
            byWeekNo: canonical(byWeekNo),
            byMonth: canonical(byMonth),
            bySetPos: canonical(bySetPos),
            weekStart: weekStart
        )
        // A plain weekday already selects every day its ordinals would, so the ordinals add nothing.
        let plain = Set(rule.byDay.filter { $0.ordinal == 0 }.map(\.weekday))
        rule.byDay.removeAll { $0.ordinal != 0 && plain.contains($0.weekday) }
        return rule
    }
}

extension RecurrenceRule {
    /// Memberwise, for the parser; callers build rules from text.
    fileprivate init(
        frequency: Frequency,
        interval: Int,
        count: Int?,
        until: Until?,
        bySecond: [Int],
        byMinute: [Int],
        byHour: [Int],
        byDay: [WeekdayNum],
        byMonthDay: [Int],
        byYearDay: [Int],
        byWeekNo: [Int],
        byMonth: [Int],
        bySetPos: [Int],
        weekStart: Int
    ) {
        self.frequency = frequency
        self.interval = interval
        self.count = count
        self.until = until
        self.bySecond = bySecond
        self.byMinute = byMinute
        self.byHour = byHour
        self.byDay = byDay
        self.byMonthDay = byMonthDay
        self.byYearDay = byYearDay
        self.byWeekNo = byWeekNo
        self.byMonth = byMonth
        self.bySetPos = bySetPos
        self.weekStart = weekStart
    }
}

private func integer(_ name: String, _ text: String, _ range: ClosedRange<Int>) throws(RecurrenceError) -> Int {
    guard let value = parseSignedInteger(Substring(text)) else {
        throw .rule("\(name): expected an integer, got \"\(text)\"")
    }
    guard range.contains(value) else { throw .rule("\(name): expected an integer in \(range), got \(text)") }
    return value
}

private func integers(
    _ name: String,
    _ text: String,
    _ range: ClosedRange<Int>,
    allowZero: Bool = true
) throws(RecurrenceError) -> [Int] {
    var out: [Int] = []
    for item in text.split(separator: ",", omittingEmptySubsequences: false) {
        guard !item.isEmpty else { throw .rule("\(name): empty list item in \(text)") }
        guard let value = parseSignedInteger(item) else { throw .rule("\(name): expected integers, got \"\(item)\"") }
        guard range.contains(value), allowZero || value != 0 else {
            let shown = allowZero ? "\(range)" : "\(range) without 0"
            throw .rule("\(name): expected integers in \(shown), got \(item)")
        }
        out.append(value)
    }
    return out
}

/// What a `BYDAY` item looks like, for its errors.
private let byDayForm = "a weekday (MO, TU, WE, TH, FR, SA, SU), with an ordinal or not (1MO, -1FR)"

private func weekdayList(_ text: String) throws(RecurrenceError) -> [RecurrenceRule.WeekdayNum] {
    var out: [RecurrenceRule.WeekdayNum] = []
    for item in text.split(separator: ",", omittingEmptySubsequences: false) {
        guard item.count >= 2 else {
            throw .rule("BYDAY: expected \(byDayForm), got \(item.isEmpty ? "an empty list item" : "\"\(item)\"")")
        }
        let dayText = item.suffix(2).uppercased()
        guard let day = weekdayNames.firstIndex(of: dayText) else {
            throw .rule("BYDAY: expected \(byDayForm), got \"\(item)\"")
        }
        var ordinal = 0
        let prefix = item.dropLast(2)
        if !prefix.isEmpty {
            guard let n = parseSignedInteger(prefix) else {
                throw .rule("BYDAY: expected \(byDayForm), got \"\(item)\"")
            }
            guard (-53...53).contains(n), n != 0 else {
                throw .rule("BYDAY: \(item) ordinal is out of range -53...53 without 0")
            }
            ordinal = n
        }
        out.append(RecurrenceRule.WeekdayNum(ordinal: ordinal, weekday: day + 1))
    }
    return out
}

/// `[+-]digits`, at most 10 digits, no spaces.
private func parseSignedInteger(_ text: Substring) -> Int? {
    var digits = text
    var sign = 1
    if let first = digits.first, first == "+" || first == "-" {
        sign = first == "-" ? -1 : 1
        digits = digits.dropFirst()
    }
    guard !digits.isEmpty, digits.count <= 10, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
    guard let value = Int(digits) else { return nil }
    return sign * value
}

private func parseUntil(_ text: String) throws(RecurrenceError) -> RecurrenceRule.Until {
    let bytes = Array(text.utf8)
    func number(_ from: Int, _ length: Int) -> Int? {
        guard from + length <= bytes.count else { return nil }
        var value = 0
        for b in bytes[from..<(from + length)] {
            guard b >= 48, b <= 57 else { return nil }
            value = value * 10 + Int(b - 48)
        }
        return value
    }
    let bad = RecurrenceError.rule("UNTIL: expected YYYYMMDD, YYYYMMDDTHHMMSS or YYYYMMDDTHHMMSSZ, got \"\(text)\"")
    guard let y = number(0, 4), let m = number(4, 2), let d = number(6, 2) else { throw bad }
    if bytes.count == 8 {
        let date = LocalDateTime(year: y, month: m, day: d)
        guard date.isValid else { throw .rule("UNTIL: \(text) is not a valid date") }
        return .date(date)
    }
    guard bytes.count == 15 || bytes.count == 16, bytes[8] == UInt8(ascii: "T") || bytes[8] == UInt8(ascii: "t"),
        let hh = number(9, 2), let mm = number(11, 2), let ss = number(13, 2)
    else { throw bad }
    let time = LocalDateTime(year: y, month: m, day: d, hour: hh, minute: mm, second: ss)
    guard time.isValid else { throw .rule("UNTIL: \(text) is not a valid date-time") }
    if bytes.count == 16 {
        guard bytes[15] == UInt8(ascii: "Z") || bytes[15] == UInt8(ascii: "z") else { throw bad }
        return .utc(time)
    }
    return .local(time)
}

extension String {
    fileprivate func trimmingSpaces() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" || f == "\n" || f == "\r" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" || l == "\n" || l == "\r" { s = s.dropLast() }
        return s
    }
}
