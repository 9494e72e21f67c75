/// The calendar unit of Apple's `repeatInterval`: occurrence k is the first one plus k units.
public enum RepeatUnit: String, Sendable, CaseIterable {
    case year, quarter, month, weekOfYear, day, weekday, hour, minute, second

    /// A unit from its protocol name; `week` is an alias of `weekOfYear`. `none` is not a unit (the caller
    /// handles a non-repeating notification), so it gives nil like any other unknown name.
    public init?(parsing text: String) {
        if text == "week" {
            self = .weekOfYear
        } else if let unit = RepeatUnit(rawValue: text) {
            self = unit
        } else {
            return nil
        }
    }

    /// The unit's length in seconds when it is elapsed time (`hour`, `minute`, `second`), else nil.
    var elapsedSeconds: Int64? {
        switch self {
        case .hour: return 3600
        case .minute: return 60
        case .second: return 1
        default: return nil
        }
    }
}
