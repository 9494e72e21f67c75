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
