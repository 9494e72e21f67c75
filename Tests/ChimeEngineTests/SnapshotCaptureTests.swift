import ChimeHarness
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

/// A snapshot is taken a part at a time (``Engine/beginSnapshot()``,
/// ``Engine/continueSnapshot(budget:)``) while the engine goes on changing: what it holds must be
/// the state as it began, exactly.
@Suite struct SnapshotCaptureTests {
    static let start = Instant(milliseconds: 1_800_000_000_000)

    /// Two engines given the same journal entries, one to snapshot in one go and one a part at a time.
    struct Twins {
        let reference = Engine()
        let engine = Engine()

        func apply(_ entry: JournalEntry, key: CommandKey? = nil) {
            reference.apply(entry, key: key)
            engine.apply(entry, key: key)
        }
    }

    static func notification(_ id: String, repeating: Bool) -> ResolvedNotification {
        var spec = NotificationSpec()
        spec.alertBody = "body of \(id)"
        if repeating { spec.repeatInterval = .day }
        return ResolvedNotification(id: id, fireDate: .instant(start.adding(seconds: 3600)), spec)
    }

    static func schedule(_ device: String, _ ids: [String], at: Instant = start) -> JournalEntry {
        .schedule(
            deviceId: device,
            at: at,
            replaced: [],
            notifications: ids.map { notification($0, repeating: $0.hasSuffix("r")) }
        )
    }

    /// One big device (with an order to walk in parts) and small ones (copied whole).
    static func populated() -> Twins {
        let twins = Twins()
        let big = (0..<10_000).map { "n\($0)" + ($0 % 3 == 0 ? "r" : "") }
        for part in stride(from: 0, to: big.count, by: 1000) {
            twins.apply(schedule("big", Array(big[part..<(part + 1000)])))
        }
        // Left in the big device's order, marked removed, until they are half of it.
        twins.apply(.cancel(deviceId: "big", at: start, ids: Array(big[2000..<3000])))
        for d in 0..<40 {
            twins.apply(
                schedule("small\(d)", (0..<(d * 7 + 1)).map { "s\($0)" + ($0 % 2 == 0 ? "r" : "") }),
                key: CommandKey(UInt64(d))
            )
            if d % 2 == 0 {
                twins.apply(.device(deviceId: "small\(d)", at: start, update: DeviceUpdate(badge: d, receipts: true)))
            }
        }
        // Devices with no notification, walked as well.
        for d in 0..<300 {
            twins.apply(.device(deviceId: "bare\(d)", at: start, update: DeviceUpdate(badge: d + 1)))
        }
        return twins
    }

    /// The entries of a snapshot, as a set; the count tells of duplicates.
    static func entries(_ snapshot: EngineSnapshot) -> (set: Set<[UInt8]>, count: Int) {
        let all = snapshot.entries
        return (Set(all), all.count)
    }

    /// A change of the kinds the engine makes while a snapshot is taken: notifications scheduled
    /// (new, and in place of others), cancelled, paused and resumed, and delivered.
    static func change(_ engine: Engine, _ random: inout SplitMix64, serial: Int) {
        let at = start.adding(seconds: Int64(serial))
        let deviceIds = engine.devices.keys.sorted()
        let device = deviceIds[Int(random.next() % UInt64(deviceIds.count))]
        let ids = engine.devices[device]!.notifications.values.map(\.id).sorted()
        let id = ids.isEmpty ? "none" : ids[Int(random.next() % UInt64(ids.count))]
        switch random.next() % 9 {
        // With command keys: those of commands after the snapshot began stay out of it.
        case 0:
            engine.apply(
                schedule(random.next() % 4 == 0 ? "new\(serial % 5)" : device, ["added\(serial)"], at: at),
                key: CommandKey(UInt64(1000 + serial))
            )
        case 1: engine.apply(schedule(device, [id], at: at), key: CommandKey(UInt64(1000 + serial)))
        case 2: engine.apply(.cancel(deviceId: device, at: at, ids: [id]))
        case 3: engine.apply(.setEnabled(deviceId: device, at: at, ids: [id], enabled: random.next() % 2 == 0))
        case 4: engine.apply(.cancel(deviceId: device, at: at, ids: Array(ids.prefix(50))))
        case 5:
            let update = DeviceUpdate(timeZone: Zone(identifier: "Europe/Paris"), badge: Int(random.next() % 9))
            engine.apply(
                .device(deviceId: random.next() % 4 == 0 ? "new\(serial % 5)" : device, at: at, update: update)
            )
        case 6:
            // Emptied: a bare device is dropped.
            engine.apply(.device(deviceId: device, at: at, update: DeviceUpdate(badge: 0)))
        case 7:
            guard let fireId = engine.devices[device]!.receipts?.inbox.entries.first?.fireId else { return }
            engine.apply(.ack(deviceId: device, at: at, fireIds: [fireId], badge: .delta(-1)))
        default:
            guard let n = engine.devices[device]!.notifications[id] else { return }
            let record = OccurrenceRecord(
                deviceId: device,
                id: id,
                version: n.version,
                index: Int(n.firedCount),
                occurrence: Instant(milliseconds: n.pendingFrom),
                at: at,
                last: false,
                badge: .delta(1),
                receipt: ReceiptCapture(
                    payload: Array("delivery of \(id)".utf8),
                    expiresAt: at.milliseconds + 3_600_000,
                    late: false
                )
            )
            engine.apply(.delivered(record))
        }
    }

    /// How many notifications the devices' tables hold.
    static func held(_ engine: Engine) -> Int { engine.devices.values.reduce(0) { $0 + $1.notifications.count } }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func aSnapshotTakenInPartsHoldsTheStateAsItBeganWhateverChangesMeanwhile(seed: UInt64) throws {
        let twins = Self.populated()
        #expect(twins.engine.devices["big"]?.order?.count == 10_000, "the big device is walked in parts")
        let reference = twins.reference.snapshot
        // Those the tables hold, and not the removed ones the big device's order still lists.
        #expect(reference.notifications.count == Self.held(twins.reference))
        #expect(reference.devices.count == twins.reference.devices.count)
        #expect(twins.engine.heldCount == Self.held(twins.engine))
        let expected = Self.entries(reference)
        var random = SplitMix64(seed: seed)
        twins.engine.beginSnapshot()
        var frozen: EngineSnapshot?
        var turns = 0
        while frozen == nil {
            for _ in 0..<5 { Self.change(twins.engine, &random, serial: turns * 5) }
            turns += 1
            frozen = twins.engine.continueSnapshot(budget: 300)
        }
        #expect(turns > 30)
        #expect(twins.engine.deviceOrderDropped > 0, "devices were dropped meanwhile")
        #expect(!twins.engine.isTakingSnapshot)
        let got = Self.entries(try #require(frozen))
        #expect(got.count == expected.count, "each notification once")
        #expect(got.set == expected.set)
        #expect(twins.engine.heldCount == Self.held(twins.engine), "counted through every change")
        // And the changes made meanwhile are in the next one.
        #expect(Self.entries(twins.engine.snapshot).set != expected.set)
    }

    @Test func devicesDroppedOrChangedBeforeTheWalkReachesThemAreInTheSnapshotAsTheyWere() throws {
        let twins = Self.populated()
        let expected = Self.entries(twins.reference.snapshot)
        twins.engine.beginSnapshot()
        // Before any part is copied: every small device of odd number emptied, and so dropped;
        // a bare one cleared; the others' badges changed.
        for d in stride(from: 1, to: 40, by: 2) {
            let ids = twins.engine.devices["small\(d)"]!.notifications.values.map(\.id)
            twins.engine.apply(.cancel(deviceId: "small\(d)", at: Self.start, ids: ids))
            #expect(twins.engine.devices["small\(d)"] == nil)
        }
        twins.engine.apply(.device(deviceId: "bare0", at: Self.start, update: DeviceUpdate(badge: 0)))
        #expect(twins.engine.devices["bare0"] == nil)
        for d in stride(from: 0, to: 40, by: 2) {
            twins.engine.apply(.device(deviceId: "small\(d)", at: Self.start, update: DeviceUpdate(badge: 99)))
        }
        var frozen: EngineSnapshot?
        while frozen == nil { frozen = twins.engine.continueSnapshot(budget: 700) }
        let got = Self.entries(try #require(frozen))
        #expect(got.count == expected.count)
        #expect(got.set == expected.set)
    }

    /// A big device dropped while the walk is part way through it: the next big device is walked
    /// from its start.
    @Test func aBigDeviceDroppedPartWayThroughItsWalkLeavesTheNextOneWhole() throws {
        let twins = Twins()
        for device in ["first", "second"] {
            for part in stride(from: 0, to: 6000, by: 1000) {
                twins.apply(Self.schedule(device, (part..<(part + 1000)).map { "n\($0)" }))
            }
        }
        let expected = Self.entries(twins.reference.snapshot)
        twins.engine.beginSnapshot()
        #expect(twins.engine.continueSnapshot(budget: 2000) == nil)
        let ids = twins.engine.devices["first"]!.notifications.values.map(\.id)
        twins.engine.apply(.cancel(deviceId: "first", at: Self.start, ids: ids))
        #expect(twins.engine.devices["first"] == nil, "dropped")
        var frozen: EngineSnapshot?
        while frozen == nil { frozen = twins.engine.continueSnapshot(budget: 2000) }
        let got = Self.entries(try #require(frozen))
        #expect(got.count == expected.count)
        #expect(got.set == expected.set)
    }

    @Test func cancellingMostOfABigDeviceDuringASnapshotKeepsItsOrderUntilTheSnapshotIsTaken() throws {
        let twins = Self.populated()
        let expected = Self.entries(twins.reference.snapshot)
        twins.engine.beginSnapshot()
        #expect(twins.engine.continueSnapshot(budget: 500) == nil)
        let ids = twins.engine.devices["big"]!.notifications.values.map(\.id).sorted().prefix(6000)
        twins.engine.apply(.cancel(deviceId: "big", at: Self.start, ids: Array(ids)))
        let big = try #require(twins.engine.devices["big"])
        #expect(big.order?.count == 10_000, "not compacted while it is walked")
        var frozen: EngineSnapshot?
        while frozen == nil { frozen = twins.engine.continueSnapshot(budget: 500) }
        let got = Self.entries(try #require(frozen))
        #expect(got.count == expected.count)
        #expect(got.set == expected.set)
        // Compacted by the next removal once no snapshot walks it.
        twins.engine.apply(
            .cancel(deviceId: "big", at: Self.start, ids: [big.notifications.values.map(\.id).sorted()[0]])
        )
        #expect(big.order?.count == 2999)
        #expect(big.orderRemoved == 0)
        // And dropped once more than half of it is removed and the device is small.
        twins.engine.apply(
            .cancel(deviceId: "big", at: Self.start, ids: Array(big.notifications.values.map(\.id).prefix(1500)))
        )
        #expect(big.order?.count == nil)
    }

    @Test func eachPartCopiesItsBudgetAndAtMostOneSmallDeviceMore() {
        let twins = Self.populated()
        twins.engine.beginSnapshot()
        var copied = [0]
        while twins.engine.continueSnapshot(budget: 1000) == nil {
            copied.append(twins.engine.capture!.notifications.count)
        }
        let parts = zip(copied.dropFirst(), copied).map { $0 - $1 }
        // 9,000 on the big device and 5,500 on 40 small ones, the largest of 274.
        #expect(parts.count >= 12)
        #expect(parts.allSatisfy { $0 < 1000 + 274 })
    }

    /// A snapshot holds each id once, but one that holds an id twice still restores: the later
    /// entry stands, once, on a small device and on one big enough to keep an order.
    @Test(arguments: [10, DeviceState.orderedFrom + 10])
    func anIdRestoredTwiceIsHeldOnceAsTheLaterEntry(count: Int) throws {
        func entries(body: String) -> [[UInt8]] {
            let engine = Engine()
            var spec = NotificationSpec()
            spec.alertBody = body
            let ids = (0..<count).map {
                ResolvedNotification(id: "n\($0)", fireDate: .instant(Self.start.adding(seconds: 3600)), spec)
            }
            engine.apply(.schedule(deviceId: "d", at: Self.start, replaced: [], notifications: ids))
            return engine.snapshot.entries
        }
        let first = entries(body: "first")
        // A notification entry on device "d": N, the device id ("d", after its UInt32 length),
        // then the id after its own length.
        func id(_ entry: [UInt8]) -> String { String(decoding: entry[10..<(10 + Int(entry[6]))], as: UTF8.self) }
        let later = entries(body: "later").filter { $0.first == UInt8(ascii: "N") && id($0).contains("7") }
        let restoredRestorer = EngineRestorer()
        for entry in first + later { try restoredRestorer.restore(snapshotEntry: entry) }
        let restored = restoredRestorer.finish()
        #expect(restored.pendingCount == count)
        let device = try #require(restored.devices["d"])
        #expect(device.notifications.count == count)
        for n in device.notifications.values {
            #expect(n.alertBody == (n.id.contains("7") ? "later" : "first"), "\(n.id)")
        }
        // Its next snapshot holds each once.
        let again = restored.snapshot.entries.filter { $0.first == UInt8(ascii: "N") }
        #expect(again.count == count)
        #expect(again.filter { String(decoding: $0, as: UTF8.self).contains("later") }.count == later.count)
    }
}
