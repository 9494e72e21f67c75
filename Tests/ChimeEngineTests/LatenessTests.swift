import ChimeCore
import ChimeTestSupport
import Testing

/// Whose doing a delivery's lateness is (``Lateness``): the rule itself, then the engine deciding
/// it as it fires and the worker's policy counting each kind in its own histogram.
@Suite struct LatenessTests {
    /// Milliseconds from 10:00, the time of these cases' commands.
    static let t0: Int64 = 1_796_119_200_000

    @Test(
        arguments: [
            // Due after the command, while delivering: the worker's, however late.
            (t0 + 5_000, t0 + 5_000, t0, t0 - 60_000, false, Lateness.worker),
            // A one-shot dated before its command (2020): expected, even when delivering all along.
            (1_577_836_800_000, 1_577_836_800_000, t0, .min, false, .scheduledInThePast),
            // Its lead time put it before the command, though its occurrence is after.
            (t0 + 600_000 - 3_600_000, t0 + 600_000, t0 + 3_600_000, t0 - 60_000, false, .scheduledInThePast),
            // Due while the engine could not deliver: a catch-up.
            (t0 + 5_000, t0 + 5_000, t0, t0 + 10_000, false, .catchUp),
            // Due the very moment delivering resumed: the worker's.
            (t0 + 10_000, t0 + 10_000, t0, t0 + 10_000, false, .worker),
            // Held by quiet hours.
            (t0 + 5_000, t0 + 5_000, t0, t0 - 60_000, true, .quietHours),
        ] as [(Int64, Int64, Int64, Int64, Bool, Lateness)]
    )
    func theRule(
        due: Int64,
        occurrence: Int64,
        pendingFrom: Int64,
        deliveringSince: Int64,
        deferred: Bool,
        expected: Lateness
    ) {
        let kind = Lateness.of(
            due: due,
            occurrence: occurrence,
            pendingFrom: pendingFrom,
            deliveringSince: deliveringSince,
            deferred: deferred
        )
        #expect(kind == expected)
        #expect(kind.isExpected == (expected != .worker))
    }

    /// The kind of each delivery the worker published, by notification id.
    func kinds(_ h: Harness) -> [String: Lateness] {
        var kinds: [String: Lateness] = [:]
        for publication in h.worker.transport.published {
            guard case .delivery(_, let fireId, _, let kind, _) = publication.message.purpose else { continue }
            kinds[String(fireId.prefix { $0 != "@" })] = kind
        }
        return kinds
    }

    func stats(_ h: Harness) -> WorkerStats { h.worker.machine.metrics(now: h.now).stats }

    @Test func aOneShotInThePastIsExpectedLatenessAndANewOneIsTheWorkers() {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"old","fireDate":"2020-01-01T00:00:00Z"}"#)
        let old = h.advance(seconds: 0)
        #expect(old.map { $0["id"] } == ["old"])
        #expect(old.first?["late"] == true)
        #expect(kinds(h) == ["old": .scheduledInThePast])
        var s = stats(h)
        #expect(s.lateness.total == 0)
        #expect(s.lateDeliveries == 0)
        #expect(s.expectedLateness.total == 1)
        // Nearly seven years, measured, but apart.
        #expect(s.expectedLateness.maximumMilliseconds > 6 * 365 * 86_400_000)

        h.ok("d1", .schedule, #"{"id":"new","after":1}"#)
        #expect(h.advance(seconds: 1).map { $0["id"] } == ["new"])
        #expect(kinds(h)["new"] == .worker)
        s = stats(h)
        #expect(s.lateness.total == 1)
        #expect(s.lateness.maximumMilliseconds == 0)
        #expect(s.expectedLateness.total == 1)
        #expect(s.json["expectedLateness"]?.objectValue?["count"] == 1)
    }

    @Test func whatFellDueWhileTheBrokerWasAwayIsACatchUp() throws {
        var h = Harness()
        h.ok(
            "d1",
            .schedule,
            #"{"id":"m","fireDate":"2026-12-01T10:01:00Z","repeatInterval":"minute","misfire":"all"}"#
        )
        #expect(h.advance(to: "2026-12-01T10:01:00Z").count == 1)
        try h.worker.step(.mqtt(.disconnected(reasonCode: 0)))
        #expect(h.advance(to: "2026-12-01T10:03:30Z").isEmpty)
        try h.worker.online()
        let caughtUp = h.advance(seconds: 0)
        #expect(caughtUp.map { $0["occurrence"] } == [2, 3])
        // After the outage, the next one is the worker's again.
        #expect(h.advance(to: "2026-12-01T10:04:00Z").map { $0["occurrence"] } == [4])
        let kinds = h.worker.transport.published.compactMap { publication -> Lateness? in
            guard case .delivery(_, _, _, let kind, _) = publication.message.purpose else { return nil }
            return kind
        }
        #expect(kinds == [.worker, .catchUp, .catchUp, .worker])
        let s = stats(h)
        #expect(s.lateness.total == 2)
        #expect(s.expectedLateness.total == 2)
        #expect(s.lateDeliveries == 0)
    }

    @Test func aDeliveryHeldByQuietHoursIsExpectedLateness() {
        var h = Harness(now: "2026-12-01T21:00:00Z")
        h.ok("d1", .device, #"{"timeZone":"UTC","quietHours":{"start":"22:00","end":"07:00"}}"#)
        h.ok("d1", .schedule, #"{"id":"a","fireDate":"2026-12-01T23:00:00Z"}"#)
        let morning = h.advance(to: "2026-12-02T07:00:00Z")
        #expect(morning.first?["deferred"] == true)
        #expect(kinds(h) == ["a": .quietHours])
        #expect(stats(h).lateness.total == 0)
        #expect(stats(h).expectedLateness.total == 1)
    }
}
