import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

@Suite struct WorkerMetricsTests {
    func metrics(notReady: [String] = []) -> WorkerMetrics {
        WorkerMetrics(
            stats: WorkerStats(),
            pending: 3,
            devices: 2,
            inflight: 1,
            store: StoreStatus(snapshotDue: false, bytesSinceSnapshot: 4096, lastSequence: 17),
            connected: true,
            notReady: notReady,
            workerId: "w\"1\\x\ny",
            partition: "0/1",
            instance: "abc",
            version: "1.0",
            startedAt: Instant(milliseconds: 1_796_119_200_500),
            at: Instant(milliseconds: 1_796_119_260_000)
        )
    }

    /// Each family has one HELP and one TYPE line, before its samples, and every sample belongs to
    /// a declared family.
    @Test(arguments: [nil, [3, 7]])
    func everySampleBelongsToADeclaredFamilyWithItsHeaderFirst(slots: [Int]?) {
        var numbers = metrics()
        numbers.slots = slots
        let text = numbers.prometheusText
        var declared: [String: String] = [:]
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                #expect(declared[String(parts[2])] == nil, "\(parts[2]) declared twice")
                declared[String(parts[2])] = String(parts[3])
            } else if !line.hasPrefix("#") {
                let name = String(line.prefix { $0 != "{" && $0 != " " })
                let family = declared.keys.first { name == $0 || name.hasPrefix($0 + "_") }
                #expect(family != nil, "\(name) comes before its family's TYPE line")
            }
        }
        let expected =
            WorkerMetrics.families + WorkerMetrics.pushFamilies + (slots == nil ? [] : WorkerMetrics.slotFamilies)
        #expect(Set(declared.keys) == Set(expected.map(\.name)))
        if slots != nil {
            #expect(text.contains("\nchime_slots_served 2\n"))
            #expect(declared["chime_lease_renew_seconds"] == "histogram")
        }
        #expect(declared["chime_delivery_lateness_seconds"] == "histogram")
        #expect(declared["chime_deliveries_total"] == "counter")
    }

    @Test func gaugesAndLabelsAreWrittenInBaseUnitsAndEscaped() {
        let text = metrics().prometheusText
        #expect(text.contains("\nchime_pending_notifications 3\n"))
        #expect(text.contains("\nchime_journal_unsnapshotted_bytes 4096\n"))
        #expect(text.contains("\nchime_start_time_seconds 1796119200.5\n"))
        #expect(text.contains("\nchime_ready 1\n"))
        let info = #"chime_worker_info{worker_id="w\"1\\x\ny",partition="0/1",instance="abc",version="1.0"} 1"#
        #expect(text.contains(info))
        #expect(metrics(notReady: ["stopping"]).prometheusText.contains("\nchime_ready 0\n"))
    }

    @Test func histogramBucketsAreCumulativeInSeconds() {
        var h = Histogram()
        for microseconds: Int64 in [300, 800, 1500, 7_000, 90_000_000] { h.record(microseconds: microseconds) }
        var stats = WorkerStats()
        stats.fsync = h
        var m = metrics()
        m.stats = stats
        let lines = m.prometheusText.split(separator: "\n").filter { $0.hasPrefix("chime_journal_sync_seconds") }
        #expect(lines.contains(#"chime_journal_sync_seconds_bucket{le="0.001"} 2"#))
        #expect(lines.contains(#"chime_journal_sync_seconds_bucket{le="0.002"} 3"#))
        #expect(lines.contains(#"chime_journal_sync_seconds_bucket{le="0.01"} 4"#))
        #expect(lines.contains(#"chime_journal_sync_seconds_bucket{le="60"} 4"#))
        #expect(lines.contains(#"chime_journal_sync_seconds_bucket{le="+Inf"} 5"#))
        #expect(lines.contains("chime_journal_sync_seconds_count 5"))
        #expect(lines.contains("chime_journal_sync_seconds_sum 90.0096"))
        // The stats message keeps milliseconds.
        #expect(h.quantile(0.5) == 2)
    }

    /// A quantile is its bucket's upper bound only up to the largest value: syncs of 45 ms are in
    /// the bucket up to 50 ms, and p99 is 45 ms, not 50 (`chime status` showed "p99 50 ms, max 45 ms").
    @Test func noQuantileExceedsTheMaximum() {
        var h = Histogram()
        for _ in 0..<100 { h.record(microseconds: 45_000) }
        #expect(h.quantile(0.99) == 45)
        #expect(h.quantile(0.5) == 45)
        #expect(h.json["max"] == 45)
        #expect(h.json["p99"] == 45)
        // Below a millisecond, as the maximum is shown: 0.
        var fast = Histogram()
        fast.record(microseconds: 400)
        #expect(fast.quantile(0.99) == 0)
        #expect(fast.json["max"] == 0)
        // Past the last bound, the maximum itself; in a lower bucket the bound when it is smaller.
        var spread = Histogram()
        for microseconds: Int64 in [1_500, 1_600, 1_700, 90_000_000] { spread.record(microseconds: microseconds) }
        #expect(spread.quantile(0.5) == 2)
        #expect(spread.quantile(0.99) == 90_000)
        for q in stride(from: 0.01, through: 1, by: 0.01) {
            #expect(spread.quantile(q)! <= spread.maximumMilliseconds)
        }
    }

    @Test func expectedLatenessIsAFamilyOfItsOwn() {
        var stats = WorkerStats()
        stats.expectedLateness.record(microseconds: 220_000_000_000)
        var m = metrics()
        m.stats = stats
        let text = m.prometheusText
        #expect(text.contains("\n# TYPE chime_delivery_expected_lateness_seconds histogram\n"))
        #expect(text.contains("\nchime_delivery_expected_lateness_seconds_count 1\n"))
        #expect(text.contains("\nchime_delivery_lateness_seconds_count 0\n"))
        #expect(m.statsJSON["expectedLateness"]?.objectValue?["count"] == 1)
        #expect(m.statsJSON["lateness"]?.objectValue?["count"] == 0)
    }
}
