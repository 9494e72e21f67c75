import ChimePush
import ChimeTestSupport
import ChimeWorker
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

/// Push registrations and the outbox (PROTOCOL.md section 3.11), through the worker's own loop
/// with a recording push sender in place of the HTTP client.
@Suite struct PushTests {
    static let apnsToken = String(repeating: "ab12", count: 16)
    static let p256dh = "B" + String(repeating: "A", count: 86)
    static let auth = String(repeating: "Q", count: 22)
    static let apns = #"{"apns":{"token":"\#(apnsToken)","topic":"com.example.pills"}}"#
    static let webPush =
        #"{"webpush":{"endpoint":"https://fcm.googleapis.com/fcm/send/abc","expirationTime":null,"keys":{"p256dh":"\#(p256dh)","auth":"\#(auth)"}}}"#

    static var configuration: EngineConfiguration {
        var c = EngineConfiguration()
        c.push.providers = [.apns, .fcm, .webpush]
        c.receipts.byDefault = false
        return c
    }

    func registered(_ h: inout Harness) {
        let result = h.ok("d1", .device, #"{"push":[\#(Self.apns),\#(Self.webPush)],"history":true}"#)
        let push = result["push"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(push.count == 2)
        // Redacted: the token cut to its ends, the endpoint to its origin, no keys.
        #expect(push.first?["token"] == "ab12ab…ab12")
        #expect(push.last?["endpoint"] == "https://fcm.googleapis.com/…")
        #expect(!JSON.object(result).text.contains(Self.auth))
    }

    @Test func aDeliveryIsPushedToEveryRegistrationOnceTheBrokerHasIt() throws {
        var h = Harness(configuration: Self.configuration)
        registered(&h)
        h.ok("d1", .schedule, #"{"id":"pill","after":60,"alertTitle":"Pill","alertBody":"take it"}"#)
        #expect(h.pusher.take().isEmpty)
        h.autoAck = false
        let published = h.advance(seconds: 61)
        #expect(published.count == 1)
        // Not before the PUBACK: the delivery is not yet durable.
        #expect(h.pusher.take().isEmpty)
        h.ackAll()
        h.advance(seconds: 0)
        let jobs = h.pusher.take()
        #expect(Set(jobs.map(\.registration.provider)) == [.apns, .webpush])
        #expect(jobs.allSatisfy { $0.fireId == published[0]["fireId"]?.stringValue })
        // What each push is made of is the delivery as published.
        for job in jobs { #expect(try JSON(parsing: job.payload).objectValue == published[0]) }

        // Accepted: journaled, out of the outbox, shown in history.
        for job in jobs { try h.worker.step(.push(job.key, .accepted)) }
        h.advance(seconds: 0)
        #expect(h.journal.filter { if case .pushed = $0 { return true } else { return false } }.count == 2)
        #expect(h.engine.pendingPushJobs.isEmpty)
        let history = h.ok("d1", .history, "{}")["deliveries"]?.arrayValue?.first?.objectValue
        let outcomes = history?["push"]?.arrayValue?.compactMap { $0.objectValue?["outcome"]?.stringValue }
        #expect(outcomes == ["accepted", "accepted"])
        // Nothing is attempted again.
        h.advance(seconds: 3600)
        #expect(h.pusher.take().isEmpty)
    }

    @Test func whatWasNotAcceptedIsPushedAgainAfterARestartWithTheSameIdentity() throws {
        var h = Harness(configuration: Self.configuration)
        registered(&h)
        h.ok("d1", .schedule, #"{"id":"pill","after":60,"alertBody":"take it"}"#)
        h.advance(seconds: 61)
        let first = h.pusher.take()
        #expect(first.count == 2)
        try h.worker.step(.push(first[0].key, .accepted))
        // A kill: what the journal holds is recovered, and the push not accepted goes again.
        let recovered = h.replayed()
        #expect(recovered.pendingPushJobs.map(\.key) == [first[1].key])
        h.engine = recovered
        h.advance(seconds: 0)
        #expect(h.pusher.take().map(\.key) == [first[1].key])

        // The same from a snapshot.
        let fromSnapshotRestorer = EngineRestorer(configuration: Self.configuration)
        for entry in recovered.snapshot.entries { try fromSnapshotRestorer.restore(snapshotEntry: entry) }
        let fromSnapshot = fromSnapshotRestorer.finish()
        #expect(fromSnapshot.pendingPushJobs == recovered.pendingPushJobs)
    }

    @Test func anUnregisteredTokenIsRemovedAndNotTriedAgain() throws {
        var h = Harness(configuration: Self.configuration)
        registered(&h)
        h.ok("d1", .schedule, #"{"id":"pill","after":60,"repeatInterval":"hour","alertBody":"take it"}"#)
        h.advance(seconds: 61)
        let jobs = h.pusher.take()
        let apns = try #require(jobs.first { $0.registration.provider == .apns })
        try h.worker.step(.push(apns.key, .unregistered(reason: "Unregistered")))
        h.advance(seconds: 0)
        let push = h.ok("d1", .device, "{}")["push"]?.arrayValue ?? []
        #expect(push.count == 1)
        let history = h.ok("d1", .history, "{}")["deliveries"]?.arrayValue?.first?.objectValue
        #expect(history?["push"]?.arrayValue?.first?.objectValue?["outcome"] == "unregistered")
        #expect(history?["push"]?.arrayValue?.first?.objectValue?["reason"] == "Unregistered")
        // The next occurrence goes to what is left.
        h.advance(seconds: 3600)
        #expect(h.pusher.take().map(\.registration.provider).filter { $0 == .apns }.isEmpty)
    }

    @Test func aTransientRefusalWaitsForRetryAfterThenTheBackoff() throws {
        var h = Harness(configuration: Self.configuration)
        registered(&h)
        h.ok("d1", .schedule, #"{"id":"pill","after":60,"alertBody":"take it"}"#)
        h.advance(seconds: 61)
        let job = try #require(h.pusher.take().first { $0.registration.provider == .apns })
        try h.worker.step(.push(job.key, .transient(reason: "TooManyRequests", retryAfter: 30_000)))
        h.advance(seconds: 29)
        #expect(h.pusher.take().isEmpty)
        h.advance(seconds: 2)
        #expect(h.pusher.take().map(\.key) == [job.key])
        try h.worker.step(.push(job.key, .transient(reason: "HTTP 503", retryAfter: nil)))
        h.advance(seconds: 1)
        #expect(h.pusher.take().isEmpty, "the second failure waits 2 s")
        h.advance(seconds: 1)
        #expect(h.pusher.take().map(\.key) == [job.key])
    }

    @Test func aPushThatNoServiceTakesExpires() throws {
        var h = Harness(configuration: Self.configuration)
        registered(&h)
        h.ok("d1", .schedule, #"{"id":"pill","after":60,"alertBody":"take it","expiresAfter":120}"#)
        h.advance(seconds: 61)
        for job in h.pusher.take() {
            try h.worker.step(.push(job.key, .transient(reason: "HTTP 503", retryAfter: 600_000)))
        }
        h.advance(seconds: 200)
        let records = h.journal.compactMap { entry -> PushRecord? in
            if case .pushed(let r) = entry { return r } else { return nil }
        }
        #expect(records.map(\.outcome) == [.expired, .expired])
        #expect(h.engine.pendingPushJobs.isEmpty)
    }

    @Test func registrationsAreCheckedBoundedAndOnlyForConfiguredProviders() {
        var h = Harness(configuration: Self.configuration)
        func refused(_ body: String) -> String? { h.errorCode("d1", .device, body) }
        #expect(refused(#"{"push":[{"apns":{"token":"xyz","topic":"a"}}]}"#) == "invalid_argument")
        #expect(refused(#"{"push":[{"apns":{"token":"\#(Self.apnsToken)"}}]}"#) == "invalid_argument")
        #expect(refused(#"{"push":[{"fcm":{"token":"a b"}}]}"#) == "invalid_argument")
        #expect(refused(#"{"push":[{"gcm":{"token":"a"}}]}"#) == "unknown_field")
        #expect(refused(#"{"push":[\#(Self.apns)],"removePush":[]}"#) == "invalid_argument")
        for endpoint in [
            "http://fcm.googleapis.com/x", "https://127.0.0.1/x", "https://10.0.0.1/x", "https://[::1]/x",
            "https://[::ffff:127.0.0.1]/x", "https://0x7f.1/x", "https://2130706433/x", "https://evil.example/x",
            "https://user@fcm.googleapis.com/x", "https://fcm.googleapis.com./x", "https://169.254.169.254/x",
            "https://fcm.googleapis.com.evil.example/x",
        ] {
            let body =
                #"{"push":[{"webpush":{"endpoint":"\#(endpoint)","keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}}]}"#
            #expect(refused(body) == "invalid_argument", "\(endpoint)")
        }
        // Each field at its bound is taken, one past it refused (PROTOCOL.md section 3.11).
        let longest = (
            apns: String(repeating: "ab", count: 100), topic: String(repeating: "a", count: 255),
            fcm: String(repeating: "t", count: 4096),
            endpoint: "https://fcm.googleapis.com/" + String(repeating: "e", count: 2048 - 27)
        )
        #expect(longest.endpoint.count == 2048)
        for (body, past) in [
            (
                #"{"apns":{"token":"\#(longest.apns)","topic":"\#(longest.topic)"}}"#,
                #"{"apns":{"token":"\#(longest.apns)ab","topic":"\#(longest.topic)"}}"#
            ),
            (
                #"{"apns":{"token":"\#(Self.apnsToken)","topic":"\#(longest.topic)"}}"#,
                #"{"apns":{"token":"\#(Self.apnsToken)","topic":"\#(longest.topic)a"}}"#
            ),
            (#"{"fcm":{"token":"\#(longest.fcm)"}}"#, #"{"fcm":{"token":"\#(longest.fcm)t"}}"#),
            (
                #"{"webpush":{"endpoint":"\#(longest.endpoint)","keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}}"#,
                #"{"webpush":{"endpoint":"\#(longest.endpoint)e","keys":{"p256dh":"\#(Self.p256dh)","auth":"\#(Self.auth)"}}}"#
            ),
        ] {
            #expect(refused(#"{"push":[\#(past)]}"#) == "invalid_argument", "\(past.prefix(40))")
            #expect(h.ok("d1", .device, #"{"push":[\#(body)]}"#)["push"]?.arrayValue?.count == 1)
        }
        h.ok("d1", .device, #"{"push":[]}"#)
        #expect(h.ok("d1", .device, "{}")["push"] == nil)
        // At most ten.
        let eleven = (0..<11).map { #"{"fcm":{"token":"t\#($0)"}}"# }.joined(separator: ",")
        #expect(refused(#"{"push":[\#(eleven)]}"#) == "invalid_argument")
        let ten = (0..<10).map { #"{"fcm":{"token":"t\#($0)"}}"# }.joined(separator: ",")
        #expect(h.ok("d1", .device, #"{"push":[\#(ten)]}"#)["push"]?.arrayValue?.count == 10)
        #expect(refused(#"{"addPush":[{"fcm":{"token":"t10"}}]}"#) == "quota_exceeded")
        // Replacing by id, removing by id.
        let id = PushRegistration(.fcm(token: "t0")).id
        #expect(h.ok("d1", .device, #"{"removePush":["\#(id)"]}"#)["push"]?.arrayValue?.count == 9)

        // A worker without credentials for a provider refuses its registrations.
        var bare = Harness()
        #expect(bare.errorCode("d1", .device, #"{"push":[\#(Self.apns)]}"#) == "invalid_argument")
    }

    @Test func aNotificationWhoseDeliveriesCannotBePushedIsRefusedAtSchedule() {
        var h = Harness(configuration: Self.configuration)
        let long = String(repeating: "x", count: 3800)
        // No registration yet: nothing to check against.
        h.ok("d1", .schedule, #"{"id":"big","after":60,"alertBody":"\#(long)"}"#)
        registered(&h)
        let big = #"{"id":"big2","after":60,"alertBody":"\#(long)"}"#
        #expect(h.errorCode("d1", .schedule, big) == "payload_too_large")
        #expect(
            h.errorCode("d1", .update, #"{"id":"big","alertBodies":["a","\#(long)"]}"#) == "payload_too_large"
        )
        let batch = #"{"notifications":[{"id":"a","after":60},{"id":"b","after":60,"userInfo":{"k":"\#(long)"}}]}"#
        let refusal = h.send("d1", .schedule, batch)["error"]?.objectValue
        #expect(refusal?["code"] == "payload_too_large")
        #expect(refusal?["field"] == "notifications[1]")
        // MQTT only: not pushed, so not bounded by what a push carries.
        h.ok("d1", .schedule, #"{"id":"big3","after":60,"channels":"mqtt","alertBody":"\#(long)"}"#)
        // What fits is taken: 3000 bytes of text.
        h.ok("d1", .schedule, #"{"id":"fits","after":60,"alertBody":"\#(String(repeating: "y", count: 3000))"}"#)
    }

    /// What `schedule` takes for a device with registrations on all three platforms is pushed to
    /// each without a refusal at fire time: generated notifications near the bound, with texts,
    /// userInfo of escapes, quotes, non-ASCII and nested values, and every content member.
    @Test func whatScheduleTakesFitsEveryPlatformWhenItFires() throws {
        var h = Harness(configuration: Self.configuration)
        let fcm = #"{"fcm":{"token":"\#(String(repeating: "f", count: 160))"}}"#
        h.ok("d1", .device, #"{"push":[\#(Self.apns),\#(fcm),\#(Self.webPush)]}"#)
        var random = SplitMix64(seed: 33)
        let pieces = [#"\""#, #"\\"#, "é", "日本", "a", "\\n", #"\u0001"#, "🙂", " "]
        func text(_ length: Int) -> String {
            (0..<length).map { _ in pieces[random.below(pieces.count)] }.joined()
        }
        var taken = 0
        for n in 0..<300 {
            var members = [#""id":"n\#(n)""#, #""after":60"#]
            let budget = 200 + random.below(3800)
            switch random.below(4) {
            case 0: members.append(#""alertBody":"\#(text(budget / 3))""#)
            case 1:
                members.append(#""userInfo":{"k":"\#(text(budget / 3))","n":[1,"\#(text(budget / 6))",{"x":null}]}"#)
            case 2: members.append(#""alertTitle":"\#(text(budget / 6))","alertBody":"\#(text(budget / 6))""#)
            default:
                members.append(
                    #""userInfo":{"list":[\#((0..<budget / 8).map { _ in #""\"q\"""# }.joined(separator: ","))]}"#
                )
            }
            members.append(#""badge":\#(random.below(100))"#)
            if random.below(2) == 0 { members.append(#""soundName":"default","category":"MED","threadId":"t""#) }
            if random.below(2) == 0 { members.append(#""interruptionLevel":"timeSensitive""#) }
            if h.send("d1", .schedule, "{\(members.joined(separator: ","))}")["error"] == nil { taken += 1 }
        }
        #expect(taken > 100, "too few were taken to say anything: \(taken)")
        h.advance(seconds: 61)
        // At most 4 in flight a device and provider: each taken lets the next go.
        var jobs: [PushJob] = []
        while case let more = h.pusher.take(), !more.isEmpty {
            jobs += more
            for job in more { try h.worker.step(.push(job.key, .accepted)) }
            h.advance(seconds: 0)
        }
        #expect(jobs.count == 3 * taken)
        var largest = 0
        for job in jobs {
            largest = max(largest, job.payload.count)
            #expect(job.payload.count <= Engine.maxPushedDelivery)
            switch job.registration.target {
            case .apns(let token, let topic, _):
                #expect(throws: Never.self) {
                    try PushPayloads.apns(job.payload, topic: topic, expiresAt: job.expiresAt, registration: token)
                }
            case .fcm(let token):
                #expect(throws: Never.self) {
                    try PushPayloads.fcm(job.payload, token: token, now: job.firedAt, expiresAt: job.expiresAt)
                }
            case .webPush:
                #expect(throws: Never.self) {
                    try PushPayloads.webPush(
                        job.payload,
                        fireId: job.fireId,
                        now: job.firedAt,
                        expiresAt: job.expiresAt
                    )
                }
            }
        }
        #expect(largest > Engine.maxPushedDelivery - 800, "none came near the bound: \(largest)")
    }

    @Test func channelsChooseMQTTOrPushOnly() throws {
        var h = Harness(configuration: Self.configuration)
        registered(&h)
        h.ok("d1", .schedule, #"{"id":"silent","after":60,"channels":"mqtt","userInfo":{"sync":true}}"#)
        h.ok("d1", .schedule, #"{"id":"closed","after":60,"channels":"push","alertBody":"only pushed"}"#)
        let published = h.advance(seconds: 61)
        #expect(published.compactMap { $0["id"]?.stringValue } == ["silent"])
        let pushed = h.pusher.take()
        #expect(Set(pushed.map(\.fireId)).count == 1)
        #expect(pushed.first?.fireId.hasPrefix("closed@") == true)
        #expect(pushed.count == 2)
        // Both are recorded as delivered.
        let history = h.ok("d1", .history, "{}")["deliveries"]?.arrayValue?.compactMap { $0.objectValue?["id"] }
        #expect(Set(history ?? []) == ["silent", "closed"])
    }

    /// `history` says what became of each delivery on each channel, for a device that never
    /// asked for history; the journal and a snapshot rebuild the same.
    @Test func historySaysHowEachChannelWent() throws {
        var h = Harness(configuration: Self.configuration)
        h.ok("d1", .device, #"{"push":[\#(Self.apns),\#(Self.webPush)]}"#)
        h.ok("d1", .schedule, #"{"id":"both","after":60,"alertBody":"x"}"#)
        h.ok("d1", .schedule, #"{"id":"closed","after":60,"channels":"push","alertBody":"y"}"#)
        #expect(h.advance(seconds: 61).map { $0["id"] } == ["both"])
        let jobs = h.pusher.take()
        #expect(jobs.count == 4)
        func rows() -> [String: JSONObject] {
            var byId: [String: JSONObject] = [:]
            for row in h.ok("d1", .history, "{}")["deliveries"]?.arrayValue ?? [] {
                if let o = row.objectValue, let id = o["id"]?.stringValue { byId[id] = o }
            }
            return byId
        }
        var now = rows()
        #expect(now["both"]?["mqtt"] == "acknowledged")
        #expect(now["closed"]?["mqtt"] == "none")
        #expect(now["both"]?["pushOutcome"] == "pending")
        #expect(now["closed"]?["pushOutcome"] == "pending")
        func job(_ id: String, _ provider: PushRegistration.Provider) throws -> PushJob {
            try #require(jobs.first { $0.fireId.hasPrefix(id + "@") && $0.registration.provider == provider })
        }
        try h.worker.step(.push(try job("both", .apns).key, .accepted))
        try h.worker.step(.push(try job("closed", .apns).key, .refused(reason: "HTTP 400 BadTopic")))
        h.advance(seconds: 0)
        now = rows()
        #expect(now["both"]?["pushOutcome"] == "accepted", "one accepted is enough")
        #expect(now["closed"]?["pushOutcome"] == "pending", "its Web Push is still being tried")
        try h.worker.step(.push(try job("closed", .webpush).key, .unregistered(reason: "HTTP 410")))
        h.advance(seconds: 0)
        now = rows()
        #expect(now["closed"]?["pushOutcome"] == "unregistered", "how the last one ended")
        #expect(now["closed"]?["push"]?.arrayValue?.count == 2)
        // The Web Push of "both" ended with its registration.
        #expect(now["both"]?["push"]?.arrayValue?.count == 2)
        #expect(now["both"]?["pushOutcome"] == "accepted")

        let live = h.ok("d1", .history, "{}")
        var again = h
        again.engine = h.replayed()
        #expect(again.ok("d1", .history, "{}") == live)
        let fromSnapshotRestorer = EngineRestorer(configuration: Self.configuration)
        for entry in again.engine.snapshot.entries { try fromSnapshotRestorer.restore(snapshotEntry: entry) }
        let fromSnapshot = fromSnapshotRestorer.finish()
        again.engine = fromSnapshot
        #expect(again.ok("d1", .history, "{}") == live)
    }

    @Test func aPushOnlyDeliveryGoesOverMQTTWhenNoRegistrationIsLeft() throws {
        var h = Harness(configuration: Self.configuration)
        h.ok("d1", .device, #"{"push":[\#(Self.apns)],"history":true}"#)
        h.ok("d1", .schedule, #"{"id":"pill","after":60,"repeatInterval":"hour","channels":"push","alertBody":"x"}"#)
        #expect(h.advance(seconds: 61).isEmpty, "pushed only")
        let job = try #require(h.pusher.take().first)
        try h.worker.step(.push(job.key, .unregistered(reason: "Unregistered")))
        h.advance(seconds: 0)
        #expect(h.ok("d1", .device, "{}")["push"] == nil)
        // The next occurrence has nowhere to be pushed: it goes over MQTT rather than nowhere.
        #expect(h.advance(seconds: 3600).map { $0["id"] } == ["pill"])
    }

    @Test func aRemovedRegistrationGetsNothingMore() throws {
        var h = Harness(configuration: Self.configuration)
        registered(&h)
        h.ok("d1", .schedule, #"{"id":"pill","after":60,"alertBody":"take it"}"#)
        h.advance(seconds: 61)
        let apns = try #require(h.pusher.take().first { $0.registration.provider == .apns })
        try h.worker.step(.push(apns.key, .transient(reason: "HTTP 503", retryAfter: 60_000)))
        h.ok("d1", .device, #"{"removePush":["\#(apns.registration.id)"]}"#)
        h.advance(seconds: 61)
        #expect(h.pusher.take().isEmpty, "pushed to a registration the device removed")
        let trail = h.ok("d1", .history, "{}")["deliveries"]?.arrayValue?.first?.objectValue?["push"]?.arrayValue
        #expect(
            trail?.contains {
                $0.objectValue?["reason"] == "registration removed" && $0.objectValue?["outcome"] == "refused"
            }
                == true
        )
        #expect(!h.engine.pendingPushJobs.contains { $0.registration.id == apns.registration.id })
    }

    @Test func aDeliveryTooLargeForAnyPushEndsAtOnceAndKeepsNoPayload() throws {
        var h = Harness(configuration: Self.configuration)
        let long = String(repeating: "x", count: 60_000)
        h.ok("d1", .schedule, #"{"id":"big","after":60,"alertBody":"\#(long)"}"#)
        let ten = (0..<10).map { #"{"fcm":{"token":"t\#($0)"}}"# }.joined(separator: ",")
        h.ok("d1", .device, #"{"push":[\#(ten)],"history":true}"#)
        #expect(h.advance(seconds: 61).count == 1, "delivered over MQTT")
        #expect(h.engine.pendingPushJobs.isEmpty)
        #expect(h.pusher.take().isEmpty)
        let trail = h.ok("d1", .history, "{}")["deliveries"]?.arrayValue?.first?.objectValue?["push"]?.arrayValue ?? []
        #expect(trail.count == 10)
        #expect(trail.allSatisfy { $0.objectValue?["outcome"] == "refused" })
        #expect(h.engine.snapshot.entries.reduce(0) { $0 + $1.count } < 20_000, "no payload kept")
    }

    @Test func aSnapshotKeepsEachDeliveryOnceForAllItsRegistrations() throws {
        var h = Harness(configuration: Self.configuration)
        let ten = (0..<10).map { #"{"fcm":{"token":"t\#($0)"}}"# }.joined(separator: ",")
        h.ok("d1", .device, #"{"push":[\#(ten)]}"#)
        let body = String(repeating: "y", count: 3000)
        h.ok("d1", .schedule, #"{"id":"n","after":60,"alertBody":"\#(body)"}"#)
        h.advance(seconds: 61)
        #expect(h.engine.pendingPushJobs.count == 10)
        let entry = try #require(h.engine.snapshot.entries.first { $0.first == UInt8(ascii: "P") })
        #expect(entry.count < 2 * 3000, "\(entry.count) bytes")
        let restoredRestorer = EngineRestorer(configuration: Self.configuration)
        for e in h.engine.snapshot.entries { try restoredRestorer.restore(snapshotEntry: e) }
        let restored = restoredRestorer.finish()
        #expect(Set(restored.pendingPushJobs.map(\.key)) == Set(h.engine.pendingPushJobs.map(\.key)))
        #expect(restored.takeNewPushJobs().count == 10, "handed to the worker once recovered")
    }

    @Test func aQueueWaitingOutABackoffIsNotWalkedOnEveryEvent() {
        var dispatch = PushDispatch(limits: .init(perProvider: 10_000, perDevice: 4))
        var now = Instant(milliseconds: 0)
        func job(_ device: String, _ i: Int) -> PushJob {
            PushJob(
                deviceId: device,
                fireId: "n@\(i)",
                registration: PushRegistration(.fcm(token: "t")),
                payload: [],
                firedAt: now,
                expiresAt: Instant(milliseconds: 86_400_000)
            )
        }
        for d in 0..<5000 { dispatch.add(job("d\(d)", 0)) }
        for case .send(let j, _) in dispatch.due(now: now, isPending: { _ in true }) {
            _ = dispatch.finished(j.key, .transient(reason: "HTTP 503", retryAfter: 60_000), now: now)
        }
        var asked = 0
        for i in 1...100 {
            now = Instant(milliseconds: Int64(i))
            dispatch.add(job("other", i))
            let steps = dispatch.due(now: now) { _ in
                asked += 1
                return true
            }
            for case .send(let j, _) in steps { _ = dispatch.finished(j.key, .accepted, now: now) }
        }
        #expect(asked == 100, "100 new jobs asked the engine about \(asked) jobs")
        _ = dispatch.due(now: now) { _ in true }
        #expect(dispatch.nextWake == Instant(milliseconds: 60_000))
        // They come back when their time does.
        #expect(dispatch.due(now: Instant(milliseconds: 60_000)) { _ in true }.count == 5000)
    }

    @Test func aDeviceAtItsBoundWaitsForItsOwnAttemptsOnly() {
        var dispatch = PushDispatch(limits: .init(perProvider: 100, perDevice: 2))
        let now = Instant(milliseconds: 0)
        for i in 0..<5 {
            dispatch.add(
                PushJob(
                    deviceId: "busy",
                    fireId: "n@\(i)",
                    registration: PushRegistration(.apns(token: "ab", topic: "t", sandbox: false)),
                    payload: [],
                    firedAt: now,
                    expiresAt: Instant(milliseconds: 60_000)
                )
            )
        }
        dispatch.add(
            PushJob(
                deviceId: "quiet",
                fireId: "q@0",
                registration: PushRegistration(.apns(token: "cd", topic: "t", sandbox: false)),
                payload: [],
                firedAt: now,
                expiresAt: Instant(milliseconds: 60_000)
            )
        )
        let first = dispatch.due(now: now) { _ in true }.compactMap { step -> PushJobKey? in
            if case .send(let job, _) = step { return job.key } else { return nil }
        }
        #expect(first.map(\.deviceId) == ["busy", "busy", "quiet"])
        // One of busy's ends: the next of its held ones goes, in order.
        _ = dispatch.finished(first[0], .accepted, now: now)
        let next = dispatch.due(now: now) { _ in true }.compactMap { step -> String? in
            if case .send(let job, _) = step { return job.fireId } else { return nil }
        }
        #expect(next == ["n@2"])
    }

    @Test func failuresAreCountedByABoundedReason() {
        #expect(PushStats.reasonLabel("HTTP 410") == "http_410")
        #expect(PushStats.reasonLabel("timeout: Operation timed out after 30000 ms") == "timeout")
        #expect(PushStats.reasonLabel("BadDeviceToken") == "BadDeviceToken")
        #expect(PushStats.reasonLabel("the delivery is 60000 bytes, more than 3993") == "other")
        var stats = PushStats()
        stats.count(.accepted, .apns)
        stats.count(.transient(reason: "HTTP 503", retryAfter: nil), .apns)
        stats.count(.unregistered(reason: "Unregistered"), .apns)
        #expect(stats.transient[.apns] == 1)
        #expect(stats.failures.count == 2)
        for i in 0..<200 { stats.count(.refused(reason: "Reason\(i)"), .fcm) }
        let fcm = stats.failures.filter { $0.key.provider == .fcm }
        #expect(fcm.count == PushStats.maxReasons + 1)
        #expect(fcm[PushStats.FailureKey(provider: .fcm, reason: "other")] == 200 - PushStats.maxReasons)
    }

    @Test func theEndpointPolicyAllowsWhatItNames() {
        let policy = PushEndpointPolicy(allowedHosts: ["*.push.apple.com", "push.example.com"], allowLoopback: true)
        #expect(policy.refusal("https://web.push.apple.com/abc") == nil)
        #expect(policy.refusal("https://push.example.com:8443/abc") == nil)
        #expect(policy.refusal("https://127.0.0.1:9999/wp/1") == nil)
        #expect(policy.refusal("https://push.apple.com/abc") != nil)
        #expect(policy.refusal("https://10.1.2.3/abc") != nil)
        #expect(policy.refusal("https://[fe80::1]/abc") != nil)
        #expect(policy.refusal("https://[fc00::1]/abc") != nil)
        #expect(policy.refusal("https://8.8.8.8/abc") != nil, "a public address must be named too")
        #expect(policy.refusal("https://127.0.0.1:9999/wp/1") == nil)
        #expect(PushEndpointPolicy().refusal("https://127.0.0.1/x")?.contains("loopback") == true)
        #expect(PushEndpointPolicy().refusal("https://10.0.0.1/x")?.contains("private") == true)
        #expect(PushEndpointPolicy().refusal("https://169.254.169.254/x")?.contains("link-local") == true)
        #expect(
            PushEndpointPolicy().refusal("https://0x7f.1/x")?.contains("link-local, multicast or unspecified") == true
        )
        #expect(PushEndpointPolicy().refusal("https://evil.example/x")?.contains("not among") == true)
        #expect(PushEndpointPolicy().refusal("https://api.push.apple.com/x") != nil, "APNs' own hosts are not Web Push")
        #expect(PushEndpointPolicy().refusal("https://web.push.apple.com/x") == nil)
    }

    /// Hosts that are no DNS name, and what libcurl reads otherwise than the policy would
    /// (checked with curl_url_get, 7.88.1), are refused.
    @Test(arguments: [
        "https://evil.com;.push.services.mozilla.com/x", "https://evil.com$.notify.windows.com/x",
        "https://evil.com*.notify.windows.com/x", "https://a(b).push.services.mozilla.com/x",
        "https://fcm.googleapis.com:+443/x", "https://a.push.apple.com@evil.example/x",
        "https://evil.example#@fcm.googleapis.com", "https://evil.example\\@fcm.googleapis.com/",
        "https://fcm.googleapis.com%2eevil.example/", "https://[::ffff:127.0.0.1]/", "https://127.1/",
        "https://fcm.googleapis.com./x", "https://[fe80::1%25eth0]/", "https://fcm.googleapis.com\u{2024}evil/",
        "https://fcm.googleapis.com:0/x", "https://fcm.googleapis.com:65536/x", "https://-a.notify.windows.com/x",
    ])
    func theEndpointPolicyRefusesWhatIsNoHostName(_ endpoint: String) {
        #expect(PushEndpointPolicy().refusal(endpoint) != nil)
    }

    @Test func pushesInFlightAreBoundedPerDeviceAndProvider() {
        var dispatch = PushDispatch(limits: .init(perProvider: 3, perDevice: 2))
        let now = Instant(milliseconds: 0)
        for device in ["a", "b"] {
            for i in 0..<3 {
                dispatch.add(
                    PushJob(
                        deviceId: device,
                        fireId: "n@\(i)",
                        registration: PushRegistration(.fcm(token: "t")),
                        payload: [],
                        firedAt: now,
                        expiresAt: Instant(milliseconds: 60_000)
                    )
                )
            }
        }
        let sent = dispatch.due(now: now) { _ in true }
        #expect(sent.count == 3)
        #expect(dispatch.inFlight(.fcm) == 3)
        let first = sent.compactMap { step -> PushJobKey? in
            if case .send(let job, _) = step { return job.key } else { return nil }
        }
        #expect(first.filter { $0.deviceId == "a" }.count == 2)
        #expect(dispatch.finished(first[0], .accepted, now: now)?.outcome == .accepted)
        #expect(dispatch.due(now: now) { _ in true }.count == 1)
    }
}
