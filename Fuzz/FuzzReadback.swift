// libFuzzer target: "whatever chimed acknowledges, it can read back" (`scripts/fuzz readback`). The
// input is one command payload, checked as every operation on a fresh and a prepared engine; an
// input whose first byte is 0xFF also stands for a generated command (deep nesting, long strings,
// batches: larger than a fuzzer's inputs). The properties are `ReadBackCheck`'s
// (Tests/ChimeWorkerTests/ReadBackCheck.swift, compiled in by scripts/fuzz); every violation is a
// crash that libFuzzer saves with its input. Copy a crash into
// Tests/ChimeWorkerTests/Fixtures/fuzz/readback/ once fixed, so `make test` keeps checking it; for
// an input starting with 0xFF, copy the generated payload its message shows instead (what such an
// input stands for changes with the generator).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzReadbackEntry(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size <= 300_000 else { return 0 }
    if let problem = ReadBackCheck.fuzz(Array(UnsafeBufferPointer(start: data, count: size))) {
        fatalError(problem)
    }
    return 0
}
