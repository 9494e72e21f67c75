import ChimeProtocol

/// The inbox and the history of one device, each with its own index, so that every delivery,
/// acknowledgement, expiry and page costs what it touches (amortised), never the whole inbox or
/// history: a device at the largest `--max-inbox-per-device` and `--history-per-device` must not
/// hold the worker's loop for the others.
///
/// Every delivery a device keeps takes the next number of the device's sequence (``ReceiptLog/next``):
/// its history entry has it, and so does its inbox entry when it has one. The inbox's `cursor` is
/// that number, so paging is strictly advancing even when two entries share a `fireId` (a
/// `keepAfterFiring` one-shot resumed and delivered again).

/// One unacknowledged delivery, as it was published.
struct InboxEntry: Hashable, Sendable {
    /// Its number in the device's sequence (the inbox's cursor).
    var seq: UInt64
    var fireId: String
    var payload: [UInt8]
    var expiresAt: Int64
    /// The history entry kept with it (nil: none, as with some restored from an older snapshot).
    var historySeq: UInt64?
    /// Taken out (acknowledged, expired or dropped); its place is reclaimed by the next compaction.
    var isGone = false
}

/// Sequence numbers of the entries that share a `fireId`: almost always one.
enum SeqSet: Hashable, Sendable {
    case one(UInt64)
    case many([UInt64])

    var all: [UInt64] {
        switch self {
        case .one(let s): return [s]
        case .many(let list): return list
        }
    }

    var newest: UInt64 {
        switch self {
        case .one(let s): return s
        case .many(let list): return list.last!
        }
    }

    func adding(_ seq: UInt64) -> SeqSet {
        switch self {
        case .one(let s): return .many([s, seq])
        case .many(let list): return .many(list + [seq])
        }
    }

    /// Without `seq`; nil when nothing is left.
    func removing(_ seq: UInt64) -> SeqSet? {
        switch self {
        case .one(let s): return s == seq ? nil : self
        case .many(let list):
            let rest = list.filter { $0 != seq }
            return rest.count == 1 ? .one(rest[0]) : rest.isEmpty ? nil : .many(rest)
        }
    }
}

extension Dictionary where Value == SeqSet {
    mutating func insert(_ seq: UInt64, for key: Key) {
        self[key] = self[key].map { $0.adding(seq) } ?? .one(seq)
    }

    mutating func remove(_ seq: UInt64, for key: Key) {
        self[key] = self[key]?.removing(seq)
    }
}

/// A device's unacknowledged deliveries, oldest first.
///
/// Entries are kept in order of their sequence numbers; one taken out is marked gone and its
/// payload released, and the array is compacted once the gone outnumber the live, so that taking
/// any entry out costs O(log n) amortised. Expiry goes through a min-heap of expiry times.
struct Inbox: Sendable {
    private var slots: [InboxEntry] = []
    /// Slots before it are all gone.
    private var head = 0
    private var byFireId: [String: SeqSet] = [:]
    private var expiry = TimeHeap<UInt64>()
    /// Live entries, and their payloads' bytes.
    private(set) var count = 0
    private(set) var bytes = 0

    var isEmpty: Bool { count == 0 }
    /// Slots held, gone ones included: at most about twice ``count``.
    var slotCount: Int { slots.count }

    /// The live entries, oldest first.
    var entries: [InboxEntry] { slots[head...].filter { !$0.isGone } }

    /// Adds the newest entry (its `seq` greater than every other's).
    mutating func append(_ entry: InboxEntry) {
        precondition(slots.last.map { $0.seq < entry.seq } ?? true, "inbox entries out of order")
        slots.append(entry)
        byFireId.insert(entry.seq, for: entry.fireId)
        expiry.push(at: entry.expiresAt, entry.seq)
        count += 1
        bytes += entry.payload.count
    }

    /// Takes out the oldest entry.
    mutating func removeOldest() -> InboxEntry? {
        while head < slots.count, slots[head].isGone { head += 1 }
        guard head < slots.count else { return nil }
        return take(at: head)
    }

    /// Takes out the entries that expired at or before `now`.
    mutating func removeExpired(at now: Int64) -> [InboxEntry] {
        var gone: [InboxEntry] = []
        while let top = expiry.top, top.at <= now {
            _ = expiry.pop()
            // An entry taken out otherwise left its heap item behind: skip it.
            if let i = index(of: top.key) { gone.append(take(at: i)) }
        }
        return gone
    }

    /// Takes out every entry with `fireId`.
    mutating func remove(fireId: String) -> [InboxEntry] {
        guard let seqs = byFireId[fireId]?.all else { return [] }
        return seqs.compactMap { seq in index(of: seq).map { take(at: $0) } }
    }

    /// Whether an entry with `fireId` is held and not expired at `now`.
    func holds(_ fireId: String, at now: Int64) -> Bool {
        guard let seqs = byFireId[fireId]?.all else { return false }
        return seqs.contains { seq in index(of: seq).map { slots[$0].expiresAt > now } ?? false }
    }

    /// The newest entry's sequence number with `fireId` (an older client's cursor).
    func newestSeq(of fireId: String) -> UInt64? { byFireId[fireId]?.newest }

    /// Calls `body` with the live entries numbered above `cursor` that have not expired at `now`,
    /// oldest first, until it returns false. Returns whether it returned false (an entry is left).
    func visit(after cursor: UInt64?, at now: Int64, _ body: (InboxEntry) -> Bool) -> Bool {
        var i = cursor.map { firstIndex(after: $0) } ?? head
        while i < slots.count {
            let entry = slots[i]
            i += 1
            guard !entry.isGone, entry.expiresAt > now else { continue }
            if !body(entry) { return true }
        }
        return false
    }

    mutating func removeAll() { self = Inbox() }

    private mutating func take(at i: Int) -> InboxEntry {
        let entry = slots[i]
        slots[i].isGone = true
        slots[i].payload = []
        byFireId.remove(entry.seq, for: entry.fireId)
        count -= 1
        bytes -= entry.payload.count
        if i == head { head += 1 }
        compactIfSparse()
        return entry
    }

    /// Drops the gone slots once they outnumber the live ones (and the expiry heap's stale
    /// entries with them), so that the arrays stay within twice the live entries.
    private mutating func compactIfSparse() {
        let gone = slots.count - count
        guard gone > 64, gone > count else { return }
        slots.removeAll { $0.isGone }
        head = 0
        expiry = TimeHeap(slots.map { ($0.expiresAt, $0.seq) })
    }

    private func firstIndex(after seq: UInt64) -> Int {
        var low = head
        var high = slots.count
        while low < high {
            let mid = (low + high) / 2
            if slots[mid].seq <= seq { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private func index(of seq: UInt64) -> Int? {
        let i = firstIndex(after: seq) - 1
        return i >= head && slots[i].seq == seq && !slots[i].isGone ? i : nil
    }
}

/// One delivery in a device's history.
struct HistoryEntry: Hashable, Sendable {
    var fireId: String
    var id: String
    var occurrence: Int64
    var firedAt: Int64
    var late: Bool
    var acknowledgedAt: Int64?
    /// Set once it leaves the inbox unacknowledged.
    var leftAs: DeliveryState?
    /// Nil without receipts.
    var expiresAt: Int64?
    /// What became of its pushes, one per registration, in the order they ended.
    var push: [PushTrail] = []

    func state(at now: Int64) -> DeliveryState {
        if acknowledgedAt != nil { return .acknowledged }
        if let leftAs { return leftAs }
        guard let expiresAt else { return .delivered }
        return now >= expiresAt ? .expired : .unacknowledged
    }
}

/// What became of one push of a delivery, as `history` shows it.
struct PushTrail: Hashable, Sendable {
    var registration: String
    var outcome: PushOutcome
    var at: Int64
    var reason: String?
}

/// A device's most recent deliveries, oldest first, with consecutive sequence numbers from
/// ``firstSeq``: the oldest leave from the front in O(1) amortised, and an entry is found by its
/// number or its `fireId` without a search.
struct DeliveryHistory: Sendable {
    private var storage: [HistoryEntry] = []
    private var head = 0
    private var byFireId: [String: SeqSet] = [:]
    /// The oldest entry's sequence number.
    private(set) var firstSeq: UInt64 = 1

    var count: Int { storage.count - head }
    var isEmpty: Bool { count == 0 }
    /// Oldest first.
    var entries: ArraySlice<HistoryEntry> { storage[head...] }
    /// The sequence number the next entry must have.
    var nextSeq: UInt64 { firstSeq + UInt64(count) }

    init(firstSeq: UInt64 = 1) { self.firstSeq = firstSeq }

    mutating func append(_ entry: HistoryEntry) {
        byFireId.insert(nextSeq, for: entry.fireId)
        storage.append(entry)
    }

    /// Lets the oldest go until at most `limit` are left.
    mutating func trim(to limit: Int) {
        while count > limit {
            byFireId.remove(firstSeq, for: storage[head].fireId)
            storage[head] = HistoryEntry(fireId: "", id: "", occurrence: 0, firedAt: 0, late: false)
            head += 1
            firstSeq += 1
        }
        if head > 64 && head > count {
            storage.removeFirst(head)
            head = 0
        }
    }

    /// The entry numbered `seq`, if still kept.
    subscript(seq seq: UInt64) -> HistoryEntry? { position(seq).map { storage[$0] } }

    /// Changes the entry numbered `seq`, if still kept.
    mutating func update(_ seq: UInt64, _ change: (inout HistoryEntry) -> Void) {
        guard let i = position(seq) else { return }
        change(&storage[i])
    }

    /// The sequence numbers of the entries with `fireId`, oldest first.
    func seqs(of fireId: String) -> [UInt64] { byFireId[fireId]?.all ?? [] }

    private func position(_ seq: UInt64) -> Int? {
        guard seq >= firstSeq, seq < nextSeq else { return nil }
        return head + Int(seq - firstSeq)
    }
}

/// A binary min-heap of times and what each belongs to: the inbox's expiries by sequence number,
/// and push delivery's retries and expiries by job (ChimeWorkerPolicy's `PushDispatch`). Items are
/// never removed from the middle: one whose owner went is passed over when it surfaces.
public struct TimeHeap<Key: Sendable>: Sendable {
    private var items: [(at: Int64, key: Key)] = []

    public init() {}

    /// Orders `items` in O(n).
    init(_ items: [(Int64, Key)]) {
        self.items = items.map { (at: $0.0, key: $0.1) }
        guard self.items.count > 1 else { return }
        for i in stride(from: self.items.count / 2 - 1, through: 0, by: -1) { siftDown(i) }
    }

    public var top: (at: Int64, key: Key)? { items.first }
    public var count: Int { items.count }

    public mutating func push(at: Int64, _ key: Key) {
        items.append((at, key))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].at < items[parent].at else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    public mutating func pop() -> (at: Int64, key: Key)? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let last = items.removeLast()
        siftDown(0)
        return last
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            guard left < items.count else { return }
            var child = left
            if left + 1 < items.count, items[left + 1].at < items[left].at { child = left + 1 }
            guard items[child].at < items[parent].at else { return }
            items.swapAt(child, parent)
            parent = child
        }
    }
}
