import ChimeProtocol

/// Limits and thresholds of the engine (PROTOCOL.md section 6).
public struct EngineConfiguration: Hashable, Sendable {
    /// `--min-repeat-seconds`: repeats more often than this are rejected.
    public var minRepeatSeconds: Int64 = 60
    /// `--max-pending-per-device`.
    public var maxPendingPerDevice: Int = 1000
    /// `--max-bytes-per-device`: the stored size of a device's notifications, at most.
    public var maxBytesPerDevice: Int = 1_048_576
    /// A delivery sent this long or longer after its due time is `late`; an occurrence not sent
    /// within it was *missed* (PROTOCOL.md section 2, `misfire`).
    public var lateThreshold: Int64 = 1000
    /// `misfire: all` sends at most this many missed occurrences.
    public var maxMissedDeliveries = 1000
    /// How far `missed` counts before it stops counting.
    public var maxMissedCount = 100_000
    /// Receipts, the inbox and history.
    public var receipts = Receipts()
    /// What computing all of a device's rules again may cost, in candidate date-times (the unit of
    /// ``RecurrenceAllowance``): past it, a `schedule` or `update` with a rule is `quota_exceeded`.
    /// A new zone for a device whose rules follow it, `resume` of them all, and a start compute
    /// them all at once, so this bounds how long one device's rules can hold the worker (about
    /// 60 to 180 ms, with one command's allowance over it).
    public var maxRuleWorkPerDevice = 20_000_000
    /// Push delivery.
    public var push = Push()

    public init(minRepeatSeconds: Int64 = 60, maxPendingPerDevice: Int = 1000, maxBytesPerDevice: Int = 1_048_576) {
        self.minRepeatSeconds = minRepeatSeconds
        self.maxPendingPerDevice = maxPendingPerDevice
        self.maxBytesPerDevice = maxBytesPerDevice
    }
}

/// A delivery to publish to `P/{deviceId}/notifications`.
public struct Delivery: Hashable, Sendable {
    /// Identifies the delivery to ``Engine/acknowledged(_:)`` once the broker has it.
    public var token: UInt64
    public var deviceId: String
    public var fireId: String
    public var payload: [UInt8]
    /// The MQTT 5 message expiry: seconds left before `expiresAfter` runs out.
    public var messageExpiry: UInt32?
    /// When it was due (its `fireDate`), to measure lateness.
    public var due: Instant
    /// Whose doing its lateness is: the worker's, or expected (a past date, a catch-up, quiet hours).
    public var lateness = Lateness.worker
    /// Published to the notifications topic; false for `channels: "push"`, whose delivery is
    /// recorded at once (``Engine/acknowledged(_:)``) and only pushed.
    public var mqtt = true
}

/// Whose doing a delivery's lateness (published minus due) is, decided where the delivery is made
/// (``Engine/tick(now:limit:)``), so that the worker measures the lateness it causes while it runs
/// apart from lateness it was asked for or that an outage left behind: one user's one-shot dated
/// 2020 must not make the worker's p99 seven years.
public enum Lateness: UInt8, Hashable, Sendable, CaseIterable {
    /// Due while the engine was delivering, after the notification was scheduled: any lateness is
    /// the worker's (stats `lateness`, `chime_delivery_lateness_seconds`).
    case worker
    /// Due before the notification was scheduled, resumed or given a new time: a one-shot whose
    /// date has passed fires at once (PROTOCOL.md section 2).
    case scheduledInThePast
    /// Due while the engine could not deliver (chimed stopped, the broker away, the slot not yet
    /// served), and delivered on its return under the notification's `misfire`.
    case catchUp
    /// Held by the device's quiet hours and delivered when they ended (`deferred`).
    case quietHours

    /// Lateness the worker did not cause (stats `expectedLateness`,
    /// `chime_delivery_expected_lateness_seconds`).
    public var isExpected: Bool { self != .worker }

    /// The rule, for an occurrence due at `due` (its instant `occurrence` minus the lead time).
    /// - Parameters:
    ///   - pendingFrom: the notification's first occurrence instant still to deliver when it was
    ///     scheduled or resumed (then the time of that command plus the lead time): an occurrence
    ///     before it was due before the command.
    ///   - deliveringSince: since when the engine has been able to deliver without a break.
    ///   - deferred: held by quiet hours.
    public static func of(
        due: Int64,
        occurrence: Int64,
        pendingFrom: Int64,
        deliveringSince: Int64,
        deferred: Bool
    ) -> Lateness {
        if occurrence < pendingFrom { return .scheduledInThePast }
        if due < deliveringSince { return .catchUp }
        return deferred ? .quietHours : .worker
    }
}

/// What the engine asks its owner to do after a tick.
public enum EngineOutput: Hashable, Sendable {
    case publish(Delivery)
    /// Append to the journal, then pass to ``Engine/apply(_:)``.
    case write(JournalEntry)
}

/// What the engine makes of a command.
public enum Decision: Hashable, Sendable {
    /// Answer at once; nothing changes (reads, errors, no-ops).
    case reply(Reply)
    /// Append the entry to the journal; once it is written, ``Engine/apply(_:)`` it and reply
    /// with what `apply` returns (after the journal is synced).
    case write(JournalEntry)
}

/// Chime's scheduler as a state machine, with no I/O and no clock.
///
/// Its owner feeds it events: a command (``decide(_:now:random:)``), a journal entry written
/// (``apply(_:)``), time passing (``tick(now:limit:)``), a delivery acknowledged by the broker
/// (``acknowledged(_:)``), the broker connection coming and going (``setConnected(_:)``). It
/// answers with decisions and outputs: reply this, journal that, publish this, wake me at
/// ``nextWake``. Every durable change goes through `apply`, live and in recovery alike.
///
/// Not thread-safe: one owner thread calls it. ``snapshot`` hands a frozen, `Sendable` copy of
/// the durable state to another thread.
public final class Engine {
    public let configuration: EngineConfiguration
    var devices: [String: DeviceState] = [:]
    var zones = ZoneInterner()
    var nextVersion: UInt64 = 1
    var heap = TimerHeap()
    var inflight: [UInt64: InFlight] = [:]
    /// Notifications whose last delivery the broker refused, with how many times in a row: their
    /// retries back off (``publishRefused(_:now:)``). Cleared by an acknowledged delivery.
    var refusals: [ObjectIdentifier: Int] = [:]
    /// Pushes put in outboxes and not yet handed to the worker (``takeNewPushJobs()``).
    var newPushJobs: [PushJob] = []
    /// The keys of recently applied commands, to recognise redeliveries.
    var commandKeys = CommandKeyWindow()
    var nextToken: UInt64 = 1
    var connected = false
    /// Since when the engine has delivered without a break (``setConnected(_:now:)``): what was due
    /// before was delivered by a catch-up (``Lateness/catchUp``).
    var deliveringSince = Int64.min
    /// What recovery alone holds, from ``beginRecovery()`` to ``finishRecovery()``; nil while the
    /// engine is live, so that none of it outlives recovery or is read by the live engine.
    var restoring: Restoring?
    /// While replaying the journal, derived state (next occurrences, timers) is left for
    /// ``finishRecovery()`` to build once.
    var replaying: Bool { restoring != nil }
    /// Timers are being set for everything at once: collected, then ordered in one pass (through
    /// recovery and its last pass in ``finishRecovery()``).
    var arming = false
    /// Every device in the order it was created, a dropped one left in place until they are half
    /// the list. Unlike the table's, these positions stay put as devices come and go, so a snapshot
    /// walks the devices a part at a time.
    var deviceOrder: [DeviceState] = []
    /// How many in ``deviceOrder`` are dropped.
    var deviceOrderDropped = 0
    /// The devices in id order, kept by `find` alone (``DeviceDirectory``).
    var directory = DeviceDirectory()
    /// The snapshot being taken a part at a time (``beginSnapshot()``), if one is.
    var capture: SnapshotCapture?
    /// Flipped as each snapshot begins: a notification whose ``StoredNotification/snapshotMark``
    /// equals it is in that snapshot already, or was attached after it began.
    var snapshotParity = false
    /// How many listed notifications are held, over all devices.
    public internal(set) var pendingCount = 0
    /// How many notifications the devices' tables hold, snoozes included.
    var heldCount = 0
    /// The fingerprints of the zone rules recorded in the snapshot and the journal
    /// (``JournalEntry/zoneRules(at:zones:)``): what the engine last said it computes with.
    public internal(set) var zoneFingerprints: [String: UInt64] = [:]

    public init(configuration: EngineConfiguration = EngineConfiguration()) {
        self.configuration = configuration
    }

    /// How many devices have state.
    public var deviceCount: Int { devices.count }
    /// Deliveries published and not yet acknowledged.
    public var inflightCount: Int { inflight.count }

    /// Tells the engine whether deliveries can be published. While disconnected nothing fires;
    /// what falls due meanwhile is delivered on reconnection under each notification's `misfire`.
    /// - Parameter now: when it became so: an occurrence due before the engine was connected is a
    ///   catch-up (``Lateness/catchUp``), whose lateness is not the worker's. Without it (tests that
    ///   do not measure lateness) every delivery counts as the worker's.
    public func setConnected(_ connected: Bool, now: Instant? = nil) {
        if connected && !self.connected, let now { deliveringSince = now.milliseconds }
        self.connected = connected
    }

    /// When the engine next has something to do (nil: nothing scheduled, or disconnected).
    public var nextWake: Instant? {
        guard connected else { return nil }
        return heap.top.map { Instant(milliseconds: $0.due) }
    }

    /// The device's state, created when missing.
    func device(_ id: String) -> DeviceState {
        if let d = devices[id] { return d }
        let d = DeviceState(id: id)
        devices[id] = d
        // Not the snapshot being taken's: it was not there when that began.
        d.snapshotMark = snapshotParity
        deviceOrder.append(d)
        return d
    }

    /// Drops a device that holds nothing any more.
    func dropIfEmpty(_ device: DeviceState) {
        guard device.isEmpty, !device.dropped else { return }
        willChange(device)
        devices.removeValue(forKey: device.id)
        device.dropped = true
        deviceOrderDropped += 1
        // Not while a snapshot walks it.
        if capture == nil, deviceOrderDropped * 2 > deviceOrder.count {
            deviceOrder.removeAll(where: \.dropped)
            deviceOrderDropped = 0
        }
    }

    // MARK: - Commands

    /// Decides what a command does. Reads and errors are answered at once; changes come back
    /// as a journal entry. Nothing changes until the entry is applied.
    public func decide(_ request: Request, now: Instant, random: inout some RandomNumberGenerator) -> Decision {
        if request.op.changesState, let key = request.key,
            commandKeys.contains(key, device: request.deviceId, now: now)
        {
            return .reply(Reply(request: request, result: .duplicate))
        }
        do throws(ChimeError) {
            switch request.command {
            case .schedule(let notifications, let replace, let batch):
                return try decideSchedule(request, notifications, replace, batch, now, &random)
            case .update(let id, let patch):
                return try decideUpdate(request, id, patch, now, &random)
            case .cancel(let selector):
                let ids = selectedIds(request.deviceId, selector)
                if ids.isEmpty { return .reply(Reply(request: request, result: .cancelled(ids: []))) }
                return .write(.cancel(deviceId: request.deviceId, at: now, ids: ids))
            case .pause(let selector), .resume(let selector):
                let enable = request.op == .resume
                let ids = selectedIds(request.deviceId, selector)
                if ids.isEmpty {
                    return .reply(Reply(request: request, result: enable ? .resumed(ids: []) : .paused(ids: [])))
                }
                return .write(.setEnabled(deviceId: request.deviceId, at: now, ids: ids, enabled: enable))
            case .list(let match, let limit, let cursor):
                return .reply(Reply(request: request, result: .listed(list(request.deviceId, match, limit, cursor))))
            case .preview(let target, let count, let from):
                let (dates, calendarDates) = try preview(request.deviceId, target, count, from ?? now, &random)
                return .reply(
                    Reply(request: request, result: .previewed(fireDates: dates, calendarDates: calendarDates))
                )
            case .ack(let fireIds, let badge):
                // Nothing new (acknowledged already, or unknown): answered without a journal record.
                let outcome = ackOutcome(request.deviceId, fireIds, now: now.milliseconds)
                if outcome.new.isEmpty {
                    return .reply(Reply(request: request, result: .acknowledged(count: 0, unknown: outcome.unknown)))
                }
                return .write(.ack(deviceId: request.deviceId, at: now, fireIds: fireIds, badge: badge))
            case .inbox(let limit, let cursor):
                return .reply(
                    Reply(
                        request: request,
                        result: try inboxPage(request.deviceId, limit: limit, cursor: cursor, now: now)
                    )
                )
            case .history(let since, let limit):
                return .reply(
                    Reply(request: request, result: historyPage(request.deviceId, since: since, limit: limit, now: now))
                )
            case .device(let update):
                if let change = update.push { try checkPush(change, of: request.deviceId) }
                if update.isEmpty {
                    return .reply(Reply(request: request, result: .device(deviceStatus(request.deviceId))))
                }
                return .write(.device(deviceId: request.deviceId, at: now, update: update))
            case .snooze(let id, let after):
                guard devices[request.deviceId]?.notifications[id]?.isListed == true else {
                    throw ChimeError(.notFound, field: "id", "id: no notification \(quoted(id)) on this device")
                }
                return .write(
                    .snooze(deviceId: request.deviceId, at: now, id: id, due: now.adding(milliseconds: after))
                )
            }
        } catch {
            return .reply(Reply(request: request, error: error))
        }
    }

    private func decideSchedule(
        _ request: Request,
        _ notifications: [NotificationSpec],
        _ replace: Selector?,
        _ batch: Bool,
        _ now: Instant,
        _ random: inout some RandomNumberGenerator
    ) throws(ChimeError) -> Decision {
        let device = devices[request.deviceId]
        var resolved: [ResolvedNotification] = []
        resolved.reserveCapacity(notifications.count)
        // One allowance for the whole batch: a thousand costly rules cost what one command may.
        var allowance = RecurrenceAllowance()
        for (i, spec) in notifications.enumerated() {
            let path = batch ? "notifications[\(i)]." : ""
            let spec = try resolve(spec, path: path, deviceZone: device?.timeZone, now: now, random: &random)
            try checkFires(spec, path: path, deviceZone: device?.timeZone, now: now, allowance: &allowance)
            // Written once here for the quota, the journal and the engine's copy.
            let encoded = spec.encodedOnce()
            try checkPushFits(encoded, device: device, path: path)
            resolved.append(encoded)
        }
        let replaced = replace.map { selectedIds(request.deviceId, $0) } ?? []
        // Quota: what remains after `replace`, plus ids not already there.
        let existing = device?.notifications ?? NotificationTable()
        let removed = Set(replaced)
        var listed = (device?.listedCount ?? 0) - removed.count
        for spec in resolved where existing[spec.id] == nil || removed.contains(spec.id) {
            listed += 1
        }
        if listed > configuration.maxPendingPerDevice {
            throw ChimeError(
                .quotaExceeded,
                "the device would hold \(listed) notifications, more than --max-pending-per-device \(configuration.maxPendingPerDevice)"
            )
        }
        // Bytes: what stays, plus the new ones (each notification replaced counted once).
        var bytes = device?.totalStoredBytes ?? 0
        var leaving = removed
        for id in replaced { if let old = existing[id], old.isListed { bytes -= old.storedBytes } }
        for spec in resolved {
            bytes += spec.encoded!.listed.count
            // A set only for a batch: one notification cannot name its own id twice.
            guard resolved.count == 1 ? !removed.contains(spec.id) : leaving.insert(spec.id).inserted else { continue }
            if let old = existing[spec.id], old.isListed { bytes -= old.storedBytes }
        }
        try checkBytesQuota(bytes)
        if let device, resolved.contains(where: { $0.spec.rrule != nil }) {
            // What stays of the device's rules: those replaced, by `replace` or by id, go.
            var staying = device.ruleWorkTotal
            for id in leaving.union(resolved.map(\.id)) { staying -= device.ruleWork[id] ?? 0 }
            try checkRuleWork(staying)
        }
        return .write(.schedule(deviceId: request.deviceId, at: now, replaced: replaced, notifications: resolved))
    }

    /// What a new notification counts against `--max-bytes-per-device`: its size as it will be
    /// listed, which is at least what is stored.
    private static func listedBytes(_ spec: ResolvedNotification) -> Int {
        var counter = JSONByteCount()
        NotificationCoding.write(spec.spec, to: &counter)
        return counter.count
    }

    /// `quota_exceeded` when the rules a device keeps already cost more than
    /// ``EngineConfiguration/maxRuleWorkPerDevice`` to compute again: a new one would add to the
    /// work that a new zone, `resume` of all, or a start does at once. (What they cost is known once
    /// they are armed, so the device ends at most one command's allowance over it.)
    private func checkRuleWork(_ staying: Int) throws(ChimeError) {
        guard staying > configuration.maxRuleWorkPerDevice else { return }
        throw ChimeError(
            .quotaExceeded,
            "the device's rules need \(staying) candidate date-times to compute again, more than the "
                + "\(configuration.maxRuleWorkPerDevice) a device may hold; cancel some or simplify them"
        )
    }

    /// `quota_exceeded` when the device would hold more than `--max-bytes-per-device`.
    private func checkBytesQuota(_ bytes: Int) throws(ChimeError) {
        guard bytes > configuration.maxBytesPerDevice else { return }
        throw ChimeError(
            .quotaExceeded,
            "the device would hold \(bytes) bytes of notifications, more than --max-bytes-per-device \(configuration.maxBytesPerDevice)"
        )
    }

    /// Rejects a notification that can never fire, or whose zone is unknown.
    private func checkFires(
        _ spec: ResolvedNotification,
        path: String,
        deviceZone: Zone?,
        now: Instant,
        allowance: inout RecurrenceAllowance
    ) throws(ChimeError) {
        if spec.spec.isRepeating || spec.spec.exdates != nil {
            _ = try validatedNext(spec, path: path, deviceZone: deviceZone, now: now, allowance: &allowance)
        } else {
            // A plain one-shot always fires (at once if its time has passed): only its zone
            // needs checking.
            _ = try zoneOf(spec.spec, path: path, deviceZone: deviceZone)
        }
    }

    /// `update`: the notification's fields with the patch applied, checked as a `schedule` of them
    /// would be.
    private func decideUpdate(
        _ request: Request,
        _ id: String,
        _ patch: JSONObject,
        _ now: Instant,
        _ random: inout some RandomNumberGenerator
    ) throws(ChimeError) -> Decision {
        guard let device = devices[request.deviceId], let n = device.notifications[id], n.isListed else {
            throw ChimeError(.notFound, field: "id", "id: no notification \(quoted(id)) on this device")
        }
        var fields = NotificationCoding.encode(n.spec.spec)
        // Its switch as it is now (pause and resume change it), not as it was scheduled.
        fields[NotificationField.enabled.wireName] = n.enabled ? JSON?.none : false
        for (key, value) in patch {
            guard let field = NotificationField(rawValue: key) else { continue }
            if !value.isNull { for other in field.excludes { fields[other.wireName] = nil } }
            fields[key] = value.isNull ? JSON?.none : value
        }
        // Each patched field was checked with the command's limits by the decoder; the kept ones
        // were accepted before.
        let spec = try NotificationCoding.decode(FieldReader(fields), limits: nil)
        let resolved = try resolve(spec, path: "", deviceZone: device.timeZone, now: now, random: &random)
        var allowance = RecurrenceAllowance()
        try checkFires(resolved, path: "", deviceZone: device.timeZone, now: now, allowance: &allowance)
        try checkBytesQuota(device.totalStoredBytes - n.storedBytes + Self.listedBytes(resolved))
        // Encoded only for a device that pushes: most updates need no size.
        if device.push != nil { try checkPushFits(resolved.encodedOnce(), device: device, path: "") }
        if resolved.spec.rrule != nil { try checkRuleWork(device.ruleWorkTotal - (device.ruleWork[id] ?? 0)) }
        return .write(.update(deviceId: request.deviceId, at: now, notification: resolved))
    }

    /// Fills in what the client left to the worker: the id, `after` and `alignTo` turned into a
    /// `fireDate`, and the seed for `alertBodies`.
    func resolve(
        _ input: NotificationSpec,
        path: String,
        deviceZone: Zone?,
        now: Instant,
        random: inout some RandomNumberGenerator
    ) throws(ChimeError) -> ResolvedNotification {
        var spec = input
        let id = spec.id ?? makeUUID(&random)
        var fireDate = spec.fireDate
        if let after = spec.after {
            let earliest = now.adding(milliseconds: after)
            if let alignTo = spec.alignTo {
                let zone = try zoneOf(spec, path: path, deviceZone: deviceZone)
                let local = zone.localDateTime(at: earliest)
                var day = LocalDateTime(
                    year: local.year,
                    month: local.month,
                    day: local.day,
                    hour: alignTo.hour,
                    minute: alignTo.minute,
                    second: alignTo.second
                )
                if zone.instant(for: day) < earliest {
                    let next = civilFromDays(daysFromCivil(year: day.year, month: day.month, day: day.day) + 1)
                    day.year = next.year
                    day.month = next.month
                    day.day = next.day
                }
                fireDate = .local(day)
            } else {
                fireDate = .instant(earliest)
            }
        }
        if spec.alertBodies != nil { spec.seed = random.next() }
        guard let fireDate else {
            // The decoder requires fireDate or after.
            throw ChimeError(.internal, field: path + "fireDate", "\(path)fireDate: missing")
        }
        return ResolvedNotification(id: id, fireDate: fireDate, spec)
    }

    func zoneOf(_ spec: NotificationSpec, path: String, deviceZone: Zone?) throws(ChimeError) -> Zone {
        guard let zone = spec.effectiveZone(deviceZone: deviceZone) else {
            throw ChimeError(
                .timezoneRequired,
                field: path + "timeZone",
                "\(path)timeZone: this notification follows the device's zone and the device has none; "
                    + "set one with the device command or give timeZone"
            )
        }
        return zone
    }

    /// Builds the recurrence of a resolved notification and finds its first occurrence due at
    /// or after `now`, enforcing `--min-repeat-seconds` and rejecting what never fires, within the
    /// command's `allowance`.
    func validatedNext(
        _ spec: ResolvedNotification,
        path: String,
        deviceZone: Zone?,
        now: Instant,
        allowance: inout RecurrenceAllowance
    ) throws(ChimeError) -> (Recurrence, Occurrence) {
        let zone = try zoneOf(spec.spec, path: path, deviceZone: deviceZone)
        let field =
            path + (spec.spec.rrule != nil ? "rrule" : spec.spec.repeatInterval != nil ? "repeatInterval" : "fireDate")
        let recurrence: Recurrence
        do {
            recurrence = try Recurrence(
                start: spec.fireDate,
                zone: zone,
                pattern: spec.spec.pattern,
                count: spec.spec.count,
                until: spec.spec.until,
                exdates: spec.spec.exdates ?? []
            )
            if spec.spec.isRepeating, let spacing = try recurrence.smallestSpacing(within: &allowance),
                spacing < configuration.minRepeatSeconds
            {
                throw ChimeError(
                    .invalidArgument,
                    field: field,
                    "\(field): repeats every \(spacing) s, more often than --min-repeat-seconds \(configuration.minRepeatSeconds)"
                )
            }
            let from = spec.spec.isRepeating ? now.adding(milliseconds: spec.spec.leadTime ?? 0) : Instant.distantPast
            guard let first = try recurrence.first(atOrAfter: from, within: &allowance) else {
                throw ChimeError(.neverFires, field: field, "\(field): this schedule has no occurrence from now on")
            }
            return (recurrence, first)
        } catch let error as ChimeError {
            throw error
        } catch let error as RecurrenceError {
            // A rule too costly to expand or to search (its search budget ran out although it may fire) is
            // the client's to simplify; the other recurrence errors mean it cannot fire.
            if error.code == .searchLimit || error.code == .invalidRule {
                throw ChimeError(.invalidArgument, field: field, "\(field): \(error.message)")
            }
            throw ChimeError(.neverFires, field: field, "\(field): \(error)")
        } catch {
            throw ChimeError(.internal, field: field, "\(field): \(error)")
        }
    }

    func selectedIds(_ deviceId: String, _ selector: Selector) -> [String] {
        guard let device = devices[deviceId] else { return [] }
        switch selector {
        case .ids(let ids):
            var seen = Set<String>()
            return ids.filter { device.notifications[$0]?.isListed == true && seen.insert($0).inserted }
        case .all:
            return device.notifications.values.filter(\.isListed).map(\.id).sorted()
        case .match(let wanted):
            return matching(device, wanted).map(\.id).sorted()
        }
    }

    /// The listed notifications whose userInfo has every member of `wanted`: by a scan on devices
    /// with few notifications, through the device's index on those with more than
    /// ``UserInfoIndex/threshold``. The index is built by the first match that needs it (not at
    /// recovery, which would take longer for it), then kept up to date.
    func matching(_ device: DeviceState, _ wanted: JSONObject) -> [StoredNotification] {
        Self.matching(device, wanted).notifications
    }

    /// ``matching(_:_:)``, and how many notifications it read: those it looked at, and all of the
    /// device's when it built the index (what `find` counts against its bound).
    static func matching(
        _ device: DeviceState,
        _ wanted: JSONObject
    ) -> (notifications: [StoredNotification], read: Int) {
        var read = 0
        let candidates: [StoredNotification]
        if device.listedCount > UserInfoIndex.threshold {
            if device.index == nil {
                device.index = UserInfoIndex(device.notifications.values)
                read += device.notifications.count
            }
            candidates = device.index!.candidates(wanted) ?? Array(device.notifications.values)
        } else {
            candidates = Array(device.notifications.values)
        }
        read += candidates.count
        return (candidates.filter { $0.isListed && Selector.matches(wanted, $0.userInfoObject) }, read)
    }

    // MARK: - Reads

    func list(_ deviceId: String, _ match: JSONObject?, _ limit: Int, _ cursor: String?) -> ReplyResult.ListPage {
        guard let device = devices[deviceId] else { return ReplyResult.ListPage(notifications: [], cursor: nil) }
        var page: [StoredNotification] = []
        var more = false
        if let match {
            var rows = matching(device, match).sorted { $0.id < $1.id }
            if let cursor { rows.removeAll { $0.id <= cursor } }
            page = Array(rows.prefix(limit))
            more = rows.count > limit
        } else {
            // Listing a large device page by page must not sort it for every page.
            if device.sortedIds == nil {
                device.sortedIds = device.notifications.values.filter(\.isListed).map(\.id).sorted()
            }
            let ids = device.sortedIds!
            var start = 0
            if let cursor {
                var lo = 0
                var hi = ids.count
                while lo < hi {
                    let mid = (lo + hi) / 2
                    if ids[mid] <= cursor { lo = mid + 1 } else { hi = mid }
                }
                start = lo
            }
            let end = min(ids.count, start + limit)
            page = ids[start..<end].compactMap { device.notifications[$0] }
            more = end < ids.count
        }
        // A page also ends before its rows pass `maxListBytes` (it always holds one), so that no
        // reply is larger than a broker takes.
        var rows: [ListedNotification] = []
        var bytes = 0
        for n in page {
            let row = listed(n)
            let size = JSON.object(row.json).bytes.count
            if !rows.isEmpty && bytes + size > Self.maxListBytes {
                more = true
                break
            }
            rows.append(row)
            bytes += size
        }
        return ReplyResult.ListPage(notifications: rows, cursor: more ? page[rows.count - 1].id : nil)
    }

    /// The most bytes of notifications one `list` reply carries (beyond its first row): the reply
    /// stays under the shipped brokers' message size limit.
    public static let maxListBytes = 196_608

    func listed(_ n: StoredNotification) -> ListedNotification {
        ListedNotification(
            notification: n.spec,
            nextFireDate: n.nextFireDate,
            enabled: n.enabled,
            firedCount: Int(n.firedCount),
            lastFiredAt: n.lastFiredAt.map { Instant(milliseconds: $0) },
            createdAt: Instant(milliseconds: n.createdAt),
            updatedAt: Instant(milliseconds: n.updatedAt)
        )
    }

    func deviceStatus(_ deviceId: String) -> ReplyResult.DeviceStatus {
        let device = devices[deviceId] ?? DeviceState(id: deviceId)
        let mode = receiptsMode(device)
        return ReplyResult.DeviceStatus(
            deviceId: deviceId,
            timeZone: device.timeZone,
            badge: device.currentBadge,
            quietHours: device.quietHours,
            pending: device.listedCount,
            receipts: mode.inbox,
            history: mode.history,
            push: device.push?.registrations.map(\.redacted) ?? []
        )
    }

    func preview(
        _ deviceId: String,
        _ target: PreviewTarget,
        _ count: Int,
        _ from: Instant,
        _ random: inout some RandomNumberGenerator
    ) throws(ChimeError) -> (dates: [Instant], calendarDates: [String]?) {
        let deviceZone = devices[deviceId]?.timeZone
        let spec: ResolvedNotification
        let path: String
        switch target {
        case .id(let id):
            guard let stored = devices[deviceId]?.notifications[id], stored.isListed else {
                throw ChimeError(.notFound, field: "id", "id: no notification \(quoted(id)) on this device")
            }
            spec = stored.spec
            path = ""
        case .notification(let input):
            path = "notification."
            spec = try resolve(input, path: path, deviceZone: deviceZone, now: from, random: &random)
        }
        var allowance = RecurrenceAllowance()
        let (recurrence, first) = try validatedNext(
            spec,
            path: path,
            deviceZone: deviceZone,
            now: from,
            allowance: &allowance
        )
        let lead = spec.spec.leadTime ?? 0
        var dates: [Instant] = []
        // The occurrence's own date (not the delivery's, which the lead time may move to another day).
        var calendarDates: [String]? = recurrence.calendarDate(of: first) != nil ? [] : nil
        var occurrence: Occurrence? = first
        while let o = occurrence, dates.count < count {
            dates.append(max(o.instant.adding(milliseconds: -lead), from))
            if calendarDates != nil { calendarDates?.append(recurrence.calendarDate(of: o) ?? "") }
            // Past the allowance, the dates found so far: the reply has fewer than `count`.
            do {
                occurrence = try recurrence.next(after: o, within: &allowance)
            } catch {
                break
            }
        }
        return (dates, calendarDates)
    }
}

/// A random version 4 UUID, lower case, from the engine's injected generator.
func makeUUID(_ random: inout some RandomNumberGenerator) -> String {
    var bytes = [UInt8](repeating: 0, count: 16)
    let a = random.next() as UInt64
    let b = random.next() as UInt64
    for i in 0..<8 {
        bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * i))
        bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * i))
    }
    bytes[6] = bytes[6] & 0x0F | 0x40
    bytes[8] = bytes[8] & 0x3F | 0x80
    let hex = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(36)
    for (i, byte) in bytes.enumerated() {
        if i == 4 || i == 6 || i == 8 || i == 10 { out.append(UInt8(ascii: "-")) }
        out.append(hex[Int(byte >> 4)])
        out.append(hex[Int(byte & 0xF)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// An engine's state during recovery only (``Engine/beginRecovery()`` to
/// ``Engine/finishRecovery()``).
struct Restoring {
    /// The device of the previous snapshot entry.
    var lastDevice: DeviceState?
    /// How many notifications the snapshot being restored holds for its larger devices.
    var reservations: [String: Int] = [:]
    /// Notifications to arm when recovery ends, as the journal after the snapshot may still
    /// change them.
    var toArm: [StoredNotification] = []
}
