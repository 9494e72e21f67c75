import ChimeTime
import Foundation

/// A `UNCalendarNotificationTrigger`'s date components as the RRULE that fires at every date
/// matching them (or as one wall-clock date when they name a single one).
///
/// What "matching" means, as Apple's `Calendar.nextDate(after:matching:)` does: take the levels
/// second < minute < hour < day (a `day` or a `weekday`) < month < year.
/// - Levels finer than the finest one given are at their start: `hour: 18` is 18:00:00, `month: 12`
///   is December 1st at midnight.
/// - Levels coarser than it that are not given match anything: `hour: 18, minute: 0` every day,
///   `minute: 30` every hour, `weekday: 2, hour: 8` every Monday.
///
/// The rule's FREQ is the finest level that matches anything (`DAILY` for a time of day, `HOURLY` for
/// a minute), `WEEKLY` for a weekday, and every given or implied value is a BY part, so that
/// nothing depends on DTSTART, which is therefore chosen just before now in every zone: midnight
/// UTC two days ago (zones are within 14 hours of UTC), or the first of January of a given year.
/// A given year also bounds the rule with UNTIL its last second.
struct CalendarRule: Hashable {
    /// The DTSTART, or the date itself when `rrule` is nil.
    var start: LocalDateTime
    var rrule: String?

    private enum Level: Int, Comparable, CaseIterable {
        case second, minute, hour, day, month, year
        static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    private enum Frequency: String {
        case minutely = "MINUTELY", hourly = "HOURLY", daily = "DAILY", weekly = "WEEKLY"
        case monthly = "MONTHLY", yearly = "YEARLY"

        /// The finest level the frequency iterates over by itself; finer ones need BY parts.
        var level: Level {
            switch self {
            case .minutely: return .minute
            case .hourly: return .hour
            case .daily, .weekly: return .day
            case .monthly: return .month
            case .yearly: return .year
            }
        }
    }

    private static let weekdayNames = ["SU", "MO", "TU", "WE", "TH", "FR", "SA"]
    private static let field = "dateMatching"

    /// - Parameter weekdays: more weekdays than `c.weekday` can name (not both): any of them matches.
    init(_ c: DateComponents, weekdays set: Set<Weekday> = [], now: Date) throws(ChimeClientError) {
        func invalid(_ why: String) -> ChimeClientError { .invalid(Self.field, why) }
        if c.era != nil || c.quarter != nil || c.weekOfMonth != nil || c.weekOfYear != nil
            || c.yearForWeekOfYear != nil
        {
            throw invalid("era, quarter, weekOfMonth, weekOfYear and yearForWeekOfYear are not supported")
        }
        if let nanosecond = c.nanosecond, nanosecond != 0 { throw invalid("whole seconds only") }
        func check(_ value: Int?, _ name: String, _ range: ClosedRange<Int>) throws(ChimeClientError) {
            if let value, !range.contains(value) { throw invalid("\(name) \(value) is not in \(range)") }
        }
        try check(c.year, "year", 1...9999)
        try check(c.month, "month", 1...12)
        try check(c.day, "day", 1...31)
        try check(c.weekday, "weekday", 1...7)
        try check(c.weekdayOrdinal, "weekdayOrdinal", -5...5)
        try check(c.hour, "hour", 0...23)
        try check(c.minute, "minute", 0...59)
        try check(c.second, "second", 0...59)
        if c.weekday != nil && !set.isEmpty { throw invalid("give weekday or a set of weekdays, not both") }
        // Every weekday that matches, in week order from Sunday; empty when any day does.
        let weekdays = c.weekday.map { [$0] } ?? set.sorted().map(\.rawValue)
        if let ordinal = c.weekdayOrdinal, ordinal == 0 || weekdays.isEmpty {
            throw invalid("weekdayOrdinal goes with a weekday, and is not 0")
        }

        // What each level is: a value, or nil where it matches anything.
        var value: [Level: Int] = [:]
        value[.second] = c.second
        value[.minute] = c.minute
        value[.hour] = c.hour
        value[.day] = c.day
        value[.month] = c.month
        value[.year] = c.year
        func given(_ level: Level) -> Bool { value[level] != nil || (level == .day && !weekdays.isEmpty) }
        guard let finest = Level.allCases.first(where: given) else {
            throw invalid("give at least one of year, month, day, weekday, hour, minute, second")
        }
        for level in Level.allCases where level < finest {
            value[level] = level == .day || level == .month ? 1 : 0
        }
        let open = Level.allCases.filter { $0 > finest && !given($0) }

        let plainWeekday = !weekdays.isEmpty && c.day == nil && c.weekdayOrdinal == nil
        // One date: nothing open, and no weekday to filter with.
        if open.isEmpty, weekdays.isEmpty, let year = value[.year], let month = value[.month], let day = value[.day],
            let hour = value[.hour], let minute = value[.minute], let second = value[.second]
        {
            let date = LocalDateTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
            guard date.isValid else { throw invalid("\(date) is not a valid date-time") }
            start = date
            rrule = nil
            return
        }

        let frequency: Frequency
        if c.weekdayOrdinal != nil {
            // Ordinals (`2TU`) are allowed only in MONTHLY and YEARLY rules.
            frequency = c.month == nil ? .monthly : .yearly
        } else {
            switch open.first {
            case .minute?: frequency = .minutely
            case .hour?: frequency = .hourly
            case .day?: frequency = .daily
            case .month?, .year?, nil: frequency = plainWeekday ? .weekly : (open.first == .month ? .monthly : .yearly)
            case .second?: frequency = .minutely  // cannot be: `second` is never coarser than the finest
            }
        }

        var parts = ["FREQ=\(frequency.rawValue)"]
        let recent = Self.recentStart(now)
        if let year = c.year {
            let yearStart = LocalDateTime(year: year, month: 1, day: 1)
            let yearEnd = LocalDateTime(year: year, month: 12, day: 31, hour: 23, minute: 59, second: 59)
            start = recent > yearEnd ? yearStart : max(yearStart, recent)
            parts.append("UNTIL=\(Self.pad4(year))1231T235959")
        } else {
            start = recent
        }
        // An open level finer than the frequency (only with an ordinal weekday) lists every value.
        func list(_ level: Level, _ all: ClosedRange<Int>) -> String? {
            if let v = value[level] { return String(v) }
            if level < frequency.level { return all.map(String.init).joined(separator: ",") }
            return nil
        }
        if let seconds = list(.second, 0...59) { parts.append("BYSECOND=\(seconds)") }
        if let minutes = list(.minute, 0...59) { parts.append("BYMINUTE=\(minutes)") }
        if let hours = list(.hour, 0...23) { parts.append("BYHOUR=\(hours)") }
        if !weekdays.isEmpty {
            let ordinal = c.weekdayOrdinal.map(String.init) ?? ""
            // In the week order of RFC 5545's examples (MO to SU), as `--on mon-fri` sends them.
            let ordered = weekdays.sorted { ($0 + 5) % 7 < ($1 + 5) % 7 }
            parts.append("BYDAY=" + ordered.map { ordinal + Self.weekdayNames[$0 - 1] }.joined(separator: ","))
        }
        if let day = value[.day] { parts.append("BYMONTHDAY=\(day)") }
        if let month = value[.month] { parts.append("BYMONTH=\(month)") }
        rrule = parts.joined(separator: ";")
    }

    /// Midnight UTC two days before `now`, as a wall-clock time: before now in every zone.
    private static func recentStart(_ now: Date) -> LocalDateTime {
        let seconds = Int64(now.timeIntervalSince1970.rounded(.down)) - 2 * 86_400
        let local = LocalDateTime(secondsSinceEpoch: seconds)
        return LocalDateTime(year: local.year, month: local.month, day: local.day)
    }

    private static func pad4(_ n: Int) -> String {
        let text = String(n)
        return String(repeating: "0", count: max(0, 4 - text.count)) + text
    }
}
