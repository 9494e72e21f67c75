/// An RFC 5545 recurrence rule (section 3.3.10), parsed and validated, in a canonical form, with RFC 7529's
/// `RSCALE` (the Gregorian and the Chinese calendars), leap months in `BYMONTH` (`4L`) and `SKIP`.
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

    /// RFC 7529's `RSCALE`: the calendar whose years, months and days the rule counts in.
    public enum Scale: String, Hashable, Sendable, CaseIterable {
        case gregorian = "GREGORIAN"
        case chinese = "CHINESE"
    }

    /// RFC 7529's `SKIP`: what becomes of a date the rule names that a month or a year lacks (the 31st of a
    /// 30-day month, February 29 in a common year, a leap month in a year without it).
    public enum Skip: String, Hashable, Sendable, CaseIterable {
        /// Dropped, as RFC 5545 does (the default).
        case omit = "OMIT"
        /// Moved to the day before it: the last day of the month (or the non-leap month of that number).
        case backward = "BACKWARD"
        /// Moved to the day after it: the first day of the next month (or the month after the leap month).
        case forward = "FORWARD"
    }

    // Read-only: a rule is built by parsing, which guarantees the ranges expansion relies on.
    /// `RSCALE`, nil when the rule has none (plain RFC 5545, which is Gregorian with `SKIP=OMIT`).
    public fileprivate(set) var scale: Scale?
    /// `SKIP`, `.omit` when the rule has none.
    public fileprivate(set) var skip: Skip
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
    /// The leap months of `BYMONTH` (`4L` is 4), only with `RSCALE=CHINESE`.
    public fileprivate(set) var byLeapMonth: [Int]
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
        var parts = scale.map { ["RSCALE=\($0.rawValue)"] } ?? []
        parts.append("FREQ=\(frequency.name)")
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
        let months = (byMonth.map { ($0, false) } + byLeapMonth.map { ($0, true) }).sorted {
            ($0.0, $0.1 ? 1 : 0) < ($1.0, $1.1 ? 1 : 0)
        }
        if !months.isEmpty {
            parts.append("BYMONTH=" + months.map { "\($0.0)\($0.1 ? "L" : "")" }.joined(separator: ","))
        }
        list("BYSETPOS", bySetPos)
        if weekStart != 1 { parts.append("WKST=\(weekdayNames[weekStart - 1])") }
        if skip != .omit { parts.append("SKIP=\(skip.rawValue)") }
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
        let monthCount = byMonth.count + byLeapMonth.count
        let months = monthCount == 0 ? (scale == .chinese ? 13 : 12) : monthCount
        let yearDays = scale == .chinese ? 385 : 366
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
            days = monthCount == 0 ? yearDays : min(yearDays, 31 * monthCount)
            if noDayParts { days = min(days, monthCount == 0 ? 1 : monthCount) }
            if !byMonthDay.isEmpty { days = min(days, byMonthDay.count * months) }
            if !byYearDay.isEmpty { days = min(days, byYearDay.count) }
            if !byWeekNo.isEmpty { days = min(days, 7 * byWeekNo.count) }
            if !byDay.isEmpty {
                days = min(days, monthCount == 0 ? 53 * weekdays + ordinals : months * (5 * weekdays + ordinals))
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

extension RecurrenceRule {
    /// Whether the rule's years and months are expanded by ``RuleExpansion``'s calendar path (months and days
    /// of the rule's calendar, with `SKIP`) rather than its Gregorian arithmetic: `RSCALE=CHINESE`, or a
    /// `YEARLY` or `MONTHLY` rule whose `SKIP` moves dates. (A shorter `FREQ` only filters days that exist,
    /// so `SKIP` never applies to it.)
    var usesCalendarPath: Bool {
        scale == .chinese || (skip != .omit && frequency >= .monthly)
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
    var byLeapMonth: [Int] = []
    var bySetPos: [Int] = []
    var weekStart = 1
    var scale: RecurrenceRule.Scale?
    var skip: RecurrenceRule.Skip?

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
        case "BYMONTH": (byMonth, byLeapMonth) = try monthList(value)
        case "BYSETPOS": bySetPos = try integers(name, value, -366...366, allowZero: false)
        case "WKST":
            guard let d = weekdayNames.firstIndex(of: value.uppercased()) else {
                throw .rule("WKST: expected a weekday (MO, TU, WE, TH, FR, SA, SU), got \"\(value)\"")
            }
            weekStart = d + 1
        case "RSCALE":
            guard let s = RecurrenceRule.Scale(rawValue: value.uppercased()) else {
                throw .rule("RSCALE: \"\(value)\" is not supported (supported: GREGORIAN, CHINESE)")
            }
            scale = s
        case "SKIP":
            guard let s = RecurrenceRule.Skip(rawValue: value.uppercased()) else {
                throw .rule("SKIP: expected OMIT, BACKWARD or FORWARD, got \"\(value)\"")
            }
            skip = s
        case "BYEASTER":
            throw .rule("\(name): not supported")
        default:
            throw .rule("\(name): unknown rule part")
        }
    }

    func validated() throws(RecurrenceError) -> RecurrenceRule {
        guard let frequency else { throw .rule("FREQ: missing (every rule needs one)") }
        try validateCalendar(frequency)
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
            && byYearDay.isEmpty && byWeekNo.isEmpty && byMonth.isEmpty && byLeapMonth.isEmpty)
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
            byLeapMonth: canonical(byLeapMonth),
            bySetPos: canonical(bySetPos),
            weekStart: weekStart,
            scale: scale,
            skip: skip ?? .omit
        )
        // A plain weekday already selects every day its ordinals would, so the ordinals add nothing.
        let plain = Set(rule.byDay.filter { $0.ordinal == 0 }.map(\.weekday))
        rule.byDay.removeAll { $0.ordinal != 0 && plain.contains($0.weekday) }
        return rule
    }
}

extension RawParts {
    /// RFC 7529's rules and Chime's limits on them (PROTOCOL.md, "RSCALE and SKIP").
    func validateCalendar(_ frequency: RecurrenceRule.Frequency) throws(RecurrenceError) {
        if scale == nil {
            if let skip { throw .rule("SKIP=\(skip.rawValue): needs RSCALE (RFC 7529), e.g. RSCALE=GREGORIAN;...") }
            if let leap = byLeapMonth.first {
                throw .rule("BYMONTH: \(leap)L is a leap month, which needs RSCALE=CHINESE")
            }
            return
        }
        if scale == .gregorian, let leap = byLeapMonth.first {
            throw .rule("BYMONTH: \(leap)L: RSCALE=GREGORIAN has no leap months")
        }
        let calendarPath = scale == .chinese || ((skip ?? .omit) != .omit && frequency >= .monthly)
        guard calendarPath else { return }
        let because = scale == .chinese ? "RSCALE=CHINESE" : "SKIP=\((skip ?? .omit).rawValue)"
        if scale == .chinese && frequency < .monthly {
            throw .rule("FREQ=\(frequency.name): not supported with RSCALE=CHINESE (use MONTHLY or YEARLY)")
        }
        if !byYearDay.isEmpty { throw .rule("BYYEARDAY: not supported with \(because)") }
        if !byWeekNo.isEmpty { throw .rule("BYWEEKNO: not supported with \(because)") }
        if let nth = byDay.first(where: { $0.ordinal != 0 }) {
            throw .rule("BYDAY: \(nth.text) has an ordinal, not supported with \(because) (plain weekdays are)")
        }
        if scale == .chinese, let day = byMonthDay.first(where: { abs($0) > 30 }) {
            throw .rule("BYMONTHDAY: \(day): a Chinese month has at most 30 days (expected -30...30 without 0)")
        }
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
        byLeapMonth: [Int],
        bySetPos: [Int],
        weekStart: Int,
        scale: Scale?,
        skip: Skip
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
        self.byLeapMonth = byLeapMonth
        self.bySetPos = bySetPos
        self.weekStart = weekStart
        self.scale = scale
        self.skip = skip
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

/// `BYMONTH`'s list: month numbers 1...12, each with an optional `L` for the leap month of that number
/// (RFC 7529), as the plain months and the leap ones.
private func monthList(_ text: String) throws(RecurrenceError) -> ([Int], [Int]) {
    var plain: [Int] = []
    var leap: [Int] = []
    for item in text.split(separator: ",", omittingEmptySubsequences: false) {
        guard !item.isEmpty else { throw .rule("BYMONTH: empty list item in \(text)") }
        let isLeap = item.last == "L" || item.last == "l"
        let digits = isLeap ? item.dropLast() : item
        guard let value = parseSignedInteger(digits), !(isLeap && (digits.first == "+" || digits.first == "-")) else {
            throw .rule("BYMONTH: expected integers (a leap month with L: 4L), got \"\(item)\"")
        }
        guard (1...12).contains(value) else { throw .rule("BYMONTH: expected integers in 1...12, got \(item)") }
        if isLeap { leap.append(value) } else { plain.append(value) }
    }
    return (plain, leap)
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
