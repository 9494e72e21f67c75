import ChimeHarness
import Foundation
import Synchronization

/// A chimed that the ingest, burst and batch workloads run round after round: this build on each
/// store, and, with `--baseline PATH`, an earlier one (scripts/build-baseline builds it at any
/// commit), so that every change is measured against it in the same run on the same machine.
struct Variant: Hashable, Sendable {
    /// `data directory`, `PostgreSQL` or `baseline`.
    var name: String
    var path: String
    var store: SystemBenchmark.Store
    var isBaseline: Bool { name == Self.baselineName }

    static let baselineName = "baseline"
}

/// One comparison of this build against the baseline over the rounds of a run: the median of
/// each side's figures, their ratio, and the spread of the ratios round by round.
struct Comparison {
    var new: [Double]
    var baseline: [Double]

    var ratio: Double { median(new) / median(baseline) }
    /// The lowest and highest ratio of a round's two figures.
    var spread: (low: Double, high: Double) {
        let ratios = zip(new, baseline).map { $0 / $1 }
        return (ratios.min() ?? .nan, ratios.max() ?? .nan)
    }

    var text: String {
        String(format: "%.2f (rounds %.2f–%.2f)", ratio, spread.low, spread.high)
    }

    var json: [String: Any] {
        ["new": new, "baseline": baseline, "ratio": ratio, "lowestRound": spread.low, "highestRound": spread.high]
    }
}

extension SystemBenchmark {
    /// This build on each store, then the baseline (on the data directory).
    func variants(chimed: String) -> [Variant] {
        stores.map { Variant(name: $0.rawValue, path: chimed, store: $0) }
            + (baseline.map { [Variant(name: Variant.baselineName, path: $0, store: .directory)] } ?? [])
    }

    /// The variants in the order round `round` runs them: reversed every other round, so that
    /// neither always runs first while the machine's state drifts over a run.
    func variants(chimed: String, round: Int) -> [Variant] {
        let all = variants(chimed: chimed)
        return round % 2 == 0 ? all : all.reversed()
    }

    /// Adds the rows and the JSON of this build against the baseline for one workload's figures,
    /// each by variant name, when there is a baseline.
    mutating func compare(
        _ workload: String,
        _ figures: [(label: String, byVariant: [String: [Double]], target: String)]
    ) {
        guard let baselinePath = baseline else { return }
        var json: [String: Any] = ["baselinePath": baselinePath]
        for figure in figures {
            guard let new = figure.byVariant[Store.directory.rawValue],
                let old = figure.byVariant[Variant.baselineName]
            else { continue }
            let c = Comparison(new: new, baseline: old)
            json[figure.label] = c.json
            say("  \(workload): \(figure.label), this build ÷ baseline: \(c.text)")
            rows.append(("\(workload): \(figure.label), this build ÷ baseline", c.text, ratio(c.ratio), figure.target))
        }
        var all = results["baseline"] as? [String: Any] ?? [:]
        all[workload] = json
        results["baseline"] = all
    }
}

extension Chimed {
    /// The flags `path --help` lists, read once for each binary: a baseline built at an earlier
    /// commit may not know a flag added since, and is started without it.
    static func knownFlags(_ path: String) throws -> Set<String> {
        if let known = flagsByBinary.withLock({ $0[path] }) { return known }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["--help"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        var known = Set<String>()
        for word in output.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "-") })
        where word.hasPrefix("--") && word.count > 2 {
            known.insert(String(word.dropFirst(2)))
        }
        guard !known.isEmpty else { throw BenchError("\(path) --help lists no flags:\n\(output)") }
        flagsByBinary.withLock { $0[path] = known }
        return known
    }

    /// `arguments` (each `--flag value`) without the flags `path` does not know, each said once.
    static func arguments(_ arguments: [String], knownTo path: String) throws -> [String] {
        let known = try knownFlags(path)
        var kept: [String] = []
        var i = 0
        while i < arguments.count {
            let pair = Array(arguments[i..<min(i + 2, arguments.count)])
            let flag = String(arguments[i].dropFirst(2))
            if known.contains(flag) {
                kept += pair
            } else if dropped.withLock({ $0.insert(path + " " + flag).inserted }) {
                say("  (\(path) does not know --\(flag): started without it)")
            }
            i += 2
        }
        return kept
    }

    private static let flagsByBinary = Mutex<[String: Set<String>]>([:])
    private static let dropped = Mutex<Set<String>>([])
}
