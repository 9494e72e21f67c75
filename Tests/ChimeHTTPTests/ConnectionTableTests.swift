import Testing

@testable import ChimeHTTP

/// The policy alone, on a clock the tests set: which connection makes room for a new one, and when
/// each one's time is up.
@Suite struct ConnectionTableTests {
    let start = ContinuousClock.now

    func table(connections: Int = 4, perAddress: Int = 2) -> ConnectionTable {
        var limits = HTTPServer.Limits()
        limits.connections = connections
        limits.connectionsPerAddress = perAddress
        limits.requestTime = .seconds(10)
        return ConnectionTable(limits: limits)
    }

    @Test func aConnectionPastItsAddresssCapClosesThatAddresssOldest() {
        var table = table()
        #expect(table.accepted(id: 1, socket: 11, address: [10, 0, 0, 1], at: start) == nil)
        #expect(table.accepted(id: 2, socket: 12, address: [10, 0, 0, 2], at: start) == nil)
        #expect(table.accepted(id: 3, socket: 13, address: [10, 0, 0, 1], at: start) == nil)
        // The third from 10.0.0.1 closes its first, not 10.0.0.2's (older than its second).
        #expect(table.accepted(id: 4, socket: 14, address: [10, 0, 0, 1], at: start)?.socket == 11)
        #expect(table.open.map(\.id) == [2, 3, 4])
    }

    @Test func aConnectionPastTheTotalCapClosesTheOldestOfAll() {
        var table = table()
        for id in UInt(1)...4 {
            #expect(table.accepted(id: id, socket: Int32(id), address: [10, 0, 0, UInt8(id)], at: start) == nil)
        }
        #expect(table.accepted(id: 5, socket: 5, address: [10, 0, 0, 5], at: start)?.id == 1)
        #expect(table.accepted(id: 6, socket: 6, address: [10, 0, 0, 6], at: start)?.id == 2)
        #expect(table.open.map(\.id) == [3, 4, 5, 6])
        // A connection that closed makes room: the next one closes nothing.
        table.closed(id: 4)
        #expect(table.accepted(id: 7, socket: 7, address: [10, 0, 0, 7], at: start) == nil)
        #expect(table.open.map(\.id) == [3, 5, 6, 7])
    }

    @Test func eachConnectionsTimeIsUpItsRequestTimeAfterItWasAccepted() {
        var table = table()
        #expect(table.nextDeadline == nil)
        _ = table.accepted(id: 1, socket: 1, address: [1], at: start)
        _ = table.accepted(id: 2, socket: 2, address: [2], at: start + .seconds(3))
        _ = table.accepted(id: 3, socket: 3, address: [3], at: start + .seconds(4))
        #expect(table.nextDeadline == start + .seconds(10))
        #expect(table.expired(at: start + .seconds(9)).isEmpty)
        #expect(table.expired(at: start + .seconds(13)).map(\.id) == [1, 2])
        // Returned once: it is being closed.
        #expect(table.expired(at: start + .seconds(13)).isEmpty)
        #expect(table.nextDeadline == start + .seconds(14))
        // One that closed before its time is not returned.
        table.closed(id: 3)
        #expect(table.expired(at: start + .seconds(60)).isEmpty)
        #expect(table.nextDeadline == nil)
    }
}
