/// Why a recurrence could not be parsed, built or searched.
///
/// Equality is on ``code`` only, so a test can compare against `RecurrenceError(.invalidRule)` without
/// repeating the message.
public struct RecurrenceError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure; the set may grow, so switch over it with a `default`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case invalidRule
            case invalidCombination
            case searchLimit
        }

        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The RRULE text is malformed or one of its parts is out of range or not allowed with its `FREQ`.
        public static let invalidRule = Code(.invalidRule)
        /// The arguments do not go together (a rule with a separate `count`, `until` before it starts, ...).
        public static let invalidCombination = Code(.invalidCombination)
        /// The bounded search gave up before it could say whether there is a next occurrence.
        public static let searchLimit = Code(.searchLimit)

        public var description: String {
            switch value {
            case .invalidRule: return "invalidRule"
            case .invalidCombination: return "invalidCombination"
            case .searchLimit: return "searchLimit"
            }
        }

        /// The code in words, for an error without a message.
        var sentence: String {
            switch value {
            case .invalidRule: return "invalid rule"
            case .invalidCombination: return "these do not go together"
            case .searchLimit: return "the search for the next occurrence gave up"
            }
        }
    }

    public let code: Code
    /// A sentence for a human, naming the offending part (`BYMONTHDAY: expected integers in -31...31 without 0, got 32`).
    public let message: String

    public init(_ code: Code, _ message: String = "") {
        self.code = code
        self.message = message
    }

    public static func == (lhs: RecurrenceError, rhs: RecurrenceError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// The message alone, as users see it (a CLI flag's or a reply's): the code is for programs.
    public var description: String { message.isEmpty ? code.sentence : message }

    static func rule(_ message: String) -> RecurrenceError { RecurrenceError(.invalidRule, message) }
}
