import ChimeProtocol

/// The engine's devices in id order, for `find` (PROTOCOL.md section 3.12): built by the first
/// query, then brought up to date by each one, so that no other command pays for it.
///
/// It follows ``Engine/deviceOrder`` (every device in the order it was created): the devices
/// appended there since the last query are sorted and merged in, and dropped ones are left out as
/// they are met. When the order was compacted meanwhile (its dropped devices taken out), the
/// directory is built again.
struct DeviceDirectory {
    /// Devices in id order; some may have been dropped since (``DeviceState/dropped``).
    var sorted: [DeviceState] = []
    /// How many of ``Engine/deviceOrder`` it holds: the first ones.
    var covered = 0
    /// The last of those, to tell that the order was not compacted since.
    var lastCovered: DeviceState?

    /// Brings it up to date with `order`.
    mutating func refresh(_ order: [DeviceState]) {
        let intact = covered == 0 || (covered <= order.count && order[covered - 1] === lastCovered)
        guard intact else {
            sorted = order.filter { !$0.dropped }.sorted { $0.id < $1.id }
            covered = order.count
            lastCovered = order.last
            return
        }
        guard covered < order.count else { return }
        let added = order[covered...].filter { !$0.dropped }.sorted { $0.id < $1.id }
        covered = order.count
        lastCovered = order.last
        guard !added.isEmpty else { return }
        var merged: [DeviceState] = []
        merged.reserveCapacity(sorted.count + added.count)
        var i = 0
        var j = 0
        while i < sorted.count || j < added.count {
            if j == added.count || (i < sorted.count && sorted[i].id < added[j].id) {
                if !sorted[i].dropped { merged.append(sorted[i]) }
                i += 1
            } else {
                merged.append(added[j])
                j += 1
            }
        }
        sorted = merged
    }

    /// The position of the first device that the query may list: after `after`, at or after `prefix`.
    func start(_ query: FindQuery) -> Int {
        var lo = 0
        var hi = sorted.count
        while lo < hi {
            let mid = (lo + hi) / 2
            let id = sorted[mid].id
            let before = (query.after.map { id <= $0 } ?? false) || (query.prefix.map { id < $0 } ?? false)
            if before { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }
}

extension Engine {
    /// Answers a `find` query over the devices of `engines` (a worker's, one per slot it serves),
    /// in device id order, as one walk over all of them: at most `query.limit` devices, after
    /// examining at most ``FleetFind/maximumDevicesExamined`` devices and reading at most about
    /// ``FleetFind/maximumNotificationsExamined`` notifications for the tag.
    ///
    /// - Parameter serves: whether this worker answers for a device (its partition); devices it
    ///   does not serve are examined and not listed.
    public static func find(
        _ query: FindQuery,
        in engines: [Engine],
        serves: (String) -> Bool = { _ in true },
        maximumDevices: Int = FleetFind.maximumDevicesExamined,
        maximumNotifications: Int = FleetFind.maximumNotificationsExamined
    ) -> FindPage {
        // Each engine's directory, and where its walk is.
        var walks: [(devices: [DeviceState], at: Int)] = []
        for engine in engines {
            engine.directory.refresh(engine.deviceOrder)
            let sorted = engine.directory.sorted
            let at = engine.directory.start(query)
            if at < sorted.count { walks.append((sorted, at)) }
        }
        var heap = WalkHeap(walks.indices.map { (walks[$0].devices[walks[$0].at].id, $0) })
        var found: [FoundDevice] = []
        var examined = 0
        var read = 0
        while let (id, w) = heap.popMin() {
            let device = walks[w].devices[walks[w].at]
            // Past the prefix, this engine has nothing more to list.
            if let prefix = query.prefix, !id.utf8.starts(with: prefix.utf8) { continue }
            walks[w].at += 1
            if walks[w].at < walks[w].devices.count { heap.push((walks[w].devices[walks[w].at].id, w)) }
            examined += 1
            if !device.dropped, serves(id) {
                if let match = query.match {
                    let (ids, cost) = matchingIds(device, match)
                    read += cost
                    if !ids.isEmpty {
                        found.append(
                            FoundDevice(
                                deviceId: id,
                                pending: device.listedCount,
                                matching: Array(ids.prefix(FleetFind.maximumMatchingIds)),
                                matchingCount: ids.count
                            )
                        )
                    }
                } else {
                    found.append(FoundDevice(deviceId: id, pending: device.listedCount))
                }
            }
            let more = !heap.isEmpty && !(query.prefix.map { p in !heap.minId!.utf8.starts(with: p.utf8) } ?? false)
            guard more else { break }
            if found.count == query.limit || examined >= maximumDevices || read >= maximumNotifications {
                return FindPage(devices: found, next: id, examined: examined)
            }
        }
        return FindPage(devices: found, next: nil, examined: examined)
    }

    /// The ids of `device`'s listed notifications that have every member of `wanted`, in id order,
    /// and how many notifications were read to find them (a device's index is built, reading all
    /// of them, the first time a match needs it: see ``matching(_:_:)``).
    static func matchingIds(_ device: DeviceState, _ wanted: JSONObject) -> (ids: [String], read: Int) {
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
        let ids = candidates.filter { $0.isListed && Selector.matches(wanted, $0.userInfoObject) }.map(\.id).sorted()
        return (ids, read)
    }
}

/// A binary min-heap of the walks' next device ids: the next device of the merged walk.
struct WalkHeap {
    private var items: [(id: String, walk: Int)]

    init(_ items: [(String, Int)]) {
        self.items = []
        self.items.reserveCapacity(items.count)
        for item in items { push(item) }
    }

    var isEmpty: Bool { items.isEmpty }
    var minId: String? { items.first?.id }

    mutating func push(_ item: (String, Int)) {
        items.append((item.0, item.1))
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard items[i].id < items[parent].id else { break }
            items.swapAt(i, parent)
            i = parent
        }
    }

    mutating func popMin() -> (String, Int)? {
        guard let top = items.first else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1
                let r = l + 1
                var smallest = i
                if l < items.count, items[l].id < items[smallest].id { smallest = l }
                if r < items.count, items[r].id < items[smallest].id { smallest = r }
                guard smallest != i else { break }
                items.swapAt(i, smallest)
                i = smallest
            }
        }
        return (top.id, top.walk)
    }
}
