import ChimeTestSupport
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

/// The inbox and the history against plain arrays doing the same, through long random runs that
/// cross many compactions.
@Suite struct ReceiptLogsTests {
    @Test(arguments: [1, 2, 3, 4]) func theInboxDoesWhatAPlainListDoes(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var inbox = Inbox()
        var model: [InboxEntry] = []
        var seq: UInt64 = 0
        var now: Int64 = 0
        for _ in 0..<20_000 {
            switch random.next() % 10 {
            case 0...4:
                seq += 1 + random.next() % 3
                // Few fireIds, so that some are shared.
                let entry = InboxEntry(
                    seq: seq,
                    fireId: "f\(random.next() % 300)",
                    payload: Array(repeating: 1, count: Int(random.next() % 50)),
                    expiresAt: now + Int64(random.next() % 5_000),
                    historySeq: seq
                )
                inbox.append(entry)
                model.append(entry)
            case 5:
                let oldest = inbox.removeOldest()
                #expect(oldest?.seq == model.first?.seq)
                if !model.isEmpty { model.removeFirst() }
            case 6:
                now += Int64(random.next() % 400)
                let gone = inbox.removeExpired(at: now).map(\.seq).sorted()
                #expect(gone == model.filter { $0.expiresAt <= now }.map(\.seq))
                model.removeAll { $0.expiresAt <= now }
            case 7:
                let fireId = "f\(random.next() % 300)"
                #expect(inbox.holds(fireId, at: now) == model.contains { $0.fireId == fireId && $0.expiresAt > now })
                #expect(inbox.remove(fireId: fireId).map(\.seq) == model.filter { $0.fireId == fireId }.map(\.seq))
                model.removeAll { $0.fireId == fireId }
            default:
                let cursor = model.isEmpty || random.next() % 3 == 0 ? nil : model.randomElement(using: &random)!.seq
                let limit = Int(random.next() % 20)
                var page: [UInt64] = []
                let more = inbox.visit(after: cursor, at: now) { entry in
                    guard page.count < limit else { return false }
                    page.append(entry.seq)
                    return true
                }
                let live = model.filter { $0.seq > (cursor ?? 0) && $0.expiresAt > now }.map(\.seq)
                #expect(page == Array(live.prefix(limit)))
                #expect(more == (live.count > limit))
            }
            #expect(inbox.count == model.count)
            #expect(inbox.bytes == model.reduce(0) { $0 + $1.payload.count })
        }
        #expect(inbox.entries == model)
        // Compacted as it went: the slots held stay within twice the live entries.
        #expect(inbox.slotCount <= 2 * inbox.count + 65)
    }

    @Test(arguments: [(7, 700), (8, 60), (9, 28)])
    func theHistoryKeepsTheNewestAndFindsEachByNumberAndFireId(seed: UInt64, largest: Int) {
        var random = SplitMix64(seed: seed)
        var history = DeliveryHistory(firstSeq: 40)
        var model: [(seq: UInt64, entry: HistoryEntry)] = []
        var limit = largest
        for i in 0..<30_000 {
            // Few ids and occurrences, so that some deliveries share both (a fireId kept twice).
            let entry = HistoryEntry(
                id: "n\(random.next() % 20)",
                occurrence: Int64(random.next() % 10),
                firedAt: Int64(i),
                late: random.next() % 2 == 0,
                lead: random.next() % 3 == 0 ? Int64(random.next() % (1 << 40)) : 0
            )
            #expect(history.nextSeq == (model.last?.seq ?? 39) + 1)
            model.append((history.nextSeq, entry))
            // Mostly one limit (the ring goes round), sometimes another (it grows or shrinks).
            if random.next() % 500 == 0 { limit = 1 + Int(random.next() % UInt64(largest)) }
            history.append(entry, limit: limit)
            if model.count > limit { model.removeFirst(model.count - limit) }
            let id = "n\(random.next() % 20)"
            let occurrence = Int64(random.next() % 10)
            let expected = model.filter { $0.entry.id == id && $0.entry.occurrence == occurrence }.map(\.seq)
            #expect(history.seqs(id: id, occurrence: occurrence) == expected)
            let fireId = Engine.fireId(id, Instant(milliseconds: occurrence))
            #expect(history.seqs(of: fireId) == expected)
            if let pick = model.randomElement(using: &random) {
                history.update(pick.seq) { $0.acknowledgedAt = 1 }
                #expect(history[seq: pick.seq]?.id == pick.entry.id)
                #expect(history[seq: pick.seq]?.lead == pick.entry.lead)
                history.update(pick.seq) { $0.acknowledgedAt = nil }
                #expect(history[seq: pick.seq] == pick.entry)
            }
        }
        #expect(history.entries == model.map(\.entry))
        #expect(history.firstSeq == model.first?.seq)
        #expect(history[seq: history.firstSeq - 1] == nil)
        #expect(history[seq: history.nextSeq] == nil)
    }

    /// The layout the memory budget counts on (PROTOCOL.md section 3.9, "Memory").
    @Test func anEntryIsAsSmallAsTheBudgetSays() {
        #expect(MemoryLayout<HistoryEntry>.stride == EngineConfiguration.Receipts.historyEntryBytes)
        let entry = HistoryEntry(id: "a", occurrence: 1, firedAt: 2, late: true, lead: 900_000, mqtt: false)
        #expect(entry.late && !entry.mqtt && entry.lead == 900_000 && entry.due == 1 - 900_000)
        #expect(entry.acknowledgedAt == nil && entry.expiresAt == nil && entry.push.isEmpty)
        // A lead time too long for the entry's own bits goes to its box, and comes back.
        var long = entry
        long.lead = 10 * 365 * 86_400_000
        #expect(long.lead == 10 * 365 * 86_400_000)
        long.lead = 5
        #expect(long == HistoryEntry(id: "a", occurrence: 1, firedAt: 2, late: true, lead: 5, mqtt: false))
    }

    @Test func aFireIdNamesItsDeliveryInOneSpellingOnly() {
        let at = Instant(milliseconds: 1_796_119_200_000)
        #expect(Engine.parseFireId("pill@2026-12-01T10:00:00Z")?.id == "pill")
        #expect(Engine.parseFireId("pill~snooze@2026-12-01T10:00:00Z")?.id == "pill~snooze")
        #expect(Engine.parseFireId("a@b@2026-12-01T10:00:00Z")?.id == "a@b")
        #expect(Engine.parseFireId(Engine.fireId("x", at))?.occurrence == at)
        #expect(Engine.parseFireId("pill@2026-12-01T10:00:00.000Z") == nil)
        #expect(Engine.parseFireId("pill@2026-12-01T11:00:00+01:00") == nil)
        #expect(Engine.parseFireId("pill") == nil)
    }
}
