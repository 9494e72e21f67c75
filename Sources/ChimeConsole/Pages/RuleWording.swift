import ChimeProtocol
import ChimeTime

/// A notification's schedule in words, from the fields of a `list` row (PROTOCOL.md sections 2
/// and 3.4): "Monday to Friday at 18:00, Asia/Shanghai", "Once, 5 Dec 2026 at 07:00, Europe/Paris",
/// "Every day at 08:30 (device's zone)".
///
/// A rule that cannot be put in words (`BYSETPOS`, `BYYEARDAY`, `BYWEEKNO`, several times with
/// several lists, ...) is shown as its RRULE text with its start, so nothing is ever hidden.
public enum RuleWording {
    static let weekdayNames = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    static let monthNames = [
        "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
        "November", "December",
    ]

    /// The schedule of `notification` in words.
    ///
    /// - Parameters:
    ///   - notification: a notification object (a `list` row, or what was scheduled).
    ///   - deviceZone: the device's zone (`device`'s `timeZone`), to read an absolute `fireDate` in
    ///     when the notification follows the device's zone.
    public static func describe(_ notification: JSONObject, deviceZone: String? = nil) -> String {
        var parts: [String] = []
        if let start = Start(notification, deviceZone: deviceZone) {
            parts.append(schedule(notification, start))
        } else if let after = notification["after"].flatMap(seconds) {
            let align = notification["alignTo"]?.stringValue.map { "at the first \($0) at least " } ?? ""
            parts.append("Once, \(align)\(duration(after)) after it was scheduled")
        } else {
            let text = notification["fireDate"].map { $0.stringValue ?? $0.text } ?? "none"
            return "No readable time (fireDate \(text))"
        }
        if let lead = notification["leadTime"].flatMap(seconds), lead > 0 {
            parts.append("delivered \(duration(lead)) before")
        }
        if case .array(let exdates)? = notification["exdates"], !exdates.isEmpty {
            parts.append("except \(exdates.count) date\(exdates.count == 1 ? "" : "s")")
        }
        return parts.joined(separator: ", ")
    }

    /// When a notification starts, as a wall-clock time, and how its zone is said.
    struct Start {
        var wall: LocalDateTime
        /// `, Asia/Shanghai`, ` (device's zone)` or ` UTC`.
        var zoneSuffix: String

        init?(_ n: JSONObject, deviceZone: String?) {
            guard let text = n["fireDate"]?.stringValue, let value = DateTimeValue(iso8601: text) else { return nil }
            let named = n["timeZone"]?.stringValue
            var followsDevice = named == "device"
            if case .local = value, named == nil { followsDevice = true }
            switch value {
            case .local(let local):
                wall = local
                zoneSuffix = followsDevice ? " (device's zone)" : ", \(named ?? "UTC")"
            case .instant(let instant):
                let zone = followsDevice ? ConsoleTime.zone(named: deviceZone) : ConsoleTime.zone(named: named)
                if let zone {
                    wall = zone.localDateTime(at: instant)
                    zoneSuffix = followsDevice ? " (device's zone)" : ", \(zone.identifier)"
                } else {
                    wall = Zone.utc.localDateTime(at: instant)
                    zoneSuffix = " UTC"
                }
            }
        }
    }

    static func schedule(_ n: JSONObject, _ start: Start) -> String {
        let time = ConsoleTime.clock(start.wall)
        if let text = n["rrule"]?.stringValue {
            return rrule(text, start) ?? raw(text, start)
        }
        var tail = ""
        if case .int(let count)? = n["count"] { tail += count == 1 ? ", once" : ", \(count) times" }
        if let until = n["until"]?.stringValue { tail += ", until " + untilText(until) }
        let interval = n["repeatInterval"]?.stringValue ?? "none"
        guard interval != "none" else {
            return "Once, \(ConsoleTime.date(start.wall)) at \(time)\(start.zoneSuffix)"
        }
        guard let unit = RepeatUnit(parsing: interval) else {
            return "repeatInterval \(interval) from \(ConsoleTime.date(start.wall)) at \(time)\(start.zoneSuffix)"
        }
        let from = "from \(ConsoleTime.date(start.wall)) at \(time)\(start.zoneSuffix)"
        let words: String
        switch unit {
        case .year: words = "Every year on \(start.wall.day) \(ConsoleTime.months[start.wall.month - 1]) at \(time)"
        case .quarter: words = "Every quarter on the \(ordinal(start.wall.day)) at \(time)"
        case .month: words = "Every month on the \(ordinal(start.wall.day)) at \(time)"
        case .weekOfYear: words = "Every \(weekdayNames[start.wall.weekday - 1]) at \(time)"
        case .day: words = "Every day at \(time)"
        case .weekday: words = "Every day, weekends included, at \(time)"
        case .hour: return "Every hour, \(from)\(tail)"
        case .minute: return "Every minute, \(from)\(tail)"
        case .second: return "Every second, \(from)\(tail)"
        }
        return words + start.zoneSuffix + tail
    }

    /// The rule as written, with its start: what is shown when it cannot be worded.
    static func raw(_ text: String, _ start: Start) -> String {
        var body = text.drop(while: { $0 == " " })
        while body.last == " " { body = body.dropLast() }
        if body.uppercased().hasPrefix("RRULE:") { body = body.dropFirst(6) }
        return
            "RRULE \(body) from \(ConsoleTime.date(start.wall)) at \(ConsoleTime.clock(start.wall))\(start.zoneSuffix)"
    }

    /// An RRULE in words, nil when it has parts this wording does not cover.
    static func rrule(_ text: String, _ start: Start) -> String? {
        guard let rule = try? RecurrenceRule(parsing: text) else { return nil }
        guard rule.bySetPos.isEmpty, rule.byYearDay.isEmpty, rule.byWeekNo.isEmpty else { return nil }
        var words: String
        if rule.frequency < .daily {
            guard rule.bySecond.isEmpty, rule.byMinute.isEmpty, rule.byHour.isEmpty, rule.byDay.isEmpty,
                rule.byMonthDay.isEmpty, rule.byMonth.isEmpty, rule.scale != .chinese
            else { return nil }
            let unit = rule.frequency == .hourly ? "hour" : rule.frequency == .minutely ? "minute" : "second"
            words = rule.interval == 1 ? "Every \(unit)" : "Every \(rule.interval) \(unit)s"
            words += ", from \(ConsoleTime.date(start.wall)) at \(ConsoleTime.clock(start.wall))\(start.zoneSuffix)"
        } else {
            guard let days = rule.scale == .chinese ? chineseDays(rule, start) : days(rule, start),
                let times = times(rule, start)
            else { return nil }
            words = "\(days) at \(times)\(start.zoneSuffix)"
        }
        switch rule.skip {
        case .omit: break
        case .backward: words += " (or the day before, when a month lacks that date)"
        case .forward: words += " (or the day after, when a month lacks that date)"
        }
        if let count = rule.count { words += count == 1 ? ", once" : ", \(count) times" }
        if let until = rule.until {
            switch until {
            case .date(let t): words += ", until \(ConsoleTime.date(t))"
            case .local(let t): words += ", until \(ConsoleTime.date(t)) at \(ConsoleTime.clock(t))"
            case .utc(let t): words += ", until \(ConsoleTime.date(t)) at \(ConsoleTime.clock(t)) UTC"
            }
        }
        return words
    }

    /// `08:30`, or `08:00, 12:00 and 18:00`: the times of day a daily or longer rule fires at; nil
    /// past eight of them.
    static func times(_ rule: RecurrenceRule, _ start: Start) -> String? {
        let hours = rule.byHour.isEmpty ? [start.wall.hour] : rule.byHour
        let minutes = rule.byMinute.isEmpty ? [start.wall.minute] : rule.byMinute
        let seconds = rule.bySecond.isEmpty ? [start.wall.second] : rule.bySecond
        guard hours.count * minutes.count * seconds.count <= 8 else { return nil }
        var list: [String] = []
        for h in hours {
            for m in minutes {
                for s in seconds {
                    list.append(
                        ConsoleTime.clock(LocalDateTime(year: 2000, month: 1, day: 1, hour: h, minute: m, second: s))
                    )
                }
            }
        }
        return series(list)
    }

    /// The days of a Gregorian rule, with its period: "Monday to Friday", "Every 2 weeks on
    /// Monday", "Every month on the last Friday".
    static func days(_ rule: RecurrenceRule, _ start: Start) -> String? {
        let plain = rule.byDay.filter { $0.ordinal == 0 }.map(\.weekday)
        let ordinals = rule.byDay.filter { $0.ordinal != 0 }
        guard plain.isEmpty || ordinals.isEmpty else { return nil }
        let months = rule.byMonth.map { monthNames[$0 - 1] }
        let inMonths = months.isEmpty ? "" : " in " + series(months)
        switch rule.frequency {
        case .daily, .weekly:
            guard rule.byMonthDay.isEmpty else { return nil }
            if rule.frequency == .daily && plain.isEmpty {
                return (rule.interval == 1 ? "Every day" : "Every \(rule.interval) days") + inMonths
            }
            let weekdays = plain.isEmpty ? [start.wall.weekday] : plain
            if rule.interval == 1 { return weekdaySet(weekdays) + inMonths }
            guard rule.frequency == .weekly else { return nil }
            return "Every \(rule.interval) weeks on \(weekdayNames(weekdays))" + inMonths
        case .monthly:
            let period = rule.interval == 1 ? "Every month" : "Every \(rule.interval) months"
            guard let day = dayOfMonth(rule, plain: plain, ordinals: ordinals, start) else { return nil }
            return "\(period) on \(day)" + inMonths
        case .yearly:
            let period = rule.interval == 1 ? "Every year" : "Every \(rule.interval) years"
            if months.isEmpty {
                guard rule.byDay.isEmpty, rule.byMonthDay.isEmpty else { return nil }
                return "\(period) on \(start.wall.day) \(ConsoleTime.months[start.wall.month - 1])"
            }
            if rule.byDay.isEmpty && rule.byMonthDay.count == 1 && months.count == 1 && rule.byMonthDay[0] > 0 {
                return "\(period) on \(rule.byMonthDay[0]) \(ConsoleTime.months[rule.byMonth[0] - 1])"
            }
            if rule.byDay.isEmpty && rule.byMonthDay.isEmpty && months.count == 1 {
                return "\(period) on \(start.wall.day) \(ConsoleTime.months[rule.byMonth[0] - 1])"
            }
            guard let day = dayOfMonth(rule, plain: plain, ordinals: ordinals, start) else { return nil }
            return "\(period) on \(day) of \(series(months))"
        default:
            return nil
        }
    }

    /// "the 1st and 15th", "the last day", "the first Monday", "every Monday": the days a monthly
    /// period selects; nil when month days and weekdays are mixed.
    static func dayOfMonth(
        _ rule: RecurrenceRule,
        plain: [Int],
        ordinals: [RecurrenceRule.WeekdayNum],
        _ start: Start
    ) -> String? {
        if !rule.byMonthDay.isEmpty {
            guard rule.byDay.isEmpty else { return nil }
            return "the " + series(rule.byMonthDay.map(monthDay))
        }
        if !ordinals.isEmpty {
            return series(ordinals.map { "the \(weekOrdinal($0.ordinal)) \(weekdayNames[$0.weekday - 1])" })
        }
        if !plain.isEmpty { return "every " + weekdayNames(plain) }
        return "the \(ordinal(start.wall.day))"
    }

    /// The days of an `RSCALE=CHINESE` rule: "Every year on day 15 of the 8th Chinese month".
    static func chineseDays(_ rule: RecurrenceRule, _ start: Start) -> String? {
        guard rule.byDay.isEmpty, rule.byMonthDay.count <= 1, rule.byMonth.count + rule.byLeapMonth.count <= 1 else {
            return nil
        }
        let startDate = ChineseCalendar.shared?.date(
            ofDay: daysFromCivil(year: start.wall.year, month: start.wall.month, day: start.wall.day)
        )
        let day = rule.byMonthDay.first ?? startDate?.day
        guard let day else { return nil }
        let dayText = day > 0 ? "day \(day)" : day == -1 ? "the last day" : "the \(ordinal(-day))-to-last day"
        switch rule.frequency {
        case .monthly:
            guard rule.byMonth.isEmpty, rule.byLeapMonth.isEmpty else { return nil }
            let period = rule.interval == 1 ? "Every Chinese month" : "Every \(rule.interval) Chinese months"
            return "\(period) on \(dayText)"
        case .yearly:
            let month: String
            if let m = rule.byMonth.first {
                month = "the \(ordinal(m)) Chinese month"
            } else if let m = rule.byLeapMonth.first {
                month = "the leap \(ordinal(m)) Chinese month"
            } else if let startDate, rule.byMonthDay.isEmpty {
                month = "the \(startDate.isLeapMonth ? "leap " : "")\(ordinal(startDate.month)) Chinese month"
            } else {
                return nil
            }
            let period = rule.interval == 1 ? "Every year" : "Every \(rule.interval) years"
            return "\(period) on \(dayText) of \(month)"
        default:
            return nil
        }
    }

    /// "Monday to Friday", "Every Monday and Thursday", "Every day".
    static func weekdaySet(_ days: [Int]) -> String {
        let set = Array(Set(days)).sorted()
        if set.count == 7 { return "Every day" }
        if set.count >= 3 && set.last! - set.first! == set.count - 1 {
            return "\(weekdayNames[set.first! - 1]) to \(weekdayNames[set.last! - 1])"
        }
        return "Every " + weekdayNames(set)
    }

    static func weekdayNames(_ days: [Int]) -> String {
        series(Array(Set(days)).sorted().map { weekdayNames[$0 - 1] })
    }

    /// "a", "a and b", "a, b and c".
    static func series(_ items: [String]) -> String {
        guard items.count > 1 else { return items.first ?? "" }
        return items.dropLast().joined(separator: ", ") + " and " + items.last!
    }

    /// `1st`, `2nd`, `3rd`, `11th`, `22nd`.
    static func ordinal(_ n: Int) -> String {
        let suffix: String
        switch (n % 10, n % 100) {
        case (_, 11...13): suffix = "th"
        case (1, _): suffix = "st"
        case (2, _): suffix = "nd"
        case (3, _): suffix = "rd"
        default: suffix = "th"
        }
        return "\(n)\(suffix)"
    }

    /// A `BYMONTHDAY` value: `1st`, `last day`, `2nd-to-last day`.
    static func monthDay(_ n: Int) -> String {
        n > 0 ? ordinal(n) : n == -1 ? "last day" : "\(ordinal(-n))-to-last day"
    }

    /// A `BYDAY` ordinal: `first`, `last`, `second-to-last`, `10th`.
    static func weekOrdinal(_ n: Int) -> String {
        let words = ["first", "second", "third", "fourth", "fifth"]
        if n > 0 { return n <= words.count ? words[n - 1] : ordinal(n) }
        if n == -1 { return "last" }
        return (-n <= words.count ? words[-n - 1] : ordinal(-n)) + "-to-last"
    }

    /// `until` of a `repeatInterval` (a wall-clock time or an instant).
    static func untilText(_ text: String) -> String {
        switch DateTimeValue(iso8601: text) {
        case .local(let t)?: return "\(ConsoleTime.date(t)) at \(ConsoleTime.clock(t))"
        case .instant(let i)?:
            let t = Zone.utc.localDateTime(at: i)
            return "\(ConsoleTime.date(t)) at \(ConsoleTime.clock(t)) UTC"
        case nil: return text
        }
    }

    /// A number of seconds from JSON.
    static func seconds(_ value: JSON) -> Double? {
        switch value {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// `15 minutes`, `1 hour 30 minutes`, `2 days`, `1.5 seconds`.
    static func duration(_ seconds: Double) -> String {
        guard seconds == seconds.rounded(), seconds < 1e12 else { return "\(seconds) seconds" }
        var rest = Int64(seconds)
        var parts: [String] = []
        for (size, name) in [(86_400, "day"), (3600, "hour"), (60, "minute"), (1, "second")] where rest >= size {
            let n = rest / Int64(size)
            rest %= Int64(size)
            parts.append("\(n) \(name)\(n == 1 ? "" : "s")")
        }
        return parts.isEmpty ? "0 seconds" : parts.joined(separator: " ")
    }
}
