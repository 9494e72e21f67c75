import Foundation

/// `chime-bench <benchmark> [--quick]`. Each benchmark prints its own table.
let arguments = Array(CommandLine.arguments.dropFirst())
let quick = arguments.contains("--quick")
let usage = """
    usage: chime-bench recurrence [--quick | --hostile]
           chime-bench hot-path [--quick] [--record] [--only single|batch]  (the loop's CPU a command in
                              process, against docs/bench/hot-path.json; --record writes this run's figures there)
           chime-bench maxima [--quick]  (one command's hold on the loop at each limit's largest values, in process)
           chime-bench ingest-cpu [--quick]  (a batch command's stages in process: µs a notification)
           chime-bench snapshot-steps [--quick]  (how long taking a snapshot holds the loop, in process)
           chime-bench history [--quick | --devices N] [--without]  (the memory of every device's delivery
                              history, filled to its cap, and the CPU it adds to a delivery, in process;
                              --without: the same deliveries' memory with history off, the control)
           chime-bench recovery [--quick | --pending N]  (recovery from a snapshot and a journal tail, in process)
           chime-bench system [--quick] [--json FILE] [--only ingest,burst,peer,batch,steady,hostile,receipts,slots,routing,slot-load,scale,push,backend]
                              [--metrics PORT]  (chimed serves /metrics on 127.0.0.1:PORT, scraped every 100 ms)
                              [--store postgres]  (every chimed on a PostgreSQL of its own, fsync on)
                              [--pending N]  (scale at N pending only)
                              [--baseline PATH]  (ingest, burst and batch also run this earlier chimed, round
                               after round, and print this build ÷ it: make bench-baseline REF=...)
                              (peer: NATS JetStream through scripts/nats-peer, installed by its --install;
                               slots, only when named: 1, 2 and 3 workers sharing 256 slots on one PostgreSQL;
                               routing, only when named: 1, 2, 4 and 8 slot workers, broadcast against --routing slot;
                               slot-load, only when named: a slot of 10,000 to 1,000,000 loaded; --slots 1 to 65,536;
                               scale, only when named: the steady workload at 1, 2, 5 and 10 million pending;
                               push, only when named: 1,000 to 100,000 due at once pushed to the APNs stand-in;
                               backend, only when named: one ChimeBackend connection ÷ the raw load client)
           chime-bench relay URL PREFIX             (a baseline process the system benchmark starts)
           chime-bench pump URL PREFIX COUNT DEVICES (likewise)

    """
if arguments.contains("--help") || arguments.contains("-h") {
    print(usage, terminator: "")
    exit(0)
}
do {
    switch arguments.first {
    case "recurrence" where arguments.contains("--hostile"):
        HostileRecurrenceBenchmark().run()
    case "recurrence":
        RecurrenceBenchmark(quick: quick).run()
    case "hot-path":
        var bench = HotPathBenchmark(quick: quick, record: arguments.contains("--record"))
        if let i = arguments.firstIndex(of: "--only"), i + 1 < arguments.count { bench.only = arguments[i + 1] }
        try bench.run()
    case "maxima":
        try MaximaBenchmark(quick: quick).run()
    case "ingest-cpu":
        IngestCPUBenchmark(quick: quick).run()
    case "snapshot-steps":
        SnapshotStepsBenchmark(quick: quick).run()
    case "history":
        var devices = quick ? 20_000 : 100_000
        if let i = arguments.firstIndex(of: "--devices") {
            guard i + 1 < arguments.count, let n = Int(arguments[i + 1]), n >= 1000 else { throw BenchError(usage) }
            devices = n
        }
        try HistoryBenchmark(devices: devices, without: arguments.contains("--without")).run()
    case "recovery" where arguments.count == 5 && arguments[1] == "--directory" && arguments[3] == "--expect":
        guard let total = Int(arguments[4]) else { throw BenchError(usage) }
        try RecoveryBenchmark.recover(directory: arguments[2], expect: total)
    case "recovery":
        var total = quick ? 200_000 : 1_000_000
        if let i = arguments.firstIndex(of: "--pending") {
            guard i + 1 < arguments.count, let n = Int(arguments[i + 1]), n >= 10 else { throw BenchError(usage) }
            total = n
        }
        try RecoveryBenchmark(total: total).run()
    case "system":
        // Read once; a mistyped flag would otherwise start the whole half-hour run.
        let valued: Set = ["--json", "--only", "--store", "--baseline", "--pending", "--metrics"]
        var values: [String: String] = [:]
        var rest = arguments.dropFirst()
        while let flag = rest.popFirst() {
            if valued.contains(flag) {
                guard let value = rest.popFirst() else { throw BenchError("system: \(flag) needs a value\n" + usage) }
                if values[flag] == nil { values[flag] = value }
                continue
            }
            guard flag == "--quick" else { throw BenchError("system: \(flag) is not one of its flags\n" + usage) }
        }
        let json = values["--json"] ?? (quick ? "bench-results/quick.json" : "bench-results/results.json")
        var bench = SystemBenchmark(quick: quick, jsonPath: json)
        if let only = values["--only"] { bench.only = Set(only.split(separator: ",").map(String.init)) }
        if let store = values["--store"] {
            guard store == "postgres" else { throw BenchError(usage) }
            bench.postgres = true
        }
        if let baseline = values["--baseline"] {
            guard FileManager.default.isExecutableFile(atPath: baseline) else {
                throw BenchError(
                    "--baseline needs the path of a chimed (scripts/build-baseline REF prints one)\n" + usage
                )
            }
            bench.baseline = baseline
        }
        if let pending = values["--pending"] {
            let least = bench.sizes.steadyRate * bench.sizes.steadySeconds + 500
            guard let n = Int(pending), n >= least else {
                throw BenchError("--pending needs a count of at least \(least)\n" + usage)
            }
            bench.scalePending = n
        }
        if let metrics = values["--metrics"] {
            guard let port = Int(metrics) else { throw BenchError(usage) }
            bench.metricsPort = port
        }
        try bench.run()
    case "relay" where arguments.count == 3:
        try Baselines.relay(url: arguments[1], prefix: arguments[2])
    case "pump" where arguments.count == 5:
        guard let count = Int(arguments[3]), let devices = Int(arguments[4]) else { throw BenchError(usage) }
        try Baselines.pump(url: arguments[1], prefix: arguments[2], count: count, devices: devices)
    default:
        FileHandle.standardError.write(Data(usage.utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("chime-bench: \(error)\n".utf8))
    exit(1)
}
