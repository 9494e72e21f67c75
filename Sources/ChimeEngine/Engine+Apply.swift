import ChimeProtocol

extension Engine {
    /// Applies a journal entry: the one way durable state changes, live and in recovery.
    ///
    /// Returns the `result` of the reply for command entries (nil for delivery records, and for a
    /// snooze whose notification is gone, which ``decide(_:now:random:)`` never journals).
    /// - Parameter key: the command's ``CommandKey``, journaled with it: a later command with the
    ///   same key is a duplicate (``decide(_:now:random:)``).
    @discardableResult
    public func apply(_ entry: JournalEntry, key: CommandKey? = nil) -> ReplyResult? {
        if let key, let at = entry.commandTime {
            commandKeys.insert(key, device: entry.deviceId, at: at.milliseconds)
        }
        switch entry {
        case .schedule(let deviceId, let at, let replaced, let notifications):
            let device = device(deviceId)
            var removedCount = 0
            for id in replaced where remove(id, from: device) {
                removedCount += 1
            }
            var scheduled: [ReplyResult.NextFire] = []
            scheduled.reserveCapacity(notifications.count)
            for spec in notifications {
                let id = spec.id
                let previous = device.notifications[id]
                let n = StoredNotification(
                    spec: spec,
                    device: device,
                    zones: &zones,
                    version: nextVersion,
                    at: at,
                    createdAt: previous.map { Instant(milliseconds: $0.createdAt) } ?? at
                )
                nextVersion += 1
                if let previous {
                    detach(previous, from: device)
                    if previous.isListed { removedCount += 1 }
                }
                attach(n, to: device)
                arm(n, device)
                scheduled.append(ReplyResult.NextFire(id: id, nextFireDate: n.nextFireDate))
            }
            dropIfEmpty(device)
            return .scheduled(ReplyResult.Scheduled(scheduled: scheduled, replaced: removedCount))

        case .update(let deviceId, let at, let spec):
            guard let device = devices[deviceId], let previous = device.notifications[spec.id], previous.isListed else {
                return .updated(ReplyResult.NextFire(id: spec.id, nextFireDate: nil))
            }
            // A new trigger starts the series again from now, as a new version (deliveries in
            // flight of the old one are not counted for it); any other change keeps the version
            // and the notification's place in its series, so nothing is sent twice or skipped.
            let retrigger = NotificationField.allCases.contains {
                $0.isTrigger && $0.value(of: previous.spec.spec) != $0.value(of: spec.spec)
            }
            let n = StoredNotification(
                spec: spec,
                device: device,
                zones: &zones,
                version: retrigger ? nextVersion : previous.version,
                at: at,
                createdAt: Instant(milliseconds: previous.createdAt)
            )
            if retrigger { nextVersion += 1 }
            n.firedCount = previous.firedCount
            n.lastFiredAt = previous.lastFiredAt
            if !retrigger {
                n.pendingFrom = previous.pendingFrom
                n.sentThrough = previous.sentThrough
                // Switched on by this update: as `resume` does.
                if n.enabled && !previous.enabled {
                    n.pendingFrom = max(n.pendingFrom, at.milliseconds + n.leadTime)
                    n.sentThrough = nil
                } else {
                    n.done = previous.done
                }
            }
            detach(previous, from: device)
            attach(n, to: device)
            arm(n, device)
            return .updated(ReplyResult.NextFire(id: spec.id, nextFireDate: n.nextFireDate))

        case .cancel(let deviceId, _, let ids):
            guard let device = devices[deviceId] else { return .cancelled(ids: []) }
            let cancelled = ids.filter { remove($0, from: device) }
            dropIfEmpty(device)
            return .cancelled(ids: cancelled)

        case .setEnabled(let deviceId, let at, let ids, let enabled):
            guard let device = devices[deviceId] else { return enabled ? .resumed(ids: []) : .paused(ids: []) }
            var changed: [String] = []
            for id in ids {
                guard let n = device.notifications[id], n.isListed else { continue }
                willChange(n)
                n.enabled = enabled
                n.updatedAt = at.milliseconds
                if enabled {
                    n.done = false
                    n.sentThrough = nil
                    n.pendingFrom = max(n.pendingFrom, at.milliseconds + n.leadTime)
                }
                arm(n, device)
                changed.append(id)
            }
            return enabled ? .resumed(ids: changed) : .paused(ids: changed)

        case .device(let deviceId, let at, let update):
            let device = device(deviceId)
            willChange(device)
            if let badge = update.badge { device.badge = Badge.clamped(badge) }
            if let quiet = update.quietHours { device.quietHours = quiet }
            if update.receipts != nil || update.history != nil {
                let r = device.receipts ?? DeviceReceipts()
                device.receipts = r
                if let receipts = update.receipts { r.receipts = receipts }
                if let history = update.history { r.history = history }
                // Turning receipts off empties the inbox: nothing would ever acknowledge it.
                if r.receipts == false { r.inbox.removeAll() }
                // Turning history off forgets it (the numbers go on, for the inbox's cursors).
                if !receiptsMode(device).history { r.log = DeliveryHistory(firstSeq: r.log.nextSeq) }
            }
            if let change = update.push { applyPush(change, to: device, at: at) }
            let zoneChanged = update.timeZone != nil && update.timeZone != device.timeZone
            if let zone = update.timeZone { device.timeZone = zones.held(zone) }
            if zoneChanged || update.quietHours != nil {
                // Re-arm what follows the device's zone (its instants moved) and whatever quiet
                // hours were holding.
                for n in device.notifications.values where n.followsDeviceZone || n.deferred {
                    arm(n, device)
                }
            }
            dropIfEmpty(device)
            return .device(deviceStatus(deviceId))

        case .ack(let deviceId, let at, let fireIds, let badge):
            return applyAck(deviceId, at: at, fireIds: fireIds, badge: badge)

        case .zoneRules(_, let records):
            _ = applyZoneRules(records)
            return nil

        case .pushed(let record):
            applyPushed(record)
            return nil

        case .snooze(let deviceId, let at, let id, let due):
            guard let device = devices[deviceId], let original = device.notifications[id] else { return nil }
            // The original's content and delivery options, on a one-shot of its own.
            var fields = original.spec.spec
            for field in NotificationField.allCases where !field.keptBySnooze { field.clear(in: &fields) }
            let snoozeId = id + NotificationCoding.snoozeSuffix
            let n = StoredNotification(
                spec: ResolvedNotification(id: snoozeId, fireDate: .instant(due), fields),
                device: device,
                zones: &zones,
                version: nextVersion,
                at: at,
                createdAt: at
            )
            nextVersion += 1
            if let previous = device.notifications[snoozeId] { detach(previous, from: device) }
            attach(n, to: device)
            arm(n, device)
            return .snoozed(ReplyResult.NextFire(id: id, nextFireDate: n.nextFireDate))

        case .delivered(let record), .dropped(let record):
            let device = device(record.deviceId)
            willChange(device)
            if case .delivered = entry, let badge = record.badge {
                device.badge = badge.applied(to: device.badge)
            }
            let held = device.notifications[record.id]
            var kept: UInt64?
            if case .delivered = entry, let capture = record.receipt {
                // The notification's own id string, when it is still held: stored once for both.
                kept = keep(
                    capture,
                    of: record,
                    id: held?.id ?? record.id,
                    fireId: fireId(record.id, record.occurrence),
                    in: device
                )
            }
            if case .delivered = entry, let capture = record.push {
                keepPush(capture, fireId: fireId(record.id, record.occurrence), at: record.at, in: device, entry: kept)
            }
            if let n = held, n.version == record.version {
                willChange(n)
                if case .delivered = entry {
                    n.firedCount += 1
                    n.lastFiredAt = record.at.milliseconds
                }
                n.pendingFrom = max(n.pendingFrom, record.occurrence.milliseconds + 1)
                if record.last || !n.isRepeating {
                    if n.extras?.keepAfterFiring == true {
                        n.done = true
                        n.enabled = false
                        n.next = nil
                        n.armedDue = nil
                    } else {
                        detach(n, from: device)
                    }
                }
            }
            dropIfEmpty(device)
            return nil
        }
    }

    /// Records zone rules (``JournalEntry/zoneRules(at:zones:)``) and computes again, with the rules the
    /// zone database has now, the next occurrence of every notification whose times depend on a zone
    /// whose rules the engine held differ: its own zone, or its device's when it follows the device
    /// (and what the device's quiet hours were holding). Absolute times do not move; occurrences keep
    /// their identity (`fireId` is the notification id and the occurrence's instant), and a series
    /// resumes from its durable position (`pendingFrom`), exactly as a restart computes it. An
    /// unresolved zone (``Zone/isResolved``) the database now has is resolved this way; one it still
    /// lacks keeps computing in UTC.
    ///
    /// Returns, for each zone recomputed, how many notifications depend on it and how many of their
    /// next occurrences moved (during replay nothing is armed yet, so none moved).
    @discardableResult
    public func applyZoneRules(_ records: [ZoneRulesRecord]) -> [String: (notifications: Int, moved: Int)] {
        var fresh: [String: Zone] = [:]
        for record in records {
            zoneFingerprints[record.zone] = record.fingerprint
            guard let box = zones.boxes[record.zone], let now = Zone(identifier: record.zone),
                now.rulesFingerprint != box.zone.rulesFingerprint
            else { continue }
            zones.replace(box, with: now)
            fresh[record.zone] = now
        }
        var counts: [String: (notifications: Int, moved: Int)] = [:]
        guard !fresh.isEmpty else { return counts }
        for device in devices.values {
            var deviceZoneChanged = false
            if let zone = device.timeZone, let now = fresh[zone.identifier] {
                willChange(device)
                device.timeZone = now
                deviceZoneChanged = true
            }
            for n in device.notifications.values {
                guard let zone = n.effectiveZone(deviceZone: device.timeZone), fresh[zone.identifier] != nil
                else {
                    if deviceZoneChanged && n.deferred { arm(n, device) }
                    continue
                }
                let before = n.next?.instant
                arm(n, device)
                var count = counts[zone.identifier] ?? (0, 0)
                count.notifications += 1
                if !replaying && n.next?.instant != before { count.moved += 1 }
                counts[zone.identifier] = count
            }
        }
        return counts
    }

    /// How many notifications depend on each of `zones` (their own zone, or their device's).
    public func dependents(on zones: Set<String>) -> [String: Int] {
        var counts: [String: Int] = [:]
        guard !zones.isEmpty else { return counts }
        for device in devices.values {
            for n in device.notifications.values {
                guard let zone = n.effectiveZone(deviceZone: device.timeZone)?.identifier, zones.contains(zone)
                else { continue }
                counts[zone, default: 0] += 1
            }
        }
        return counts
    }

    /// The zones the engine computes with.
    public var zonesInUse: [Zone] { zones.boxes.values.map(\.zone) }

    /// The zones in use that no zone database here resolves (``Zone/isResolved``): named by journal
    /// records or a snapshot written where they were known. Their wall-clock times are read in UTC
    /// until the worker finds their rules (each zone check asks again).
    public var unresolvedZones: Set<String> { zones.unresolved }

    /// For each unresolved zone, the devices that depend on it (its own, or the zone of one of its
    /// notifications) and how many notifications do: what the worker logs about them.
    public func unresolvedZoneUse() -> [String: (devices: [String], notifications: Int)] {
        let unresolved = zones.unresolved
        var use: [String: (devices: [String], notifications: Int)] = [:]
        guard !unresolved.isEmpty else { return use }
        for device in devices.values {
            var named = Set<String>()
            if let zone = device.timeZone?.identifier, unresolved.contains(zone) { named.insert(zone) }
            for n in device.notifications.values {
                guard let zone = n.effectiveZone(deviceZone: device.timeZone)?.identifier, unresolved.contains(zone)
                else { continue }
                named.insert(zone)
                use[zone, default: ([], 0)].notifications += 1
            }
            for zone in named { use[zone, default: ([], 0)].devices.append(device.id) }
        }
        for zone in use.keys { use[zone]?.devices.sort() }
        return use
    }

    /// Zones in use whose rules the snapshot and journal do not record as the ones held: the zones
    /// whose rules changed while chimed was stopped (`previous` is what was recorded), and those
    /// never recorded (`previous` nil). The worker journals them at start and with each check. An
    /// unresolved zone has no rules to record: what was recorded stays.
    public var unrecordedZoneRules: [(record: ZoneRulesRecord, previous: UInt64?)] {
        zones.boxes.values.compactMap { box in
            guard box.zone.isResolved else { return nil }
            let fingerprint = box.zone.rulesFingerprint
            let previous = zoneFingerprints[box.identifier]
            guard previous != fingerprint else { return nil }
            return (ZoneRulesRecord(zone: box.identifier, fingerprint: fingerprint), previous)
        }
        .sorted { $0.record.zone < $1.record.zone }
    }

    /// Adds a notification to its device's table (and index).
    func attach(_ n: StoredNotification, to device: DeviceState) {
        device.notifications.insert(n)
        attached(n, to: device)
    }

    /// What ``attach(_:to:)`` does once the notification is in its device's table.
    func attached(_ n: StoredNotification, to device: DeviceState) {
        heldCount += 1
        // Not the snapshot being taken's: it was not there when that began.
        n.snapshotMark = snapshotParity
        if device.order != nil {
            device.order!.append(n)
        } else if device.notifications.count >= DeviceState.orderedFrom {
            device.order = Array(device.notifications.values)
        }
        if n.isListed {
            device.listedCount += 1
            if let bytes = device.storedBytes { device.storedBytes = bytes + n.storedBytes }
            pendingCount += 1
            device.sortedIds = nil
            device.index?.insert(n)
        }
    }

    /// Takes a notification out of its device's table; timers and deliveries in flight that
    /// still refer to it will ignore it.
    func detach(_ n: StoredNotification, from device: DeviceState) {
        willChange(n)
        device.notifications.remove(id: n.id)
        heldCount -= 1
        n.removed = true
        if let order = device.order {
            device.orderRemoved += 1
            // Not while a snapshot walks it.
            if capture == nil, device.orderRemoved * 2 > order.count {
                device.order =
                    device.notifications.count < DeviceState.orderedFrom / 2 ? nil : order.filter { !$0.removed }
                device.orderRemoved = 0
            }
        }
        n.armedDue = nil
        if !refusals.isEmpty { refusals.removeValue(forKey: ObjectIdentifier(n)) }
        if n.extras?.hasRule == true, let cost = device.ruleWork.removeValue(forKey: n.id) {
            device.ruleWorkTotal -= cost
        }
        if n.isListed {
            device.listedCount -= 1
            if let bytes = device.storedBytes { device.storedBytes = bytes - n.storedBytes }
            pendingCount -= 1
            device.sortedIds = nil
            // Rebuilt by the next match.
            if device.index?.noteRemoved() == true { device.index = nil }
        }
    }

    /// Removes a listed notification and its snooze; false when there was none.
    func remove(_ id: String, from device: DeviceState) -> Bool {
        guard let n = device.notifications[id], n.isListed else { return false }
        detach(n, from: device)
        if let snooze = device.notifications[id + NotificationCoding.snoozeSuffix] { detach(snooze, from: device) }
        return true
    }

    /// The recurrence of a notification in its zone (the device's when it follows the device).
    func recurrence(_ n: StoredNotification, _ device: DeviceState) throws(RecurrenceError) -> Recurrence? {
        guard let zone = n.effectiveZone(deviceZone: device.timeZone) else { return nil }
        let e = n.extras
        return try Recurrence(
            start: n.fireDate,
            zone: zone,
            pattern: n.pattern,
            count: e?.count,
            until: e?.until,
            exdates: e?.exdates ?? []
        )
    }

    /// Recomputes a notification's next occurrence from its durable state and sets its timer.
    /// During replay only the durable state matters; ``finishRecovery()`` arms everything.
    func arm(_ n: StoredNotification, _ device: DeviceState) {
        n.deferred = false
        n.next = nil
        n.armedDue = nil
        if replaying {
            restoring?.toArm.append(n)
            return
        }
        armNow(n, device)
    }

    /// Arms a notification restored from a snapshot: a plain one-shot at once (its occurrence
    /// is its fire date, which nothing in the journal after the snapshot can change without
    /// arming it again, and it is in the cache now), anything else when recovery ends.
    func armRestored(_ n: StoredNotification, _ device: DeviceState) {
        if !n.isRepeating && n.extras?.exdates == nil {
            armNow(n, device)
        } else {
            restoring?.toArm.append(n)
        }
    }

    private func armNow(_ n: StoredNotification, _ device: DeviceState) {
        guard !n.done, !n.removed else { return }
        guard n.enabled else {
            // A paused rule is computed once, when it comes, so that resuming it is counted in
            // what the device's rules cost (``EngineConfiguration/maxRuleWorkPerDevice``).
            if n.extras?.hasRule == true, device.ruleWork[n.id] == nil { _ = firstOccurrence(n, device) }
            return
        }
        if !n.isRepeating && n.extras?.exdates == nil {
            // A plain one-shot: its one occurrence, unless already sent in this run.
            guard n.sentThrough == nil else { return }
            if n.fireIsLocal {
                guard let zone = n.effectiveZone(deviceZone: device.timeZone) else { return }
                n.next = Occurrence(index: 1, instant: zone.instant(for: LocalDateTime(secondsSinceEpoch: n.fire)))
            } else {
                n.next = Occurrence(index: 1, instant: Instant(milliseconds: n.fire))
            }
            setTimer(n, n.fireTime(n.next!).milliseconds)
            return
        }
        n.next = firstOccurrence(n, device)
        if let next = n.next { setTimer(n, n.fireTime(next).milliseconds) }
    }

    /// The occurrence to arm a repeating notification (or one with exdates) for, and, for a rule,
    /// what computing it cost, kept in its device's ``DeviceState/ruleWork``.
    private func firstOccurrence(_ n: StoredNotification, _ device: DeviceState) -> Occurrence? {
        var work = RecurrenceAllowance(.max)
        var built: Recurrence?
        defer {
            if n.extras?.hasRule == true {
                let cost = (built?.proofCandidates ?? 0) + work.used
                device.ruleWorkTotal += cost - (device.ruleWork.updateValue(cost, forKey: n.id) ?? 0)
            }
        }
        do {
            guard let recurrence = try recurrence(n, device) else { return nil }
            built = recurrence
            // A one-shot fires even when its time has passed; a series resumes at pendingFrom,
            // past whatever this run has already published.
            if n.isRepeating {
                var from = n.pendingFrom
                if let sent = n.sentThrough, sent >= from { from = sent + 1 }
                return try recurrence.first(atOrAfter: Instant(milliseconds: from), within: &work)
            } else if n.sentThrough == nil {
                return try recurrence.first(atOrAfter: .distantPast, within: &work)
            }
            return nil
        } catch {
            return nil
        }
    }

    func setTimer(_ n: StoredNotification, _ due: Int64) {
        n.armedDue = due
        if arming {
            heap.append(due: due, n)
        } else {
            heap.push(due: due, n)
        }
    }
}
