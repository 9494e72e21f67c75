import ChimeHarness
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

/// The window of recent command keys against a plain model of its three bounds (PROTOCOL.md
/// section 4): the newest 64 keys of each device, none older than a day, at most `total` in all.
@Suite struct CommandKeyWindowTests {
    /// The rules written as plainly as possible, with one array for every insertion not yet
    /// expired (as the window was before its queue came in chunks): the total bound counts those,
    /// including the ones whose device has dropped them already.
    struct Model {
        var total: Int
        var order: [(device: String, key: CommandKey, at: Int64)] = []
        var head = 0
        var keys: [String: [(key: CommandKey, at: Int64)]] = [:]

        mutating func insert(_ key: CommandKey, device: String, at: Int64) {
            keys[device, default: []].append((key, at))
            if keys[device]!.count > CommandKeyWindow.perDevice { keys[device]!.removeFirst() }
            order.append((device, key, at))
            while head < order.count, order.count - head > total || order[head].at < at - CommandKeyWindow.maximumAge {
                let old = order[head]
                head += 1
                keys[old.device]?.removeAll { $0.key == old.key && $0.at == old.at }
            }
        }

        func contains(_ key: CommandKey, device: String, now: Int64) -> Bool {
            keys[device, default: []].contains { $0.key == key && $0.at >= now - CommandKeyWindow.maximumAge }
        }

        var liveCount: Int { keys.values.reduce(0) { $0 + $1.count } }
    }

    /// Many chunks' worth of keys, with the total bound, the age bound and the per-device bound
    /// all dropping keys, and every key ever inserted asked for after each step.
    @Test(arguments: [1, 2, 3])
    func matchesTheModel(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let total = 3 * InsertionOrder.chunkSize + 100
        var window = CommandKeyWindow(total: total)
        var model = Model(total: total)
        var now: Int64 = 1_000_000
        var inserted: [(device: String, key: CommandKey)] = []
        for step in 0..<(5 * total) {
            // Mostly a few milliseconds on; now and then most of a day, so that the age bound
            // drops a run of keys at once.
            now += random.next() % 500 == 0 ? CommandKeyWindow.maximumAge * 3 / 4 : Int64(random.next() % 20)
            // Few devices, so that some reach 64 keys; many, so that the total is what binds.
            let devices: UInt64 = step % 4000 < 2000 ? 8 : 5000
            let device = "d\(random.next() % devices)"
            let key = CommandKey(random.next())
            window.insert(key, device: device, at: now)
            model.insert(key, device: device, at: now)
            inserted.append((device, key))
            #expect(window.count <= total)
            if step % 997 == 0 || step == 5 * total - 1 {
                // The newest keys, a sample of all inserted so far, and keys never inserted.
                let sample =
                    inserted.suffix(300) + (0..<1000).map { _ in inserted[Int(random.next() % UInt64(inserted.count))] }
                for (device, key) in sample {
                    let held = window.contains(key, device: device, now: Instant(milliseconds: now))
                    #expect(held == model.contains(key, device: device, now: now), "\(device) \(key)")
                }
                for _ in 0..<100 {
                    let device = "d\(random.next() % 8)"
                    let held = window.contains(
                        CommandKey(random.next()),
                        device: device,
                        now: Instant(milliseconds: now)
                    )
                    #expect(!held)
                }
                #expect(window.count == model.order.count - model.head)
                #expect(window.shards.joined().reduce(0) { $0 + $1.value.count } == model.liveCount)
            }
        }
    }

    /// The queue of insertions on its own: order kept across chunks, chunks dropped once used up,
    /// and emptied and filled again.
    @Test func insertionOrderIsFirstInFirstOut() {
        var queue = InsertionOrder()
        var next = 0
        var expected = 0
        var random = SplitMix64(seed: 9)
        for _ in 0..<20 {
            for _ in 0..<Int(random.next() % UInt64(3 * InsertionOrder.chunkSize)) {
                queue.append(("d", CommandKey(UInt64(next)), Int64(next)))
                next += 1
            }
            for _ in 0..<Int(random.next() % UInt64(queue.count + 1)) {
                #expect(queue.first?.at == Int64(expected))
                queue.removeFirst()
                expected += 1
            }
            #expect(queue.count == next - expected)
        }
        while queue.first != nil {
            #expect(queue.first?.at == Int64(expected))
            queue.removeFirst()
            expected += 1
        }
        #expect(expected == next && queue.count == 0)
        queue.append(("d", CommandKey(1), 1))
        #expect(queue.first?.at == 1 && queue.count == 1)
    }
}
