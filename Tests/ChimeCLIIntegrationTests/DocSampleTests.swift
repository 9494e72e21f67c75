import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

// Every command and code sample of the repository's Markdown files (README.md, PROTOCOL.md,
// docs/*.md, clients/python/README.md, any other `*.md`) runs against a real worker, so that the
// docs cannot drift. The convention (CONTRIBUTING.md, "Every sample in the docs runs",
// says it for writers):
//
// 1. ```sh: a shell script, run with `bash -euo pipefail` in a scratch directory; it must exit 0
//    within 60 s.
// 2. ```console: lines starting with `$ ` are commands (a trailing `\` continues onto the next
//    line); the lines after a command, up to the next `$ `, are its shown output, not compared,
//    except that a line `[exit N]` gives its expected exit status (default 0). Each command runs
//    through `bash -c` in the same scratch directory, in order, within 60 s.
// 3. ```python: a Python script, run with `.build/python-venv/bin/python` (made by
//    `scripts/test-python --install` when missing), with `clients/python/src` first on
//    `PYTHONPATH` so that the client library is the one in the tree; it must exit 0 within 60 s.
// 4. ```swift: must appear verbatim (leading indentation and blank lines aside) in a Swift file
//    under Tests/, which `make test` compiles; a test there must run it.
// 5. Other info strings (none, `text`, `json`, `yaml`, ...) are not run. A `json` block must be JSON
//    (one value, or several one after the other). An info string that names a shell or Python
//    other than these (`bash`, `py`, ...) and a block without one whose lines start with `$ ` are
//    refused, so that no sample goes unchecked by mistake.
// 6. A block not meant to run (or a `json` block that elides with `...`) is marked on the line
//    right before its opening fence: `<!-- sample: not run (reason) -->`; the reason is required.
// 7. Each Markdown file gets one world: a fresh mosquitto on a free loopback port and the built
//    chimed with `--worker-id worker-1` and default flags otherwise (its data in `./data` of the
//    scratch directory), `CHIME_BROKER=mqtt://127.0.0.1:PORT`, `PATH` with the build directory
//    (chime, chimed, chime-bench) first and the mosquitto tools, and `-p PORT` as the default
//    option of mosquitto_pub, mosquitto_sub and mosquitto_rr (their `$XDG_CONFIG_HOME` files), so
//    that a command without `-p` reaches the world's broker as a reader's reaches `make run`'s.
//    Blocks run in file order. Before a block runs, `1883` in it is replaced by the world's port.
//    Whatever a block leaves running in the background is killed when it ends.
//
// `CHIME_DOC_SAMPLES_ONLY=docs/cli.md` checks only that page (comma-separated paths), and
// `CHIME_DOC_SAMPLES_SHOW=1` prints every command with what it really printed, to paste as shown
// output.

/// One fenced code block of a Markdown file.
struct DocBlock: Sendable {
    enum Kind: Sendable, Equatable {
        case sh, console, python, swift, json, other
    }

    /// The line of its opening fence, from 1.
    var line: Int
    /// The first word of the info string ("" for none).
    var info: String
    /// Its lines, without the fence's indentation.
    var lines: [String]
    /// The reason given by `<!-- sample: not run (reason) -->`, if it is marked.
    var notRun: String?

    var kind: Kind {
        switch info {
        case "sh": .sh
        case "console": .console
        case "python": .python
        case "swift": .swift
        case "json": .json
        default: .other
        }
    }

    var text: String { lines.joined(separator: "\n") + "\n" }
}

/// A sample that failed, or a block that breaks the convention: where, and why.
struct DocFailure: Sendable, CustomStringConvertible {
    var file: String
    var line: Int
    var message: String

    var description: String { "\(file):\(line): \(message)" }

    var sourceLocation: SourceLocation {
        SourceLocation(fileID: "Chime/\(file)", filePath: repositoryFile(file).path, line: line, column: 1)
    }
}

/// A command of a `console` block.
struct ConsoleCommand: Sendable, Equatable {
    /// The line of its `$ `.
    var line: Int
    /// The command, continuation lines included, without the `$ `.
    var text: String
    /// From `[exit N]`, else 0.
    var status: Int32
}

/// Reads the fenced blocks of a Markdown file, and what breaks the convention in them.
enum DocMarkdown {
    static let markerPrefix = "<!-- sample: not run ("
    static let markerSuffix = ") -->"
    /// Info strings that look like a sample the runner would run, but are not one of its own.
    static let lookalikes: Set<String> = [
        "bash", "shell", "zsh", "shell-session", "sh-session", "bash-session", "terminal", "py", "python3",
        "pycon",
    ]

    static func parse(_ text: String, file: String) -> (blocks: [DocBlock], failures: [DocFailure]) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
            $0.hasSuffix("\r") ? String($0.dropLast()) : String($0)
        }
        var blocks: [DocBlock] = []
        var failures: [DocFailure] = []
        func fail(_ line: Int, _ message: String) {
            failures.append(DocFailure(file: file, line: line, message: message))
        }
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let trimmed = line.drop { $0 == " " }
            guard let fence = openingFence(trimmed) else {
                if trimmed.hasPrefix("<!-- sample") {
                    let next = index + 1 < lines.count ? lines[index + 1].drop { $0 == " " } : ""
                    if openingFence(next) == nil {
                        fail(index + 1, "a sample marker must be the line right before a block's opening fence")
                    }
                }
                index += 1
                continue
            }
            let indent = line.count - trimmed.count
            var notRun: String?
            if index > 0 {
                let before = lines[index - 1].trimmingCharacters(in: .whitespaces)
                if before.hasPrefix("<!-- sample") {
                    if before.hasPrefix(markerPrefix) && before.hasSuffix(markerSuffix)
                        && before.count > markerPrefix.count + markerSuffix.count
                    {
                        let reason = before.dropFirst(markerPrefix.count).dropLast(markerSuffix.count)
                        if reason.trimmingCharacters(in: .whitespaces).isEmpty {
                            fail(index, "a sample marker needs a reason: <!-- sample: not run (reason) -->")
                        } else {
                            notRun = String(reason)
                        }
                    } else {
                        fail(index, "malformed sample marker; write <!-- sample: not run (reason) -->")
                    }
                }
            }
            var content: [String] = []
            var end = index + 1
            while end < lines.count, !isClosingFence(lines[end], like: fence) {
                content.append(String(lines[end].dropFirst(min(indent, lines[end].prefix { $0 == " " }.count))))
                end += 1
            }
            if end == lines.count {
                fail(index + 1, "this block's fence is never closed")
            }
            let block = DocBlock(line: index + 1, info: fence.info, lines: content, notRun: notRun)
            if notRun == nil {
                if lookalikes.contains(block.info) {
                    fail(
                        block.line,
                        "info string \(block.info) is not run: write sh, console or python, or mark it not run"
                    )
                } else if block.info.isEmpty && content.contains(where: { $0.hasPrefix("$ ") }) {
                    fail(
                        block.line,
                        "this block looks like a console session: give it the info string console, or mark it not run"
                    )
                }
            }
            blocks.append(block)
            index = end + 1
        }
        return (blocks, failures)
    }

    private struct Fence {
        var character: Character
        var count: Int
        var info: String
    }

    private static func openingFence(_ trimmed: Substring) -> Fence? {
        guard let first = trimmed.first, first == "`" || first == "~" else { return nil }
        let count = trimmed.prefix { $0 == first }.count
        guard count >= 3 else { return nil }
        let rest = trimmed.dropFirst(count).trimmingCharacters(in: .whitespaces)
        if first == "`" && rest.contains("`") { return nil }
        let info = rest.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
        return Fence(character: first, count: count, info: info)
    }

    private static func isClosingFence(_ line: String, like fence: Fence) -> Bool {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        return trimmed.count >= fence.count && trimmed.allSatisfy { $0 == fence.character }
    }

    /// The commands of a `console` block, each with its expected exit status.
    static func commands(of block: DocBlock, file: String) -> ([ConsoleCommand], [DocFailure]) {
        var commands: [ConsoleCommand] = []
        var failures: [DocFailure] = []
        var sawStatus = false
        var index = 0
        while index < block.lines.count {
            let line = block.lines[index]
            let number = block.line + 1 + index
            if line.hasPrefix("$ ") {
                var text = String(line.dropFirst(2))
                while text.hasSuffix("\\"), index + 1 < block.lines.count {
                    index += 1
                    text += "\n" + block.lines[index]
                }
                commands.append(ConsoleCommand(line: number, text: text, status: 0))
                sawStatus = false
            } else if let status = exitStatus(line) {
                if commands.isEmpty || sawStatus {
                    failures.append(DocFailure(file: file, line: number, message: "[exit N] must follow one command"))
                } else {
                    commands[commands.count - 1].status = status
                    sawStatus = true
                }
            } else if commands.isEmpty && !line.trimmingCharacters(in: .whitespaces).isEmpty {
                failures.append(
                    DocFailure(file: file, line: number, message: "a console block starts with a `$ ` command")
                )
            }
            index += 1
        }
        if commands.isEmpty && failures.isEmpty {
            failures.append(DocFailure(file: file, line: block.line, message: "a console block without a `$ ` command"))
        }
        return (commands, failures)
    }

    private static func exitStatus(_ line: String) -> Int32? {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("[exit "), trimmed.hasSuffix("]") else { return nil }
        return Int32(trimmed.dropFirst(6).dropLast())
    }

    /// Whether `text` is JSON: one value, or several one after the other (JSON lines, or values
    /// spread over lines).
    static func isJSON(_ text: String) -> Bool {
        if (try? JSON(parsing: text)) != nil { return true }
        var pending = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            pending += line + "\n"
            if (try? JSON(parsing: pending)) != nil { pending = "" }
        }
        return pending.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
    }
}

/// What one command or script of a sample did.
struct DocRun: Sendable {
    var termination: ChildProcess.Termination?
    var timedOut: Bool
    /// Standard output and standard error together, as a terminal shows them.
    var output: [String]

    var status: Int32? {
        if case .exited(let code)? = termination { return code }
        return nil
    }

    var outcome: String {
        if timedOut { return "did not end" }
        switch termination {
        case .exited(let code)?: return "exited \(code)"
        case .signalled(let signal)?: return "killed by signal \(signal)"
        case nil: return "did not end"
        }
    }

    /// The output for a report: its last 60 lines.
    var shownOutput: String {
        let lines = output.count > 60 ? ["... (\(output.count - 60) lines before)"] + output.suffix(60) : output
        return lines.isEmpty ? "(no output)" : lines.joined(separator: "\n")
    }
}

/// The world one Markdown file's samples run in: a broker, chimed, a scratch directory.
final class DocWorld: Sendable {
    let broker: TestBroker
    /// The samples' working directory; chimed's data directory is `data` in it.
    let scratch: TemporaryDirectory
    /// The scripts, `HOME` and `XDG_CONFIG_HOME`, out of the samples' sight.
    let support: TemporaryDirectory
    let chimed: Chimed
    let environment: [String: String]

    static func start() async throws -> DocWorld {
        let world = try DocWorld(broker: try await TestBroker.start())
        try await world.chimed.start()
        return world
    }

    private init(broker: TestBroker) throws {
        self.broker = broker
        scratch = try TemporaryDirectory(prefix: "chime-doc")
        support = try TemporaryDirectory(prefix: "chime-doc-support")
        chimed = try Chimed(
            executable: try builtProduct("chimed"),
            arguments: ["--broker", broker.url, "--data-dir", scratch.appending("data"), "--worker-id", "worker-1"]
        )
        let home = support.appending("home")
        let config = support.appending("config")
        for directory in [home, config] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        for tool in ["mosquitto_pub", "mosquitto_sub", "mosquitto_rr"] {
            try "-p \(broker.port)\n".write(
                toFile: (config as NSString).appendingPathComponent(tool),
                atomically: true,
                encoding: .utf8
            )
        }
        let build = URL(fileURLWithPath: try builtProduct("chime")).deletingLastPathComponent().path
        let inherited = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        environment = [
            "PATH": "\(build):\(inherited):/usr/sbin:/usr/bin:/bin",
            "CHIME_BROKER": broker.url,
            "HOME": home,
            "XDG_CONFIG_HOME": config,
            "LANG": "C.UTF-8",
            "PYTHONPATH": repositoryFile("clients/python/src").path,
            "PYTHONDONTWRITEBYTECODE": "1",
        ]
    }

    var port: Int { broker.port }

    func stop() async {
        chimed.process.terminate()
        await chimed.process.waitForExit(timeout: .seconds(20))
        await broker.stop()
    }

    /// Runs `arguments` in the scratch directory, in a session of its own (so that whatever it
    /// leaves behind can be killed), standard error joined to standard output.
    func run(_ arguments: [String], timeout: Duration) async throws -> DocRun {
        let process = try ChildProcess(
            "setsid",
            arguments: ["--wait", "/bin/sh", "-c", "exec \"$@\" 2>&1", "sh"] + arguments,
            environment: environment,
            currentDirectory: scratch.path
        )
        try process.start()
        let ended = await eventually(timeout: timeout, every: .milliseconds(10)) { process.termination != nil }
        // The session's id is the process's: this ends the command if it still runs, and anything
        // it started in the background.
        kill(-process.pid, SIGKILL)
        let termination = await process.waitForExit(timeout: .seconds(10))
        return DocRun(termination: ended ? termination : nil, timedOut: !ended, output: process.standardOutputLines)
    }

    /// Writes `text` to a file out of the samples' sight and returns its path.
    func script(_ text: String, named name: String) throws -> String {
        let path = support.appending(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}

/// Runs the samples of Markdown files.
enum DocSamples {
    static let timeout = Duration.seconds(60)

    /// The pages to check: `markdownFiles()`, or only those `CHIME_DOC_SAMPLES_ONLY` names
    /// (comma-separated paths from the repository's root).
    static func pages() -> [String] {
        guard let only = ProcessInfo.processInfo.environment["CHIME_DOC_SAMPLES_ONLY"], !only.isEmpty else {
            return markdownFiles()
        }
        return only.split(separator: ",").map(String.init)
    }

    /// Every Markdown file of the repository (hidden directories aside), relative to its root,
    /// found when the tests start: a new page is picked up without a change here.
    static func markdownFiles() -> [String] {
        let root = repositoryFile("").standardizedFileURL.path
        guard
            let enumerator = FileManager.default.enumerator(
                at: URL(fileURLWithPath: root),
                includingPropertiesForKeys: nil,
                options: [.skipsHiddenFiles]
            )
        else { return [] }
        var files: [String] = []
        for case let url as URL in enumerator {
            let path = url.standardizedFileURL.path
            if url.lastPathComponent == "bench-results" || url.lastPathComponent == "Packages" {
                enumerator.skipDescendants()
            } else if path.hasSuffix(".md") {
                files.append(String(path.dropFirst(root.count).drop { $0 == "/" }))
            }
        }
        return files.sorted()
    }

    /// Runs every sample of `text` (the Markdown file `file`) in one world, in order.
    /// - Returns: what failed, in file order.
    static func check(_ text: String, file: String, timeout: Duration = timeout) async throws -> [DocFailure] {
        let (blocks, parseFailures) = DocMarkdown.parse(text, file: file)
        var failures = parseFailures
        let runs: Set<DocBlock.Kind> = [.sh, .console, .python]
        let world = blocks.contains { $0.notRun == nil && runs.contains($0.kind) } ? try await DocWorld.start() : nil
        do {
            for block in blocks where block.notRun == nil {
                failures += try await check(block, file: file, world: world, timeout: timeout)
            }
        } catch {
            await world?.stop()
            throw error
        }
        await world?.stop()
        return failures.sorted { $0.line < $1.line }
    }

    private static func check(
        _ block: DocBlock,
        file: String,
        world: DocWorld?,
        timeout: Duration
    ) async throws -> [DocFailure] {
        func failure(_ line: Int, _ message: String) -> DocFailure {
            DocFailure(file: file, line: line, message: message)
        }
        switch block.kind {
        case .other:
            return []
        case .json:
            return DocMarkdown.isJSON(block.text)
                ? []
                : [failure(block.line, "this json block is not JSON; if it elides with ..., mark it not run")]
        case .swift:
            return SwiftCopies.contains(block.lines)
                ? []
                : [
                    failure(
                        block.line,
                        "this swift block is in no Swift file under Tests/: \(SwiftCopies.hint(block.lines))"
                    )
                ]
        case .sh, .console, .python:
            break
        }
        guard let world else { return [] }
        let text = block.text.replacingOccurrences(of: "1883", with: String(world.port))
        switch block.kind {
        case .sh:
            let path = try world.script(text, named: "sample-\(block.line).sh")
            let run = try await world.run(["bash", "-euo", "pipefail", path], timeout: timeout)
            show(file, block.line, text, run)
            guard run.status == 0 else {
                return [
                    failure(
                        block.line,
                        "sh block \(run.outcome), expected 0:\n\(text)--- output\n\(run.shownOutput)\(log(world))"
                    )
                ]
            }
            return []
        case .python:
            if let problem = await PythonSamples.ready.value {
                return [failure(block.line, "cannot run the python samples: \(problem)")]
            }
            let path = try world.script(text, named: "sample-\(block.line).py")
            let run = try await world.run([PythonSamples.python, path], timeout: timeout)
            show(file, block.line, text, run)
            guard run.status == 0 else {
                return [
                    failure(
                        block.line,
                        "python block \(run.outcome), expected 0:\n\(text)--- output\n\(run.shownOutput)\(log(world))"
                    )
                ]
            }
            return []
        default:
            let substituted = DocBlock(
                line: block.line,
                info: block.info,
                lines: text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init),
                notRun: nil
            )
            var (commands, failures) = DocMarkdown.commands(of: substituted, file: file)
            for command in commands {
                let run = try await world.run(["bash", "-c", command.text], timeout: timeout)
                show(file, command.line, "$ " + command.text, run)
                if run.status != command.status {
                    failures.append(
                        failure(
                            command.line,
                            "$ \(command.text)\n\(run.outcome), expected \(command.status)\n--- output\n\(run.shownOutput)\(log(world))"
                        )
                    )
                }
            }
            return failures
        }
    }

    /// The end of chimed's log, for a report.
    private static func log(_ world: DocWorld) -> String {
        "\n--- chimed's log, last lines\n" + world.chimed.process.standardErrorLines.suffix(8).joined(separator: "\n")
    }

    /// With `CHIME_DOC_SAMPLES_SHOW=1`: what ran and what it printed.
    private static func show(_ file: String, _ line: Int, _ text: String, _ run: DocRun) {
        guard ProcessInfo.processInfo.environment["CHIME_DOC_SAMPLES_SHOW"] == "1" else { return }
        var lines = ["==> \(file):\(line) (\(run.outcome))", text.hasSuffix("\n") ? String(text.dropLast()) : text]
        lines += run.output
        if let status = run.status, status != 0 { lines.append("[exit \(status)]") }
        print(lines.joined(separator: "\n"))
    }
}

/// The Swift files under Tests/ that `make test` compiles, for the `swift` blocks.
enum SwiftCopies {
    /// Each file's lines, trimmed, blank ones left out.
    static let files: [(path: String, lines: [String])] = {
        let tests = repositoryFile("Tests")
        guard let enumerator = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil) else {
            return []
        }
        var files: [(String, [String])] = []
        for case let url as URL in enumerator {
            if url.lastPathComponent == "Fixtures" {
                enumerator.skipDescendants()
            } else if url.pathExtension == "swift", url.lastPathComponent != "DocSampleTests.swift",
                let text = try? String(contentsOf: url, encoding: .utf8)
            {
                files.append((url.path, normalized(text.split(separator: "\n").map(String.init))))
            }
        }
        return files
    }()

    static func normalized(_ lines: [String]) -> [String] {
        lines.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    static func contains(_ block: [String]) -> Bool {
        let wanted = normalized(block)
        guard !wanted.isEmpty else { return true }
        return files.contains { file in
            file.lines.indices.contains { start in file.lines[start...].starts(with: wanted) }
        }
    }

    /// Where the block comes closest to a file, to say what differs.
    static func hint(_ block: [String]) -> String {
        let wanted = normalized(block)
        var best: (path: String, matched: Int) = ("", 0)
        for file in files {
            for start in file.lines.indices where file.lines[start] == wanted.first {
                let matched = zip(file.lines[start...], wanted).prefix { $0 == $1 }.count
                if matched > best.matched { best = (file.path, matched) }
            }
        }
        guard best.matched > 0 else { return "not even its first line \"\(wanted.first ?? "")\"" }
        let root = repositoryFile("").standardizedFileURL.path + "/"
        let path = best.path.hasPrefix(root) ? String(best.path.dropFirst(root.count)) : best.path
        return "\(path) has its first \(best.matched) lines, then not \"\(wanted[best.matched])\""
    }
}

/// The virtual environment the python samples run in.
enum PythonSamples {
    static let python = repositoryFile(".build/python-venv/bin/python").path

    /// Nil once the environment has the client's dependencies (made by `scripts/test-python
    /// --install` if it has not), else what went wrong.
    static let ready = Task<String?, Never> {
        if await imports() { return nil }
        do {
            let install = try ChildProcess(
                repositoryFile("scripts/test-python").path,
                arguments: ["--install"],
                currentDirectory: repositoryFile("").path
            )
            try install.start()
            let end = await install.waitForExit(timeout: .seconds(600))
            guard end == .exited(0), await imports() else {
                let output = (install.standardOutputLines + install.standardErrorLines).joined(separator: "\n")
                return "scripts/test-python --install \(end.map { "\($0)" } ?? "did not end"):\n\(output)"
            }
            return nil
        } catch {
            return "\(error)"
        }
    }

    private static func imports() async -> Bool {
        guard FileManager.default.isExecutableFile(atPath: python),
            let check = try? ChildProcess(python, arguments: ["-c", "import paho.mqtt.client"])
        else { return false }
        guard (try? check.start()) != nil else { return false }
        return await check.waitForExit(timeout: .seconds(30)) == .exited(0)
    }
}

/// Every sample of every Markdown file runs, or is marked not run with a reason.
@Suite struct DocSampleTests {
    @Test(arguments: DocSamples.pages())
    func samplesRun(_ file: String) async throws {
        let text = try String(contentsOf: repositoryFile(file), encoding: .utf8)
        for failure in try await DocSamples.check(text, file: file) {
            Issue.record(Comment(rawValue: failure.description), sourceLocation: failure.sourceLocation)
        }
    }

    @Test func theRepositoryHasItsPages() {
        let files = DocSamples.markdownFiles()
        for page in ["README.md", "PROTOCOL.md", "docs/cli.md", "docs/production.md", "clients/python/README.md"] {
            #expect(files.contains(page), "\(files)")
        }
    }

    /// The runner fails on each way a sample can break, and only on those.
    @Test func brokenSamplesFail() async throws {
        let page = """
            ```sh
            test "$CHIME_BROKER" = mqtt://127.0.0.1:1883 && chime list --device phone-1
            sleep 30 &
            ```

            ```sh
            false
            ```

            ```console
            $ chime snooze --device phone-1 --id nope --in 5m
            error not_found id: no notification "nope" on this device
            [exit 1]
            $ echo one \\
              two
            one two
            ```

            ```console
            $ exit 3
            ```

            ```console
            $ true
            [exit 1]
            ```

            ```swift
            let inNoTestFile = "\(UUID().uuidString)"
            ```

            ```json
            {"ok": true, "result": { ... }}
            ```

            <!-- sample: not run (elided) -->
            ```json
            {"ok": true, "result": { ... }}
            ```

            ```json
            {"a": 1}
            {"b": [2,
                   3]}
            ```

            <!-- sample: not run () -->
            ```sh
            true
            ```

            ```bash
            true
            ```

            ```
            $ echo unlabelled
            ```

            <!-- sample: not run (what it says is wrong on purpose) -->
            ```sh
            false
            ```

            <!-- sample: not run (a marker before no block) -->

            ```sh
            sleep 5
            ```

            ```python
            import chime_client
            ```

            ```python
            raise SystemExit(3)
            ```
            """
        // On a fresh machine the first python sample builds the virtual environment (half a minute):
        // that must not count as the background job's time.
        #expect(await PythonSamples.ready.value == nil)
        let started = ContinuousClock.now
        let failures = try await DocSamples.check(page, file: "broken.md", timeout: .seconds(3))
        #expect(failures.map(\.line) == [6, 20, 24, 28, 32, 47, 52, 56, 65, 67, 75], "\(failures)")
        #expect(ContinuousClock.now - started < .seconds(30), "a block's background job held the runner up")
    }
}
