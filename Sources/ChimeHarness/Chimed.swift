import Foundation

/// A built executable of this package, beside the test bundle (`swift build --build-tests`,
/// which `make test` runs, builds them all).
public func builtProduct(_ name: String) throws -> String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    // On Linux the tests run from `.build/<triple>/<config>/ChimePackageTests.xctest`.
    if dir.lastPathComponent.hasSuffix(".xctest") { dir = dir.deletingLastPathComponent() }
    let path = dir.appendingPathComponent(name).path
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw HarnessError("\(path) is missing: build with `swift build --build-tests` (make test does)")
    }
    return path
}

/// A running `chimed` process on a test broker, with its own data directory: for the tests and
/// the benchmark.
public final class Chimed: Sendable {
    public let process: ChildProcess
    public let arguments: [String]

    /// - Parameter environment: chimed's whole environment (``FakeTime/environment(startingAt:)``
    ///   to start its clock at another time).
    public init(
        broker: TestBroker,
        dataDirectory: String,
        workerId: String,
        extra: [String] = [],
        environment: [String: String] = [:]
    ) throws {
        arguments =
            [
                "--broker", broker.url, "--data-dir", dataDirectory, "--worker-id", workerId, "--log-level", "debug",
                "--min-repeat-seconds", "1", "--stats-interval", "1",
            ] + extra
        var environment = environment
        if environment[FakeTime.variable] != nil {
            // libfaketime hides argv from Swift's CommandLine: the flags go as CHIME_*, which
            // chimed reads too.
            environment.merge(try FakeTime.flagsAsEnvironment(arguments)) { given, _ in given }
        }
        process = try ChildProcess(try builtProduct("chimed"), arguments: arguments, environment: environment)
    }

    /// A chimed binary at `executable` with exactly these arguments.
    public init(executable: String, arguments: [String]) throws {
        self.arguments = arguments
        process = try ChildProcess(executable, arguments: arguments, environment: [:])
    }

    /// Starts it and waits until it serves: connected and subscribed.
    public func start() async throws {
        try process.start()
        guard
            await process.waitForLine(onStandardError: true, timeout: .seconds(20), where: { $0.contains(" serving ") })
                != nil
        else {
            throw HarnessError("chimed did not connect:\n\(process.standardErrorLines.joined(separator: "\n"))")
        }
    }

    public var log: String { process.standardErrorLines.joined(separator: "\n") }
}
