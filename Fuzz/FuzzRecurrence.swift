// libFuzzer target: RRULE parsing and expansion (`scripts/fuzz recurrence`). The input is text
// described at `FuzzChecks.recurrence` (Tests/ChimeWorkerTests/FuzzChecks.swift, compiled in by
// scripts/fuzz): a rule, a start, a zone, a search start. A violated property is a crash and a call
// that does not return within the per-input timeout a hang; libFuzzer saves the input of either.
// Copy it into Tests/ChimeWorkerTests/Fixtures/fuzz/recurrence/ once fixed.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecurrenceEntry(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size <= 4096 else { return 0 }
    if let problem = FuzzChecks.recurrence(
        String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    ) {
        fatalError(problem)
    }
    return 0
}
