import Foundation
import Synchronization

/// Runs a program for a test or the benchmark (a built binary, `mosquitto`, `mosquitto_sub`), capturing its output line
/// by line, with waits that take a timeout and signals to end it.
///
/// It spawns with `posix_spawn` rather than Foundation's `Process`, to give the child an empty signal
/// mask and default signal dispositions: a child inherits the mask of the thread that spawns it, and
/// Swift concurrency's worker threads block almost every signal, so a `Process` child would never see
/// SIGTERM. Output is captured through close-on-exec sockets, so children spawned meanwhile by other
/// tests do not inherit them (which would delay the end of the output).
///
/// By default a child never outlives the test process, even if that process is killed: a tiny watchdog
/// (`sh`) blocks reading a socket whose other end only the test process holds (close-on-exec). When
/// the test process dies for any reason the kernel closes that end, the read returns, and the watchdog
/// kills the child with SIGKILL. (`PR_SET_PDEATHSIG` cannot be set through `posix_spawn`, and it fires
/// when the spawning *thread* exits, which for a Swift concurrency thread can be any time.)
public final class ChildProcess: Sendable {
    /// How the process ended (`.exited(-1)`: it was reaped by someone else, its status is unknown).
    public enum Termination: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)
    }

    /// The program's absolute path.
    public let executable: String
    public let arguments: [String]
    private let environment: [String: String]?
    private let currentDirectory: String?
    private let killWithTestProcess: Bool
    private let state = Mutex(State())

    private struct State {
        var pid: pid_t = 0
        var watchdog: pid_t = 0
        /// Our end of the watchdog's socket, -1 once closed.
        var lifeline: Int32 = -1
        var termination: Termination?
        var stdout = LineBuffer()
        var stderr = LineBuffer()
    }

    private struct LineBuffer {
        var lines: [String] = []
        var partial: [UInt8] = []
        var closed = false

        mutating func append(_ data: ArraySlice<UInt8>) {
            partial.append(contentsOf: data)
            while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
                lines.append(String(decoding: partial[..<newline], as: UTF8.self))
                partial.removeSubrange(...newline)
            }
        }

        mutating func close() {
            if !partial.isEmpty {
                lines.append(String(decoding: partial, as: UTF8.self))
                partial.removeAll()
            }
            closed = true
        }
    }

    /// Prepares the process; nothing runs before `start()`.
    /// - Parameters:
    ///   - executable: an absolute path, or a name looked up in `PATH` (and `/usr/sbin`, `/sbin`).
    ///   - arguments: the arguments, without the program name.
    ///   - environment: the whole environment; nil inherits the test process's.
    ///   - currentDirectory: the working directory; nil inherits.
    ///   - killWithTestProcess: run the watchdog described above (one `sh` process per child).
    /// - Throws: `HarnessError` if the program is not found.
    public init(
        _ executable: String,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        currentDirectory: String? = nil,
        killWithTestProcess: Bool = true
    ) throws {
        guard let path = Self.find(executable) else {
            throw HarnessError("cannot find the program '\(executable)' in PATH")
        }
        self.executable = path
        self.arguments = arguments
        self.environment = environment
        self.currentDirectory = currentDirectory
        self.killWithTestProcess = killWithTestProcess
    }

    deinit {
        let pid = state.withLock { $0.termination == nil ? $0.pid : 0 }
        if pid > 0 {
            Glibc.kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        releaseWatchdog()
    }

    /// The process id (0 before `start()`).
    public var pid: Int32 {
        state.withLock { $0.pid }
    }

    /// Starts the process (and its watchdog).
    /// - Throws: `HarnessError` if it cannot be started.
    public func start() throws {
        guard state.withLock({ $0.pid == 0 }) else { throw HarnessError("\(executable) was started already") }
        let stdout = try Self.closeOnExecChannel()
        let stderr = try Self.closeOnExecChannel()
        let devNull = open("/dev/null", O_RDONLY | O_CLOEXEC)
        defer {
            close(stdout.write)  // the child has its copies (as 1 and 2); EOF comes when it exits
            close(stderr.write)
            close(devNull)
        }
        let pid = try Self.spawn(
            executable,
            arguments: arguments,
            environment: environment,
            currentDirectory: currentDirectory,
            descriptors: [devNull, stdout.write, stderr.write]
        )
        state.withLock { $0.pid = pid }
        capture(stdout.read, standardError: false)
        capture(stderr.read, standardError: true)
        if killWithTestProcess {
            try startWatchdog(for: pid)
        }
    }

    /// Reads one output stream to its end on a thread of its own (plain blocking reads: Foundation's
    /// `readabilityHandler` sometimes misses the end of the stream), then closes it.
    private func capture(_ descriptor: Int32, standardError: Bool) {
        let reader = Thread { [weak self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                self?.state.withLock { state in
                    if standardError {
                        state.stderr.append(buffer[..<count])
                    } else {
                        state.stdout.append(buffer[..<count])
                    }
                }
            }
            close(descriptor)
            self?.state.withLock { state in
                if standardError {
                    state.stderr.close()
                } else {
                    state.stdout.close()
                }
            }
        }
        reader.name = "chime-child-output"
        reader.start()
    }

    private func startWatchdog(for pid: pid_t) throws {
        let ends = try Self.closeOnExecChannel()
        defer { close(ends.read) }
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { close(devNull) }
        // sh reads until EOF, which comes only when every copy of the other end is closed: ours, by
        // `releaseWatchdog()`, or by the kernel when the test process dies.
        let watchdog: pid_t
        do {
            watchdog = try Self.spawn(
                "/bin/sh",
                arguments: ["-c", "read _ignored; kill -9 \"$1\" 2>/dev/null", "chime-watchdog", String(pid)],
                environment: nil,
                currentDirectory: nil,
                descriptors: [ends.read, devNull, devNull]
            )
        } catch {
            close(ends.write)
            throw error
        }
        state.withLock { state in
            state.watchdog = watchdog
            state.lifeline = ends.write
        }
    }

    /// Ends the watchdog without letting it act (the child is gone or is being stopped normally).
    private func releaseWatchdog() {
        let (watchdog, lifeline) = state.withLock { state in
            defer {
                state.watchdog = 0
                state.lifeline = -1
            }
            return (state.watchdog, state.lifeline)
        }
        if watchdog > 0 {
            Glibc.kill(watchdog, SIGKILL)
            var status: Int32 = 0
            waitpid(watchdog, &status, 0)
        }
        if lifeline >= 0 {
            close(lifeline)
        }
    }

    /// For tests of the watchdog: closes our end of its socket as the kernel would if the test process
    /// died, without stopping the watchdog first.
    func simulateTestProcessDeath() {
        let lifeline = state.withLock { state in
            defer { state.lifeline = -1 }
            return state.lifeline
        }
        if lifeline >= 0 {
            close(lifeline)
        }
    }

    /// Reaps the child if it has ended (non-blocking); returns how it ended, if it has.
    @discardableResult
    private func reap() -> Termination? {
        state.withLock { state in
            guard state.termination == nil, state.pid > 0 else { return state.termination }
            var status: Int32 = 0
            let reaped = waitpid(state.pid, &status, WNOHANG)
            if reaped == -1 && errno == ECHILD {
                // Someone else reaped it (a SIGCHLD handler of another library): gone, status unknown.
                state.termination = .exited(-1)
                return state.termination
            }
            guard reaped == state.pid else { return nil }
            let signal = status & 0x7F
            state.termination = signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
            return state.termination
        }
    }

    /// Whether the process runs (started and not yet ended).
    public var isRunning: Bool {
        pid > 0 && reap() == nil
    }

    /// How it ended, once it has.
    public var termination: Termination? {
        reap()
    }

    /// The complete lines written to standard output so far.
    public var standardOutputLines: [String] {
        state.withLock { $0.stdout.lines }
    }

    /// The complete lines written to standard error so far.
    public var standardErrorLines: [String] {
        state.withLock { $0.stderr.lines }
    }

    /// Sends a signal, if the process still runs.
    public func signal(_ signal: Int32) {
        guard isRunning else { return }
        Glibc.kill(pid, signal)
    }

    /// SIGTERM.
    public func terminate() {
        signal(SIGTERM)
    }

    /// SIGKILL.
    public func kill() {
        signal(SIGKILL)
    }

    /// Waits until the process has ended and its output is read to the end.
    /// - Returns: how it ended, or nil if it still runs after `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration) async -> Termination? {
        let ended = await eventually(timeout: timeout, every: .milliseconds(5)) {
            reap() != nil && state.withLock { $0.stdout.closed && $0.stderr.closed }
        }
        if ended {
            releaseWatchdog()
        }
        return reap()
    }

    /// Waits for a line on standard output (or standard error) that satisfies `predicate`, including
    /// lines that came before the call.
    /// - Returns: the line, or nil if none came within `timeout`.
    public func waitForLine(
        onStandardError: Bool = false,
        timeout: Duration,
        where predicate: @escaping @Sendable (String) -> Bool
    ) async -> String? {
        var found: String?
        _ = await eventually(timeout: timeout, every: .milliseconds(5)) {
            let lines = onStandardError ? standardErrorLines : standardOutputLines
            found = lines.first(where: predicate)
            return found != nil
        }
        return found
    }

    /// A connected pair of sockets, close-on-exec from birth so that no process spawned by another
    /// thread inherits them (a `pipe` + `fcntl` would leave a window).
    private static func closeOnExecChannel() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw HarnessError("socketpair failed: \(String(cString: strerror(errno)))")
        }
        return (ends[0], ends[1])
    }

    /// `posix_spawn` with `descriptors` as the child's 0, 1 and 2, an empty signal mask and every
    /// signal at its default disposition.
    private static func spawn(
        _ path: String,
        arguments: [String],
        environment: [String: String]?,
        currentDirectory: String?,
        descriptors: [Int32]
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (target, source) in descriptors.enumerated() {
            posix_spawn_file_actions_adddup2(&actions, source, Int32(target))
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in 1..<32 where signal != SIGKILL && signal != SIGSTOP {
            sigaddset(&defaults, Int32(signal))
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let environment = environment ?? ProcessInfo.processInfo.environment
        var path = path
        var arguments = arguments
        if let currentDirectory {
            // posix_spawn_file_actions_addchdir_np is not visible from Swift: let sh cd, then exec
            // the program in its place (same pid, same signal mask).
            arguments = ["-c", "cd -- \"$0\" && exec \"$@\"", currentDirectory, path] + arguments
            path = "/bin/sh"
        }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw HarnessError("cannot start \(path): \(String(cString: strerror(result)))")
        }
        return pid
    }

    /// Resolves a program name like a shell would, plus the sbin directories.
    static func find(_ name: String) -> String? {
        if name.contains("/") {
            return FileManager.default.isExecutableFile(atPath: name) ? name : nil
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let directories = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin", "/usr/local/sbin"]
        for directory in directories {
            let candidate = (directory as NSString).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate) {
                return candidate
            }
        }
        return nil
    }
}
