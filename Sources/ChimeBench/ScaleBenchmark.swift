import Foundation

/// `make bench-scale` (`--only scale`, issue 18): the pending workload of `steady` at 1, 2, 5
/// and 10 million pending (a tenth of that with `--quick`, N alone with `--pending N`), each on
/// a fresh chimed, recovered from a snapshot and a journal tail of a tenth of the pending.
extension SystemBenchmark {
    mutating func scale(url: String, chimed: String) throws {
        let standard = [1_000_000, 2_000_000, 5_000_000, 10_000_000].map { quick ? $0 / 10 : $0 }
        let totals = scalePending.map { [$0] } ?? standard
        let steadyCount = sizes.steadyRate * sizes.steadySeconds
        say("scale: \(totals.map(String.init).joined(separator: ", ")) pending")
        var points: [[String: Any]] = []
        for total in totals {
            let f = try pending(url: url, chimed: chimed, big: total - steadyCount, extraRecords: total / 10)
            var point = f.json
            point["latenessMs"] = quantiles(f.lateness)
            point["arrivalLatenessMs"] = quantiles(f.arrival)
            point["recoverySecondsPerMillion"] = f.recoveryMedian / (Double(total) / 1e6)
            points.append(point)
            let last = total == totals.last
            let millions = String(format: "%gM", Double(total) / 1e6)
            rows.append(
                (
                    "\(millions): RSS per pending beyond content (with the index; after recovery)",
                    String(format: "%.0f B (%.0f B; %.0f B)", f.perPending, f.perPendingIndexed, f.perPendingRecovered),
                    "", last ? "≤ 300 B" : ""
                )
            )
            rows.append(
                (
                    "\(millions): recovery, start to first command served (median of 3), per million",
                    String(format: "%.2f s, %.2f s", f.recoveryMedian, f.recoveryMedian / (Double(total) / 1e6)), "",
                    last ? "≤ 1 s per million" : ""
                )
            )
            rows.append(
                (
                    "\(millions): steady lateness p50 / p99 / p99.9",
                    String(
                        format: "%.0f / %.0f / %.0f ms",
                        f.lateness.quantile(0.5),
                        f.lateness.quantile(0.99),
                        f.lateness.quantile(0.999)
                    ), "", last ? "p99 ≤ 5 ms" : ""
                )
            )
            rows.append(
                (
                    "\(millions): cancel by tag / list by tag (medians)",
                    String(format: "%.2f / %.2f ms", f.cancel.quantile(0.5), f.list.quantile(0.5)), "",
                    last ? "cancel ≤ 1 ms" : ""
                )
            )
            rows.append(
                (
                    "\(millions): snapshot time, size, peak extra RSS, longest loop turn",
                    String(
                        format: "%.1f s, %@, %.0f MB, ≤ %.0f ms",
                        f.snapshot.seconds,
                        f.snapshot.size,
                        Double(f.snapshot.rssPeak - f.snapshot.rssBefore) / 1e6,
                        f.snapshot.longestStepAtMostMs
                    ), "", last ? "no turn > 20 ms" : ""
                )
            )
        }
        results["scale"] = points
    }
}
