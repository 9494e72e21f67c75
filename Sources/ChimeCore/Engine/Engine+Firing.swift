extension Engine {
    /// Delivers what is due at `now`: returns the deliveries to publish and the entries to
    /// journal (occurrences dropped by `expiresAfter` or `misfire: skip`). Does nothing while
    /// disconnected.
    public mutating func tick(now: Instant) -> [EngineOutput] {
        guard connected else { return [] }
        var outputs: [EngineOutput] = []
        while let top = heap.top, top.due <= now.milliseconds {
            _ = heap.pop()
            guard var device = devices[top.deviceId], var n = device.notifications[top.id],
                n.generation == top.generation, let first = n.next, let recurrence = n.recurrence
            else { continue }
            fire(&n, first, recurrence, &device, top.deviceId, now, &outputs)
            device.notifications[top.id] = n
            devices[top.deviceId] = device
        }
        return outputs
    }

    private mutating func fire(
        _ n: inout StoredNotification,
        _ first: Occurrence,
        _ recurrence: Recurrence,
        _ device: inout DeviceState,
        _ deviceId: String,
        _ now: Instant,
        _ outputs: inout [EngineOutput]
    ) {
        // Quiet hours hold the delivery until they end.
        if n.spec.ignoreQuietHours != true, let quiet = device.quietHours, let zone = device.timeZone,
            quiet.contains(zone.localDateTime(at: now))
        {
            n.deferred = true
            n.generation = nextGeneration
            nextGeneration += 1
            heap.push(due: quiet.end(after: now, in: zone), deviceId: deviceId, id: n.id, generation: n.generation)
            return
        }

        // Every occurrence due by now, oldest first (at most maxMissedDeliveries kept), and how
        // many more were passed over.
        var due: [Occurrence] = [first]
        var uncounted = 0
        var following: Occurrence?
        var cursor = first
        var counted = 1
        while true {
            guard let next = try? recurrence.next(after: cursor) else {
                following = nil
                break
            }
            if n.fireTime(next) > now {
                following = next
                break
            }
            counted += 1
            if counted > configuration.maxMissedCount {
                following = try? recurrence.first(atOrAfter: now.adding(milliseconds: n.leadTime + 1))
                break
            }
            if due.count == configuration.maxMissedDeliveries {
                due.removeFirst()
                uncounted += 1
            }
            due.append(next)
            cursor = next
        }
        let passedOver = counted - due.count

        // An occurrence is missed when it was due after the notification was armed and was not
        // sent within the late threshold; a one-shot already past when scheduled fires at once.
        func isMissed(_ o: Occurrence) -> Bool {
            now.milliseconds - n.fireTime(o).milliseconds >= configuration.lateThreshold
                && o.instant >= n.pendingFrom
        }

        var send: [(Occurrence, missed: Int)] = []
        var drop: [Occurrence] = []
        let wasDeferred = n.deferred
        if wasDeferred {
            send = [(due.last!, due.count - 1 + passedOver)]
        } else {
            switch n.spec.misfire ?? .coalesce {
            case .coalesce:
                send = [(due.last!, due.count - 1 + passedOver)]
            case .skip:
                for o in due {
                    if isMissed(o) { drop.append(o) } else { send.append((o, 0)) }
                }
            case .all:
                send = due.map { ($0, 0) }
            }
        }
        n.deferred = false

        if let expires = n.spec.expiresAfter {
            send.removeAll { o, _ in
                let tooLate = now.milliseconds - n.fireTime(o).milliseconds > expires
                if tooLate { drop.append(o) }
                return tooLate
            }
        }

        let newest = due.last!
        n.sentThrough = newest.instant
        n.next = following
        if let following {
            n.generation = nextGeneration
            nextGeneration += 1
            heap.push(due: n.fireTime(following), deviceId: deviceId, id: n.id, generation: n.generation)
        }
        // Drops only need a journal record when nothing later of this round is sent, since an
        // acknowledged later occurrence moves pendingFrom past them anyway.
        let lastSent = send.last?.0
        if let lastDrop = drop.max(by: { $0.instant < $1.instant }),
            lastSent == nil || lastDrop.instant > lastSent!.instant
        {
            outputs.append(
                .write(
                    .dropped(
                        OccurrenceRecord(
                            deviceId: deviceId,
                            id: n.id,
                            version: n.version,
                            index: lastDrop.index,
                            occurrence: lastDrop.instant,
                            at: now,
                            last: following == nil && lastDrop == newest,
                            badge: nil
                        )
                    )
                )
            )
        }
        for (o, missed) in send {
            let token = nextToken
            nextToken += 1
            let last = following == nil && o == newest
            if let badge = n.spec.badge { device.inflightBadges.append((token, badge)) }
            let payload = deliveryPayload(
                n,
                o,
                deviceId: deviceId,
                now: now,
                last: last,
                missed: missed,
                deferred: wasDeferred,
                badge: n.spec.badge.map { _ in device.currentBadge }
            )
            inflight[token] = InFlight(
                deviceId: deviceId,
                id: n.id,
                version: n.version,
                occurrence: o,
                firedAt: now,
                last: last,
                badge: n.spec.badge
            )
            var expiry: UInt32?
            if let expires = n.spec.expiresAfter {
                let left = expires - (now.milliseconds - n.fireTime(o).milliseconds)
                expiry = UInt32(clamping: max(1, (left + 999) / 1000))
            }
            outputs.append(
                .publish(
                    Delivery(
                        token: token,
                        deviceId: deviceId,
                        fireId: fireId(n.id, o),
                        payload: payload,
                        messageExpiry: expiry,
                        due: n.fireTime(o)
                    )
                )
            )
        }
    }

    /// The broker acknowledged a delivery: returns the entry that records it, to be journaled
    /// and applied. Nil for a token the engine does not know (already acknowledged).
    public mutating func acknowledged(_ token: UInt64) -> JournalEntry? {
        guard let f = inflight.removeValue(forKey: token) else { return nil }
        if var device = devices[f.deviceId], let i = device.inflightBadges.firstIndex(where: { $0.token == token }) {
            device.inflightBadges.remove(at: i)
            devices[f.deviceId] = device
        }
        return .delivered(
            OccurrenceRecord(
                deviceId: f.deviceId,
                id: f.id,
                version: f.version,
                index: f.occurrence.index,
                occurrence: f.occurrence.instant,
                at: f.firedAt,
                last: f.last,
                badge: f.badge
            )
        )
    }

    func fireId(_ id: String, _ o: Occurrence) -> String { "\(id)@\(o.instant.rfc3339())" }

    func deliveryPayload(
        _ n: StoredNotification,
        _ o: Occurrence,
        deviceId: String,
        now: Instant,
        last: Bool,
        missed: Int,
        deferred: Bool,
        badge: Int?
    ) -> [UInt8] {
        let spec = n.spec
        let fireDate = n.fireTime(o)
        var d = JSONObject()
        d.append("deviceId", .string(deviceId))
        d.append("id", .string(n.id))
        d.append("fireId", .string(fireId(n.id, o)))
        d.append("occurrenceDate", .string(o.instant.rfc3339()))
        d.append("fireDate", .string(fireDate.rfc3339()))
        d.append("firedAt", .string(now.rfc3339(fractional: true)))
        d.append("occurrence", .int(Int64(o.index)))
        d.append("last", .bool(last))
        d.append("late", .bool(now.milliseconds - fireDate.milliseconds >= configuration.lateThreshold))
        d.append("missed", .int(Int64(missed)))
        d.append("deferred", .bool(deferred))
        if let v = spec.alertTitle { d.append("alertTitle", .string(v)) }
        if let v = spec.alertBody {
            d.append("alertBody", .string(v))
        } else if let bodies = spec.alertBodies, !bodies.isEmpty {
            var x = spec.seed &+ UInt64(o.index) &* 0x9E37_79B9_7F4A_7C15
            x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
            x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
            x ^= x >> 31
            d.append("alertBody", .string(bodies[Int(x % UInt64(bodies.count))]))
        }
        if let v = spec.alertAction { d.append("alertAction", .string(v)) }
        if let v = spec.hasAction { d.append("hasAction", .bool(v)) }
        if let v = spec.soundName { d.append("soundName", .string(v)) }
        if let v = spec.category { d.append("category", .string(v)) }
        if let badge { d.append("badge", .int(Int64(badge))) }
        if let v = spec.userInfo { d.append("userInfo", .object(v)) }
        return JSON.object(d).bytes
    }
}

extension Engine {
    /// A delivery could not be handed to the MQTT client (not connected, queue full): forget
    /// it and arm its notification again from its durable state, so it is sent later.
    public mutating func publishFailed(_ token: UInt64) {
        guard let f = inflight.removeValue(forKey: token), var device = devices[f.deviceId] else { return }
        device.inflightBadges.removeAll { $0.token == token }
        if var n = device.notifications[f.id], n.version == f.version {
            n.sentThrough = nil
            arm(&n, deviceId: f.deviceId, zone: device.timeZone)
            device.notifications[f.id] = n
        }
        devices[f.deviceId] = device
    }

    /// Every delivery in flight, oldest first: what to re-send if the broker connection lost
    /// them.
    public var inflightTokens: [UInt64] { inflight.keys.sorted() }
}
