extension Engine {
    /// Applies a journal entry: the one way durable state changes, live and in recovery.
    ///
    /// Returns the `result` of the reply for command entries (nil for delivery records).
    @discardableResult
    public mutating func apply(_ entry: JournalEntry) -> JSONObject? {
        switch entry {
        case .schedule(let deviceId, let at, let replaced, let notifications):
            var device = devices[deviceId] ?? DeviceState()
            var removedCount = 0
            for id in replaced where remove(id, from: &device) {
                removedCount += 1
            }
            var scheduled: [JSON] = []
            for spec in notifications {
                let id = spec.id ?? ""
                let previous = device.notifications[id]
                var n = StoredNotification(
                    spec: spec,
                    version: nextVersion,
                    enabled: spec.enabled ?? true,
                    firedCount: 0,
                    lastFiredAt: nil,
                    createdAt: previous?.createdAt ?? at,
                    updatedAt: at,
                    pendingFrom: at.adding(milliseconds: spec.leadTime ?? 0),
                    done: false
                )
                nextVersion += 1
                if previous == nil { device.listedCount += 1 }
                arm(&n, deviceId: deviceId, zone: device.timeZone)
                scheduled.append(["id": .string(id), "nextFireDate": Replies.instant(n.nextFireDate)])
                device.notifications[id] = n
            }
            store(device, deviceId)
            return ["scheduled": .array(scheduled), "replaced": .int(Int64(removedCount))]

        case .cancel(let deviceId, _, let ids):
            guard var device = devices[deviceId] else { return ["cancelled": []] }
            let cancelled = ids.filter { remove($0, from: &device) }
            store(device, deviceId)
            return ["cancelled": .array(cancelled.map(JSON.string))]

        case .setEnabled(let deviceId, let at, let ids, let enabled):
            guard var device = devices[deviceId] else { return [enabled ? "resumed" : "paused": []] }
            var changed: [JSON] = []
            for id in ids {
                guard var n = device.notifications[id], n.isListed else { continue }
                n.enabled = enabled
                n.updatedAt = at
                if enabled {
                    n.done = false
                    n.sentThrough = nil
                    n.pendingFrom = at.adding(milliseconds: n.leadTime)
                }
                arm(&n, deviceId: deviceId, zone: device.timeZone)
                device.notifications[id] = n
                changed.append(.string(id))
            }
            store(device, deviceId)
            return [enabled ? "resumed" : "paused": .array(changed)]

        case .device(let deviceId, _, let update):
            var device = devices[deviceId] ?? DeviceState()
            if let badge = update.badge { device.badge = badge }
            if let quiet = update.quietHours { device.quietHours = quiet }
            let zoneChanged = update.timeZone != nil && update.timeZone != device.timeZone
            if let zone = update.timeZone { device.timeZone = zone }
            if zoneChanged || update.quietHours != nil {
                // Re-arm what follows the device's zone (its instants moved) and whatever quiet
                // hours were holding.
                for (id, var n) in device.notifications where n.spec.followsDeviceZone || n.deferred {
                    arm(&n, deviceId: deviceId, zone: device.timeZone)
                    device.notifications[id] = n
                }
            }
            store(device, deviceId)
            return deviceJSON(deviceId)

        case .snooze(let deviceId, let at, let id, let due):
            guard var device = devices[deviceId], let original = device.notifications[id] else { return nil }
            var spec = original.spec
            let snoozeId = id + NotificationCoding.snoozeSuffix
            spec.id = snoozeId
            spec.fireDate = .instant(due)
            spec.timeZone = nil
            spec.repeatInterval = nil
            spec.rrule = nil
            spec.count = nil
            spec.until = nil
            spec.exdates = nil
            spec.leadTime = nil
            spec.enabled = nil
            spec.keepAfterFiring = nil
            var n = StoredNotification(
                spec: spec,
                version: nextVersion,
                enabled: true,
                firedCount: 0,
                lastFiredAt: nil,
                createdAt: at,
                updatedAt: at,
                pendingFrom: at,
                done: false,
                snoozeOf: id
            )
            nextVersion += 1
            arm(&n, deviceId: deviceId, zone: device.timeZone)
            device.notifications[snoozeId] = n
            store(device, deviceId)
            return ["id": .string(id), "nextFireDate": Replies.instant(n.nextFireDate)]

        case .delivered(let record), .dropped(let record):
            var device = devices[record.deviceId] ?? DeviceState()
            if case .delivered = entry, let badge = record.badge {
                device.badge = badge.applied(to: device.badge)
            }
            if var n = device.notifications[record.id], n.version == record.version {
                if case .delivered = entry {
                    n.firedCount += 1
                    n.lastFiredAt = record.at
                }
                let after = record.occurrence.adding(milliseconds: 1)
                if after > n.pendingFrom { n.pendingFrom = after }
                if record.last || !n.spec.isRepeating {
                    if n.spec.keepAfterFiring == true {
                        n.done = true
                        n.enabled = false
                        n.next = nil
                        n.generation = 0
                        device.notifications[record.id] = n
                    } else {
                        _ = remove(record.id, from: &device, withSnooze: false)
                    }
                } else {
                    device.notifications[record.id] = n
                }
            }
            store(device, record.deviceId)
            return nil
        }
    }

    /// Removes a listed notification (and its snooze); false when there was none.
    mutating func remove(_ id: String, from device: inout DeviceState, withSnooze: Bool = true) -> Bool {
        guard let n = device.notifications.removeValue(forKey: id) else { return false }
        if n.isListed {
            device.listedCount -= 1
            if withSnooze { device.notifications.removeValue(forKey: id + NotificationCoding.snoozeSuffix) }
        }
        return true
    }

    mutating func store(_ device: DeviceState, _ deviceId: String) {
        let before = devices[deviceId]?.listedCount ?? 0
        pendingCount += device.listedCount - before
        if device.isEmpty {
            devices.removeValue(forKey: deviceId)
        } else {
            devices[deviceId] = device
        }
    }

    /// Recomputes a notification's next occurrence from its durable state and sets its timer.
    /// During replay only the durable state matters; ``finishRecovery(now:)`` arms everything.
    mutating func arm(_ n: inout StoredNotification, deviceId: String, zone deviceZone: Zone?) {
        n.deferred = false
        n.next = nil
        n.recurrence = nil
        n.generation = 0
        guard !replaying, n.enabled, !n.done, let zone = n.spec.effectiveZone(deviceZone: deviceZone),
            let start = n.spec.fireDate
        else { return }
        do {
            let recurrence = try Recurrence(
                start: start,
                zone: zone,
                pattern: n.spec.pattern,
                count: n.spec.count,
                until: n.spec.until,
                exdates: n.spec.exdates ?? []
            )
            n.recurrence = recurrence
            // A one-shot fires even when its time has passed; a series resumes at pendingFrom,
            // past whatever this run has already published.
            if n.spec.isRepeating {
                var from = n.pendingFrom
                if let sent = n.sentThrough, sent >= from { from = sent.adding(milliseconds: 1) }
                n.next = try recurrence.first(atOrAfter: from)
            } else if n.sentThrough == nil {
                n.next = try recurrence.first(atOrAfter: .distantPast)
            }
        } catch {
            n.next = nil
        }
        if let next = n.next {
            n.generation = nextGeneration
            nextGeneration += 1
            heap.push(due: n.fireTime(next), deviceId: deviceId, id: n.id, generation: n.generation)
        }
    }
}
