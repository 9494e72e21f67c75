/// The calendar unit of Apple's `repeatInterval`: occurrence k is the first one plus k units.
public enum RepeatUnit: String, Sendable, CaseIterable {
    case year, quarter, month, weekOfYear, day, weekday, hour, minute, second

    /// A unit from its protocol name; `week` is an alias of `weekOfYear`, and Apple's constants
    /// name the units too (`NSCalendarUnitDay`, `kCFCalendarUnitDay`, the older `NSDayCalendarUnit`;
    /// `...Week...` is `weekOfYear`). `none` is not a unit (the caller handles a non-repeating
    /// notification), so it gives nil like any other unknown name.
    public init?(parsing text: String) {
        var name = Substring(text)
        for prefix in ["NSCalendarUnit", "kCFCalendarUnit"] where name.hasPrefix(prefix) {
            name = name.dropFirst(prefix.count)
        }
        if name.hasPrefix("NS") && name.hasSuffix("CalendarUnit") && name.count > 14 {
            name = name.dropFirst(2).dropLast(12)
        }
        // Apple's names are capitalised (`Day`, `WeekOfYear`); the protocol's are not.
        if name.count < text.count, let first = name.first {
            name = first.lowercased() + name.dropFirst()
        }
        if name == "week" {
            self = .weekOfYear
        } else if let unit = RepeatUnit(rawValue: String(name)) {
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
