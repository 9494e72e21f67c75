import Foundation
import Testing

@testable import ChimeHarness

@Suite("Harness: ChildProcess, TemporaryDirectory, TestBroker")
struct TestSupportTests {
    @Test("captures stdout and stderr lines and the exit status")
    func capturesOutput() async throws {
        let child = try ChildProcess("/bin/sh", arguments: ["-c", "echo one; echo two; printf oops >&2; exit 3"])
        try child.start()
        #expect(await child.waitForExit(timeout: .seconds(10)) == .exited(3))
        #expect(child.standardOutputLines == ["one", "two"])
        #expect(child.standardErrorLines == ["oops"])
        #expect(!child.isRunning)
    }

    @Test("the child sees SIGTERM (clean signal mask), and gets the environment and directory asked for")
    func signalsEnvironmentDirectory() async throws {
        let directory = try TemporaryDirectory()
        let child = try ChildProcess(
            "sh",
            arguments: [
                "-c",
                #"trap 'echo "got TERM in $(pwd) with $GREETING"; exit 7' TERM; echo ready; while :; do sleep 0.02; done"#,
            ],
            environment: ["GREETING": "hello", "PATH": "/usr/bin:/bin"],
            currentDirectory: directory.path
        )
        try child.start()
        #expect(child.pid > 0)
        #expect(await child.waitForLine(timeout: .seconds(10)) { $0 == "ready" } == "ready")
        child.terminate()
        #expect(await child.waitForExit(timeout: .seconds(10)) == .exited(7))
        #expect(child.standardOutputLines.last == "got TERM in \(directory.path) with hello")
    }

    @Test("kill() ends it with SIGKILL; waiting on a running process times out with nil")
    func killAndTimeout() async throws {
        let child = try ChildProcess("sleep", arguments: ["30"])
        try child.start()
        #expect(await child.waitForExit(timeout: .milliseconds(50)) == nil)
        #expect(child.isRunning)
        child.kill()
        #expect(await child.waitForExit(timeout: .seconds(10)) == .signalled(9))
    }

    @Test("the watchdog kills the child when the test process's end of the lifeline closes")
    func watchdog() async throws {
        let child = try ChildProcess("sleep", arguments: ["30"])
        try child.start()
        child.simulateTestProcessDeath()
        #expect(await child.waitForExit(timeout: .seconds(10)) == .signalled(9))
    }

    @Test("a temporary directory is removed with its contents")
    func temporaryDirectory() throws {
        var path = ""
        do {
            let directory = try TemporaryDirectory(prefix: "chime-test")
            path = directory.path
            #expect(path.hasPrefix("/tmp/chime-test-"))
            try Data("x".utf8).write(to: URL(fileURLWithPath: directory.appending("file")))
            #expect(FileManager.default.fileExists(atPath: directory.appending("file")))
        }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("a broker restarts on the same port, and its directory goes away with it")
    func brokerRestart() async throws {
        var directory = ""
        do {
            let broker = try await TestBroker.start()
            directory = broker.directory.path
            let port = broker.port
            #expect(broker.isRunning)
            await broker.kill()
            #expect(!broker.isRunning)
            try await broker.restart()
            #expect(broker.isRunning)
            #expect(broker.port == port)
            #expect(broker.url == "mqtt://127.0.0.1:\(port)")
            #expect(broker.log.contains("Opening ipv4 listen socket on port \(port)"))
            await broker.stop()
        }
        #expect(!FileManager.default.fileExists(atPath: directory))
    }
}
