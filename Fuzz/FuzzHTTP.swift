// libFuzzer target: the HTTP server, as the metrics endpoint and as the console configure it
// (`scripts/fuzz http`). The input's first byte says whether the client ends its side of the
// connection after sending (odd) or leaves it open for the server's request time to close (even);
// the rest is sent, as it is, as a request to each of two real HTTPServers on 127.0.0.1 (GET and
// HEAD only; and POST with form bodies), whose libmicrohttpd parses it. The properties are
// `HTTPFuzzCheck.check` (Tests/ChimeHTTPIntegrationTests/HTTPFuzzCheck.swift, compiled in by scripts/fuzz):
// answered or closed within the request time, and still serving afterwards. Only ChimeHTTP is
// instrumented, not libmicrohttpd, so coverage guides little here: Fuzz/http.dict and the seeds in
// Fuzz/corpus/http carry the grammar. Copy a crash into Fuzz/corpus/http once fixed, so that
// `make test` keeps checking it.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPEntry(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size <= 8192 else { return 0 }
    if let problem = HTTPFuzzCheck.check(Array(UnsafeBufferPointer(start: data, count: size))) {
        fatalError(problem)
    }
    return 0
}
