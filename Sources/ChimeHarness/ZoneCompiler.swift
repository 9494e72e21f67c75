import Foundation

/// Zone rules a test writes itself, compiled with the machine's `zic` (tzcode) into TZif files: a
/// zone database the test controls, for the TZif reader's tests and for a tzdata upgrade under a
/// running chimed.
public enum ZoneCompiler {
    /// Where Debian's tzdata package puts the compiler.
    public static let zic = "/usr/sbin/zic"

    /// tzdata source for a zone whose rules a test changes: a fixed `offset` (`-4:00`), or with `dst`
    /// the EU's daylight saving rules on top of it. The zone is `name` (a real zone's name, which the
    /// name check accepts) and `Test/Shifting` (one it refuses).
    public static func shifting(offset: String, dst: Bool = false, name: String = "America/Asuncion") -> String {
        var text = ""
        if dst {
            text += """
                Rule T 2000 max - Mar lastSun 1:00u 1:00 S
                Rule T 2000 max - Oct lastSun 1:00u 0 -

                """
        }
        text += "Zone \(name) \(offset) \(dst ? "T" : "-") %z\n"
        text += "Zone Test/Shifting \(offset) \(dst ? "T" : "-") %z\n"
        return text
    }

    /// Compiles `source` into `directory` (`zic -d`).
    /// - Parameter slim: zic's `-b slim` (transitions up to the footer's rule) or `-b fat`.
    /// - Throws: ``HarnessError`` with zic's messages when it fails.
    public static func compile(_ source: String, into directory: String, slim: Bool = true) throws {
        let input = directory + "/.source-\(UUID().uuidString)"
        try Data(source.utf8).write(to: URL(fileURLWithPath: input))
        defer { try? FileManager.default.removeItem(atPath: input) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: zic)
        process.arguments = ["-b", slim ? "slim" : "fat", "-d", directory, input]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            throw HarnessError("zic failed: \(text)")
        }
    }

    /// Compiles `source` as a tzdata upgrade installs it: into a directory beside `directory`, then
    /// each zone file renamed over the old one, so that a reader sees the old file or the new one,
    /// never half of one.
    /// - Throws: ``HarnessError`` when zic fails or a rename does.
    public static func install(_ source: String, into directory: String) throws {
        let parent = (directory as NSString).deletingLastPathComponent
        let staging = parent + "/.zic-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: staging) }
        try compile(source, into: staging)
        let files = FileManager.default.enumerator(atPath: staging)
        while let name = files?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let from = staging + "/" + name
            let to = directory + "/" + name
            guard FileManager.default.fileExists(atPath: from, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue {
                try FileManager.default.createDirectory(atPath: to, withIntermediateDirectories: true)
            } else if rename(from, to) != 0 {
                throw HarnessError("cannot rename \(from) to \(to): \(String(cString: strerror(errno)))")
            }
        }
    }
}
