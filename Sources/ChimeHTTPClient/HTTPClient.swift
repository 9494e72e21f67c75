import CCurl
import Dispatch
import Foundation
import Synchronization

/// An HTTPS client for push services (APNs over HTTP/2, FCM, Web Push endpoints), on libcurl's multi
/// interface, for callers that must never block: `submit(_:)` queues a request and returns at once,
/// and the result comes back through `onCompletion`.
///
/// **Threading.** The client runs one thread of its own, which does all of libcurl's work: it waits
/// in `curl_multi_poll` until a socket is ready, a timer is due or `submit` wakes it
/// (`curl_multi_wakeup`). `onCompletion` is called on that thread, once per submitted request, in
/// the order requests complete; it **must not block** (hand the result on and return), because no
/// other request makes progress meanwhile. It may call `submit` and `shutdown` (which then does not
/// wait for the thread). `submit`, `shutdown` and `inFlight` may be called from any thread.
///
/// **Connections** are kept and reused across requests, up to `maxConnectionsPerHost` to a host and
/// `maxTotalConnections` in all. HTTP/2 is used when the server offers it by ALPN (HTTP/1.1
/// otherwise), and requests to one host then share one connection as concurrent streams.
///
/// **Safety.** Only `https`, with the peer's certificate and host name verified; redirects are
/// returned, never followed; no proxy; every connection's address is checked against the
/// configuration's `AddressPolicy` when it is made; the response's body and header block, the
/// connect and the whole request are bounded (`HTTPClientConfiguration`). Header values and bodies
/// are never logged or put in errors.
///
/// **Lifetime.** The client runs until `shutdown()` or its deinit. An `onCompletion` that captures
/// the client keeps it alive until `shutdown()`, which drops the handler.
public final class HTTPClient: Sendable {
    private let shared: Shared

    /// Creates the client and starts its thread.
    /// - Parameters:
    ///   - configuration: limits, trust and the address policy.
    ///   - onCompletion: called on the client's thread with each request's id and result; must not
    ///     block.
    /// - Throws: `.invalidConfiguration` naming the setting out of range, or when libcurl lacks
    ///   HTTP/2 or asynchronous name resolution; `.other` when libcurl cannot be initialised.
    public init(
        configuration: HTTPClientConfiguration,
        onCompletion: @escaping @Sendable (_ id: UInt64, _ result: Result<HTTPResponse, HTTPClientError>) -> Void
    ) throws(HTTPClientError) {
        try check(curlGlobalInitialization, "curl_global_init")
        try Self.checkLibrary()
        try configuration.validate()
        let shared = Shared(configuration: configuration, multi: try MultiHandle(configuration: configuration))
        self.shared = shared
        shared.finished.enter()
        let thread = Thread {
            ClientLoop(shared: shared, onCompletion: onCompletion).run()
        }
        thread.name = "chime-http-client"
        thread.start()
    }

    deinit {
        shared.shutdown()
    }

    /// Hands a request to the client's thread; never blocks on I/O.
    /// - Returns: false, and nothing is queued (`onCompletion` is not called for it), when
    ///   `maxInFlight` requests are in flight or the client is shut down.
    @discardableResult
    public func submit(_ request: HTTPRequest) -> Bool {
        shared.submit(request)
    }

    /// Stops the client: the requests in flight and queued complete with `.cancelled`, the
    /// connections close, the thread ends and `onCompletion` is dropped. Waits for that (at most
    /// 10 s), unless called from `onCompletion`. Idempotent; later `submit`s return false.
    public func shutdown() {
        shared.shutdown()
    }

    /// The requests submitted whose `onCompletion` has not been called yet.
    public var inFlight: Int {
        shared.state.withLock { $0.inFlight }
    }

    /// The client needs HTTP/2 (APNs speaks nothing else) and a resolver that does not block its
    /// thread; Debian's libcurl4-openssl-dev has both.
    private static func checkLibrary() throws(HTTPClientError) {
        let features = chime_version_info().pointee.features
        guard features & CURL_VERSION_HTTP2 != 0 else {
            throw HTTPClientError(.invalidConfiguration, "this libcurl has no HTTP/2 (install libcurl4-openssl-dev)")
        }
        guard features & CURL_VERSION_ASYNCHDNS != 0 else {
            throw HTTPClientError(.invalidConfiguration, "this libcurl resolves names synchronously")
        }
    }
}

/// What the submitting threads and the client's thread share.
private final class Shared: Sendable {
    struct State {
        /// Submitted, not yet taken by the client's thread.
        var queue: [HTTPRequest] = []
        /// Submitted, not yet completed.
        var inFlight = 0
        var stopping = false
    }

    let configuration: HTTPClientConfiguration
    let multi: MultiHandle
    let state = Mutex(State())
    /// Left by the client's thread when it has ended.
    let finished = DispatchGroup()
    /// The client's thread's pthread id (0 before it runs), so `shutdown()` knows when it is called
    /// from `onCompletion`.
    let thread = Atomic<UInt>(0)

    init(configuration: HTTPClientConfiguration, multi: MultiHandle) {
        self.configuration = configuration
        self.multi = multi
    }

    func submit(_ request: HTTPRequest) -> Bool {
        let wake = state.withLock { state -> Bool? in
            guard !state.stopping, state.inFlight < configuration.maxInFlight else { return nil }
            state.inFlight += 1
            state.queue.append(request)
            // A non-empty queue has been signalled already, and the thread takes it whole.
            return state.queue.count == 1
        }
        guard let wake else { return false }
        if wake {
            multi.wakeup()
        }
        return true
    }

    func shutdown() {
        let first = state.withLock { state in
            defer { state.stopping = true }
            return !state.stopping
        }
        if first {
            multi.wakeup()
        }
        guard pthread_equal(pthread_self(), thread.load(ordering: .acquiring)) == 0 else {
            return  // from onCompletion: the thread ends when it returns
        }
        _ = finished.wait(timeout: .now() + .seconds(10))
    }

    /// Takes the queued requests, and whether the client is stopping.
    func take() -> (requests: [HTTPRequest], stopping: Bool) {
        state.withLock { state in
            defer { state.queue.removeAll() }
            return (state.queue, state.stopping)
        }
    }

    /// Counts a request as completed; call before its `onCompletion`, so that it may submit again.
    func completed() {
        state.withLock { $0.inFlight -= 1 }
    }
}

/// The one owner of the multi handle (`CURLM *`), which holds the connections and their cache.
///
/// `@unchecked Sendable` because the handle is shared with the submitting threads, which only call
/// `curl_multi_wakeup`, the one multi call documented as safe from any thread while another uses
/// the handle. Everything else is called by the client's thread alone. The handle is cleaned up in
/// deinit, after the client's thread (which holds a reference) has removed every easy handle and
/// ended.
private final class MultiHandle: @unchecked Sendable {
    let handle: UnsafeMutableRawPointer

    init(configuration: HTTPClientConfiguration) throws(HTTPClientError) {
        guard let handle = curl_multi_init() else { throw HTTPClientError(.other, "curl_multi_init failed") }
        self.handle = handle
        try set(CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX), "CURLMOPT_PIPELINING")
        try set(CURLMOPT_MAX_HOST_CONNECTIONS, configuration.maxConnectionsPerHost, "CURLMOPT_MAX_HOST_CONNECTIONS")
        try set(CURLMOPT_MAX_TOTAL_CONNECTIONS, configuration.maxTotalConnections, "CURLMOPT_MAX_TOTAL_CONNECTIONS")
        try set(CURLMOPT_MAXCONNECTS, configuration.maxTotalConnections, "CURLMOPT_MAXCONNECTS")
    }

    deinit {
        curl_multi_cleanup(handle)
    }

    private func set(_ option: CURLMoption, _ value: Int, _ name: String) throws(HTTPClientError) {
        let code = chime_multi_setopt_long(handle, option, value)
        guard code == CURLM_OK else {
            throw HTTPClientError(.other, "\(name): \(String(cString: curl_multi_strerror(code)))")
        }
    }

    func wakeup() {
        curl_multi_wakeup(handle)
    }
}

/// The client's thread: starts the submitted requests, drives libcurl, reports what completes.
/// Thread-confined; it owns the transfers and the completion handler, and drops both when it ends.
private final class ClientLoop {
    private let shared: Shared
    private let onCompletion: @Sendable (UInt64, Result<HTTPResponse, HTTPClientError>) -> Void
    /// The transfers added to the multi handle, by easy handle.
    private var running: [UnsafeMutableRawPointer: Transfer] = [:]

    init(shared: Shared, onCompletion: @escaping @Sendable (UInt64, Result<HTTPResponse, HTTPClientError>) -> Void) {
        self.shared = shared
        self.onCompletion = onCompletion
    }

    private var multi: UnsafeMutableRawPointer { shared.multi.handle }

    func run() {
        shared.thread.store(pthread_self(), ordering: .releasing)
        defer { shared.finished.leave() }
        while true {
            let (requests, stopping) = shared.take()
            if stopping {
                requests.forEach { complete($0.id, .failure(Self.cancelled)) }
                break
            }
            requests.forEach(start)
            var active: Int32 = 0
            curl_multi_perform(multi, &active)
            reportFinished()
            // Returns when a socket is ready, libcurl's next timer is due, or submit/shutdown woke it;
            // the 1 s cap only bounds the cost of a wake-up that could be missed.
            curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        for (easy, transfer) in running {
            curl_multi_remove_handle(multi, easy)
            complete(transfer.id, .failure(Self.cancelled))
        }
        running.removeAll()
    }

    private static let cancelled = HTTPClientError(.cancelled, "the client was shut down")

    private func start(_ request: HTTPRequest) {
        let transfer: Transfer
        do {
            transfer = try Transfer(request, configuration: shared.configuration)
        } catch {
            complete(request.id, .failure(error))
            return
        }
        let added = curl_multi_add_handle(multi, transfer.easy)
        guard added == CURLM_OK else {
            let why = "curl_multi_add_handle: \(String(cString: curl_multi_strerror(added)))"
            complete(request.id, .failure(HTTPClientError(.other, why)))
            return
        }
        running[transfer.easy] = transfer
    }

    /// Completes every transfer libcurl has finished.
    private func reportFinished() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result  // read before the handle is removed
            guard let transfer = running.removeValue(forKey: easy) else { continue }
            curl_multi_remove_handle(multi, easy)
            complete(transfer.id, transfer.result(code))
        }
    }

    private func complete(_ id: UInt64, _ result: Result<HTTPResponse, HTTPClientError>) {
        shared.completed()
        onCompletion(id, result)
    }
}
