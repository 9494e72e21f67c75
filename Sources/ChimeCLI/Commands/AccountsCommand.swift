import ChimeCore
import ChimeCrypto
import ChimeSupport
import Foundation

/// `chime accounts keygen|add|rotate|disable|enable|delete|list`: device tokens, signed here and
/// checked by the broker's plugin (deploy/mosquitto/plugin/chime_auth.c), and the deny list it
/// reads. Local files only; no broker.
struct AccountsCommand: Command {
    static let name = "accounts"
    static let summary = "device tokens: make the signing key, add, rotate, disable, enable, delete, list"
    static let synopsis = """
        chime accounts keygen
               chime accounts (add | rotate) DEVICE [--ttl DURATION]
               chime accounts (disable | enable | delete) DEVICE
               chime accounts list
        """
    static let discussion = """
        A device logs in with its device id as user name and a token as password: a JWT (ES256)
        this command signs, which the broker's chime_auth plugin checks with the public key
        (PROTOCOL.md section 1, "Device tokens"; docs/accounts.md). Nothing is stored per device:
        only the deny list remembers devices, and the broker reads it again when it changes.
          keygen      makes the signing key pair: --signing-key (private, mode 0600; keep it with
                      the backend) and --public-key (give it to the broker). Refuses to replace one.
          add         prints a token for DEVICE, alone on standard output, valid for --ttl. Refused
                      for a disabled or deleted device.
          rotate      refuses DEVICE's earlier tokens (and closes its connections), then prints a new
                      one. (add alone leaves earlier tokens valid until they expire.)
          disable     refuses every token of DEVICE and closes its connections; enable lifts it.
          delete      disables DEVICE for good: enable and add refuse it afterwards.
          list        prints the deny list: DEVICE, STATE, since when.
        """
    static let specs: [Flags.Spec] = [
        .init(
            "signing-key",
            default: "/etc/chime/accounts.key",
            placeholder: "FILE",
            "the private key tokens are signed with (keygen writes it)"
        ),
        .init(
            "public-key",
            default: "/etc/mosquitto/chime-accounts.pub",
            placeholder: "FILE",
            "keygen: where to write the public key the broker checks tokens with"
        ),
        .init(
            "deny-file",
            default: "/etc/mosquitto/chime-accounts.deny",
            placeholder: "FILE",
            "the deny list the broker reads (plugin_opt_deny_file)"
        ),
        .init(
            "ttl",
            default: "30d",
            env: false,
            placeholder: "DURATION",
            "add, rotate: how long the token is valid, at most 366d"
        ),
    ]
    static let examples: [(comment: String, command: String)] = [
        ("once: the signing key pair", "chime accounts keygen"),
        ("at signup: the token the app logs in with", "token=$(chime accounts add phone-1)"),
        ("a lost phone: refuse its tokens and cut it off", "chime accounts disable phone-1"),
        ("a leaked token: a new one, the old ones refused", "chime accounts rotate phone-1 --ttl 7d"),
    ]

    enum Action: String, Sendable, CaseIterable {
        case keygen, add, rotate, disable, enable, delete, list
    }

    let action: Action
    let device: String
    let lifetime: Int64
    let files: AccountFiles

    init(_ flags: Flags) throws(UsageError) {
        let actions = Action.allCases.map(\.rawValue).joined(separator: ", ")
        guard let word = flags.positional.first else { throw UsageError("say what to do: \(actions)") }
        guard let action = Action(rawValue: word) else {
            throw UsageError("unknown accounts action \"\(word)\": \(actions)")
        }
        self.action = action
        let takesDevice = action != .keygen && action != .list
        let expected = takesDevice ? 2 : 1
        guard flags.positional.count >= expected else {
            throw UsageError("accounts \(word) needs the device id DEVICE")
        }
        guard flags.positional.count == expected else {
            throw UsageError("unexpected argument \"\(flags.positional[expected])\"")
        }
        device = takesDevice ? flags.positional[1] : ""
        if takesDevice && (!DeviceID.isValid(device) || device.first == "$") {
            throw UsageError(
                "\"\(device.prefix(140))\" is not a device id: 1 to 128 characters of A-Z a-z 0-9 _ . : @ -"
            )
        }
        let ttl = try Parse.duration(flags["ttl"] ?? "30d", flag: "ttl") / 1000
        guard ttl >= 1, ttl <= DeviceToken.maxLifetimeSeconds else {
            throw UsageError("--ttl: at most 366d (the broker's plugin_opt_max_lifetime), at least 1s")
        }
        lifetime = ttl
        files = AccountFiles(
            signingKey: flags["signing-key"] ?? "",
            publicKey: flags["public-key"] ?? "",
            denyFile: flags["deny-file"] ?? ""
        )
    }

    func run(_ console: Console) async throws(CLIFailure) {
        let now = Int64(Date().timeIntervalSince1970)
        do throws(AccountsError) {
            switch action {
            case .keygen:
                try files.generateKeys()
                console.err("chime accounts: signing key in \(files.signingKey), public key in \(files.publicKey)")
            case .add:
                try printToken(console, now: now) { () throws(AccountsError) in
                    if let state = try files.readDenyList().blocking(device) {
                        throw AccountsError(.refused, "\(device) is \(state.rawValue): no token for it")
                    }
                }
            case .rotate:
                try printToken(console, now: now) { () throws(AccountsError) in
                    try files.updateDenyList { (list) throws(AccountsError) in
                        if let state = list.blocking(device) {
                            throw AccountsError(.refused, "\(device) is \(state.rawValue): no token for it")
                        }
                        list.rotate(device, at: now)
                    }
                    console.err("chime accounts: tokens of \(device) issued before now are refused")
                }
            case .disable:
                let changed = try files.updateDenyList { list in list.disable(device, at: now) }
                console.err("chime accounts: \(device) \(changed ? "disabled" : "was disabled already")")
            case .enable:
                let changed = try files.updateDenyList { (list) throws(AccountsError) in try list.enable(device) }
                console.err("chime accounts: \(device) \(changed ? "enabled" : "was not disabled")")
            case .delete:
                try files.updateDenyList { list in list.delete(device, at: now) }
                console.err("chime accounts: \(device) deleted")
            case .list:
                let entries = try files.readDenyList().entries
                let width = entries.map(\.device.count).max() ?? 0
                console.out(
                    lines: entries.map {
                        let since = Date(timeIntervalSince1970: TimeInterval($0.time)).formatted(.iso8601)
                        let name = $0.device.padding(toLength: width, withPad: " ", startingAt: 0)
                        return
                            "\(name)  \($0.state.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0))  \(since)"
                    }
                )
            }
        } catch {
            throw CLIFailure(.failed, error.message)
        }
    }

    /// Checks (or records) what `prepare` does, then signs and prints the token alone on stdout.
    private func printToken(
        _ console: Console,
        now: Int64,
        prepare: () throws(AccountsError) -> Void
    ) throws(AccountsError) {
        let key = try files.loadSigningKey()
        try prepare()
        do {
            console.exact(try DeviceToken.mint(device: device, issuedAt: now, lifetime: lifetime, key: key))
        } catch {
            throw AccountsError(.fileFailure, "cannot sign: \(error)")
        }
    }
}
