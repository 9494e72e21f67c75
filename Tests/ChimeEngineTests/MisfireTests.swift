import ChimeCore
import ChimeTestSupport
import Testing

/// What happens to occurrences that fall due while the broker is unreachable.
@Suite struct MisfireTests {
    /// A notification every minute from 10:01, then an outage from 10:00:30 to 10:05:30.
    func outage(_ policy: String) -> [JSONObject] {
        var h = Harness()
        h.ok(
            "d1",
            .schedule,
            #"{"id":"m","fireDate":"2026-12-01T10:01:00Z","repeatInterval":"minute","misfire":"\#(policy)"}"#
        )
        h.engine.setConnected(false)
        _ = h.advance(to: "2026-12-01T10:05:30Z")
        h.engine.setConnected(true)
        return h.advance(to: "2026-12-01T10:05:30Z")
    }

    @Test func coalesceSendsTheNewestWithTheCountOfTheOthers() {
        let d = outage("coalesce")
        #expect(d.count == 1)
        #expect(d[0]["occurrenceDate"] == "2026-12-01T10:05:00Z")
        #expect(d[0]["occurrence"] == 5)
        #expect(d[0]["missed"] == 4)
        #expect(d[0]["late"] == true)
    }

    @Test func skipSendsNothingAndKeepsTheNextOne() {
        var h = Harness()
        h.ok(
            "d1",
            .schedule,
            #"{"id":"m","fireDate":"2026-12-01T10:01:00Z","repeatInterval":"minute","misfire":"skip"}"#
        )
        h.engine.setConnected(false)
        _ = h.advance(to: "2026-12-01T10:05:30Z")
        h.engine.setConnected(true)
        #expect(h.advance(to: "2026-12-01T10:05:30Z").isEmpty)
        #expect(h.list("d1").first?["nextFireDate"] == "2026-12-01T10:06:00Z")
        let next = h.advance(to: "2026-12-01T10:06:00Z")
        #expect(next.map { $0["occurrence"] } == [6])
        #expect(next.first?["late"] == false)
        // The skipped ones were journaled, so a restart does not bring them back.
        var restarted = h
        restarted.engine = h.replayed()
        #expect(restarted.advance(to: "2026-12-01T10:06:30Z").isEmpty)
    }

    @Test func allSendsEveryMissedOccurrenceOldestFirst() {
        let d = outage("all")
        #expect(d.map { $0["occurrence"] } == [1, 2, 3, 4, 5])
        #expect(d.allSatisfy { $0["late"] == true && $0["missed"] == 0 })
    }

    @Test func allIsCappedAtOneThousand() {
        var h = Harness(configuration: EngineConfiguration(minRepeatSeconds: 1, maxPendingPerDevice: 10))
        h.ok(
            "d1",
            .schedule,
            #"{"id":"s","fireDate":"2026-12-01T10:00:01Z","repeatInterval":"second","misfire":"all"}"#
        )
        h.engine.setConnected(false)
        _ = h.advance(seconds: 5000)
        h.engine.setConnected(true)
        let d = h.advance(seconds: 0)
        #expect(d.count == 1000)
        #expect(d.last?["occurrence"] == 5000)
    }

    @Test func countIsRespectedAndTheLastIsFlagged() {
        var h = Harness(configuration: EngineConfiguration(minRepeatSeconds: 1, maxPendingPerDevice: 10))
        h.ok("d1", .schedule, #"{"id":"r","after":1,"repeatInterval":"second","count":3}"#)
        let d = h.advance(seconds: 10)
        #expect(d.map { $0["occurrence"] } == [1, 2, 3])
        #expect(d.map { $0["last"] } == [false, false, true])
        #expect(h.list("d1").isEmpty)
    }

    @Test func minRepeatSecondsIsEnforced() {
        var h = Harness()
        #expect(h.errorCode("d1", .schedule, #"{"after":1,"repeatInterval":"second"}"#) == "invalid_argument")
        h.ok("d1", .schedule, #"{"after":1,"repeatInterval":"minute"}"#)
    }
}
