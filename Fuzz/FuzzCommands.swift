// libFuzzer target: command payloads (`scripts/fuzz commands`). The input is one command payload;
// the properties checked are `FuzzChecks.command` (Tests/ChimeWorkerTests/FuzzChecks.swift, compiled
// in by scripts/fuzz), and every violation is a crash that libFuzzer saves with its input. Copy a
// crash into Tests/ChimeWorkerTests/Fixtures/fuzz/commands/ once fixed, so `make test` keeps
// checking it.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCommandsEntry(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size <= 20_000 else { return 0 }
    if let problem = FuzzChecks.command(Array(UnsafeBufferPointer(start: data, count: size))) {
        fatalError(problem)
    }
    return 0
}
