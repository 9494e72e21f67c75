import Foundation

/// Starts a process's wall clock at another time, with Debian's libfaketime (package `faketime`,
/// which `make test` installs): the real `chimed`, driven by real clients, living through Friday
/// evening and Monday evening within seconds. Only the wall clock moves; the monotonic clock, which
/// timeouts and MQTT keep-alives use, stays real, and the clock runs at its normal rate from there.
public enum FakeTime {
    /// The environment that starts the wall clock at `start` (whole seconds) when the process starts.
    public static func environment(startingAt start: Date) throws -> [String: String] {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return [
            "LD_PRELOAD": try library(),
            variable: "@" + formatter.string(from: start),
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            // The start time above is in UTC.
            "TZ": "UTC",
        ]
    }

    /// An RFC 3339 instant such as `2026-12-04T16:59:52Z`.
    public static func environment(startingAt rfc3339: String) throws -> [String: String] {
        let parser = ISO8601DateFormatter()
        guard let date = parser.date(from: rfc3339) else { throw HarnessError("\(rfc3339) is not an RFC 3339 instant") }
        return try environment(startingAt: date)
    }

    /// The variable that tells libfaketime the time.
    public static let variable = "FAKETIME"

    /// `--name value` pairs as `CHIME_NAME=value`. A Swift program under libfaketime sees no
    /// command-line arguments (`CommandLine.arguments` is empty), so its flags must go there.
    public static func flagsAsEnvironment(_ arguments: [String]) throws -> [String: String] {
        var environment: [String: String] = [:]
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard flag.hasPrefix("--"), let value = rest.popFirst() else {
                throw HarnessError("\(flag): under libfaketime every flag needs a value (--name value)")
            }
            environment["CHIME_" + flag.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_")] = value
        }
        return environment
    }

    /// The multi-threaded libfaketime of this machine's architecture.
    static func library() throws -> String {
        let lib = "/usr/lib"
        let triples = (try? FileManager.default.contentsOfDirectory(atPath: lib)) ?? []
        for triple in triples.sorted() {
            let path = "\(lib)/\(triple)/faketime/libfaketimeMT.so.1"
            if FileManager.default.fileExists(atPath: path) { return path }
        }
        throw HarnessError("libfaketime is missing: apt-get install faketime (make test does)")
    }
}
