import Foundation
import Synchronization

/// A zone's UTC offsets between 1800 and 2200, read once from Foundation (ICU) and kept as sorted arrays.
///
/// Foundation answers an offset query in about 140 ns and turning a wall-clock time into an instant takes
/// four of them; recurrence expansion does that for every candidate. The table answers both with one
/// binary search. It is immutable after construction, so it is shared between threads without a lock;
/// only the cache that hands tables out is behind a `Mutex`. Outside its years the zone falls back to
/// Foundation.
final class ZoneTable: Sendable {
    /// Instants (seconds) at which the offset changes, ascending.
    let transitions: [Int64]
    /// `offsets[i]` is in effect before `transitions[i]`; the last one after the last transition.
    let offsets: [Int32]
    /// `transitions[i]` read on the wall clock with the larger of the two offsets around it: the first wall
    /// time that transition `i` no longer affects. A wall time `w` uses `offsets[j]` where `j` is the number
    /// of entries `<= w`. This is exactly Python `zoneinfo`'s rule for `fold=0`, which is RFC 5545's: a time
    /// in a gap is read with the offset from before the gap (so it moves forward by the gap's length), and
    /// a time that happens twice with the offset from before the overlap (its first instant).
    let wallBoundaries: [Int64]
    /// Instants in `lower..<upper` are answered from the table.
    let lower: Int64
    let upper: Int64

    static let lowerBound: Int64 = -5_364_662_400  // 1800-01-01T00:00:00Z
    static let upperBound: Int64 = 7_258_118_400  // 2200-01-01T00:00:00Z

    init(timeZone: TimeZone) {
        lower = Self.lowerBound
        upper = Self.upperBound
        var transitions: [Int64] = []
        var offsets: [Int32] = [Int32(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(lower))))]
        var cursor = Date(timeIntervalSince1970: Double(lower))
        while let next = timeZone.nextDaylightSavingTimeTransition(after: cursor),
            next.timeIntervalSince1970 < Double(upper), next > cursor
        {
            let seconds = Int64(next.timeIntervalSince1970.rounded(.down))
            let offset = Int32(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds))))
            if offset != offsets[offsets.count - 1] {
                transitions.append(seconds)
                offsets.append(offset)
            }
            cursor = next
        }
        self.transitions = transitions
        self.offsets = offsets
        var walls: [Int64] = []
        walls.reserveCapacity(transitions.count)
        for (i, t) in transitions.enumerated() { walls.append(t + Int64(max(offsets[i], offsets[i + 1]))) }
        self.wallBoundaries = walls
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

    private static let cache = Mutex<[String: ZoneTable]>([:])

    /// The table for `identifier`, built on first use and then shared.
    static func table(for identifier: String, timeZone: TimeZone) -> ZoneTable {
        if let table = cache.withLock({ $0[identifier] }) { return table }
        let built = ZoneTable(timeZone: timeZone)
        return cache.withLock { tables in
            if let existing = tables[identifier] { return existing }
            tables[identifier] = built
            return built
        }
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
