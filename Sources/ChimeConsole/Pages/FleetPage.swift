import ChimeTime

extension ConsolePages {
    /// How often the fleet page reloads itself (`<meta http-equiv="refresh">`: no script).
    public static let fleetRefreshSeconds = 10

    /// The fleet: every worker that published a status, what it serves, its version and uptime, the
    /// fleet's pending notifications, devices, commands and deliveries a second, refused deliveries
    /// and takeovers, and each online worker's lateness and loop-turn histograms as charts. It
    /// reloads every ``fleetRefreshSeconds``.
    ///
    /// - Parameters:
    ///   - workers: the workers, in the order to show them.
    ///   - now: the time of the page, for uptimes.
    ///   - statusTopic: where statuses are read (`chime/$worker/+/status`), named in the empty state.
    public static func fleet(
        workers: [FleetWorker],
        now: Instant,
        statusTopic: String = "chime/$worker/+/status",
        signedIn: SignedIn
    ) -> String {
        let intro: HTML = """
            <h1>Fleet</h1>
            <p class="hint">Reloads every \(fleetRefreshSeconds) seconds. As of \(ConsoleTime.html(now, zone: nil)).</p>

            """
        guard !workers.isEmpty else {
            let main: HTML = """
                \(intro)<p class="notice info" role="status">No worker has published a status on \
                <code>\(statusTopic)</code>. Check that chimed is running and connected to this broker with \
                the same topic prefix, and that the console's broker account may read the workers' status \
                and stats topics.</p>

                """
            return document(
                title: "Fleet",
                section: .fleet,
                signedIn: signedIn,
                refreshSeconds: fleetRefreshSeconds,
                main: main
            )
        }
        let online = workers.filter(\.isOnline)
        func sum(_ value: (FleetWorker) -> Int64?) -> String {
            let values = online.compactMap(value)
            return values.isEmpty ? "—" : String(values.saturatingSum())
        }
        func rate(_ value: (FleetWorker) -> Double?) -> String {
            let values = online.compactMap(value)
            return values.isEmpty ? "—" : HistogramSummary.format(values.reduce(0, +))
        }
        let figures: [(String, String)] = [
            ("Workers online", "\(online.count) of \(workers.count)"),
            ("Pending notifications", sum(\.pending)),
            ("Devices", sum(\.devices)),
            ("Commands a second", rate(\.commandsPerSecond)),
            ("Deliveries a second", rate(\.deliveriesPerSecond)),
            ("Refused deliveries", sum(\.refusedDeliveries)),
            ("Takeovers", sum(\.takeovers)),
        ]
        let summary = figures.map { name, value -> HTML in "<div><dt>\(name)</dt><dd>\(value)</dd></div>" }
        let rows = workers.map { workerRow($0, now: now) }
        let charts = online.compactMap(workerCharts)
        let chartsHTML: HTML =
            charts.isEmpty
            ? """
            <p class="notice info">No stats heard yet from the workers online: they send them every 10 s by \
            default (chimed's --stats-interval; 0 turns them off).</p>

            """
            : HTML.join(charts)
        let main: HTML = """
            \(intro)<dl class="figures">\(summary)</dl>
            <h2 id="workers-heading">Workers</h2>
            <div class="scroll" role="region" aria-labelledby="workers-heading" tabindex="0">
            <table class="stack">
            <thead><tr><th scope="col">Worker</th><th scope="col">State</th><th scope="col">Serves</th>\
            <th scope="col">Version</th><th scope="col">Up</th><th scope="col">Pending</th>\
            <th scope="col">Devices</th><th scope="col">Commands/s</th><th scope="col">Deliveries/s</th>\
            <th scope="col">Late deliveries</th><th scope="col">Refused</th><th scope="col">Takeovers</th>\
            <th scope="col">Stats at</th></tr></thead>
            <tbody>
            \(rows)</tbody>
            </table>
            </div>
            <h2>Lateness and loop turns</h2>
            <p class="hint">Lateness: from when a delivery was due to when it was published, for lateness the \
            worker caused. Loop turns: the longest the worker's engine was busy at once, so the longest a due \
            delivery could wait for it. Bars count the values up to each bound.</p>
            \(chartsHTML)
            """
        return document(
            title: "Fleet",
            section: .fleet,
            signedIn: signedIn,
            refreshSeconds: fleetRefreshSeconds,
            main: main
        )
    }

    /// One worker's row of the workers table.
    static func workerRow(_ w: FleetWorker, now: Instant) -> HTML {
        func cell(_ label: String, _ content: HTML) -> HTML { "<td data-label=\"\(label)\">\(content)</td>" }
        func number(_ value: Int64?) -> HTML { HTML(text: value.map { String($0) } ?? "—") }
        func rate(_ value: Double?) -> HTML { HTML(text: value.map(HistogramSummary.format) ?? "—") }
        let up: HTML
        if w.isOnline, let started = w.startedAt {
            let elapsed = now.milliseconds.saturatingSubtract(started.milliseconds)
            up = """
                <span title="since \(started.rfc3339()) UTC">\
                \(ConsoleTime.duration(milliseconds: elapsed))</span>
                """
        } else {
            up = "—"
        }
        let stateClass: HTML = w.isOnline ? "state on" : "state off"
        let statsAt: HTML = w.statsAt.map { ConsoleTime.html($0, zone: nil) } ?? "no stats yet"
        return """
            <tr><th scope="row" data-label="Worker">\(w.id)</th>\
            \(cell("State", "<span class=\"\(stateClass)\">\(w.state)</span>"))\
            \(cell("Serves", HTML(text: w.serves)))\(cell("Version", HTML(text: w.version ?? "—")))\
            \(cell("Up", up))\(cell("Pending", number(w.pending)))\(cell("Devices", number(w.devices)))\
            \(cell("Commands/s", rate(w.commandsPerSecond)))\(cell("Deliveries/s", rate(w.deliveriesPerSecond)))\
            \(cell("Late deliveries", number(w.lateDeliveries)))\(cell("Refused", number(w.refusedDeliveries)))\
            \(cell("Takeovers", number(w.takeovers)))\(cell("Stats at", statsAt))</tr>

            """
    }

    /// A worker's two charts, nil when its stats have neither histogram.
    static func workerCharts(_ w: FleetWorker) -> HTML? {
        guard w.lateness != nil || w.loopStep != nil else { return nil }
        var figures: [HTML] = []
        if let lateness = w.lateness {
            figures.append(
                """
                <figure>\(SVGChart.histogram(lateness, name: "lateness", unitLabel: "deliveries"))\
                <figcaption>\(lateness.summary("Lateness"))</figcaption></figure>
                """
            )
        }
        if let loopStep = w.loopStep {
            figures.append(
                """
                <figure>\(SVGChart.histogram(loopStep, name: "loop turns", unitLabel: "turns"))\
                <figcaption>\(loopStep.summary("Loop turns"))</figcaption></figure>
                """
            )
        }
        return "<section class=\"charts\"><h3>Worker \(w.id)</h3>\(figures)</section>\n"
    }
}
