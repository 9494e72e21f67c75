/// An error from ChimePassword: what kind of thing went wrong, a sentence for people, and the
/// libcrypt function that failed when one did.
///
/// The message never carries the password, nor anything about it beyond the rule it broke.
///
/// Two errors are equal when their codes are equal, so tests can write
/// `#expect(throws: PasswordError(.tooLong))`.
public struct PasswordError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of thing went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case empty
            case tooLong
            case containsNUL
            case libraryFailure
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// The password is empty.
        public static let empty = Code(.empty)
        /// The password is longer than ``PasswordHash/maximumPasswordBytes`` bytes of UTF-8.
        public static let tooLong = Code(.tooLong)
        /// The password contains a NUL character, which a C string cannot carry: libcrypt would
        /// hash only what comes before it.
        public static let containsNUL = Code(.containsNUL)
        /// libcrypt refused to make a salt or a hash from checked inputs (no yescrypt in this
        /// build of it, out of memory, no entropy): the message carries `errno`'s text.
        public static let libraryFailure = Code(.libraryFailure)

        public var description: String {
            switch kind {
            case .empty: "empty"
            case .tooLong: "tooLong"
            case .containsNUL: "containsNUL"
            case .libraryFailure: "libraryFailure"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence for people.
    public let message: String
    /// The libcrypt function that failed, such as `crypt_gensalt_rn`; nil when the password was
    /// refused before libcrypt was called.
    public let function: String?

    /// Creates an error; `message` defaults to the code's name.
    public init(_ code: Code, _ message: String? = nil, function: String? = nil) {
        self.code = code
        self.message = message ?? code.description
        self.function = function
    }

    public static func == (lhs: PasswordError, rhs: PasswordError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    public var description: String {
        let prefix = function.map { "\($0): " } ?? ""
        return "\(prefix)\(message) [\(code)]"
    }
}
