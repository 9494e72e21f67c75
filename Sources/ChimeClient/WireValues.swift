import ChimeProtocol
import ChimeTime
import Foundation

/// Conversions between the client's Foundation values and the protocol's JSON values.
enum Wire {
    /// An instant as RFC 3339 in UTC, to the millisecond (`2026-12-01T10:00:00.120Z`).
    static func instant(_ date: Date) -> String {
        Instant(milliseconds: milliseconds(date.timeIntervalSince1970)).rfc3339()
    }

    static func date(_ instant: Instant) -> Date {
        Date(timeIntervalSince1970: Double(instant.milliseconds) / 1000)
    }

    /// Seconds kept to the millisecond, as the protocol keeps durations.
    static func milliseconds(_ seconds: TimeInterval) -> Int64 {
        Int64((seconds * 1000).rounded())
    }

    /// A duration in seconds: an integer when whole.
    static func seconds(_ seconds: TimeInterval, field: String) throws(ChimeClientError) -> JSON {
        guard seconds.isFinite, abs(seconds) < 1e15 else { throw .invalid(field, "expected a number of seconds") }
        let ms = milliseconds(seconds)
        return ms % 1000 == 0 ? .int(ms / 1000) : .double(Double(ms) / 1000)
    }

    static func timeInterval(milliseconds: Int64) -> TimeInterval { Double(milliseconds) / 1000 }

    /// A wall-clock date-time from components with a year, month, day, hour and minute (the
    /// second is 0 unless given).
    static func localDateTime(_ c: DateComponents, field: String) throws(ChimeClientError) -> LocalDateTime {
        guard let year = c.year, let month = c.month, let day = c.day, let hour = c.hour, let minute = c.minute else {
            throw .invalid(field, "a wall-clock date-time needs year, month, day, hour and minute")
        }
        if let nanosecond = c.nanosecond, nanosecond != 0 {
            throw .invalid(field, "a wall-clock date-time has whole seconds")
        }
        let local = LocalDateTime(year: year, month: month, day: day, hour: hour, minute: minute, second: c.second ?? 0)
        guard local.isValid, (1...9999).contains(year) else {
            throw .invalid(field, "\(local) is not a valid date-time")
        }
        return local
    }

    static func components(_ local: LocalDateTime) -> DateComponents {
        DateComponents(
            year: local.year,
            month: local.month,
            day: local.day,
            hour: local.hour,
            minute: local.minute,
            second: local.second
        )
    }
}

/// Reads the members of a reply or a delivery, with errors that name what is wrong.
struct WireReader {
    let object: JSONObject
    let what: String

    func fail(_ key: String, _ problem: String) -> ChimeClientError {
        ChimeClientError(.invalidReply, field: key, "\(what): \(key): \(problem)")
    }

    /// The member `key` as `extract` reads it; nil when absent or null.
    private func member<Value>(
        _ key: String,
        _ expected: String,
        _ extract: (JSON) -> Value?
    ) throws(ChimeClientError) -> Value? {
        guard let value = object[key], !value.isNull else { return nil }
        guard let extracted = extract(value) else {
            throw fail(key, "expected \(expected), got \(value.typeDescription)")
        }
        return extracted
    }

    func string(_ key: String) throws(ChimeClientError) -> String? {
        try member(key, "a string") { if case .string(let s) = $0 { s } else { nil } }
    }

    func requiredString(_ key: String) throws(ChimeClientError) -> String {
        guard let value = try string(key) else { throw fail(key, "missing") }
        return value
    }

    func bool(_ key: String) throws(ChimeClientError) -> Bool? {
        try member(key, "a boolean") { if case .bool(let b) = $0 { b } else { nil } }
    }

    func int(_ key: String) throws(ChimeClientError) -> Int? {
        try member(key, "an integer") { if case .int(let n) = $0 { Int(exactly: n) } else { nil } }
    }

    func object(_ key: String) throws(ChimeClientError) -> JSONObject? {
        try member(key, "an object") { $0.objectValue }
    }

    func date(_ key: String) throws(ChimeClientError) -> Date? {
        guard let text = try string(key) else { return nil }
        guard case .instant(let instant)? = DateTimeValue(iso8601: text) else {
            throw fail(key, "expected an RFC 3339 instant, got \"\(text)\"")
        }
        return Wire.date(instant)
    }

    func requiredDate(_ key: String) throws(ChimeClientError) -> Date {
        guard let value = try date(key) else { throw fail(key, "missing") }
        return value
    }
}
