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

    @Test func theHistoryKeepsTheNewestAndFindsEachByNumberAndFireId() {
        var random = SplitMix64(seed: 7)
        var history = DeliveryHistory(firstSeq: 40)
        var model: [(seq: UInt64, entry: HistoryEntry)] = []
        for i in 0..<30_000 {
            let entry = HistoryEntry(
                fireId: "f\(random.next() % 200)",
                id: "n\(i)",
                occurrence: Int64(i),
                firedAt: Int64(i),
                late: false
            )
            #expect(history.nextSeq == (model.last?.seq ?? 39) + 1)
            model.append((history.nextSeq, entry))
            history.append(entry)
            let limit = 1 + Int(random.next() % 700)
            history.trim(to: limit)
            if model.count > limit { model.removeFirst(model.count - limit) }
            let probe = "f\(random.next() % 200)"
            #expect(history.seqs(of: probe) == model.filter { $0.entry.fireId == probe }.map(\.seq))
            if let pick = model.randomElement(using: &random) {
                history.update(pick.seq) { $0.acknowledgedAt = 1 }
                #expect(history[seq: pick.seq]?.id == pick.entry.id)
                history.update(pick.seq) { $0.acknowledgedAt = nil }
            }
        }
        #expect(history.entries.map(\.id) == model.map(\.entry.id))
        #expect(history.firstSeq == model.first?.seq)
        #expect(history[seq: history.firstSeq - 1] == nil)
        #expect(history[seq: history.nextSeq] == nil)
    }
}
