import ChimeCore
import ChimeHTTP
import Synchronization

/// Where the loop hands its numbers (``WorkerStateMachine/Action/exportMetrics(_:)``).
public protocol MetricsSink: AnyObject, Sendable {
    func update(_ metrics: WorkerMetrics)
    /// The loop has exited.
    func stopped()
}

/// `--metrics-listen`: `GET /metrics` (Prometheus), `/livez` and `/readyz`, answered on the HTTP
/// server's own thread from the numbers the loop last handed over, never on the loop thread.
public final class MetricsEndpoint: MetricsSink {
    enum State {
        /// Reading the data directory: alive, not ready.
        case recovering(WorkerMetrics)
        /// The loop hands numbers over every ``WorkerStateMachine/Policy/metricsInterval``.
        case running(WorkerMetrics, updated: ContinuousClock.Instant)
        case stopped(WorkerMetrics)
    }

    /// After this long without numbers from the loop, `/livez` says it is stuck.
    public static let stallLimit: Duration = .seconds(15)
    /// How often the loop hands numbers over.
    public static let interval: Int64 = 250

    /// The numbers, shared by the loop thread (writer) and the HTTP thread (reader).
    final class Shared: Sendable {
        let state: Mutex<State>
        init(_ state: State) { self.state = Mutex(state) }
    }

    let shared: Shared
    private let server: HTTPServer

    /// Listens on `address` (`HOST:PORT`) at once, before recovery, so that `/livez` answers
    /// while a large data directory is read.
    /// - Parameter initial: the numbers to show until the loop runs (nothing counted yet).
    public init(listen address: String, initial: WorkerMetrics) throws(WorkerError) {
        let shared = Shared(.recovering(initial))
        self.shared = shared
        do throws(HTTPError) {
            server = try HTTPServer(listen: address) { request in Self.respond(to: request, shared: shared) }
        } catch {
            throw WorkerError("--metrics-listen: \(error.message)")
        }
    }

    /// The port it listens on.
    public var port: UInt16 { server.port }

    public func update(_ metrics: WorkerMetrics) {
        shared.state.withLock { $0 = .running(metrics, updated: .now) }
    }

    public func stopped() {
        shared.state.withLock {
            switch $0 {
            case .recovering(let m), .running(let m, _), .stopped(let m): $0 = .stopped(m)
            }
        }
    }

    static func respond(to request: HTTPRequest, shared: Shared) -> HTTPResponse {
        let current = shared.state.withLock { $0 }
        let metrics: WorkerMetrics
        var problem: String?
        switch current {
        case .recovering(let m):
            metrics = m
            problem = "recovering the data directory"
        case .running(let m, let updated):
            metrics = m
            let age = ContinuousClock.now - updated
            if age > stallLimit { problem = "the worker's loop has not run for \(age.components.seconds) s" }
        case .stopped(let m):
            metrics = m
            problem = "stopped"
        }
        switch request.path {
        case "/metrics":
            var numbers = metrics
            if let problem { numbers.notReady.append(problem) }
            return HTTPResponse(
                status: 200,
                contentType: "text/plain; version=0.0.4; charset=utf-8",
                numbers.prometheusText
            )
        case "/livez":
            // Alive while recovering; not when the loop is stuck or gone.
            if case .recovering = current { return HTTPResponse(status: 200, "ok: recovering\n") }
            return problem.map { HTTPResponse(status: 503, "\($0)\n") } ?? HTTPResponse(status: 200, "ok\n")
        case "/readyz":
            let reasons = (problem.map { [$0] } ?? []) + metrics.notReady
            if reasons.isEmpty { return HTTPResponse(status: 200, "ready\n") }
            return HTTPResponse(status: 503, reasons.joined(separator: "\n") + "\n")
        default:
            return HTTPResponse(status: 404, "not found: try /metrics, /livez or /readyz\n")
        }
    }
}
