import ChimeTestSupport
import Foundation
import Testing

/// The client library as an app adds it: a package of its own that depends on this one and uses
/// `ChimeClient`, built from a temporary directory. And what only a versioned dependency would
/// refuse, which a path dependency lets through: an unsafe flag in any target the library needs.
@Suite struct ClientPackageTests {
    /// The targets the `ChimeClient` product needs, from `swift package dump-package`.
    static func clientClosure() async throws -> (closure: Set<String>, targets: [[String: Any]]) {
        // A scratch path of its own: `swift test`, which runs this, holds the package's.
        let scratch = try TemporaryDirectory(prefix: "chime-dump-package")
        let dump = try ChildProcess(
            "swift",
            arguments: ["package", "--scratch-path", scratch.path, "dump-package"],
            currentDirectory: Repository.path(".")
        )
        try dump.start()
        #expect(await dump.waitForExit(timeout: .seconds(120)) == .exited(0), "\(dump.standardErrorLines)")
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(dump.standardOutputLines.joined(separator: "\n").utf8))
                as? [String: Any]
        )
        let targets = try #require(json["targets"] as? [[String: Any]])
        func dependencies(_ name: String) -> [String] {
            let target = targets.first { $0["name"] as? String == name }
            let listed = target?["dependencies"] as? [[String: Any]] ?? []
            return listed.compactMap { ($0["byName"] as? [Any])?.first as? String }
        }
        var closure: Set<String> = []
        var pending = ["ChimeClient"]
        while let next = pending.popLast() {
            guard closure.insert(next).inserted else { continue }
            pending += dependencies(next)
        }
        return (closure, targets)
    }

    @Test func theClientLibraryNeedsTheProtocolAndTimeOnlyAndNoUnsafeFlag() async throws {
        let (closure, targets) = try await Self.clientClosure()
        // ChimeJSON is the protocol's codec, in a module of its own so that logging can use it.
        #expect(closure == ["ChimeClient", "ChimeProtocol", "ChimeJSON", "ChimeTime"], "\(closure.sorted())")
        for target in targets where closure.contains(target["name"] as? String ?? "") {
            let settings = target["settings"] as? [[String: Any]] ?? []
            let unsafe = settings.filter { ($0["kind"] as? [String: Any])?["unsafeFlags"] != nil }
            #expect(unsafe.isEmpty, "\(target["name"] ?? "?") has unsafe flags: \(unsafe)")
        }
    }

    @Test(.timeLimit(.minutes(10))) func anAppPackageBuildsWithTheClientLibrary() async throws {
        let app = try TemporaryDirectory(prefix: "chime-client-app")
        let identity = Repository.root.lastPathComponent.lowercased()
        let package = """
            // swift-tools-version:6.0
            import PackageDescription

            let package = Package(
                name: "ReminderApp",
                platforms: [.macOS(.v15), .iOS(.v18)],
                dependencies: [.package(path: "\(Repository.root.path)")],
                targets: [
                    .executableTarget(
                        name: "ReminderApp",
                        dependencies: [.product(name: "ChimeClient", package: "\(identity)")]
                    )
                ]
            )
            """
        let main = """
            import ChimeClient

            let request = NotificationRequest(
                identifier: "medicine",
                content: NotificationContent(title: "Medicine", body: "Take your pill", badge: .increment(1)),
                trigger: .timeInterval(60)
            )
            print(request.identifier)
            """
        try FileManager.default.createDirectory(
            atPath: app.path + "/Sources/ReminderApp",
            withIntermediateDirectories: true
        )
        try package.write(toFile: app.path + "/Package.swift", atomically: true, encoding: .utf8)
        try main.write(toFile: app.path + "/Sources/ReminderApp/main.swift", atomically: true, encoding: .utf8)
        let build = try ChildProcess(
            "swift",
            arguments: ["build", "--package-path", app.path],
            currentDirectory: app.path
        )
        try build.start()
        let status = await build.waitForExit(timeout: .seconds(590))
        #expect(status == .exited(0), "\((build.standardOutputLines + build.standardErrorLines).suffix(30))")
        // Only what the library needs was built: no engine, no C library.
        let built = try FileManager.default.contentsOfDirectory(atPath: app.path + "/.build/debug/Modules")
        #expect(!built.contains { $0.hasPrefix("ChimeEngine") || $0.hasPrefix("ChimeMQTT") }, "\(built)")
    }
}
