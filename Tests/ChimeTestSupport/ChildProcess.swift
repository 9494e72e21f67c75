import Foundation
import Synchronization

/// Runs a program for a test (a built binary, `mosquitto`, `mosquitto_sub`), capturing its output line
/// by line, with waits that take a timeout and signals to end it.
///
/// By default a child never outlives the test process, even if that process is killed: a tiny watchdog
/// (`sh`) blocks reading a socket whose other end only the test process holds (close-on-exec, so no other
/// child inherits it). When the test process dies for any reason the kernel closes that end, the read
/// returns, and the watchdog kills the child with SIGKILL. (`PR_SET_PDEATHSIG` is not available through
/// Foundation's `Process`, and it would fire when the spawning *thread* exits, which for a Swift
/// concurrency thread can be any time.)
///
/// `@unchecked Sendable`: the `Process` objects are only configured before `start()`; afterwards only
/// their immutable pid is read and signals are sent by pid. Everything that changes is in `state`.
public final class ChildProcess: @unchecked Sendable {
    /// How the process ended.
    public enum Termination: Sendable, Equatable {
        case exited(Int32)
        case signalled(Int32)
    }

    public let executable: String
    public let arguments: [String]
    private let process = Process()
    private let watchdog: Process?
    private let lifeline: Mutex<Int32>  // write end of the watchdog's pipe, -1 once closed
    private let state = Mutex(State())

    private struct State {
        var stdout = LineBuffer()
        var stderr = LineBuffer()
        var termination: Termination?
        var started = false
    }

    private struct LineBuffer {
        var lines: [String] = []
        var partial: [UInt8] = []
        var closed = false

        mutating func append(_ data: Data) {
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
    public init(
        _ executable: String,
        arguments: [String] = [],
        environment: [String: String]? = nil,
        currentDirectory: String? = nil,
        killWithTestProcess: Bool = true
    ) throws {
        guard let path = Self.find(executable) else {
            throw TestSupportError("cannot find the program '\(executable)' in PATH")
        }
        self.executable = path
        self.arguments = arguments
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let environment {
            process.environment = environment
        }
        if let currentDirectory {
            process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory, isDirectory: true)
        }
        if killWithTestProcess {
            let watchdog = Process()
            watchdog.executableURL = URL(fileURLWithPath: "/bin/sh")
            self.watchdog = watchdog
        } else {
            self.watchdog = nil
        }
        self.lifeline = Mutex(-1)
    }

    deinit {
        if isRunning {
            kill()
        }
        releaseWatchdog()
    }

    /// The process id (valid after `start()`).
    public var pid: Int32 {
        process.processIdentifier
    }

    /// Starts the process (and its watchdog).
    /// - Throws: `TestSupportError` if it cannot be started.
    public func start() throws {
        try state.withLock { state in
            guard !state.started else { throw TestSupportError("\(executable) was started already") }
            state.started = true
        }
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        capture(stdout.fileHandleForReading, standardError: false)
        capture(stderr.fileHandleForReading, standardError: true)
        process.terminationHandler = { [weak self] process in
            let termination: Termination =
                process.terminationReason == .uncaughtSignal
                ? .signalled(process.terminationStatus) : .exited(process.terminationStatus)
            self?.state.withLock { $0.termination = termination }
        }
        do {
            try process.run()
        } catch {
            throw TestSupportError("cannot start \(executable): \(error)")
        }
        try startWatchdog()
    }

    private func capture(_ handle: FileHandle, standardError: Bool) {
        handle.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
            }
            self?.state.withLock { state in
                if standardError {
                    data.isEmpty ? state.stderr.close() : state.stderr.append(data)
                } else {
                    data.isEmpty ? state.stdout.close() : state.stdout.append(data)
                }
            }
        }
    }

    private func startWatchdog() throws {
        guard let watchdog else { return }
        var ends: [Int32] = [-1, -1]
        // Created close-on-exec atomically, so a process spawned by another thread cannot inherit it.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw TestSupportError("socketpair failed: \(String(cString: strerror(errno)))")
        }
        // sh reads until EOF, which comes only when every copy of the other end is closed: ours, by
        // `releaseWatchdog()` or by the kernel when the test process dies.
        watchdog.arguments = ["-c", "read _ignored; kill -9 \"$1\" 2>/dev/null", "chime-watchdog", String(pid)]
        watchdog.standardInput = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
        watchdog.standardOutput = FileHandle.nullDevice
        watchdog.standardError = FileHandle.nullDevice
        lifeline.withLock { $0 = ends[1] }
        do {
            try watchdog.run()
        } catch {
            releaseWatchdog()
            throw TestSupportError("cannot start the watchdog for \(executable): \(error)")
        }
    }

    /// Ends the watchdog without letting it act (the child is gone or is being stopped normally).
    private func releaseWatchdog() {
        guard let watchdog else { return }
        if watchdog.isRunning {
            Glibc.kill(watchdog.processIdentifier, SIGKILL)
        }
        lifeline.withLock { fd in
            if fd >= 0 {
                close(fd)
                fd = -1
            }
        }
    }

    /// Whether the process runs (started and not yet reaped).
    public var isRunning: Bool {
        state.withLock { $0.started && $0.termination == nil }
    }

    /// How it ended, once it has.
    public var termination: Termination? {
        state.withLock { $0.termination }
    }

    /// The complete lines written to standard output so far.
    public var standardOutputLines: [String] {
        state.withLock { $0.stdout.lines }
    }

    /// The complete lines written to standard error so far.
    public var standardErrorLines: [String] {
        state.withLock { $0.stderr.lines }
    }

    /// Sends a signal (by pid), if the process still runs.
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
        let ended = await poll(timeout: timeout) { state in
            state.termination != nil && state.stdout.closed && state.stderr.closed
        }
        guard ended else { return termination }
        releaseWatchdog()
        return termination
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
        _ = await poll(timeout: timeout) { state in
            let lines = onStandardError ? state.stderr.lines : state.stdout.lines
            found = lines.first(where: predicate)
            return found != nil
        }
        return found
    }

    /// Checks `condition` every few milliseconds until it holds or `timeout` passes.
    private func poll(timeout: Duration, _ condition: (State) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if state.withLock({ condition($0) }) { return true }
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
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
