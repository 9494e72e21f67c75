import Foundation

/// A fresh directory under `/tmp`, removed with everything in it when the object goes away.
public final class TemporaryDirectory: Sendable {
    /// The directory's absolute path.
    public let path: String

    /// Creates `/tmp/{prefix}-XXXXXX` (mode 0700).
    /// - Throws: ``HarnessError`` if `mkdtemp` fails.
    public init(prefix: String = "chime") throws {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else {
            throw HarnessError("cannot create a temporary directory: \(String(cString: strerror(errno)))")
        }
        self.path = String(cString: created)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The directory as a file URL.
    public var url: URL {
        URL(fileURLWithPath: path, isDirectory: true)
    }

    /// `path/name`.
    public func appending(_ name: String) -> String {
        (path as NSString).appendingPathComponent(name)
    }
}
