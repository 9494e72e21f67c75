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

/// One delivery in a device's history: 48 bytes, and nothing allocated for a device that uses
/// neither receipts nor push (PROTOCOL.md section 3.9, "Memory").
///
/// Its `fireId` is not stored: it is always the notification's id and the occurrence
/// (``Engine/fireId(_:_:)-swift.type.method``), a snooze's id included (`pill~snooze`). The id is
/// the notification's own `String` (a snapshot shares it too), so that an id longer than a
/// `String` holds inline (15 bytes) is stored once for the notification and all its entries. What only some
/// deliveries have (an acknowledgement, an inbox expiry, how their pushes ended, a lead time of
/// more than 24 days) is in ``more``, a shared box that is replaced, never changed, so that a
/// snapshot being written holds the entries as they were.
struct HistoryEntry: Hashable, Sendable {
    /// The notification's id.
    var id: String
    var occurrence: Int64
    var firedAt: Int64
    /// The occurrence minus the fireDate (its `leadTime`), in milliseconds; ``leadInBox`` when
    /// that does not fit here.
    private var leadMilliseconds: Int32
    private var bits: UInt8
    /// How many registrations its delivery was to be pushed to (at most 10).
    var pushCount: UInt8
    private var more: Box?

    private static let leadInBox = Int32.min
    private static let lateBit: UInt8 = 1
    /// Not published over MQTT (`channels: "push"`).
    private static let pushOnlyBit: UInt8 = 2
    /// ``leftAs``, as its place in ``states`` plus one, in bits 2 to 4.
    private static let leftShift: UInt8 = 2

    /// What only some entries have; never changed once made (``HistoryEntry/more``).
    final class Box: Hashable, Sendable {
        let acknowledgedAt: Int64?
        let expiresAt: Int64?
        let push: [PushTrail]
        let lead: Int64?

        init(acknowledgedAt: Int64?, expiresAt: Int64?, push: [PushTrail], lead: Int64?) {
            self.acknowledgedAt = acknowledgedAt
            self.expiresAt = expiresAt
            self.push = push
            self.lead = lead
        }

        static func == (a: Box, b: Box) -> Bool {
            a.acknowledgedAt == b.acknowledgedAt && a.expiresAt == b.expiresAt && a.push == b.push && a.lead == b.lead
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(acknowledgedAt)
            hasher.combine(expiresAt)
            hasher.combine(push)
            hasher.combine(lead)
        }
    }

    init(
        id: String,
        occurrence: Int64,
        firedAt: Int64,
        late: Bool,
        lead: Int64 = 0,
        mqtt: Bool = true,
        acknowledgedAt: Int64? = nil,
        leftAs: DeliveryState? = nil,
        expiresAt: Int64? = nil,
        push: [PushTrail] = [],
        pushCount: Int = 0
    ) {
        self.id = id
        self.occurrence = occurrence
        self.firedAt = firedAt
        self.leadMilliseconds = 0
        self.bits = (late ? Self.lateBit : 0) | (mqtt ? 0 : Self.pushOnlyBit)
        self.pushCount = UInt8(clamping: pushCount)
        self.more = nil
        if lead != 0 { self.lead = lead }
        if leftAs != nil { self.leftAs = leftAs }
        if acknowledgedAt != nil || expiresAt != nil || !push.isEmpty {
            change { $0 = Parts(acknowledgedAt: acknowledgedAt, expiresAt: expiresAt, push: push, lead: $0.lead) }
        }
    }

    /// It was published a second or more after it was due.
    var late: Bool { bits & Self.lateBit != 0 }

    /// It was published over MQTT, and the broker acknowledged it (false: push only).
    var mqtt: Bool { bits & Self.pushOnlyBit == 0 }

    /// The occurrence minus when it was due: its notification's `leadTime` then.
    var lead: Int64 {
        get { leadMilliseconds == Self.leadInBox ? more?.lead ?? 0 : Int64(leadMilliseconds) }
        set {
            if let small = Int32(exactly: newValue), small != Self.leadInBox {
                if leadMilliseconds == Self.leadInBox { change { $0.lead = nil } }
                leadMilliseconds = small
            } else {
                leadMilliseconds = Self.leadInBox
                change { $0.lead = newValue }
            }
        }
    }

    /// When it was due (its `fireDate`).
    var due: Int64 { occurrence - lead }

    var acknowledgedAt: Int64? {
        get { more?.acknowledgedAt }
        set { change { $0.acknowledgedAt = newValue } }
    }

    /// When it leaves the inbox; nil without receipts.
    var expiresAt: Int64? {
        get { more?.expiresAt }
        set { change { $0.expiresAt = newValue } }
    }

    /// What became of its pushes, one per registration, in the order they ended.
    var push: [PushTrail] {
        get { more?.push ?? [] }
        set { change { $0.push = newValue } }
    }

    /// Set once it leaves the inbox unacknowledged.
    var leftAs: DeliveryState? {
        get {
            let i = Int(bits >> Self.leftShift & 7)
            return i == 0 ? nil : DeliveryState.snapshotOrder[i - 1]
        }
        set {
            let i = newValue.map { s in UInt8(DeliveryState.snapshotOrder.firstIndex(of: s)! + 1) } ?? 0
            bits = bits & ~(7 << Self.leftShift) | i << Self.leftShift
        }
    }

    func state(at now: Int64) -> DeliveryState {
        if acknowledgedAt != nil { return .acknowledged }
        if let leftAs { return leftAs }
        guard let expiresAt else { return .delivered }
        return now >= expiresAt ? .expired : .unacknowledged
    }

    /// How its pushes went, in one word: `accepted` once one was; else `pending` while one is
    /// still to end; else how the last one ended. Nil when it was pushed nowhere.
    var pushOutcome: PushSummary? {
        let trail = push
        if trail.isEmpty && pushCount == 0 { return nil }
        if trail.contains(where: { $0.outcome == .accepted }) { return .accepted }
        if trail.count < Int(pushCount) { return .pending }
        return trail.last.map { PushSummary(rawValue: $0.outcome.rawValue)! } ?? .pending
    }

    private struct Parts {
        var acknowledgedAt: Int64?
        var expiresAt: Int64?
        var push: [PushTrail] = []
        var lead: Int64?
    }

    /// Replaces the box with one changed by `body` (none when nothing is left in it).
    private mutating func change(_ body: (inout Parts) -> Void) {
        var parts = Parts(
            acknowledgedAt: more?.acknowledgedAt,
            expiresAt: more?.expiresAt,
            push: more?.push ?? [],
            lead: more?.lead
        )
        body(&parts)
        if parts.acknowledgedAt == nil && parts.expiresAt == nil && parts.push.isEmpty && parts.lead == nil {
            more = nil
        } else {
            more = Box(
                acknowledgedAt: parts.acknowledgedAt,
                expiresAt: parts.expiresAt,
                push: parts.push,
                lead: parts.lead
            )
        }
    }
}

extension DeliveryState {
    /// The states in the order a history entry and a snapshot number them (from 1; 0 is none).
    static let snapshotOrder: [DeliveryState] = [.unacknowledged, .acknowledged, .expired, .dropped, .delivered]
}

/// What became of one push of a delivery, as `history` shows it.
struct PushTrail: Hashable, Sendable {
    var registration: String
    var outcome: PushOutcome
    var at: Int64
    var reason: String?
}

/// A device's most recent deliveries, oldest first, with consecutive sequence numbers from
/// ``firstSeq``, in a ring: once full, each new entry takes the oldest's place, in O(1).
///
/// An entry is found by its number directly, and by its notification's id and occurrence (what
/// a `fireId` names) by a look at each entry while the history is short (at most
/// ``indexedFrom``: a default history), or through an index by a hash of the two once it is
/// longer, so that a lookup costs O(1) at the largest `--history-per-device` too.
struct DeliveryHistory: Sendable {
    /// The entries; the oldest at ``start``, the rest after it, wrapping around.
    private var ring: [HistoryEntry] = []
    private var start = 0
    /// Built once the history holds more than ``indexedFrom`` entries.
    private var index: [Int: SeqSet]?
    /// The oldest entry's sequence number.
    private(set) var firstSeq: UInt64 = 1

    /// Histories up to this long are searched entry by entry, and have no index.
    static let indexedFrom = 64

    var count: Int { ring.count }
    var isEmpty: Bool { ring.isEmpty }
    /// The sequence number the next entry must have.
    var nextSeq: UInt64 { firstSeq + UInt64(count) }

    /// Oldest first.
    var entries: [HistoryEntry] { (0..<count).map { self[offset: $0] } }

    init(firstSeq: UInt64 = 1) { self.firstSeq = firstSeq }

    /// The entry `offset` places after the oldest.
    subscript(offset offset: Int) -> HistoryEntry { ring[physical(offset)] }

    /// Adds the newest entry, then lets the oldest go until at most `limit` are left. O(1)
    /// amortised: a full ring replaces its oldest; a ring that grows doubles, up to `limit`.
    ///
    /// The first entry sizes the ring for ``indexedFrom`` entries, or `limit` when that is less
    /// (the default `--history-per-device`): one allocation a device, of what the memory budget
    /// counts, rather than a ring that grows by steps and leaves each step's block behind, which
    /// a million devices starting their histories together (the first start with history on by
    /// default) would not reuse.
    mutating func append(_ entry: HistoryEntry, limit: Int) {
        let seq = nextSeq
        if index != nil { index!.insert(seq, for: Self.key(entry.id, entry.occurrence)) }
        if count == limit && limit > 0 && start < count {
            forget(offset: 0)
            ring[start] = entry
            start = (start + 1) % count
            firstSeq += 1
        } else {
            linearize()
            if ring.count == ring.capacity && ring.count < limit {
                ring.reserveCapacity(min(limit, max(Self.indexedFrom, 2 * ring.count)))
            }
            ring.append(entry)
            trim(to: limit)
        }
        if index == nil && count > Self.indexedFrom { buildIndex() }
    }

    /// Lets the oldest go until at most `limit` are left (O(n) when it removes any: only when the
    /// limit was lowered between two starts).
    mutating func trim(to limit: Int) {
        let excess = count - max(0, limit)
        guard excess > 0 else { return }
        for offset in 0..<excess { forget(offset: offset) }
        linearize()
        ring.removeFirst(excess)
        firstSeq += UInt64(excess)
    }

    /// The entry numbered `seq`, if still kept.
    subscript(seq seq: UInt64) -> HistoryEntry? { position(seq).map { ring[$0] } }

    /// Changes the entry numbered `seq`, if still kept.
    mutating func update(_ seq: UInt64, _ change: (inout HistoryEntry) -> Void) {
        guard let i = position(seq) else { return }
        change(&ring[i])
    }

    /// The sequence numbers of the entries of this delivery, oldest first.
    func seqs(id: String, occurrence: Int64) -> [UInt64] {
        if let index {
            return (index[Self.key(id, occurrence)]?.all ?? []).filter { seq in
                self[seq: seq].map { $0.occurrence == occurrence && $0.id == id } ?? false
            }
        }
        var found: [UInt64] = []
        for offset in 0..<count {
            let e = ring[physical(offset)]
            if e.occurrence == occurrence && e.id == id { found.append(firstSeq + UInt64(offset)) }
        }
        return found
    }

    /// The sequence numbers of the entries with `fireId`, oldest first.
    func seqs(of fireId: String) -> [UInt64] {
        guard let (id, occurrence) = Engine.parseFireId(fireId) else { return [] }
        return seqs(id: id, occurrence: occurrence.milliseconds)
    }

    private func physical(_ offset: Int) -> Int {
        let i = start + offset
        return i < ring.count ? i : i - ring.count
    }

    private func position(_ seq: UInt64) -> Int? {
        guard seq >= firstSeq, seq < nextSeq else { return nil }
        return physical(Int(seq - firstSeq))
    }

    /// Puts the oldest entry first in the array, so that it can grow or shrink at its ends.
    private mutating func linearize() {
        guard start != 0 else { return }
        ring = Array(ring[start...] + ring[..<start])
        start = 0
    }

    private mutating func forget(offset: Int) {
        guard index != nil else { return }
        let e = ring[physical(offset)]
        index!.remove(firstSeq + UInt64(offset), for: Self.key(e.id, e.occurrence))
    }

    private mutating func buildIndex() {
        var built: [Int: SeqSet] = [:]
        built.reserveCapacity(count)
        for offset in 0..<count {
            let e = ring[physical(offset)]
            built.insert(firstSeq + UInt64(offset), for: Self.key(e.id, e.occurrence))
        }
        index = built
    }

    /// The index's key: a hash (seeded per process) of a delivery's id and occurrence. Two
    /// deliveries with the same key share an index entry, and each lookup checks the entries.
    private static func key(_ id: String, _ occurrence: Int64) -> Int {
        var hasher = Hasher()
        hasher.combine(id)
        hasher.combine(occurrence)
        return hasher.finalize()
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
