import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

/// From a second hostile review of ``PushDispatch``: a model checked against random sequences of jobs,
/// answers, engine-side ends and time, and the cases the model found or the reading suggested.
@Suite struct PushDispatchReviewTests {
    /// SplitMix64: reproducible from the seed the test names.
    struct Random: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func registration(_ provider: PushRegistration.Provider, _ device: String) -> PushRegistration {
        switch provider {
        case .apns:
            let hex = Array(device.utf8).map { String($0, radix: 16) }.joined()
            return PushRegistration(
                .apns(token: String((hex + String(repeating: "0", count: 64)).prefix(64)), topic: "t", sandbox: false)
            )
        case .fcm: return PushRegistration(.fcm(token: "fcm-\(device)"))
        case .webpush:
            return PushRegistration(
                .webPush(endpoint: "https://fcm.googleapis.com/wp/\(device)", p256dh: "B", auth: "a")
            )
        }
    }

    static func job(
        _ device: String,
        _ fire: String,
        _ provider: PushRegistration.Provider,
        expires: Int64
    ) -> PushJob {
        PushJob(
            deviceId: device,
            fireId: fire,
            registration: registration(provider, device),
            payload: [],
            firedAt: Instant(milliseconds: 0),
            expiresAt: Instant(milliseconds: expires)
        )
    }

    static func sends(_ steps: [PushDispatch.Step]) -> [PushJob] {
        steps.compactMap { if case .send(let job, _) = $0 { return job } else { return nil } }
    }

    /// Every job added ends exactly once with a record, or is dropped only once the engine no
    /// longer has it; no job is in flight twice; the counters match what is in flight; the limits
    /// hold; a turn never leaves a wake-up at or before now (the loop would spin).
    @Test(arguments: 0..<40)
    func aModelOfTheEngineAndTheServicesFindsNoLostDoubledOrLeakedPush(seed: Int) {
        var random = Random(state: UInt64(seed) &* 7919 &+ 1)
        let limits = PushDispatch.Limits(perProvider: 1 + Int.random(in: 0..<4, using: &random), perDevice: 2)
        var dispatch = PushDispatch(limits: limits)
        var now: Int64 = 0
        var all: [PushJobKey: PushJob] = [:]
        var pending = Set<PushJobKey>()
        var inFlight: [PushJobKey: PushJob] = [:]
        var journaled: [PushJobKey: Int] = [:]
        var fires = 0
        let devices = ["d0", "d1", "d2"]

        func check(_ where_: String) {
            for provider in PushRegistration.Provider.allCases {
                let modelled = inFlight.values.filter { $0.registration.provider == provider }.count
                #expect(dispatch.inFlight(provider) == modelled, "\(where_): \(provider) in flight")
                #expect(modelled <= limits.perProvider, "\(where_): \(provider) over its limit")
            }
            for device in devices {
                for provider in PushRegistration.Provider.allCases {
                    let attempts = inFlight.values.filter {
                        $0.deviceId == device && $0.registration.provider == provider
                    }
                    #expect(attempts.count <= limits.perDevice, "\(where_)")
                }
            }
        }

        func turn() {
            let steps = dispatch.due(now: Instant(milliseconds: now)) { pending.contains($0) }
            for step in steps {
                switch step {
                case .send(let job, _):
                    #expect(inFlight[job.key] == nil, "sent twice concurrently: \(job.key)")
                    #expect(pending.contains(job.key), "sent a job the engine ended: \(job.key)")
                    #expect(journaled[job.key] == nil, "sent a job that ended: \(job.key)")
                    inFlight[job.key] = job
                case .record(let record):
                    #expect(record.outcome == .expired)
                    #expect(now >= all[record.key]!.expiresAt.milliseconds)
                    #expect(inFlight[record.key] == nil)
                    if pending.remove(record.key) != nil { journaled[record.key, default: 0] += 1 }
                }
            }
            check("after a turn at \(now)")
            #expect(!dispatch.needsTurn(now: Instant(milliseconds: now)), "a turn left work for now")
            if let wake = dispatch.nextWake { #expect(wake.milliseconds > now, "busy loop: wake \(wake) at \(now)") }
        }

        func finish(_ key: PushJobKey, _ result: PushAttemptResult) {
            let wasInFlight = inFlight.removeValue(forKey: key) != nil
            let record = dispatch.finished(key, result, now: Instant(milliseconds: now))
            if !wasInFlight {
                #expect(record == nil, "a stale answer ended a push: \(key)")
                return
            }
            switch result {
            case .transient: #expect(record == nil)
            default: #expect(record != nil)
            }
            // The worker journals it only if the engine still has it (WorkerStateMachine+Push).
            if record != nil, pending.remove(key) != nil { journaled[key, default: 0] += 1 }
            check("after finishing \(key)")
        }

        for _ in 0..<400 {
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<30:
                fires += 1
                let device = devices.randomElement(using: &random)!
                let provider = PushRegistration.Provider.allCases.randomElement(using: &random)!
                let job = Self.job(
                    device,
                    "n@\(fires)",
                    provider,
                    expires: now + Int64.random(in: 0...30_000, using: &random)
                )
                all[job.key] = job
                pending.insert(job.key)
                dispatch.add(job)
            case 30..<35:
                // Handed again (a recovered slot): not taken twice.
                if let job = all.values.randomElement(using: &random) { dispatch.add(job) }
            case 35..<40:
                // The engine ends it (registration removed, slot gone).
                if let key = pending.randomElement(using: &random) { pending.remove(key) }
            case 40..<70:
                if let key = inFlight.keys.randomElement(using: &random) {
                    let results: [PushAttemptResult] = [
                        .accepted, .unregistered(reason: "410"), .refused(reason: "400"),
                        .transient(reason: "503", retryAfter: nil),
                        .transient(reason: "429", retryAfter: Int64.random(in: -5...5000, using: &random)),
                    ]
                    finish(key, results.randomElement(using: &random)!)
                }
            case 70..<73:
                // An answer for an attempt that is not in flight.
                if let key = all.keys.randomElement(using: &random), inFlight[key] == nil {
                    finish(key, .accepted)
                }
            case 73..<90:
                turn()
            default:
                now += Int64.random(in: 0...3000, using: &random)
            }
        }

        // Drain: the services answer everything, time runs on; every job must end.
        for _ in 0..<10_000 where dispatch.count > 0 {
            now += 1000
            turn()
            for key in Array(inFlight.keys) { finish(key, .accepted) }
        }
        #expect(dispatch.count == 0, "jobs left: \(dispatch.count)")
        #expect(dispatch.totalInFlight == 0)
        for key in all.keys {
            let count = journaled[key] ?? 0
            #expect(count <= 1, "\(key) journaled \(count) times")
            #expect(count == 1 || !pending.contains(key), "\(key) neither ended nor dropped")
        }
    }

    /// A job held by its device's bound expires at its time, not when one of the device's
    /// attempts ends (which a service that never answers delays by the whole timeout).
    @Test func aHeldJobExpiresAtItsTime() {
        var dispatch = PushDispatch(limits: .init(perProvider: 100, perDevice: 1))
        dispatch.add(Self.job("d", "a@0", .apns, expires: 600_000))
        dispatch.add(Self.job("d", "b@0", .apns, expires: 1000))
        #expect(Self.sends(dispatch.due(now: Instant(milliseconds: 0)) { _ in true }).map(\.fireId) == ["a@0"])
        // The attempt for a@0 hangs. b@0's time passes.
        let later = dispatch.due(now: Instant(milliseconds: 5000)) { _ in true }
        let expired = PushRecord(
            key: Self.job("d", "b@0", .apns, expires: 1000).key,
            at: Instant(milliseconds: 5000),
            outcome: .expired
        )
        #expect(later == [.record(expired)])
        #expect(dispatch.nextWake != nil, "nothing wakes the loop for the held job's expiry")
    }

    /// PROTOCOL.md 3.11: "a push service that never answers holds only its own share: ... no
    /// other provider waits for it": the bound is per device and provider, so a device's APNs
    /// pushes do not wait for its Web Push endpoint that never answers.
    @Test func aDeviceHungOnOneProviderStillPushesToAnother() {
        var dispatch = PushDispatch(limits: .init(perProvider: 100, perDevice: 2))
        dispatch.add(Self.job("d", "a@0", .webpush, expires: 600_000))
        dispatch.add(Self.job("d", "b@0", .webpush, expires: 600_000))
        #expect(Self.sends(dispatch.due(now: Instant(milliseconds: 0)) { _ in true }).count == 2)
        // Both Web Push attempts hang; an APNs push for the same device comes.
        dispatch.add(Self.job("d", "c@0", .apns, expires: 600_000))
        let sent = Self.sends(dispatch.due(now: Instant(milliseconds: 1)) { _ in true })
        #expect(sent.map(\.registration.provider) == [.apns], "APNs waits for a hung Web Push endpoint")
    }

    /// "A turn costs what it hands out": each attempt that ends releases one of its device's held
    /// jobs, so draining one device's n jobs costs O(n), not O(n²/perDevice).
    @Test func releasingAHeldDeviceCostsWhatItHandsOut() {
        let n = 2000
        var dispatch = PushDispatch(limits: .init(perProvider: 1000, perDevice: 4))
        for i in 0..<n { dispatch.add(Self.job("d", "n@\(i)", .fcm, expires: 86_400_000)) }
        var asked = 0
        var turns = 0
        let now = Instant(milliseconds: 0)
        while dispatch.count > 0 && turns < 10 * n {
            turns += 1
            let sent = Self.sends(
                dispatch.due(now: now) { _ in
                    asked += 1
                    return true
                }
            )
            for job in sent { _ = dispatch.finished(job.key, .accepted, now: now) }
        }
        #expect(dispatch.count == 0)
        #expect(asked <= 3 * n, "draining \(n) jobs of one device asked about \(asked)")
    }

    /// Held jobs of a device that the engine ended (its registration removed) stay until one of
    /// the device's attempts ends; they are not sent. A positive control for the model: they are
    /// dropped once released.
    @Test func heldJobsTheEngineEndedAreDroppedWhenReleased() {
        var dispatch = PushDispatch(limits: .init(perProvider: 100, perDevice: 1))
        dispatch.add(Self.job("d", "a@0", .fcm, expires: 600_000))
        dispatch.add(Self.job("d", "b@0", .fcm, expires: 600_000))
        let first = Self.sends(dispatch.due(now: Instant(milliseconds: 0)) { _ in true })
        #expect(first.count == 1)
        #expect(dispatch.count == 2)
        _ = dispatch.finished(first[0].key, .accepted, now: Instant(milliseconds: 1))
        #expect(dispatch.due(now: Instant(milliseconds: 1)) { _ in false }.isEmpty)
        #expect(dispatch.count == 0)
    }
}
