import ChimeCore

/// The cursors a pager of the center followed (`list`, `inbox`). chimed's cursors are opaque, but
/// each page holds at least one row (PROTOCOL.md 3.4, 3.8) and moves past it: a cursor that comes back,
/// or more pages than the largest device can fill, means the listing would never end, and the
/// call throws `.invalidReply` instead of looping.
struct PageTrail: Sendable {
    /// chimed's largest `--max-pending-per-device` (its configuration checks the flag against the
    /// same number; a test keeps the two equal).
    static let maxPendingPerDevice = 100_000_000
    /// chimed's largest `--max-inbox-per-device`.
    static let maxInboxPerDevice = 100_000

    let op: ChimeCore.Operation
    /// The most pages a worker can send for `op`: one a row of the largest device, and a last one.
    let maxPages: Int
    private var seen: Set<String> = []
    private(set) var pages = 0

    init(_ op: ChimeCore.Operation, maxPages: Int? = nil) {
        self.op = op
        self.maxPages = maxPages ?? Self.maxPages(op)
    }

    static func maxPages(_ op: ChimeCore.Operation) -> Int {
        (op == .inbox ? maxInboxPerDevice : maxPendingPerDevice) + 1
    }

    /// Takes the cursor of the page that just came.
    /// - Returns: the cursor to ask for next; nil after the last page.
    /// - Throws: ``ChimeClientError`` `.invalidReply` when the cursor was seen before, or a next
    ///   page would be past ``maxPages``.
    mutating func follow(_ cursor: String?) throws(ChimeClientError) -> String? {
        pages += 1
        guard let cursor else { return nil }
        guard seen.insert(cursor).inserted else {
            throw ChimeClientError(
                .invalidReply,
                "\(op.rawValue) page \(pages) has the cursor of an earlier page: the pages would never end"
            )
        }
        guard pages < maxPages else {
            throw ChimeClientError(
                .invalidReply,
                "\(pages) \(op.rawValue) pages and a cursor for more, more than a device can fill: "
                    + "the pages would never end"
            )
        }
        return cursor
    }
}
