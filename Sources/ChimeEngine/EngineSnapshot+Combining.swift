import ChimeProtocol

extension EngineSnapshot {
    /// The devices this snapshot holds state for, in no particular order.
    public var deviceIds: [String] { devices.map(\.id) }

    /// Every notification the snapshot holds (snoozes included), as device and id.
    public var notificationKeys: [(device: String, id: String)] {
        notifications.map { ($0.notification.deviceId, $0.notification.id) }
    }

    /// The state that snapshot entries (as ``forEachEntry(_:)`` writes them) describe.
    public init<S: Sequence<ArraySlice<UInt8>>>(entries: S) throws(RecoveryError) {
        let restorer = EngineRestorer()
        for entry in entries { try restorer.restore(snapshotEntry: entry) }
        self = restorer.finish().snapshot
    }

    public init(entries: [[UInt8]]) throws(RecoveryError) {
        try self.init(entries: entries.lazy.map { $0[...] })
    }

    /// One snapshot made of the devices of `parts` that `isIncluded` selects: how devices move
    /// between data directories when the number of partitions changes.
    ///
    /// Its `nextVersion` is the greatest of the parts', so no version given out later repeats one
    /// that a moved notification carries. A device held by several parts keeps the state of the
    /// last one; check ``deviceIds`` first where that must not happen.
    public init(combining parts: [EngineSnapshot], devices isIncluded: (String) -> Bool) {
        var devices: [String: Device] = [:]
        var notifications: [String: [(notification: StoredNotification, state: DurableState)]] = [:]
        var nextVersion: UInt64 = 1
        var commandKeys: [String: [(key: CommandKey, at: Int64)]] = [:]
        var receipts: [String: FrozenReceipts] = [:]
        var zoneRules: [String: UInt64] = [:]
        var pushes: [String: FrozenPush] = [:]
        for part in parts {
            for p in part.pushes where isIncluded(p.deviceId) { pushes[p.deviceId] = p }
            for rule in part.zoneRules { zoneRules[rule.zone] = rule.fingerprint }
            for (device, keys) in part.commandKeys.joined() where isIncluded(device) { commandKeys[device] = keys }
            for r in part.receipts where isIncluded(r.deviceId) { receipts[r.deviceId] = r }
            nextVersion = max(nextVersion, part.nextVersion)
            var fromPart: [String: [(notification: StoredNotification, state: DurableState)]] = [:]
            for entry in part.notifications where isIncluded(entry.notification.deviceId) {
                fromPart[entry.notification.deviceId, default: []].append(entry)
            }
            for device in part.devices where isIncluded(device.id) {
                devices[device.id] = device
                notifications[device.id] = fromPart[device.id] ?? []
            }
        }
        self.init(
            devices: Array(devices.values),
            notifications: notifications.values.flatMap { $0 },
            nextVersion: nextVersion,
            commandKeys: [commandKeys],
            receipts: Array(receipts.values),
            zoneRules: zoneRules.sorted { $0.key < $1.key }.map {
                ZoneRulesRecord(zone: $0.key, fingerprint: $0.value)
            },
            pushes: Array(pushes.values)
        )
    }
}
