/// The work all the recurrences of one command may do together, in the unit of ``Recurrence``'s search
/// budgets (candidate date-times): each check or search of the command takes its budget from what is left.
///
/// Each call is bounded on its own (``Recurrence/maximumCandidatesPerSearch`` and its siblings, about
/// 45 ms each), but a batch of a thousand rules each near its bounds would hold the caller for seconds.
/// With one allowance per command, a command costs at most about ``perCommand`` candidates (plus one rule's
/// construction), whatever it holds: `chime-bench maxima` measures the largest such command.
public struct RecurrenceAllowance: Sendable {
    /// What one command may use: a release build spends 1 to 9 ns a candidate, so at most about 90 ms,
    /// and ordinary rules need a few thousand each (a batch of a thousand yearly ones, some millions).
    public static let perCommand = 10_000_000

    public let limit: Int
    /// Candidates used so far; past ``limit`` only by the last rule built (its construction is paid after).
    public private(set) var used = 0

    public init(_ limit: Int = perCommand) {
        self.limit = limit
    }

    var remaining: Int { max(0, limit - used) }

    /// Runs `body` with a budget of at most `ownLimit`, less when less is left, and counts what it used.
    mutating func spending<T>(
        _ ownLimit: Int,
        for purpose: Budget.Purpose,
        _ body: (inout Budget) throws(RecurrenceError) -> T
    ) throws(RecurrenceError) -> T {
        var budget = Budget(min(ownLimit, remaining), for: purpose)
        defer { used += budget.used }
        do {
            return try body(&budget)
        } catch {
            // Its own limit ran out: its own message; the command's: the allowance's.
            throw error.code == .searchLimit && budget.limit < ownLimit ? exhausted() : error
        }
    }

    /// Counts work done outside a budget of this allowance (a rule's construction).
    mutating func charge(_ candidates: Int) throws(RecurrenceError) {
        used += candidates
        if used > limit { throw exhausted() }
    }

    func exhausted() -> RecurrenceError {
        RecurrenceError(
            .searchLimit,
            "the command's rules need more than \(limit) candidate date-times together to check; "
                + "send them in smaller batches or simplify them"
        )
    }
}
