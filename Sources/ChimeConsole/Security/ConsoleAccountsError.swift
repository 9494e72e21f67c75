/// An error from the console's accounts: reading the accounts file, or changing the accounts.
///
/// One line for people, compiler-style: `FILE:LINE: message`, with the fix when there is one
/// (`chmod 600 FILE`). It never quotes a password or a hash; it quotes a name only with its
/// control characters escaped.
///
/// Two errors are equal when their codes are equal, so tests can write
/// `#expect(throws: ConsoleAccountsError(.insecureFile))`.
public struct ConsoleAccountsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of thing went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case unreadable
            case insecureFile
            case tooLarge
            case malformed
            case duplicateName
            case tooManyAccounts
            case unknownAccount
            case invalidPassword
            case costlyHash
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// The file does not exist, is not a regular file, or cannot be read.
        public static let unreadable = Code(.unreadable)
        /// The file may be read or written by its group or by others (mode & 0o077 is not 0).
        public static let insecureFile = Code(.insecureFile)
        /// The file is larger than ``ConsoleAccounts/maximumFileBytes``.
        public static let tooLarge = Code(.tooLarge)
        /// A line is not `name:role:hash`, or one of its fields is invalid, or the text is not UTF-8.
        public static let malformed = Code(.malformed)
        /// A name that is there already.
        public static let duplicateName = Code(.duplicateName)
        /// More than ``ConsoleAccounts/maximumAccounts`` accounts.
        public static let tooManyAccounts = Code(.tooManyAccounts)
        /// Removing a name that has no account.
        public static let unknownAccount = Code(.unknownAccount)
        /// A password that cannot be hashed (empty, too long, with a NUL).
        public static let invalidPassword = Code(.invalidPassword)
        /// A well-formed hash that costs more to check than the console allows
        /// (``PasswordHash/isTooCostly(_:)``): each sign-in would take the server seconds.
        public static let costlyHash = Code(.costlyHash)

        public var description: String {
            switch kind {
            case .unreadable: "unreadable"
            case .insecureFile: "insecureFile"
            case .tooLarge: "tooLarge"
            case .malformed: "malformed"
            case .duplicateName: "duplicateName"
            case .tooManyAccounts: "tooManyAccounts"
            case .unknownAccount: "unknownAccount"
            case .invalidPassword: "invalidPassword"
            case .costlyHash: "costlyHash"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence for people, without the file and line.
    public let message: String
    /// The accounts file, when the error is about one.
    public var path: String?
    /// The line of the file or text (from 1), when the error is about one.
    public var line: Int?

    /// Creates an error; `message` defaults to the code's name.
    public init(_ code: Code, _ message: String? = nil, path: String? = nil, line: Int? = nil) {
        self.code = code
        self.message = message ?? code.description
        self.path = path
        self.line = line
    }

    public static func == (lhs: ConsoleAccountsError, rhs: ConsoleAccountsError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    /// `FILE:LINE: message`, each part when it is known.
    public var description: String {
        var where_ = path ?? ""
        if let line { where_ += where_.isEmpty ? "line \(line)" : ":\(line)" }
        return where_.isEmpty ? message : "\(where_): \(message)"
    }
}
