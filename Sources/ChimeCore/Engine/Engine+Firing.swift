extension Engine {
    /// Delivers what is due at `now`: returns the deliveries to publish and the entries to
    /// journal (occurrences dropped by `expiresAfter` or `misfire: skip`). Does nothing while
    /// disconnected.
    ///
    /// - Parameter limit: at most this many deliveries; what is left stays due, and
    ///   ``nextWake`` says so. The worker bounds what it has in flight this way, so that a
    ///   million notifications due at once do not all queue up in the MQTT client.
    public func tick(now: Instant, limit: Int = .max) -> [EngineOutput] {
        guard connected else { return [] }
        var outputs: [EngineOutput] = []
        var published = 0
        while published < limit, let top = heap.top, top.due <= now.milliseconds {
            _ = heap.pop()
            let n = top.notification
            guard !n.removed, n.armedDue == top.due, let first = n.next, let device = devices[n.deviceId] else {
                continue
            }
            n.armedDue = nil
            let before = outputs.count
            fire(n, first, device, now, &outputs)
            for output in outputs[before...] {
                if case .publish = output { published += 1 }
            }
        }
        return outputs
    }

    private func fire(
        _ n: StoredNotification,
        _ first: Occurrence,
        _ device: DeviceState,
        _ now: Instant,
        _ outputs: inout [EngineOutput]
    ) {
        let extras = n.extras
        // Quiet hours hold the delivery until they end.
        if extras?.ignoreQuietHours != true, let quiet = device.quietHours, let zone = device.timeZone,
            quiet.contains(zone.localDateTime(at: now))
        {
            n.deferred = true
            setTimer(n, quiet.end(after: now, in: zone).milliseconds)
            return
        }
        let recurrence: Recurrence?
        do {
            recurrence = n.isRepeating ? try self.recurrence(n, device) : nil
        } catch {
            recurrence = nil
        }

        // Every occurrence due by now, oldest first (at most maxMissedDeliveries kept), and how
        // many more were passed over.
        var due: [Occurrence] = [first]
        var following: Occurrence?
        var counted = 1
        if let recurrence {
            var cursor = first
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
                if due.count == configuration.maxMissedDeliveries { due.removeFirst() }
                due.append(next)
                cursor = next
            }
        }
        let passedOver = counted - due.count
        let newest = due[due.count - 1]

        // An occurrence is missed when it was due after the notification was armed and was not
        // sent within the late threshold; a one-shot already past when scheduled fires at once.
        func isMissed(_ o: Occurrence) -> Bool {
            now.milliseconds - n.fireTime(o).milliseconds >= configuration.lateThreshold
                && o.instant.milliseconds >= n.pendingFrom
        }

        var send: [(Occurrence, missed: Int)] = []
        var drop: [Occurrence] = []
        let wasDeferred = n.deferred
        if wasDeferred {
            send = [(newest, due.count - 1 + passedOver)]
        } else {
            switch extras?.misfire ?? .coalesce {
            case .coalesce:
                send = [(newest, due.count - 1 + passedOver)]
            case .skip:
                for o in due {
                    if isMissed(o) { drop.append(o) } else { send.append((o, 0)) }
                }
            case .all:
                send = due.map { ($0, 0) }
            }
        }
        n.deferred = false

        if let expires = extras?.expiresAfter {
            send.removeAll { o, _ in
                let tooLate = now.milliseconds - n.fireTime(o).milliseconds > expires
                if tooLate { drop.append(o) }
                return tooLate
            }
        }

        n.sentThrough = newest.instant.milliseconds
        n.next = following
        if let following { setTimer(n, n.fireTime(following).milliseconds) }
        // Drops need a journal record only when nothing later of this round is sent, since an
        // acknowledged later occurrence moves pendingFrom past them anyway.
        let lastSent = send.last?.0
        if let lastDrop = drop.max(by: { $0.instant < $1.instant }),
            lastSent == nil || lastDrop.instant > lastSent!.instant
        {
            outputs.append(
                .write(
                    .dropped(
                        OccurrenceRecord(
                            deviceId: device.id,
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
            if let badge = n.badge { device.inflightBadges.append((token, badge)) }
            let payload = deliveryPayload(
                n,
                o,
                now: now,
                last: last,
                missed: missed,
                deferred: wasDeferred,
                badge: n.badge.map { _ in device.currentBadge }
            )
            inflight[token] = InFlight(
                notification: n,
                version: n.version,
                occurrence: o,
                firedAt: now,
                last: last,
                badge: n.badge
            )
            var expiry: UInt32?
            if let expires = extras?.expiresAfter {
                let left = expires - (now.milliseconds - n.fireTime(o).milliseconds)
                expiry = UInt32(clamping: max(1, (left + 999) / 1000))
            }
            outputs.append(
                .publish(
                    Delivery(
                        token: token,
                        deviceId: device.id,
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
    public func acknowledged(_ token: UInt64) -> JournalEntry? {
        guard let f = inflight.removeValue(forKey: token) else { return nil }
        let n = f.notification
        if let device = devices[n.deviceId], let i = device.inflightBadges.firstIndex(where: { $0.token == token }) {
            device.inflightBadges.remove(at: i)
        }
        return .delivered(
            OccurrenceRecord(
                deviceId: n.deviceId,
                id: n.id,
                version: f.version,
                index: f.occurrence.index,
                occurrence: f.occurrence.instant,
                at: f.firedAt,
                last: f.last,
                badge: f.badge
            )
        )
    }

    /// A delivery could not be handed to the MQTT client (not connected, queue full): forget
    /// it and arm its notification again from its durable state, so it is sent later.
    public func publishFailed(_ token: UInt64) {
        guard let f = inflight.removeValue(forKey: token) else { return }
        let n = f.notification
        guard let device = devices[n.deviceId] else { return }
        device.inflightBadges.removeAll { $0.token == token }
        if !n.removed && n.version == f.version {
            n.sentThrough = nil
            arm(n, device)
        }
        dropIfEmpty(device)
    }

    func fireId(_ id: String, _ o: Occurrence) -> String { "\(id)@\(o.instant.rfc3339())" }

    func deliveryPayload(
        _ n: StoredNotification,
        _ o: Occurrence,
        now: Instant,
        last: Bool,
        missed: Int,
        deferred: Bool,
        badge: Int?
    ) -> [UInt8] {
        let fireDate = n.fireTime(o)
        var d = JSONObject()
        d.append("deviceId", .string(n.deviceId))
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
        let e = n.extras
        if let v = n.alertTitle { d.append("alertTitle", .string(v)) }
        if let v = n.alertBody {
            d.append("alertBody", .string(v))
        } else if let bodies = e?.alertBodies, !bodies.isEmpty {
            d.append("alertBody", .string(bodies[Int(pick(seed: e?.seed ?? 0, index: o.index) % UInt64(bodies.count))]))
        }
        if let v = e?.alertAction { d.append("alertAction", .string(v)) }
        if let v = e?.hasAction { d.append("hasAction", .bool(v)) }
        if let v = e?.soundName { d.append("soundName", .string(v)) }
        if let v = e?.category { d.append("category", .string(v)) }
        if let badge { d.append("badge", .int(Int64(badge))) }
        var out = JSON.object(d).bytes
        if let userInfo = n.userInfo {
            // Splice the stored userInfo in as it is, before the closing brace.
            out.removeLast()
            out.append(contentsOf: #","userInfo":"#.utf8)
            out.append(contentsOf: userInfo)
            out.append(UInt8(ascii: "}"))
        }
        return out
    }

    /// The `alertBodies` pick for an occurrence: a hash of the seed journaled with the
    /// notification and the occurrence's index, so that a re-sent delivery picks the same one.
    func pick(seed: UInt64, index: Int) -> UInt64 {
        var x = seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15
        x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
        x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
        return x ^ (x >> 31)
    }

    /// Every delivery in flight, oldest first: what to re-send if the broker connection lost
    /// them.
    public var inflightTokens: [UInt64] { inflight.keys.sorted() }
}
