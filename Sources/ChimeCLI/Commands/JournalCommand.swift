import ChimeCore
import ChimeJournal
import ChimePostgresStore
import ChimeSupport
import Foundation

/// `chime journal verify|dump|repair DIR`, `chime journal repartition`, and `export`/`import`
/// between a data directory and PostgreSQL: offline tools on chimed's stores.
struct JournalCommand: Command {
    static let name = "journal"
    static let summary = "verify, dump, repair, repartition, export or import chimed's stores (offline)"
    static let synopsis = """
        chime journal (verify | dump | repair) DIR
               chime journal verify postgres://...
               chime journal repartition --partitions N --from DIR... --to DIR...
               chime journal export DIR --to postgres://...
               chime journal import postgres://... --to DIR
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
                      changes is first copied to DIR/backup-<time>/. Refuses while chimed runs. Then
                      replays the result as verify does: a record chimed cannot read (an unknown type,
                      from a newer chimed) is left as it is, and repair exits 1 saying so.
          repartition moves devices between partitions when their number changes: reads every old
                      worker's directory (--from, all of them, workers stopped) and writes one new
                      directory per new partition (--to, in partition order 0..N-1, empty). The
                      inputs are not changed. See "Scaling out" in docs/production.md.
          verify postgres://...  replays what the database holds, as chimed --store would.
          export DIR --to postgres://...  writes the directory's state (chimed stopped) into an
                      empty database, as its first snapshot, and checks it reads back.
          import postgres://... --to DIR  writes the database's state into a new data directory
                      (missing or empty), and checks it reads back. The source is not changed.
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
            "repartition: the new directory of partition k, N in order; export, import: where to write"
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
        (
            "move a worker to PostgreSQL (stop it, export, start it with --store)",
            "chime journal export /var/lib/chime --to postgres://chimed@db/chime"
        ),
    ]

    enum Action: String, Sendable, CaseIterable {
        case verify, dump, repair, repartition, export, `import`
    }

    let action: Action
    let directory: String
    let partitions: Int
    let inputs: [String]
    let outputs: [String]

    init(_ flags: Flags) throws(UsageError) {
        guard let word = flags.positional.first else {
            throw UsageError("say what to do: verify, dump, repair, repartition, export or import")
        }
        guard let action = Action(rawValue: word) else {
            throw UsageError(
                "unknown journal action \"\(word)\": verify, dump, repair, repartition, export or import"
            )
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
        outputs = flags.all("to")
        if action == .export || action == .import {
            guard outputs.count == 1 else {
                throw UsageError(
                    action == .export ? "journal export needs --to postgres://..." : "journal import needs --to DIR"
                )
            }
        } else if !outputs.isEmpty {
            throw UsageError("--to goes with repartition, export and import")
        }
        guard flags.positional.count >= 2 else {
            throw UsageError(
                action == .import
                    ? "journal import needs the database: postgres://..."
                    : "journal \(word) needs the data directory DIR"
            )
        }
        guard flags.positional.count == 2 else {
            throw UsageError("unexpected argument \"\(flags.positional[2])\"")
        }
        directory = flags.positional[1]
    }

    func run(_ console: Console) async throws(CLIFailure) {
        switch action {
        case .verify where Self.isPostgres(directory):
            try transfer(console, "verify") { () throws(StoreTransfer.Failure) in try StoreTransfer.verify(directory) }
        case .export:
            try transfer(console, "export") { () throws(StoreTransfer.Failure) in
                try StoreTransfer.export(directory: directory, to: outputs[0])
            }
        case .import:
            try transfer(console, "import") { () throws(StoreTransfer.Failure) in
                try StoreTransfer.importStore(directory, to: outputs[0])
            }
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
        do {
            try replay(console, report)
        } catch {
            throw CLIFailure(.failed, Self.unreplayable(directory, error))
        }
    }

    /// Prints `report`, then replays the directory as chimed's start-up does, then prints the
    /// report's verdict: the structure `JournalTools` checks is sound, and chimed must also be able
    /// to read every entry back. `verify` and `repair` both end here, so they give one verdict.
    /// - Throws: why chimed would not start from the directory; the verdict is then not printed.
    func replay(_ console: Console, _ report: VerifyReport) throws(JournalError) {
        var lines = report.description.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let verdict = lines.removeLast()
        for line in lines { console.out(line) }
        let recovery = try JournalTools.read(directory: directory)
        let engine = try Engine.replaying(recovery, directory: directory)
        console.out(
            "replayed: \(recovery.snapshot?.count ?? 0) snapshot entries and \(recovery.records.count) "
                + "records into \(engine.pendingCount) notifications on \(engine.deviceCount) devices"
        )
        console.out(verdict)
    }

    /// The verdict on a directory whose structure is sound but whose state chimed cannot rebuild.
    static func unreplayable(_ directory: String, _ error: JournalError) -> String {
        "\(directory) cannot be replayed, chimed will not start from it: \(error.message)"
    }

    static func isPostgres(_ location: String) -> Bool {
        location.hasPrefix("postgres://") || location.hasPrefix("postgresql://")
    }

    /// Export, import or verify with PostgreSQL: one line saying what was read (and written).
    func transfer(
        _ console: Console,
        _ what: String,
        _ body: () throws(StoreTransfer.Failure) -> StoreTransfer.Report
    ) throws(CLIFailure) {
        if what == "export" && !Self.isPostgres(outputs[0]) {
            throw CLIFailure(.usage, "journal export: --to must be postgres://...", command: Self.name)
        }
        if what == "import" && !Self.isPostgres(directory) {
            throw CLIFailure(.usage, "journal import: the source must be postgres://...", command: Self.name)
        }
        do {
            let report = try body()
            switch what {
            case "export": console.out("exported \(report) from \(directory); the database reads back the same")
            case "import": console.out("imported \(report) into \(outputs[0]); it reads back the same")
            default: console.out("replayed: \(report)\nok: chimed --store can start from it")
            }
        } catch {
            throw CLIFailure(.failed, "journal \(what): \(error.message)")
        }
    }

    func dump(_ console: Console) throws(CLIFailure) {
        do {
            try JournalTools.dump(directory: directory) { record in
                console.exact(JSON.object(Self.line(sequence: record.sequence, type: record.type, record.payload)).text)
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
        for line in report.summary { console.out(line) }
        if !report.after.isOpenable {
            console.out(report.after.description)
            throw CLIFailure(.failed, "\(directory) is still damaged after the repair")
        }
        do {
            try replay(console, report.after)
        } catch {
            // Repair cuts away damaged files and records; this one is whole, and may be the data
            // of a newer chimed: it is not repair's to delete.
            throw CLIFailure(
                .failed,
                Self.unreplayable(directory, error)
                    + "; repair cannot fix this: the data is whole but this chimed cannot read it (an unknown "
                    + "record type comes from a newer chimed: run that version), so it was left as it is"
            )
        }
    }
}
