import ChimeCore
import ChimeHTTP
import ChimeMQTT
import ChimePush
import ChimeStore
import ChimeSupport
import Foundation

/// Everything `chimed` is told at start-up (PROTOCOL.md section 6), validated once.
public struct WorkerConfiguration: Sendable {
    /// `--broker`: where to connect, with optional credentials.
    public var broker: MQTTOptions
    public var brokerURL: String
    /// `--data-dir`: journal and snapshots.
    public var dataDirectory: String
    /// `--store`: a PostgreSQL connection URI that holds the journal and snapshots instead of
    /// `--data-dir`; nil: the data directory.
    public var store: String?
    /// `--topic-prefix`.
    public var topics: Topics
    /// `--worker-id`: names the persistent MQTT session and the status topic.
    public var workerId: String
    /// `--partition`.
    public var partition: Partition
    /// `--slots` and `--lease-ttl`: many workers on one PostgreSQL store, sharing its slots through
    /// leases; nil: this worker alone serves its store (its `partition` of the devices).
    public var slots: (count: Int, leaseTTL: Duration)?
    /// `--routing`: with slots, how commands reach the owner of their slot.
    public var routing = CommandRouting.broadcast
    /// `--fsync`.
    public var fsync: FsyncPolicy
    public var engine: EngineConfiguration
    public var limits: CommandLimits
    /// `--device-rate` and `--device-burst`: the engine time each device may use.
    public var deviceBudget: DeviceBudget
    /// `--stats-interval` in seconds; 0 turns stats off.
    public var statsInterval: Int
    /// `--snapshot-bytes`: journal bytes written since the last snapshot that trigger the next.
    public var snapshotBytes: Int
    /// `--metrics-listen`: where `GET /metrics`, `/livez` and `/readyz` are served; nil: nowhere.
    public var metricsListen: String?
    public var logLevel: LogLevel
    public var logFormat: Logger.Format
    /// `--zoneinfo`: the zone database directory (TZif files); nil: `$TZDIR`, else /usr/share/zoneinfo
    /// when it exists (``ZoneDatabase/defaultDirectories()``). Zones missing there come from Foundation.
    public var zoneinfo: String?
    /// `--zoneinfo-check`: seconds between two readings of the zones in use, for changed rules; 0: only
    /// on SIGHUP.
    public var zoneinfoCheck: Int
    /// Push delivery: the credentials, the endpoint policy, the bounds.
    public var push: PushConfiguration

    public static let flagSpecs: [Flags.Spec] =
        [
            .init(
                "broker",
                default: "mqtt://127.0.0.1:1883",
                "broker URL, mqtt:// or mqtts://, optional user:password@"
            ),
            .init("data-dir", default: "./data", "journal and snapshots; locked against a second worker"),
            .init(
                "store",
                default: nil,
                "postgres://user@host/db: keep the journal and snapshots in PostgreSQL instead of --data-dir"
            ),
            .init("topic-prefix", default: "chime", "the P of every topic"),
            .init(
                "worker-id",
                default: nil,
                "unique per broker; names the persistent MQTT session (default: host name)"
            ),
            .init("partition", default: "0/1", "k/N: serve devices whose crc32(deviceId) mod N is k"),
            .init(
                "slots",
                default: "0",
                range: 0...SlotOwnership.slotCounts.upperBound,
                "S > 0: share a PostgreSQL --store with other workers through S slots and their leases (0: off)"
            ),
            .init(
                "lease-ttl",
                default: "10",
                range: 2...300,
                "seconds a slot's lease lasts in the store unless renewed (with --slots)"
            ),
            .init(
                "routing",
                default: "broadcast",
                "with --slots: broadcast (every worker gets every command) or slot (each command reaches one "
                    + "worker, forwarded to its slot's owner; needs shared subscriptions and P/$slot/# in the ACL)"
            ),
            .init(
                "fsync",
                default: "always",
                "always, interval:MS or none (see docs/durability.md: what each can lose)"
            ),
            .init("min-repeat-seconds", default: "60", range: 1...31_536_000, "reject repeats more often than this"),
            .init(
                "max-pending-per-device",
                default: "1000",
                range: 1...DeviceLimits.maxPendingPerDevice,
                "notifications a device may hold"
            ),
            .init(
                "max-bytes-per-device",
                default: "1048576",
                range: 1024...(1 << 40),
                "bytes of notifications (content, userInfo, rules) a device may hold"
            ),
            .init(
                "receipts",
                default: "false",
                "true: every device that did not choose keeps deliveries in its inbox until it acknowledges them"
            ),
            .init(
                "history",
                default: "true",
                "false: devices that did not choose keep no delivery history (device {\"history\": true} still does)"
            ),
            .init(
                "inbox-ttl",
                default: "604800",
                range: 1...DeviceLimits.largestInboxTTLSeconds,
                "seconds an unacknowledged delivery stays in an inbox"
            ),
            .init(
                "max-inbox-per-device",
                default: "100",
                range: 1...DeviceLimits.maxInboxPerDevice,
                "unacknowledged deliveries a device's inbox holds (oldest go first)"
            ),
            .init(
                "max-inbox-bytes-per-device",
                default: "1048576",
                range: 1024...DeviceLimits.maxInboxBytesPerDevice,
                "bytes of deliveries a device's inbox holds"
            ),
            .init(
                "history-per-device",
                default: "\(EngineConfiguration.Receipts.defaultHistoryPerDevice)",
                range: 1...DeviceLimits.maxHistoryPerDevice,
                "deliveries a device's history keeps"
            ),
            .init(
                "max-command-bytes",
                default: "262144",
                range: 256...CommandLimits.largestCommandBytes,
                "largest command payload"
            ),
            .init(
                "max-userinfo-bytes",
                default: "4096",
                range: 2...CommandLimits.largestCommandBytes,
                "largest serialized userInfo"
            ),
            .init(
                "device-rate",
                default: "250",
                range: 0...DeviceBudget.largestRate,
                "milliseconds of engine time per second one device may use (past it: rate_limited); 0: no limit"
            ),
            .init(
                "device-burst",
                default: "1000",
                range: 1...DeviceBudget.largestBurst,
                "milliseconds of engine time one device may use at once"
            ),
            .init(
                "stats-interval",
                default: "10",
                range: 0...86_400,
                "seconds between stats publications; 0 turns them off"
            ),
            .init(
                "snapshot-bytes",
                default: "268435456",
                range: 65_536...(1 << 40),
                "journal bytes since the last snapshot that trigger the next"
            ),
            .init(
                "metrics-listen",
                default: nil,
                "HOST:PORT serving GET /metrics (Prometheus), /livez and /readyz; off when unset"
            ),
            .init(
                "zoneinfo",
                default: nil,
                "zone database directory of TZif files (default: $TZDIR, else /usr/share/zoneinfo); others from Foundation"
            ),
            .init(
                "zoneinfo-check",
                default: "300",
                range: 0...86_400,
                "seconds between readings of the zones in use for changed rules (tzdata upgrades); 0: only on SIGHUP"
            ),
        ] + PushConfiguration.flagSpecs + [
            .init("log-level", default: "info", "trace, debug, info, notice, warning, error"),
            .init("log-format", default: "text", "text or json"),
            .init("help", value: false, env: false, "show this help"),
            .init("version", value: false, env: false, "show the version"),
        ]

    /// Builds the configuration from parsed flags; every problem is one line naming the flag.
    public init(flags: Flags) throws(UsageError) {
        brokerURL = flags["broker"] ?? ""
        do {
            broker = try MQTTOptions(url: brokerURL)
        } catch {
            throw UsageError("--broker: \(error)")
        }
        dataDirectory = flags["data-dir"] ?? "./data"
        guard !dataDirectory.isEmpty else { throw UsageError("--data-dir must not be empty") }
        if let store = flags["store"], !store.isEmpty {
            guard store.hasPrefix("postgres://") || store.hasPrefix("postgresql://") else {
                throw UsageError(
                    "--store: expected a PostgreSQL connection URI (postgres://user@host:5432/db), got \"\(redacted(store))\""
                )
            }
            self.store = store
        }
        let prefix = flags["topic-prefix"] ?? "chime"
        guard !prefix.isEmpty, !prefix.contains("+"), !prefix.contains("#"), !prefix.hasSuffix("/"),
            !prefix.hasPrefix("$")
        else {
            throw UsageError(
                "--topic-prefix must be a topic without wildcards, a trailing / or a leading $, got \"\(prefix)\""
            )
        }
        topics = Topics(prefix: prefix)
        workerId = flags["worker-id"] ?? ProcessInfo.processInfo.hostName
        guard !workerId.isEmpty, workerId.utf8.count <= 64, DeviceID.isValid(workerId) else {
            throw UsageError("--worker-id must be 1 to 64 characters of A-Z a-z 0-9 _ . : @ -, got \"\(workerId)\"")
        }
        guard let partition = Partition(parsing: flags["partition"] ?? "") else {
            throw UsageError("--partition must be k/N with 0 <= k < N, got \"\(flags["partition"] ?? "")\"")
        }
        self.partition = partition
        let slotCount = try flags.integer("slots")
        let leaseTTL = try flags.integer("lease-ttl")
        if slotCount > 0 {
            guard store != nil else {
                throw UsageError("--slots needs --store postgres://...: the workers share their slots through it")
            }
            guard partition.count == 1 else {
                throw UsageError("--slots and --partition exclude each other: with slots, workers share every device")
            }
            slots = (slotCount, .seconds(leaseTTL))
        }
        guard let routing = CommandRouting(rawValue: flags["routing"] ?? "") else {
            throw UsageError("--routing must be broadcast or slot, got \"\(flags["routing"] ?? "")\"")
        }
        guard routing == .broadcast || slotCount > 0 else {
            throw UsageError("--routing slot needs --slots: commands are routed to the owner of their slot")
        }
        self.routing = routing
        guard let fsync = FsyncPolicy(parsing: flags["fsync"] ?? "") else {
            throw UsageError("--fsync must be always, interval:MS or none, got \"\(flags["fsync"] ?? "")\"")
        }
        self.fsync = fsync
        engine = EngineConfiguration(
            minRepeatSeconds: Int64(try flags.integer("min-repeat-seconds")),
            maxPendingPerDevice: try flags.integer("max-pending-per-device"),
            maxBytesPerDevice: try flags.integer("max-bytes-per-device")
        )
        switch flags["receipts"] ?? "false" {
        case "true": engine.receipts.byDefault = true
        case "false": engine.receipts.byDefault = false
        case let other: throw UsageError("--receipts must be true or false, got \"\(other)\"")
        }
        switch flags["history"] ?? "true" {
        case "true": engine.receipts.historyByDefault = true
        case "false": engine.receipts.historyByDefault = false
        case let other: throw UsageError("--history must be true or false, got \"\(other)\"")
        }
        engine.receipts.inboxTTL =
            Int64(try flags.integer("inbox-ttl")) * 1000
        engine.receipts.maxInboxPerDevice = try flags.integer("max-inbox-per-device")
        engine.receipts.maxInboxBytesPerDevice = try flags.integer("max-inbox-bytes-per-device")
        engine.receipts.historyPerDevice = try flags.integer("history-per-device")
        limits = CommandLimits(
            maxCommandBytes: try flags.integer("max-command-bytes"),
            maxUserInfoBytes: try flags.integer("max-userinfo-bytes")
        )
        deviceBudget = DeviceBudget(
            rate: Double(try flags.integer("device-rate")),
            burst: Double(try flags.integer("device-burst"))
        )
        statsInterval = try flags.integer("stats-interval")
        snapshotBytes = try flags.integer("snapshot-bytes")
        if let address = flags["metrics-listen"], !address.isEmpty {
            do {
                _ = try HTTPServer.parse(listen: address)
            } catch {
                throw UsageError("--metrics-listen: \(error.message)")
            }
            metricsListen = address
        }
        if let directory = flags["zoneinfo"], !directory.isEmpty {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue
            else { throw UsageError("--zoneinfo: \"\(directory)\" is not a directory") }
            zoneinfo = directory
        }
        zoneinfoCheck = try flags.integer("zoneinfo-check")
        guard let level = LogLevel(name: flags["log-level"] ?? "") else {
            throw UsageError("--log-level must be one of \(LogLevel.allCases.map(\.name).joined(separator: ", "))")
        }
        logLevel = level
        guard let format = Logger.Format(rawValue: flags["log-format"] ?? "") else {
            throw UsageError("--log-format must be text or json")
        }
        logFormat = format
        broker.clientId = "chimed-\(workerId)"
        push = try PushConfiguration(flags: flags)
        engine.push.providers = push.providers
        engine.push.endpoints = push.endpoints
        engine.push.expiry = Int64(push.expiry) * 1000
    }
}
