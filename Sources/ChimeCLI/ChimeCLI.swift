import ChimeCore
import ChimeSupport
import Dispatch
import Foundation
import Synchronization

/// Runs the `chime` command line; returns the exit status.
///
/// `chime [connection options] <command> [options]`: connection options may come before the
/// command word as well as after it.
/// - Parameters:
///   - arguments: the arguments, without the program name.
///   - environment: where `CHIME_BROKER`, `CHIME_TOPIC_PREFIX`, `CHIME_DEVICE` and `CHIME_TIMEOUT` come from.
public func chimeMain(
    _ arguments: [String],
    environment: [String: String] = ProcessInfo.processInfo.environment
) -> Int32 {
    Dispatcher(console: Console(), environment: environment).run(arguments)
}

/// Finds the command, parses its flags, runs it, and turns the outcome into an exit status.
struct Dispatcher: Sendable {
    /// Every command, in the order `chime help` lists them.
    static var commands: [any Command.Type] {
        [
            ScheduleCommand.self, UpdateCommand.self, ListCommand.self, CancelCommand.self, PauseCommand.self,
            ResumeCommand.self,
            SnoozeCommand.self, DeviceCommand.self, InboxCommand.self, AckCommand.self, HistoryCommand.self,
            PreviewCommand.self, NextCommand.self, WatchCommand.self, StatusCommand.self, JournalCommand.self,
            AccountsCommand.self, ConsoleCommand.self,
        ]
    }

    let console: Console
    let environment: [String: String]

    func run(_ arguments: [String]) -> Int32 {
        // Connection options may precede the command word: move them after it.
        var leading: [String] = []
        var rest = arguments[...]
        while let first = rest.first, first.hasPrefix("--"), first != "--" {
            let name = String(first.dropFirst(2).prefix { $0 != "=" })
            if name == "help" || name == "version" { break }
            let leadingSpecs = ConnectionOptions.specs + [ConnectionOptions.deviceSpec]
            guard let spec = leadingSpecs.first(where: { $0.name == name }) else {
                let error = Flags.unknown(name, among: leadingSpecs, context: " before the command")
                return fail(error.failure(nil))
            }
            leading.append(rest.removeFirst())
            if spec.takesValue && !first.contains("=") {
                guard let value = rest.first else { return fail(CLIFailure(.usage, "\(first) needs a value")) }
                leading.append(value)
                rest.removeFirst()
            }
        }
        guard let word = rest.first else {
            console.err(Self.overview)
            return ExitStatus.usage
        }
        switch word {
        case "help", "--help", "-h":
            if let topic = rest.dropFirst().first, word == "help" {
                guard let command = Self.command(named: topic) else {
                    return fail(CLIFailure(.usage, "no command \"\(topic)\"" + Self.didYouMean(topic)))
                }
                console.out(command.help)
            } else {
                console.out(Self.overview)
            }
            return ExitStatus.ok
        case "--version", "version":
            console.out("chime \(chimeVersion)")
            return ExitStatus.ok
        default:
            break
        }
        guard let command = Self.command(named: word) else {
            return fail(CLIFailure(.usage, "unknown command \"\(word)\"" + Self.didYouMean(word)))
        }
        return run(command, Array(rest.dropFirst()) + leading)
    }

    static func command(named name: String) -> (any Command.Type)? {
        commands.first { $0.name == name }
    }

    /// ` (did you mean schedule?)` for a word close to a command's name; empty otherwise.
    static func didYouMean(_ word: String) -> String {
        suggestion(for: word, among: commands.map { $0.name }).map { " (did you mean \($0)?)" } ?? ""
    }

    /// Parses the flags of `type`, then runs it on a task and waits for it.
    func run(_ type: any Command.Type, _ arguments: [String]) -> Int32 {
        let command: any Command
        do throws(UsageError) {
            let flags = try Flags(
                arguments,
                specs: type.specs + [helpSpec],
                environment: environment,
                rejectingRepeats: true
            )
            if flags.isSet("help") {
                console.out(type.help)
                return ExitStatus.ok
            }
            command = try type.init(flags)
        } catch {
            return fail(error.failure(type.name))
        }
        let console = self.console
        let outcome = Outcome()
        let finished = DispatchSemaphore(value: 0)
        Task {
            do throws(CLIFailure) {
                try await command.run(console)
                outcome.status.withLock { $0 = ExitStatus.ok }
            } catch {
                outcome.status.withLock { $0 = self.fail(error) }
            }
            finished.signal()
        }
        finished.wait()
        return outcome.status.withLock { $0 }
    }

    /// Reports a failure on standard error and returns its exit status.
    @discardableResult
    func fail(_ failure: CLIFailure) -> Int32 {
        switch failure.kind {
        case .usage:
            let program = "chime" + (failure.command.map { " \($0)" } ?? "")
            console.err(UsageError(failure.message).report(program: program))
        case .reply:
            console.err(failure.message)
        case .failed, .unreachable:
            console.err("chime: \(failure.message)")
        }
        return failure.exitStatus
    }

    /// The exit status a command's task reports back to the waiting thread.
    final class Outcome: Sendable {
        let status = Mutex<Int32>(ExitStatus.error)
    }

    static var overview: String {
        let width = commands.map { $0.name.count }.max() ?? 0
        var lines = [
            "chime: talk to chimed, the Chime notification scheduler, over MQTT.",
            "",
            "usage: chime [connection options] <command> [options]",
            "       chime help <command>      (or chime <command> --help)",
            "",
            "Commands:",
        ]
        for command in commands {
            lines.append("  \(command.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(command.summary)")
        }
        lines += ["", "Connection options (every command that talks to the broker takes them):"]
        lines += HelpText.options(ConnectionOptions.specs + [ConnectionOptions.deviceSpec])
        lines += [
            "",
            "Examples:",
            "  chime device --device phone-1 --tz Asia/Shanghai",
            "  chime schedule --device phone-1 --at \"2026-12-01 18:00\" --body \"Dinner\"",
            "  chime schedule --device phone-1 --in 15m --every day --body \"Stretch\"",
            "  chime list --device phone-1",
            "  chime next --at \"2026-03-08 02:30\" --tz America/New_York --every day --from 2026-03-01T00:00Z",
            "  chime inbox --device phone-1",
            "  chime ack --device phone-1 med@2026-12-01T01:00:00Z --badge -1",
            "  chime watch --all",
            "  chime status --worker worker-1",
            "",
            "Exit status: \(ExitStatus.summary)",
            "Protocol: PROTOCOL.md. Reference with examples: docs/cli.md.",
        ]
        return lines.joined(separator: "\n")
    }
}
