import ChimeCore
import ChimeTestSupport
import Testing

@Suite struct EngineSchedulingTests {
    @Test func oneShotAfterFiresWithTheDeliveryFields() {
        var h = Harness()
        let result = h.ok(
            "d1",
            .schedule,
            #"{"id":"med","after":90,"alertBody":"Take your medicine","alertTitle":"Med","soundName":"default","userInfo":{"tag":"med"},"requestId":"r1"}"#
        )
        #expect(result["scheduled"] == [["id": "med", "nextFireDate": "2026-12-01T10:01:30Z"]])
        #expect(result["replaced"] == 0)
        #expect(h.advance(seconds: 89).isEmpty)
        let deliveries = h.advance(seconds: 1)
        #expect(deliveries.count == 1)
        let d = deliveries[0]
        #expect(d["deviceId"] == "d1")
        #expect(d["id"] == "med")
        #expect(d["fireId"] == "med@2026-12-01T10:01:30Z")
        #expect(d["occurrenceDate"] == "2026-12-01T10:01:30Z")
        #expect(d["fireDate"] == "2026-12-01T10:01:30Z")
        #expect(d["firedAt"] == "2026-12-01T10:01:30.000Z")
        #expect(d["occurrence"] == 1)
        #expect(d["last"] == true)
        #expect(d["late"] == false)
        #expect(d["missed"] == 0)
        #expect(d["deferred"] == false)
        #expect(d["alertBody"] == "Take your medicine")
        #expect(d["alertTitle"] == "Med")
        #expect(d["soundName"] == "default")
        #expect(d["userInfo"] == ["tag": "med"])
        #expect(d["badge"] == nil && d["alertAction"] == nil && d["hasAction"] == nil)
        // Acknowledged, so it is gone.
        #expect(h.list("d1").isEmpty)
        #expect(h.engine.pendingCount == 0)
    }

    @Test func deliveriesAreValidJSONWhateverTheContent() throws {
        var h = Harness()
        h.ok(
            "d1",
            .schedule,
            #"{"id":"q\"uo\\te é","after":1,"alertTitle":"line\nbreak","alertBody":"tab\t😀","alertAction":"Open","hasAction":false,"soundName":"default","category":"c","badge":3,"userInfo":{"k":[1,{"n":null}],"s":"\u0001"}}"#
        )
        let d = try #require(h.advance(seconds: 1).first)
        #expect(d["id"] == "q\"uo\\te é")
        #expect(d["fireId"] == .string("q\"uo\\te é@\(d["occurrenceDate"]?.stringValue ?? "")"))
        #expect(d["alertTitle"] == "line\nbreak")
        #expect(d["alertBody"] == "tab\t😀")
        #expect(d["alertAction"] == "Open")
        #expect(d["hasAction"] == false)
        #expect(d["category"] == "c")
        #expect(d["badge"] == 3)
        #expect(d["userInfo"] == ["k": [1, ["n": nil]], "s": "\u{01}"])
        #expect(d["firedAt"] == "2026-12-01T10:00:01.000Z")
    }

    @Test func absoluteFireDateAndPastOneShotFiresAtOnce() {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"a","fireDate":"2026-12-01T12:00:00+02:00"}"#)  // 10:00Z: now
        h.ok("d1", .schedule, #"{"id":"b","fireDate":"2026-11-30T10:00:00Z"}"#)  // yesterday
        let deliveries = h.advance(seconds: 0)
        #expect(Set(deliveries.compactMap { $0["id"]?.stringValue }) == ["a", "b"])
        let b = deliveries.first { $0["id"] == "b" }!
        #expect(b["late"] == true)
        #expect(b["missed"] == 0)
    }

    @Test func cancelledBeforeItsTimeNeverArrives() {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"x","after":10,"userInfo":{"k":"v"}}"#)
        h.ok("d1", .schedule, #"{"id":"y","after":10,"userInfo":{"k":"w"}}"#)
        h.ok("d1", .schedule, #"{"id":"z","after":10}"#)
        #expect(h.ok("d1", .cancel, #"{"match":{"userInfo":{"k":"v"}}}"#)["cancelled"] == ["x"])
        #expect(h.ok("d1", .cancel, #"{"ids":["y","nope"]}"#)["cancelled"] == ["y"])
        #expect(h.ok("d1", .cancel, #"{"ids":["nope"]}"#)["cancelled"] == [])
        let delivered = h.advance(seconds: 60)
        #expect(delivered.map { $0["id"] } == ["z"])
        h.ok("d1", .schedule, #"{"id":"q","after":10}"#)
        #expect(h.ok("d1", .cancel, #"{"all":true}"#)["cancelled"] == ["q"])
        #expect(h.advance(seconds: 60).isEmpty)
    }

    @Test func batchIsAtomicAndReplaceCancelsFirst() {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"r1","after":100,"userInfo":{"kind":"recall"}}"#)
        h.ok("d1", .schedule, #"{"id":"r2","after":100,"userInfo":{"kind":"recall"}}"#)
        h.ok("d1", .schedule, #"{"id":"other","after":100}"#)
        // One bad member rejects the whole batch, naming it.
        let reply = h.send(
            "d1",
            .schedule,
            #"{"notifications":[{"id":"n1","after":10},{"id":"n2","fireDate":"soon"}],"replace":{"match":{"userInfo":{"kind":"recall"}}}}"#
        )
        #expect(reply["ok"] == false)
        #expect(reply["error"]?.objectValue?["field"] == "notifications[1].fireDate")
        #expect(h.list("d1").count == 3)
        let result = h.ok(
            "d1",
            .schedule,
            #"{"notifications":[{"id":"n1","after":10},{"id":"n2","after":20},{"id":"n3","after":30}],"replace":{"match":{"userInfo":{"kind":"recall"}}}}"#
        )
        #expect(result["replaced"] == 2)
        #expect(result["scheduled"]?.arrayValue?.count == 3)
        #expect(h.list("d1").compactMap { $0["id"]?.stringValue } == ["n1", "n2", "n3", "other"])
    }

    @Test func generatedIdsAreUUIDs() {
        var h = Harness()
        let result = h.ok("d1", .schedule, #"{"after":10}"#)
        let id = result["scheduled"]?.arrayValue?.first?.objectValue?["id"]?.stringValue ?? ""
        #expect(id.count == 36 && id.split(separator: "-").count == 5)
    }

    @Test func quotaPerDevice() {
        var h = Harness(configuration: EngineConfiguration(minRepeatSeconds: 60, maxPendingPerDevice: 2))
        h.ok("d1", .schedule, #"{"id":"a","after":10}"#)
        h.ok("d1", .schedule, #"{"id":"b","after":10}"#)
        #expect(h.errorCode("d1", .schedule, #"{"id":"c","after":10}"#) == "quota_exceeded")
        // Replacing an existing id does not count twice; another device has its own quota.
        h.ok("d1", .schedule, #"{"id":"b","after":20}"#)
        h.ok("d2", .schedule, #"{"id":"c","after":10}"#)
        #expect(h.list("d1").count == 2)
    }

    @Test func listPagesInIdOrder() {
        var h = Harness()
        for i in 0..<25 {
            h.ok(
                "d1",
                .schedule,
                #"{"id":"n\#(String(format: "%02d", i))","after":100,"userInfo":{"even":\#(i % 2 == 0)}}"#
            )
        }
        var ids: [String] = []
        var cursor: String?
        repeat {
            let payload = cursor.map { #"{"limit":10,"cursor":"\#($0)"}"# } ?? #"{"limit":10}"#
            let page = h.ok("d1", .list, payload)
            ids += page["notifications"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
            cursor = page["cursor"]?.stringValue
        } while cursor != nil
        #expect(ids == (0..<25).map { String(format: "n%02d", $0) })
        let evens = h.ok("d1", .list, #"{"match":{"userInfo":{"even":true}}}"#)
        #expect(evens["notifications"]?.arrayValue?.count == 13)
        let row = h.list("d1")[0]
        #expect(row["fireDate"] == "2026-12-01T10:01:40Z")
        #expect(row["after"] == nil)
        #expect(row["nextFireDate"] == "2026-12-01T10:01:40Z")
        #expect(row["enabled"] == true && row["firedCount"] == 0 && row["lastFiredAt"] == .null)
        #expect(row["createdAt"] == "2026-12-01T10:00:00Z")
    }

    @Test func deviceBadgeArithmetic() {
        var h = Harness()
        #expect(h.ok("d1", .device, "{}")["badge"] == 0)
        #expect(h.ok("d1", .device, #"{"badge":3}"#)["badge"] == 3)
        h.ok("d1", .schedule, #"{"id":"a","after":1,"badge":"+2"}"#)
        h.ok("d1", .schedule, #"{"id":"b","after":2,"badge":"-10"}"#)
        h.ok("d1", .schedule, #"{"id":"c","after":3,"badge":7}"#)
        let badges = h.advance(seconds: 5).map { $0["badge"] }
        #expect(badges == [5, 0, 7])
        #expect(h.ok("d1", .device, "{}")["badge"] == 7)
    }

    @Test func badgeCountsInFlightDeliveries() {
        var h = Harness()
        h.autoAck = false
        h.ok("d1", .schedule, #"{"id":"a","after":1,"badge":"+1"}"#)
        h.ok("d1", .schedule, #"{"id":"b","after":1,"badge":"+1"}"#)
        let badges = h.advance(seconds: 2).map { $0["badge"] }
        #expect(badges == [1, 2])
        #expect(h.ok("d1", .device, "{}")["badge"] == 2)
        h.ackAll()
        #expect(h.ok("d1", .device, "{}")["badge"] == 2)
        #expect(h.replayed().snapshotBadge("d1") == 2)
    }

    @Test func unacknowledgedDeliveriesComeBackAfterRecoveryWithTheSameFireId() {
        var h = Harness()
        h.autoAck = false
        h.ok("d1", .schedule, #"{"id":"a","after":1,"alertBodies":["x","y","z","w"]}"#)
        let first = h.advance(seconds: 2)
        #expect(first.count == 1)
        // Crash before the PUBACK: the journal has no delivery record.
        var recovered = h
        recovered.engine = h.replayed()
        recovered.unacked = []
        let again = recovered.advance(seconds: 0)
        #expect(again.count == 1)
        #expect(again[0]["fireId"] == first[0]["fireId"])
        #expect(again[0]["alertBody"] == first[0]["alertBody"])
        // Once acknowledged it does not come back.
        recovered.ackAll()
        var third = recovered
        third.engine = recovered.replayed()
        #expect(third.advance(seconds: 10).isEmpty)
    }

    @Test func keepAfterFiringStaysListedAndPaused() {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"a","after":1,"keepAfterFiring":true}"#)
        #expect(h.advance(seconds: 2).count == 1)
        let row = h.list("d1")
        #expect(row.count == 1)
        #expect(row.first?["enabled"] == false)
        #expect(row.first?["nextFireDate"] == .null)
        #expect(row.first?["firedCount"] == 1)
        #expect(
            row.first?["lastFiredAt"] == "2026-12-01T10:00:01.000Z"
                || row.first?["lastFiredAt"] == "2026-12-01T10:00:01Z"
        )
    }

    @Test func pauseAndResume() {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"a","after":10}"#)
        #expect(h.ok("d1", .pause, #"{"ids":["a"]}"#)["paused"] == ["a"])
        #expect(h.advance(seconds: 60).isEmpty)
        #expect(h.list("d1").first?["nextFireDate"] == .null)
        // A one-shot whose time passed while paused fires at once on resume.
        #expect(h.ok("d1", .resume, #"{"all":true}"#)["resumed"] == ["a"])
        #expect(h.advance(seconds: 0).count == 1)
    }

    @Test func disabledAtScheduleTime() throws {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"a","after":10,"enabled":false}"#)
        #expect(h.advance(seconds: 60).isEmpty)
        #expect(h.list("d1").first?["enabled"] == false)
        // The list reply is valid JSON: `enabled` once, with the current state.
        h.ok("d1", .resume, #"{"ids":["a"]}"#)
        let reply = h.send("d1", .list, "{}")
        let row = try #require(reply["result"]?.objectValue?["notifications"]?.arrayValue?.first?.objectValue)
        #expect(row.keys.filter { $0 == "enabled" }.count == 1)
        #expect(row["enabled"] == true)
        #expect(try JSON(parsing: JSON.object(reply).bytes) == .object(reply))
    }

    @Test func snoozeDeliversOnceMoreAndIsCancelledWithItsOriginal() {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"a","after":10,"alertBody":"hi","keepAfterFiring":true}"#)
        #expect(h.advance(seconds: 10).count == 1)
        #expect(h.errorCode("d1", .snooze, #"{"id":"nope","after":60}"#) == "not_found")
        h.ok("d1", .snooze, #"{"id":"a","after":60}"#)
        #expect(h.list("d1").count == 1)
        let snoozed = h.advance(seconds: 60)
        #expect(snoozed.count == 1)
        #expect(snoozed.first?["id"] == "a~snooze")
        #expect(snoozed.first?["alertBody"] == "hi")
        h.ok("d1", .snooze, #"{"id":"a","after":60}"#)
        h.ok("d1", .cancel, #"{"ids":["a"]}"#)
        #expect(h.advance(seconds: 120).isEmpty)
    }

    @Test func expiredDeliveriesAreDropped() {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"a","after":10,"expiresAfter":30}"#)
        h.engine.setConnected(false)
        #expect(h.advance(seconds: 100).isEmpty)
        h.engine.setConnected(true)
        #expect(h.advance(seconds: 0).isEmpty)
        #expect(h.list("d1").isEmpty)
        // Sent ones carry the time left as message expiry.
        h.ok("d1", .schedule, #"{"id":"b","after":10,"expiresAfter":30}"#)
        h.engine.setConnected(false)
        _ = h.advance(seconds: 20)
        h.engine.setConnected(true)
        h.autoAck = false
        #expect(h.advance(seconds: 0).count == 1)
        #expect(h.unacked.first?.message.messageExpiry == 20)
    }

    @Test func quietHoursHoldThenDeferOnce() {
        var h = Harness(now: "2026-12-01T21:00:00Z")
        h.ok("d1", .device, #"{"timeZone":"UTC","quietHours":{"start":"22:00","end":"07:00"}}"#)
        h.ok("d1", .schedule, #"{"id":"a","fireDate":"2026-12-01T23:00:00Z"}"#)
        h.ok("d1", .schedule, #"{"id":"b","fireDate":"2026-12-01T23:00:00Z","ignoreQuietHours":true}"#)
        let night = h.advance(to: "2026-12-02T06:59:59Z")
        #expect(night.map { $0["id"] } == ["b"])
        let morning = h.advance(to: "2026-12-02T07:00:00Z")
        #expect(morning.map { $0["id"] } == ["a"])
        #expect(morning.first?["deferred"] == true)
        #expect(morning.first?["late"] == true)
    }

    @Test func timezoneRequiredForWallClockWithoutZone() {
        var h = Harness()
        #expect(h.errorCode("d1", .schedule, #"{"fireDate":"2026-12-01T18:00"}"#) == "timezone_required")
        h.ok("d1", .device, #"{"timeZone":"Asia/Shanghai"}"#)
        // An hour from now (10:00Z), so that it is still pending when the device moves.
        let result = h.ok("d1", .schedule, #"{"id":"a","fireDate":"2026-12-01T19:00"}"#)
        #expect(result["scheduled"]?.arrayValue?.first?.objectValue?["nextFireDate"] == "2026-12-01T11:00:00Z")
        // Moving the device re-computes what follows its zone.
        h.ok("d1", .device, #"{"timeZone":"Europe/Paris"}"#)
        #expect(h.list("d1").first?["nextFireDate"] == "2026-12-01T18:00:00Z")
    }

    @Test func alignToComesBackAtNoon() {
        var h = Harness(now: "2026-12-01T15:30:00Z")
        let r = h.ok("d1", .schedule, #"{"id":"back","after":86400,"alignTo":"12:00","timeZone":"Asia/Shanghai"}"#)
        // now + 24 h = Dec 2 23:30 in Shanghai; the first noon at or after it is Dec 3 12:00 = 04:00Z.
        #expect(r["scheduled"]?.arrayValue?.first?.objectValue?["nextFireDate"] == "2026-12-03T04:00:00Z")
        #expect(h.list("d1").first?["fireDate"] == "2026-12-03T12:00:00")
    }

    @Test func leadTimeFiresEarlier() {
        var h = Harness()
        h.ok("d1", .schedule, #"{"id":"exam","fireDate":"2026-12-01T11:00:00Z","leadTime":900}"#)
        let d = h.advance(to: "2026-12-01T10:45:00Z")
        #expect(d.count == 1)
        #expect(d.first?["occurrenceDate"] == "2026-12-01T11:00:00Z")
        #expect(d.first?["fireDate"] == "2026-12-01T10:45:00Z")
    }

    @Test func previewChangesNothing() {
        var h = Harness()
        let r = h.ok("d1", .preview, #"{"notification":{"after":60},"from":"2026-12-05T00:00:00Z","count":3}"#)
        #expect(r["fireDates"] == ["2026-12-05T00:01:00Z"])
        let past = h.ok("d1", .preview, #"{"notification":{"fireDate":"2026-01-01T00:00:00Z"}}"#)
        #expect(past["fireDates"] == ["2026-12-01T10:00:00Z"])
        #expect(h.journal.isEmpty)
        #expect(h.errorCode("d1", .preview, #"{"id":"nope"}"#) == "not_found")
    }

    @Test func replayRebuildsTheSameState() {
        var h = Harness()
        h.ok("d1", .device, #"{"timeZone":"Europe/Paris","badge":2}"#)
        h.ok("d1", .schedule, #"{"id":"a","after":30,"badge":"+1"}"#)
        h.ok("d1", .schedule, #"{"id":"b","after":300,"userInfo":{"t":1}}"#)
        h.ok("d1", .schedule, #"{"id":"c","fireDate":"2026-12-24T18:00","keepAfterFiring":true}"#)
        h.ok("d2", .schedule, #"{"after":10}"#)
        _ = h.advance(seconds: 60)
        h.ok("d1", .pause, #"{"ids":["c"]}"#)
        let replayed = h.replayed()
        #expect(h.list("d1", engine: replayed) == h.list("d1"))
        #expect(h.list("d2", engine: replayed) == h.list("d2"))
        #expect(replayed.pendingCount == h.engine.pendingCount)
        // And through a snapshot.
        let fromSnapshotRestorer = EngineRestorer(configuration: h.engine.configuration)
        var entries: [[UInt8]] = []
        h.engine.snapshot.forEachEntry { entries.append($0) }
        for entry in entries { try! fromSnapshotRestorer.restore(snapshotEntry: entry) }
        let fromSnapshot = fromSnapshotRestorer.finish()
        #expect(h.list("d1", engine: fromSnapshot) == h.list("d1"))
        #expect(fromSnapshot.snapshotBadge("d1") == 3)
    }
}

extension Engine {
    func snapshotBadge(_ device: String) -> Int? {
        var h = Harness()
        h.engine = self
        return h.ok(device, .device, "{}")["badge"].flatMap { if case .int(let n) = $0 { Int(n) } else { nil } }
    }
}

/// Recovery arms the one-shots of a snapshot as it restores them: the journal after the snapshot
/// must still be able to change them (a zone change, a pause, a cancel, a delivery).
@Suite struct RecoveryArmingTests {
    @Test func journalAfterTheSnapshotStillChangesWhatTheSnapshotArmed() {
        var h = Harness()
        h.ok("d1", .device, #"{"timeZone":"Europe/Paris"}"#)
        h.ok("d1", .schedule, #"{"id":"local","fireDate":"2026-12-01T22:00:00","timeZone":"device"}"#)
        h.ok("d1", .schedule, #"{"id":"paused","fireDate":"2026-12-01T12:00:00Z"}"#)
        h.ok("d1", .schedule, #"{"id":"cancelled","fireDate":"2026-12-01T12:00:00Z"}"#)
        h.ok("d1", .schedule, #"{"id":"soon","after":60}"#)
        h.ok("d1", .schedule, #"{"id":"kept","fireDate":"2026-12-01T13:30:00Z"}"#)
        var entries: [[UInt8]] = []
        h.engine.snapshot.forEachEntry { entries.append($0) }
        let mark = h.journal.count

        h.ok("d1", .device, #"{"timeZone":"Asia/Tokyo"}"#)
        h.ok("d1", .pause, #"{"ids":["paused"]}"#)
        h.ok("d1", .cancel, #"{"ids":["cancelled"]}"#)
        #expect(h.advance(seconds: 120).compactMap { $0["id"]?.stringValue } == ["soon"])

        let recoveredRestorer = EngineRestorer(configuration: h.engine.configuration)
        for entry in entries { try! recoveredRestorer.restore(snapshotEntry: entry) }
        for entry in h.journal[mark...] { recoveredRestorer.apply(entry) }
        let recovered = recoveredRestorer.finish()
        recovered.setConnected(true)
        #expect(h.list("d1", engine: recovered) == h.list("d1"))
        let local = h.list("d1", engine: recovered).first { $0["id"] == "local" }
        #expect(local?["nextFireDate"] == "2026-12-01T13:00:00Z")  // 22:00 in Tokyo, not Paris

        // Through the day: the recovered engine fires what the original would, once each.
        var r = h
        r.engine = recovered
        let fired = r.advance(to: "2026-12-02T00:00:00Z").compactMap { $0["id"]?.stringValue }
        #expect(fired == ["local", "kept"])
    }
}
