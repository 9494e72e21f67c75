import ChimeProtocol

/// Push delivery (PROTOCOL.md section 3.11): a device's registrations, and its outbox of pushes
/// that are due and not yet accepted by their push service.
///
/// A delivery is pushed once the broker has it: its `delivered` record carries the delivery as
/// published and the time the push expires (``PushCapture``), and applying the record puts one
/// ``PushJob`` per registration in the device's outbox. A job leaves the outbox only with a
/// `pushed` record (accepted, refused, expired), so after a kill the jobs that were due and not
/// accepted are in the outbox again, and are pushed again with the same identifiers.

/// What a delivery keeps for its pushes, from publication to record.
public struct PushCapture: Hashable, Sendable {
    /// The delivery as published (PROTOCOL.md section 5): what each platform's payload is made of.
    public var payload: [UInt8]
    /// When its pushes stop being tried (milliseconds).
    public var expiresAt: Int64

    public init(payload: [UInt8], expiresAt: Int64) {
        self.payload = payload
        self.expiresAt = expiresAt
    }
}

/// One push to make: a delivery to one registration.
public struct PushJob: Hashable, Sendable {
    public var deviceId: String
    public var fireId: String
    public var registration: PushRegistration
    /// The delivery as published.
    public var payload: [UInt8]
    public var firedAt: Instant
    public var expiresAt: Instant

    public init(
        deviceId: String,
        fireId: String,
        registration: PushRegistration,
        payload: [UInt8],
        firedAt: Instant,
        expiresAt: Instant
    ) {
        self.deviceId = deviceId
        self.fireId = fireId
        self.registration = registration
        self.payload = payload
        self.firedAt = firedAt
        self.expiresAt = expiresAt
    }

    public var key: PushJobKey { PushJobKey(deviceId: deviceId, fireId: fireId, registration: registration.id) }
}

/// Names a push: the device, the delivery and the registration.
public struct PushJobKey: Hashable, Sendable, CustomStringConvertible {
    public var deviceId: String
    public var fireId: String
    public var registration: String

    public init(deviceId: String, fireId: String, registration: String) {
        self.deviceId = deviceId
        self.fireId = fireId
        self.registration = registration
    }

    public var description: String { "\(deviceId)/\(fireId)/\(registration)" }
}

/// A push that ended: what a `pushed` journal record says.
public struct PushRecord: Hashable, Sendable {
    public var key: PushJobKey
    public var at: Instant
    public var outcome: PushOutcome
    /// The push service's reason (`Unregistered`, `UNREGISTERED`, an HTTP status), if any.
    public var reason: String?

    public init(key: PushJobKey, at: Instant, outcome: PushOutcome, reason: String? = nil) {
        self.key = key
        self.at = at
        self.outcome = outcome
        self.reason = reason
    }
}

/// A device's pushes not yet ended: found, added and removed in O(1) whatever their number, and
/// walked oldest first (for the bound, a snapshot, and a recovery).
struct Outbox: Sendable {
    /// Each job with the number of its coming, which its place in ``order`` carries too: a place
    /// whose number differs is stale (the job went, or went and came again later).
    private var jobs: [PushJobKey: (job: PushJob, seq: UInt64)] = [:]
    private var order: [(key: PushJobKey, seq: UInt64)] = []
    private var head = 0
    private var nextSeq: UInt64 = 0

    var count: Int { jobs.count }
    var isEmpty: Bool { jobs.isEmpty }

    func contains(_ key: PushJobKey) -> Bool { jobs[key] != nil }

    subscript(key: PushJobKey) -> PushJob? { jobs[key]?.job }

    /// Adds a job; one with the same key is replaced, keeping its place.
    mutating func insert(_ job: PushJob) {
        if let old = jobs[job.key] {
            jobs[job.key] = (job, old.seq)
            return
        }
        nextSeq += 1
        jobs[job.key] = (job, nextSeq)
        order.append((job.key, nextSeq))
    }

    @discardableResult
    mutating func remove(_ key: PushJobKey) -> PushJob? {
        defer { compact() }
        return jobs.removeValue(forKey: key)?.job
    }

    mutating func removeOldest() -> PushJob? {
        while head < order.count {
            let place = order[head]
            head += 1
            if let live = jobs[place.key], live.seq == place.seq {
                jobs[place.key] = nil
                compact()
                return live.job
            }
        }
        return nil
    }

    /// Removes the jobs `isGone` selects; returns them.
    mutating func removeAll(where isGone: (PushJob) -> Bool) -> [PushJob] {
        let gone = all.filter(isGone)
        for job in gone { jobs.removeValue(forKey: job.key) }
        compact()
        return gone
    }

    /// Oldest first.
    var all: [PushJob] {
        order[head...].compactMap { place in jobs[place.key].flatMap { $0.seq == place.seq ? $0.job : nil } }
    }

    private mutating func compact() {
        guard order.count - head > 2 * jobs.count + 16 else { return }
        order = order[head...].filter { jobs[$0.key]?.seq == $0.seq }
        head = 0
    }
}

/// A device's registrations and outbox. Only devices that use push have one.
final class DevicePush {
    var registrations: [PushRegistration] = []
    var outbox = Outbox()

    var isEmpty: Bool { registrations.isEmpty && outbox.isEmpty }
}

extension EngineConfiguration {
    /// The push flags: `--push-expiry`, the Web Push endpoint policy, and the outbox bound.
    public struct Push: Hashable, Sendable {
        /// Milliseconds a push is tried for, when the notification has no `expiresAfter`.
        public var expiry: Int64 = 86_400_000
        /// The Web Push endpoints a device may register.
        public var endpoints = PushEndpointPolicy()
        /// Pushes waiting per device, at most; past it the oldest expire.
        public var maxOutboxPerDevice = 1000
        /// The providers the worker has credentials for: a registration for another is refused.
        public var providers: Set<PushRegistration.Provider> = []

        public init() {}
    }
}

extension Engine {
    /// Checks a `device` command's push change: the endpoints against the policy, the count.
    func checkPush(_ change: PushChange, of deviceId: String) throws(ChimeError) {
        let field: String
        switch change {
        case .remove: return
        case .replace: field = "push"
        case .add: field = "addPush"
        }
        let current = devices[deviceId]?.push?.registrations ?? []
        let after = change.applied(to: current)
        for registration in after where !current.contains(registration) {
            guard configuration.push.providers.contains(registration.provider) else {
                throw ChimeError(
                    .invalidArgument,
                    field: field,
                    "\(field): this worker has no \(registration.provider.rawValue) credentials, so it cannot push there"
                )
            }
        }
        for registration in after {
            guard case .webPush(let endpoint, _, _) = registration.target,
                let why = configuration.push.endpoints.refusal(endpoint)
            else { continue }
            // Only a new registration can fail here: the ones kept passed when they came.
            guard !current.contains(registration) else { continue }
            throw ChimeError(.invalidArgument, field: field, "\(field): the endpoint \(why)")
        }
        guard after.count <= PushRegistration.maximumPerDevice else {
            throw ChimeError(
                .quotaExceeded,
                field: field,
                "\(field): a device holds at most \(PushRegistration.maximumPerDevice) push registrations"
            )
        }
    }

    /// Applies a push change to a device's registrations. Pushes waiting for a registration that
    /// goes end with it (`refused`, "registration removed"): a phone logged out or handed on gets
    /// nothing more.
    func applyPush(_ change: PushChange, to device: DeviceState, at: Instant) {
        let push = device.push ?? DevicePush()
        push.registrations = change.applied(to: push.registrations)
        var current: [String: PushRegistration] = [:]
        for registration in push.registrations { current[registration.id] = registration }
        // One replaced under its id with other fields (another environment, other keys): what
        // waits for it goes to it as it is now.
        for var job in push.outbox.all {
            if let now = current[job.registration.id], now != job.registration {
                job.registration = now
                push.outbox.insert(job)
            }
        }
        for job in push.outbox.removeAll(where: { current[$0.registration.id] == nil }) {
            pushTrail(job.key, outcome: .refused, at: at.milliseconds, reason: "registration removed", device)
        }
        device.push = push.isEmpty ? nil : push
    }

    /// What a delivery being published keeps for its pushes, if its device has registrations and
    /// the notification is pushed (not `channels: "mqtt"`).
    func capturePush(
        _ device: DeviceState,
        channels: Channels?,
        payload: [UInt8],
        due: Int64,
        expiresAfter: Int64?,
        now: Instant
    )
        -> PushCapture?
    {
        guard let push = device.push, !push.registrations.isEmpty, channels != .mqtt else { return nil }
        var expires = now.milliseconds + configuration.push.expiry
        if let expiresAfter { expires = min(expires, due + expiresAfter) }
        return PushCapture(payload: payload, expiresAt: expires)
    }

    /// A delivery was recorded: one job per registration the device has now, into its outbox
    /// (and ``newPushJobs``, unless recovering: a recovered engine hands its whole outbox over
    /// once, ``finishRecovery()``). A delivery too large for any push ends at once, `refused`.
    /// - Parameter entry: the delivery's history entry, if the device keeps one: it counts the
    ///   pushes, so that `history` can say which are still pending.
    func keepPush(_ capture: PushCapture, fireId: String, at: Instant, in device: DeviceState, entry: UInt64? = nil) {
        guard let push = device.push, !push.registrations.isEmpty else { return }
        if let entry, let r = device.receipts {
            r.log.update(entry) { $0.pushCount = UInt8(clamping: push.registrations.count) }
        }
        if capture.payload.count > Self.maxPushedDelivery {
            for registration in push.registrations {
                let key = PushJobKey(deviceId: device.id, fireId: fireId, registration: registration.id)
                let reason = "the delivery is \(capture.payload.count) bytes, more than \(Self.maxPushedDelivery)"
                pushTrail(key, outcome: .refused, at: at.milliseconds, reason: reason, device)
            }
            return
        }
        for registration in push.registrations {
            let job = PushJob(
                deviceId: device.id,
                fireId: fireId,
                registration: registration,
                payload: capture.payload,
                firedAt: at,
                expiresAt: Instant(milliseconds: capture.expiresAt)
            )
            push.outbox.insert(job)
            if !replaying { newPushJobs.append(job) }
        }
        // The bound: the oldest leave, as expired, with no record (replay drops the same ones).
        while push.outbox.count > configuration.push.maxOutboxPerDevice, let gone = push.outbox.removeOldest() {
            pushTrail(gone.key, outcome: .expired, at: at.milliseconds, reason: "outbox full", device)
        }
    }

    /// A push ended: out of the outbox; an unregistered registration goes with it.
    func applyPushed(_ record: PushRecord) {
        guard let device = devices[record.key.deviceId] else { return }
        willChange(device)
        pushTrail(record.key, outcome: record.outcome, at: record.at.milliseconds, reason: record.reason, device)
        if let push = device.push {
            let job = push.outbox.remove(record.key)
            if record.outcome == .unregistered, let gone = job?.registration {
                // The registration the push was made to, not one that replaced it since; its
                // other pushes end with it.
                push.registrations.removeAll { $0 == gone }
                for other in push.outbox.removeAll(where: { $0.registration == gone }) {
                    let reason = "registration removed"
                    pushTrail(other.key, outcome: .refused, at: record.at.milliseconds, reason: reason, device)
                }
            }
            if push.isEmpty { device.push = nil }
        }
        dropIfEmpty(device)
    }

    /// Whether a push is still in its device's outbox (not ended, not dropped).
    public func isPending(_ key: PushJobKey) -> Bool {
        devices[key.deviceId]?.push?.outbox.contains(key) == true
    }

    /// The push as the outbox holds it now (its registration as the device last gave it), if it
    /// has not ended.
    public func pendingJob(_ key: PushJobKey) -> PushJob? {
        devices[key.deviceId]?.push?.outbox[key]
    }

    /// The jobs put in outboxes since the last call (records applied, or a recovery): the worker
    /// starts pushing them.
    public func takeNewPushJobs() -> [PushJob] {
        defer { newPushJobs.removeAll() }
        return newPushJobs
    }

    /// Every job in every outbox, oldest first per device: what a recovered engine has to push.
    public var pendingPushJobs: [PushJob] {
        devices.values.flatMap { $0.push?.outbox.all ?? [] }
    }
}

extension Engine {
    /// Notes how a push ended in the history entry of its delivery, if the device keeps one.
    func pushTrail(_ key: PushJobKey, outcome: PushOutcome, at: Int64, reason: String?, _ device: DeviceState) {
        guard let r = device.receipts, let seq = r.log.seqs(of: key.fireId).last else { return }
        r.log.update(seq) {
            $0.push.append(PushTrail(registration: key.registration, outcome: outcome, at: at, reason: reason))
        }
    }
}

extension PushTrail {
    var json: JSONObject {
        var o: JSONObject = [
            "registration": .string(registration), "outcome": .string(outcome.rawValue), "at": .int(at),
        ]
        if let reason { o.append("reason", .string(reason)) }
        return o
    }

    /// The `push` member of a history entry in a snapshot.
    static func decode(_ e: FieldReader) throws(ChimeError) -> [PushTrail] {
        var trail: [PushTrail] = []
        for (i, item) in (try e.array("push", maxCount: .max) ?? []).enumerated() {
            guard case .object(let o) = item else { throw .invalid(e.name("push[\(i)]"), "not an object") }
            let t = FieldReader(o, path: e.name("push[\(i)]."))
            trail.append(
                PushTrail(
                    registration: try t.required(try t.string("registration"), "registration"),
                    outcome: try t.required(PushOutcome(rawValue: try t.string("outcome") ?? ""), "outcome"),
                    at: try t.required(try t.integer("at", in: Int64.min...Int64.max), "at"),
                    reason: try t.string("reason")
                )
            )
        }
        return trail
    }
}

extension Engine {
    /// Reads a snapshot's `P` entry (``SnapshotCoding/encode(_:)``): the registrations, and the
    /// outbox as deliveries, each with the registrations it is still to be pushed to.
    func restorePush(_ r: FieldReader) throws(ChimeError) {
        let device = device(try r.required(try r.string("device"), "device"))
        let push = DevicePush()
        for (i, item) in (try r.array("registrations", maxCount: .max) ?? []).enumerated() {
            push.registrations.append(try PushRegistration.decode(item, path: "registrations[\(i)]."))
        }
        let all = Int64.min...Int64.max
        for (i, item) in (try r.array("outbox", maxCount: .max) ?? []).enumerated() {
            guard case .object(let o) = item else { throw .invalid("outbox[\(i)]", "not an object") }
            let e = FieldReader(o, path: "outbox[\(i)].")
            let fireId = try e.required(try e.string("fireId", maxLength: .max), "fireId")
            let payload = Array(try e.required(try e.string("payload", maxLength: .max), "payload").utf8)
            let firedAt = Instant(milliseconds: try e.required(try e.integer("firedAt", in: all), "firedAt"))
            let expires = Instant(milliseconds: try e.required(try e.integer("expires", in: all), "expires"))
            for (j, registration) in (try e.array("to", maxCount: .max) ?? []).enumerated() {
                push.outbox.insert(
                    PushJob(
                        deviceId: device.id,
                        fireId: fireId,
                        registration: try PushRegistration.decode(registration, path: e.name("to[\(j)].")),
                        payload: payload,
                        firedAt: firedAt,
                        expiresAt: expires
                    )
                )
            }
        }
        device.push = push.isEmpty ? nil : push
    }
}

extension Engine {
    /// The most plaintext a Web Push record holds (4096 bytes encrypted), and the least of the
    /// three platforms' limits: a delivery pushed must fit it.
    public static let maxPushedDelivery = 3993

    /// The largest a delivery of `spec` to `deviceId` can be: its content as stored, the longest of
    /// its `alertBodies`, its ids, and the members every delivery has (dates, counts, flags, badge).
    static func deliveryBound(_ spec: ResolvedNotification, deviceId: String) -> Int {
        let content = spec.encoded?.content.count ?? 0
        let longestBody = spec.spec.alertBodies?.map { JSON.string($0).bytes.count }.max() ?? 0
        return content + longestBody + deviceId.utf8.count + 2 * spec.id.utf8.count + 320
    }

    /// `payload_too_large` for a notification whose deliveries could not be pushed, when the
    /// device has push registrations and the notification is pushed (PROTOCOL.md section 3.11). One
    /// scheduled before the device registered is checked when it fires: its pushes end `refused`.
    func checkPushFits(_ spec: ResolvedNotification, device: DeviceState?, path: String) throws(ChimeError) {
        guard let device, device.push?.registrations.isEmpty == false, spec.spec.channels != .mqtt else { return }
        let bound = Self.deliveryBound(spec, deviceId: device.id)
        guard bound > Self.maxPushedDelivery else { return }
        throw ChimeError(
            .payloadTooLarge,
            field: path.isEmpty ? nil : String(path.dropLast()),
            "\(path)its deliveries could be \(bound) bytes, more than the \(Self.maxPushedDelivery) a push "
                + "carries; shorten its texts or userInfo, or give it channels \"mqtt\""
        )
    }
}
