import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// The monitoring files: the alerting rules and the example Prometheus configuration checked with
/// Debian's `promtool`, the dashboard's and the rules' PromQL against the metric families chimed
/// declares, and the service files pointing probes and scrapes at the port chimed listens on.
@Suite struct MonitoringFilesTests {
    static let rules = "deploy/prometheus/chime-rules.yaml"
    static let ruleTests = "deploy/prometheus/chime-rules.test.yaml"
    static let prometheusConfig = "deploy/prometheus/prometheus.example.yml"
    static let dashboard = "deploy/grafana/chime.json"

    /// Runs `promtool`; returns how it ended and everything it wrote.
    static func promtool(_ arguments: [String]) async throws -> (status: ChildProcess.Termination?, output: String) {
        let process = try ChildProcess("promtool", arguments: arguments, currentDirectory: Repository.path("."))
        try process.start()
        let status = await process.waitForExit(timeout: .seconds(60))
        return (status, (process.standardOutputLines + process.standardErrorLines).joined(separator: "\n"))
    }

    @Test func promtoolAcceptsTheRules() async throws {
        let (status, output) = try await Self.promtool(["check", "rules", Repository.path(Self.rules)])
        #expect(status == .exited(0), "\(output)")
        #expect(output.contains("SUCCESS: \(try Self.ruleExpressions().count) rules found"), "\(output)")
    }

    @Test func theRulesPassTheirUnitTests() async throws {
        let (status, output) = try await Self.promtool(["test", "rules", Repository.path(Self.ruleTests)])
        #expect(status == .exited(0), "\(output)")

        // The positive control: with every `for` removed, the cases saying an alert has not fired
        // yet fail, so the file checks what does not fire as well as what does.
        let directory = try TemporaryDirectory(prefix: "chime-rules")
        let hasty = try Repository.text(Self.rules).split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("for: ") }
            .joined(separator: "\n")
        try hasty.write(toFile: directory.appending("chime-rules.yaml"), atomically: true, encoding: .utf8)
        let tests = directory.appending("chime-rules.test.yaml")
        try Repository.text(Self.ruleTests).write(toFile: tests, atomically: true, encoding: .utf8)
        let (hastyStatus, hastyOutput) = try await Self.promtool(["test", "rules", tests])
        #expect(hastyStatus == .exited(1), "\(hastyOutput)")
        for early in [
            "ChimeWorkerNotReady, time: 1m", "ChimeTargetDown, time: 3m", "ChimeDeliveriesLate, time: 5m",
            "ChimeJournalSyncSlow, time: 5m", "ChimeDeliveriesRefused, time: 5m", "ChimeCommandsFailing, time: 3m",
            "ChimePushProviderFailing, time: 5m",
        ] {
            #expect(hastyOutput.contains("alertname: \(early)"), "\(hastyOutput)")
        }
    }

    @Test func promtoolAcceptsTheExampleConfigurationAndItsRules() async throws {
        let (status, output) = try await Self.promtool(["check", "config", Repository.path(Self.prometheusConfig)])
        #expect(status == .exited(0), "\(output)")
        #expect(output.contains("SUCCESS: 1 rule files found"), "\(output)")
    }

    @Test func theDashboardsExpressionsParse() async throws {
        // promtool parses PromQL in rule files: each expression as a recording rule, with
        // Grafana's variables replaced by what they stand for.
        let expressions = try Self.dashboardExpressions()
        var file = "groups:\n  - name: dashboard\n    rules:\n"
        for (i, expression) in expressions.enumerated() {
            var promql = expression.replacingOccurrences(of: "$__rate_interval", with: "5m")
                .replacingOccurrences(of: "$instance", with: ".*")
            // Grafana's label_values(selector, label) asks Prometheus for the selector's series.
            if let call = promql.wholeMatch(of: /label_values\((.+), *[a-z_]+\)/) { promql = String(call.1) }
            let quoted = String(decoding: try JSONEncoder().encode(promql), as: UTF8.self)
            file += "      - record: dashboard:expression\(i)\n        expr: \(quoted)\n"
        }
        let directory = try TemporaryDirectory(prefix: "chime-dashboard")
        try file.write(toFile: directory.appending("dashboard.yaml"), atomically: true, encoding: .utf8)
        let (status, output) = try await Self.promtool(["check", "rules", directory.appending("dashboard.yaml")])
        #expect(status == .exited(0), "\(output)")
        #expect(output.contains("SUCCESS: \(expressions.count) rules found"), "\(output)")
    }

    @Test func everyMetricTheDashboardAndTheRulesNameIsExposed() throws {
        // The positive control: the checker flags names chimed does not expose, histogram
        // suffixes on a metric that is not a histogram among them.
        #expect(Self.unknownMetrics(in: "rate(chime_no_such_metric[5m])") == ["chime_no_such_metric"])
        #expect(Self.unknownMetrics(in: "chime_pending_notifications_count") == ["chime_pending_notifications_count"])
        #expect(Self.unknownMetrics(in: "rate(chime_journal_sync_seconds_bucket[5m]) + chime_ready").isEmpty)

        let rules = try Self.ruleExpressions()
        let alerts = try Repository.text(Self.rules).split(separator: "\n")
            .filter { $0.trimmingCharacters(in: .whitespaces).hasPrefix("- alert: ") }
        #expect(rules.count == alerts.count && rules.count >= 7, "\(rules)")
        let dashboard = try Self.dashboardExpressions()
        #expect(dashboard.count >= 10, "\(dashboard)")
        for (file, expressions) in [(Self.rules, rules), (Self.dashboard, dashboard)] {
            for expression in expressions {
                #expect(
                    expression.contains("chime_") || expression.contains("up{"),
                    "\(file): \(expression) names no metric"
                )
                let unknown = Self.unknownMetrics(in: expression)
                #expect(unknown.isEmpty, "\(file): \(expression) names \(unknown), which chimed does not expose")
            }
        }
        // Every panel asks the dashboard's data source variable.
        let text = try Repository.text(Self.dashboard)
        #expect(text.contains(#""uid": "${DS_PROMETHEUS}""#))
        #expect(!text.contains(#""uid": "prometheus""#))
    }

    @Test func theKubernetesProbesAndScrapesUseThePortChimedListensOn() throws {
        let config = YAMLLines(try Repository.text("deploy/kubernetes/chimed-config.yaml"))
        let listen = try #require(config.value("CHIME_METRICS_LISTEN"))
        let port = try #require(listen.split(separator: ":").last.map(String.init))
        #expect(listen == "0.0.0.0:\(port)", "pods must listen on their own address for kubelet and Prometheus")

        let documents = try Repository.text("deploy/kubernetes/chimed-statefulset.yaml").components(
            separatedBy: "\n---\n"
        )
        let service = YAMLLines(documents[0])
        #expect(service.value("kind") == "Service")
        let servicePorts = service.block("ports").trimmed
        #expect(servicePorts.contains("- name: metrics") && servicePorts.contains("targetPort: metrics"))
        #expect(servicePorts.contains("port: \(port)"), "\(servicePorts)")

        let statefulSet = YAMLLines(documents[1])
        #expect(statefulSet.value("kind") == "StatefulSet")
        let containerPorts = statefulSet.block("ports").trimmed
        #expect(containerPorts == ["- name: metrics", "containerPort: \(port)", "protocol: TCP"], "\(containerPorts)")
        #expect(statefulSet.value("prometheus.io/scrape") == "true")
        #expect(statefulSet.value("prometheus.io/port") == port)
        #expect(statefulSet.value("prometheus.io/path") == "/metrics")
        for (probe, path) in [("startupProbe", "/livez"), ("readinessProbe", "/readyz"), ("livenessProbe", "/livez")] {
            let lines = statefulSet.block(probe).trimmed
            #expect(lines.contains("httpGet:"), "\(probe): \(lines)")
            #expect(lines.contains("path: \(path)"), "\(probe): \(lines)")
            #expect(lines.contains("port: metrics"), "\(probe): \(lines)")
        }

        // The ServiceMonitor scrapes the Service's port by its name.
        let monitor = YAMLLines(try Repository.text("deploy/kubernetes/chimed-servicemonitor.example.yaml"))
        #expect(monitor.block("endpoints").trimmed.contains("- port: metrics"))
        #expect(!(try Repository.text("deploy/kubernetes/kustomization.yaml")).contains("servicemonitor"))
    }

    /// The slot workers' NetworkPolicy admits their metrics port (which has no authentication)
    /// from the scraper and the kubelet only: every ingress rule names where it admits from (one
    /// without `from` admits anyone), on the port the pods listen on.
    @Test func theSlotWorkersMetricsPortAdmitsOnlyTheScraperAndTheKubelet() throws {
        let config = YAMLLines(try Repository.text("deploy/kubernetes/slots/chimed-slots-config.yaml"))
        let listen = try #require(config.value("CHIME_METRICS_LISTEN"))
        let port = try #require(listen.split(separator: ":").last.map(String.init))
        let policy = try Repository.text("deploy/kubernetes/slots/chimed-slots-networkpolicy.yaml")
        #expect(YAMLLines(policy).value("kind") == "NetworkPolicy")
        #expect(YAMLLines(policy).value("policyTypes") == #"["Ingress"]"#)
        let rules = Self.ingressRules(policy)
        #expect(rules.count == 2, "\(rules.map(\.trimmed))")
        for rule in rules {
            #expect(!rule.block("from").lines.isEmpty, "admits anyone: \(rule.trimmed)")
            #expect(rule.block("ports").trimmed == ["- port: \(port)", "protocol: TCP"], "\(rule.trimmed)")
        }
        // Prometheus' pods in its namespace: one entry with both selectors, which must both match
        // (two entries would admit the whole namespace, and such pods anywhere).
        let scraper = try #require(rules.first).block("from").trimmed
        #expect(scraper.first == "- namespaceSelector:", "\(scraper)")
        #expect(scraper.contains("podSelector:") && !scraper.contains("- podSelector:"), "\(scraper)")
        #expect(scraper.contains("app.kubernetes.io/name: prometheus"), "\(scraper)")
        // The kubelet's probes from the nodes' addresses.
        let kubelet = try #require(rules.last).block("from").trimmed
        #expect(kubelet.first == "- ipBlock:" && kubelet.contains { $0.hasPrefix("cidr: ") }, "\(kubelet)")

        // The positive control: the rule it had, a port and no `from`, is seen to admit anyone.
        let open = Self.ingressRules("spec:\n  ingress:\n    - ports:\n        - port: 9464\n")
        #expect(open.count == 1 && open.allSatisfy { $0.block("from").lines.isEmpty })
    }

    /// The rules of a NetworkPolicy's `ingress`, each as its own lines, the `- ` that starts it
    /// made spaces (so that ``YAMLLines/block(_:)`` finds its first key too).
    static func ingressRules(_ text: String) -> [YAMLLines] {
        let lines = YAMLLines(text).block("ingress").lines
        guard let indent = lines.first?.prefix(while: { $0 == " " }).count else { return [] }
        var rules: [[Substring]] = []
        for line in lines {
            let starts = line.prefix { $0 == " " }.count == indent && line.dropFirst(indent).hasPrefix("- ")
            if starts {
                rules.append([Substring(String(repeating: " ", count: indent + 2) + line.dropFirst(indent + 2))])
            } else if !rules.isEmpty {
                rules[rules.count - 1].append(line)
            }
        }
        return rules.map { YAMLLines(lines: $0) }
    }

    @Test func theLoopbackSetupsServeWherePrometheusScrapes() throws {
        let target = try #require(YAMLLines(try Repository.text(Self.prometheusConfig)).value("- targets"))
        let env = try Repository.text("deploy/systemd/chimed.env").split(separator: "\n")
            .first { $0.hasPrefix("CHIME_METRICS_LISTEN=") }
        #expect(env == "CHIME_METRICS_LISTEN=127.0.0.1:9464")
        #expect(target == #"["127.0.0.1:9464"]"#)
        // compose: all of the container's interfaces, published on the host's loopback only.
        let chimed = YAMLLines(try Repository.text("deploy/compose/compose.yaml")).block("chimed")
        #expect(chimed.value("CHIME_METRICS_LISTEN") == "0.0.0.0:9464")
        #expect(chimed.block("ports").trimmed == [#"- "127.0.0.1:${METRICS_PORT:-9464}:9464""#])
    }

    /// The `chime_` names in `expression` that are not metric families chimed exposes, or a
    /// histogram family's `_bucket`, `_sum` or `_count`.
    static func unknownMetrics(in expression: String) -> [String] {
        let families = Dictionary(
            (WorkerMetrics.families + WorkerMetrics.pushFamilies + WorkerMetrics.slotFamilies).map {
                ($0.name, $0.type)
            }
        ) {
            first,
            _ in first
        }
        return expression.matches(of: /chime_[a-z_]+/).map { String($0.output) }.filter { name in
            if families[name] != nil { return false }
            for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
                if families[String(name.dropLast(suffix.count))] == "histogram" { return false }
            }
            return true
        }
    }

    /// Every `expr` of the rules file, folded (`>-`) ones joined into one line.
    static func ruleExpressions() throws -> [String] {
        let lines = try Repository.text(rules).split(separator: "\n", omittingEmptySubsequences: false)
        var expressions: [String] = []
        var i = 0
        while i < lines.count {
            let line = lines[i]
            let indent = line.prefix { $0 == " " }.count
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            i += 1
            guard trimmed.hasPrefix("expr:") else { continue }
            var expression = trimmed.dropFirst("expr:".count).trimmingCharacters(in: .whitespaces)
            if expression.hasPrefix(">") || expression.hasPrefix("|") {
                var parts: [String] = []
                while i < lines.count, lines[i].prefix(while: { $0 == " " }).count > indent {
                    parts.append(lines[i].trimmingCharacters(in: .whitespaces))
                    i += 1
                }
                expression = parts.joined(separator: " ")
            }
            expressions.append(expression)
        }
        return expressions
    }

    /// Every query of the dashboard: the panels' `expr` and the template variables' `query`.
    static func dashboardExpressions() throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: Repository.path(dashboard)))
        var expressions: [String] = []
        func walk(_ value: Any, key: String?) {
            switch value {
            case let text as String where key == "expr" || key == "query":
                if text != "prometheus" { expressions.append(text) }  // a data source variable's type
            case let object as [String: Any]:
                for (key, value) in object { walk(value, key: key) }
            case let array as [Any]:
                for value in array { walk(value, key: key) }
            default:
                break
            }
        }
        walk(try JSONSerialization.jsonObject(with: data), key: nil)
        return expressions
    }
}

/// A YAML file read as lines, comments left out, enough to find a setting: ``value(_:)`` of the
/// first `key: value` line, unquoted, and ``block(_:)``, the lines nested under the first `key:`.
struct YAMLLines {
    let lines: [Substring]

    init(_ text: String) {
        self.init(lines: text.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#") })
    }

    init(lines: [Substring]) { self.lines = lines }

    /// The lines without their indentation.
    var trimmed: [String] { lines.map { $0.trimmingCharacters(in: .whitespaces) } }

    func value(_ key: String) -> String? {
        for line in trimmed where line.hasPrefix(key + ": ") {
            let value = line.dropFirst(key.count + 2).trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.first == "\"", value.last == "\"" { return String(value.dropFirst().dropLast()) }
            return value
        }
        return nil
    }

    func block(_ key: String) -> YAMLLines {
        guard let start = trimmed.firstIndex(of: key + ":") else { return YAMLLines(lines: []) }
        let indent = lines[start].prefix { $0 == " " }.count
        return YAMLLines(lines: Array(lines[(start + 1)...].prefix { $0.prefix { $0 == " " }.count > indent }))
    }
}
