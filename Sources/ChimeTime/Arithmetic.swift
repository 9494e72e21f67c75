/// Floor division and remainder (towards negative infinity), for day and period numbers before the epoch.
@inline(__always)
func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}

@inline(__always)
func floorMod(_ a: Int64, _ b: Int64) -> Int64 { a - floorDiv(a, b) * b }

@inline(__always)
func ceilDiv(_ a: Int64, _ b: Int64) -> Int64 { -floorDiv(-a, b) }

func gcd(_ a: Int64, _ b: Int64) -> Int64 {
    var (x, y) = (abs(a), abs(b))
    while y != 0 { (x, y) = (y, x % y) }
    return x
}

/// A cap on the work one search may do, counted in candidates examined, so that no rule can make a call spin.
///
/// The unit is one candidate date-time generated from a day or a sub-daily period by the time parts (BYHOUR,
/// BYMINUTE, BYSECOND, the offsets of an HOURLY or MINUTELY period) and kept or dropped by BYSETPOS. The
/// other work is counted in that unit by what it costs next to it (``Cost``): a date tested against the
/// day-level parts (BYMONTH, BYMONTHDAY, BYYEARDAY, BYWEEKNO, BYDAY) or skipped over, a period set up (its
/// day lists, its time test), a wall-clock time turned into an instant. Measured in a release build
/// (`chime-bench recurrence --hostile`), a search that uses a whole budget spends 1 to 7 ns per unit, so a
/// budget of N units is at most about N × 9 ns of CPU. Work is paid for before it is done, so ``used`` never
/// exceeds ``limit``: the counter is the work done, which the tests assert on.
struct Budget {
    /// The cost of each kind of work, in candidate date-times.
    enum Cost {
        /// One date-time generated (a few nanoseconds).
        static let candidate = 1
        /// One date tested against the day-level parts, or one step of a skip over dates or times that
        /// cannot match (some tens of nanoseconds: a civil-date conversion and a few bit tests).
        static let day = 8
        /// One period set up: a sub-daily period's date and time test, a YEARLY or MONTHLY period's lists of
        /// days to try, an interval occurrence's zone conversion (up to about 150 nanoseconds).
        static let period = 32
        /// One candidate's wall-clock time turned into an instant outside the zone table's years, through
        /// Foundation (about 400 nanoseconds; within them it costs as much as a ``day``).
        static let foundationConversion = 96
    }

    /// What the search is for, which names it in the error when the budget runs out.
    enum Purpose {
        case nextOccurrence
        case spacing
        case proof
    }

    /// Candidates allowed for one `first`/`next` call (``Recurrence/maximumCandidatesPerSearch``).
    static let perCall = Recurrence.maximumCandidatesPerSearch
    /// Candidates allowed for measuring the spacing of the first occurrences
    /// (``Recurrence/maximumCandidatesPerSpacingCheck``).
    static let perSpacing = Recurrence.maximumCandidatesPerSpacingCheck
    /// Candidates allowed, once per rule, for proving that it never fires again
    /// (``Recurrence/maximumCandidatesPerProof``).
    static let perProof = Recurrence.maximumCandidatesPerProof

    let limit: Int
    let purpose: Purpose
    /// Candidates examined so far; at most ``limit``.
    private(set) var used = 0

    init(_ limit: Int, for purpose: Purpose = .nextOccurrence) {
        self.limit = limit
        self.purpose = purpose
    }

    var remaining: Int { limit - used }

    @inline(__always)
    mutating func spend(_ candidates: Int = 1) throws(RecurrenceError) {
        guard candidates <= limit - used else { throw exhausted() }
        used += candidates
    }

    private func exhausted() -> RecurrenceError {
        let what: String
        switch purpose {
        case .nextOccurrence: what = "to find the next occurrence"
        case .spacing: what = "to check the spacing of its first \(Recurrence.spacingOccurrences) occurrences"
        case .proof: what = "to prove that it never fires"
        }
        return RecurrenceError(
            .searchLimit,
            "needs more than \(limit) candidate date-times \(what); simplify the rule"
        )
    }
}

/// Wall-clock seconds of 9999-12-31T23:59:59, the last second Chime schedules.
let lastWallSecond: Int64 = 253_402_300_799
let lastDay: Int64 = 2_932_896  // 9999-12-31

/// The lowest set bit of `mask` at or above `from`, if any.
@inline(__always)
func nextSetBit(_ mask: UInt64, from: Int) -> Int? {
    guard from < 64 else { return nil }
    let rest = mask & (~UInt64(0) << UInt64(from))
    return rest == 0 ? nil : rest.trailingZeroBitCount
}
