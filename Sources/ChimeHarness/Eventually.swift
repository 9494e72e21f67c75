/// Waits until `condition` holds, checking it every `interval`; returns whether it held before
/// `timeout` passed.
///
/// The one way the tests and the harness wait for something another thread or process does (a
/// message arriving, a line logged, a process ending, a file appearing). The timeout only bounds
/// a failing test: it is never what a test measures or relies on.
public func eventually(
    timeout: Duration = .seconds(20),
    every interval: Duration = .milliseconds(10),
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: interval)
    }
}
