import Foundation
import Synchronization

/// A TLS server process on a loopback port, for the HTTP client's tests.
public protocol TestHTTPSServer: Sendable {
    var port: Int { get }
}

extension TestHTTPSServer {
    /// `https://127.0.0.1:port/path` (`path` starts with a slash).
    public func url(_ path: String, host: String = "127.0.0.1") -> String {
        "https://\(host):\(port)\(path)"
    }
}

/// Starts a server process on a free loopback port and waits for the line that says it listens,
/// trying other ports when it does not come up (another process took the port between the probe
/// and the bind).
/// - Parameter launch: the (unstarted) process for a port, and the text of its "listening" line
///   on standard output.
private func startOnFreePort(
    _ name: String,
    launch: (Int) throws -> (ChildProcess, String)
) async throws -> (Int, ChildProcess) {
    var lastError: (any Error)?
    for _ in 0..<5 {
        let port = try TestBroker.freePort()
        let (process, listening) = try launch(port)
        try process.start()
        if await process.waitForLine(timeout: .seconds(20), where: { $0.contains(listening) }) != nil {
            return (port, process)
        }
        process.kill()
        let output = (process.standardOutputLines + process.standardErrorLines).suffix(5)
        lastError = HarnessError("\(name) did not listen on \(port): \(output)")
    }
    throw lastError ?? HarnessError("\(name) did not start")
}

/// Debian's `nghttpd` (package nghttp2-server): an HTTP/2 server over TLS on a free loopback port,
/// serving the files of a temporary directory, with its verbose log (every frame, every connection
/// as `[id=N]`) kept for the test to count connections and requests; killed when released.
public final class TestHTTP2Server: TestHTTPSServer {
    public let port: Int
    /// The document root: a request for `/name` gets the file `name` (a directory without a
    /// trailing slash: a 301 to it with one).
    public let documents: TemporaryDirectory
    let process: ChildProcess

    /// Starts it and waits until it listens.
    /// - Parameters:
    ///   - certificates: the server's certificate and key.
    ///   - arguments: more options, such as `--echo-upload` (a POST's body comes back as the
    ///     response's) or `--no-content-length`.
    public static func start(certificates: TestCertificates, arguments: [String] = []) async throws -> TestHTTP2Server {
        let documents = try TemporaryDirectory(prefix: "chime-nghttpd")
        let (port, process) = try await startOnFreePort("nghttpd") { port in
            let process = try ChildProcess(
                "nghttpd",
                arguments: ["--verbose", "--address=127.0.0.1", "--htdocs=\(documents.path)"] + arguments
                    + [String(port), certificates.keyFile, certificates.certificateFile]
            )
            return (process, "listen 127.0.0.1:\(port)")
        }
        return TestHTTP2Server(port: port, documents: documents, process: process)
    }

    private init(port: Int, documents: TemporaryDirectory, process: ChildProcess) {
        self.port = port
        self.documents = documents
        self.process = process
    }

    deinit { process.kill() }

    /// Writes a file to serve as `/name`.
    public func serve(_ name: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: documents.url.appendingPathComponent(name))
    }

    /// The log so far: nghttpd's standard output.
    public var log: [String] { process.standardOutputLines }

    /// The TLS connections the server has seen: the distinct `[id=N]` in its log.
    public var connectionCount: Int {
        Set(
            log.compactMap { line -> Substring? in
                guard line.hasPrefix("[id="), let end = line.firstIndex(of: "]") else { return nil }
                return line[..<end]
            }
        ).count
    }

    /// The requests the server has received: the `:path` fields of the HEADERS it logged.
    public var requestCount: Int {
        log.count { $0.contains("recv (stream_id=") && $0.contains(":path:") }
    }
}

/// `openssl s_server -HTTP`: an HTTP/1 server over TLS (no ALPN, so no HTTP/2) on a free loopback
/// port, one connection at a time. A `GET /name` is answered with the file `name` as it is, as the
/// whole response: status line, header fields and body, written by the test to be as wrong as it
/// likes. The connection is closed after each. Killed when released.
public final class TestHTTP1Server: TestHTTPSServer {
    public let port: Int
    /// Where the responses are: the server's working directory.
    public let documents: TemporaryDirectory
    let process: ChildProcess

    /// Starts it and waits until it accepts connections.
    public static func start(certificates: TestCertificates) async throws -> TestHTTP1Server {
        let documents = try TemporaryDirectory(prefix: "chime-s-server")
        let (port, process) = try await startOnFreePort("openssl s_server") { port in
            let process = try ChildProcess(
                "openssl",
                arguments: [
                    "s_server", "-HTTP", "-accept", "127.0.0.1:\(port)", "-key", certificates.keyFile, "-cert",
                    certificates.certificateFile,
                ],
                currentDirectory: documents.path
            )
            return (process, "ACCEPT")
        }
        return TestHTTP1Server(port: port, documents: documents, process: process)
    }

    private init(port: Int, documents: TemporaryDirectory, process: ChildProcess) {
        self.port = port
        self.documents = documents
        self.process = process
    }

    deinit { process.kill() }

    /// Writes the raw response to `GET /name`.
    public func respond(to name: String, with response: [UInt8]) throws {
        try Data(response).write(to: documents.url.appendingPathComponent(name))
    }

    /// Writes the raw response to `GET /name`; `\n` in `head` becomes CRLF.
    public func respond(to name: String, head: String, body: [UInt8] = []) throws {
        let lines = head.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\r\n")
        try respond(to: name, with: Array(lines.utf8) + body)
    }
}

/// A plain TCP listener on 127.0.0.1 (a port the kernel chose) that accepts every connection and
/// treats it as told: holds it open and silent (a black hole), closes it, resets it, or writes
/// bytes and closes. Counts what it accepted. Stopped, with its connections, when released.
public final class TestTCPServer: Sendable {
    /// What the server does with each connection.
    public enum Behaviour: Sendable {
        /// Reads nothing, writes nothing, keeps it open.
        case silent
        /// Closes it at once.
        case close
        /// Resets it at once (an RST, with `SO_LINGER` 0).
        case reset
        /// Writes the bytes, then closes it.
        case send([UInt8])
    }

    public let port: Int
    private let core: Core

    /// Listens and starts accepting on a thread of its own.
    /// - Throws: `HarnessError` if the socket cannot be made.
    public init(_ behaviour: Behaviour) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 128) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw HarnessError("cannot listen on 127.0.0.1: \(String(cString: strerror(errno)))")
        }
        self.port = Int(UInt16(bigEndian: address.sin_port))
        self.core = Core(listener: listener, behaviour: behaviour)
        let core = self.core
        let thread = Thread { core.acceptUntilStopped() }
        thread.name = "chime-test-tcp"
        thread.start()
    }

    deinit { core.stop() }

    /// `scheme://127.0.0.1:port/path`.
    public func url(_ path: String = "/", scheme: String = "https", host: String = "127.0.0.1") -> String {
        "\(scheme)://\(host):\(port)\(path)"
    }

    /// The connections accepted so far.
    public var acceptedCount: Int { core.state.withLock { $0.accepted } }

    private final class Core: Sendable {
        struct State {
            var accepted = 0
            var open: [Int32] = []
            var stopped = false
        }

        let listener: Int32
        let behaviour: Behaviour
        let state = Mutex(State())

        init(listener: Int32, behaviour: Behaviour) {
            self.listener = listener
            self.behaviour = behaviour
        }

        func acceptUntilStopped() {
            while true {
                let connection = accept(listener, nil, nil)  // accept4 is not visible from Swift
                if connection < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    break  // the listener was shut down
                }
                _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
                let keep = state.withLock { state in
                    state.accepted += 1
                    if case .silent = behaviour, !state.stopped {
                        state.open.append(connection)
                        return true
                    }
                    return false
                }
                if !keep { finish(connection) }
            }
            close(listener)
        }

        private func finish(_ connection: Int32) {
            switch behaviour {
            case .reset:
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(connection, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            case .send(let bytes):
                _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            case .silent, .close:
                break
            }
            close(connection)
        }

        /// Wakes the accepting thread (a shut-down listener fails `accept` with EINVAL) and closes
        /// the connections held open.
        func stop() {
            let open = state.withLock { state in
                state.stopped = true
                defer { state.open.removeAll() }
                return state.open
            }
            shutdown(listener, Int32(SHUT_RDWR))
            open.forEach { close($0) }
        }
    }
}
