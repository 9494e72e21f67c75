/// A point on the UTC time line, in whole milliseconds since 1970-01-01T00:00:00Z.
///
/// Chime's protocol shows times to the millisecond (`firedAt`), and recurrence works in whole
/// seconds, so one integer covers both without floating-point drift.
public struct Instant: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var milliseconds: Int64

    @inlinable
    public init(milliseconds: Int64) {
        self.milliseconds = milliseconds
    }

    @inlinable
    public init(seconds: Int64) {
        self.milliseconds = seconds * 1000
    }

    /// Whole seconds since the epoch, rounded towards negative infinity.
    @inlinable
    public var seconds: Int64 {
        milliseconds >= 0 ? milliseconds / 1000 : -((-milliseconds + 999) / 1000)
    }

    @inlinable
    public func adding(milliseconds delta: Int64) -> Instant {
        Instant(milliseconds: milliseconds &+ delta)
    }

    @inlinable
    public func adding(seconds delta: Int64) -> Instant {
        Instant(milliseconds: milliseconds &+ delta &* 1000)
    }

    @inlinable
    public static func < (lhs: Instant, rhs: Instant) -> Bool {
        lhs.milliseconds < rhs.milliseconds
    }

    /// The earliest and latest instants Chime deals in (years 0001 and 9999).
    public static let distantPast = Instant(seconds: -62_135_596_800)
    public static let distantFuture = Instant(seconds: 253_402_300_799)

    /// RFC 3339 in UTC: `2026-12-01T10:00:00Z`, or with `.SSS` when `fractional` is true or the
    /// instant has a millisecond part.
    public func rfc3339(fractional: Bool = false) -> String {
        let ms = Int(milliseconds - seconds * 1000)
        let civil = LocalDateTime(secondsSinceEpoch: seconds)
        var out = civil.description
        if fractional || ms != 0 {
            out.append(".")
            out.append(pad(ms, 3))
        }
        out.append("Z")
        return out
    }

    public var description: String { rfc3339() }
}

@usableFromInline
func pad(_ value: Int, _ width: Int) -> String {
    let digits = String(value)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}
