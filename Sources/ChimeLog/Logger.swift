import ChimeJSON
import ChimeTime
import Foundation
import Synchronization

/// One line per event to standard error: `text` (timestamp, level, message, key=value) or
/// `json` (one object per line). Thread-safe; a line is written with one `write(2)`.
public struct Logger: Sendable {
    public enum Format: String, Sendable { case text, json }

    public let level: LogLevel
    public let format: Format
    private let sink: Sink

    /// Where lines go: standard error, or a closure (tests).
    final class Sink: Sendable {
        let lock = Mutex(())
        let write: @Sendable ([UInt8]) -> Void
        init(_ write: @escaping @Sendable ([UInt8]) -> Void) { self.write = write }
    }

    public init(level: LogLevel = .info, format: Format = .text) {
        self.init(level: level, format: format) { bytes in
            bytes.withUnsafeBufferPointer { _ = Foundation.write(2, $0.baseAddress, $0.count) }
        }
    }

    public init(level: LogLevel, format: Format, write: @escaping @Sendable ([UInt8]) -> Void) {
        self.level = level
        self.format = format
        self.sink = Sink(write)
    }

    public func log(
        _ level: LogLevel,
        _ message: @autoclosure () -> String,
        _ metadata: KeyValuePairs<String, String> = [:]
    ) {
        guard level >= self.level else { return }
        write(level, message(), metadata: Array(metadata))
    }

    /// Writes a line whose metadata was built at run time (the worker's policy builds its lines).
    public func write(_ level: LogLevel, _ message: String, metadata: [(key: String, value: String)]) {
        guard level >= self.level else { return }
        let now = wallClock()
        var bytes: [UInt8]
        switch format {
        case .text:
            var line = "\(now.rfc3339(fractional: true)) \(level.name) \(message)"
            for (key, value) in metadata {
                line += " \(key)=\(value.contains(" ") || value.isEmpty ? JSON.string(value).text : value)"
            }
            bytes = Array((line + "\n").utf8)
        case .json:
            var o = JSONObject()
            o.append("time", .string(now.rfc3339(fractional: true)))
            o.append("level", .string(level.name))
            o.append("message", .string(message))
            for (key, value) in metadata { o[key] = .string(value) }
            bytes = JSON.object(o).bytes
            bytes.append(0x0A)
        }
        sink.lock.withLock { _ in sink.write(bytes) }
    }

    public func trace(_ m: @autoclosure () -> String, _ md: KeyValuePairs<String, String> = [:]) {
        log(.trace, m(), md)
    }
    public func debug(_ m: @autoclosure () -> String, _ md: KeyValuePairs<String, String> = [:]) {
        log(.debug, m(), md)
    }
    public func info(_ m: @autoclosure () -> String, _ md: KeyValuePairs<String, String> = [:]) { log(.info, m(), md) }
    public func notice(_ m: @autoclosure () -> String, _ md: KeyValuePairs<String, String> = [:]) {
        log(.notice, m(), md)
    }
    public func warning(_ m: @autoclosure () -> String, _ md: KeyValuePairs<String, String> = [:]) {
        log(.warning, m(), md)
    }
    public func error(_ m: @autoclosure () -> String, _ md: KeyValuePairs<String, String> = [:]) {
        log(.error, m(), md)
    }
}
