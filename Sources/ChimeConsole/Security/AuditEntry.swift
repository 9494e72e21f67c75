import ChimeProtocol
import ChimeTime

/// One thing done, or refused, through the console, for the audit log: who, from where, what,
/// to which device and notifications, how it ended, and when.
///
/// ``line`` writes it as one JSON object on one line (JSON Lines), every string escaped by
/// ChimeProtocol's JSON writer, so that no name, id or message can break a line or forge an entry.
public struct AuditEntry: Sendable, Hashable {
    /// How an action ended.
    public enum Outcome: String, Sendable, Hashable, CaseIterable {
        /// It was done.
        case ok
        /// It was refused before anything was done: a wrong password, a rate limit, a missing or
        /// wrong CSRF token, a foreign `Origin`.
        case refused
        /// The account's role may not take it (a viewer trying to act).
        case forbidden
        /// It was tried and failed (the worker answered with an error, or did not answer).
        case failed
    }

    /// The account name; for a refused sign-in, the name that was typed when it could be an
    /// account's (``ConsoleAccounts/isValidName(_:)``), else ``ConsoleApp/invalidNameInAudit``.
    public var who: String
    /// The account's role, when it is signed in.
    public var role: ConsoleRole?
    /// The client's address.
    public var address: String
    /// What was done: `login`, `logout`, or a ``ConsoleAction``'s raw value (`pause`, `cancel`, ...).
    public var action: String
    /// The device acted on, if any.
    public var device: String?
    /// The notification ids acted on, if any.
    public var ids: [String]
    /// How it ended.
    public var outcome: Outcome
    /// Why, when it was refused or failed: an error code or a short sentence. Never a password or
    /// a session id.
    public var detail: String?
    /// When.
    public var at: Instant

    /// An entry; `device`, `ids` and `detail` default to none.
    public init(
        who: String,
        role: ConsoleRole?,
        address: String,
        action: String,
        device: String? = nil,
        ids: [String] = [],
        outcome: Outcome,
        detail: String? = nil,
        at: Instant
    ) {
        self.who = who
        self.role = role
        self.address = address
        self.action = action
        self.device = device
        self.ids = ids
        self.outcome = outcome
        self.detail = detail
        self.at = at
    }

    /// The entry as one line of JSON, without the newline that ends it in the log, every key always
    /// there and `null` for what is absent:
    ///
    /// ```json
    /// {"at":"2026-12-01T10:00:00.000Z","who":"alice","role":"operator","address":"10.0.0.1",
    ///  "action":"cancel","device":"phone-1","ids":["n1"],"outcome":"ok","detail":null}
    /// ```
    public var line: String {
        func optional(_ text: String?) -> JSON { text.map(JSON.string) ?? .null }
        let object: JSONObject = [
            "at": .string(at.rfc3339(fractional: true)),
            "who": .string(who),
            "role": optional(role?.rawValue),
            "address": .string(address),
            "action": .string(action),
            "device": optional(device),
            "ids": .array(ids.map(JSON.string)),
            "outcome": .string(outcome.rawValue),
            "detail": optional(detail),
        ]
        return JSON.object(object).text
    }
}
