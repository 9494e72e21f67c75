import ChimeCore
import ChimeCrypto
import Foundation

/// A device token (PROTOCOL.md section 1, "Device tokens"): a compact JWT signed with ES256 whose
/// `sub` is the device id, which the device gives as its MQTT password with the device id as its
/// user name. The broker's plugin (`deploy/mosquitto/plugin/chime_auth.c`) checks it; nothing about
/// the device is stored anywhere.
public enum DeviceToken {
    /// The longest lifetime (`exp - iat`) the broker's plugin accepts by default
    /// (`plugin_opt_max_lifetime`): 366 days.
    public static let maxLifetimeSeconds: Int64 = 31_622_400
    /// The lifetime `chime accounts add` gives a token unless `--ttl` says otherwise: 30 days.
    public static let defaultLifetimeSeconds: Int64 = 2_592_000
    /// The JOSE header of every token.
    static let header = #"{"alg":"ES256","typ":"JWT"}"#

    /// Signs a token for `device`, valid from `issuedAt` for `lifetime` seconds.
    /// - Parameters:
    ///   - device: a device id (PROTOCOL.md section 1), which needs no escaping in JSON.
    ///   - issuedAt: `iat`, seconds since 1970.
    ///   - lifetime: `exp - iat`, in seconds.
    ///   - key: the signing key (`chime accounts keygen`).
    /// - Throws: `AccountsError` `.invalidDevice` for a name that is not a device id; what
    ///   `JSONWebToken.es256` throws.
    public static func mint(
        device: String,
        issuedAt: Int64,
        lifetime: Int64,
        key: P256PrivateKey
    ) throws -> String {
        guard DeviceID.isValid(device), device.first != "$" else {
            throw AccountsError(.invalidDevice, "\"\(device.prefix(140))\" is not a device id")
        }
        let claims = #"{"sub":"\#(device)","iat":\#(issuedAt),"exp":\#(issuedAt + lifetime)}"#
        return try JSONWebToken.es256(header: Array(header.utf8), claims: Array(claims.utf8), key: key)
    }
}

/// An error of `chime accounts`: what went wrong and a sentence naming the file or device.
public struct AccountsError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of thing went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case invalidDevice, malformedDenyList, refused, fileFailure
        }

        private let kind: Kind

        private init(_ kind: Kind) { self.kind = kind }

        /// A name that is not a device id.
        public static let invalidDevice = Code(.invalidDevice)
        /// A deny list line the broker's plugin would not read either.
        public static let malformedDenyList = Code(.malformedDenyList)
        /// What the device's state forbids: a token for a disabled or deleted device, enabling a
        /// deleted one, a signing key that exists already.
        public static let refused = Code(.refused)
        /// A file that cannot be read or written.
        public static let fileFailure = Code(.fileFailure)

        public var description: String {
            switch kind {
            case .invalidDevice: "invalidDevice"
            case .malformedDenyList: "malformedDenyList"
            case .refused: "refused"
            case .fileFailure: "fileFailure"
            }
        }
    }

    public let code: Code
    public let message: String

    /// Creates an error; `message` defaults to the code's name.
    public init(_ code: Code, _ message: String? = nil) {
        self.code = code
        self.message = message ?? code.description
    }

    public static func == (lhs: AccountsError, rhs: AccountsError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    public var description: String { message }
}

/// The deny list the broker's plugin reads (`plugin_opt_deny_file`): one line a state change,
/// `DEVICE STATE TIME`, STATE `disabled` or `deleted` (every token of the device refused) or
/// `rotated` (its tokens issued before TIME, seconds since 1970, refused). Lines starting with
/// `#` and blank lines are comments. A device may have several lines; the strictest applies.
public struct DenyList: Hashable, Sendable {
    public enum State: String, Hashable, Sendable, CaseIterable {
        case disabled, deleted, rotated
    }

    public struct Entry: Hashable, Sendable {
        public var device: String
        public var state: State
        public var time: Int64
    }

    public private(set) var entries: [Entry] = []

    public init() {}

    /// Reads the text of a deny list, as strictly as the plugin does (it refuses every token while
    /// its deny list is malformed, so `chime accounts` never writes one it would refuse).
    /// - Throws: `AccountsError` `.malformedDenyList` naming the line.
    public init(text: String) throws(AccountsError) {
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" }).map(String.init)
            func malformed(_ why: String) -> AccountsError {
                AccountsError(.malformedDenyList, "line \(index + 1): \(why)")
            }
            guard words.count <= 3 else { throw malformed("more than DEVICE STATE TIME") }
            guard DeviceID.isValid(words[0]) else { throw malformed("not a device id") }
            let state = words.count > 1 ? State(rawValue: words[1]) : .disabled
            guard let state else { throw malformed("the state is disabled, deleted or rotated") }
            let time = words.count > 2 ? Int64(words[2]) : 0
            guard let time, time >= 0, state != .rotated || words.count == 3 else {
                throw malformed("the time is seconds since 1970")
            }
            entries.append(Entry(device: words[0], state: state, time: time))
        }
    }

    /// The file's text: a comment, then one line an entry.
    public var text: String {
        (["# Chime device deny list (chime accounts): DEVICE disabled|deleted|rotated SECONDS-SINCE-1970"]
            + entries.map { "\($0.device) \($0.state.rawValue) \($0.time)" })
            .joined(separator: "\n") + "\n"
    }

    /// `.deleted` or `.disabled` when every token of `device` is refused (deleted first), else nil.
    public func blocking(_ device: String) -> State? {
        let states = Set(entries.filter { $0.device == device }.map(\.state))
        return states.contains(.deleted) ? .deleted : states.contains(.disabled) ? .disabled : nil
    }

    /// Refuses every token of `device`; false when it was refused already.
    public mutating func disable(_ device: String, at time: Int64) -> Bool {
        guard blocking(device) == nil else { return false }
        entries.append(Entry(device: device, state: .disabled, time: time))
        return true
    }

    /// Lifts `disable`; false when the device was not disabled.
    /// - Throws: `.refused` for a deleted device.
    public mutating func enable(_ device: String) throws(AccountsError) -> Bool {
        if blocking(device) == .deleted {
            throw AccountsError(.refused, "\(device) is deleted: a deleted device id gets no token again")
        }
        let before = entries.count
        entries.removeAll { $0.device == device && $0.state == .disabled }
        return entries.count != before
    }

    /// Refuses every token of `device` for good: its lines become one `deleted` line.
    public mutating func delete(_ device: String, at time: Int64) {
        entries.removeAll { $0.device == device }
        entries.append(Entry(device: device, state: .deleted, time: time))
    }

    /// Refuses the tokens of `device` issued before `time` (its one `rotated` line).
    public mutating func rotate(_ device: String, at time: Int64) {
        entries.removeAll { $0.device == device && $0.state == .rotated }
        entries.append(Entry(device: device, state: .rotated, time: time))
    }
}

/// The files of `chime accounts`: the signing key, its public key and the deny list.
struct AccountFiles: Sendable {
    var signingKey: String
    var publicKey: String
    var denyFile: String

    /// Makes a new signing key pair: the private key (mode 0600) and the public key (0644) the
    /// broker reads. Refuses to replace an existing file.
    func generateKeys() throws(AccountsError) {
        let key = P256PrivateKey.generate()
        do {
            try Self.create(signingKey, contents: try key.privateKeyPEM(), mode: 0o600)
            try Self.create(publicKey, contents: try key.publicKeyPEM(), mode: 0o644)
        } catch let error as AccountsError {
            throw error
        } catch {
            throw AccountsError(.fileFailure, "cannot write the key: \(error)")
        }
    }

    func loadSigningKey() throws(AccountsError) -> P256PrivateKey {
        let text: String
        do {
            text = try String(contentsOfFile: signingKey, encoding: .utf8)
        } catch {
            throw AccountsError(
                .fileFailure,
                "cannot read the signing key \(signingKey) (make one with chime accounts keygen): \(error.localizedDescription)"
            )
        }
        do {
            return try P256PrivateKey(pem: text)
        } catch {
            throw AccountsError(.fileFailure, "\(signingKey): \(error.message)")
        }
    }

    /// The deny list; empty when the file does not exist yet.
    func readDenyList() throws(AccountsError) -> DenyList {
        guard FileManager.default.fileExists(atPath: denyFile) else { return DenyList() }
        let text: String
        do {
            text = try String(contentsOfFile: denyFile, encoding: .utf8)
        } catch {
            throw AccountsError(.fileFailure, "cannot read \(denyFile): \(error.localizedDescription)")
        }
        do {
            return try DenyList(text: text)
        } catch {
            throw AccountsError(.malformedDenyList, "\(denyFile): \(error.message)")
        }
    }

    /// Changes the deny list under an exclusive lock (`DENY.lock`, so that two `chime accounts`
    /// at once do not lose each other's change) and replaces the file atomically (a new file
    /// renamed over it, keeping its mode; 0644 for a new one), so that the broker never reads half
    /// of it. Returns what `change` returned.
    func updateDenyList<R>(_ change: (inout DenyList) throws(AccountsError) -> R) throws(AccountsError) -> R {
        try ReplacedFile.locked(denyFile, Self.accountsError) { () throws(AccountsError) -> R in
            var list = try readDenyList()
            let before = list
            let result = try change(&list)
            guard list != before else { return result }
            var mode: mode_t = 0o644
            var status = stat()
            if stat(denyFile, &status) == 0 { mode = status.st_mode & 0o7777 }
            try Self.replace(denyFile, contents: list.text, mode: mode)
            return result
        }
    }

    /// Replaces `path` whole, as ``ReplacedFile/replace(_:contents:mode:)`` does.
    private static func replace(_ path: String, contents: String, mode: mode_t) throws(AccountsError) {
        do {
            try ReplacedFile.replace(path, contents: contents, mode: mode)
        } catch {
            throw accountsError(error)
        }
    }

    /// Writes a new file with `mode` (never replacing one), synced to disk.
    private static func create(_ path: String, contents: String, mode: mode_t) throws(AccountsError) {
        do {
            try ReplacedFile.create(path, contents: contents, mode: mode)
        } catch {
            throw accountsError(error)
        }
    }

    private static func accountsError(_ failure: ReplacedFile.Failure) -> AccountsError {
        AccountsError(failure.exists ? .refused : .fileFailure, failure.message)
    }
}
