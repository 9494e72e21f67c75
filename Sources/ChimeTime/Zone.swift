import Foundation

/// An IANA time zone, and the one rule Chime uses to turn a wall-clock time into an instant.
///
/// The rule is RFC 5545's (section 3.3.5), also Python's `zoneinfo` with `fold=0`:
/// - a wall-clock time in a spring-forward gap is moved forward by the length of the gap
///   (02:30 on a night that jumps from 02:00 to 03:00 becomes 03:30);
/// - a wall-clock time that exists twice (fall back) means the first of the two instants.
///
/// Offsets come from the machine's zone database (``ZoneDatabase``: TZif files, or Foundation's ICU data
/// for a zone missing there), as a ``ZoneTable`` for 1800-2199. A `Zone` keeps the table of the database's
/// generation it was made in: equal zones (same identifier) can hold different rules across a tzdata
/// upgrade, and ``rulesFingerprint`` tells them apart.
public struct Zone: Hashable, Sendable, CustomStringConvertible {
    public let identifier: String
    let table: ZoneTable

    /// A zone from its IANA identifier (`Europe/Paris`, `UTC`, `Etc/GMT+5`, `EST5EDT`, `US/Eastern`), or nil
    /// when there is no such zone. Only names from the IANA database, spelled as it spells them, are
    /// accepted: Foundation also parses `GMT+5`, `UTC+3`, Java's `IST` or `SystemV/AST4`, and a zone
    /// directory also opens `Europe//Paris`, which are not zones a client can rely on elsewhere.
    public init?(identifier: String) {
        self.init(identifier: identifier, database: .shared)
    }

    /// A zone with its current rules in `database`.
    public init?(identifier: String, database: ZoneDatabase) {
        guard Zone.isIANAName(identifier), let table = database.table(for: identifier) else { return nil }
        self.identifier = identifier
        self.table = table
    }

    /// The zone a journal record or a snapshot names: it was accepted when it was recorded, so it is
    /// never refused now, whatever zone database this machine has.
    ///
    /// A name that an earlier chimed accepted in a form that is not canonical (`Europe//Paris`, whose
    /// file path resolved) is read as its canonical form (`Europe/Paris`), the file it named. A zone
    /// that neither `database` nor Foundation has (one that another machine's tzdata had, or a
    /// directory without it) is *unresolved*: it keeps its name and computes with UTC's offsets
    /// (``isResolved`` is false) until rules for it are found.
    public init(recorded name: String, database: ZoneDatabase = .shared) {
        let canonical = Zone.canonicalName(name)
        if let canonical, let table = database.table(for: canonical) {
            self.identifier = canonical
            self.table = table
        } else {
            self.identifier = canonical ?? name
            self.table = .unresolved
        }
    }

    /// False for a zone recorded under a name that no zone database here resolves (see
    /// ``init(recorded:database:)``): its wall-clock times are read in UTC.
    public var isResolved: Bool { table !== ZoneTable.unresolved }

    /// Identifies the rules this zone computes with: the same for the same offsets and transitions
    /// between 1800 and 2200, whichever file or library they came from.
    public var rulesFingerprint: UInt64 { table.fingerprint }

    public static let utc = Zone(identifier: "UTC")!

    public static func == (lhs: Zone, rhs: Zone) -> Bool { lhs.identifier == rhs.identifier }
    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
    public var description: String { identifier }

    /// Seconds east of UTC in effect at `instant`.
    public func offset(at instant: Instant) -> Int {
        Int(offset(atSeconds: instant.seconds))
    }

    /// The wall-clock time at `instant` in this zone (milliseconds dropped).
    public func localDateTime(at instant: Instant) -> LocalDateTime {
        LocalDateTime(secondsSinceEpoch: wallSeconds(atSeconds: instant.seconds))
    }

    /// The instant a wall-clock time means in this zone, by the gap and overlap rule above.
    public func instant(for local: LocalDateTime) -> Instant {
        Instant(seconds: instantSeconds(forWall: local.secondsSinceEpoch))
    }

    func offset(atSeconds seconds: Int64) -> Int64 {
        if seconds >= table.lower && seconds < table.upper { return table.offset(atSeconds: seconds) }
        return table.farOffset(atSeconds: seconds)
    }

    /// Wall-clock seconds (civil time read as UTC) at instant `seconds`.
    func wallSeconds(atSeconds seconds: Int64) -> Int64 { seconds + offset(atSeconds: seconds) }

    /// The instant (seconds) of wall-clock `wall` seconds.
    func instantSeconds(forWall wall: Int64) -> Int64 {
        table.instant(forWall: wall) ?? instantSecondsByBracketing(forWall: wall)
    }

    /// The gap and overlap rule from the offsets a day either side of the wall time, which bracket any single
    /// transition near it: the answer outside the table's years (and the method before the table existed).
    func instantSecondsByBracketing(forWall wall: Int64) -> Int64 {
        let before = offset(atSeconds: wall - 86_400)
        let after = offset(atSeconds: wall + 86_400)
        let early = wall - before
        let late = wall - after
        let earlyValid = offset(atSeconds: early) == before
        let lateValid = offset(atSeconds: late) == after
        switch (earlyValid, lateValid) {
        case (true, true): return min(early, late)
        case (true, false): return early
        case (false, true): return late
        // In a gap: read with the offset from before the transition, which lands after it,
        // as far past the transition as the wall time was past the start of the gap.
        case (false, false): return early
        }
    }

    /// The longest spring-forward gap (seconds) of a transition at an instant in `from...to`, 0 when none.
    ///
    /// Outside the table's years the transitions in the window are asked of the table's far rule (a
    /// window is a couple of days, so there are one or two of them at most). Assuming the worst instead,
    /// a day, would make every search there convert a day's worth of candidates the slow way.
    func largestGap(from: Int64, to: Int64) -> Int64 {
        if from >= table.lower && to < table.upper { return table.largestGap(from: from, to: to) }
        return table.farLargestGap(from: from, to: to)
    }

    /// What turning wall time `wall` into an instant costs, in candidate date-times (see `Budget`): a binary
    /// search within the table's years, four far-rule offset queries outside them.
    func conversionCost(forWall wall: Int64) -> Int {
        table.covers(wall: wall) ? Budget.Cost.day : Budget.Cost.foundationConversion
    }

    /// The IANA areas and the top-level names of the IANA database (including its `backward` links),
    /// without `Factory` and `localtime`, which are not zones.
    private static let areas: Set<Substring> = [
        "Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian",
        "Pacific", "Etc", "Brazil", "Canada", "Chile", "Mexico", "US",
    ]
    private static let topLevel: Set<String> = [
        "CET", "CST6CDT", "Cuba", "EET", "EST", "EST5EDT", "Egypt", "Eire", "GB", "GB-Eire", "GMT", "GMT+0",
        "GMT-0", "GMT0", "Greenwich", "HST", "Hongkong", "Iceland", "Iran", "Israel", "Jamaica", "Japan",
        "Kwajalein", "Libya", "MET", "MST", "MST7MDT", "NZ", "NZ-CHAT", "Navajo", "PRC", "PST8PDT", "Poland",
        "Portugal", "ROC", "ROK", "Singapore", "Turkey", "UCT", "UTC", "Universal", "W-SU", "WET", "Zulu",
    ]

    /// Whether `name` is spelled as the IANA database spells its zones: a top-level name, or an area
    /// and one or more components separated by single slashes, each of ASCII letters, digits, `_`, `-`
    /// and `+`, not starting with `-` (so no empty, `.` or `..` component, and no leading, trailing or
    /// repeated slash). Only such a name is looked up: `Europe//Paris` names a file of the zone
    /// directory, but nothing in a database without one (Foundation's, another machine's).
    static func isIANAName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 64 else { return false }
        if topLevel.contains(name) { return true }
        let components = name.split(separator: "/", omittingEmptySubsequences: false)
        guard components.count >= 2, areas.contains(components[0]), name != "Etc/Unknown" else { return false }
        return components.allSatisfy { component in
            component.first.map { $0 != "-" } ?? false
                && component.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_-+".contains($0)) }
        }
    }

    /// `name` when it is an IANA name; else the name its empty components dropped make, when that is
    /// one (`Europe//Paris` is `Europe/Paris`: the same file); else nil.
    static func canonicalName(_ name: String) -> String? {
        if isIANAName(name) { return name }
        let joined = name.split(separator: "/").joined(separator: "/")
        return isIANAName(joined) ? joined : nil
    }
}
