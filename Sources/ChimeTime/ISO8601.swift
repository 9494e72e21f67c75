/// A date-time as a client writes it: an absolute instant (with `Z` or an offset) or a
/// wall-clock time to be read in some zone.
public enum DateTimeValue: Hashable, Sendable, CustomStringConvertible {
    case instant(Instant)
    case local(LocalDateTime)

    /// Parses the ISO 8601 / RFC 3339 forms Chime accepts:
    /// `YYYY-MM-DDTHH:MM`, `YYYY-MM-DDTHH:MM:SS`, an optional fraction of a second (`.5`,
    /// `.004`), and an optional `Z` or `±HH:MM` / `±HHMM` / `±HH` offset. `T` may also be `t` or a
    /// space. A wall-clock time (no offset) must have whole seconds. Returns nil for anything else,
    /// including dates that do not exist (`2026-02-30`) and instants outside the years 0001...9999
    /// (`0001-01-01T00:30:00+01:00` is in the year 0), which RFC 3339 cannot write.
    public init?(iso8601 text: String) {
        var p = Scanner(Array(text.utf8))
        guard let year = p.digits(4), p.take(UInt8(ascii: "-")),
            let month = p.digits(2), p.take(UInt8(ascii: "-")),
            let day = p.digits(2)
        else { return nil }
        guard let sep = p.next(), sep == UInt8(ascii: "T") || sep == UInt8(ascii: "t") || sep == UInt8(ascii: " ")
        else { return nil }
        guard let hour = p.digits(2), p.take(UInt8(ascii: ":")), let minute = p.digits(2) else { return nil }
        var second = 0
        var millis = 0
        var hasFraction = false
        if p.take(UInt8(ascii: ":")) {
            guard let s = p.digits(2) else { return nil }
            second = s
            if p.take(UInt8(ascii: ".")) || p.take(UInt8(ascii: ",")) {
                var count = 0
                var scale = 100
                while let d = p.peekDigit() {
                    p.index += 1
                    count += 1
                    if count <= 3 {
                        millis += d * scale
                        scale /= 10
                    }
                    if d != 0 { hasFraction = true }
                }
                guard count >= 1, count <= 9 else { return nil }
            }
        }
        let local = LocalDateTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        guard local.isValid else { return nil }

        if p.atEnd {
            guard !hasFraction else { return nil }
            self = .local(local)
            return
        }
        var offset = 0
        switch p.next() {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            offset = 0
        case let sign? where sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-"):
            guard let oh = p.digits(2), oh <= 23 else { return nil }
            var om = 0
            if !p.atEnd {
                _ = p.take(UInt8(ascii: ":"))
                guard let m = p.digits(2), m <= 59 else { return nil }
                om = m
            }
            offset = (oh * 3600 + om * 60) * (sign == UInt8(ascii: "-") ? -1 : 1)
        default:
            return nil
        }
        guard p.atEnd else { return nil }
        let instant = Instant(milliseconds: (local.secondsSinceEpoch - Int64(offset)) * 1000 + Int64(millis))
        guard instant.isInSupportedYears else { return nil }
        self = .instant(instant)
    }

    /// The canonical text: RFC 3339 UTC for an instant, `YYYY-MM-DDTHH:MM:SS` for a wall-clock time.
    public var description: String {
        switch self {
        case .instant(let instant): return instant.rfc3339()
        case .local(let local): return local.description
        }
    }

    /// Appends ``description``'s text as UTF-8, without building a `String`.
    public func write(into out: inout [UInt8]) {
        switch self {
        case .instant(let instant): instant.writeRFC3339(into: &out)
        case .local(let local): local.write(into: &out)
        }
    }

    /// The instant this value means in `zone` (wall-clock times by ``Zone/instant(for:)``).
    public func resolved(in zone: Zone) -> Instant {
        switch self {
        case .instant(let instant): return instant
        case .local(let local): return zone.instant(for: local)
        }
    }
}

private struct Scanner {
    let bytes: [UInt8]
    var index = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { index == bytes.count }

    mutating func next() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    func peekDigit() -> Int? {
        guard index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 else { return nil }
        return Int(bytes[index] - 48)
    }

    mutating func digits(_ count: Int) -> Int? {
        var value = 0
        for _ in 0..<count {
            guard let d = peekDigit() else { return nil }
            value = value * 10 + d
            index += 1
        }
        return value
    }
}
