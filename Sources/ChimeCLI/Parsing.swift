import ChimeCore
import ChimeSupport
import Foundation

/// Parsers for the human-friendly values on `chime`'s command line. Each throws a ``UsageError``
/// that names the flag and shows an accepted form.
enum Parse {
    /// The longest duration any flag accepts: the protocol's 10-year limit on `after`.
    static let maxDurationMilliseconds: Int64 = 315_360_000_000

    /// A duration: `90s`, `15m`, `2h`, `1d`, `1w`, `500ms`, or combinations such as `1h30m`. Every
    /// number has its unit: a bare `15` is refused rather than read as seconds, since a reader of
    /// `--in 15` may well mean minutes.
    /// - Returns: milliseconds.
    static func duration(_ text: String, flag: String, allowZero: Bool = false) throws(UsageError) -> Int64 {
        let problem = UsageError(
            "--\(flag): \"\(text)\" is not a duration such as 90s, 15m, 2h, 1d or 1h30m"
        )
        var total: Double = 0
        var rest = Substring(text)
        guard !rest.isEmpty else { throw problem }
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty, let value = Double(number) else { throw problem }
            rest = rest.dropFirst(number.count)
            let unit = rest.prefix { $0.isASCII && $0.isLetter }
            rest = rest.dropFirst(unit.count)
            let scale: Double
            switch unit {
            case "ms": scale = 1
            case "s", "sec": scale = 1000
            case "m", "min": scale = 60_000
            case "h": scale = 3_600_000
            case "d": scale = 86_400_000
            case "w": scale = 604_800_000
            // Zero is zero in any unit.
            case "" where value == 0 && number.count == text.count: scale = 0
            case "" where rest.isEmpty:
                guard number.count == text.count else {
                    throw UsageError("--\(flag): \"\(text)\" needs a unit after \(number): s, m, h or d")
                }
                throw UsageError(
                    "--\(flag): \"\(text)\" needs a unit: \(text)s, \(text)m, \(text)h or \(text)d (combinations "
                        + "such as 1h30m too)"
                )
            default: throw problem
            }
            total += value * scale
        }
        guard total.isFinite, total <= Double(maxDurationMilliseconds) else {
            throw UsageError("--\(flag): \"\(text)\" is longer than 10 years")
        }
        let milliseconds = Int64(total.rounded())
        guard milliseconds > 0 || (allowZero && milliseconds == 0) else {
            throw UsageError("--\(flag) must be more than 0, got \"\(text)\"")
        }
        return milliseconds
    }

    /// Milliseconds as the protocol's seconds: an integer when whole.
    static func secondsJSON(_ milliseconds: Int64) -> JSON {
        milliseconds % 1000 == 0 ? .int(milliseconds / 1000) : .double(Double(milliseconds) / 1000)
    }

    /// `key=value`: the value stays a JSON number or boolean when it reads as one (`n=3`,
    /// `urgent=true`), otherwise it is a string; `key:=json` takes any JSON value (`ids:=[1,2]`).
    static func keyValue(_ text: String, flag: String) throws(UsageError) -> (key: String, value: JSON) {
        guard let equals = text.firstIndex(of: "=") else {
            throw UsageError("--\(flag): expected key=value or key:=json, got \"\(text)\"")
        }
        var key = String(text[..<equals])
        let raw = String(text[text.index(after: equals)...])
        if key.hasSuffix(":") {
            key.removeLast()
            guard !key.isEmpty else { throw UsageError("--\(flag): the key before := is empty in \"\(text)\"") }
            do {
                return (key, try JSON(parsing: raw))
            } catch {
                throw UsageError("--\(flag): \(key):= needs a JSON value, got \"\(raw)\" (\(error))")
            }
        }
        guard !key.isEmpty else { throw UsageError("--\(flag): the key before = is empty in \"\(text)\"") }
        if let parsed = try? JSON(parsing: raw) {
            switch parsed {
            case .int, .double, .bool: return (key, parsed)
            default: break
            }
        }
        return (key, .string(raw))
    }

    /// Every `key=value` of a repeatable flag as one object (a later key replaces an earlier one).
    static func keyValues(_ items: [String], flag: String) throws(UsageError) -> JSONObject? {
        guard !items.isEmpty else { return nil }
        var object = JSONObject()
        for item in items {
            let (key, value) = try keyValue(item, flag: flag)
            object[key] = value
        }
        return object
    }

    /// `--badge`: `N` (absolute), `+N` or `-N` (a change when the notification fires).
    static func badge(_ text: String) throws(UsageError) -> JSON {
        let digits = text.drop { $0 == "+" || $0 == "-" }
        guard text.count - digits.count <= 1, !digits.isEmpty, digits.count <= 7,
            digits.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int64(digits), n <= Badge.maximum
        else {
            throw UsageError(
                "--badge: expected N, +N or -N with N up to \(Badge.maximum) (such as 3, +1, -1), got \"\(text)\""
            )
        }
        return text.first == "+" || text.first == "-" ? .string("\(text.first!)\(n)") : .int(n)
    }

    /// A date-time: a wall-clock time (`2026-12-01 18:00`, `2026-12-01T18:00:00`) or an absolute
    /// instant (with `Z` or an offset).
    /// - Parameter timeAlone: the flag also takes `HH:MM` alone (`--at`), which the caller reads.
    static func dateTime(_ text: String, flag: String, timeAlone: Bool = false) throws(UsageError) -> DateTimeValue {
        guard let value = DateTimeValue(iso8601: text) else {
            throw UsageError(
                "--\(flag): expected \"YYYY-MM-DD HH:MM\" (wall clock)\(timeAlone ? ", HH:MM (the next one)" : "") "
                    + "or an instant with Z or an offset (2026-12-01T10:00Z, 2026-12-01 18:00+08:00), got \"\(text)\""
            )
        }
        return value
    }

    /// The days of the week in ISO order (1 is Monday), as `--on` spells them in full.
    static let weekdayNames = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    /// The words `--on` takes for several days at once: `weekdays` as `--every weekdays` means it.
    static let dayGroups: [String: ClosedRange<Int>] = ["weekdays": 1...5, "weekends": 6...7, "weekend": 6...7]

    /// `--on`: days and ranges of days separated by commas, each day its name or the first two or
    /// more letters of it, in any case: `mon-fri`, `mon,wed,fri`, `sat-sun`, `Monday,Thursday`. A
    /// range may wrap round the week (`fri-mon`). `weekdays` is Monday to Friday, `weekends` Saturday
    /// and Sunday (``dayGroups``).
    /// - Returns: ISO weekdays (1 is Monday), each once, in week order.
    static func weekdays(_ text: String, flag: String) throws(UsageError) -> [Int] {
        let problem = UsageError(
            "--\(flag): expected days such as mon-fri, mon,wed,fri, sat-sun, monday,thursday, weekdays or weekends, "
                + "got \"\(text)\""
        )
        func day(_ word: Substring) throws(UsageError) -> Int {
            let name = word.lowercased()
            guard name.count >= 2, let index = weekdayNames.firstIndex(where: { $0.hasPrefix(name) }) else {
                throw problem
            }
            return index + 1
        }
        var days = Set<Int>()
        for item in text.filter({ $0 != " " }).split(separator: ",", omittingEmptySubsequences: false) {
            if let group = dayGroups[item.lowercased()] {
                days.formUnion(group)
                continue
            }
            let ends = item.split(separator: "-", omittingEmptySubsequences: false)
            guard ends.count == 1 || ends.count == 2 else { throw problem }
            let last = try day(ends[ends.count - 1])
            var current = try day(ends[0])
            days.insert(current)
            while current != last {
                current = current % 7 + 1
                days.insert(current)
            }
        }
        return days.sorted()
    }

    /// An absolute instant (`--from`).
    static func instant(_ text: String, flag: String) throws(UsageError) -> Instant {
        guard case .instant(let instant)? = DateTimeValue(iso8601: text) else {
            throw UsageError("--\(flag): expected an instant with Z or an offset (2026-12-01T10:00Z), got \"\(text)\"")
        }
        return instant
    }

    /// An IANA zone.
    static func zone(_ text: String, flag: String) throws(UsageError) -> Zone {
        guard let zone = Zone(identifier: text) else {
            throw UsageError("--\(flag): \"\(text)\" is not an IANA time zone such as Asia/Shanghai or Europe/Paris")
        }
        return zone
    }

    /// `HH:MM` or `HH:MM:SS`.
    static func timeOfDay(_ text: String, flag: String) throws(UsageError) -> TimeOfDay {
        guard let time = TimeOfDay(parsing: text) else {
            throw UsageError("--\(flag): expected HH:MM or HH:MM:SS, got \"\(text)\"")
        }
        return time
    }

    /// `--quiet 22:00-07:00`.
    static func quietHours(_ text: String) throws(UsageError) -> JSON {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = TimeOfDay(parsing: String(parts[0])),
            let end = TimeOfDay(parsing: String(parts[1]))
        else {
            throw UsageError("--quiet: expected START-END such as 22:00-07:00, got \"\(text)\"")
        }
        return ["start": .string(start.description), "end": .string(end.description)]
    }

    /// An integer flag in a range, if given.
    static func integer(_ flags: Flags, _ name: String, in range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard flags[name] != nil else { return nil }
        return try flags.integer(name, in: range)
    }

    /// `on` or `off` (also `true` / `false`, `yes` / `no`).
    static func onOff(_ text: String, flag: String) throws(UsageError) -> Bool {
        switch text.lowercased() {
        case "on", "true", "yes": return true
        case "off", "false", "no": return false
        default: throw UsageError("--\(flag): expected on or off, got \"\(text)\"")
        }
    }

    /// One of a fixed set of words.
    static func choice(_ text: String, flag: String, _ choices: [String]) throws(UsageError) -> String {
        guard choices.contains(text) else {
            throw UsageError("--\(flag): expected one of \(choices.joined(separator: ", ")), got \"\(text)\"")
        }
        return text
    }

    /// A JSON object from a file, or from standard input for `-`.
    static func jsonFile(_ path: String, flag: String) throws(UsageError) -> JSONObject {
        let bytes: [UInt8]
        if path == "-" {
            var data: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                data += buffer[..<count]
            }
            bytes = data
        } else {
            guard let file = FileManager.default.contents(atPath: path) else {
                throw UsageError("--\(flag): cannot read \"\(path)\"")
            }
            bytes = Array(file)
        }
        let json: JSON
        do {
            json = try JSON(parsing: bytes)
        } catch {
            throw UsageError("--\(flag): \(path == "-" ? "standard input" : path) is not valid JSON: \(error)")
        }
        guard case .object(let object) = json else {
            throw UsageError("--\(flag): expected a JSON object, got \(json.typeDescription)")
        }
        return object
    }
}
