import ChimeCore
import ChimeJournal
import ChimeWorker
import Foundation

/// `chime journal verify|dump|repair DIR`: offline tools on a data directory.
struct JournalCommand: Command {
    static let name = "journal"
    static let summary = "verify, dump or repair a data directory (offline)"
    static let synopsis = "chime journal (verify | dump | repair) DIR"
    static let discussion = """
        Works on chimed's data directory (--data-dir) without a broker.
          verify DIR  reads every segment and snapshot and reports the first damage; exits 0 when
                      chimed could open the directory, 1 when not. Safe while chimed runs (its newest
                      record may then show as a torn tail).
          dump DIR    prints every record of the segments, one JSON object a line:
                      {"seq":N,"type":"schedule","entry":{...}}; a record that cannot be decoded shows
                      its payload in base64 with an "error". Safe while chimed runs.
          repair DIR  makes a damaged directory openable, losing as little as possible; every file it
                      changes is first copied to DIR/backup-<time>/. Refuses while chimed runs.
        """
    static let specs: [Flags.Spec] = []
    static let examples: [(comment: String, command: String)] = [
        ("is the directory sound?", "chime journal verify /var/lib/chime"),
        (
            "every schedule command in the journal",
            #"chime journal dump /var/lib/chime | jq 'select(.type == "schedule")'"#
        ),
        ("after `chimed` refused to start on a corrupt journal (stop it first)", "chime journal repair /var/lib/chime"),
    ]

    enum Action: String, Sendable {
        case verify, dump, repair
    }

    let action: Action
    let directory: String

    init(_ flags: Flags) throws(UsageError) {
        guard let word = flags.positional.first else { throw UsageError("say what to do: verify, dump or repair") }
        guard let action = Action(rawValue: word) else {
            throw UsageError("unknown journal action \"\(word)\": verify, dump or repair")
        }
        guard flags.positional.count >= 2 else { throw UsageError("journal \(word) needs the data directory DIR") }
        guard flags.positional.count == 2 else {
            throw UsageError("unexpected argument \"\(flags.positional[2])\"")
        }
        self.action = action
        directory = flags.positional[1]
    }

    func run(_ console: Console) async throws(CLIFailure) {
        switch action {
        case .verify: try verify(console)
        case .dump: try dump(console)
        case .repair: try repair(console)
        }
    }

    func verify(_ console: Console) throws(CLIFailure) {
        let report: VerifyReport
        do {
            report = try JournalTools.verify(directory: directory)
        } catch {
            throw CLIFailure(.failed, "journal verify: \(error.message)")
        }
        console.out(report.description)
        if !report.isOpenable {
            throw CLIFailure(.failed, "\(directory) is damaged: chimed will not open it; see `chime journal repair`")
        }
    }

    func dump(_ console: Console) throws(CLIFailure) {
        do {
            try JournalTools.dump(directory: directory) { record in
                console.out(JSON.object(Self.line(sequence: record.sequence, type: record.type, record.payload)).text)
            }
        } catch {
            throw CLIFailure(.failed, "journal dump: \(error.message)")
        }
    }

    /// `{"seq":N,"type":"schedule","entry":{...}}`, or the payload in base64 with an error.
    static func line(sequence: UInt64, type: UInt8, _ payload: [UInt8]) -> JSONObject {
        var o: JSONObject = ["seq": .int(Int64(bitPattern: sequence))]
        if let kind = JournalEntry.Kind(rawValue: type) {
            o["type"] = .string(kind.name)
        } else {
            o["type"] = .int(Int64(type))
        }
        do {
            o["entry"] = .object(try JournalEntry.decode(kind: type, payload: payload).json)
        } catch {
            o["payload"] = .string(Data(payload).base64EncodedString())
            o["error"] = .string(error.description)
        }
        return o
    }

    func repair(_ console: Console) throws(CLIFailure) {
        let report: RepairReport
        do {
            report = try JournalTools.repair(directory: directory)
        } catch let error where error.code == .locked {
            throw CLIFailure(.failed, "\(directory) is in use by a running chimed: stop it before repairing")
        } catch {
            throw CLIFailure(.failed, "journal repair: \(error.message)")
        }
        console.out(report.description)
        if !report.after.isOpenable {
            throw CLIFailure(.failed, "\(directory) is still damaged after the repair")
        }
    }
}
