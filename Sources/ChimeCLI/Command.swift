import ChimeCore
import ChimeSupport
import Foundation

/// One `chime` command: its name, its help, the flags it takes and what it does.
///
/// A command is built from parsed ``Flags`` (``init(_:)`` checks every value, so a usage mistake
/// is reported before anything is sent), then ``run(_:)`` does the work. Commands hold no mutable
/// state of their own and share nothing but the ``Console``.
protocol Command: Sendable {
    /// The word after `chime` (`schedule`).
    static var name: String { get }
    /// One line for `chime help`.
    static var summary: String { get }
    /// The synopsis after `usage: ` (`chime schedule --device ID (--at TIME | --in DURATION) [options]`).
    static var synopsis: String { get }
    /// What the command does, in a few lines, shown under the synopsis.
    static var discussion: String { get }
    /// The flags, shown in this order in the help.
    static var specs: [Flags.Spec] { get }
    /// Example invocations, each with a comment line.
    static var examples: [(comment: String, command: String)] { get }

    /// Checks the flags and positional arguments.
    /// - Throws: ``UsageError`` naming the flag at fault.
    init(_ flags: Flags) throws(UsageError)

    /// Does the work, writing to `console`.
    /// - Throws: ``CLIFailure``, whose kind gives the exit status.
    func run(_ console: Console) async throws(CLIFailure)
}

extension Command {
    /// The full help text of the command: synopsis, discussion, options, examples.
    static var help: String {
        var lines = ["usage: \(synopsis)", "", discussion, "", "Options:"]
        lines += HelpText.options(specs + [helpSpec])
        if !examples.isEmpty {
            lines += ["", "Examples:"]
            for (index, example) in examples.enumerated() {
                if index > 0 { lines.append("") }
                lines.append("  # \(example.comment)")
                lines.append("  \(example.command)")
            }
        }
        lines += ["", "Exit status: \(ExitStatus.summary)"]
        return lines.joined(separator: "\n")
    }

    /// Warnings on standard error, each after the command's name: `chime schedule: warning: ...`.
    static func warn(_ warnings: [String], _ console: Console) {
        for warning in warnings { console.err("chime \(name): \(warning)") }
    }

    /// A usage mistake of this command, with the hint the dispatcher prints.
    static func usage(_ message: String) -> CLIFailure {
        CLIFailure(.usage, message, command: name)
    }
}

/// Help text laid out for an 80 to 100 column terminal.
enum HelpText {
    /// What a flag's value looks like, for the help, unless its spec says (``Flags/Spec/placeholder``).
    static let placeholders: [String: String] = [
        "broker": "URL", "topic-prefix": "P", "timeout": "DURATION", "protocol": "5|311", "reply-topic": "TOPIC",
        "ca-file": "FILE", "device": "ID", "id": "ID", "at": "TIME", "in": "DURATION", "tz": "ZONE", "align": "HH:MM",
        "every": "UNIT", "rrule": "RULE", "count": "N", "times": "N", "until": "TIME", "except": "TIME",
        "lead": "DURATION", "title": "TEXT", "body": "TEXT", "action": "TEXT", "sound": "NAME", "category": "NAME",
        "badge": "N|+N|-N", "info": "KEY=VALUE", "tag": "KEY=VALUE", "misfire": "POLICY", "expires": "DURATION",
        "json": "FILE", "from": "TIME", "device-tz": "ZONE", "min-repeat-seconds": "N", "limit": "N",
        "quiet": "HH:MM-HH:MM", "worker": "ID", "samples": "N", "receipts": "on|off", "history": "on|off",
        "since": "TIME", "skip": "MODE",
    ]

    static let width = 100

    /// One entry per flag: `--name VALUE` and its help, default and environment variable, wrapped.
    static func options(_ specs: [Flags.Spec]) -> [String] {
        func left(_ spec: Flags.Spec) -> String {
            "--\(spec.name)" + (spec.takesValue ? " " + (spec.placeholder ?? placeholders[spec.name] ?? "VALUE") : "")
        }
        let column = min(28, (specs.map { left($0).count }.max() ?? 0) + 4)
        var lines: [String] = []
        for spec in specs {
            var text = spec.help
            if spec.repeatable { text += "; repeatable" }
            if let value = spec.defaultValue { text += " (default \(value))" }
            if spec.fromEnvironment { text += " [\(spec.environmentName)]" }
            var head = "  " + left(spec)
            if head.count + 2 > column {
                lines.append(head)
                head = ""
            }
            head += String(repeating: " ", count: column - head.count)
            for line in wrap(text, width: width - column) {
                lines.append(head + line)
                head = String(repeating: " ", count: column)
            }
        }
        return lines
    }

    /// Words of `text` in lines of at most `width` characters (a longer word gets a line of its own).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        for word in text.split(separator: " ") {
            if !current.isEmpty && current.count + 1 + word.count > width {
                lines.append(current)
                current = ""
            }
            current += (current.isEmpty ? "" : " ") + word
        }
        if !current.isEmpty { lines.append(current) }
        return lines
    }
}

/// `--help`, which every command takes.
let helpSpec = Flags.Spec("help", value: false, env: false, "show this help")

/// The exit statuses of `chime`.
enum ExitStatus {
    static let ok: Int32 = 0
    /// chimed answered with an error, a check failed, or a local operation (journal) failed.
    static let error: Int32 = 1
    /// The command line is wrong.
    static let usage = UsageError.exitStatus
    /// The broker could not be reached, or nothing answered within `--timeout`.
    static let unreachable: Int32 = 3

    static let summary =
        "0 ok, 1 error reply or failed check, 2 usage mistake,\n             3 broker unreachable or no reply within --timeout"
}

/// Why a command failed; its ``Kind`` decides the exit status.
struct CLIFailure: Error, Sendable, CustomStringConvertible {
    enum Kind: Sendable {
        /// The command line is wrong: exit 2 with a hint.
        case usage
        /// chimed answered with an error reply: exit 1.
        case reply
        /// Something else failed (a check, a file): exit 1.
        case failed
        /// No broker, or no answer in time: exit 3.
        case unreachable
    }

    var kind: Kind
    var message: String
    /// The command whose help the usage hint points to.
    var command: String?

    init(_ kind: Kind, _ message: String, command: String? = nil) {
        self.kind = kind
        self.message = message
        self.command = command
    }

    /// An error reply: `error <code> <field>: <message>`, without repeating the field at the start of
    /// the message.
    init(reply error: JSONObject) {
        let code = error["code"]?.stringValue ?? "unknown"
        let field = error["field"]?.stringValue
        var message = error["message"]?.stringValue ?? ""
        if let field, message.hasPrefix(field + ": ") { message.removeFirst(field.count + 2) }
        self.init(.reply, "error \(code)\(field.map { " \($0)" } ?? ""): \(message)")
    }

    /// An error chimed's own code produced locally (`chime next`), shown as an error reply.
    init(chimeError error: ChimeError) {
        var o: JSONObject = ["code": .string(error.code.wireName), "message": .string(error.message)]
        if let field = error.field { o["field"] = .string(field) }
        self.init(reply: o)
    }

    /// The failure of one notification of a batch file: its error reply names the notification.
    func labelled(_ label: String?) -> CLIFailure {
        guard let label, kind == .reply else { return self }
        var failure = self
        failure.message = "\(label): \(message)"
        return failure
    }

    var exitStatus: Int32 {
        switch kind {
        case .usage: return ExitStatus.usage
        case .reply, .failed: return ExitStatus.error
        case .unreachable: return ExitStatus.unreachable
        }
    }

    var description: String { message }
}

extension UsageError {
    func failure(_ command: String?) -> CLIFailure { CLIFailure(.usage, message, command: command) }
}

/// Where output goes: standard output for results, standard error for diagnostics. Each call
/// writes whole lines at once, unbuffered, so that `watch` output appears as it happens.
///
/// `out` and `err` are for people: what a device or a worker chose may be in them, so control
/// characters are escaped (``TerminalText``), line breaks kept. `exact` is for programs: JSON
/// lines and payloads (`--json`, `--raw`), byte for byte.
struct Console: Sendable {
    func out(_ text: String) {
        exact(TerminalText.escaped(text, keepingNewlines: true))
    }

    func out(lines: [String]) {
        guard !lines.isEmpty else { return }
        out(lines.joined(separator: "\n"))
    }

    /// Writes `text` as it is.
    func exact(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    func exact(lines: [String]) {
        guard !lines.isEmpty else { return }
        exact(lines.joined(separator: "\n"))
    }

    func err(_ text: String) {
        FileHandle.standardError.write(Data((TerminalText.escaped(text, keepingNewlines: true) + "\n").utf8))
    }
}
