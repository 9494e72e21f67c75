import Foundation
import Synchronization

/// PostgreSQL as production high availability runs it, for one test: one etcd and two (or more)
/// Patroni nodes on free ports of 127.0.0.1, each node a PostgreSQL of its own that Patroni
/// creates (`initdb` on the first leader, `pg_basebackup` on the others), promotes and demotes.
/// Patroni keeps its keys through etcd's v2 API by default (``EtcdAPI`` says why).
///
/// `synchronous_mode` is on, so the leader's commits wait until the synchronous standby has them,
/// and Patroni promotes only that standby when the leader goes away. The timings are short, within
/// Patroni's documented minimums (``Configuration``): a dead leader's key expires within `ttl`
/// seconds, and the standby takes over at its next loop.
///
/// Each node runs in a PID namespace of its own (`unshare --pid --fork --kill-child`), with Patroni
/// and its PostgreSQL as the `postgres` user (`setpriv`) when the tests run as root. Patroni starts
/// the postmaster in a session of its own, out of Patroni's process group; in a namespace, one
/// SIGKILL to the namespace's first process takes Patroni, the postmaster and every backend at
/// once, as when the machine dies (``kill(_:)``), and the kernel does the same when the test
/// process dies (`ChildProcess`'s watchdog kills `unshare`, which takes the namespace with it).
/// ``freeze(_:)`` stops every process of a node instead, as a machine that hangs, and
/// ``thaw(_:)`` resumes them.
///
/// ```swift
/// let cluster = try await TestPatroni.start()
/// let (leader, _) = try await cluster.waitForLeaderAndSynchronousReplica()
/// let connection = try PostgresConnection(cluster.uri)   // every node, target_session_attrs=read-write
/// await cluster.kill(leader)
/// let promoted = try await cluster.waitForLeader(other: leader)
/// await cluster.stop()
/// ```
public final class TestPatroni: Sendable {
    /// How the cluster runs.
    public struct Configuration: Sendable {
        /// Patroni nodes, each with a PostgreSQL: 2 or more.
        public var nodes: Int
        /// Seconds the leader key lives unless the leader renews it: how long a dead leader keeps it.
        /// Patroni's documentation gives 20 as the least (later versions refuse less).
        public var ttl: Int
        /// Seconds between two runs of Patroni's loop (at least 1).
        public var loopWait: Int
        /// Seconds Patroni retries etcd and PostgreSQL before it demotes (at least 3;
        /// `loopWait + 2 × retryTimeout` must not exceed `ttl`).
        public var retryTimeout: Int
        /// Commits wait for the synchronous standby, and only it is promoted.
        public var synchronousMode: Bool
        /// PostgreSQL's `fsync`: off by default, as ``TestPostgres``'s (safe against killed processes).
        public var fsync: Bool
        /// How Patroni talks to etcd.
        public var api: EtcdAPI

        public init(
            nodes: Int = 2,
            ttl: Int = 20,
            loopWait: Int = 2,
            retryTimeout: Int = 5,
            synchronousMode: Bool = true,
            fsync: Bool = false,
            api: EtcdAPI = .v2
        ) {
            self.nodes = nodes
            self.ttl = ttl
            self.loopWait = loopWait
            self.retryTimeout = retryTimeout
            self.synchronousMode = synchronousMode
            self.fsync = fsync
            self.api = api
        }
    }

    /// Patroni's two ways to keep its keys in etcd.
    public enum EtcdAPI: Sendable {
        /// Patroni's `etcd:` section, etcd's v2 API (etcd runs with `--enable-v2`): the leader
        /// renews its key only if the key still holds its name (compare and swap).
        ///
        /// The default, because Debian bookworm's Patroni 3.0.2 renews the key unconditionally
        /// with `etcd3:`: a leader that hung longer than `ttl` and resumes can overwrite the key
        /// of the standby promoted meanwhile and become leader again on its old timeline, losing
        /// what the promoted standby acknowledged (fixed in Patroni 3.0.3, patroni/patroni#2689).
        case v2
        /// Patroni's `etcd3:` section, etcd's v3 API.
        case v3
    }

    /// One Patroni with its PostgreSQL.
    public final class Node: Sendable, CustomStringConvertible {
        /// Patroni's name for it (`node1`, `node2`, ...).
        public let name: String
        public let host = "127.0.0.1"
        /// PostgreSQL's port.
        public let port: Int
        /// The port of Patroni's REST API.
        public let apiPort: Int
        /// Holds `patroni.yml`, the cluster (`data/`) and the Unix socket; removed with the node.
        public let directory: TemporaryDirectory
        fileprivate let process = Mutex<ChildProcess?>(nil)
        /// After ``TestPatroni/kill(_:)``: sockets bound to its ports, not listening, so that
        /// connecting is refused and no other test's server takes them.
        fileprivate let placeholders = Mutex<[Int32]>([])
        /// Between ``TestPatroni/freeze(_:)`` and ``TestPatroni/thaw(_:)``.
        fileprivate let frozen = Mutex(false)

        fileprivate init(name: String, port: Int, apiPort: Int, directory: TemporaryDirectory) {
            self.name = name
            self.port = port
            self.apiPort = apiPort
            self.directory = directory
        }

        deinit {
            process.withLock { $0.map(TestPatroni.killNamespace) }
            placeholders.withLock { $0.forEach { close($0) } }
        }

        public var description: String { "\(name) (PostgreSQL \(port), REST API \(apiPort))" }

        /// `postgresql://postgres@127.0.0.1:PORT/postgres`: this node alone, whatever its role.
        public var uri: String { "postgresql://postgres@\(host):\(port)/postgres" }

        /// The node's `patroni.yml`.
        public var configurationFile: String { directory.appending("patroni.yml") }

        /// Its PostgreSQL's data directory.
        public var dataDirectory: String { directory.appending("data") }

        /// Whether its Patroni (and so its PostgreSQL) runs, frozen or not.
        public var isRunning: Bool { process.withLock { $0?.isRunning ?? false } }

        /// Whether it was frozen (``TestPatroni/freeze(_:)``) and not thawed since.
        public var isFrozen: Bool { frozen.withLock { $0 } }

        /// Running and not frozen: its REST API answers.
        public var isAnswering: Bool { isRunning && !isFrozen }

        /// Whether its Patroni ended other than by ``TestPatroni/kill(_:)``.
        fileprivate var exitedByItself: Bool {
            process.withLock { $0?.termination != nil } && placeholders.withLock { $0.isEmpty }
        }

        /// What Patroni and its PostgreSQL logged.
        public var log: [String] {
            process.withLock { ($0?.standardErrorLines ?? []) + ($0?.standardOutputLines ?? []) }
        }

        /// `GET path` on the node's REST API: the status and the body, nil if it does not answer.
        public func api(_ path: String) -> (status: Int, body: Data)? {
            guard let response = try? HTTPProbe.get(port: apiPort, path) else { return nil }
            return (response.status, Data(response.body.utf8))
        }

        /// `GET /patroni`: the node's own view of itself.
        public func status() -> NodeStatus? {
            guard let (status, body) = api("/patroni"), status == 200 || status == 503 else { return nil }
            return try? JSONDecoder().decode(NodeStatus.self, from: body)
        }
    }

    /// A member of the cluster as `GET /cluster` shows it.
    public struct Member: Decodable, Sendable, Equatable {
        public var name: String
        /// `leader`, `sync_standby` or `replica`.
        public var role: String
        /// `running`, `starting`, `stopped`, `creating replica`, ...
        public var state: String
        public var host: String?
        public var port: Int?
        public var timeline: Int?
    }

    /// `GET /cluster`: the cluster as the consensus store holds it.
    public struct ClusterState: Decodable, Sendable, Equatable {
        public var members: [Member]

        /// The member that holds the leader key, if it runs.
        public var leader: Member? { members.first { $0.role == "leader" && $0.state == "running" } }
        /// The synchronous standby, if it runs.
        public var synchronousStandby: Member? {
            members.first { $0.role == "sync_standby" && $0.state == "running" }
        }
    }

    /// `GET /patroni`: a node's view of itself.
    public struct NodeStatus: Decodable, Sendable, Equatable {
        /// A standby as the primary's `pg_stat_replication` shows it.
        public struct Replica: Decodable, Sendable, Equatable {
            /// The standby's Patroni name.
            public var application_name: String
            /// `streaming` once it streams.
            public var state: String
            /// `sync` for the synchronous standby, `async` otherwise.
            public var sync_state: String
        }

        public var state: String
        /// `master` (Patroni 3.0's word for the primary) or `replica`.
        public var role: String
        public var timeline: Int?
        /// The primary's standbys (none on a standby).
        public var replication: [Replica]?

        public var isPrimary: Bool { state == "running" && (role == "master" || role == "primary") }
    }

    public let configuration: Configuration
    /// The cluster's name in etcd (Patroni's `scope`).
    public let scope: String
    public let nodes: [Node]
    /// etcd's client port (`http://127.0.0.1:PORT`).
    public let etcdPort: Int
    private let etcdDirectory: TemporaryDirectory
    private let etcd: ChildProcess

    /// A libpq URI that lists every node with `target_session_attrs=read-write`: a connection
    /// goes to whichever node is the primary, as chimed's `--store` should.
    public var uri: String {
        let hosts = nodes.map { "\($0.host):\($0.port)" }.joined(separator: ",")
        return "postgresql://postgres@\(hosts)/postgres?target_session_attrs=read-write"
    }

    /// What etcd logged.
    public var etcdLog: [String] { etcd.standardErrorLines + etcd.standardOutputLines }

    /// Starts etcd, then every node, and waits until a leader and a streaming synchronous standby
    /// exist (``waitForLeaderAndSynchronousReplica(timeout:)``).
    /// - Throws: `HarnessError` if Patroni, etcd or PostgreSQL is not installed (run `make test`),
    ///   or if the cluster does not form within `timeout`.
    public static func start(
        _ configuration: Configuration = .init(),
        timeout: Duration = .seconds(120)
    ) async throws -> TestPatroni {
        guard configuration.nodes >= 2 else { throw HarnessError("a Patroni cluster here has 2 nodes or more") }
        let binaries = TestPostgres.findBinaries()
        let missing =
            ["patroni", "etcd", "unshare"].filter { ChildProcess.find($0) == nil }
            + (binaries == nil ? ["/usr/lib/postgresql/*/bin/postgres"] : [])
        guard missing.isEmpty, let binaries else {
            throw HarnessError(
                "Patroni, etcd or PostgreSQL is not installed (missing: \(missing.joined(separator: ", "))): "
                    + "run `make test`, which installs Debian's patroni, etcd-server and postgresql with scripts/bootstrap"
            )
        }
        let (etcd, etcdDirectory, etcdPort) = try await startEtcd()
        var nodes: [Node] = []
        for index in 1...configuration.nodes {
            let directory = try TemporaryDirectory(prefix: "chime-patroni-node\(index)")
            try TestPostgres.giveToServerUser(directory.path)
            nodes.append(
                Node(
                    name: "node\(index)",
                    port: try TestBroker.freePort(),
                    apiPort: try TestBroker.freePort(),
                    directory: directory
                )
            )
        }
        let cluster = TestPatroni(
            configuration: configuration,
            scope: "chime-test-\(UInt32.random(in: 0...UInt32.max))",
            nodes: nodes,
            etcd: etcd,
            etcdDirectory: etcdDirectory,
            etcdPort: etcdPort
        )
        do {
            for node in nodes {
                try cluster.writeConfiguration(of: node, binaries: binaries)
                try cluster.launch(node)
            }
            _ = try await cluster.waitForLeaderAndSynchronousReplica(timeout: timeout)
        } catch {
            await cluster.stop()
            throw error
        }
        return cluster
    }

    private init(
        configuration: Configuration,
        scope: String,
        nodes: [Node],
        etcd: ChildProcess,
        etcdDirectory: TemporaryDirectory,
        etcdPort: Int
    ) {
        self.configuration = configuration
        self.scope = scope
        self.nodes = nodes
        self.etcd = etcd
        self.etcdDirectory = etcdDirectory
        self.etcdPort = etcdPort
    }

    deinit {
        etcd.kill()
    }

    // MARK: Watching

    /// `GET /cluster` from the first node that answers: members, roles and states as etcd holds them.
    public func state() -> ClusterState? {
        for node in nodes where node.isAnswering {
            if let (status, body) = node.api("/cluster"), status == 200,
                let state = try? JSONDecoder().decode(ClusterState.self, from: body)
            {
                return state
            }
        }
        return nil
    }

    /// The node that holds the leader key and answers, as etcd says.
    public func leader() -> Node? {
        guard let name = state()?.leader?.name else { return nil }
        return nodes.first { $0.name == name && $0.isAnswering }
    }

    /// Waits until a node holds the leader key, runs as the primary, and streams to a synchronous
    /// standby that etcd names as such: the state in which the primary's commits wait for the
    /// standby, so that promoting it loses no acknowledged commit.
    /// - Returns: the leader and the synchronous standby.
    /// - Throws: `HarnessError` with the nodes' logs if that does not happen within `timeout`.
    @discardableResult
    public func waitForLeaderAndSynchronousReplica(
        timeout: Duration = .seconds(120)
    ) async throws -> (leader: Node, replica: Node) {
        var found: (Node, Node)?
        let formed = await eventually(timeout: timeout, every: .milliseconds(250)) {
            found = nil
            guard let state = state(), let leaderName = state.leader?.name,
                let replicaName = state.synchronousStandby?.name,
                let leader = nodes.first(where: { $0.name == leaderName && $0.isAnswering }),
                let replica = nodes.first(where: { $0.name == replicaName && $0.isAnswering }),
                let status = leader.status(), status.isPrimary,
                status.replication?.contains(where: {
                    $0.application_name == replicaName && $0.state == "streaming" && $0.sync_state == "sync"
                }) == true
            else { return nodes.contains { $0.exitedByItself } }
            found = (leader, replica)
            return true
        }
        if formed, let found { return found }
        throw HarnessError(
            "no leader with a streaming synchronous standby within \(timeout) (\(String(describing: state()))):\n"
                + report()
        )
    }

    /// Waits until a node other than `other` holds the leader key and runs as the primary: after
    /// ``kill(_:)`` of the leader, the promoted standby.
    /// - Throws: `HarnessError` with the nodes' logs if no node takes over within `timeout`.
    @discardableResult
    public func waitForLeader(other: Node, timeout: Duration = .seconds(120)) async throws -> Node {
        var found: Node?
        _ = await eventually(timeout: timeout, every: .milliseconds(100)) {
            found = leader().flatMap { $0 !== other && $0.status()?.isPrimary == true ? $0 : nil }
            return found != nil
        }
        if let found { return found }
        throw HarnessError("no node took over from \(other.name) within \(timeout):\n" + report())
    }

    /// Every node's and etcd's last log lines, for a failure's message.
    public func report(lines: Int = 40) -> String {
        let parts =
            nodes.map { node in
                "--- \(node) \(node.isFrozen ? "frozen" : node.isRunning ? "running" : "stopped"):\n"
                    + node.log.suffix(lines).joined(separator: "\n")
            } + ["--- etcd on \(etcdPort):\n" + etcdLog.suffix(lines / 2).joined(separator: "\n")]
        return parts.joined(separator: "\n")
    }

    // MARK: Failures and stopping

    /// Kills a node with SIGKILL, as if its machine died: Patroni, its postmaster and every backend
    /// at once (its PID namespace), with no chance to release the leader key, which then lives
    /// until its TTL. Returns once they are all gone; the node's ports stay taken (not listening).
    public func kill(_ node: Node) async {
        guard let child = node.process.withLock({ $0 }), child.isRunning else { return }
        Self.killNamespace(child)
        if await child.waitForExit(timeout: .seconds(20)) == nil {
            child.kill()
            await child.waitForExit(timeout: .seconds(10))
        }
        // The sockets close as the processes end; binding fails until the listener is gone.
        var fds: [Int32] = []
        for port in [node.port, node.apiPort] {
            var fd: Int32 = -1
            _ = await eventually(timeout: .seconds(10)) {
                fd = Self.bindWithoutListening(port)
                return fd >= 0
            }
            if fd >= 0 { fds.append(fd) }
        }
        node.placeholders.withLock { $0 += fds }
    }

    /// A planned switchover, as an operator makes one: `patronictl switchover --leader ...
    /// --candidate ... --force` with the leader's configuration. Patroni stops the leader's
    /// PostgreSQL cleanly, promotes the candidate once it has everything, and starts the old
    /// leader again as its standby. Returns when `patronictl` does.
    /// - Throws: `HarnessError` with what `patronictl` said if it fails.
    public func switchover(from leader: Node, to candidate: Node) async throws {
        let ctl = try ChildProcess(
            "/usr/bin/patronictl",
            arguments: [
                "-c", leader.configurationFile, "switchover", scope, "--leader", leader.name, "--candidate",
                candidate.name, "--force",
            ]
        )
        try ctl.start()
        let ended = await ctl.waitForExit(timeout: .seconds(60))
        guard case .exited(0)? = ended else {
            throw HarnessError(
                "patronictl switchover \(leader.name) → \(candidate.name): \(String(describing: ended))\n"
                    + (ctl.standardOutputLines + ctl.standardErrorLines).joined(separator: "\n")
            )
        }
    }

    /// Freezes a node (SIGSTOP to Patroni, its postmaster and every backend), as a machine that
    /// hangs or is cut off from the network: its connections stay open and the kernel still
    /// accepts new ones, but nothing answers, and its leader key expires.
    public func freeze(_ node: Node) {
        guard let child = node.process.withLock({ $0 }), child.isRunning else { return }
        node.frozen.withLock { $0 = true }
        // Parents first, so that none starts a process meanwhile; twice, for any started between
        // the listing and the signal.
        for _ in 0..<2 {
            Self.descendants(of: child.pid).forEach { Glibc.kill($0, SIGSTOP) }
        }
    }

    /// Thaws a frozen node (SIGCONT to every process of it): its Patroni finds out what changed
    /// while it was away (a leader that lost its key demotes itself).
    public func thaw(_ node: Node) {
        guard let child = node.process.withLock({ $0 }), child.isRunning else { return }
        Self.descendants(of: child.pid).reversed().forEach { Glibc.kill($0, SIGCONT) }
        node.frozen.withLock { $0 = false }
    }

    /// Every process under `pid` (not `pid` itself), parents before their children, from `/proc`.
    private static func descendants(of pid: Int32) -> [Int32] {
        var found: [Int32] = []
        var next = [pid]
        while !next.isEmpty {
            next = next.flatMap { TestPostgres.children(of: $0) }
            found += next
        }
        return found
    }

    /// Kills every node, stops etcd, and removes the nodes' and etcd's directories (the nodes'
    /// clusters take tens of megabytes each), so that a test that calls it leaves nothing behind
    /// even if the process exits before the objects go away.
    public func stop() async {
        for node in nodes {
            await kill(node)
        }
        etcd.terminate()
        if await etcd.waitForExit(timeout: .seconds(10)) == nil {
            etcd.kill()
            await etcd.waitForExit(timeout: .seconds(5))
        }
        for path in nodes.map(\.directory.path) + [etcdDirectory.path] {
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// SIGKILL to the first process of the node's PID namespace (the child of `unshare`): the
    /// kernel then kills every other process in it, and `unshare` exits once they are gone.
    fileprivate static func killNamespace(_ child: ChildProcess) {
        guard child.isRunning else { return }
        let first = TestPostgres.children(of: child.pid)
        first.forEach { Glibc.kill($0, SIGKILL) }
        if first.isEmpty {
            child.kill()
        }
    }

    private static func bindWithoutListening(_ port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        guard withLoopback(port: port, { bind(fd, $0, $1) == 0 }) else {
            close(fd)
            return -1
        }
        return fd
    }

    // MARK: Starting

    /// One etcd member on free loopback ports (client and peer), its data in a temporary
    /// directory, with both APIs (``EtcdAPI``), trying other ports when a process took the ones
    /// probed before etcd bound them.
    private static func startEtcd() async throws -> (ChildProcess, TemporaryDirectory, Int) {
        var lastError: HarnessError?
        for _ in 0..<5 {
            let directory = try TemporaryDirectory(prefix: "chime-etcd")
            let client = try TestBroker.freePort()
            let peer = try TestBroker.freePort()
            let clientURL = "http://127.0.0.1:\(client)"
            let peerURL = "http://127.0.0.1:\(peer)"
            let child = try ChildProcess(
                "etcd",
                arguments: [
                    "--name", "etcd0", "--data-dir", directory.appending("data"), "--listen-client-urls", clientURL,
                    "--advertise-client-urls", clientURL, "--listen-peer-urls", peerURL,
                    "--initial-advertise-peer-urls", peerURL, "--initial-cluster", "etcd0=\(peerURL)",
                    "--initial-cluster-state", "new", "--initial-cluster-token", "chime-\(client)",
                    "--log-level", "warn", "--enable-v2=true",
                ],
                currentDirectory: directory.path
            )
            try child.start()
            var healthy = false
            _ = await eventually(timeout: .seconds(30), every: .milliseconds(50)) {
                healthy = (try? HTTPProbe.get(port: client, "/health"))?.body.contains(#""health":"true""#) == true
                return healthy || !child.isRunning
            }
            if healthy { return (child, directory, client) }
            child.kill()
            await child.waitForExit(timeout: .seconds(5))
            let output = (child.standardErrorLines + child.standardOutputLines).joined(separator: "\n")
            lastError = HarnessError("etcd did not start on ports \(client) and \(peer):\n\(output)")
            if !output.contains("address already in use") { break }
        }
        throw lastError ?? HarnessError("etcd did not start")
    }

    /// Starts a node's Patroni in a PID namespace of its own. The namespace's first process is a
    /// shell that stays root, so that `unshare --kill-child` can still kill it when `unshare` dies
    /// (a process that changes its user loses its parent-death signal).
    private func launch(_ node: Node) throws {
        let run =
            geteuid() == 0
            ? #"setpriv --reuid=postgres --regid=postgres --init-groups -- patroni "$1""# : #"patroni "$1""#
        let isolation = geteuid() == 0 ? [] : ["--user", "--map-current-user"]
        let child = try ChildProcess(
            "unshare",
            arguments: isolation + [
                "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL", "--", "/bin/sh", "-c", "\(run) & wait $!",
                "chime-patroni", node.configurationFile,
            ],
            currentDirectory: node.directory.path
        )
        try child.start()
        node.process.withLock { $0 = child }
    }

    /// The node's `patroni.yml`: loopback only, trust for every local connection, the timings and
    /// `synchronous_mode` of ``configuration``.
    private func writeConfiguration(of node: Node, binaries: String) throws {
        let c = configuration
        let yaml = """
            scope: \(scope)
            namespace: /chime-test/
            name: \(node.name)
            log:
              level: INFO
            restapi:
              listen: 127.0.0.1:\(node.apiPort)
              connect_address: 127.0.0.1:\(node.apiPort)
            \(c.api == .v2 ? "etcd" : "etcd3"):
              hosts: 127.0.0.1:\(etcdPort)
            bootstrap:
              dcs:
                ttl: \(c.ttl)
                loop_wait: \(c.loopWait)
                retry_timeout: \(c.retryTimeout)
                maximum_lag_on_failover: 1048576
                synchronous_mode: \(c.synchronousMode)
                postgresql:
                  use_pg_rewind: false
              initdb:
              - encoding: UTF8
              - locale: C
            postgresql:
              listen: 127.0.0.1:\(node.port)
              connect_address: 127.0.0.1:\(node.port)
              data_dir: \(node.dataDirectory)
              bin_dir: \(binaries)
              pgpass: \(node.directory.appending("pgpass"))
              authentication:
                superuser:
                  username: postgres
                replication:
                  username: replicator
              parameters:
                unix_socket_directories: '\(node.directory.path)'
                fsync: '\(c.fsync ? "on" : "off")'
              pg_hba:
              - local all all trust
              - host all all 127.0.0.1/32 trust
              - host replication all 127.0.0.1/32 trust
            watchdog:
              mode: 'off'

            """
        try Data(yaml.utf8).write(to: URL(fileURLWithPath: node.configurationFile))
    }
}
