/// When `Journal.commit()` makes appended records durable. In the store layer because the worker's
/// configuration (`--fsync`) names it.
public enum FsyncPolicy: Hashable, Sendable, CustomStringConvertible {
    /// `fdatasync` on every commit that follows an append: an acknowledged command is on disk.
    case always
    /// `fdatasync` on a commit at least this long after the previous sync: a crash may lose
    /// up to that much acknowledged work.
    case interval(milliseconds: Int)
    /// Never sync; the kernel writes back when it likes. For tests and benchmarks.
    case none

    /// Parses `always`, `interval:MS` (MS ≥ 1) or `none`, the forms of `--fsync`.
    public init?(parsing text: String) {
        switch text {
        case "always": self = .always
        case "none": self = .none
        default:
            guard text.hasPrefix("interval:"), let milliseconds = Int(text.dropFirst("interval:".count)),
                milliseconds > 0
            else { return nil }
            self = .interval(milliseconds: milliseconds)
        }
    }

    public var description: String {
        switch self {
        case .always: "always"
        case .interval(let milliseconds): "interval:\(milliseconds)"
        case .none: "none"
        }
    }
}
