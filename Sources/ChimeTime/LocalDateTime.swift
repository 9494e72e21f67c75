/// A wall-clock date and time without a zone, to the second (proleptic Gregorian calendar).
///
/// Comparison is lexicographic on the fields, which is chronological for valid values.
public struct LocalDateTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int

    @inlinable
    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// The civil time at `seconds` since the epoch, read as UTC.
    public init(secondsSinceEpoch seconds: Int64) {
        let days = seconds >= 0 ? seconds / 86_400 : -((-seconds + 86_399) / 86_400)
        let rest = Int(seconds - days * 86_400)
        let (y, m, d) = civilFromDays(days)
        self.init(year: y, month: m, day: d, hour: rest / 3600, minute: rest / 60 % 60, second: rest % 60)
    }

    /// The seconds since the epoch of this civil time read as UTC.
    @inlinable
    public var secondsSinceEpoch: Int64 {
        daysFromCivil(year: year, month: month, day: day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    /// Whether every field is in range (month 1...12, day within the month, 00:00:00...23:59:59).
    public var isValid: Bool {
        (1...9999).contains(year) && (1...12).contains(month) && day >= 1
            && day <= daysInMonth(year: year, month: month) && (0...23).contains(hour)
            && (0...59).contains(minute) && (0...59).contains(second)
    }

    /// ISO weekday: 1 is Monday, 7 is Sunday.
    public var weekday: Int {
        isoWeekday(daysSinceEpoch: daysFromCivil(year: year, month: month, day: day))
    }

    public static func < (lhs: LocalDateTime, rhs: LocalDateTime) -> Bool {
        (lhs.year, lhs.month, lhs.day, lhs.hour, lhs.minute, lhs.second)
            < (rhs.year, rhs.month, rhs.day, rhs.hour, rhs.minute, rhs.second)
    }

    /// `YYYY-MM-DDTHH:MM:SS`, the form a wall-clock `fireDate` takes.
    public var description: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(19)
        write(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``description``'s text as UTF-8, without building a `String`.
    public func write(into out: inout [UInt8]) {
        func padded(_ value: Int, _ width: Int) {
            var limit = 1
            for _ in 0..<width { limit *= 10 }
            guard value >= 0 && value < limit else {
                out.append(contentsOf: pad(value, width).utf8)
                return
            }
            var divisor = limit / 10
            while divisor > 0 {
                out.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        padded(year, 4)
        out.append(UInt8(ascii: "-"))
        padded(month, 2)
        out.append(UInt8(ascii: "-"))
        padded(day, 2)
        out.append(UInt8(ascii: "T"))
        padded(hour, 2)
        out.append(UInt8(ascii: ":"))
        padded(minute, 2)
        out.append(UInt8(ascii: ":"))
        padded(second, 2)
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
@inlinable
public func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
    let y = Int64(month <= 2 ? year - 1 : year)
    let era = (y >= 0 ? y : y - 399) / 400
    let yoe = y - era * 400
    let m = Int64(month)
    let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
@inlinable
public func civilFromDays(_ days: Int64) -> (year: Int, month: Int, day: Int) {
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp < 10 ? mp + 3 : mp - 9
    let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
    return (Int(y), Int(m), Int(d))
}

/// ISO weekday (1 Monday ... 7 Sunday) of a day count since 1970-01-01, a Thursday.
@inlinable
public func isoWeekday(daysSinceEpoch days: Int64) -> Int {
    let w = (days + 3) % 7  // 0 is Monday
    return Int(w >= 0 ? w : w + 7) + 1
}

@inlinable
public func isLeapYear(_ year: Int) -> Bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

@inlinable
public func daysInMonth(year: Int, month: Int) -> Int {
    switch month {
    case 2: return isLeapYear(year) ? 29 : 28
    case 4, 6, 9, 11: return 30
    default: return 31
    }
}
