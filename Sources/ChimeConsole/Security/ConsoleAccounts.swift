import ChimePassword

#if canImport(Glibc)
import Glibc
#endif

/// What an account of the console may do.
public enum ConsoleRole: String, Sendable, Hashable, CaseIterable {
    /// Support staff: may look at devices, notifications and deliveries, and change nothing.
    case viewer
    /// Operators: may also act on notifications (``ConsoleAction``).
    case `operator`

    /// Whether this role may take `action`.
    public func may(_ action: ConsoleAction) -> Bool {
        switch self {
        case .viewer: false
        case .operator: true
        }
    }
}

/// The state-changing things the console does to a device's notifications, each the protocol
/// command of the same name and the `action` field of the forms that post to
/// ``ConsolePaths/deviceAction(_:)``: only an ``ConsoleRole/operator`` may.
public enum ConsoleAction: String, Sendable, Hashable, CaseIterable {
    case pause
    case resume
    case snooze
    case cancel
    /// One notification's title, body or sound, through `update` (PROTOCOL.md section 3.10).
    case edit

    /// The actions on the notifications ticked on a device's page; `edit` has a page of its own.
    public static let onSelection: [ConsoleAction] = [.pause, .resume, .snooze, .cancel]
}

/// One account of the console: a name and a role. Its password hash stays inside
/// ``ConsoleAccounts``.
public struct ConsoleAccount: Sendable, Hashable {
    /// The name it signs in with: 1 to 64 of `A-Z a-z 0-9 _ . @ -`.
    public let name: String
    /// What it may do.
    public let role: ConsoleRole
    /// Its crypt(5) hash, or a locked account's `!…` or `*…`.
    let passwordHash: String
}

/// The console's accounts, as its accounts file holds them: one account a line, `name:role:hash`.
///
/// ```text
/// # chime console accounts: name:role:hash
/// alice:operator:$y$j9T$…$…
/// bob:viewer:$2b$12$…
/// carol:viewer:!$y$j9T$…$…
/// ```
///
/// A name is 1 to 64 of `A-Z a-z 0-9 _ . @ -`; a role is `viewer` or `operator`; a hash is a
/// yescrypt or bcrypt hash as ``PasswordHash`` checks them, or starts with `!` or `*` for an
/// account that is locked (it cannot sign in; `!` before a hash keeps it for unlocking). Lines
/// whose first non-blank character is `#`, and blank lines, are kept as they are when the text is
/// written again (``text``). At most ``maximumAccounts`` accounts in at most ``maximumFileBytes``.
///
/// The value is immutable; the CLI changes it with ``adding(name:role:password:)`` and
/// ``removing(name:)`` and writes ``text`` back.
public struct ConsoleAccounts: Sendable {
    /// The most accounts a file may hold.
    public static let maximumAccounts = 10_000
    /// The largest accounts file, in bytes: 1 MiB.
    public static let maximumFileBytes = 1 << 20
    /// The longest name, in characters (all ASCII).
    public static let maximumNameLength = 64
    /// The shortest password ``adding(name:role:password:)`` takes, in characters: a few words
    /// make one (`correct horse battery staple`).
    public static let minimumPasswordLength = 12

    /// A line of the file: kept text (a comment or a blank line), or an account by its name.
    private enum Line: Sendable {
        case kept(String)
        case account(String)
    }

    private var lines: [Line] = []
    private var byName: [String: ConsoleAccount] = [:]

    /// No accounts.
    public init() {
        Self.prepareDummyHash()
    }

    /// Reads accounts from the text of an accounts file.
    /// - Throws: ``ConsoleAccountsError`` `.malformed`, `.costlyHash` (``PasswordHash/isTooCostly(_:)``),
    ///   `.duplicateName` or `.tooManyAccounts` with the line, `.tooLarge` for text over
    ///   ``maximumFileBytes``.
    public init(parsing text: String) throws(ConsoleAccountsError) {
        try self.init(bytes: Array(text.utf8), path: nil)
    }

    /// Reads the accounts file at `path`.
    ///
    /// The file must be a regular file that its group and others may neither read nor write
    /// (`mode & 0o077 == 0`, as `chmod 600` leaves it): the hashes in it are worth guessing at
    /// offline. It is checked on the open file (`fstat`), so it cannot be swapped between the check
    /// and the read.
    /// - Throws: ``ConsoleAccountsError`` `.unreadable`, `.insecureFile` (the message says
    ///   `chmod 600 FILE`), `.tooLarge`, or one of ``init(parsing:)``'s, with `path` set.
    public static func load(path: String) throws(ConsoleAccountsError) -> ConsoleAccounts {
        // O_NONBLOCK: a FIFO put in the file's place must not hang the open; it is refused below.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard fd >= 0 else {
            throw ConsoleAccountsError(.unreadable, "cannot open the accounts file: \(systemError())", path: path)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw ConsoleAccountsError(.unreadable, "cannot read the accounts file: \(systemError())", path: path)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw ConsoleAccountsError(.unreadable, "the accounts file is not a regular file", path: path)
        }
        let permissions = info.st_mode & 0o777
        guard permissions & 0o077 == 0 else {
            let octal = String(permissions, radix: 8)
            let mode = String(repeating: "0", count: max(0, 4 - octal.count)) + octal
            throw ConsoleAccountsError(
                .insecureFile,
                "the accounts file may be read or written by its group or others (mode \(mode)); "
                    + "chmod 600 \(shellQuoted(path))",
                path: path
            )
        }
        guard info.st_size <= maximumFileBytes else { throw tooLarge(path: path) }
        // One byte more than allowed, to see a file that grew since fstat.
        var bytes = [UInt8](repeating: 0, count: maximumFileBytes + 1)
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes { buffer in
                Glibc.read(fd, buffer.baseAddress! + count, buffer.count - count)
            }
            if read == 0 { break }
            if read < 0 {
                if errno == EINTR { continue }
                throw ConsoleAccountsError(.unreadable, "cannot read the accounts file: \(systemError())", path: path)
            }
            count += read
        }
        guard count <= maximumFileBytes else { throw tooLarge(path: path) }
        bytes.removeSubrange(count...)
        return try ConsoleAccounts(bytes: bytes, path: path)
    }

    private init(bytes: [UInt8], path: String?) throws(ConsoleAccountsError) {
        Self.prepareDummyHash()
        guard bytes.count <= Self.maximumFileBytes else { throw Self.tooLarge(path: path) }
        var rawLines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if bytes.last == UInt8(ascii: "\n") { rawLines.removeLast() }
        var lineOfName: [String: Int] = [:]
        for (index, var raw) in rawLines.enumerated() {
            let number = index + 1
            func error(_ code: ConsoleAccountsError.Code, _ message: String) -> ConsoleAccountsError {
                ConsoleAccountsError(code, message, path: path, line: number)
            }
            if raw.last == UInt8(ascii: "\r") { raw.removeLast() }
            guard !raw.contains(0) else { throw error(.malformed, "the line contains a NUL byte") }
            guard let line = String(validating: raw, as: UTF8.self) else {
                throw error(.malformed, "the line is not UTF-8")
            }
            let content = line.trimmingBlanks
            if content.isEmpty || content.hasPrefix("#") {
                lines.append(.kept(line))
                continue
            }
            let fields = content.split(separator: ":", omittingEmptySubsequences: false)
            guard fields.count == 3 else {
                let found = "found \(fields.count) field\(fields.count == 1 ? "" : "s")"
                throw error(
                    .malformed,
                    "expected name:role:hash, \(found)" + (fields.count > 3 ? " (a name cannot contain ':')" : "")
                )
            }
            let account = try Self.account(
                name: String(fields[0]),
                role: String(fields[1]),
                hash: String(fields[2])
            ).mapError { error($0.code, $0.message) }.get()
            if let first = lineOfName[account.name] {
                throw error(
                    .duplicateName,
                    "the name \(Self.quoted(account.name)) has an account at line \(first) already"
                )
            }
            lineOfName[account.name] = number
            guard byName.count < Self.maximumAccounts else {
                throw error(.tooManyAccounts, "more than \(Self.maximumAccounts) accounts")
            }
            byName[account.name] = account
            lines.append(.account(account.name))
        }
    }

    /// The accounts, in the file's order.
    public var accounts: [ConsoleAccount] {
        lines.compactMap { line in
            if case .account(let name) = line { byName[name] } else { nil }
        }
    }

    /// How many accounts there are.
    public var count: Int { byName.count }

    /// The account named `name`, if there is one.
    public subscript(name: String) -> ConsoleAccount? { byName[name] }

    /// The file's text: its comments and blank lines as they were, one `name:role:hash` line an
    /// account, each line ending in a newline.
    public var text: String {
        var out = ""
        for line in lines {
            switch line {
            case .kept(let text): out += text
            case .account(let name):
                let account = byName[name]!
                out += "\(account.name):\(account.role.rawValue):\(account.passwordHash)"
            }
            out += "\n"
        }
        return out
    }

    /// The account whose name and password these are, or nil.
    ///
    /// It costs the same whether or not the name has an account: for an unknown name, an invalid
    /// one or a locked account, the password is checked against a dummy yescrypt hash made with
    /// libcrypt's default cost, so the time taken does not tell which names exist. (An account
    /// whose hash has another cost, or is bcrypt, takes that hash's time.)
    public func authenticate(name: String, password: String) -> ConsoleAccount? {
        let account = byName[name]
        guard let account, PasswordHash.isSupported(account.passwordHash) else {
            _ = PasswordHash.verify(password, against: Self.dummyHash)
            return nil
        }
        return PasswordHash.verify(password, against: account.passwordHash) ? account : nil
    }

    /// These accounts and a new one, whose password is hashed with yescrypt (``PasswordHash/make(_:)``).
    /// - Throws: ``ConsoleAccountsError`` `.malformed` for an invalid name, `.duplicateName`,
    ///   `.tooManyAccounts`, `.invalidPassword` for a password shorter than
    ///   ``minimumPasswordLength`` or that cannot be hashed.
    public func adding(
        name: String,
        role: ConsoleRole,
        password: String
    ) throws(ConsoleAccountsError) -> ConsoleAccounts {
        // The cheap checks first: hashing takes tens of milliseconds.
        try checkAddable(name)
        guard password.count >= Self.minimumPasswordLength else {
            throw ConsoleAccountsError(
                .invalidPassword,
                "the password is shorter than \(Self.minimumPasswordLength) characters: choose a longer one "
                    + "(a few words make a good one)"
            )
        }
        let hash: String
        do {
            hash = try PasswordHash.make(password)
        } catch {
            throw ConsoleAccountsError(.invalidPassword, error.message)
        }
        return try adding(name: name, role: role, passwordHash: hash)
    }

    /// These accounts and a new one with a hash made elsewhere (`mkpasswd -m yescrypt`,
    /// `htpasswd -nB`), or a locked one (`!` or `*`).
    /// - Throws: ``ConsoleAccountsError`` `.malformed` for an invalid name or hash,
    ///   `.duplicateName`, `.tooManyAccounts`.
    public func adding(
        name: String,
        role: ConsoleRole,
        passwordHash: String
    ) throws(ConsoleAccountsError)
        -> ConsoleAccounts
    {
        try checkAddable(name)
        let account = try Self.account(name: name, role: role.rawValue, hash: passwordHash).get()
        var copy = self
        copy.byName[name] = account
        copy.lines.append(.account(name))
        return copy
    }

    /// These accounts without the one named `name`.
    /// - Throws: ``ConsoleAccountsError`` `.unknownAccount` when there is none.
    public func removing(name: String) throws(ConsoleAccountsError) -> ConsoleAccounts {
        guard byName[name] != nil else {
            throw ConsoleAccountsError(.unknownAccount, "no account is named \(Self.quoted(name))")
        }
        var copy = self
        copy.byName[name] = nil
        copy.lines.removeAll { if case .account(name) = $0 { true } else { false } }
        return copy
    }

    /// Whether `name` may name an account: 1 to ``maximumNameLength`` of `A-Z a-z 0-9 _ . @ -`.
    public static func isValidName(_ name: String) -> Bool {
        let utf8 = name.utf8
        return !utf8.isEmpty && utf8.count <= maximumNameLength && utf8.allSatisfy(\.isNameCharacter)
    }

    /// Whether `hash` marks a locked account: it starts with `!` or `*`, and has none of the
    /// characters a line or a field cannot hold.
    static func isLocked(_ hash: String) -> Bool {
        guard let first = hash.utf8.first, first == UInt8(ascii: "!") || first == UInt8(ascii: "*") else {
            return false
        }
        return hash.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }
    }

    private func checkAddable(_ name: String) throws(ConsoleAccountsError) {
        guard Self.isValidName(name) else { throw Self.invalidName(name) }
        guard byName[name] == nil else {
            throw ConsoleAccountsError(.duplicateName, "the name \(Self.quoted(name)) has an account already")
        }
        guard byName.count < Self.maximumAccounts else {
            throw ConsoleAccountsError(.tooManyAccounts, "there are \(Self.maximumAccounts) accounts already")
        }
    }

    /// An account from its three fields, each checked.
    private static func account(
        name: String,
        role: String,
        hash: String
    ) -> Result<
        ConsoleAccount, ConsoleAccountsError
    > {
        guard isValidName(name) else { return .failure(invalidName(name)) }
        guard let role = ConsoleRole(rawValue: role) else {
            return .failure(
                ConsoleAccountsError(.malformed, "the role \(quoted(role)) is neither viewer nor operator")
            )
        }
        if PasswordHash.isTooCostly(hash) {
            return .failure(
                ConsoleAccountsError(
                    .costlyHash,
                    "the hash of \(name) costs more to check than the console allows (bcrypt over cost "
                        + "\(PasswordHash.maximumBcryptCost), or yescrypt costlier than libcrypt's default): "
                        + "make it again with chime console remove and add"
                )
            )
        }
        guard PasswordHash.isSupported(hash) || isLocked(hash) else {
            // The hash is not quoted: it may be a secret worth keeping out of logs.
            return .failure(
                ConsoleAccountsError(
                    .malformed,
                    "the hash of \(name) is neither yescrypt ($y$) nor bcrypt ($2b$), nor locked (! or *)"
                )
            )
        }
        return .success(ConsoleAccount(name: name, role: role, passwordHash: hash))
    }

    private static func invalidName(_ name: String) -> ConsoleAccountsError {
        ConsoleAccountsError(
            .malformed,
            "the name \(quoted(name)) is not 1 to \(maximumNameLength) of A-Z a-z 0-9 _ . @ -"
        )
    }

    private static func tooLarge(path: String?) -> ConsoleAccountsError {
        ConsoleAccountsError(.tooLarge, "the accounts file is larger than \(maximumFileBytes / 1024) KiB", path: path)
    }

    /// `text` in quotes with control characters escaped, cut at 80 characters, for a message.
    static func quoted(_ text: String) -> String {
        text.count > 80 ? String(text.prefix(80)).debugDescription + "…" : text.debugDescription
    }

    /// `path` as a shell word: as it is when it needs no quoting, else in single quotes.
    private static func shellQuoted(_ path: String) -> String {
        let plain = !path.isEmpty && path.utf8.allSatisfy { $0.isNameCharacter || $0 == UInt8(ascii: "/") }
        return plain ? path : "'" + path.replacingAll("'", with: "'\\''") + "'"
    }

    private static func systemError() -> String { String(cString: strerror(errno)) }

    /// Makes ``dummyHash`` now, so that the first sign-in with an unknown name does not take the
    /// time of making it too.
    private static func prepareDummyHash() {
        _ = dummyHash
    }

    /// The hash that ``authenticate(name:password:)`` checks a password against when there is no
    /// account to check it against: yescrypt at libcrypt's default cost, of a random password
    /// nobody knows. Made once, on the first use.
    private static let dummyHash: String = {
        var random = SystemRandomNumberGenerator()
        let password = (0..<4).map { _ in String(random.next(), radix: 36) }.joined()
        // The fixed hash is only for a libcrypt that cannot hash, where no password verifies.
        return (try? PasswordHash.make(password))
            ?? "$y$j9T$a6EBcOha0sZIXAVArW8sE.$gD4f2251HlBBc23ZhwbtVfkyWzLNyeo6i3v1QMK4uG4"
    }()
}

extension UInt8 {
    /// `A-Z a-z 0-9 _ . @ -`.
    fileprivate var isNameCharacter: Bool {
        switch self {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "@"), UInt8(ascii: "-"): true
        default: false
        }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    var trimmingBlanks: Substring {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !blank($0) }) else { return "" }
        let end = lastIndex(where: { !blank($0) })!
        return self[start...end]
    }

    /// With every `target` replaced, without Foundation.
    fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
        var out = ""
        for character in self {
            if character == target { out += replacement } else { out.append(character) }
        }
        return out
    }
}
