/// Arithmetic on numbers a worker's message chooses: clamped to `Int64`'s range rather than
/// trapping, since Swift's `+` and `-` stop the process on overflow and a status or stats message
/// is anyone's who may publish on the workers' topics.
extension Int64 {
    /// `self + other`, or `Int64.max` / `Int64.min` when that overflows.
    func saturatingAdd(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        guard overflow else { return sum }
        return other > 0 ? .max : .min
    }

    /// `self - other`, or `Int64.max` / `Int64.min` when that overflows.
    func saturatingSubtract(_ other: Int64) -> Int64 {
        let (difference, overflow) = subtractingReportingOverflow(other)
        guard overflow else { return difference }
        return other < 0 ? .max : .min
    }
}

extension Sequence<Int64> {
    /// The sum, each step ``Swift/Int64/saturatingAdd(_:)``.
    func saturatingSum() -> Int64 {
        reduce(0) { $0.saturatingAdd($1) }
    }
}
