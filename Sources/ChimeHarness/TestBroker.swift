import ChimeMQTT
import Foundation
import Synchronization

/// A real `mosquitto` for one test, on a free port of 127.0.0.1, with its configuration, log and
/// persistence file in a temporary directory.
///
/// It never outlives the test process: `ChildProcess` gives it a watchdog that kills it when the test
/// process dies, `deinit` kills it when the object goes away, and `stop()` ends it cleanly.
///
/// ```swift
/// let broker = try await TestBroker.start()
/// let client = try MQTTClient(options: broker.clientOptions(clientId: "c1")) { event in ... }
/// ...
/// await broker.stop()
/// ```
public final class TestBroker: Sendable {
    /// How the broker is configured.
    public struct Configuration: Sendable {
        /// Keep sessions, subscriptions and queued messages in `mosquitto.db` across `stop()`/`restart()`
        /// (mosquitto writes it on SIGTERM; `kill()` loses what changed since).
        public var persistence: Bool
        /// `log_type all`: every packet in `log` (with `d1` on re-sent publishes). Slow under load.
        public var verboseLog: Bool
        /// More `mosquitto.conf` lines: `password_file`, `acl_file`, `max_inflight_messages 0`, ...
        public var extraLines: [String]
        /// Serve TLS (only) with this server certificate; connect with `mqtts://` and `certificates.caFile`.
        public var tls: TestCertificates?

        public init(
            persistence: Bool = false,
            verboseLog: Bool = false,
            extraLines: [String] = [],
            tls: TestCertificates? = nil
        ) {
            self.persistence = persistence
            self.verboseLog = verboseLog
            self.extraLines = extraLines
            self.tls = tls
        }
    }

    public let host = "127.0.0.1"
    public let port: Int
    public let configuration: Configuration
    /// Holds `mosquitto.conf`, `mosquitto.log` and `mosquitto.db`; removed with the broker.
    public let directory: TemporaryDirectory
    private let process: Mutex<ChildProcess?>
    /// While the broker is stopped: a socket bound to its port, not listening, so that connecting
    /// is refused as when nothing listens, and no other test's broker takes the port before
    /// `restart()`.
    private let placeholder = Mutex<Int32?>(nil)

    /// `mqtt://127.0.0.1:PORT` (`mqtts://localhost:PORT` with TLS: the certificate names localhost).
    public var url: String {
        configuration.tls == nil ? "mqtt://\(host):\(port)" : "mqtts://localhost:\(port)"
    }

    /// Options to connect to this broker, everything else at its defaults.
    public func clientOptions(
        clientId: String? = nil,
        protocolVersion: MQTTOptions.ProtocolVersion = .v5
    ) -> MQTTOptions {
        var options = MQTTOptions(host: host, port: port)
        if let tls = configuration.tls {
            options.host = "localhost"
            options.useTLS = true
            options.tlsCAFile = tls.caFile
        }
        options.clientId = clientId
        options.protocolVersion = protocolVersion
        return options
    }

    /// Starts a broker and waits until it accepts connections.
    /// - Throws: `HarnessError` if mosquitto is not installed (run `make test`) or does not start.
    public static func start(_ configuration: Configuration = .init()) async throws -> TestBroker {
        guard ChildProcess.find("mosquitto") != nil else {
            throw HarnessError(
                "mosquitto is not installed (looked in PATH and /usr/sbin): run `make test`, "
                    + "which installs it with scripts/bootstrap"
            )
        }
        let directory = try TemporaryDirectory(prefix: "chime-broker")
        var lastError: (any Error)?
        for _ in 0..<5 {
            let port = try freePort()
            let broker = TestBroker(port: port, configuration: configuration, directory: directory)
            do {
                try await broker.launch()
                return broker
            } catch let error as PortTaken {
                lastError = error.underlying  // another process took the port between probe and bind
            }
        }
        throw lastError ?? HarnessError("mosquitto did not start")
    }

    private init(port: Int, configuration: Configuration, directory: TemporaryDirectory) {
        self.port = port
        self.configuration = configuration
        self.directory = directory
        self.process = Mutex(nil)
    }

    deinit {
        process.withLock { $0?.kill() }
        releasePort()
    }

    /// Whether the broker process runs.
    public var isRunning: Bool {
        process.withLock { $0?.isRunning ?? false }
    }

    /// The broker's log so far.
    public var log: String {
        (try? String(contentsOfFile: directory.appending("mosquitto.log"), encoding: .utf8)) ?? ""
    }

    /// Stops the broker with SIGTERM (it saves persistence and closes connections) and waits.
    public func stop() async {
        guard let child = process.withLock({ $0 }) else { return }
        child.terminate()
        if await child.waitForExit(timeout: .seconds(10)) == nil {
            child.kill()
            await child.waitForExit(timeout: .seconds(10))
        }
        holdPort()
    }

    /// Kills the broker with SIGKILL (no goodbye, no persistence save) and waits.
    public func kill() async {
        guard let child = process.withLock({ $0 }) else { return }
        child.kill()
        await child.waitForExit(timeout: .seconds(10))
        holdPort()
    }

    /// Binds the stopped broker's port (best effort: a failure only leaves the port free).
    private func holdPort() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        let bound = withLoopback(port: port) { bind(fd, $0, $1) == 0 }
        guard bound else {
            close(fd)
            return
        }
        placeholder.withLock { old in
            if let old { close(old) }
            old = fd
        }
    }

    private func releasePort() {
        placeholder.withLock { fd in
            if let fd { close(fd) }
            fd = nil
        }
    }

    /// Freezes the broker (SIGSTOP): connections stay open but nothing is read or answered.
    public func pause() {
        process.withLock { $0?.signal(SIGSTOP) }
    }

    /// Makes the broker read its password and ACL files again (SIGHUP).
    public func reload() {
        process.withLock { $0?.signal(SIGHUP) }
    }

    /// Thaws a paused broker (SIGCONT).
    public func resume() {
        process.withLock { $0?.signal(SIGCONT) }
    }

    /// Starts the broker again on the same port (stopping it first if it runs).
    /// - Throws: `HarnessError` if it does not come back.
    public func restart() async throws {
        if isRunning {
            await stop()
        }
        do {
            try await launch()
        } catch let error as PortTaken {
            throw error.underlying
        }
    }

    private struct PortTaken: Error {
        let underlying: HarnessError
    }

    private func launch() async throws {
        releasePort()
        let configPath = directory.appending("mosquitto.conf")
        try configurationText().write(toFile: configPath, atomically: true, encoding: .utf8)
        let child = try ChildProcess("mosquitto", arguments: ["-c", configPath])
        try child.start()
        process.withLock { $0 = child }
        let port = self.port
        var accepting = false
        _ = await eventually(timeout: .seconds(10)) {
            accepting = Self.accepts(port: port)
            return accepting || !child.isRunning
        }
        if accepting { return }
        if !child.isRunning {
            await child.waitForExit(timeout: .seconds(2))
            let output = (child.standardErrorLines + child.standardOutputLines).joined(separator: "\n")
            let why = output + "\n" + log
            let error = HarnessError("mosquitto exited at start on port \(port): \(why)")
            if why.contains("Address already in use") { throw PortTaken(underlying: error) }
            throw error
        }
        child.kill()
        throw HarnessError("mosquitto did not accept connections on port \(port) within 10 s:\n\(log)")
    }

    private func configurationText() -> String {
        var lines = [
            "listener \(port) \(host)",
            "allow_anonymous true",
            "log_dest file \(directory.appending("mosquitto.log"))",
            "connection_messages true",
            "log_timestamp true",
            // As every broker configuration in deploy/ does: without it, the broker's replies wait
            // for the client's delayed ACK (Nagle's algorithm), ~40 ms a request.
            "set_tcp_nodelay true",
        ]
        // One type per line: mosquitto reads only the first word of a log_type line.
        lines +=
            configuration.verboseLog
            ? ["log_type all"]
            : ["error", "warning", "notice", "information"].map {
                "log_type \($0)"
            }
        if let tls = configuration.tls {
            lines += ["certfile \(tls.certificateFile)", "keyfile \(tls.keyFile)"]
        }
        if geteuid() == 0 {
            lines.append("user root")  // otherwise mosquitto drops to user 'mosquitto', who cannot write here
        }
        if configuration.persistence {
            lines += ["persistence true", "persistence_location \(directory.path)/", "persistence_file mosquitto.db"]
        } else {
            lines.append("persistence false")
        }
        return (lines + configuration.extraLines).joined(separator: "\n") + "\n"
    }

    /// Ports ``freePort()`` handed out in this process.
    private static let handedOut = Mutex(Set<Int>())

    /// A port that was free a moment ago and that this process has not been handed before: the kernel
    /// gives a port it just freed to the next bind of port 0 now and then, and a test that asked for two
    /// ports (a broker's, then chimed's metrics) got one twice and failed with "Address already in use".
    public static func freePort() throws -> Int {
        for _ in 0..<1000 {
            let port = try unusedPort()
            if handedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
        throw HarnessError("no free port this process has not used already")
    }

    /// Binds port 0, reads what the kernel chose, closes.
    private static func unusedPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(fd, generic, length) == 0 && getsockname(fd, generic, &length) == 0
            }
        }
        guard bound else { throw HarnessError("bind: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether something accepts TCP connections on 127.0.0.1:port.
    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withLoopback(port: port) { connect(fd, $0, $1) == 0 }
    }

}
