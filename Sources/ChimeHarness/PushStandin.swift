import ChimeProtocol
import Foundation

/// The push services' stand-in (`Tests/PushStandin/standin.py`, started by `scripts/push-standin`):
/// APNs, FCM and Web Push over TLS on a loopback port, each request checked with independent
/// libraries, and a plain-HTTP control port to script answers and read what arrived.
public final class PushStandin: Sendable {
    public let process: ChildProcess
    public let port: Int
    public let controlPort: Int
    public let keys: String
    public let certificates: TestCertificates
    let directory: TemporaryDirectory

    /// The repository's root (this file is `Sources/ChimeHarness/PushStandin.swift`).
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    private init(
        process: ChildProcess,
        port: Int,
        controlPort: Int,
        keys: String,
        certificates: TestCertificates,
        directory: TemporaryDirectory
    ) {
        self.process = process
        self.port = port
        self.controlPort = controlPort
        self.keys = keys
        self.certificates = certificates
        self.directory = directory
    }

    /// Makes the credentials and a test CA, and starts the stand-in on free ports.
    public static func start() async throws -> PushStandin {
        let directory = try TemporaryDirectory(prefix: "chime-push")
        let keys = directory.appending("keys")
        let script = root + "/scripts/push-standin"
        let maker = try ChildProcess(script, arguments: ["keys", "--dir", keys])
        try maker.start()
        guard await maker.waitForExit(timeout: .seconds(300)) == .exited(0) else {
            throw HarnessError("push-standin keys failed: \(maker.standardErrorLines.joined(separator: "\n"))")
        }
        let certificates = try await TestCertificates.make(in: directory)
        let process = try ChildProcess(
            script,
            arguments: [
                "serve", "--keys", keys, "--cert", certificates.certificateFile, "--key", certificates.keyFile,
                "--port", "0", "--control-port", "0", "--quiet",
            ]
        )
        try process.start()
        guard
            let line = await process.waitForLine(
                onStandardError: false,
                timeout: .seconds(60),
                where: {
                    $0.hasPrefix("ready ")
                }
            )
        else {
            throw HarnessError("the push stand-in did not start: \(process.standardErrorLines.joined(separator: "\n"))")
        }
        let parts = line.split(separator: " ")
        guard parts.count == 3, let port = Int(parts[1]), let control = Int(parts[2]) else {
            throw HarnessError("the push stand-in said \(line)")
        }
        return PushStandin(
            process: process,
            port: port,
            controlPort: control,
            keys: keys,
            certificates: certificates,
            directory: directory
        )
    }

    public func stop() async {
        process.terminate()
        _ = await process.waitForExit(timeout: .seconds(10))
    }

    public var base: String { "https://127.0.0.1:\(port)" }

    /// chimed's flags for all three providers, pointed here.
    public func chimedFlags() throws -> [String] {
        let apns = try Self.object(Data(contentsOf: URL(fileURLWithPath: keys + "/apns.json")))
        return [
            "--apns-key", keys + "/apns-key.p8", "--apns-key-id", apns["keyId"]?.stringValue ?? "",
            "--apns-team-id", apns["teamId"]?.stringValue ?? "", "--apns-url", base,
            "--fcm-service-account", keys + "/fcm-service-account.json", "--fcm-url", base,
            "--fcm-token-url", base + "/token",
            "--vapid-key", keys + "/vapid-private.pem", "--vapid-subject", "mailto:ops@example.com",
            "--webpush-allowed-hosts", "127.0.0.1", "--push-allow-loopback", "true",
            "--push-ca-file", certificates.caFile,
        ]
    }

    // MARK: Control

    /// What each service answered so far, by status (`"none"`: not answered yet), and `"last"`:
    /// when the newest answered request arrived, in seconds since the epoch.
    public func counts() throws -> [String: [String: Double]] {
        guard case .object(let o) = try call("GET", "/counts") else { throw HarnessError("/counts: not an object") }
        var counts: [String: [String: Double]] = [:]
        for (service, value) in o {
            guard case .object(let byStatus) = value else { continue }
            for (status, n) in byStatus {
                switch n {
                case .int(let n): counts[service, default: [:]][status] = Double(n)
                case .double(let d): counts[service, default: [:]][status] = d
                default: break
                }
            }
        }
        return counts
    }

    /// Every request received, in order (`service`, `path`, `key`, `headers`, `body`, `status`, `checks`).
    public func received(service: String? = nil) throws -> [JSONObject] {
        let path = service.map { "/received?service=\($0)" } ?? "/received"
        guard case .array(let items) = try call("GET", path) else { throw HarnessError("/received: not an array") }
        return items.compactMap(\.objectValue)
    }

    /// A new Web Push subscription, as a browser's `PushSubscription.toJSON()` gives it.
    public func subscription() throws -> JSONObject {
        guard case .object(let o) = try call("POST", "/subscriptions", "{}") else {
            throw HarnessError("/subscriptions: not an object")
        }
        return o
    }

    /// Ends a subscription, as a browser whose user revoked the permission: pushes to it get 410.
    public func unsubscribe(_ id: String) throws { _ = try call("DELETE", "/subscriptions/\(id)") }

    /// The next requests for `key` of `service` get these responses, in order.
    public func script(_ service: String, key: String, _ responses: String) throws {
        _ = try call("POST", "/script", #"{"service":"\#(service)","key":"\#(key)","responses":\#(responses)}"#)
    }

    /// Forgets every FCM access token it issued: the next push with one is answered 401.
    public func expireTokens() throws { _ = try call("POST", "/expire-tokens", "{}") }

    /// Forgets what was received and scripted, and ends every black hole.
    public func reset() throws { _ = try call("POST", "/reset", "{}") }

    /// Requests to `service` are taken and never answered while on.
    public func blackhole(_ service: String, _ on: Bool) throws {
        _ = try call("POST", "/blackhole", #"{"service":"\#(service)","on":\#(on)}"#)
    }

    @discardableResult
    func call(_ method: String, _ path: String, _ body: String = "") throws -> JSON {
        let request =
            "\(method) \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
        let response = try HTTPProbe.parse(HTTPProbe.exchange(port: controlPort, Array(request.utf8)))
        guard response.status / 100 == 2 else {
            throw HarnessError("\(method) \(path): HTTP \(response.status) \(response.body)")
        }
        return try JSON(parsing: response.body)
    }

    static func object(_ data: Data) throws -> JSONObject {
        guard case .object(let o) = try JSON(parsing: [UInt8](data)) else { throw HarnessError("not a JSON object") }
        return o
    }
}
