import ChimeCore

extension JSON {
    /// A number as a Double (integers too).
    var numberValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// A value shown in a line of text: strings without quotes, numbers as they are, the rest as JSON.
    var plainText: String {
        switch self {
        case .string(let s): return s
        case .int(let i): return String(i)
        default: return text
        }
    }
}
