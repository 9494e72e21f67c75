import ChimeTime
import Testing

/// A wall-clock `DateTimeValue` from `YYYY-MM-DDTHH:MM[:SS]`, for tables.
func wall(_ text: String) -> DateTimeValue {
    guard case .local(let local)? = DateTimeValue(iso8601: text) else { preconditionFailure("bad wall time \(text)") }
    return .local(local)
}

/// An instant from RFC 3339 text, for tables.
func at(_ text: String) -> Instant {
    guard case .instant(let instant)? = DateTimeValue(iso8601: text) else { preconditionFailure("bad instant \(text)") }
    return instant
}

func zone(_ name: String) -> Zone {
    guard let zone = Zone(identifier: name) else { preconditionFailure("unknown zone \(name)") }
    return zone
}

/// The first `limit` occurrences from the start, as `#index instant` strings (readable failures).
func listing(_ recurrence: Recurrence, limit: Int = 10) throws -> [String] {
    var out: [String] = []
    var occurrence = try recurrence.first(atOrAfter: Instant.distantPast)
    while let current = occurrence, out.count < limit {
        out.append("#\(current.index) \(current.instant)")
        occurrence = try recurrence.next(after: current)
    }
    return out
}

func rule(_ text: String) throws -> Recurrence.Pattern {
    .rule(try RecurrenceRule(parsing: text))
}
