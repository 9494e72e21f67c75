import ChimeCore
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

    func string(_ key: String) throws(ChimeClientError) -> String? {
        switch object[key] {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case let other?: throw fail(key, "expected a string, got \(other.typeDescription)")
        }
    }

    func requiredString(_ key: String) throws(ChimeClientError) -> String {
        guard let value = try string(key) else { throw fail(key, "missing") }
        return value
    }

    func bool(_ key: String) throws(ChimeClientError) -> Bool? {
        switch object[key] {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        case let other?: throw fail(key, "expected a boolean, got \(other.typeDescription)")
        }
    }

    func int(_ key: String) throws(ChimeClientError) -> Int? {
        switch object[key] {
        case nil, .null?: return nil
        case .int(let n)?: return Int(n)
        case let other?: throw fail(key, "expected an integer, got \(other.typeDescription)")
        }
    }

    func object(_ key: String) throws(ChimeClientError) -> JSONObject? {
        switch object[key] {
        case nil, .null?: return nil
        case .object(let o)?: return o
        case let other?: throw fail(key, "expected an object, got \(other.typeDescription)")
        }
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
