import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// What one run of the built `chime` did.
struct ChimeRun: CustomStringConvertible {
    var termination: ChildProcess.Termination?
    var out: [String]
    var err: [String]

    /// The exit status; nil if it was killed or did not end.
    var status: Int32? {
        if case .exited(let code)? = termination { return code }
        return nil
    }

    var stdout: String { out.joined(separator: "\n") }
    var stderr: String { err.joined(separator: "\n") }

    /// The stdout lines parsed as JSON objects.
    var jsonLines: [JSONObject] {
        out.compactMap { (try? JSON(parsing: $0))?.objectValue }
    }

    var description: String {
        "exit \(termination.map { "\($0)" } ?? "none")\n--- stdout\n\(stdout)\n--- stderr\n\(stderr)"
    }
}

/// Runs the built `chime` binary as a person would, with a controlled environment: only what
/// `environment` gives (so `CHIME_*` of the machine running the tests cannot leak in).
func runChime(
    _ arguments: [String],
    environment: [String: String] = [:],
    timeout: Duration = .seconds(60)
) async throws -> ChimeRun {
    let process = try ChildProcess(try builtProduct("chime"), arguments: arguments, environment: environment)
    try process.start()
    let termination = await process.waitForExit(timeout: timeout)
    if termination == nil {
        process.kill()
        await process.waitForExit(timeout: .seconds(10))
    }
    return ChimeRun(termination: termination, out: process.standardOutputLines, err: process.standardErrorLines)
}

/// A broker and a chimed for one test, and `chime` pointed at them through `CHIME_BROKER`.
final class CLIWorld: Sendable {
    let broker: TestBroker
    let data: TemporaryDirectory
    let workerId: String
    let chimed: Chimed

    static func start(extra: [String] = []) async throws -> CLIWorld {
        let broker = try await TestBroker.start()
        let world = try CLIWorld(broker: broker, extra: extra)
        try await world.chimed.start()
        return world
    }

    private init(broker: TestBroker, extra: [String]) throws {
        self.broker = broker
        data = try TemporaryDirectory(prefix: "chime-cli-data")
        workerId = "cli-\(UInt32.random(in: 0...UInt32.max))"
        chimed = try Chimed(broker: broker, dataDirectory: data.path, workerId: workerId, extra: extra)
    }

    var environment: [String: String] { ["CHIME_BROKER": broker.url] }

    /// `chime` with `CHIME_BROKER` set to this world's broker.
    func chime(_ arguments: String...) async throws -> ChimeRun {
        try await runChime(arguments, environment: environment)
    }

    func chime(_ arguments: [String]) async throws -> ChimeRun {
        try await runChime(arguments, environment: environment)
    }

    /// `chime` that must exit 0; records its output as an issue otherwise.
    @discardableResult
    func ok(_ arguments: String..., sourceLocation: SourceLocation = #_sourceLocation) async throws -> ChimeRun {
        let run = try await runChime(arguments, environment: environment)
        #expect(run.status == 0, "chime \(arguments.joined(separator: " ")): \(run)", sourceLocation: sourceLocation)
        return run
    }

    /// A running `chime` (watch), not waited for.
    func spawn(_ arguments: String...) throws -> ChildProcess {
        let process = try ChildProcess(try builtProduct("chime"), arguments: arguments, environment: environment)
        try process.start()
        return process
    }

    /// SIGTERM to chimed; returns once it has exited.
    func stopWorker() async {
        chimed.process.terminate()
        await chimed.process.waitForExit(timeout: .seconds(20))
    }

    func stop() async {
        await stopWorker()
        await broker.stop()
    }
}

/// A file of this repository (`docs/cli.md`).
func repositoryFile(_ path: String) -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(path)
}

/// The words of a command line as a POSIX shell splits them, for the simple lines the docs show:
/// blanks separate words, double or single quotes group them, `#` after a blank starts a comment.
func shellWords(_ line: String) -> [String] {
    var words: [String] = []
    var word: String?
    var quote: Character?
    for c in line {
        if let q = quote {
            if c == q { quote = nil } else { word?.append(c) }
        } else if c == "\"" || c == "'" {
            quote = c
            word = word ?? ""
        } else if c == " " {
            if let w = word { words.append(w) }
            word = nil
        } else if c == "#" && word == nil {
            break
        } else {
            word = (word ?? "") + String(c)
        }
    }
    if let word { words.append(word) }
    return words
}

/// The row of a table whose first column is `first`.
func row(_ lines: [String], _ first: String) -> String? {
    lines.first { $0.hasPrefix(first + " ") }
}
