/// A failure of a helper of the harness or the tests, with a sentence saying what to do about it.
public struct HarnessError: Error, CustomStringConvertible, Sendable {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}
