import ChimeCore
import ChimeSupport

/// The flags that describe a notification, shared by `schedule`, `preview` and `next`, and the
/// protocol object (PROTOCOL.md section 2) they build.
///
/// Formats are checked here, so that a typo is a usage mistake (exit 2) before anything is sent;
/// what only chimed can judge (a schedule that never fires, a zone the device lacks) comes back as
/// an error reply.
struct NotificationFlags: Sendable {
    static let whenSpecs: [Flags.Spec] = [
        .init(
            "at",
            env: false,
            hints: ["time", "date", "when", "datetime"],
            "when: \"YYYY-MM-DD HH:MM\" wall clock in --tz, an instant with Z or an offset, or HH:MM alone: the "
                + "next such time in the zone (today if still ahead, else tomorrow; with --on or --every weekdays, the "
                + "next listed day)"
        ),
        .init(
            "in",
            env: false,
            hints: ["delay", "wait"],
            "when: this long from now, each number with its unit (90s, 15m, 2h, 1d, 1h30m)"
        ),
        .init(
            "tz",
            env: false,
            hints: ["zone"],
            "an IANA zone (Asia/Shanghai) or device: the zone of wall-clock times"
        ),
        .init(
            "align",
            env: false,
            "with --in: the first HH:MM in --tz at or after now + --in (--in 1d --align 12:00 is tomorrow at noon "
                + "when asked before noon, the day after when asked later)"
        ),
        .init(
            "on",
            env: false,
            placeholder: "DAYS",
            "repeat every week on these days at --at: mon-fri, mon,wed,fri, sat-sun, full names too, weekdays "
                + "(Monday to Friday) or weekends (an RRULE FREQ=WEEKLY;BYDAY=...)"
        ),
        .init(
            "every",
            env: false,
            hints: ["repeat", "interval", "recur", "frequency", "freq"],
            "repeat: weekdays (Monday to Friday), day, week, month, quarter, year, hour, minute or second; "
                + "weekday is every day, weekends included (Apple's NSCalendarUnitWeekday)"
        ),
        .init(
            "on-day",
            env: false,
            placeholder: "DAY",
            "with --every month: on this day of the month, 1 to 31, or last (an RRULE FREQ=MONTHLY;BYMONTHDAY=...); "
                + "a month without it is skipped unless --skip says otherwise"
        ),
        .init(
            "lunar",
            env: false,
            placeholder: "MONTH-DAY",
            "repeat every year on this Chinese calendar date at --at: 8-15, 1-1, a leap month with L: 4L-3 (an RRULE "
                + "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=8;BYMONTHDAY=15); a 30th or a leap month falls back as --skip "
                + "backward unless --skip says otherwise"
        ),
        .init(
            "skip",
            env: false,
            "with --lunar or --on-day: a date a month or year lacks is omitted, moved backward (to the month's last "
                + "day, a leap month to its namesake) or forward (to the next month's first day): omit, backward, "
                + "forward (RFC 7529 SKIP)"
        ),
        .init("rrule", env: false, "repeat by an RFC 5545 rule (FREQ=WEEKLY;BYDAY=MO,WE,FR)"),
        .init("times", env: false, "fire N times from now: occurrences before now do not count"),
        .init(
            "until",
            env: false,
            hints: ["end", "ends"],
            "no occurrence after this date-time (a date and time, as --at)"
        ),
        .init(
            "except",
            env: false,
            repeatable: true,
            hints: ["exclude"],
            "skip this occurrence (a date and time, as --at)"
        ),
        .init("lead", env: false, hints: ["before", "advance"], "fire each occurrence this much earlier (15m)"),
    ]

    static let contentSpecs: [Flags.Spec] = [
        .init("id", env: false, "the notification's id (default: a UUID chimed makes)"),
        .init("title", env: false, hints: ["subject", "heading"], "alertTitle"),
        .init("body", env: false, hints: ["message", "text", "msg", "content"], "alertBody: the text shown"),
        .init("action", env: false, "alertAction: the action button's text"),
        .init("no-action", value: false, env: false, "hasAction false"),
        .init("sound", env: false, "soundName (default for the default sound)"),
        .init("category", env: false, "category"),
        .init("thread", env: false, "threadId: groups the notifications on the device (APNs thread-id)"),
        .init("level", env: false, "interruptionLevel: passive, active, timeSensitive or critical (for push)"),
        .init("channels", env: false, "all (default), mqtt (no push) or push (no MQTT delivery)"),
        .init("badge", env: false, "N, or +N / -N applied to the device's badge when it fires"),
        .init(
            "info",
            env: false,
            repeatable: true,
            hints: ["data", "payload", "extra", "metadata"],
            "userInfo key=value (numbers and booleans stay typed) or key:=json"
        ),
        .init("misfire", env: false, "coalesce, skip or all: what happens to occurrences missed while down"),
        .init("expires", env: false, hints: ["ttl", "expiry"], "drop a delivery more than this late (1h)"),
        .init("ignore-quiet-hours", value: false, env: false, "deliver even inside the device's quiet hours"),
        .init("keep", value: false, env: false, "keepAfterFiring: a fired one-shot stays listed, paused"),
        .init("disabled", value: false, env: false, "store it paused (enabled false)"),
    ]

    /// `schedule`'s flags: `--count` is an alias of `--times` there. In `preview` and `next`,
    /// `--count` says how many deliveries to show.
    static let specs = naming(whenSpecs + [.init("count", env: false, "the same as --times")] + contentSpecs)
    /// The flags of `preview` and `next`, without `--count`.
    static let expansionSpecs = naming(whenSpecs + contentSpecs)

    /// `specs` with more ``Flags/Spec/hints``: the name of the protocol field each flag sets, as
    /// written (`--alertBody`) and with dashes (`--alert-body`), and the names PROTOCOL.md hints at
    /// for those fields (UNNotificationContent's `--identifier`, Apple's
    /// `--applicationIconBadgeNumber`), so that `--fireDate` is pointed to `--at`.
    static func naming(_ specs: [Flags.Spec]) -> [Flags.Spec] {
        var names: [String: [String]] = [:]
        func add(_ name: String, for field: NotificationField) {
            // A flag that switches a field off does not stand for it: --enabled is not --disabled.
            guard let flag = flag(for: field), flag != "no-action", flag != "disabled" else { return }
            names[flag, default: []].append(name)
        }
        for field in NotificationField.allCases {
            add(field.wireName, for: field)
            add(dashed(field.wireName), for: field)
        }
        for (name, wireName) in NotificationCoding.portingHints {
            if let field = NotificationField(rawValue: wireName) { add(name, for: field) }
        }
        for (name, field) in NotificationCoding.aliases { add(name, for: field) }
        return specs.map { spec in
            var spec = spec
            spec.hints += names[spec.name] ?? []
            return spec
        }
    }

    /// `alertBody` as `alert-body`.
    static func dashed(_ name: String) -> String {
        name.reduce(into: "") { text, c in text += c.isUppercase ? "-" + c.lowercased() : String(c) }
    }

    /// The flag that sets a notification field; nil for those only `--json` can give.
    ///
    /// An exhaustive switch, so that a new ``NotificationField`` gets a flag or goes without one on
    /// purpose; the CLI's tests check that each flag named here sets its field.
    static func flag(for field: NotificationField) -> String? {
        switch field {
        case .id: return "id"
        case .fireDate: return "at"
        case .after: return "in"
        case .alignTo: return "align"
        case .timeZone: return "tz"
        case .repeatInterval: return "every"
        case .rrule: return "rrule"
        case .count: return "times"
        case .until: return "until"
        case .exdates: return "except"
        case .leadTime: return "lead"
        case .alertTitle: return "title"
        case .alertBody: return "body"
        case .alertBodies: return nil
        case .alertAction: return "action"
        case .hasAction: return "no-action"
        case .soundName: return "sound"
        case .category: return "category"
        case .threadId: return "thread"
        case .interruptionLevel: return "level"
        case .channels: return "channels"
        case .badge: return "badge"
        case .userInfo: return "info"
        case .expiresAfter: return "expires"
        case .misfire: return "misfire"
        case .ignoreQuietHours: return "ignore-quiet-hours"
        case .enabled: return "disabled"
        case .keepAfterFiring: return "keep"
        }
    }

    /// The names of every notification flag.
    static let names = Set(specs.map(\.name))

    /// Whether any notification flag was given (other than those in `except`).
    static func anyGiven(_ flags: Flags, except: Set<String> = []) -> Bool {
        names.subtracting(except).contains { flags[$0] != nil }
    }

    /// The units `--every` takes: `weekdays` is the CLI's (a weekly rule), the others are
    /// `repeatInterval`'s.
    static let units = ["weekdays", "day", "week", "month", "quarter", "year", "hour", "minute", "second", "weekday"]
    /// What `--every weekday` prints on standard error: it is not Monday to Friday.
    static let weekdayWarning =
        "warning: --every weekday repeats every day, Saturdays and Sundays included (it is Apple's "
        + "NSCalendarUnitWeekday); for Monday to Friday give --every weekdays or --on mon-fri"

    /// The protocol object as the flags give it; ``payload(now:deviceZone:missingZone:)`` completes it.
    var object: JSONObject
    /// The zone `--tz` named (nil for `--tz device` or no `--tz`).
    var namedZone: Zone?
    /// What to say on standard error before sending (`--every weekday`).
    var warnings: [String] = []
    /// `--at HH:MM` without a date: the fire date is the next such wall-clock time.
    private var timeOfDay: TimeOfDay?
    /// The ISO weekdays (1 is Monday) of `--on` or `--every weekdays`: the next one is the first.
    private var days: [Int]?
    /// `--times N`, counted from now: the count sent adds the occurrences before now.
    private var times: Int?
    /// The rule without the `COUNT=` that `--times` adds.
    private var rule: String?
    /// `--at` is a wall-clock time (with a date or without) or `--tz device`, and no zone is named:
    /// the fire date is read in the device's zone.
    private var followsDeviceZone = false

    /// Whether ``payload(now:deviceZone:missingZone:)`` needs the device's zone: for `--at HH:MM`
    /// without a date, or `--times` of a series that follows the device's zone.
    var needsDeviceZone: Bool {
        namedZone == nil && followsDeviceZone && (timeOfDay != nil || (times != nil && object["fireDate"] != nil))
    }

    /// Builds the notification; `--at` or `--in` is required unless `partial`.
    /// - Parameters:
    ///   - countIsTimes: `--count` is the notification's count (schedule), not the number of
    ///     deliveries to show (preview, next).
    ///   - partial: the fields of an `update`: only what is given, nothing required.
    init(_ flags: Flags, countIsTimes: Bool, partial: Bool = false) throws(UsageError) {
        var timesFlag: String?
        var timesText: String?
        for name in countIsTimes ? ["times", "count"] : ["times"] {
            guard let value = flags[name] else { continue }
            if timesText != nil { throw UsageError("give either --times or --count, not both") }
            (timesFlag, timesText) = ("--" + name, value)
        }
        var o = JSONObject()
        if let id = flags["id"] {
            guard !id.isEmpty, id.count <= 128 else { throw UsageError("--id must be 1 to 128 characters") }
            o["id"] = .string(id)
        }
        switch (flags["at"], flags["in"]) {
        case (let at?, nil):
            if let time = TimeOfDay(parsing: at) {
                timeOfDay = time
            } else if DateTimeValue(iso8601: at) == nil, (try? Parse.duration(at, flag: "at")) != nil {
                throw UsageError("--at: \"\(at)\" is a duration: for this long from now, give --in \(at)")
            } else {
                let value = try Parse.dateTime(at, flag: "at", timeAlone: true)
                o["fireDate"] = .string(value.description)
                if case .local = value { followsDeviceZone = true }
            }
            if flags["align"] != nil { throw UsageError("--align goes with --in, not --at") }
        case (nil, let after?):
            if TimeOfDay(parsing: after) != nil || DateTimeValue(iso8601: after) != nil {
                throw UsageError("--in: \"\(after)\" is a time, not a duration: give --at \"\(after)\"")
            }
            o["after"] = Parse.secondsJSON(try Parse.duration(after, flag: "in"))
            if let align = flags["align"] {
                o["alignTo"] = .string(try Parse.timeOfDay(align, flag: "align").description)
            }
        case (.some, .some):
            throw UsageError("give either --at or --in, not both")
        case (nil, nil):
            if partial {
                if flags["align"] != nil { throw UsageError("--align goes with --in") }
                if flags["on"] != nil || flags["every"] == "weekdays" {
                    throw UsageError("--on and --every weekdays go with --at HH:MM: give both")
                }
                break
            }
            throw UsageError("say when: --at \"YYYY-MM-DD HH:MM\", --at HH:MM or --in DURATION (such as 15m)")
        }
        if timeOfDay != nil { followsDeviceZone = true }
        namedZone = nil
        if let tz = flags["tz"] {
            if tz != "device" { namedZone = try Parse.zone(tz, flag: "tz") }
            followsDeviceZone = tz == "device"
            o["timeZone"] = .string(tz)
        }

        let every = flags["every"]
        var rule = flags["rrule"]
        if let every {
            guard every == "none" || every == "weekOfYear" || Self.units.contains(every) else {
                let hint = suggestion(for: every, among: Self.units).map { " (did you mean \($0)?)" } ?? ""
                throw UsageError(
                    "--every: expected one of \(Self.units.joined(separator: ", ")), got \"\(every)\"\(hint)"
                )
            }
            guard rule == nil else { throw UsageError("give either --every or --rrule, not both") }
            if every == "weekdays" {
                days = Array(1...5)
            } else if flags["on-day"] == nil {
                o["repeatInterval"] = .string(every)
            }
            if every == "weekday" { warnings.append(Self.weekdayWarning) }
        }
        if let on = flags["on"] {
            guard every == nil, rule == nil else {
                throw UsageError("--on is a weekly rule: give no --every or --rrule")
            }
            guard flags["at"] != nil else { throw UsageError("--on goes with --at: --on mon-fri --at 18:00") }
            days = try Parse.weekdays(on, flag: "on")
        }
        if let days {
            rule =
                "FREQ=WEEKLY;BYDAY=" + days.map { RecurrenceRule.WeekdayNum(weekday: $0).text }.joined(separator: ",")
        }
        let skip = try flags["skip"].map { (text: String) throws(UsageError) in
            try Parse.choice(text, flag: "skip", ["omit", "backward", "forward"]).uppercased()
        }
        if let onDay = flags["on-day"] {
            guard every == "month" else {
                throw UsageError("--on-day goes with --every month: --every month --on-day 31 --skip backward")
            }
            rule = Self.monthDayRule(try Self.monthDay(onDay), skip: skip)
        }
        if let lunar = flags["lunar"] {
            guard every == nil, rule == nil, flags["on"] == nil else {
                throw UsageError("--lunar is a yearly rule: give no --every, --on or --rrule")
            }
            guard flags["at"] != nil else { throw UsageError("--lunar goes with --at: --lunar 8-15 --at 09:00") }
            rule = Self.lunarRule(try Self.lunarDate(lunar), skip: skip)
        }
        if skip != nil && flags["on-day"] == nil && flags["lunar"] == nil {
            throw UsageError("--skip goes with --lunar or --every month --on-day")
        }
        if let timesText, let timesFlag {
            if partial && flags["at"] == nil {
                throw UsageError("\(timesFlag) counts from --at: give both (or --json with rrule COUNT=)")
            }
            times = try Self.count(timesText, timesFlag)
        }
        if var rule {
            let upper = rule.uppercased()
            if let until = flags["until"] {
                guard !upper.contains("UNTIL=") else { throw UsageError("--until: the rule has UNTIL= already") }
                rule += ";UNTIL=\(Self.ruleUntil(try Parse.dateTime(until, flag: "until")))"
            }
            if times != nil, let timesFlag, upper.contains("COUNT=") {
                throw UsageError("\(timesFlag): the rule has COUNT= already")
            }
            self.rule = rule
            let counted = Self.rule(rule, count: times)
            do {
                _ = try RecurrenceRule(parsing: counted)
            } catch {
                throw UsageError("--rrule: \(error)")
            }
            o["rrule"] = .string(counted)
        } else {
            if let times, let timesFlag {
                guard every != nil else { throw UsageError("\(timesFlag) goes with --every, --on or --rrule") }
                o["count"] = .int(Int64(times))
            }
            if let until = flags["until"] {
                guard every != nil else { throw UsageError("--until goes with --every, --on or --rrule") }
                o["until"] = .string(try Parse.dateTime(until, flag: "until").description)
            }
        }
        let exceptions = flags.all("except")
        if !exceptions.isEmpty {
            var dates: [JSON] = []
            for text in exceptions { dates.append(.string(try Parse.dateTime(text, flag: "except").description)) }
            o["exdates"] = .array(dates)
        }
        if let lead = flags["lead"] {
            o["leadTime"] = Parse.secondsJSON(try Parse.duration(lead, flag: "lead", allowZero: true))
        }

        if let v = flags["title"] { o["alertTitle"] = .string(v) }
        if let v = flags["body"] { o["alertBody"] = .string(v) }
        if let v = flags["action"] { o["alertAction"] = .string(v) }
        if flags.isSet("no-action") { o["hasAction"] = false }
        if let v = flags["sound"] { o["soundName"] = .string(v) }
        if let v = flags["category"] { o["category"] = .string(v) }
        if let v = flags["thread"] { o["threadId"] = .string(v) }
        if let v = flags["level"] { o["interruptionLevel"] = .string(v) }
        if let v = flags["channels"] { o["channels"] = .string(v) }
        if let v = flags["badge"] { o["badge"] = try Parse.badge(v) }
        if let info = try Parse.keyValues(flags.all("info"), flag: "info") { o["userInfo"] = .object(info) }
        if let v = flags["misfire"] {
            o["misfire"] = .string(try Parse.choice(v, flag: "misfire", ["coalesce", "skip", "all"]))
        }
        if let v = flags["expires"] { o["expiresAfter"] = Parse.secondsJSON(try Parse.duration(v, flag: "expires")) }
        if flags.isSet("ignore-quiet-hours") { o["ignoreQuietHours"] = true }
        if flags.isSet("keep") { o["keepAfterFiring"] = true }
        if flags.isSet("disabled") { o["enabled"] = false }
        object = o
    }

    /// The object to send, completed for `now` in the zone its times are read in (`--tz`, else
    /// `deviceZone`): the fire date of `--at HH:MM`, and a count that leaves out the occurrences
    /// delivered before `now` (PROTOCOL.md counts `count` and `COUNT` from the fire date).
    /// - Parameter missingZone: how to give a zone, for the error when neither is known.
    /// - Throws: ``CLIFailure`` `.failed` when `--at HH:MM` has no zone to be read in.
    func payload(now: Instant, deviceZone: Zone?, missingZone: String) throws(CLIFailure) -> JSONObject {
        var o = object
        if let timeOfDay {
            guard let zone = namedZone ?? deviceZone else {
                throw CLIFailure(
                    .failed,
                    "--at \(timeOfDay) without a date is the next \(timeOfDay) in the device's zone, and the device "
                        + "has none: \(missingZone)"
                )
            }
            o["fireDate"] = .string(Self.next(timeOfDay, on: days, in: zone, after: now).description)
        }
        if let times, o["after"] == nil {
            // The series without its count numbers the occurrences before now.
            var series = o
            if let rule { series["rrule"] = .string(rule) } else { series["count"] = nil }
            let total = times + Self.occurrences(of: series, before: now, deviceZone: deviceZone)
            if let rule { o["rrule"] = .string(Self.rule(rule, count: total)) } else { o["count"] = .int(Int64(total)) }
        }
        return o
    }

    /// The first wall-clock `time` in `zone` after `now` on one of `days` (ISO weekdays), or on any
    /// day without them: today if it is still ahead, else the next day that has it.
    static func next(_ time: TimeOfDay, on days: [Int]?, in zone: Zone, after now: Instant) -> LocalDateTime {
        let today = zone.localDateTime(at: now)
        let first = daysFromCivil(year: today.year, month: today.month, day: today.day)
        var candidate = today
        // Within a week every listed day comes round, today's included.
        for offset in Int64(0)...7 {
            let (year, month, day) = civilFromDays(first + offset)
            candidate = LocalDateTime(
                year: year,
                month: month,
                day: day,
                hour: time.hour,
                minute: time.minute,
                second: time.second
            )
            if days?.contains(candidate.weekday) ?? true, zone.instant(for: candidate) > now { break }
        }
        return candidate
    }

    /// How many occurrences of the notification `object` (without a count) come before the first
    /// one delivered at or after `now`, as chimed's engine numbers them; 0 when that cannot be told
    /// here (chimed then answers whatever is wrong).
    static func occurrences(of object: JSONObject, before now: Instant, deviceZone: Zone?) -> Int {
        let payload = JSON.object(["notification": .object(object)]).bytes
        guard case .success(let request) = CommandDecoder().decode(deviceId: "chime", op: .preview, payload: payload),
            case .preview(.notification(let spec), _, _) = request.command, let start = spec.fireDate,
            let zone = spec.effectiveZone(deviceZone: deviceZone),
            let recurrence = try? Recurrence(
                start: start,
                zone: zone,
                pattern: spec.pattern,
                until: spec.until,
                exdates: spec.exdates ?? []
            ),
            // Delivered at or after now: due at or after now + lead time, as chimed arms it.
            let first = try? recurrence.first(atOrAfter: now.adding(milliseconds: spec.leadTime ?? 0))
        else { return 0 }
        return first.index - 1
    }

    /// `--on-day`: 1 to 31, or `last` (-1).
    static func monthDay(_ text: String) throws(UsageError) -> Int {
        if text == "last" { return -1 }
        guard let n = Int(text), (1...31).contains(n) else {
            throw UsageError("--on-day: expected a day of the month, 1 to 31, or last, got \"\(text)\"")
        }
        return n
    }

    /// The rule of `--every month --on-day`: `FREQ=MONTHLY;BYMONTHDAY=31`, with `RSCALE=GREGORIAN` and
    /// `SKIP` when `--skip` is given (RFC 7529 puts SKIP only beside an RSCALE).
    static func monthDayRule(_ day: Int, skip: String?) -> String {
        guard let skip else { return "FREQ=MONTHLY;BYMONTHDAY=\(day)" }
        return "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=\(day);SKIP=\(skip)"
    }

    /// A `--lunar` date: `MONTH-DAY`, the month 1 to 12 with `L` for a leap month, the day 1 to 30.
    static func lunarDate(_ text: String) throws(UsageError) -> (month: Int, leap: Bool, day: Int) {
        let problem = UsageError(
            "--lunar: expected a Chinese calendar date MONTH-DAY such as 8-15, or 4L-3 for a leap month, got \"\(text)\""
        )
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2 else { throw problem }
        let leap = parts[0].last == "L" || parts[0].last == "l"
        let monthText = leap ? parts[0].dropLast() : parts[0]
        guard monthText.allSatisfy(\.isASCII), parts[1].allSatisfy(\.isASCII), let month = Int(monthText),
            let day = Int(parts[1]), !monthText.hasPrefix("+"), !parts[1].hasPrefix("+")
        else { throw problem }
        guard (1...12).contains(month) else { throw UsageError("--lunar: the month must be 1 to 12, got \(month)") }
        guard (1...30).contains(day) else {
            throw UsageError("--lunar: the day must be 1 to 30 (a Chinese month has 29 or 30), got \(day)")
        }
        return (month, leap, day)
    }

    /// The rule of `--lunar`: `RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=8;BYMONTHDAY=15`, plus `SKIP`: the one
    /// `--skip` gives, else `BACKWARD` for a date some years lack (a 30th: the month's last day, the 29th;
    /// a leap month: the regular month of that number), else none.
    static func lunarRule(_ date: (month: Int, leap: Bool, day: Int), skip: String?) -> String {
        let rule = "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=\(date.month)\(date.leap ? "L" : "");BYMONTHDAY=\(date.day)"
        let chosen = skip ?? (date.day == 30 || date.leap ? "BACKWARD" : nil)
        return chosen.map { rule + ";SKIP=\($0)" } ?? rule
    }

    /// `rule` with `;COUNT=count` when there is a count.
    static func rule(_ rule: String, count: Int?) -> String {
        count.map { rule + ";COUNT=\($0)" } ?? rule
    }

    /// `--times`: a whole number from 1.
    static func count(_ text: String, _ flag: String) throws(UsageError) -> Int {
        guard let n = Int(text), (1...1_000_000_000).contains(n) else {
            throw UsageError("\(flag) must be a whole number from 1, got \"\(text)\"")
        }
        return n
    }

    /// A date-time in RRULE form: `20261201T180000Z` for an instant, `20261201T180000` wall clock.
    static func ruleUntil(_ value: DateTimeValue) -> String {
        func form(_ t: LocalDateTime) -> String {
            "\(TimeDisplay.pad(t.year, 4))\(TimeDisplay.pad(t.month))\(TimeDisplay.pad(t.day))T"
                + "\(TimeDisplay.pad(t.hour))\(TimeDisplay.pad(t.minute))\(TimeDisplay.pad(t.second))"
        }
        switch value {
        case .instant(let instant): return form(Zone.utc.localDateTime(at: instant)) + "Z"
        case .local(let local): return form(local)
        }
    }

    /// How to give `--at HH:MM` a zone when the device has none.
    static func missingZone(_ device: String) -> String {
        "give --tz ZONE, or set the device's with chime device --device \(device) --tz ZONE"
    }

    /// The zone a raw notification object (`--json`) names, if it names one.
    static func namedZone(of object: JSONObject) -> Zone? {
        guard let name = object["timeZone"]?.stringValue, name != "device" else { return nil }
        return Zone(identifier: name)
    }
}
