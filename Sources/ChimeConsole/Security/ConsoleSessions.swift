import ChimePassword
import ChimeTime

/// The console's sign-ins and sessions, as a pure state machine: given the time (`now`) and a
/// random generator, never reading a clock or a device.
///
/// It signs accounts in (``login(name:password:address:now:)``), with a rate limit per client
/// address and per account name; hands out sessions whose id goes in a cookie and whose CSRF token
/// goes in every form; finds them again (``session(id:now:)``), ending them after
/// ``idleTimeoutMilliseconds`` unused or ``absoluteTimeoutMilliseconds`` after sign-in; and keeps
/// at most ``maximumSessions`` of them, ``maximumSessionsPerAccount`` an account. The HTTP side,
/// cookies, the `Origin` check and the headers every answer carries, is in its static members.
///
/// The server holds one value behind a lock. A password check takes tens of milliseconds, so a
/// server that would not hold the lock meanwhile calls ``beginLogin(name:address:now:)`` under
/// it, ``ConsoleAccounts/authenticate(name:password:)`` outside it, and
/// ``finishLogin(_:account:now:)`` under it again: what ``login(name:password:address:now:)``
/// does in one call.
public struct ConsoleSessions: Sendable {
    /// A signed-in account's session.
    public struct Session: Sendable, Hashable {
        /// The session's id: 32 random bytes in base64url without padding (43 characters), the
        /// value of the `__Host-chime_console` cookie. A bearer secret: never log it.
        public let id: String
        /// The token every state-changing request must carry (a hidden form field): 32 random
        /// bytes in base64url, other than the id, so that a page may show it without the cookie.
        public let csrfToken: String
        /// The account's name.
        public let account: String
        /// The account's role when it signed in.
        public let role: ConsoleRole
        /// When it signed in.
        public let createdAt: Instant
        /// When it was last used (``ConsoleSessions/session(id:now:)``).
        public internal(set) var lastSeen: Instant

        /// When it ends if it is not used again: the earlier of its idle and absolute timeouts.
        public var expiresAt: Instant {
            Instant(
                milliseconds: min(
                    lastSeen.milliseconds + ConsoleSessions.idleTimeoutMilliseconds,
                    createdAt.milliseconds + ConsoleSessions.absoluteTimeoutMilliseconds
                )
            )
        }

        /// Whether it has ended by `now`.
        public func isExpired(at now: Instant) -> Bool {
            now >= expiresAt
        }
    }

    /// What became of a sign-in.
    public enum LoginOutcome: Sendable, Hashable {
        /// The name and password are an account's: here is its new session.
        case signedIn(Session)
        /// The name or the password is wrong, or the account is locked: which, it does not say
        /// (show ``refusedMessage``).
        case refused
        /// Too many failed sign-ins from this address or for this name: none is checked for
        /// `retryAfterSeconds` (at least 1), the value of a `Retry-After` header.
        case tooManyAttempts(retryAfterSeconds: Int)

        /// The one message for a wrong name and a wrong password.
        public static let refusedMessage = "Wrong name or password."
    }

    /// Whether a sign-in may go on to have its password checked.
    public enum LoginAdmission: Sendable, Hashable {
        /// It may: check the password, then pass the ticket to ``ConsoleSessions/finishLogin(_:account:now:)``.
        case proceed(LoginTicket)
        /// It may not, for `retryAfterSeconds`.
        case tooManyAttempts(retryAfterSeconds: Int)
    }

    /// An admitted sign-in, counted as failed until ``ConsoleSessions/finishLogin(_:account:now:)``
    /// says it succeeded. Only ``ConsoleSessions/beginLogin(name:address:now:)`` makes one.
    public struct LoginTicket: Sendable, Hashable {
        /// The name given.
        public let name: String
        let addressKey: String
        let admittedAt: Instant
    }

    /// A session ends after this long unused: 30 minutes.
    public static let idleTimeoutMilliseconds: Int64 = 30 * 60 * 1000
    /// A session ends this long after its sign-in, used or not: 12 hours.
    public static let absoluteTimeoutMilliseconds: Int64 = 12 * 60 * 60 * 1000
    /// The most sessions at once; a new one ends the one unused the longest.
    public static let maximumSessions = 1000
    /// The most sessions of one account at once; a new one ends that account's unused the longest.
    public static let maximumSessionsPerAccount = 20
    /// The window of the sign-in rate limit: 5 minutes.
    public static let loginWindowMilliseconds: Int64 = 5 * 60 * 1000
    /// The most failed sign-ins from one client address (an IPv6 one by its /64) in the window.
    public static let maximumFailuresPerAddress = 5
    /// The most failed sign-ins for one account name in the window, whatever the addresses.
    public static let maximumFailuresPerName = 20
    /// The most addresses, and the most names, whose failures are remembered; past it the one
    /// whose last failure is the oldest is forgotten.
    public static let maximumTrackedKeys = 10_000

    /// The accounts sign-ins are checked against.
    public private(set) var accounts: ConsoleAccounts
    private(set) var throttle = LoginThrottle()
    private var table = SessionTable()
    private var random: any RandomNumberGenerator & Sendable

    /// No sessions yet.
    /// - Parameters:
    ///   - accounts: the accounts that may sign in.
    ///   - random: where ids and tokens come from; `SystemRandomNumberGenerator` (the kernel's
    ///     `getrandom`) in production, a seeded generator in tests.
    public init(accounts: ConsoleAccounts, random: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator())
    {
        self.accounts = accounts
        self.random = random
    }

    /// The sessions not yet ended (some may have expired without being looked up since).
    public var count: Int { table.sessions.count }

    /// Replaces the accounts (the file was read again), ending the sessions of accounts that are
    /// gone, locked, or whose role or password changed.
    public mutating func replaceAccounts(_ accounts: ConsoleAccounts) {
        let old = self.accounts
        self.accounts = accounts
        table.removeAll { session in
            guard let now = accounts[session.account], let then = old[session.account] else { return true }
            return now != then || !PasswordHash.isSupported(now.passwordHash)
        }
    }

    /// Signs in, or says why not: checks the rate limit, then the password
    /// (``ConsoleAccounts/authenticate(name:password:)``, tens of milliseconds), then makes a
    /// session.
    /// - Parameters:
    ///   - name: the name typed.
    ///   - password: the password typed.
    ///   - address: the client's address as the server's socket gives it (not a forwarded header).
    ///   - now: the time.
    public mutating func login(name: String, password: String, address: String, now: Instant) -> LoginOutcome {
        switch beginLogin(name: name, address: address, now: now) {
        case .tooManyAttempts(let seconds):
            return .tooManyAttempts(retryAfterSeconds: seconds)
        case .proceed(let ticket):
            return finishLogin(ticket, account: accounts.authenticate(name: name, password: password), now: now)
        }
    }

    /// The first half of ``login(name:password:address:now:)``: the rate limit. An admitted
    /// attempt counts as a failure until ``finishLogin(_:account:now:)`` says otherwise.
    public mutating func beginLogin(name: String, address: String, now: Instant) -> LoginAdmission {
        let addressKey = LoginThrottle.addressKey(address)
        if let seconds = throttle.admit(address: addressKey, name: name, now: now) {
            return .tooManyAttempts(retryAfterSeconds: seconds)
        }
        return .proceed(LoginTicket(name: name, addressKey: addressKey, admittedAt: now))
    }

    /// The second half of ``login(name:password:address:now:)``: a session for the account that
    /// ``ConsoleAccounts/authenticate(name:password:)`` returned for the ticket's name, or
    /// ``LoginOutcome/refused`` when it returned nil, or when the accounts were replaced meanwhile
    /// and that account changed.
    public mutating func finishLogin(_ ticket: LoginTicket, account: ConsoleAccount?, now: Instant) -> LoginOutcome {
        guard let account, account.name == ticket.name, accounts[account.name] == account else { return .refused }
        throttle.succeeded(address: ticket.addressKey, name: ticket.name, admittedAt: ticket.admittedAt)
        var id = newToken()
        while table.sessions[id] != nil { id = newToken() }
        let session = Session(
            id: id,
            csrfToken: newToken(),
            account: account.name,
            role: account.role,
            createdAt: now,
            lastSeen: now
        )
        table.insert(session, now: now)
        return .signedIn(session)
    }

    /// The live session whose id is `id` (a cookie's value), marked as used at `now`; nil when
    /// there is none or it has expired (then it is ended).
    public mutating func session(id: String, now: Instant) -> Session? {
        guard Self.isToken(id) else { return nil }
        return table.touch(id: id, now: now)
    }

    /// Ends the session whose id is `id`, if there is one.
    public mutating func logout(id: String) {
        table.remove(id: id)
    }

    /// Whether `token` (the form's field) is `session`'s CSRF token, compared in constant time;
    /// false when it is missing.
    public static func validCSRF(_ token: String?, for session: Session) -> Bool {
        guard let token else { return false }
        return ConstantTime.equal(Array(token.utf8), Array(session.csrfToken.utf8))
    }

    /// 32 random bytes in base64url.
    private mutating func newToken() -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for _ in 0..<4 {
            let word = random.next()
            for shift in stride(from: 0, to: 64, by: 8) {
                bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)))
            }
        }
        return Self.base64URL(bytes)
    }

    /// Whether `text` has the shape of an id or token: 43 characters of base64url.
    static func isToken(_ text: some StringProtocol) -> Bool {
        text.utf8.count == 43 && text.utf8.allSatisfy { base64URLAlphabet.contains($0) }
    }

    private static let base64URLAlphabet = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8
    )

    /// `bytes` in base64url without padding (RFC 4648 section 5), six bits at a time.
    static func base64URL(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                out.append(base64URLAlphabet[Int(buffer >> UInt32(bits) & 0x3F)])
            }
        }
        if bits > 0 { out.append(base64URLAlphabet[Int(buffer << UInt32(6 - bits) & 0x3F)]) }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The live sessions by id, within ``ConsoleSessions/maximumSessions`` and
/// ``ConsoleSessions/maximumSessionsPerAccount``.
struct SessionTable: Sendable {
    private(set) var sessions: [String: ConsoleSessions.Session] = [:]

    /// Adds a session, first ending the expired ones, then those unused the longest, of its
    /// account and then of all, until it fits.
    mutating func insert(_ session: ConsoleSessions.Session, now: Instant) {
        sessions = sessions.filter { !$0.value.isExpired(at: now) }
        var sameAccount = sessions.values.filter { $0.account == session.account }
        while sameAccount.count >= ConsoleSessions.maximumSessionsPerAccount {
            let index = sameAccount.indices.min { sameAccount[$0].lastSeen < sameAccount[$1].lastSeen }!
            sessions[sameAccount.remove(at: index).id] = nil
        }
        while sessions.count >= ConsoleSessions.maximumSessions {
            sessions[sessions.values.min { $0.lastSeen < $1.lastSeen }!.id] = nil
        }
        sessions[session.id] = session
    }

    /// The session, marked as used at `now`; nil, and ended, when it has expired.
    mutating func touch(id: String, now: Instant) -> ConsoleSessions.Session? {
        guard var session = sessions[id] else { return nil }
        guard !session.isExpired(at: now) else {
            sessions[id] = nil
            return nil
        }
        // A clock that went back does not make a session younger.
        session.lastSeen = max(session.lastSeen, now)
        sessions[id] = session
        return session
    }

    mutating func remove(id: String) {
        sessions[id] = nil
    }

    mutating func removeAll(where shouldRemove: (ConsoleSessions.Session) -> Bool) {
        sessions = sessions.filter { !shouldRemove($0.value) }
    }
}
