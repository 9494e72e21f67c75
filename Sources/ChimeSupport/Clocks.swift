import ChimeCore
import Foundation

/// The wall clock, in whole milliseconds (truncated).
public func wallClock() -> Instant {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Instant(milliseconds: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
}

/// A duration in seconds, with its fraction.
public func seconds(_ d: Duration) -> Double {
    Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
}

/// A duration in whole milliseconds (truncated towards zero).
public func milliseconds(_ d: Duration) -> Int64 {
    d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
}

/// A duration in whole microseconds (truncated towards zero).
public func microseconds(_ d: Duration) -> Int64 {
    d.components.seconds * 1_000_000 + d.components.attoseconds / 1_000_000_000_000
}
