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

/// A cap on the work one search may do, so that no rule can make a call spin.
///
/// One step is roughly one candidate period or one day examined (a few hundred nanoseconds at most).
struct Budget {
    /// Steps allowed for one `first`/`next` call: tens of milliseconds at worst in release builds, and far
    /// more than a rule that fires needs once its never-firing cases have been proven at construction
    /// (February 29 on a Monday, searched day by day, takes about a thousand).
    static let perCall = 250_000
    /// Steps allowed for measuring the spacing over the first 1000 occurrences.
    static let perSpacing = 1_000_000
    /// Steps allowed, once per rule, for proving that it never fires again.
    static let perProof = 1_000_000

    var remaining: Int

    init(_ steps: Int) { remaining = steps }

    @inline(__always)
    mutating func spend(_ steps: Int = 1) throws(RecurrenceError) {
        remaining -= steps
        if remaining < 0 {
            throw RecurrenceError(.searchLimit, "gave up looking for the next occurrence (search budget used up)")
        }
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
