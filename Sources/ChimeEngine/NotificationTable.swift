/// A device's notifications by id: open addressing with linear probing, each slot a reference
/// and 32 bits of its id's hash.
///
/// A `[String: StoredNotification]` keeps a 16-byte key beside each 8-byte reference, though the
/// key is the notification's own ``StoredNotification/id``. This table keeps the reference and a
/// 4-byte tag, so that a probe reads a notification only when its tag matches: 12 bytes a slot
/// instead of 24, in a power of two of slots at most three quarters full, like the dictionary's
/// (at 100,000 notifications a device, 262,144 slots: 31 bytes a notification instead of 63).
///
/// A tag is the low 32 bits of the id's `hashValue` (seeded per process, so ids chosen to collide
/// cannot be), never 0, which marks an empty slot. An entry's home slot is its tag's low bits,
/// so growing moves entries without reading their ids. A removal shifts the entries after it
/// back instead of leaving a tombstone, so probes do not lengthen as notifications come and go.
/// The storage is released when the table empties.
struct NotificationTable {
    private var tags: [UInt32] = []
    private var slots: [StoredNotification?] = []
    private(set) var count = 0

    init() {}

    var isEmpty: Bool { count == 0 }

    /// How many notifications fit before the table grows.
    var capacity: Int { tags.count * 3 / 4 }

    /// Every notification, in no particular order.
    var values: Values { Values(slots: slots, underestimatedCount: count) }

    struct Values: Sequence {
        fileprivate let slots: [StoredNotification?]
        let underestimatedCount: Int

        func makeIterator() -> Iterator { Iterator(slots: slots.makeIterator()) }

        struct Iterator: IteratorProtocol {
            fileprivate var slots: IndexingIterator<[StoredNotification?]>

            mutating func next() -> StoredNotification? {
                while let slot = slots.next() {
                    if let n = slot { return n }
                }
                return nil
            }
        }
    }

    subscript(id: String) -> StoredNotification? {
        guard count > 0 else { return nil }
        let (index, found) = find(id, tag: Self.tag(id))
        return found ? slots[index] : nil
    }

    /// Puts `n` in under its id, returning the notification it replaces.
    @discardableResult
    mutating func insert(_ n: StoredNotification) -> StoredNotification? {
        let tag = Self.tag(n.id)
        if !tags.isEmpty {
            let (index, found) = find(n.id, tag: tag)
            if found {
                defer { slots[index] = n }
                return slots[index]
            }
            if Self.fits(count + 1, in: tags.count) {
                place(n, tag: tag, at: index)
                return nil
            }
        }
        resize(to: Self.slotCount(for: count + 1))
        place(n, tag: tag, at: find(n.id, tag: tag).index)
        return nil
    }

    /// Takes out the notification with `id`, returning it.
    @discardableResult
    mutating func remove(id: String) -> StoredNotification? {
        guard count > 0 else { return nil }
        let (index, found) = find(id, tag: Self.tag(id))
        guard found else { return nil }
        let removed = slots[index]
        count -= 1
        if count == 0 {
            tags = []
            slots = []
            return removed
        }
        // Move back each entry after the hole, up to the next empty slot, that may sit there: one
        // whose home is not between the hole and where it is.
        let mask = tags.count - 1
        var hole = index
        var next = (index + 1) & mask
        while tags[next] != 0 {
            let home = Int(tags[next]) & mask
            if (next - home) & mask >= (next - hole) & mask {
                tags[hole] = tags[next]
                slots[hole] = slots[next].take()
                hole = next
            }
            next = (next + 1) & mask
        }
        tags[hole] = 0
        slots[hole] = nil
        return removed
    }

    /// Makes room for `capacity` notifications in all without growing again.
    mutating func reserveCapacity(_ capacity: Int) {
        let wanted = Self.slotCount(for: capacity)
        if wanted > tags.count { resize(to: wanted) }
    }

    // MARK: Slots

    private static func tag(_ id: String) -> UInt32 {
        let tag = UInt32(truncatingIfNeeded: id.hashValue)
        return tag == 0 ? 1 : tag
    }

    private static func fits(_ count: Int, in slotCount: Int) -> Bool { count * 4 <= slotCount * 3 }

    /// The fewest slots, a power of two, that hold `count` entries.
    private static func slotCount(for count: Int) -> Int {
        var slots = 2
        while !fits(count, in: slots) { slots *= 2 }
        return slots
    }

    /// The slot holding `id`, or the empty slot where it would go. The table has a slot and
    /// at least one is empty, so the probe ends.
    private func find(_ id: String, tag: UInt32) -> (index: Int, found: Bool) {
        let mask = tags.count - 1
        var index = Int(tag) & mask
        while true {
            let found = tags[index]
            if found == 0 { return (index, false) }
            if found == tag, slots[index]!.id == id { return (index, true) }
            index = (index + 1) & mask
        }
    }

    private mutating func place(_ n: StoredNotification, tag: UInt32, at index: Int) {
        tags[index] = tag
        slots[index] = n
        count += 1
    }

    /// Moves every entry into `slotCount` slots. The references are moved, not copied: copying
    /// would touch every notification's reference count, a cache miss each in a large table.
    private mutating func resize(to slotCount: Int) {
        let oldTags = tags
        var oldSlots: [StoredNotification?] = []
        swap(&oldSlots, &slots)
        tags = Array(repeating: 0, count: slotCount)
        slots = Array(repeating: nil, count: slotCount)
        let mask = slotCount - 1
        for (i, tag) in oldTags.enumerated() where tag != 0 {
            var index = Int(tag) & mask
            while tags[index] != 0 { index = (index + 1) & mask }
            tags[index] = tag
            slots[index] = oldSlots[i].take()
        }
    }
}
