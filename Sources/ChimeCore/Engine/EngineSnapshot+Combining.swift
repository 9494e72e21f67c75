extension EngineSnapshot {
    /// The devices this snapshot holds state for, in no particular order.
    public var deviceIds: [String] { Array(devices.keys) }

    /// One snapshot made of the devices of `parts` that `isIncluded` selects: how devices move
    /// between data directories when the number of partitions changes.
    ///
    /// Its `nextVersion` is the greatest of the parts', so no version given out later repeats one
    /// that a moved notification carries. A device held by several parts keeps the state of the
    /// last one; check ``deviceIds`` first where that must not happen.
    public init(combining parts: [EngineSnapshot], devices isIncluded: (String) -> Bool) {
        var devices: [String: DeviceState] = [:]
        var nextVersion: UInt64 = 1
        for part in parts {
            nextVersion = max(nextVersion, part.nextVersion)
            for (deviceId, device) in part.devices where isIncluded(deviceId) {
                devices[deviceId] = device
            }
        }
        self.init(devices: devices, nextVersion: nextVersion)
    }
}
