import ChimeCore
import ChimeCrypto
import ChimeSupport
import Foundation

/// The push flags of `chimed` (PROTOCOL.md section 6) and the credentials they name, read and
/// checked at start: a missing, unreadable, malformed or world-readable key stops the start with
/// one line naming the flag. Key material is never logged or printed.
public struct PushConfiguration: Sendable {
    /// APNs token authentication: the team's .p8 key, its key id, the team id.
    public struct APNs: Sendable {
        public var key: P256PrivateKey
        public var keyId: String
        public var teamId: String
        /// Where requests go: nil for Apple's hosts (production and sandbox by registration).
        public var url: String?
    }

    /// FCM HTTP v1: a service account.
    public struct FCM: Sendable {
        public var key: RSAPrivateKey
        public var clientEmail: String
        public var projectId: String
        public var tokenURL: String
        public var url: String
    }

    /// Web Push VAPID (RFC 8292).
    public struct VAPID: Sendable {
        public var key: P256PrivateKey
        /// `mailto:` or `https:` contact for the push services.
        public var subject: String
    }

    public var apns: APNs?
    public var fcm: FCM?
    public var vapid: VAPID?
    /// `--push-ca-file`: the CAs that push services' certificates must chain to (nil: the system's).
    public var caFile: String?
    /// `--push-timeout`, in seconds.
    public var timeout: Int
    /// `--push-inflight`: attempts in flight per provider.
    public var inFlight: Int
    /// The Web Push endpoints devices may register, and the addresses the worker may connect to.
    public var endpoints: PushEndpointPolicy
    /// `--push-expiry`, in seconds.
    public var expiry: Int

    /// The providers credentials were given for.
    public var providers: Set<PushRegistration.Provider> {
        var p: Set<PushRegistration.Provider> = []
        if apns != nil { p.insert(.apns) }
        if fcm != nil { p.insert(.fcm) }
        if vapid != nil { p.insert(.webpush) }
        return p
    }

    public static let flagSpecs: [Flags.Spec] = [
        .init("apns-key", default: nil, "APNs token key (.p8 from Apple, mode 0600): push to iOS devices"),
        .init("apns-key-id", default: nil, "the APNs key's id (10 characters, with --apns-key)"),
        .init("apns-team-id", default: nil, "the Apple developer team id (10 characters, with --apns-key)"),
        .init("apns-url", default: nil, "APNs base URL for both environments (default: Apple's hosts)"),
        .init("fcm-service-account", default: nil, "Firebase service account JSON (mode 0600): push to Android"),
        .init("fcm-url", default: "https://fcm.googleapis.com", "FCM HTTP v1 base URL"),
        .init("fcm-token-url", default: nil, "OAuth token URL (default: the service account's token_uri)"),
        .init("vapid-key", default: nil, "Web Push VAPID private key (PEM, P-256, mode 0600): push to browsers"),
        .init("vapid-subject", default: nil, "mailto: or https: contact sent to Web Push services (with --vapid-key)"),
        .init(
            "webpush-allowed-hosts",
            default: PushEndpointPolicy.browsers.joined(separator: ","),
            "Web Push endpoint hosts devices may register (comma-separated; *.example.com for names under it)"
        ),
        .init(
            "push-allow-loopback",
            default: "false",
            "true: Web Push endpoints and pushes may use loopback addresses"
        ),
        .init("push-allow-private", default: "false", "true: Web Push endpoints and pushes may use private addresses"),
        .init(
            "push-ca-file",
            default: nil,
            "PEM CAs push services' certificates must chain to (default: the system's)"
        ),
        .init("push-timeout", default: "30", range: 1...300, "seconds one push attempt may take"),
        .init("push-inflight", default: "1000", range: 1...10_000, "push attempts in flight per provider"),
        .init(
            "push-expiry",
            default: "86400",
            range: 60...2_419_200,
            "seconds a push is tried when its notification has no expiresAfter"
        ),
    ]

    public init(flags: Flags) throws(UsageError) {
        caFile = flags["push-ca-file"].flatMap { $0.isEmpty ? nil : $0 }
        timeout = try flags.integer("push-timeout")
        inFlight = try flags.integer("push-inflight")
        expiry = try flags.integer("push-expiry")
        let hosts = (flags["webpush-allowed-hosts"] ?? "").split(separator: ",").map {
            String($0).trimmingCharacters(in: .whitespaces).lowercased()
        }.filter { !$0.isEmpty }
        endpoints = PushEndpointPolicy(
            allowedHosts: hosts,
            allowLoopback: try Self.bool(flags, "push-allow-loopback"),
            allowPrivate: try Self.bool(flags, "push-allow-private")
        )
        if let path = flags["apns-key"], !path.isEmpty {
            guard let keyId = flags["apns-key-id"], keyId.count == 10,
                let teamId = flags["apns-team-id"], teamId.count == 10
            else {
                throw UsageError("--apns-key needs --apns-key-id and --apns-team-id, 10 characters each")
            }
            let key: P256PrivateKey
            do {
                key = try P256PrivateKey(pem: try Self.readSecret(path, flag: "apns-key"))
            } catch let error as UsageError {
                throw error
            } catch {
                throw UsageError("--apns-key: \"\(path)\" is not an EC P-256 private key in PEM (.p8)")
            }
            apns = APNs(key: key, keyId: keyId, teamId: teamId, url: try Self.url(flags, "apns-url"))
        }
        if let path = flags["fcm-service-account"], !path.isEmpty {
            fcm = try Self.serviceAccount(path, flags: flags)
        }
        if let path = flags["vapid-key"], !path.isEmpty {
            guard let subject = flags["vapid-subject"],
                subject.hasPrefix("mailto:") || subject.hasPrefix("https://"), subject.count <= 256
            else {
                throw UsageError("--vapid-key needs --vapid-subject, a mailto: or https: contact")
            }
            let key: P256PrivateKey
            do {
                key = try P256PrivateKey(pem: try Self.readSecret(path, flag: "vapid-key"))
            } catch let error as UsageError {
                throw error
            } catch {
                throw UsageError("--vapid-key: \"\(path)\" is not an EC P-256 private key in PEM")
            }
            vapid = VAPID(key: key, subject: subject)
        }
    }

    private static func bool(_ flags: Flags, _ name: String) throws(UsageError) -> Bool {
        switch flags[name] ?? "false" {
        case "true": return true
        case "false": return false
        case let other: throw UsageError("--\(name) must be true or false, got \"\(other)\"")
        }
    }

    private static func url(_ flags: Flags, _ name: String) throws(UsageError) -> String? {
        guard let value = flags[name], !value.isEmpty else { return nil }
        guard value.hasPrefix("https://") else { throw UsageError("--\(name) must be an https:// URL") }
        return value.hasSuffix("/") ? String(value.dropLast()) : value
    }

    /// A key file's text: it must exist, be a regular file of at most 64 KiB, and be readable by
    /// no one but its owner (and group).
    static func readSecret(_ path: String, flag: String) throws(UsageError) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else { throw UsageError("--\(flag): \"\(path)\" does not exist") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw UsageError("--\(flag): \"\(path)\" is not a file") }
        guard info.st_mode & S_IROTH == 0, info.st_mode & S_IWOTH == 0 else {
            throw UsageError("--\(flag): \"\(path)\" is readable by others; chmod 600 it")
        }
        guard info.st_size <= 65_536 else { throw UsageError("--\(flag): \"\(path)\" is larger than 64 KiB") }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8)
        else { throw UsageError("--\(flag): cannot read \"\(path)\"") }
        return text
    }

    /// A Google service account file: `private_key`, `client_email`, `project_id`, `token_uri`.
    static func serviceAccount(_ path: String, flags: Flags) throws(UsageError) -> FCM {
        let text = try readSecret(path, flag: "fcm-service-account")
        guard case .object(let o)? = try? JSON(parsing: text) else {
            throw UsageError("--fcm-service-account: \"\(path)\" is not a JSON object")
        }
        func member(_ key: String) throws(UsageError) -> String {
            guard case .string(let s)? = o[key], !s.isEmpty else {
                throw UsageError("--fcm-service-account: \"\(path)\" has no \(key)")
            }
            return s
        }
        guard try member("type") == "service_account" else {
            throw UsageError("--fcm-service-account: \"\(path)\" is not a service account (type)")
        }
        let key: RSAPrivateKey
        do {
            key = try RSAPrivateKey(pem: try member("private_key"))
        } catch let error as UsageError {
            throw error
        } catch {
            throw UsageError("--fcm-service-account: the private_key of \"\(path)\" is not an RSA key in PEM")
        }
        let tokenURL: String
        if let given = try url(flags, "fcm-token-url") { tokenURL = given } else { tokenURL = try member("token_uri") }
        guard tokenURL.hasPrefix("https://") else {
            throw UsageError("--fcm-service-account: token_uri must be an https:// URL")
        }
        return FCM(
            key: key,
            clientEmail: try member("client_email"),
            projectId: try member("project_id"),
            tokenURL: tokenURL,
            url: try url(flags, "fcm-url") ?? "https://fcm.googleapis.com"
        )
    }
}
