import ChimeProtocol

/// A binary min-heap of wake-ups, ordered by due time.
///
/// Entries are never removed from the middle: when a notification is re-armed its
/// `armedDue` changes, and entries whose due time is not its `armedDue` are skipped when they
/// surface. (An entry with the same due time as a newer one is harmless: the first to surface
/// fires and disarms the notification, the second finds it disarmed.)
struct TimerHeap {
    struct Entry {
        var due: Int64
        var notification: StoredNotification
    }

    private var entries: [Entry] = []

    var count: Int { entries.count }
    var top: Entry? { entries.first }

    mutating func push(due: Int64, _ notification: StoredNotification) {
        entries.append(Entry(due: due, notification: notification))
        siftUp(entries.count - 1)
    }

    /// Adds an entry without ordering the heap: call ``heapify()`` before using it again.
    mutating func append(due: Int64, _ notification: StoredNotification) {
        entries.append(Entry(due: due, notification: notification))
    }

    /// Orders the whole heap in O(n), after ``append(due:_:)``.
    mutating func heapify() {
        guard entries.count > 1 else { return }
        for i in stride(from: entries.count / 2 - 1, through: 0, by: -1) { siftDown(i) }
    }

    mutating func pop() -> Entry? {
        guard !entries.isEmpty else { return nil }
        entries.swapAt(0, entries.count - 1)
        let last = entries.removeLast()
        if !entries.isEmpty { siftDown(0) }
        return last
    }

    /// Keeps only the entries `isLive` accepts, in O(n).
    mutating func compact(_ isLive: (Entry) -> Bool) {
        entries.removeAll { !isLive($0) }
        heapify()
    }

    mutating func removeAll() { entries.removeAll() }

    /// Makes room for `count` entries in all, so that filling it at recovery never copies it.
    mutating func reserveCapacity(_ count: Int) { entries.reserveCapacity(count) }

    private func less(_ a: Int, _ b: Int) -> Bool {
        entries[a].due < entries[b].due
    }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard less(child, parent) else { return }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        let n = entries.count
        while true {
            let left = 2 * parent + 1
            guard left < n else { return }
            var smallest = left
            let right = left + 1
            if right < n && less(right, left) { smallest = right }
            guard less(smallest, parent) else { return }
            entries.swapAt(smallest, parent)
            parent = smallest
        }
    }
}
