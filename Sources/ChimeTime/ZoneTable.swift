import Foundation

/// A zone's UTC offsets between 1800 and 2200, kept as sorted arrays: read from a TZif file (the
/// machine's zone database, ``ZoneDatabase``) or, for a zone it does not have, from Foundation (ICU).
///
/// Foundation answers an offset query in about 140 ns and turning a wall-clock time into an instant takes
/// four of them; recurrence expansion does that for every candidate. The table answers both with one
/// binary search. It is immutable after construction, so it is shared between threads without a lock;
/// only the database that hands tables out is behind a `Mutex`. Outside its years the zone asks ``far``.
final class ZoneTable: Sendable {
    /// Instants (seconds) at which the offset changes, ascending.
    let transitions: [Int64]
    /// `offsets[i]` is in effect before `transitions[i]`; the last one after the last transition.
    let offsets: [Int32]
    /// `transitions[i]` read on the wall clock with the larger of the two offsets around it: the first wall
    /// time that transition `i` no longer affects. A wall time `w` uses `offsets[j]` where `j` is the number
    /// of entries `<= w`. This is exactly Python `zoneinfo`'s rule for `fold=0`, which is RFC 5545's: a time
    /// in a gap is read with the offset from before the gap (so it moves forward by the length of the gap),
    /// and a time that happens twice with the offset from before the overlap (its first instant).
    let wallBoundaries: [Int64]
    /// Instants in `lower..<upper` are answered from the table.
    let lower: Int64
    let upper: Int64
    /// Where the offsets outside `lower..<upper` come from.
    let far: Far
    /// FNV-1a (64 bits) of the offset at `lower` and every transition and offset after it: equal for
    /// equal tables, whatever their source, and the same in every process (unlike `Hasher`).
    let fingerprint: UInt64

    enum Far: Sendable {
        /// Foundation's zone, for every instant.
        case foundation(TimeZone)
        /// A TZif file's data: before 1800 the first offset, after 2200 its footer's rule (or the
        /// last offset when it has none).
        case rule(PosixTimeZone?)
    }

    static let lowerBound: Int64 = -5_364_662_400  // 1800-01-01T00:00:00Z
    static let upperBound: Int64 = 7_258_118_400  // 2200-01-01T00:00:00Z

    /// What a zone no database resolves computes with (``Zone/isResolved``): UTC's offsets under a
    /// fingerprint no table of rules has (0), so that rules found for it later differ from it.
    static let unresolved = ZoneTable(initialOffset: 0, changes: [], far: .rule(nil), fingerprint: 0)

    /// A table from the offset in effect at 1800 and the changes after it (ascending; changes to the
    /// same offset and all but the last of changes at one instant are dropped).
    /// - Parameter fingerprint: set only for ``unresolved``; computed from the offsets otherwise.
    init(initialOffset: Int32, changes: [(at: Int64, offset: Int32)], far: Far, fingerprint: UInt64? = nil) {
        lower = Self.lowerBound
        upper = Self.upperBound
        self.far = far
        var transitions: [Int64] = []
        var offsets: [Int32] = [initialOffset]
        var i = 0
        while i < changes.count {
            var change = changes[i]
            while i + 1 < changes.count, changes[i + 1].at == change.at {
                i += 1
                change = changes[i]
            }
            i += 1
            guard change.at > lower, change.at < upper else { continue }
            if transitions.last.map({ change.at <= $0 }) ?? false { continue }
            if change.offset != offsets[offsets.count - 1] {
                transitions.append(change.at)
                offsets.append(change.offset)
            }
        }
        self.transitions = transitions
        self.offsets = offsets
        var walls: [Int64] = []
        walls.reserveCapacity(transitions.count)
        for (i, t) in transitions.enumerated() { walls.append(t + Int64(max(offsets[i], offsets[i + 1]))) }
        self.wallBoundaries = walls
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ value: Int64) {
            for shift in stride(from: 0, to: 64, by: 8) {
                hash = (hash ^ (UInt64(truncatingIfNeeded: value >> Int64(shift)) & 0xFF)) &* 0x100_0000_01b3
            }
        }
        mix(Int64(offsets[0]))
        for (t, o) in zip(transitions, offsets.dropFirst()) {
            mix(t)
            mix(Int64(o))
        }
        self.fingerprint = fingerprint ?? hash
    }

    /// The table of Foundation's zone (ICU's data).
    convenience init(timeZone: TimeZone) {
        let lower = Self.lowerBound
        var changes: [(at: Int64, offset: Int32)] = []
        var cursor = Date(timeIntervalSince1970: Double(lower))
        while let next = timeZone.nextDaylightSavingTimeTransition(after: cursor),
            next.timeIntervalSince1970 < Double(Self.upperBound), next > cursor
        {
            let seconds = Int64(next.timeIntervalSince1970.rounded(.down))
            changes.append((seconds, Int32(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds))))))
            cursor = next
        }
        self.init(
            initialOffset: Int32(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(lower)))),
            changes: changes,
            far: .foundation(timeZone)
        )
    }

    /// The table of a TZif file: its transitions, then its footer's rule expanded up to 2200.
    convenience init(tzif: TZifFile) {
        let lower = Self.lowerBound
        let upper = Self.upperBound
        let before = upperIndex(tzif.transitions, lower)
        var initial: Int32
        if before > 0 {
            initial = tzif.types[tzif.typeIndices[before - 1]].utcOffset
        } else if tzif.transitions.isEmpty, let rule = tzif.rule {
            initial = rule.offset(atSeconds: lower)
        } else {
            initial = tzif.initialType.utcOffset
        }
        var changes: [(at: Int64, offset: Int32)] = []
        for i in before..<tzif.transitions.count where tzif.transitions[i] < upper {
            changes.append((tzif.transitions[i], tzif.types[tzif.typeIndices[i]].utcOffset))
        }
        let last = tzif.transitions.last ?? lower
        if let rule = tzif.rule, rule.daylight != nil, last < upper {
            // The rule governs from the last transition on; a year before its own covers a transition
            // time past midnight of December 31.
            let first = civilFromDays(floorDiv(max(last, lower), 86_400)).year - 1
            for year in first...2200 {
                for t in rule.transitions(inYear: year) where t.at > last && t.at < upper { changes.append(t) }
            }
        } else if let rule = tzif.rule, rule.daylight == nil, last < upper, tzif.transitions.last != nil,
            Int32(rule.standardOffset) != changes.last?.offset ?? initial
        {
            // A footer whose offset differs from the last transition's: in effect right after it
            // (RFC 8536 requires them to agree; be lenient with a file that does not).
            changes.append((last + 1, Int32(rule.standardOffset)))
        }
        self.init(initialOffset: initial, changes: changes, far: .rule(tzif.rule))
    }

    /// The offset at any instant outside the table's years.
    func farOffset(atSeconds seconds: Int64) -> Int64 {
        switch far {
        case .foundation(let tz):
            return Int64(tz.secondsFromGMT(for: Date(timeIntervalSince1970: TimeInterval(seconds))))
        case .rule(let rule):
            if seconds < lower { return Int64(offsets[0]) }
            return Int64(rule?.offset(atSeconds: seconds) ?? offsets[offsets.count - 1])
        }
    }

    /// The longest spring-forward gap of a transition at an instant in `from...to` (a window of a few
    /// days), outside the table's years.
    func farLargestGap(from: Int64, to: Int64) -> Int64 {
        var gap: Int64 = 0
        switch far {
        case .foundation(let timeZone):
            var cursor = Date(timeIntervalSince1970: TimeInterval(from - 1))
            while let next = timeZone.nextDaylightSavingTimeTransition(after: cursor), next > cursor,
                next.timeIntervalSince1970 <= TimeInterval(to)
            {
                let seconds = Int64(next.timeIntervalSince1970.rounded(.down))
                gap = max(gap, farOffset(atSeconds: seconds) - farOffset(atSeconds: seconds - 1))
                cursor = next
            }
        case .rule(let rule):
            guard let rule, from >= lower else { return 0 }
            let first = civilFromDays(floorDiv(from, 86_400)).year - 1
            let last = civilFromDays(floorDiv(to, 86_400)).year + 1
            for year in first...last {
                for t in rule.transitions(inYear: year) where t.at >= from && t.at <= to {
                    gap = max(gap, Int64(t.offset) - farOffset(atSeconds: t.at - 1))
                }
            }
        }
        return gap
    }

    /// The offset at instant `seconds`, which must be in `lower..<upper`.
    @inline(__always)
    func offset(atSeconds seconds: Int64) -> Int64 {
        Int64(offsets[upperIndex(transitions, seconds)])
    }

    /// The instant (seconds) of wall-clock `wall` seconds by the gap and overlap rule, or nil when `wall` is
    /// too close to the table's ends to be answered from it.
    @inline(__always)
    func instant(forWall wall: Int64) -> Int64? {
        guard covers(wall: wall) else { return nil }
        return wall - Int64(offsets[upperIndex(wallBoundaries, wall)])
    }

    /// Whether ``instant(forWall:)`` answers `wall` from the table.
    @inline(__always)
    func covers(wall: Int64) -> Bool { wall > lower + 2 * 86_400 && wall < upper - 2 * 86_400 }

    /// The largest forward jump of the offset (the longest gap) among transitions in `from...to`, or 0.
    func largestGap(from: Int64, to: Int64) -> Int64 {
        var i = upperIndex(transitions, from - 1)
        var gap: Int64 = 0
        while i < transitions.count, transitions[i] <= to {
            gap = max(gap, Int64(offsets[i + 1]) - Int64(offsets[i]))
            i += 1
        }
        return gap
    }
}

/// The number of elements of the ascending `array` that are `<= value` (Python's `bisect_right`).
@inline(__always)
func upperIndex(_ array: [Int64], _ value: Int64) -> Int {
    var low = 0
    var high = array.count
    while low < high {
        let mid = (low + high) >> 1
        if array[mid] <= value { low = mid + 1 } else { high = mid }
    }
    return low
}
