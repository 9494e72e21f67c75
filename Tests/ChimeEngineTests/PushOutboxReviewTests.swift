import ChimeTestSupport
import ChimeWorker
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

/// From a second hostile review: the engine's outbox (``Outbox``), of how pushes end with their
/// registration, and of the endpoint policy against real endpoints and libcurl's reading.
@Suite struct PushOutboxReviewTests {
    static func job(_ fire: String, _ payload: String = "") -> PushJob {
        PushJob(
            deviceId: "d",
            fireId: fire,
            registration: PushRegistration(.fcm(token: "t")),
            payload: Array(payload.utf8),
            firedAt: Instant(milliseconds: 0),
            expiresAt: Instant(milliseconds: 1000)
        )
    }

    /// A key removed and inserted again (the same fireId delivered again) is in the outbox once.
    @Test func aKeyRemovedAndInsertedAgainIsListedOnce() {
        var outbox = Outbox()
        outbox.insert(Self.job("a"))
        outbox.insert(Self.job("b"))
        outbox.remove(Self.job("a").key)
        outbox.insert(Self.job("a"))
        #expect(outbox.count == 2)
        #expect(outbox.all.map(\.fireId) == ["b", "a"])
        // The oldest is b, which is older than a's second coming.
        #expect(outbox.removeOldest()?.fireId == "b")
    }

    /// Random inserts, removals, oldest-first removals and filters against a plain ordered list.
    @Test(arguments: 0..<30)
    func theOutboxMatchesAnOrderedList(seed: Int) {
        var random = SplitMix64(seed: UInt64(seed) &+ 99)
        var outbox = Outbox()
        var model: [PushJob] = []
        for step in 0..<2000 {
            let fire = "n\(Int.random(in: 0..<40, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                let job = Self.job(fire, "p\(step)")
                outbox.insert(job)
                if let i = model.firstIndex(where: { $0.key == job.key }) { model[i] = job } else { model.append(job) }
            case 4..<7:
                let key = Self.job(fire).key
                let removed = outbox.remove(key)
                let i = model.firstIndex { $0.key == key }
                #expect(removed == i.map { model[$0] })
                if let i { model.remove(at: i) }
            case 7..<9:
                let oldest = outbox.removeOldest()
                #expect(oldest == model.first, "step \(step)")
                if !model.isEmpty { model.removeFirst() }
            default:
                let gone = outbox.removeAll { $0.fireId.hasSuffix("7") }
                #expect(gone == model.filter { $0.fireId.hasSuffix("7") })
                model.removeAll { $0.fireId.hasSuffix("7") }
            }
            #expect(outbox.count == model.count)
            #expect(outbox.all == model, "seed \(seed) step \(step)")
            if outbox.all != model { return }
        }
    }

    /// A one-shot whose time has passed fires at once, with its fireId from that time: scheduled
    /// twice, the same pushes come twice, and the outbox (and so a snapshot, a recovery and the
    /// trail of a removed registration) must hold each once.
    @Test func theSameDeliveryAgainIsInTheOutboxOnce() throws {
        var h = Harness(configuration: PushTests.configuration)
        h.ok("d1", .device, #"{"push":[\#(PushTests.apns)],"history":true}"#)
        h.ok("d1", .schedule, #"{"id":"x","fireDate":"2026-12-01T09:00:00Z","alertBody":"a"}"#)
        h.advance(seconds: 1)
        let first = h.pusher.take()
        #expect(first.count == 1)
        for job in first { try h.worker.step(.push(job.key, .accepted)) }
        h.advance(seconds: 1)
        #expect(h.engine.pendingPushJobs.isEmpty)
        // Not the same command (that one is answered as a duplicate): the text changed.
        h.ok("d1", .schedule, #"{"id":"x","fireDate":"2026-12-01T09:00:00Z","alertBody":"b"}"#)
        h.advance(seconds: 1)
        let second = h.pusher.take()
        #expect(second.map(\.key) == first.map(\.key), "the same fireId")
        #expect(h.engine.pendingPushJobs.count == 1, "\(h.engine.pendingPushJobs.map(\.key))")
        // Removing the registration ends that push once.
        h.ok("d1", .device, #"{"removePush":["\#(first[0].registration.id)"]}"#)
        let trail = h.ok("d1", .history, "{}")["deliveries"]?.arrayValue?.first?.objectValue?["push"]?.arrayValue ?? []
        #expect(trail.filter { $0.objectValue?["reason"] == "registration removed" }.count == 1)
    }

    /// PROTOCOL.md 3.11: a registration the service says is gone "is removed and not tried
    /// again". Its other pushes waiting (a backoff, a queue) must end with it.
    @Test func anUnregisteredRegistrationEndsItsOtherPushes() throws {
        var h = Harness(configuration: PushTests.configuration)
        h.ok("d1", .device, #"{"push":[\#(PushTests.apns)],"history":true}"#)
        h.ok("d1", .schedule, #"{"id":"a","after":60,"alertBody":"a"}"#)
        h.ok("d1", .schedule, #"{"id":"b","after":60,"alertBody":"b"}"#)
        h.advance(seconds: 61)
        let jobs = h.pusher.take()
        #expect(jobs.count == 2)
        try h.worker.step(.push(jobs[1].key, .transient(reason: "HTTP 503", retryAfter: nil)))
        try h.worker.step(.push(jobs[0].key, .unregistered(reason: "BadDeviceToken")))
        h.advance(seconds: 5)
        #expect(h.pusher.take().isEmpty, "pushed again to a registration APNs said is gone")
        #expect(h.engine.pendingPushJobs.isEmpty)
    }

    /// The same token registered again with another environment (a development build fixed) has
    /// the same id: the pushes waiting go to it as it is now, and an answer about the old one does
    /// not remove the new, good registration.
    @Test func aRegistrationReplacedUnderTheSameIdIsNotPushedWithItsOldFields() throws {
        var h = Harness(configuration: PushTests.configuration)
        let token = PushTests.apnsToken
        h.ok("d1", .device, #"{"push":[{"apns":{"token":"\#(token)","topic":"com.example.pills"}}]}"#)
        h.ok("d1", .schedule, #"{"id":"a","after":60,"alertBody":"a"}"#)
        h.advance(seconds: 61)
        let job = try #require(h.pusher.take().first)
        try h.worker.step(.push(job.key, .transient(reason: "HTTP 503", retryAfter: 10_000)))
        let sandbox = #"{"apns":{"token":"\#(token)","topic":"com.example.pills","environment":"sandbox"}}"#
        h.ok("d1", .device, #"{"addPush":[\#(sandbox)]}"#)
        h.advance(seconds: 11)
        let again = h.pusher.take()
        #expect(again.count == 1)
        #expect(
            again.allSatisfy {
                $0.registration.target == .apns(token: token, topic: "com.example.pills", sandbox: true)
            },
            "pushed with the replaced registration: \(again.map(\.registration))"
        )
        // APNs as it answers: the production host does not know a development token.
        for j in again {
            let wrongHost = j.registration.target == job.registration.target
            try h.worker.step(.push(j.key, wrongHost ? .unregistered(reason: "BadDeviceToken") : .accepted))
        }
        h.advance(seconds: 0)
        #expect(h.ok("d1", .device, "{}")["push"]?.arrayValue?.count == 1, "the new registration was removed")
    }

    /// PROTOCOL.md 3.11: a `channels: "push"` delivery too large for any push is published over
    /// MQTT rather than reach nothing.
    @Test func aPushOnlyDeliveryTooLargeToPushStillReachesTheDevice() throws {
        var h = Harness(configuration: PushTests.configuration)
        let long = String(repeating: "x", count: 3900)
        h.ok("d1", .schedule, #"{"id":"big","after":60,"channels":"push","alertBody":"\#(long)"}"#)
        h.ok("d1", .device, #"{"push":[\#(PushTests.apns)],"history":true}"#)
        let published = h.advance(seconds: 61)
        #expect(h.pusher.take().isEmpty)
        #expect(published.count == 1, "a push-only delivery no push can carry went nowhere")
    }

    /// Endpoints browsers hand out today must be taken.
    @Test(arguments: [
        "https://fcm.googleapis.com/fcm/send/cV3xyz:APA91bHxx-yy_zz",
        "https://fcm.googleapis.com/wp/dXNlcjE6QVBBOTFiRzEyMw",
        "https://updates.push.services.mozilla.com/wpush/v2/gAAAAABmxyz" + String(repeating: "A", count: 600),
        "https://updates.push.services.mozilla.com/wpush/v1/gAAAAABmxyz",
        "https://web.push.apple.com/QGuQyavXutnMH3ndCXQ8MzXUSL5pBFt4HmDFy5o0qI5cvh6RAcT_vd7ZS_",
        "https://wns2-par02p.notify.windows.com/w/?token=BQYAAADiqX%2bG%2fO4%3d",
        "https://db5p.notify.windows.com/w/?token=AwYAAAB",
        "https://fcm.googleapis.com:443/fcm/send/abc",
        "HTTPS://FCM.googleapis.com/fcm/send/abc",
    ])
    func realEndpointsAreTaken(_ endpoint: String) {
        #expect(PushEndpointPolicy().refusal(endpoint) == nil, "\(endpoint)")
    }

    /// libcurl 7.88 reads an octet with a leading zero as octal: `https://010.0.0.1/` connects to
    /// 8.0.0.1 (checked with curl_url_get), a public address the list does not name: refused, even
    /// with `--push-allow-private`.
    @Test(arguments: ["https://010.0.0.1/x", "https://10.0.0.010/x"])
    func anAddressLibcurlReadsOtherwiseIsRefused(_ endpoint: String) {
        #expect(PushEndpointPolicy(allowPrivate: true).refusal(endpoint) != nil, "\(endpoint)")
    }
}
