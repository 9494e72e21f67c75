import ChimeConsole
import ChimeProtocol
import ChimeTime
import Testing

@testable import ChimeWorkerPolicy

@Suite("Fleet charts and workers")
struct ChartTests {
    @Test("The console's bucket bounds are the worker's")
    func bounds() {
        #expect(HistogramSummary.bounds == Histogram.bounds)
    }

    @Test("A histogram with samples: every bucket a bar slot, bars for those that hold values")
    func fullChart() {
        var buckets = JSONObject()
        for bound in HistogramSummary.bounds { buckets.append("le\(bound)", .int(bound)) }
        buckets.append("inf", 7)
        let summary = HistogramSummary(
            json: [
                "count": 70_000, "p50": 10000, "p99": 60000, "max": 61000, "mean": 12.25, "buckets": .object(buckets),
            ]
        )
        #expect(summary.buckets.count == 15)
        #expect(summary.buckets.last == .init(upperBound: nil, count: 7))
        let svg = SVGChart.histogram(summary, name: "lateness", unitLabel: "deliveries").rendered
        #expect(svg.contains("role=\"img\""))
        #expect(svg.contains("aria-label=\"lateness: p50 10000 ms, p99 60000 ms, max 61000 ms, 70000 samples\""))
        #expect(svg.contains("<title>lateness: p50 10000 ms"))
        #expect(svg.components(separatedBy: "<rect class=\"bar\"").count == 16)
        #expect(svg.contains("<title>over 60000 ms: 7</title>"))
        #expect(svg.contains(">60s</text>") && svg.contains(">more</text>"))
        #expect(!svg.contains("style") && !svg.contains("<script"))
        let markup = PageMarkup(svg)
        #expect(markup.problems.isEmpty, "\(markup.problems)")
    }

    @Test("An empty histogram says so, in the chart and its label")
    func emptyChart() {
        let summary = HistogramSummary(json: ["count": 0, "p50": nil, "p99": nil, "max": 0, "buckets": [:]])
        let svg = SVGChart.histogram(summary, name: "loop turns", unitLabel: "turns").rendered
        #expect(svg.contains("aria-label=\"loop turns: no samples yet\""))
        #expect(svg.contains(">No samples yet</text>"))
        #expect(!svg.contains("<rect"))
        #expect(PageMarkup(svg).problems.isEmpty)
        #expect(HistogramSummary(json: [:]).buckets.allSatisfy { $0.count == 0 })
    }

    @Test("Hostile labels are escaped in the chart")
    func hostileLabels() {
        let summary = HistogramSummary(json: ["count": 1, "p50": 1, "buckets": ["le1": 1, "le<b>": 3]])
        let svg = SVGChart.histogram(summary, name: PageSamples.script, unitLabel: PageSamples.breakout).rendered
        #expect(!svg.contains("<script") && !svg.contains("<img"))
        #expect(svg.contains("&lt;script&gt;"))
    }

    @Test("A worker from its status and two stats messages")
    func worker() {
        let w = FleetWorker(
            id: "w1",
            status: PageSamples.status("w1", version: "0.3.0"),
            stats: PageSamples.stats("w1", at: "2026-12-07T09:59:50Z", commands: 500, deliveries: 300),
            previousStats: PageSamples.stats("w1", at: "2026-12-07T09:59:40Z", commands: 400, deliveries: 250)
        )
        #expect(w.id == "w1" && w.isOnline && w.version == "0.3.0")
        #expect(w.serves == "partition 0/1")
        #expect(w.commands == 500 && w.deliveries == 300 && w.pending == 120 && w.refusedDeliveries == 2)
        #expect(w.commandsPerSecond == 10 && w.deliveriesPerSecond == 5)
        #expect(w.lateness?.p99 == 2 && w.lateness?.count == 87)
        let restarted = FleetWorker(
            id: "w1",
            status: PageSamples.status("w1"),
            stats: PageSamples.stats("w1", at: "2026-12-07T09:59:50Z", commands: 5, deliveries: 3),
            previousStats: PageSamples.stats("w1", at: "2026-12-07T09:59:40Z", commands: 400, deliveries: 250)
        )
        #expect(restarted.commandsPerSecond == nil)
        let slots = FleetWorker(
            id: "w2",
            status: ["state": "online", "workerId": "w2", "slots": 16, "serving": "0-3,7"],
            stats: nil
        )
        #expect(slots.serves == "slots 0-3,7 of 16" && slots.commands == nil && slots.commandsPerSecond == nil)
        let offline = FleetWorker(id: "w3", status: ["state": "offline", "workerId": "w3"])
        #expect(!offline.isOnline)
    }

    @Test("A worker's real stats message reads")
    func realStats() {
        var stats = WorkerStats().json
        stats["at"] = "2026-12-07T09:59:50Z"
        let w = FleetWorker(id: "w1", status: PageSamples.status("w1"), stats: stats)
        #expect(w.deliveries == 0 && w.commands == 0 && w.takeovers == 0 && w.refusedDeliveries == 0)
        #expect(w.lateness?.count == 0 && w.loopStep?.buckets.count == HistogramSummary.bounds.count + 1)
    }

    @Test("A worker is named by its topic's id, not by what its status says")
    func topicId() {
        let stats = PageSamples.stats("w3", at: "2026-12-07T09:59:50Z", commands: 1, deliveries: 1)
        let w = FleetWorker(id: "w1", status: PageSamples.status("w2"), stats: stats)
        #expect(w.id == "w1")
    }

    @Test("Only the worker's 15 bucket keys, spelled as it writes them, make bars")
    func bucketKeys() {
        var full = Histogram()
        for bound in Histogram.bounds { full.record(microseconds: bound * 1000) }
        full.record(microseconds: 61_000_000)
        #expect(HistogramSummary.bucketKeys == full.json["buckets"]?.objectValue?.keys)
        let summary = HistogramSummary(
            json: ["count": 3, "buckets": ["le1": 1, "le01": 5, "le001": 7, "LE2": 9, "le3": 11, "inf": 2, "le+5": 4]]
        )
        #expect(summary.buckets.count == 15)
        #expect(summary.buckets.first == .init(upperBound: 1, count: 1))
        #expect(summary.buckets.last == .init(upperBound: nil, count: 2))
        #expect(summary.buckets.map(\.count).reduce(0, +) == 3)
    }

    /// A stats message as anyone who may publish on the workers' topics could write it.
    static func hostileStats(at: JSON) -> JSONObject {
        var buckets = JSONObject()
        for key in HistogramSummary.bucketKeys + ["le1", "inf"] { buckets.append(key, .int(.max)) }
        for key in ["le01", "le001", "le0001", "INF", "le+1", "le-1"] { buckets.append(key, .int(.max)) }
        for n in 0..<10_000 { buckets.append("le\(100_000 + n)", .int(.max)) }
        let histogram: JSONObject = [
            "count": .int(.max), "p50": .double(1e308), "p99": .int(.max), "max": .double(-1e308), "mean": .int(.min),
            "buckets": .object(buckets),
        ]
        var commands = JSONObject()
        for n in 0..<20 { commands.append("op\(n)", .int(n % 2 == 0 ? .max : .min + 1)) }
        commands.append("schedule", .int(.max))
        return [
            "workerId": "someone-else", "at": at, "pending": .int(.max), "devices": .int(.max),
            "commands": .object(commands), "deliveries": .int(.max), "lateDeliveries": .int(.max),
            "refusedDeliveries": .int(.max), "takeovers": .int(.max), "lateness": .object(histogram),
            "loopStep": .object(histogram),
        ]
    }

    @Test("A fleet of hostile stats renders without trapping, in a bounded size")
    func hostileFleet() {
        let early: JSONObject = [
            "at": "0001-01-01T00:00:00Z", "commands": ["schedule": .int(.min)], "deliveries": .int(.min),
        ]
        let workers =
            (0..<3).map { n in
                FleetWorker(
                    id: "w\(n)",
                    status: [
                        "state": "online", "workerId": "forged", "partition": "0/1",
                        "startedAt": "0001-01-01T00:00:00Z",
                    ],
                    stats: Self.hostileStats(at: "9999-12-31T23:59:59Z"),
                    previousStats: early
                )
            } + [
                FleetWorker(
                    id: "w9",
                    status: ["state": "online", "slots": .int(.max), "serving": "0-3"],
                    stats: Self.hostileStats(at: .int(-1)),
                    previousStats: Self.hostileStats(at: "-0001-01-01T00:00:00Z")
                )
            ]
        #expect(workers.map(\.id) == ["w0", "w1", "w2", "w9"])
        #expect(workers[0].commands == .max && workers[0].lateness?.buckets.count == 15)
        #expect(workers[0].commandsPerSecond != nil)
        let html = ConsolePages.fleet(workers: workers, now: PageSamples.now, signedIn: PageSamples.viewerSession())
        // Two charts a worker, each of 15 bars at most.
        #expect(html.components(separatedBy: "<rect class=\"bar\"").count - 1 == 4 * 2 * 15)
        #expect(html.utf8.count < 64 * 1024, "\(html.utf8.count) bytes")
        #expect(html.contains(">\(Int64.max)<"), "the sums stop at Int64.max")
        #expect(PageMarkup(html).problems.isEmpty)
    }
}
