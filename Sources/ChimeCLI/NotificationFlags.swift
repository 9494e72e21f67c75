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
        .init("at", env: false, "when: \"YYYY-MM-DD HH:MM\" wall clock in --tz, or an instant with Z or an offset"),
        .init("in", env: false, "when: this long from now (90s, 15m, 2h, 1d, 1h30m)"),
        .init("tz", env: false, "an IANA zone (Asia/Shanghai) or device: the zone of wall-clock times"),
        .init("align", env: false, "with --in: the first HH:MM in --tz at or after now + --in"),
        .init("every", env: false, "repeat: weekday, day, week, month, quarter, year, hour, minute or second"),
        .init("rrule", env: false, "repeat by an RFC 5545 rule (FREQ=WEEKLY;BYDAY=MO,WE,FR)"),
        .init("times", env: false, "fire at most N times"),
        .init("until", env: false, "no occurrence after this date-time (same forms as --at)"),
        .init("except", env: false, "skip this occurrence (same forms as --at); repeatable"),
        .init("lead", env: false, "fire each occurrence this much earlier (15m)"),
    ]

    static let contentSpecs: [Flags.Spec] = [
        .init("id", env: false, "the notification's id (default: a UUID chimed makes)"),
        .init("title", env: false, "alertTitle"),
        .init("body", env: false, "alertBody: the text shown"),
        .init("action", env: false, "alertAction: the action button's text"),
        .init("no-action", value: false, env: false, "hasAction false"),
        .init("sound", env: false, "soundName (default for the default sound)"),
        .init("category", env: false, "category"),
        .init("badge", env: false, "N, or +N / -N applied to the device's badge when it fires"),
        .init("info", env: false, "userInfo key=value (numbers and booleans stay typed) or key:=json; repeatable"),
        .init("misfire", env: false, "coalesce, skip or all: what happens to occurrences missed while down"),
        .init("expires", env: false, "drop a delivery more than this late (1h)"),
        .init("ignore-quiet-hours", value: false, env: false, "deliver even inside the device's quiet hours"),
        .init("keep", value: false, env: false, "keepAfterFiring: a fired one-shot stays listed, paused"),
        .init("disabled", value: false, env: false, "store it paused (enabled false)"),
    ]

    /// `schedule`'s flags: `--count` is an alias of `--times` there. In `preview` and `next`,
    /// `--count` says how many deliveries to show.
    static let specs = whenSpecs + [.init("count", env: false, "the same as --times")] + contentSpecs
    /// The flags of `preview` and `next`, without `--count`.
    static let expansionSpecs = whenSpecs + contentSpecs

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

    /// The protocol object.
    var object: JSONObject
    /// The zone `--tz` named (nil for `--tz device` or no `--tz`).
    var namedZone: Zone?

    /// Builds the notification; `--at` or `--in` is required.
    /// - Parameter countIsTimes: `--count` is the notification's count (schedule), not the number of
    ///   deliveries to show (preview, next).
    init(_ flags: Flags, countIsTimes: Bool) throws(UsageError) {
        var timesFlag: String?
        var times: String?
        for name in countIsTimes ? ["times", "count"] : ["times"] {
            guard let value = flags[name] else { continue }
            if times != nil { throw UsageError("give either --times or --count, not both") }
            (timesFlag, times) = ("--" + name, value)
        }
        var o = JSONObject()
        if let id = flags["id"] {
            guard !id.isEmpty, id.count <= 128 else { throw UsageError("--id must be 1 to 128 characters") }
            o["id"] = .string(id)
        }
        switch (flags["at"], flags["in"]) {
        case (let at?, nil):
            let value = try Parse.dateTime(at, flag: "at")
            o["fireDate"] = .string(value.description)
            if flags["align"] != nil { throw UsageError("--align goes with --in, not --at") }
        case (nil, let after?):
            o["after"] = Parse.secondsJSON(try Parse.duration(after, flag: "in"))
            if let align = flags["align"] {
                o["alignTo"] = .string(try Parse.timeOfDay(align, flag: "align").description)
            }
        case (.some, .some):
            throw UsageError("give either --at or --in, not both")
        case (nil, nil):
            throw UsageError("say when: --at \"YYYY-MM-DD HH:MM\" or --in DURATION (such as 15m)")
        }
        namedZone = nil
        if let tz = flags["tz"] {
            if tz != "device" { namedZone = try Parse.zone(tz, flag: "tz") }
            o["timeZone"] = .string(tz)
        }

        let every = flags["every"]
        if let every {
            let units = ["weekday", "day", "week", "month", "quarter", "year", "hour", "minute", "second"]
            guard every == "none" || every == "weekOfYear" || units.contains(every) else {
                throw UsageError("--every: expected one of \(units.joined(separator: ", ")), got \"\(every)\"")
            }
            o["repeatInterval"] = .string(every)
        }
        if var rrule = flags["rrule"] {
            guard every == nil else { throw UsageError("give either --every or --rrule, not both") }
            let upper = rrule.uppercased()
            if let times, let timesFlag {
                guard !upper.contains("COUNT=") else { throw UsageError("\(timesFlag): the rule has COUNT= already") }
                rrule += ";COUNT=\(try Self.count(times, timesFlag))"
            }
            if let until = flags["until"] {
                guard !upper.contains("UNTIL=") else { throw UsageError("--until: the rule has UNTIL= already") }
                rrule += ";UNTIL=\(Self.ruleUntil(try Parse.dateTime(until, flag: "until")))"
            }
            do {
                _ = try RecurrenceRule(parsing: rrule)
            } catch {
                throw UsageError("--rrule: \(error)")
            }
            o["rrule"] = .string(rrule)
        } else {
            if let times, let timesFlag {
                guard every != nil else { throw UsageError("\(timesFlag) goes with --every or --rrule") }
                o["count"] = .int(Int64(try Self.count(times, timesFlag)))
            }
            if let until = flags["until"] {
                guard every != nil else { throw UsageError("--until goes with --every or --rrule") }
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

    /// The zone a raw notification object (`--json`) names, if it names one.
    static func namedZone(of object: JSONObject) -> Zone? {
        guard let name = object["timeZone"]?.stringValue, name != "device" else { return nil }
        return Zone(identifier: name)
    }
}
