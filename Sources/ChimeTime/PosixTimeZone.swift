/// A POSIX `TZ` rule, as the footer of a TZif file gives it (RFC 8536 section 3.3, POSIX.1-2017
/// section 8.3): `std offset [dst [offset] [,start[/time],end[/time]]]`.
///
/// Names are three or more letters or `<...>` quoted (`<+03>`, `<-0330>`). Offsets are POSIX's, hours
/// *west* of Greenwich (`CET-1` is UTC+1). Dates are `Jn` (1-365, February 29 never counted), `n`
/// (0-365, counting it) or `Mm.w.d` (day `d`, 0 = Sunday, of week `w` of month `m`, 5 = the last);
/// times default to 02:00 and may be negative or past 24 hours (RFC 8536's extension, -167 to 167),
/// read on the wall clock in effect before the transition.
public struct PosixTimeZone: Hashable, Sendable {
    /// The day of a transition.
    public enum Day: Hashable, Sendable {
        /// `Jn`: day 1-365, February 29 not counted.
        case julian(Int)
        /// `n`: day 0-365 of the year, February 29 counted.
        case zeroBased(Int)
        /// `Mm.w.d`.
        case monthWeekDay(month: Int, week: Int, weekday: Int)
    }

    public struct Transition: Hashable, Sendable {
        public var day: Day
        /// Seconds after local midnight (wall clock before the transition).
        public var time: Int
    }

    /// Standard time's offset, seconds east of UTC.
    public var standardOffset: Int
    /// Daylight time's offset and its start and end, when there is daylight time.
    public var daylight: (offset: Int, start: Transition, end: Transition)?

    public static func == (lhs: PosixTimeZone, rhs: PosixTimeZone) -> Bool {
        lhs.standardOffset == rhs.standardOffset && lhs.daylight?.offset == rhs.daylight?.offset
            && lhs.daylight?.start == rhs.daylight?.start && lhs.daylight?.end == rhs.daylight?.end
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(standardOffset)
        hasher.combine(daylight?.offset)
        hasher.combine(daylight?.start)
        hasher.combine(daylight?.end)
    }

    /// Parses a rule.
    /// - Throws: ``ZoneDataError`` with code ``ZoneDataError/Code/badRule``.
    public init(parsing text: String) throws(ZoneDataError) {
        var p = RuleParser(Array(text.utf8), text: text)
        try p.name()
        standardOffset = -(try p.offset(maxHours: 24))
        guard !p.atEnd else {
            daylight = nil
            return
        }
        try p.name()
        var dstOffset = standardOffset + 3600
        if let c = p.peek, c != UInt8(ascii: ",") { dstOffset = -(try p.offset(maxHours: 24)) }
        // Without dates, POSIX leaves them to the implementation; tzcode uses the US rules.
        var start = Transition(day: .monthWeekDay(month: 3, week: 2, weekday: 0), time: 7200)
        var end = Transition(day: .monthWeekDay(month: 11, week: 1, weekday: 0), time: 7200)
        if !p.atEnd {
            try p.expect(UInt8(ascii: ","))
            start = try p.transition()
            try p.expect(UInt8(ascii: ","))
            end = try p.transition()
        }
        guard p.atEnd else { throw p.error("unexpected text") }
        daylight = (dstOffset, start, end)
    }

    /// The offsets the rule switches to in `year` and when (seconds since the epoch), in order.
    /// Empty without daylight time.
    public func transitions(inYear year: Int) -> [(at: Int64, offset: Int32)] {
        guard let (dst, start, end) = daylight else { return [] }
        let on = Self.instant(start, year: year, wallOffset: standardOffset)
        let off = Self.instant(end, year: year, wallOffset: dst)
        let both: [(at: Int64, offset: Int32)] = [(on, Int32(dst)), (off, Int32(standardOffset))]
        return both.sorted { $0.at < $1.at }
    }

    /// The offset in effect at `seconds`.
    public func offset(atSeconds seconds: Int64) -> Int32 {
        guard daylight != nil else { return Int32(standardOffset) }
        let year = civilFromDays(floorDiv(seconds + Int64(standardOffset), 86_400)).year
        var offset = Int32(standardOffset)
        var latest = Int64.min
        // The previous year's last transition may still be in effect (southern hemisphere); a
        // transition time past 24 hours can fall in the next year.
        for y in (year - 1)...(year + 1) {
            for t in transitions(inYear: y) where t.at <= seconds && t.at >= latest {
                latest = t.at
                offset = t.offset
            }
        }
        return offset
    }

    /// The instant of a transition in `year`, its time read with `wallOffset`.
    static func instant(_ t: Transition, year: Int, wallOffset: Int) -> Int64 {
        let days: Int64
        switch t.day {
        case .julian(let n):
            // Day n of a 365-day year: February 29 is skipped, so from March on a leap year is a day later.
            days = daysFromCivil(year: year, month: 1, day: 1) + Int64(n - 1) + (n >= 60 && isLeapYear(year) ? 1 : 0)
        case .zeroBased(let n):
            days = daysFromCivil(year: year, month: 1, day: 1) + Int64(n)
        case .monthWeekDay(let month, let week, let weekday):
            let first = daysFromCivil(year: year, month: month, day: 1)
            // isoWeekday: Monday 1 ... Sunday 7; POSIX: Sunday 0 ... Saturday 6.
            let firstWeekday = isoWeekday(daysSinceEpoch: first) % 7
            var day = 1 + (weekday - firstWeekday + 7) % 7 + (week - 1) * 7
            let length = daysInMonth(year: year, month: month)
            while day > length { day -= 7 }
            days = first + Int64(day - 1)
        }
        return days * 86_400 + Int64(t.time) - Int64(wallOffset)
    }
}

private struct RuleParser {
    let bytes: [UInt8]
    let text: String
    var i = 0

    init(_ bytes: [UInt8], text: String) {
        self.bytes = bytes
        self.text = text
    }

    var atEnd: Bool { i == bytes.count }
    var peek: UInt8? { atEnd ? nil : bytes[i] }

    func error(_ what: String) -> ZoneDataError {
        ZoneDataError(.badRule, "\(what) at character \(i + 1) of \"\(text)\"")
    }

    mutating func expect(_ c: UInt8) throws(ZoneDataError) {
        guard peek == c else { throw error("expected \"\(Character(Unicode.Scalar(c)))\"") }
        i += 1
    }

    static func isLetter(_ c: UInt8) -> Bool { (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z") }
    static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    /// A zone abbreviation: three or more letters, or `<` letters, digits, `+` and `-` `>`.
    mutating func name() throws(ZoneDataError) {
        let start = i
        if peek == UInt8(ascii: "<") {
            i += 1
            while let c = peek, Self.isLetter(c) || Self.isDigit(c) || c == UInt8(ascii: "+") || c == UInt8(ascii: "-")
            {
                i += 1
            }
            guard i - start - 1 >= 3 else { throw error("a quoted name of fewer than three characters") }
            try expect(UInt8(ascii: ">"))
        } else {
            while let c = peek, Self.isLetter(c) { i += 1 }
            guard i - start >= 3 else { throw error("a name of fewer than three letters") }
        }
    }

    mutating func number(max: Int) throws(ZoneDataError) -> Int {
        var value = 0
        var digits = 0
        while let c = peek, Self.isDigit(c) {
            value = value * 10 + Int(c - UInt8(ascii: "0"))
            digits += 1
            i += 1
            guard value <= max, digits <= 3 else { throw error("a number past \(max)") }
        }
        guard digits > 0 else { throw error("expected a number") }
        return value
    }

    /// `[+-]hh[:mm[:ss]]` in seconds, the sign as written.
    mutating func offset(maxHours: Int) throws(ZoneDataError) -> Int {
        var sign = 1
        if peek == UInt8(ascii: "+") {
            i += 1
        } else if peek == UInt8(ascii: "-") {
            sign = -1
            i += 1
        }
        var seconds = try number(max: maxHours) * 3600
        if peek == UInt8(ascii: ":") {
            i += 1
            seconds += try number(max: 59) * 60
            if peek == UInt8(ascii: ":") {
                i += 1
                seconds += try number(max: 59)
            }
        }
        return sign * seconds
    }

    mutating func transition() throws(ZoneDataError) -> PosixTimeZone.Transition {
        let day: PosixTimeZone.Day
        if peek == UInt8(ascii: "J") {
            i += 1
            let n = try number(max: 365)
            guard n >= 1 else { throw error("J0") }
            day = .julian(n)
        } else if peek == UInt8(ascii: "M") {
            i += 1
            let month = try number(max: 12)
            try expect(UInt8(ascii: "."))
            let week = try number(max: 5)
            try expect(UInt8(ascii: "."))
            let weekday = try number(max: 6)
            guard month >= 1, week >= 1 else { throw error("month or week 0") }
            day = .monthWeekDay(month: month, week: week, weekday: weekday)
        } else {
            day = .zeroBased(try number(max: 365))
        }
        var time = 7200
        if peek == UInt8(ascii: "/") {
            i += 1
            time = try offset(maxHours: 167)
        }
        return .init(day: day, time: time)
    }
}
