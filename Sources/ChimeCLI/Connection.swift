import ChimeCore
import ChimeMQTT
import ChimeSupport
import Foundation

/// How to reach chimed: the broker, the topic prefix, the reply wait and the MQTT version.
/// Every command that talks to the broker takes these flags; `--broker`, `--topic-prefix`,
/// `--device` and `--timeout` also read `CHIME_BROKER`, `CHIME_TOPIC_PREFIX`, `CHIME_DEVICE` and
/// `CHIME_TIMEOUT`, as chimed does.
struct ConnectionOptions: Sendable {
    static let specs: [Flags.Spec] = [
        .init(
            "broker",
            default: "mqtt://127.0.0.1:1883",
            hints: ["host", "url", "server"],
            "broker URL, mqtt:// or mqtts://, optional user:password@"
        ),
        .init("topic-prefix", default: "chime", hints: ["prefix"], "the P of every topic"),
        .init(
            "timeout",
            default: "10s",
            "wait this long for the broker and for each reply (10s, 500ms); status: for the whole command"
        ),
        .init(
            "protocol",
            default: "5",
            env: false,
            "5: replies on a Response Topic; 311: replies on P/{device}/replies, matched by requestId"
        ),
        .init(
            "reply-topic",
            env: false,
            "MQTT 5 Response Topic (default: P/{device}/replies/cli-<random> with a user name, which the "
                + "deploy ACL lets the device and backends read; chime-cli/<random>/reply without)"
        ),
        .init("ca-file", "with mqtts://: PEM file of the CA certificates to trust instead of the system's"),
    ]

    /// `--device`, for the commands that address one device.
    static let deviceSpec = Flags.Spec("device", hints: ["device-id", "deviceId"], "the device id: P/{device}/cmd/...")

    var brokerURL: String
    var mqtt: MQTTOptions
    var topics: Topics
    var timeout: Duration
    /// `--reply-topic`, when given.
    var fixedReplyTopic: String?
    /// Makes this invocation's default reply topics its own.
    let nonce: String

    init(_ flags: Flags) throws(UsageError) {
        brokerURL = flags["broker"] ?? "mqtt://127.0.0.1:1883"
        do {
            mqtt = try MQTTOptions(url: brokerURL)
        } catch {
            throw UsageError("--broker: \(error.message)")
        }
        let prefix = flags["topic-prefix"] ?? "chime"
        guard !prefix.isEmpty, !prefix.contains("+"), !prefix.contains("#"), !prefix.hasSuffix("/"),
            !prefix.hasPrefix("$")
        else {
            throw UsageError("--topic-prefix must be a topic without wildcards, a trailing / or a leading $")
        }
        topics = Topics(prefix: prefix)
        let milliseconds = try Parse.duration(flags["timeout"] ?? "10s", flag: "timeout")
        timeout = .milliseconds(milliseconds)
        switch flags["protocol"] ?? "5" {
        case "5", "v5", "5.0": mqtt.protocolVersion = .v5
        case "311", "3.1.1", "v311": mqtt.protocolVersion = .v311
        case let other: throw UsageError("--protocol: expected 5 or 311, got \"\(other)\"")
        }
        if let caFile = flags["ca-file"] {
            guard mqtt.useTLS else { throw UsageError("--ca-file goes with an mqtts:// broker URL") }
            mqtt.tlsCAFile = caFile
        }
        mqtt.keepAlive = 30
        mqtt.reconnectDelay = .milliseconds(200) ... .seconds(5)
        var random = SystemRandomNumberGenerator()
        nonce = String(random.next() as UInt64, radix: 36)
        if let given = flags["reply-topic"] {
            guard !given.isEmpty, !given.contains("+"), !given.contains("#") else {
                throw UsageError("--reply-topic must be a topic without wildcards")
            }
            fixedReplyTopic = given
        }
    }

    /// The Response Topic for a command on `device`. With a user name (the deploy ACL), the
    /// device's own reply space: chimed honours no Response Topic inside another device's topics
    /// (PROTOCOL.md section 4), and the ACL lets backends read every device's replies.
    func replyTopic(for device: String) -> String {
        if let fixedReplyTopic { return fixedReplyTopic }
        if let user = mqtt.username, !user.isEmpty { return topics.replies(device) + "/cli-\(nonce)" }
        return "chime-cli/\(nonce)/reply"
    }

    /// `--device`, required.
    static func device(_ flags: Flags) throws(UsageError) -> String {
        guard let device = flags["device"] else {
            throw UsageError("--device is required (or set CHIME_DEVICE)")
        }
        guard DeviceID.isValid(device), device.first != "$" else {
            throw UsageError(
                "--device: \"\(device)\" is not 1 to 128 characters of A-Z a-z 0-9 _ . : @ - (not starting with $)"
            )
        }
        return device
    }

    /// The timeout as the user wrote it, for messages.
    var timeoutText: String {
        let ms = milliseconds(timeout)
        return ms % 1000 == 0 ? "\(ms / 1000)s" : "\(ms)ms"
    }
}

/// One MQTT session to the broker for the length of a command.
///
/// Commands go out with QoS 1. On MQTT 5 each carries a Response Topic unique to this invocation
/// and fresh Correlation Data (``MQTTRequester/request(topic:payload:responseTopic:properties:timeout:)``);
/// on MQTT 3.1.1 the reply comes on `P/{device}/replies` and is told apart by its `requestId`.
final class Connection: Sendable {
    let options: ConnectionOptions
    let requester: MQTTRequester
    /// When the whole command must be done (`status`); nil: each wait has `--timeout` of its own.
    let deadline: ContinuousClock.Instant?

    private init(options: ConnectionOptions, requester: MQTTRequester, deadline: ContinuousClock.Instant?) {
        self.options = options
        self.requester = requester
        self.deadline = deadline
    }

    /// Connects, waiting at most `--timeout` (and not past `deadline`).
    /// - Parameter deadline: when the whole command must be done; every wait of the connection
    ///   ends by then (``waitLimit``).
    /// - Throws: ``CLIFailure`` `.unreachable` when the broker does not accept the connection in time.
    static func open(
        _ options: ConnectionOptions,
        deadline: ContinuousClock.Instant? = nil
    ) async throws(CLIFailure) -> Connection {
        let requester: MQTTRequester
        do {
            requester = try MQTTRequester(options: options.mqtt)
        } catch {
            throw CLIFailure(.failed, "cannot set up the MQTT client: \(error.message)")
        }
        let connection = Connection(options: options, requester: requester, deadline: deadline)
        do {
            try await requester.connect(timeout: connection.waitLimit)
        } catch {
            requester.stop()
            throw CLIFailure(
                .unreachable,
                "cannot reach the broker at \(Self.redacted(options.brokerURL)) within \(options.timeoutText)"
            )
        }
        return connection
    }

    /// How long the next wait may take: `--timeout`, and no later than the deadline.
    var waitLimit: Duration {
        guard let deadline else { return options.timeout }
        return max(.zero, min(options.timeout, deadline - ContinuousClock.now))
    }

    deinit {
        requester.stop()
    }

    /// Disconnects cleanly.
    func close() {
        requester.stop()
    }

    var topics: Topics { options.topics }

    /// Sends a command and waits for its reply.
    /// - Returns: the reply's `result`.
    /// - Throws: ``CLIFailure`` `.reply` for an error reply (exit 1), `.unreachable` when no reply
    ///   comes within `--timeout` (exit 3).
    func send(_ op: ChimeCore.Operation, device: String, _ payload: JSONObject) async throws(CLIFailure) -> JSONObject {
        let reply = try await exchange(op, device: device, payload)
        guard case .bool(true)? = reply["ok"] else {
            if case .object(let error)? = reply["error"] { throw CLIFailure(reply: error) }
            throw CLIFailure(.failed, "chimed sent a reply that is neither ok nor an error: \(JSON.object(reply).text)")
        }
        guard case .object(let result)? = reply["result"] else {
            throw CLIFailure(.failed, "chimed sent an ok reply without a result: \(JSON.object(reply).text)")
        }
        return result
    }

    /// Follows a paged command's cursor (`list`, `inbox`): sends `op` with `payload`, a `limit` of at
    /// most 1000 and the previous page's `cursor`, until a page has no cursor or `wanted` items came.
    /// - Parameter page: takes one page's result, as sent and as read; returns how many items it
    ///   held and its cursor.
    /// - Throws: ``CLIFailure`` `.failed` when a page's cursor repeats an earlier one, or when more
    ///   pages come than a device can fill (``PageTrail``): chimed would never end the listing.
    func follow(
        _ op: ChimeCore.Operation,
        device: String,
        _ payload: JSONObject,
        wanted: Int,
        page: (_ raw: JSONObject, _ typed: ReplyResult) throws(CLIFailure) -> (count: Int, cursor: String?)
    ) async throws(CLIFailure) {
        var count = 0
        var trail = PageTrail(op)
        var cursor: String?
        repeat {
            var request = payload
            request["limit"] = .int(Int64(min(1000, wanted - count)))
            if let cursor { request["cursor"] = .string(cursor) }
            let raw = try await send(op, device: device, request)
            let (items, next) = try page(raw, try Self.typed(op, raw))
            count += items
            do {
                cursor = try trail.follow(next)
            } catch {
                throw CLIFailure(.failed, "\(error.message): stopped")
            }
        } while cursor != nil && count < wanted
    }

    /// A reply's `result` read as the engine wrote it.
    /// - Throws: ``CLIFailure`` `.failed` when it is not what `op` answers.
    static func typed(_ op: ChimeCore.Operation, _ result: JSONObject) throws(CLIFailure) -> ReplyResult {
        do throws(ChimeError) {
            return try ReplyResult(op: op, json: result)
        } catch {
            throw CLIFailure(.failed, "chimed sent a \(op.rawValue) result this chime cannot read: \(error.message)")
        }
    }

    /// The whole reply object.
    private func exchange(
        _ op: ChimeCore.Operation,
        device: String,
        _ payload: JSONObject
    ) async throws(CLIFailure) -> JSONObject {
        let topic = topics.command(device, op)
        let message: MQTTMessage
        do {
            switch options.mqtt.protocolVersion {
            case .v5:
                var properties = MQTTPublishProperties()
                properties.contentType = "application/json"
                message = try await requester.request(
                    topic: topic,
                    payload: JSON.object(payload).bytes,
                    responseTopic: options.replyTopic(for: device),
                    properties: properties,
                    timeout: waitLimit
                )
            case .v311:
                message = try await requestByRequestId(topic: topic, device: device, payload)
            }
        } catch let failure as CLIFailure {
            throw failure
        } catch let error as MQTTError where error.code == .timeout {
            throw CLIFailure(
                .unreachable,
                "no reply from chimed to the \(op.rawValue) command on \(topic) within \(options.timeoutText): "
                    + "is chimed running and serving device \(device)?"
            )
        } catch {
            throw CLIFailure(.unreachable, "cannot send \(op.rawValue) to \(topic): \(error)")
        }
        guard case .object(let reply)? = try? JSON(parsing: message.payload) else {
            throw CLIFailure(.failed, "the reply on \(message.topic) is not a JSON object")
        }
        return reply
    }

    /// MQTT 3.1.1: subscribe to the device's reply topic, wait for the reply echoing our `requestId`.
    private func requestByRequestId(topic: String, device: String, _ payload: JSONObject) async throws -> MQTTMessage {
        var payload = payload
        var random = SystemRandomNumberGenerator()
        let requestId = payload["requestId"]?.stringValue ?? "chime-cli-\(String(random.next() as UInt64, radix: 36))"
        payload["requestId"] = .string(requestId)
        let repliesTopic = topics.replies(device)
        try await requester.subscribe(repliesTopic, qos: 1, timeout: waitLimit)
        let expectation = requester.expectMessage { message in
            guard message.topic == repliesTopic, case .object(let reply)? = try? JSON(parsing: message.payload)
            else { return false }
            return reply["requestId"]?.stringValue == requestId
        }
        let code = try await requester.publish(
            topic: topic,
            payload: JSON.object(payload).bytes,
            qos: 1,
            timeout: waitLimit
        )
        if code >= 0x80 {
            throw CLIFailure(.failed, "the broker refused the command on \(topic) (reason code \(code))")
        }
        return try await expectation.value(timeout: waitLimit)
    }

    /// The device's time zone, read with an empty `device` command; nil when it has none.
    func deviceZone(_ device: String) async throws(CLIFailure) -> Zone? {
        try await deviceStatus(device)?.timeZone
    }

    /// The device as `device {}` reads it.
    func deviceStatus(_ device: String) async throws(CLIFailure) -> ReplyResult.DeviceStatus? {
        guard case .device(let status) = try Self.typed(.device, try await send(.device, device: device, [:])) else {
            return nil
        }
        return status
    }

    /// The URL without its password.
    static func redacted(_ url: String) -> String {
        guard let at = url.lastIndex(of: "@"), let scheme = url.range(of: "://") else { return url }
        let credentials = url[scheme.upperBound..<at]
        guard let colon = credentials.firstIndex(of: ":") else { return url }
        return url.replacingCharacters(in: colon..<at, with: ":***")
    }
}
