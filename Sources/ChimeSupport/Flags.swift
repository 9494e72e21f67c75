import ChimeJSON
import Foundation

/// A usage mistake on the command line or in `CHIME_*`: reported as one line and a hint
/// (``report(program:)``), exit status ``exitStatus``, by `chimed` and `chime` alike.
public struct UsageError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The exit status of a program stopped by a usage mistake.
    public static let exitStatus: Int32 = 2

    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }

    /// What a program prints on standard error: `program: message`, then `try program --help`.
    /// - Parameter program: the words to run again with `--help` (`chimed`, `chime schedule`).
    public func report(program: String) -> String {
        "\(program): \(message)\ntry \(program) --help"
    }
}

/// Command-line flags (`--name value`, `--name=value`, boolean `--name`), each also readable
/// from the environment as `CHIME_` plus the upper-cased name (`--data-dir` → `CHIME_DATA_DIR`).
/// A flag on the command line wins over the environment.
public struct Flags: Sendable {
    /// What a program accepts: each flag's name, whether it takes a value, and its help line.
    public struct Spec: Sendable {
        public var name: String
        public var takesValue: Bool
        public var help: String
        public var defaultValue: String?
        /// Read from `CHIME_*` too (the worker's settings and the CLI's connection settings).
        public var fromEnvironment: Bool
        /// May be given more than once, each value kept (``Flags/all(_:)``): `--id a --id b`.
        public var repeatable: Bool
        /// What the value looks like in help (`DIR`); nil leaves it to the help's renderer.
        public var placeholder: String?
        /// An integer flag's allowed values, which ``Flags/integer(_:)`` checks and help shows: one
        /// declaration for the program, its help and whoever needs its bounds (the tests).
        public var range: ClosedRange<Int>?
        /// Other names for this flag, which an unknown flag's "did you mean" points from to it:
        /// other tools' (`repeat` for `every`) and the protocol field's it sets (`alertBody`).
        public var hints: [String]

        public init(
            _ name: String,
            value: Bool = true,
            default defaultValue: String? = nil,
            env: Bool = true,
            repeatable: Bool = false,
            placeholder: String? = nil,
            range: ClosedRange<Int>? = nil,
            hints: [String] = [],
            _ help: String
        ) {
            self.name = name
            self.takesValue = value
            self.help = help
            self.defaultValue = defaultValue
            self.fromEnvironment = env
            self.repeatable = repeatable
            self.placeholder = placeholder
            self.range = range
            self.hints = hints
        }

        public var environmentName: String {
            "CHIME_" + name.uppercased().replacingOccurrences(of: "-", with: "_")
        }
    }

    public private(set) var values: [String: String] = [:]
    public private(set) var positional: [String] = []
    /// Every value given on the command line for each flag, in order: for repeatable flags (`--id a --id b`).
    private var given: [String: [String]] = [:]
    private let specs: [String: Spec]

    /// Parses `arguments` (without the program name) against `specs`.
    /// - Parameter rejectingRepeats: a flag that takes a value and is not ``Spec/repeatable`` may be
    ///   given once (`chime`); otherwise the last one given wins (`chimed`, whose callers append
    ///   overrides to a list of defaults).
    /// - Throws: ``UsageError`` for an unknown flag (naming the closest known one, if one is close),
    ///   a missing value, or a flag given twice when `rejectingRepeats`.
    public init(
        _ arguments: [String],
        specs: [Spec],
        environment: [String: String] = ProcessInfo.processInfo.environment,
        rejectingRepeats: Bool = false
    )
        throws(UsageError)
    {
        var table: [String: Spec] = [:]
        for spec in specs { table[spec.name] = spec }
        self.specs = table
        for spec in specs where spec.fromEnvironment {
            if let value = environment[spec.environmentName] { values[spec.name] = value }
        }
        var i = 0
        var onlyPositional = false
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if onlyPositional || !arg.hasPrefix("--") || arg == "-" {
                if !onlyPositional && arg.hasPrefix("-") && arg != "-" && arg.count > 1
                    && !arg.dropFirst().allSatisfy(\.isNumber)
                {
                    throw UsageError("unknown flag \(arg) (flags are spelled --name)")
                }
                positional.append(arg)
                continue
            }
            if arg == "--" {
                onlyPositional = true
                continue
            }
            var name = String(arg.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            guard let spec = table[name] else { throw Self.unknown(name, among: specs) }
            if spec.takesValue {
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard i < arguments.count else { throw UsageError("--\(name) needs a value") }
                    value = arguments[i]
                    i += 1
                }
                if rejectingRepeats, !spec.repeatable, let first = given[name]?.first {
                    throw UsageError("--\(name) was given twice (\"\(first)\", then \"\(value)\"): give it once")
                }
                values[name] = value
                given[name, default: []].append(value)
            } else {
                guard inline == nil else { throw UsageError("--\(name) takes no value") }
                values[name] = "true"
            }
        }
    }

    /// The usage error for an unknown flag `--name`, naming the flag it stands for (one whose
    /// ``Spec/hints`` has it, in any case: `--message` for `--body`), else the closest of `specs`
    /// when one is close: `unknown flag --bdy (did you mean --body?)`.
    public static func unknown(_ name: String, among specs: [Spec], context: String = "") -> UsageError {
        var hints: [String: String] = [:]
        for spec in specs {
            for hint in spec.hints { hints[hint.lowercased()] = spec.name }
        }
        let hint = suggestion(for: name, among: specs.map(\.name), hints: hints).map {
            " (did you mean --\($0)?)"
        }
        return UsageError("unknown flag --\(name)\(context)\(hint ?? "")")
    }

    public subscript(name: String) -> String? {
        values[name] ?? specs[name]?.defaultValue
    }

    public func isSet(_ name: String) -> Bool { values[name] == "true" }

    /// Every value of a repeatable flag in command-line order (`--id a --id b` gives `["a", "b"]`);
    /// the environment's value when the command line gives none; empty when neither does.
    public func all(_ name: String) -> [String] {
        given[name] ?? values[name].map { [$0] } ?? []
    }

    /// The value of an integer flag within its spec's ``Spec/range``.
    public func integer(_ name: String) throws(UsageError) -> Int {
        try integer(name, in: specs[name]?.range ?? Int.min...Int.max)
    }

    /// The value of an integer flag within `range`.
    public func integer(_ name: String, in range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let text = self[name] else { throw UsageError("--\(name) is required") }
        guard let value = Int(text), range.contains(value) else {
            throw UsageError(
                "--\(name) must be an integer from \(range.lowerBound) to \(range.upperBound), got \"\(text)\""
            )
        }
        return value
    }

    /// A help text: usage line, then one line per flag with its default and variable.
    public static func help(usage: String, specs: [Spec], footer: String = "") -> String {
        var lines = [usage, "", "Options:"]
        let width = specs.map { $0.name.count + ($0.takesValue ? 8 : 0) }.max() ?? 0
        for spec in specs {
            var left = "--\(spec.name)" + (spec.takesValue ? " <value>" : "")
            left += String(repeating: " ", count: max(0, width + 2 - left.count + 2))
            var line = "  \(left) \(spec.help)"
            switch (spec.range, spec.defaultValue) {
            case (let r?, let d?): line += " (\(r.lowerBound) to \(r.upperBound), default: \(d))"
            case (let r?, nil): line += " (\(r.lowerBound) to \(r.upperBound))"
            case (nil, let d?): line += " (default: \(d))"
            case (nil, nil): break
            }
            if spec.fromEnvironment { line += " [\(spec.environmentName)]" }
            lines.append(line)
        }
        if !footer.isEmpty { lines += ["", footer] }
        return lines.joined(separator: "\n")
    }
}
