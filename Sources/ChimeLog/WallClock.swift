import ChimeTime
import Foundation

/// The wall clock, in whole milliseconds (truncated).
public func wallClock() -> Instant {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Instant(milliseconds: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
}
