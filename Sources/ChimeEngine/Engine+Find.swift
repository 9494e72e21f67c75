import ChimeProtocol

/// The engine's devices in id order, for `find` (PROTOCOL.md section 3.12): built by the first
/// query, then brought up to date by each one, so that no other command pays for it.
///
/// It follows ``Engine/deviceOrder`` (every device in the order it was created): the devices
/// appended there since the last query are sorted into ``recent``, which is merged into ``sorted``
/// only once it is a sixteenth of it, so that a query on a busy worker sorts what is new, not every
/// device (at a million devices a full merge held the loop 110 ms, `chime-bench maxima`). Dropped
/// devices are left out as they are met. When the order was compacted meanwhile (its dropped
/// devices taken out), the directory is built again.
struct DeviceDirectory {
    /// Devices in id order; some may have been dropped since (``DeviceState/dropped``).
    var sorted: [DeviceState] = []
    /// Devices added since ``sorted`` was last merged, in id order.
    var recent: [DeviceState] = []
    /// How many of ``Engine/deviceOrder`` it holds: the first ones.
    var covered = 0
    /// The last of those, to tell that the order was not compacted since.
    var lastCovered: DeviceState?

    /// ``recent`` is merged into ``sorted`` once it holds more than this, or a sixteenth of it.
    static let recentLimit = 4096

    /// Brings it up to date with `order`.
    mutating func refresh(_ order: [DeviceState]) {
        let intact = covered == 0 || (covered <= order.count && order[covered - 1] === lastCovered)
        guard intact else {
            sorted = order.filter { !$0.dropped }.sorted { $0.id < $1.id }
            recent = []
            covered = order.count
            lastCovered = order.last
            return
        }
        guard covered < order.count else { return }
        let added = order[covered...].filter { !$0.dropped }.sorted { $0.id < $1.id }
        covered = order.count
        lastCovered = order.last
        guard !added.isEmpty else { return }
        recent = Self.merged(recent, added)
        if recent.count > max(Self.recentLimit, sorted.count / 16) {
            sorted = Self.merged(sorted, recent)
            recent = []
        }
    }

    /// `a` and `b`, both in id order, as one, without the devices dropped since.
    static func merged(_ a: [DeviceState], _ b: [DeviceState]) -> [DeviceState] {
        var merged: [DeviceState] = []
        merged.reserveCapacity(a.count + b.count)
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            let device: DeviceState
            if j == b.count || (i < a.count && a[i].id < b[j].id) {
                device = a[i]
                i += 1
            } else {
                device = b[j]
                j += 1
            }
            if !device.dropped { merged.append(device) }
        }
        return merged
    }

    /// Where a query's walk starts in each part: the first device it may list, after `after` and at
    /// or after `prefix`.
    func walks(_ query: FindQuery) -> [(devices: [DeviceState], at: Int)] {
        [sorted, recent].compactMap { devices in
            let at = Self.start(query, in: devices)
            return at < devices.count ? (devices, at) : nil
        }
    }

    static func start(_ query: FindQuery, in sorted: [DeviceState]) -> Int {
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
        // Each engine's directory, and where its walks are.
        var walks: [(devices: [DeviceState], at: Int)] = []
        for engine in engines {
            engine.directory.refresh(engine.deviceOrder)
            walks += engine.directory.walks(query)
        }
        var heap = WalkHeap(walks.indices.map { (walks[$0].devices[walks[$0].at].id, $0) })
        var found: [FoundDevice] = []
        var examined = 0
        var read = 0
        /// The device walk `w` is at, moving the walk on.
        func advance(_ w: Int) -> DeviceState {
            let device = walks[w].devices[walks[w].at]
            walks[w].at += 1
            if walks[w].at < walks[w].devices.count { heap.push((walks[w].devices[walks[w].at].id, w)) }
            return device
        }
        while let (id, w) = heap.popMin() {
            // Past the prefix, this walk has nothing more to list.
            if let prefix = query.prefix, !id.utf8.starts(with: prefix.utf8) { continue }
            var device = advance(w)
            // One id in two walks of an engine: a device dropped, and the one made again since. Both
            // are taken here, so that a page never ends between them.
            while heap.minId == id, let (_, other) = heap.popMin() {
                let again = advance(other)
                if device.dropped { device = again }
            }
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
    /// and how many notifications were read to find them (``matching(_:_:)``).
    static func matchingIds(_ device: DeviceState, _ wanted: JSONObject) -> (ids: [String], read: Int) {
        let (notifications, read) = matching(device, wanted)
        return (notifications.map(\.id).sorted(), read)
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

    /// By id, then by walk: the same id comes out of the walks in the order they were made.
    private static func less(_ a: (id: String, walk: Int), _ b: (id: String, walk: Int)) -> Bool {
        a.id < b.id || (a.id == b.id && a.walk < b.walk)
    }
    var minId: String? { items.first?.id }

    mutating func push(_ item: (String, Int)) {
        items.append((item.0, item.1))
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.less(items[i], items[parent]) else { break }
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
                if l < items.count, Self.less(items[l], items[smallest]) { smallest = l }
                if r < items.count, Self.less(items[r], items[smallest]) { smallest = r }
                guard smallest != i else { break }
                items.swapAt(i, smallest)
                i = smallest
            }
        }
        return (top.id, top.walk)
    }
}
