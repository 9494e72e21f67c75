import ChimeCore
import ChimeHTTP
import ChimeTestSupport
import Foundation
import Testing

/// `--metrics-listen` against the real thing: the built chimed, mosquitto, Debian's prometheus
/// and promtool.
@Suite struct MetricsTests {
    func start() async throws -> (WorkerFixture, Int) {
        let port = try TestBroker.freePort()
        let fixture = try await WorkerFixture.start(extra: ["--metrics-listen", "127.0.0.1:\(port)"])
        return (fixture, port)
    }

    func status(_ port: Int, _ path: String) -> Int { (try? HTTPProbe.get(port: port, path).status) ?? 0 }

    @Test func prometheusScrapesDeliveriesAndComputesALatenessQuantile() async throws {
        let (fixture, port) = try await start()
        defer { Task { await fixture.stop() } }
        #expect(await eventually { status(port, "/readyz") == 200 })
        try await fixture.subscribeDeliveries("d1")
        try await fixture.ok("d1", .schedule, #"{"id":"a","after":1}"#)
        #expect(await fixture.waitForDeliveries("d1", count: 1, timeout: .seconds(10)).count == 1)
        #expect(
            await eventually {
                (try? HTTPProbe.get(port: port, "/metrics").body.contains("\nchime_deliveries_total 1\n")) == true
            }
        )

        // The exposition passes promtool's linter.
        let scrape = try HTTPProbe.get(port: port, "/metrics")
        #expect(scrape.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        let file = try TemporaryDirectory(prefix: "chime-metrics")
        try scrape.body.write(toFile: file.appending("metrics.txt"), atomically: true, encoding: .utf8)
        let lint = try ChildProcess(
            "sh",
            arguments: ["-c", "promtool check metrics < \(file.appending("metrics.txt"))"]
        )
        try lint.start()
        let lintResult = await lint.waitForExit(timeout: .seconds(30))
        #expect(lintResult == .exited(0), "\(lint.standardOutputLines + lint.standardErrorLines)")

        // A real Prometheus scrapes it, and PromQL reads the histogram.
        let prometheus = try await TestPrometheus.start(scraping: ["127.0.0.1:\(port)"])
        var deliveries: [(labels: JSONObject, value: String)] = []
        let scraped = await eventually(timeout: .seconds(30), every: .milliseconds(200)) {
            deliveries = (try? prometheus.query("chime_deliveries_total")) ?? []
            return deliveries.first?.value == "1"
        }
        #expect(scraped, "\(deliveries)")
        #expect(deliveries.first?.labels["job"] == "chime")
        let p99 = try prometheus.query(
            "histogram_quantile(0.99, sum by (le) (chime_delivery_lateness_seconds_bucket))"
        )
        let seconds = p99.first.flatMap { Double($0.value) }
        #expect(seconds.map { $0 >= 0 && $0 <= 60 } == true, "\(p99)")
        let ready = try prometheus.query("chime_ready")
        #expect(ready.first?.value == "1")
        let info = try prometheus.query("chime_worker_info")
        #expect(info.first?.labels["worker_id"]?.stringValue == fixture.workerId)
    }

    /// A one-shot dated 2020 fires at once, years late by design: the lateness histogram, which the
    /// alert reads, stays empty and the expected lateness counts it; a new one counts as the worker's.
    @Test func aOneShotInThePastIsCountedApartFromTheWorkersLateness() async throws {
        let (fixture, port) = try await start()
        defer { Task { await fixture.stop() } }
        #expect(await eventually { status(port, "/readyz") == 200 })
        try await fixture.subscribeDeliveries("d1")
        try await fixture.ok("d1", .schedule, #"{"id":"old","fireDate":"2020-01-01T00:00:00Z"}"#)
        #expect(await fixture.waitForDeliveries("d1", count: 1, timeout: .seconds(10)).count == 1)
        func scrape() -> String { (try? HTTPProbe.get(port: port, "/metrics").body) ?? "" }
        #expect(await eventually { scrape().contains("\nchime_deliveries_total 1\n") })
        var text = scrape()
        #expect(text.contains("\nchime_delivery_lateness_seconds_count 0\n"), "\(text)")
        #expect(text.contains("\nchime_late_deliveries_total 0\n"), "\(text)")
        #expect(text.contains("\nchime_delivery_expected_lateness_seconds_count 1\n"), "\(text)")
        #expect(text.contains("\nchime_delivery_expected_lateness_seconds_bucket{le=\"60\"} 0\n"), "\(text)")

        try await fixture.ok("d1", .schedule, #"{"id":"new","after":1}"#)
        #expect(await fixture.waitForDeliveries("d1", count: 2, timeout: .seconds(10)).count == 2)
        #expect(await eventually { scrape().contains("\nchime_deliveries_total 2\n") })
        text = scrape()
        #expect(text.contains("\nchime_delivery_lateness_seconds_count 1\n"), "\(text)")
        #expect(text.contains("\nchime_delivery_expected_lateness_seconds_count 1\n"), "\(text)")
    }

    @Test func readyzFollowsTheBrokerConnectionAndLivezTheLoop() async throws {
        let (fixture, port) = try await start()
        defer { Task { await fixture.stop() } }
        #expect(await eventually { status(port, "/readyz") == 200 })
        #expect(status(port, "/livez") == 200)
        await fixture.broker.stop()
        #expect(await eventually { status(port, "/readyz") == 503 })
        let body = try HTTPProbe.get(port: port, "/readyz").body
        #expect(body.contains("not connected to the broker"), "\(body)")
        // Alive while the broker is away: the loop still runs.
        #expect(status(port, "/livez") == 200)
        try await fixture.broker.restart()
        #expect(await eventually { status(port, "/readyz") == 200 })
    }

    @Test func theEndpointAnswersOnlyWhatItServes() async throws {
        let (fixture, port) = try await start()
        defer { Task { await fixture.stop() } }
        #expect(await eventually { status(port, "/livez") == 200 })
        #expect(status(port, "/nope") == 404)
        let post = try HTTPProbe.parse(
            HTTPProbe.exchange(port: port, Array("POST /metrics HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}".utf8))
        )
        #expect(post.status == 405)
        // A stop is graceful with the endpoint open.
        #expect(await fixture.stopWorker() == .exited(0))
    }

    /// Issue #30: clients sending their requests a byte at a time hold every connection the
    /// endpoint allows, from several addresses, and open more; its probes are answered all the same
    /// (the kubelet would otherwise restart a healthy worker).
    @Test func probesAreAnsweredWhileSlowClientsHoldTheEndpoint() async throws {
        let (fixture, port) = try await start()
        defer { Task { await fixture.stop() } }
        // The positive control: answered before.
        #expect(await eventually { status(port, "/readyz") == 200 })
        let limits = HTTPServer.Limits()
        var slow: [HTTPProbe.Connection] = []
        for i in 0..<(limits.connections + limits.connectionsPerAddress) {
            let connection = try HTTPProbe.Connection(
                port: port,
                from: "127.0.0.\(2 + i / limits.connectionsPerAddress)"
            )
            try connection.send(Array("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8))
            slow.append(connection)
        }
        for path in ["/livez", "/readyz", "/livez"] {
            #expect(status(port, path) == 200, "\(path)")
        }
        #expect(slow.count == limits.connections + limits.connectionsPerAddress)
    }

    @Test func anAddressThatIsNotHostAndPortIsAUsageError() async throws {
        let chimed = try ChildProcess(try builtProduct("chimed"), arguments: ["--metrics-listen", "localhost"])
        try chimed.start()
        #expect(await chimed.waitForExit(timeout: .seconds(10)) == .exited(2))
        #expect(chimed.standardErrorLines.joined().contains("--metrics-listen: expected HOST:PORT"))
    }
}
