/// Which connections the server closes, and when (``HTTPServer/Limits``): a pure state machine that
/// the server's thread tells what happened and at what time, and that returns the connections to
/// close.
///
/// Every connection carries one request (the answer says `Connection: close`), so the time a
/// connection may stay is the time its request may take: each is closed
/// ``HTTPServer/Limits/requestTime`` after it was accepted, however steadily it sends. Past
/// ``HTTPServer/Limits/connectionsPerAddress`` from one address, or ``HTTPServer/Limits/connections``
/// in all, a new connection is not refused: the oldest one (of that address, or of all) is closed
/// instead. Clients holding connections open, sending their requests a byte at a time, then keep
/// nobody out: a probe or a scrape arrives as the newest connection and sends its request at once.
struct ConnectionTable: Sendable {
    struct Connection: Hashable, Sendable {
        /// libmicrohttpd's connection, as a number.
        var id: UInt
        var socket: Int32
        /// The client's address without its port (4 or 16 bytes).
        var address: [UInt8]
        var deadline: ContinuousClock.Instant
    }

    let limits: HTTPServer.Limits
    /// The connections open and not being closed, oldest first (so also by deadline).
    private(set) var open: [Connection] = []

    init(limits: HTTPServer.Limits) { self.limits = limits }

    /// A connection was accepted at `now`; returns the one to close to make room for it, if any.
    mutating func accepted(
        id: UInt,
        socket: Int32,
        address: [UInt8],
        at now: ContinuousClock.Instant
    ) -> Connection? {
        var evicted: Connection?
        if open.count(where: { $0.address == address }) >= limits.connectionsPerAddress,
            let oldest = open.firstIndex(where: { $0.address == address })
        {
            evicted = open.remove(at: oldest)
        } else if open.count >= limits.connections {
            evicted = open.removeFirst()
        }
        open.append(Connection(id: id, socket: socket, address: address, deadline: now + limits.requestTime))
        return evicted
    }

    /// The connection is gone (closed by either side, or after being returned here).
    mutating func closed(id: UInt) {
        if let index = open.firstIndex(where: { $0.id == id }) { open.remove(at: index) }
    }

    /// The connections whose time is up at `now`: to close.
    mutating func expired(at now: ContinuousClock.Instant) -> [Connection] {
        let count = open.prefix { $0.deadline <= now }.count
        defer { open.removeFirst(count) }
        return Array(open.prefix(count))
    }

    /// When the next connection's time is up; nil with none open.
    var nextDeadline: ContinuousClock.Instant? { open.first?.deadline }
}
