import ChimeCore
import Foundation

/// Debian's `prometheus` on a free loopback port, scraping the given targets every second, with
/// its data in a temporary directory; killed when released.
public final class TestPrometheus: Sendable {
    public let port: Int
    let process: ChildProcess
    let directory: TemporaryDirectory

    /// Starts it and waits until it answers `/-/ready`.
    /// - Parameter targets: `HOST:PORT` of each endpoint to scrape, as job `chime`.
    public static func start(scraping targets: [String]) async throws -> TestPrometheus {
        let directory = try TemporaryDirectory(prefix: "chime-prometheus")
        let list = targets.map { "\"\($0)\"" }.joined(separator: ", ")
        let config = """
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            scrape_configs:
              - job_name: chime
                static_configs:
                  - targets: [\(list)]
            """
        let configPath = directory.appending("prometheus.yml")
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        let port = try TestBroker.freePort()
        let process = try ChildProcess(
            "prometheus",
            arguments: [
                "--config.file=\(configPath)", "--storage.tsdb.path=\(directory.appending("data"))",
                "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
            ]
        )
        try process.start()
        let prometheus = TestPrometheus(port: port, process: process, directory: directory)
        let ready = await eventually(timeout: .seconds(30), every: .milliseconds(100)) {
            (try? HTTPProbe.get(port: port, "/-/ready").status) == 200
        }
        guard ready else {
            throw HarnessError("prometheus did not become ready: \(process.standardErrorLines.suffix(20))")
        }
        return prometheus
    }

    private init(port: Int, process: ChildProcess, directory: TemporaryDirectory) {
        self.port = port
        self.process = process
        self.directory = directory
    }

    deinit { process.kill() }

    /// The result vector of an instant PromQL query: each sample's labels and value.
    public func query(_ promql: String) throws -> [(labels: JSONObject, value: String)] {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&+=")
        let encoded = promql.addingPercentEncoding(withAllowedCharacters: allowed) ?? promql
        let response = try HTTPProbe.get(port: port, "/api/v1/query?query=\(encoded)")
        guard response.status == 200, case .object(let o) = try JSON(parsing: Array(response.body.utf8)),
            o["status"] == "success", case .array(let samples)? = o["data"]?.objectValue?["result"]
        else {
            throw HarnessError("query \(promql) failed: \(response.status) \(response.body.prefix(300))")
        }
        return samples.compactMap { sample in
            guard let s = sample.objectValue, case .array(let pair)? = s["value"], pair.count == 2,
                let value = pair[1].stringValue
            else { return nil }
            return (s["metric"]?.objectValue ?? [:], value)
        }
    }
}
