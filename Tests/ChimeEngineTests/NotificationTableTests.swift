import ChimeTestSupport
import Testing

@testable import ChimeEngine

/// The device table answers as a dictionary keyed by id would, through growth, replacements and
/// removals that shift entries back across the end of the slots.
@Suite struct NotificationTableTests {
    let device = DeviceState(id: "d")

    func notification(_ id: String, version: UInt64 = 1) -> StoredNotification {
        StoredNotification(
            id: id,
            device: device,
            fire: 0,
            fireIsLocal: false,
            zone: nil,
            zoneIsDevice: false,
            repeatUnit: nil,
            leadTimeGiven: -1,
            content: [][...],
            userInfoStart: -1,
            badgeKind: 0,
            badgeValue: 0,
            extras: nil,
            version: version,
            enabled: true,
            createdAt: 0,
            updatedAt: 0,
            pendingFrom: 0
        )
    }

    static func expect(_ table: NotificationTable, equals model: [String: StoredNotification]) {
        #expect(table.count == model.count)
        #expect(table.isEmpty == model.isEmpty)
        let held = Dictionary(uniqueKeysWithValues: table.values.map { ($0.id, $0) })
        #expect(held.count == table.count)
        for (id, n) in model { #expect(table[id] === n && held[id] === n, "\(id)") }
    }

    @Test(arguments: [8, 60, 2000])
    func randomOperationsAnswerLikeADictionary(ids: Int) {
        var random = SplitMix64(seed: UInt64(ids))
        var table = NotificationTable()
        var model: [String: StoredNotification] = [:]
        for step in 0..<20_000 {
            let id = "n\(Int.random(in: 0..<ids, using: &random))"
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5:
                let n = notification(id, version: UInt64(step))
                #expect(table.insert(n) === model.updateValue(n, forKey: id))
            case 5..<9:
                #expect(table.remove(id: id) === model.removeValue(forKey: id))
            default:
                #expect(table[id] === model[id])
                #expect(table["absent-\(id)"] == nil)
            }
            #expect(table.count == model.count)
            if step % 1000 == 0 { Self.expect(table, equals: model) }
        }
        Self.expect(table, equals: model)
        for id in model.keys { #expect(table.remove(id: id) != nil) }
        Self.expect(table, equals: [:])
        #expect(table.remove(id: "n0") == nil)
    }

    @Test func growsFromReservedCapacityAndEmptiesCompletely() {
        var table = NotificationTable()
        table.reserveCapacity(100)
        #expect(table.capacity >= 100)
        #expect(table.insert(notification("first")) == nil)
        // The first insertion keeps what was reserved: restoring a snapshot reserves each device's
        // count, and growing a table of millions one doubling at a time is what it avoids.
        #expect(table.capacity >= 100)
        #expect(table.remove(id: "first") != nil)
        var model: [String: StoredNotification] = [:]
        for i in 0..<5000 {
            let n = notification("id-\(i)")
            #expect(table.insert(n) == nil)
            model[n.id] = n
        }
        Self.expect(table, equals: model)
        // Every other one out, then the rest: each removal's shift keeps the others reachable.
        for i in stride(from: 0, to: 5000, by: 2) { model.removeValue(forKey: "id-\(i)") }
        for i in stride(from: 0, to: 5000, by: 2) { #expect(table.remove(id: "id-\(i)")?.id == "id-\(i)") }
        Self.expect(table, equals: model)
        for id in model.keys { table.remove(id: id) }
        #expect(table.isEmpty && table.values.first(where: { _ in true }) == nil)
        #expect(table.insert(notification("again")) == nil)
        #expect(table["again"]?.id == "again")
    }

    @Test func equalIdsInOtherUnicodeFormsAreOneEntry() {
        // "é" precomposed and as "e" with a combining accent: one String to Swift, as they were
        // one key to the dictionary this table replaces.
        var table = NotificationTable()
        let first = notification("caf\u{E9}")
        table.insert(first)
        #expect(table["cafe\u{301}"] === first)
        #expect(table.insert(notification("cafe\u{301}")) === first)
        #expect(table.count == 1)
    }
}
