import ChimeCore
import ChimeJournal
import ChimeSupport
import Foundation

/// `chime journal verify|dump|repair DIR` and `chime journal repartition`: offline tools on data
/// directories.
struct JournalCommand: Command {
    static let name = "journal"
    static let summary = "verify, dump, repair or repartition data directories (offline)"
    static let synopsis = """
        chime journal (verify | dump | repair) DIR
               chime journal repartition --partitions N --from DIR... --to DIR...
        """
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
          repartition moves devices between partitions when their number changes: reads every old
                      worker's directory (--from, all of them, workers stopped) and writes one new
                      directory per new partition (--to, in partition order 0..N-1, empty). The
                      inputs are not changed. See "Scaling out" in docs/production.md.
        """
    static let specs: [Flags.Spec] = [
        .init("partitions", env: false, placeholder: "N", "repartition: the new number of partitions N"),
        .init(
            "from",
            env: false,
            repeatable: true,
            placeholder: "DIR",
            "repartition: an old data directory, each of them"
        ),
        .init(
            "to",
            env: false,
            repeatable: true,
            placeholder: "DIR",
            "repartition: the new directory of partition k, N in order"
        ),
    ]
    static let examples: [(comment: String, command: String)] = [
        ("is the directory sound?", "chime journal verify /var/lib/chime"),
        (
            "every schedule command in the journal",
            #"chime journal dump /var/lib/chime | jq 'select(.type == "schedule")'"#
        ),
        ("after `chimed` refused to start on a corrupt journal (stop it first)", "chime journal repair /var/lib/chime"),
        (
            "two partitions become three (workers stopped)",
            "chime journal repartition --partitions 3 --from old0 --from old1 --to new0 --to new1 --to new2"
        ),
    ]

    enum Action: String, Sendable, CaseIterable {
        case verify, dump, repair, repartition
    }

    let action: Action
    let directory: String
    let partitions: Int
    let inputs: [String]
    let outputs: [String]

    init(_ flags: Flags) throws(UsageError) {
        guard let word = flags.positional.first else {
            throw UsageError("say what to do: verify, dump, repair or repartition")
        }
        guard let action = Action(rawValue: word) else {
            throw UsageError("unknown journal action \"\(word)\": verify, dump, repair or repartition")
        }
        self.action = action
        if action == .repartition {
            guard flags.positional.count == 1 else {
                throw UsageError("unexpected argument \"\(flags.positional[1])\"")
            }
            partitions = try flags.integer("partitions", in: 1...65_536)
            inputs = flags.all("from")
            outputs = flags.all("to")
            guard !inputs.isEmpty else { throw UsageError("--from: give every old data directory") }
            guard outputs.count == partitions else {
                throw UsageError("--to: give \(partitions) new directories, one per partition, got \(outputs.count)")
            }
            directory = ""
            return
        }
        partitions = 0
        inputs = []
        outputs = []
        guard flags.positional.count >= 2 else { throw UsageError("journal \(word) needs the data directory DIR") }
        guard flags.positional.count == 2 else {
            throw UsageError("unexpected argument \"\(flags.positional[2])\"")
        }
        directory = flags.positional[1]
    }

    func run(_ console: Console) async throws(CLIFailure) {
        switch action {
        case .verify: try verify(console)
        case .dump: try dump(console)
        case .repair: try repair(console)
        case .repartition:
            do {
                console.out(
                    try repartition(inputs: inputs, outputs: outputs, partitionCount: partitions)
                        .description
                )
            } catch {
                throw CLIFailure(.failed, "journal repartition: \(error)")
            }
        }
    }

    func verify(_ console: Console) throws(CLIFailure) {
        let report: VerifyReport
        do {
            report = try JournalTools.verify(directory: directory)
        } catch {
            throw CLIFailure(.failed, "journal verify: \(error.message)")
        }
        if !report.isOpenable {
            console.out(report.description)
            throw CLIFailure(.failed, "\(directory) is damaged: chimed will not open it; see `chime journal repair`")
        }
        // The structure is sound; chimed must also be able to read every entry back. Rebuild the
        // state as chimed's start-up does.
        var lines = report.description.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // The report ends with its verdict, which waits for the replay.
        let verdict = lines.removeLast()
        for line in lines { console.out(line) }
        let recovery: Recovery
        let engine: Engine
        do {
            recovery = try JournalTools.read(directory: directory)
            engine = try Engine.replaying(recovery, directory: directory)
        } catch {
            throw CLIFailure(
                .failed,
                "\(directory) cannot be replayed, chimed will not start from it: \(error.message)"
            )
        }
        console.out(
            "replayed: \(recovery.snapshot?.entries.count ?? 0) snapshot entries and \(recovery.records.count) "
                + "records into \(engine.pendingCount) notifications on \(engine.deviceCount) devices"
        )
        console.out(verdict)
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
