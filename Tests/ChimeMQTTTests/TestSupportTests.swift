import ChimeTestSupport
import Testing

@Suite("Test support: ChildProcess, TemporaryDirectory")
struct TestSupportTests {
    @Test("captures stdout and stderr lines and the exit status")
    func capturesOutput() async throws {
        let child = try ChildProcess("/bin/sh", arguments: ["-c", "echo one; echo two; echo oops >&2; exit 3"])
        try child.start()
        let termination = await child.waitForExit(timeout: .seconds(10))
        #expect(termination == .exited(3))
        #expect(child.standardOutputLines == ["one", "two"])
        #expect(child.standardErrorLines == ["oops"])
    }
}
