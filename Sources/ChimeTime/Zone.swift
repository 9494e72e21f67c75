import Foundation

/// An IANA time zone, and the one rule Chime uses to turn a wall-clock time into an instant.
///
/// The rule is RFC 5545's (section 3.3.5), also Python's `zoneinfo` with `fold=0`:
/// - a wall-clock time in a spring-forward gap is moved forward by the length of the gap
///   (02:30 on a night that jumps from 02:00 to 03:00 becomes 03:30);
/// - a wall-clock time that exists twice (fall back) means the first of the two instants.
public struct Zone: Hashable, Sendable, CustomStringConvertible {
    public let identifier: String
    @usableFromInline let timeZone: TimeZone

    /// A zone from its IANA identifier (`Europe/Paris`, `UTC`), or nil when there is no such zone.
    public init?(identifier: String) {
        guard !identifier.isEmpty, identifier.count <= 64,
            let tz = TimeZone(identifier: identifier)
        else { return nil }
        self.identifier = identifier
        self.timeZone = tz
    }

    public static let utc = Zone(identifier: "UTC")!

    public static func == (lhs: Zone, rhs: Zone) -> Bool { lhs.identifier == rhs.identifier }
    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
    public var description: String { identifier }

    /// Seconds east of UTC in effect at `instant`.
    public func offset(at instant: Instant) -> Int {
        timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(instant.seconds)))
    }

    /// The wall-clock time at `instant` in this zone (milliseconds dropped).
    public func localDateTime(at instant: Instant) -> LocalDateTime {
        LocalDateTime(secondsSinceEpoch: instant.seconds + Int64(offset(at: instant)))
    }

    /// The instant a wall-clock time means in this zone, by the gap and overlap rule above.
    public func instant(for local: LocalDateTime) -> Instant {
        let wall = local.secondsSinceEpoch
        // Offsets a day either side of the wall time bracket any single transition near it.
        let before = Int64(offset(at: Instant(seconds: wall - 86_400)))
        let after = Int64(offset(at: Instant(seconds: wall + 86_400)))
        let early = wall - before
        let late = wall - after
        let earlyValid = Int64(offset(at: Instant(seconds: early))) == before
        let lateValid = Int64(offset(at: Instant(seconds: late))) == after
        switch (earlyValid, lateValid) {
        case (true, true): return Instant(seconds: min(early, late))
        case (true, false): return Instant(seconds: early)
        case (false, true): return Instant(seconds: late)
        // In a gap: read with the offset from before the transition, which lands after it,
        // as far past the transition as the wall time was past the start of the gap.
        case (false, false): return Instant(seconds: early)
        }
    }
}
