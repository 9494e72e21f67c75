import ChimeProtocol

/// The keys of the state-changing commands applied recently: a command whose key is here is a
/// duplicate and is not applied again.
///
/// Bounded three ways (PROTOCOL.md section 4): the newest ``perDevice`` keys of each device, none
/// older than ``maximumAge`` (by the journal's receive times, so replay rebuilds the same window),
/// and at most ``total`` over all devices (``defaultTotal``), the oldest going first.
struct CommandKeyWindow: Sendable {
    static let perDevice = 64
    static let defaultTotal = 1_000_000
    /// At most this many keys in all; smaller in tests.
    let total: Int

    init(total: Int = defaultTotal) { self.total = total }
    static let maximumAge: Int64 = 86_400_000

    /// Each device's keys, oldest first, in ``shardCount`` tables by the device id's hash. A
    /// snapshot holds the tables as they are (copy-on-write), and the first change to one after
    /// that copies this one alone: a copy of every key at once would hold the loop for as long as
    /// 100 ms with a million keys (`chime-bench snapshot-steps`).
    private(set) var shards = [[String: [(key: CommandKey, at: Int64)]]](repeating: [:], count: shardCount)
    static let shardCount = 256

    private static func shard(_ device: String) -> Int { device.hashValue & (shardCount - 1) }

    /// Every insertion, oldest first: what expires next. An entry whose key its device already
    /// dropped (past `perDevice`) is skipped when it comes up.
    private var order = InsertionOrder()

    var count: Int { order.count }

    private static func push(_ entry: (key: CommandKey, at: Int64), to keys: inout [(key: CommandKey, at: Int64)]) {
        if keys.count == perDevice { keys.removeFirst() }
        keys.append(entry)
    }

    /// Keys read from a snapshot, device by device, to be put in time order before first use.
    private var staged: [(device: String, key: CommandKey, at: Int64)] = []

    mutating func contains(_ key: CommandKey, device: String, now: Instant) -> Bool {
        if !staged.isEmpty { insertStaged() }
        guard let keys = shards[Self.shard(device)][device] else { return false }
        let oldest = now.milliseconds - Self.maximumAge
        // A plain loop over the buffer: every command of a device that sent 64 scans them all.
        return keys.withUnsafeBufferPointer { buffer in
            for entry in buffer where entry.key.value == key.value && entry.at >= oldest { return true }
            return false
        }
    }

    mutating func insert(_ key: CommandKey, device: String, at: Int64) {
        if !staged.isEmpty { insertStaged() }
        // In place: one lookup of the device.
        Self.push((key, at), to: &shards[Self.shard(device)][device, default: []])
        order.append((device, key, at))
        while let old = order.first, order.count > total || old.at < at - Self.maximumAge {
            order.removeFirst()
            let s = Self.shard(old.device)
            if var keys = shards[s][old.device],
                let i = keys.firstIndex(where: { $0.key == old.key && $0.at == old.at })
            {
                keys.remove(at: i)
                shards[s][old.device] = keys.isEmpty ? nil : keys
            }
        }
    }

    /// A device's keys from a snapshot, oldest first. Devices come in any order: the window is
    /// rebuilt in time order when it is next used.
    mutating func restore(device: String, keys: [(key: CommandKey, at: Int64)]) {
        for (key, at) in keys { staged.append((device, key, at)) }
    }

    private mutating func insertStaged() {
        let keys = staged.sorted { $0.at < $1.at }
        staged = []
        for k in keys { insert(k.key, device: k.device, at: k.at) }
    }

    mutating func removeAll() {
        self = CommandKeyWindow(total: total)
    }
}

/// The window's insertions in a queue of fixed-size chunks: dropping the oldest never copies the
/// rest. (One array with its expired front cut off now and then copied a million entries at a
/// time, a 21.6 ms pause in one command, `chime-bench snapshot-steps`.)
struct InsertionOrder: Sendable {
    typealias Entry = (device: String, key: CommandKey, at: Int64)
    static let chunkSize = 4096

    private var chunks: [[Entry]] = []
    /// Where the oldest entry is in the first chunk.
    private var head = 0
    private(set) var count = 0

    var first: Entry? { count == 0 ? nil : chunks[0][head] }

    mutating func append(_ entry: Entry) {
        if chunks.isEmpty || chunks[chunks.count - 1].count == Self.chunkSize {
            var chunk: [Entry] = []
            chunk.reserveCapacity(Self.chunkSize)
            chunks.append(chunk)
        }
        chunks[chunks.count - 1].append(entry)
        count += 1
    }

    mutating func removeFirst() {
        precondition(count > 0, "removeFirst of an empty queue")
        head += 1
        count -= 1
        // A chunk is dropped once it is used up: full, or the last one with nothing after it.
        if head == chunks[0].count, head == Self.chunkSize || chunks.count == 1 {
            chunks.removeFirst()
            head = 0
        }
    }
}
