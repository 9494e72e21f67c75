import ChimeCore
import ChimeTestSupport
import Testing

/// Typed replies write exactly the JSON the protocol shows, members in order, and read back as
/// the same values.
@Suite struct ReplyResultTests {
    /// The result of each kind of command, as its bytes.
    @Test func eachResultIsWrittenAsTheProtocolShowsIt() throws {
        var h = Harness()
        let cases: [(Operation, String, String)] = [
            (
                .schedule, #"{"id":"a","after":90,"alertBody":"Hi","enabled":false,"badge":2}"#,
                #"{"scheduled":[{"id":"a","nextFireDate":null}],"replaced":0}"#
            ),
            (
                .schedule, #"{"notifications":[{"id":"b","fireDate":"2026-12-01T11:00:00Z"}],"replace":{"ids":["a"]}}"#,
                #"{"scheduled":[{"id":"b","nextFireDate":"2026-12-01T11:00:00Z"}],"replaced":1}"#
            ),
            (
                .schedule, #"{"id":"c","fireDate":"2026-12-01T12:00:00Z","repeatInterval":"day","enabled":false}"#,
                #"{"scheduled":[{"id":"c","nextFireDate":null}],"replaced":0}"#
            ),
            (
                .list, #"{"limit":1}"#,
                #"{"notifications":[{"id":"b","fireDate":"2026-12-01T11:00:00Z","nextFireDate":"2026-12-01T11:00:00Z","enabled":true,"firedCount":0,"lastFiredAt":null,"createdAt":"2026-12-01T10:00:00Z","updatedAt":"2026-12-01T10:00:00Z"}],"cursor":"b"}"#
            ),
            (
                .list, #"{"cursor":"b"}"#,
                #"{"notifications":[{"id":"c","fireDate":"2026-12-01T12:00:00Z","repeatInterval":"day","enabled":false,"nextFireDate":null,"firedCount":0,"lastFiredAt":null,"createdAt":"2026-12-01T10:00:00Z","updatedAt":"2026-12-01T10:00:00Z"}],"cursor":null}"#
            ),
            (.pause, #"{"ids":["b"]}"#, #"{"paused":["b"]}"#),
            (.resume, #"{"all":true}"#, #"{"resumed":["b","c"]}"#),
            (.cancel, #"{"ids":["x"]}"#, #"{"cancelled":[]}"#),
            (.snooze, #"{"id":"b","after":60}"#, #"{"id":"b","nextFireDate":"2026-12-01T10:01:00Z"}"#),
            (
                .device, #"{"timeZone":"Asia/Shanghai","quietHours":{"start":"22:00","end":"07:00"}}"#,
                #"{"deviceId":"d","timeZone":"Asia/Shanghai","badge":0,"quietHours":{"start":"22:00","end":"07:00"},"pending":2,"receipts":false,"history":true}"#
            ),
            (
                .device, #"{"quietHours":null}"#,
                #"{"deviceId":"d","timeZone":"Asia/Shanghai","badge":0,"quietHours":null,"pending":2,"receipts":false,"history":true}"#
            ),
            (
                .preview, #"{"id":"c","count":2}"#,
                #"{"fireDates":["2026-12-01T12:00:00Z","2026-12-02T12:00:00Z"]}"#
            ),
            (.cancel, #"{"all":true}"#, #"{"cancelled":["b","c"]}"#),
            (
                .device, #"{"receipts":true}"#,
                #"{"deviceId":"d","timeZone":"Asia/Shanghai","badge":0,"quietHours":null,"pending":0,"receipts":true,"history":true}"#
            ),
            (
                .ack, #"{"fireIds":["x@2026-12-01T10:00:00Z"]}"#,
                #"{"acknowledged":0,"unknown":["x@2026-12-01T10:00:00Z"]}"#
            ),
            (.inbox, #"{}"#, #"{"deliveries":[],"cursor":null,"dropped":0}"#),
            (.history, #"{}"#, #"{"deliveries":[]}"#),
        ]
        for (op, payload, expected) in cases {
            let reply = h.send("d", op, payload)
            let result = try #require(reply["result"]?.objectValue, "\(op.rawValue) \(payload): \(reply)")
            #expect(JSON.object(result).text == expected, "\(op.rawValue) \(payload)")
            // Read back, then written again: the same bytes.
            let typed = try ReplyResult(op: op, json: result)
            #expect(JSON.object(typed.json).text == expected, "\(op.rawValue) \(payload) read back")
            #expect(!typed.isDuplicate)
            // A reply's bytes, written straight, are its object's.
            for requestId in [nil, "r\"1"] {
                let direct = Reply(op: op.rawValue, requestId: requestId, outcome: .success(typed))
                #expect(direct.bytes == JSON.object(direct.json).bytes, "\(op.rawValue) \(payload)")
            }
        }
    }

    /// Every shape of a `schedule` result, written straight into bytes, is what its object writes.
    @Test func aScheduleReplyWrittenStraightIsItsObject() {
        let results: [ReplyResult.Scheduled] = [
            .init(scheduled: [], replaced: 0),
            .init(scheduled: [.init(id: "a", nextFireDate: nil)], replaced: 3),
            .init(
                scheduled: [
                    .init(id: #"q"uo\te é"#, nextFireDate: Instant(milliseconds: 1_796_119_200_123)),
                    .init(id: "\u{1}", nextFireDate: Instant(milliseconds: -62_135_596_800_000)),
                ],
                replaced: 1000
            ),
        ]
        for s in results {
            let reply = Reply(op: "schedule", requestId: "r", outcome: .success(.scheduled(s)))
            #expect(reply.bytes == JSON.object(reply.json).bytes, "\(s)")
        }
        let refusal = Reply(op: "schedule", requestId: nil, outcome: .failure(ChimeError(.invalidArgument, "x")))
        #expect(refusal.bytes == JSON.object(refusal.json).bytes)
    }

    @Test func aRedeliveredCommandIsADuplicate() throws {
        let engine = Engine()
        var random = SplitMix64(seed: 1)
        let now = instant("2026-12-01T10:00:00Z")
        guard
            case .success(var request) = CommandDecoder().decode(
                deviceId: "d",
                op: .cancel,
                payload: Array(#"{"all":true}"#.utf8)
            )
        else {
            Issue.record("cancel does not decode")
            return
        }
        request.key = CommandKey(7)
        // Nothing to cancel: answered at once, and not remembered.
        guard case .reply(let first) = engine.decide(request, now: now, random: &random) else {
            Issue.record("an empty cancel was journaled")
            return
        }
        #expect(first.outcome == Result<ReplyResult, ChimeError>.success(.cancelled(ids: [])))
        #expect(!first.isDuplicate)
        engine.apply(.device(deviceId: "d", at: now, update: DeviceUpdate(badge: 1)), key: CommandKey(7))
        guard case .reply(let again) = engine.decide(request, now: now, random: &random) else {
            Issue.record("a redelivered command was journaled")
            return
        }
        #expect(again.isDuplicate)
        #expect(JSON.object(again.json).text == #"{"ok":true,"op":"cancel","result":{"duplicate":true}}"#)
        #expect(try ReplyResult(op: .cancel, json: ["duplicate": true]) == .duplicate)
    }

    @Test func typedValuesRoundTrip() throws {
        let values: [(Operation, ReplyResult)] = [
            (
                .schedule,
                .scheduled(
                    ReplyResult.Scheduled(
                        scheduled: [ReplyResult.NextFire(id: "a", nextFireDate: instant("2026-12-01T10:00:00.250Z"))],
                        replaced: 3
                    )
                )
            ),
            (.cancel, .cancelled(ids: ["a", "b"])),
            (.pause, .paused(ids: [])),
            (.resume, .resumed(ids: ["a"])),
            (.snooze, .snoozed(ReplyResult.NextFire(id: "a", nextFireDate: nil))),
            (
                .device,
                .device(
                    ReplyResult.DeviceStatus(
                        deviceId: "d",
                        timeZone: Zone(identifier: "Europe/Paris"),
                        badge: 4,
                        quietHours: QuietHours(
                            start: TimeOfDay(hour: 22, minute: 0),
                            end: TimeOfDay(hour: 7, minute: 30)
                        ),
                        pending: 9
                    )
                )
            ),
            (
                .preview,
                .previewed(
                    fireDates: [instant("2026-12-01T10:00:00Z"), instant("2027-01-01T00:00:00.001Z")],
                    calendarDates: nil
                )
            ),
            (
                .preview,
                .previewed(fireDates: [instant("2026-09-25T01:00:00Z")], calendarDates: ["8-15"])
            ),
            (.list, .listed(ReplyResult.ListPage(notifications: [], cursor: nil))),
            (.schedule, .duplicate),
        ]
        for (op, value) in values {
            #expect(try ReplyResult(op: op, json: value.json) == value, "\(op.rawValue)")
        }
    }

    @Test func aResultThatIsNotTheOperationsIsRefused() {
        #expect(throws: ChimeError.self) { try ReplyResult(op: .cancel, json: ["paused": []]) }
        #expect(throws: ChimeError.self) { try ReplyResult(op: .list, json: ["notifications": [["id": "x"]]]) }
    }
}
