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

    /// Whether this instant is in the years 0001...9999 UTC (from ``distantPast`` to the last millisecond
    /// of ``distantFuture``'s second), the range that RFC 3339 can write and that Chime parses.
    public var isInSupportedYears: Bool {
        milliseconds >= Self.distantPast.milliseconds && milliseconds <= Self.distantFuture.milliseconds + 999
    }

    /// RFC 3339 in UTC: `2026-12-01T10:00:00Z`, or with `.SSS` when `fractional` is true or the
    /// instant has a millisecond part.
    public func rfc3339(fractional: Bool = false) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        writeRFC3339(into: &bytes, fractional: fractional)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends ``rfc3339(fractional:)``'s text as UTF-8, without building a `String`: deliveries
    /// write four of these each.
    ///
    /// An instant outside the years 0001...9999 (see ``isInSupportedYears``) is written as the nearest end
    /// of that range, `0001-01-01T00:00:00Z` or `9999-12-31T23:59:59.999Z`, so that the text is always
    /// RFC 3339. No parsed date-time and no occurrence is outside it, but arithmetic on one can be: an
    /// occurrence in the year 1 fired ten years early by a `leadTime` is due "before the year 1".
    public func writeRFC3339(into out: inout [UInt8], fractional: Bool = false) {
        let clamped = min(max(milliseconds, Self.distantPast.milliseconds), Self.distantFuture.milliseconds + 999)
        let secs = clamped >= 0 ? clamped / 1000 : -((-clamped + 999) / 1000)
        let ms = Int(clamped - secs * 1000)
        let days = secs >= 0 ? secs / 86_400 : -((-secs + 86_399) / 86_400)
        let rest = Int(secs - days * 86_400)
        let (y, m, d) = civilFromDays(days)
        func two(_ v: Int) {
            out.append(UInt8(48 + v / 10))
            out.append(UInt8(48 + v % 10))
        }
        two(y / 100)
        two(y % 100)
        out.append(UInt8(ascii: "-"))
        two(m)
        out.append(UInt8(ascii: "-"))
        two(d)
        out.append(UInt8(ascii: "T"))
        two(rest / 3600)
        out.append(UInt8(ascii: ":"))
        two(rest / 60 % 60)
        out.append(UInt8(ascii: ":"))
        two(rest % 60)
        if fractional || ms != 0 {
            out.append(UInt8(ascii: "."))
            out.append(UInt8(48 + ms / 100))
            two(ms % 100)
        }
        out.append(UInt8(ascii: "Z"))
    }

    public var description: String { rfc3339() }
}

@usableFromInline
func pad(_ value: Int, _ width: Int) -> String {
    let digits = String(value)
    return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
}
