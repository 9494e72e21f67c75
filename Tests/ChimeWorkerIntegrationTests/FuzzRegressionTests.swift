import ChimeCore
import ChimeTestSupport
import Testing

/// What the fuzzers found, checked through chimed; the rest, which needs no broker, is in
/// ChimeWorkerTests (`FuzzRegressionTests` there).
@Suite struct FuzzRegressionTests {
    /// The same through chimed: whatever it acknowledges, it can start again on.
    @Test func chimedRestartsAfterEveryRuleItAcknowledged() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        let reply = try await f.send(
            "d1",
            .schedule,
            #"{"id":"r","fireDate":"2026-07-05T09:00:00Z","rrule":"FREQ=MONTHLY;BYDAY=1SU,-11SA"}"#
        )
        #expect(reply.errorCode == "invalid_argument", "\(JSON.object(reply).text)")
        try await f.ok("d1", .schedule, #"{"id":"fine","after":3600}"#)
        #expect(await f.stopWorker() == .exited(0))
        try await f.startWorker()
        #expect(try await f.list("d1").compactMap { $0["id"]?.stringValue } == ["fine"])
    }
}
