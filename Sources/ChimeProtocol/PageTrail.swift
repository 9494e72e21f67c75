/// The largest per-device limits chimed accepts, whatever a worker is configured with: chimed
/// checks its flags against them, and clients derive from them how many pages of `list` and
/// `inbox` a worker can send at most (``PageTrail``). Each is as large as it can be while one
/// device's costliest command at that size holds the worker's loop for well under the 100 ms the
/// other devices may wait (PROTOCOL.md section 3.8; `chime-bench maxima` measures it).
public enum DeviceLimits {
    /// The largest `--max-pending-per-device`: notifications one device may hold. A device's
    /// commands that touch all it holds (pause, resume or cancel all, a new zone, the first match,
    /// which builds its userInfo index) cost about 0.6 µs a notification: 61 ms at 100,000.
    public static let maxPendingPerDevice = 100_000
    /// The largest `--max-inbox-per-device`: unacknowledged deliveries one inbox holds.
    public static let maxInboxPerDevice = 100_000
    /// The largest `--history-per-device`.
    public static let maxHistoryPerDevice = 100_000
    /// The largest `--max-inbox-bytes-per-device` (256 MiB): a snapshot writes a device's inbox as
    /// one entry, JSON in which a payload's bytes can take twice their room, and one entry must fit
    /// one PostgreSQL value (1 GB) and one frame of a snapshot file.
    public static let maxInboxBytesPerDevice = 1 << 28
    /// The largest `--inbox-ttl`, in seconds: a hundred years.
    public static let largestInboxTTLSeconds = 3_153_600_000
}

/// The cursors a client followed through the pages of `list` or `inbox`. Cursors are opaque, but
/// each page holds at least one row and moves past it (PROTOCOL.md 3.4, 3.9): a cursor that comes
/// back, or more pages than the largest device can fill, means the listing would never end, and
/// every client (the CLI, the Swift and Python libraries) stops it with an error instead of looping.
public struct PageTrail: Sendable {
    /// Why a listing was stopped.
    public struct Endless: Error, Hashable, Sendable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    public let op: Operation
    /// The most pages a worker can send for `op`: one a row of the largest device chimed allows
    /// (``DeviceLimits``), and a last one.
    public let maxPages: Int
    private var seen: Set<String> = []
    public private(set) var pages = 0

    /// - Parameter maxPages: fewer than a device can fill, for tests.
    public init(_ op: Operation, maxPages: Int? = nil) {
        self.op = op
        self.maxPages = maxPages ?? Self.maxPages(op)
    }

    public static func maxPages(_ op: Operation) -> Int {
        (op == .inbox ? DeviceLimits.maxInboxPerDevice : DeviceLimits.maxPendingPerDevice) + 1
    }

    /// Takes the cursor of the page that just came.
    /// - Returns: the cursor to ask for next; nil after the last page.
    /// - Throws: ``Endless`` when the cursor was seen before, or a next page would be past
    ///   ``maxPages``.
    public mutating func follow(_ cursor: String?) throws(Endless) -> String? {
        pages += 1
        guard let cursor else { return nil }
        guard seen.insert(cursor).inserted else {
            throw Endless(
                message: "\(op.rawValue) page \(pages) has the cursor of an earlier page: the pages would never end"
            )
        }
        guard pages < maxPages else {
            throw Endless(
                message: "\(pages) \(op.rawValue) pages and a cursor for more, more than a device can fill: "
                    + "the pages would never end"
            )
        }
        return cursor
    }
}
