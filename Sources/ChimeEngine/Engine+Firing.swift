import ChimeProtocol

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
            // Push only, unless the device has no registration left to push to, or the delivery is
            // too large for any push.
            let mqtt =
                extras?.channels != .push || device.push?.registrations.isEmpty != false
                || payload.count > Self.maxPushedDelivery
            inflight[token] = InFlight(
                notification: n,
                version: n.version,
                occurrence: o,
                firedAt: now,
                last: last,
                badge: n.badge,
                capture: capture(
                    device,
                    payload: payload,
                    occurrence: o.instant.milliseconds,
                    due: n.fireTime(o).milliseconds,
                    expiresAfter: extras?.expiresAfter,
                    mqtt: mqtt,
                    now: now
                ),
                push: capturePush(
                    device,
                    channels: extras?.channels,
                    payload: payload,
                    due: n.fireTime(o).milliseconds,
                    expiresAfter: extras?.expiresAfter,
                    now: now
                )
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
                        due: n.fireTime(o),
                        lateness: .of(
                            due: n.fireTime(o).milliseconds,
                            occurrence: o.instant.milliseconds,
                            pendingFrom: n.pendingFrom,
                            deliveringSince: deliveringSince,
                            deferred: wasDeferred
                        ),
                        mqtt: mqtt
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
        if !refusals.isEmpty { refusals.removeValue(forKey: ObjectIdentifier(n)) }
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
                badge: f.badge,
                receipt: f.capture,
                push: f.push
            )
        )
    }

    /// The broker refused a delivery (a PUBACK reason code of 0x80 or more: not authorized, quota
    /// exceeded, ...), or the MQTT client could not take it (not connected, a packet too large):
    /// it is not delivered, so its occurrence stays due and is sent again, after
    /// ``refusalBackoff(attempt:)``, doubling with each failure in a row.
    /// - Returns: the delay before the retry, in milliseconds (nil for an unknown token).
    @discardableResult
    public func publishRefused(_ token: UInt64, now: Instant) -> Int64? {
        guard let n = rearm(token), !n.removed else { return nil }
        let key = ObjectIdentifier(n)
        let attempt = (refusals[key] ?? 0) + 1
        refusals[key] = attempt
        let delay = Self.refusalBackoff(attempt: attempt)
        if let due = n.armedDue { setTimer(n, max(due, now.milliseconds + delay)) }
        return delay
    }

    /// The wait before retrying a delivery refused `attempt` times in a row: 1 s, doubling, at
    /// most 5 minutes (PROTOCOL.md section 7).
    public static func refusalBackoff(attempt: Int) -> Int64 {
        min(1000 << Int64(min(attempt - 1, 20)), 300_000)
    }

    /// Forgets an in-flight delivery and arms its notification from its durable state: the one
    /// it was sent for, or the one an `update` of its content put in its place (same version).
    private func rearm(_ token: UInt64) -> StoredNotification? {
        guard let f = inflight.removeValue(forKey: token) else { return nil }
        guard let device = devices[f.notification.deviceId] else { return nil }
        let n = f.notification.removed ? device.notifications[f.notification.id] ?? f.notification : f.notification
        device.inflightBadges.removeAll { $0.token == token }
        if !n.removed && n.version == f.version {
            n.sentThrough = nil
            arm(n, device)
        }
        dropIfEmpty(device)
        return n
    }

    func fireId(_ id: String, _ o: Occurrence) -> String { fireId(id, o.instant) }

    /// A delivery's `fireId`: the notification's id and its occurrence (PROTOCOL.md section 5).
    func fireId(_ id: String, _ occurrence: Instant) -> String { Self.fireId(id, occurrence) }

    /// A delivery's `fireId`: the notification's id and its occurrence (PROTOCOL.md section 5).
    static func fireId(_ id: String, _ occurrence: Instant) -> String { "\(id)@\(occurrence.rfc3339())" }

    /// The id and the occurrence a `fireId` names: nil for a string ``fireId(_:_:)`` never makes
    /// (so that two spellings of one instant do not name the same delivery).
    static func parseFireId(_ fireId: String) -> (id: String, occurrence: Instant)? {
        guard let at = fireId.utf8.lastIndex(of: UInt8(ascii: "@")) else { return nil }
        let id = String(fireId[..<at])
        guard case .instant(let occurrence)? = DateTimeValue(iso8601: String(fireId[fireId.index(after: at)...])),
            Self.fireId(id, occurrence) == fireId
        else { return nil }
        return (id, occurrence)
    }

    /// The delivery's JSON (PROTOCOL.md section 5), written straight into bytes: this runs for
    /// every delivery, so it builds no intermediate JSON values or strings.
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
        var out: [UInt8] = []
        out.reserveCapacity(256 + n.contentCount)
        func key(_ k: StaticString) {
            out.append(UInt8(ascii: ","))
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(start: k.utf8Start, count: k.utf8CodeUnitCount))
            out.append(contentsOf: [UInt8(ascii: "\""), UInt8(ascii: ":")])
        }
        func instant(_ i: Instant, fractional: Bool = false) {
            out.append(UInt8(ascii: "\""))
            i.writeRFC3339(into: &out, fractional: fractional)
            out.append(UInt8(ascii: "\""))
        }
        func flag(_ b: Bool) { out.append(contentsOf: (b ? "true" : "false").utf8) }
        out.append(contentsOf: #"{"deviceId":"#.utf8)
        JSON.writeString(n.deviceId, to: &out)
        key("id")
        JSON.writeString(n.id, to: &out)
        key("fireId")
        JSON.writeString(n.id, to: &out)
        out.removeLast()  // reopen the string: fireId is "{id}@{occurrenceDate}"
        out.append(UInt8(ascii: "@"))
        o.instant.writeRFC3339(into: &out)
        out.append(UInt8(ascii: "\""))
        key("occurrenceDate")
        instant(o.instant)
        key("fireDate")
        instant(fireDate)
        key("firedAt")
        instant(now, fractional: true)
        key("occurrence")
        out.append(contentsOf: String(o.index).utf8)
        key("last")
        flag(last)
        key("late")
        flag(now.milliseconds - fireDate.milliseconds >= configuration.lateThreshold)
        key("missed")
        out.append(contentsOf: String(missed).utf8)
        key("deferred")
        flag(deferred)
        if let bodies = n.extras?.alertBodies, !bodies.isEmpty {
            let picked = bodies[Int(pick(seed: n.extras?.seed ?? 0, index: o.index) % UInt64(bodies.count))]
            key("alertBody")
            JSON.writeString(picked, to: &out)
        }
        if let badge {
            key("badge")
            out.append(contentsOf: String(badge).utf8)
        }
        n.withContent { out.append(contentsOf: $0) }
        out.append(UInt8(ascii: "}"))
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
