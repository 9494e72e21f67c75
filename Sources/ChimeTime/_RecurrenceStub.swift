// TEMPORARY stand-in with the agreed API, replaced when the recurrence branch lands.
public enum RepeatUnit: String, Sendable, CaseIterable {
    case year, quarter, month, weekOfYear, day, weekday, hour, minute, second
    public init?(parsing text: String) {
        if text == "week" {
            self = .weekOfYear
        } else {
            self.init(rawValue: text)
        }
    }
}

public struct RecurrenceError: Error, Hashable, Sendable, CustomStringConvertible {
    public var description: String
}

public struct RecurrenceRule: Hashable, Sendable, CustomStringConvertible {
    public var description: String
    public init(parsing text: String) throws(RecurrenceError) {
        throw RecurrenceError(description: "RRULE is not supported yet")
    }
}

public struct Occurrence: Hashable, Sendable {
    public var index: Int
    public var instant: Instant
    public init(index: Int, instant: Instant) {
        self.index = index
        self.instant = instant
    }
}

public struct Recurrence: Sendable {
    public enum Pattern: Hashable, Sendable {
        case once
        case interval(RepeatUnit)
        case rule(RecurrenceRule)
    }
    let start: Instant
    let pattern: Pattern
    let count: Int?
    let until: Instant?

    public init(
        start: DateTimeValue,
        zone: Zone,
        pattern: Pattern,
        count: Int? = nil,
        until: DateTimeValue? = nil,
        exdates: [DateTimeValue] = []
    ) throws(RecurrenceError) {
        self.start = start.resolved(in: zone)
        self.pattern = pattern
        self.count = count
        self.until = until?.resolved(in: zone)
    }

    var step: Int64 {
        guard case .interval(let unit) = pattern else { return 0 }
        switch unit {
        case .second: return 1000
        case .minute: return 60_000
        case .hour: return 3_600_000
        default: return 86_400_000
        }
    }

    func occurrence(_ k: Int64) -> Occurrence? {
        if let count, k >= count { return nil }
        let o = Occurrence(index: Int(k) + 1, instant: start.adding(milliseconds: k * step))
        if let until, o.instant > until { return nil }
        return o
    }

    public func first(atOrAfter instant: Instant) throws(RecurrenceError) -> Occurrence? {
        if step == 0 { return instant <= start ? occurrence(0) : nil }
        let k = max(0, (instant.milliseconds - start.milliseconds + step - 1) / step)
        return occurrence(k)
    }

    public func next(after occurrence: Occurrence) throws(RecurrenceError) -> Occurrence? {
        step == 0 ? nil : self.occurrence(Int64(occurrence.index))
    }

    public func smallestSpacing() throws(RecurrenceError) -> Int64? {
        step == 0 ? nil : step / 1000
    }
}
