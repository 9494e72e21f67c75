import Foundation
import Synchronization

/// A real PostgreSQL for one test: its own cluster in a temporary directory, a `postgres` on a free
/// port of 127.0.0.1, trust authentication for the `postgres` role.
///
/// The server refuses to run as root, so when the tests run as root the directory is given to the
/// `postgres` OS user (Debian's `postgresql` package creates it) and the programs run as that user
/// through `setpriv`, which execs them in place: the process the harness holds *is* the postmaster,
/// so signals reach it directly (`runuser` and `su` would stay in between as a parent).
///
/// `initdb` runs once per machine and PostgreSQL version, into a template cluster under `/tmp`
/// that each server copies; the copy takes a fraction of a second where `initdb` takes seconds.
///
/// It never outlives the test process: `ChildProcess`'s watchdog kills the postmaster when the test
/// process dies (its backends then exit by themselves), and `deinit` kills it and every backend.
///
/// ```swift
/// let server = try await TestPostgres.start()
/// let connection = try PostgresConnection(server.uri)
/// ...
/// await server.stop()
/// ```
public final class TestPostgres: Sendable {
    /// How the server runs.
    public struct Configuration: Sendable {
        /// `fsync`: off by default, which is safe against a killed server (the kernel keeps what was
        /// written) but not against a crash of the machine, and much faster on a shared test host.
        public var fsync: Bool
        /// More `-c name=value` settings, such as `synchronous_commit=off` or `max_connections=20`.
        public var settings: [String: String]

        public init(fsync: Bool = false, settings: [String: String] = [:]) {
            self.fsync = fsync
            self.settings = settings
        }
    }

    public let host = "127.0.0.1"
    public let port: Int
    /// The superuser role, `postgres`, with trust authentication.
    public let user = "postgres"
    /// The database the cluster starts with.
    public let database = "postgres"
    public let configuration: Configuration
    /// Holds the cluster (`data/`) and the Unix socket; removed with the server.
    public let directory: TemporaryDirectory
    /// The directory with `postgres`, `initdb`, ... (`/usr/lib/postgresql/15/bin`).
    public let binaries: String
    private let process = Mutex<ChildProcess?>(nil)
    /// While the server is stopped: a socket bound to its port, not listening, so that connecting is
    /// refused and no other test's server takes the port before ``restart()``.
    private let placeholder = Mutex<Int32?>(nil)

    /// `postgresql://postgres@127.0.0.1:PORT/postgres`.
    public var uri: String { uri(database: database) }

    /// The URI of a database of this server.
    public func uri(database: String) -> String {
        "postgresql://\(user)@\(host):\(port)/\(database)"
    }

    /// The cluster's data directory.
    public var dataDirectory: String { directory.appending("data") }

    /// Whether the postmaster runs.
    public var isRunning: Bool {
        process.withLock { $0?.isRunning ?? false }
    }

    /// What the server logged on standard error since it was last started.
    public var log: [String] {
        process.withLock { ($0?.standardErrorLines ?? []) + ($0?.standardOutputLines ?? []) }
    }

    /// The postmaster's process id, 0 when it does not run.
    public var pid: Int32 {
        process.withLock { $0?.isRunning == true ? $0?.pid ?? 0 : 0 }
    }

    /// Creates a cluster, starts the server and waits until it accepts connections.
    /// - Throws: `HarnessError` if PostgreSQL is not installed (run `make test`) or does not start.
    public static func start(_ configuration: Configuration = .init()) async throws -> TestPostgres {
        guard let binaries = findBinaries() else {
            throw HarnessError(
                "PostgreSQL is not installed (looked for /usr/lib/postgresql/*/bin/postgres): run `make test`, "
                    + "which installs it with scripts/bootstrap"
            )
        }
        let template = try await Template.shared.path(binaries: binaries)
        let directory = try TemporaryDirectory(prefix: "chime-postgres")
        try giveToServerUser(directory.path)
        try await run(
            "cp",
            ["-a", template + "/data", directory.appending("data")],
            what: "copying the template cluster"
        )
        return try await launchOnAFreePort(directory: directory, configuration: configuration, binaries: binaries)
    }

    /// Starts the cluster in `directory` on a free port, trying another when a process took the one
    /// probed before the server bound it.
    private static func launchOnAFreePort(
        directory: TemporaryDirectory,
        configuration: Configuration,
        binaries: String
    ) async throws -> TestPostgres {
        var lastError: (any Error)?
        for _ in 0..<5 {
            let server = TestPostgres(
                port: try TestBroker.freePort(),
                configuration: configuration,
                directory: directory,
                binaries: binaries
            )
            do {
                try await server.launch()
                return server
            } catch let error as PortTaken {
                lastError = error.underlying
            }
        }
        throw lastError ?? HarnessError("postgres did not start")
    }

    /// A streaming standby of `primary`, from a base backup of it (`pg_basebackup -R`), on a port of
    /// its own: read-only until ``promote()``. With `synchronous_standby_names` set on the primary
    /// (``Configuration/settings``), the primary's commits wait for it.
    public static func startStandby(of primary: TestPostgres) async throws -> TestPostgres {
        let directory = try TemporaryDirectory(prefix: "chime-postgres-standby")
        try giveToServerUser(directory.path)
        let (program, arguments) = asServerUser(
            primary.binaries + "/pg_basebackup",
            [
                "-h", primary.host, "-p", String(primary.port), "-U", primary.user, "-D", directory.appending("data"),
                "-R", "-X", "stream", "--no-sync",
            ]
        )
        try await run(program, arguments, what: "taking a base backup of the primary")
        return try await launchOnAFreePort(
            directory: directory,
            configuration: Configuration(fsync: primary.configuration.fsync),
            binaries: primary.binaries
        )
    }

    /// Promotes a standby to a primary (`pg_ctl promote`, which waits until it takes writes).
    public func promote() async throws {
        let (program, arguments) = Self.asServerUser(binaries + "/pg_ctl", ["promote", "-w", "-D", dataDirectory])
        try await Self.run(program, arguments, what: "promoting the standby")
    }

    private init(port: Int, configuration: Configuration, directory: TemporaryDirectory, binaries: String) {
        self.port = port
        self.configuration = configuration
        self.directory = directory
        self.binaries = binaries
    }

    deinit {
        process.withLock { child in
            guard let child, child.isRunning else { return }
            let backends = Self.children(of: child.pid)
            child.kill()
            backends.forEach { Glibc.kill($0, SIGKILL) }
        }
        releasePort()
    }

    /// Stops the server with a fast shutdown (SIGINT: open transactions are rolled back, clients
    /// disconnected, a checkpoint written) and waits until it has exited.
    public func stop() async {
        guard let child = process.withLock({ $0 }), child.isRunning else { return }
        child.signal(SIGINT)
        if await child.waitForExit(timeout: .seconds(30)) == nil {
            await kill()
            return
        }
        holdPort()
    }

    /// Kills the postmaster and every backend with SIGKILL, as if the machine died (the next start
    /// runs crash recovery), and waits until they are gone.
    public func kill() async {
        guard let child = process.withLock({ $0 }), child.isRunning else { return }
        // Collected before the postmaster dies: afterwards the backends' parent is someone else.
        let backends = Self.children(of: child.pid)
        child.kill()
        backends.forEach { Glibc.kill($0, SIGKILL) }
        await child.waitForExit(timeout: .seconds(10))
        _ = await eventually(timeout: .seconds(10)) { backends.allSatisfy { !Self.exists($0) } }
        holdPort()
    }

    /// Freezes the server (SIGSTOP to the postmaster and every backend): connections stay open and
    /// new ones are accepted by the kernel, but nothing is answered.
    public func pause() {
        guard let pid = process.withLock({ $0?.isRunning == true ? $0?.pid : nil }) else { return }
        Glibc.kill(pid, SIGSTOP)  // first, so that it starts no backend meanwhile
        Self.children(of: pid).forEach { Glibc.kill($0, SIGSTOP) }
    }

    /// Thaws a paused server (SIGCONT).
    public func resume() {
        guard let pid = process.withLock({ $0?.isRunning == true ? $0?.pid : nil }) else { return }
        Self.children(of: pid).forEach { Glibc.kill($0, SIGCONT) }
        Glibc.kill(pid, SIGCONT)
    }

    /// Starts the server again on the same port and data (stopping it first if it runs).
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
        var settings = [
            "listen_addresses": host,
            "unix_socket_directories": directory.path,
            "fsync": configuration.fsync ? "on" : "off",
        ]
        settings.merge(configuration.settings) { _, new in new }
        let arguments =
            ["-D", dataDirectory, "-p", String(port)]
            + settings.sorted { $0.key < $1.key }.flatMap { ["-c", "\($0.key)=\($0.value)"] }
        let (program, programArguments) = Self.asServerUser(binaries + "/postgres", arguments)
        let child = try ChildProcess(program, arguments: programArguments, currentDirectory: directory.path)
        try child.start()
        process.withLock { $0 = child }
        var ready = false
        _ = await eventually(timeout: .seconds(30)) {
            // A standby says "ready to accept read-only connections".
            ready = child.standardErrorLines.contains {
                $0.contains("database system is ready to accept") && $0.contains("connections")
            }
            return ready || !child.isRunning
        }
        if ready { return }
        let running = child.isRunning
        if running {
            child.kill()
        }
        await child.waitForExit(timeout: .seconds(5))
        let output = (child.standardErrorLines + child.standardOutputLines).joined(separator: "\n")
        if !running {
            let error = HarnessError("postgres exited at start on port \(port):\n\(output)")
            if output.contains("Address already in use") { throw PortTaken(underlying: error) }
            throw error
        }
        throw HarnessError("postgres did not accept connections on port \(port) within 30 s:\n\(output)")
    }

    /// Binds the stopped server's port (best effort: a failure only leaves the port free).
    private func holdPort() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        guard withLoopback(port: port, { bind(fd, $0, $1) == 0 }) else {
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

    // MARK: Processes and files

    /// The newest `/usr/lib/postgresql/N/bin` that has `postgres` and `initdb`.
    static func findBinaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return
            versions
            .compactMap { version in Int(version).map { ($0, "\(root)/\(version)/bin") } }
            .filter { (_, bin) in
                FileManager.default.isExecutableFile(atPath: bin + "/postgres")
                    && FileManager.default.isExecutableFile(atPath: bin + "/initdb")
            }
            .max { $0.0 < $1.0 }?.1
    }

    /// The program and arguments that run `program` as the `postgres` user when we are root
    /// (`setpriv` execs it in place), or as ourselves otherwise.
    static func asServerUser(_ program: String, _ arguments: [String]) -> (String, [String]) {
        guard geteuid() == 0 else { return (program, arguments) }
        return ("setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", program] + arguments)
    }

    /// Gives a directory to the `postgres` user when we are root (the server wants to own its data).
    static func giveToServerUser(_ path: String) throws {
        guard geteuid() == 0 else { return }
        guard let account = getpwnam("postgres") else {
            throw HarnessError("there is no 'postgres' user: install Debian's postgresql package (run `make test`)")
        }
        guard chown(path, account.pointee.pw_uid, account.pointee.pw_gid) == 0 else {
            throw HarnessError("cannot give \(path) to postgres: \(String(cString: strerror(errno)))")
        }
    }

    /// Runs a program to its end.
    /// - Throws: `HarnessError` with its output if it fails.
    static func run(_ program: String, _ arguments: [String], what: String) async throws {
        let child = try ChildProcess(program, arguments: arguments, currentDirectory: "/tmp")
        try child.start()
        let termination = await child.waitForExit(timeout: .seconds(120))
        guard termination == .exited(0) else {
            child.kill()
            let output = (child.standardErrorLines + child.standardOutputLines).joined(separator: "\n")
            throw HarnessError("\(what) failed (\(String(describing: termination))):\n\(output)")
        }
    }

    /// The processes whose parent is `pid` (the postmaster's backends and helpers), from `/proc`.
    static func children(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> Int32? in
            guard let candidate = Int32(entry), let (_, parent) = status(of: candidate), parent == pid else {
                return nil
            }
            return candidate
        }
    }

    /// Whether a process exists and is not a zombie.
    static func exists(_ pid: Int32) -> Bool {
        guard let (state, _) = status(of: pid) else { return false }
        return state != "Z" && state != "X"
    }

    /// A process's state letter and parent, from `/proc/PID/stat` (the fields after the command
    /// name, which is in parentheses and may itself contain spaces and parentheses).
    private static func status(of pid: Int32) -> (String, Int32)? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 1, let parent = Int32(fields[1]) else { return nil }
        return (String(fields[0]), parent)
    }
}

/// The cluster `initdb` makes once per machine and PostgreSQL version
/// (`/tmp/chime-postgres-template-VERSION-uidUID`), which every ``TestPostgres`` copies. Made in a
/// directory of its own and renamed into place, so a half-made template is never used, even when
/// several test processes make one at the same time.
private final class Template: Sendable {
    static let shared = Template()
    private let making = Mutex<[String: Task<String, any Error>]>([:])

    func path(binaries: String) async throws -> String {
        let task = making.withLock { tasks in
            if let task = tasks[binaries] { return task }
            let task = Task { try await Self.make(binaries: binaries) }
            tasks[binaries] = task
            return task
        }
        return try await task.value
    }

    private static func make(binaries: String) async throws -> String {
        let version = URL(fileURLWithPath: binaries).deletingLastPathComponent().lastPathComponent
        let path = "/tmp/chime-postgres-template-\(version)-uid\(geteuid())"
        let marker = path + "/complete"
        if FileManager.default.fileExists(atPath: marker) { return path }
        var name = Array("\(path)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&name) else {
            throw HarnessError(
                "cannot create a directory for the template cluster: \(String(cString: strerror(errno)))"
            )
        }
        let building = String(cString: made)
        try TestPostgres.giveToServerUser(building)
        let (program, arguments) = TestPostgres.asServerUser(
            binaries + "/initdb",
            [
                "-D", building + "/data", "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync",
                "--no-instructions",
            ]
        )
        do {
            try await TestPostgres.run(program, arguments, what: "initdb")
            try Data().write(to: URL(fileURLWithPath: building + "/complete"))
        } catch {
            try? FileManager.default.removeItem(atPath: building)
            throw error
        }
        if rename(building, path) != 0 {
            let why = String(cString: strerror(errno))
            // Another test process finished first (the directory exists): use its template.
            try? FileManager.default.removeItem(atPath: building)
            guard FileManager.default.fileExists(atPath: marker) else {
                throw HarnessError("cannot move the template cluster to \(path): \(why)")
            }
        }
        return path
    }
}
