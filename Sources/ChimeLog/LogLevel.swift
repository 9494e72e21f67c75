/// Log levels, most verbose first.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case trace, debug, info, notice, warning, error, critical

    public init?(name: String) {
        guard let level = Self.allCases.first(where: { "\($0)" == name }) else { return nil }
        self = level
    }

    public var name: String { "\(self)" }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A line the policy wants logged. Built only at or above the configured level.
public struct WorkerLog: Hashable, Sendable {
    public var level: LogLevel
    public var message: String
    public var metadata: [(key: String, value: String)]

    public init(_ level: LogLevel, _ message: String, _ metadata: [(key: String, value: String)] = []) {
        self.level = level
        self.message = message
        self.metadata = metadata
    }

    public static func == (a: WorkerLog, b: WorkerLog) -> Bool {
        a.level == b.level && a.message == b.message
            && a.metadata.elementsEqual(b.metadata, by: { $0.key == $1.key && $0.value == $1.value })
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(level)
        hasher.combine(message)
        for (k, v) in metadata {
            hasher.combine(k)
            hasher.combine(v)
        }
    }
}
