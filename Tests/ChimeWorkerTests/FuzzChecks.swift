import ChimeCore

// In the test target; the fuzz build compiles SplitMix64.swift in with this file instead.
#if canImport(ChimeTestSupport)
import ChimeTestSupport
#endif

/// The properties the fuzz targets in `Fuzz/` check, shared with the regression tests
/// (`FuzzRegressionTests`) so that every input a fuzzer ever found is checked again by `make test`.
///
/// `scripts/fuzz` compiles this file into the fuzz targets with ChimeTime, ChimeCore and
/// ChimeTestSupport's `SplitMix64.swift`; it must import nothing else. Each check returns a description of the first violated property, or nil.
enum FuzzChecks {
    /// A violated property: stops a check at once.
    struct Violation: Error, CustomStringConvertible {
        var description: String
    }

    static func require(_ condition: Bool, _ message: @autoclosure () -> String) throws(Violation) {
        if !condition { throw Violation(description: message()) }
    }

    // MARK: Commands

    /// 2026-06-15T10:00:00Z: the clock for every command input.
    static let now = Instant(milliseconds: 1_781_517_600_000)
    static let device = "fz"
    static let engineConfiguration = EngineConfiguration(minRepeatSeconds: 60, maxPendingPerDevice: 50)
    static let decoder = CommandDecoder(limits: CommandLimits(maxCommandBytes: 16384, maxUserInfoBytes: 1024))

    /// One command payload, decoded as every operation. What decodes goes to `Engine.decide` on an
    /// engine prepared the same way for every input (a device with a zone and quiet hours, three
    /// notifications) at a fixed clock. A change is carried through as chimed would: journal entry
    /// encoded and decoded, applied, the engine ticked a day ahead and its deliveries acknowledged,
    /// and the state rebuilt twice, by replaying the journal and from a snapshot.
    ///
    /// Properties: every reply and delivery is valid JSON (for Chime's own strict parser too: no
    /// duplicate keys); every journal entry reads back as an entry that encodes to the same bytes;
    /// replay and snapshot both rebuild exactly what the live engine lists (else a restart would
    /// change what clients see, or refuse the data directory).
    static func command(_ payload: [UInt8]) -> String? {
        do throws(Violation) {
            for op in Operation.allCases {
                try command(payload, as: op)
            }
            return nil
        } catch {
            return error.description
        }
    }

    private static func command(_ payload: [UInt8], as op: Operation) throws(Violation) {
        let request: Request
        switch decoder.decode(deviceId: device, op: op, payload: payload) {
        case .failure(let failure):
            let reply = Reply(op: op.rawValue, requestId: failure.requestId, outcome: .failure(failure.error))
            try requireJSON(reply.bytes, "\(op.rawValue) error reply")
            return
        case .success(let r):
            request = r
        }
        let (engine, setup) = try prepared()
        var journal = setup
        var random = SplitMix64(seed: 2)
        let entry: JournalEntry
        switch engine.decide(request, now: now, random: &random) {
        case .reply(let reply):
            try requireJSON(reply.bytes, "\(op.rawValue) reply")
            return
        case .write(let e):
            entry = e
        }
        guard let result = try write(entry, to: engine, journal: &journal) else {
            throw Violation(description: "\(op.rawValue): applying its journal entry gave no result")
        }
        try requireJSON(Reply(request: request, result: result).bytes, "\(op.rawValue) ok reply")
        try requireSameRecovery(engine, journal, "after \(op.rawValue)")

        // A day passes: deliver what falls due; the broker acknowledges everything.
        engine.setConnected(true)
        var deliveries = 0
        for hours: Int64 in [1, 12, 24] {
            for output in engine.tick(now: now.adding(seconds: hours * 3600)) {
                switch output {
                case .publish(let delivery):
                    deliveries += 1
                    try requireJSON(delivery.payload, "delivery")
                    if let acknowledged = engine.acknowledged(delivery.token) {
                        _ = try write(acknowledged, to: engine, journal: &journal)
                    }
                case .write(let dropped):
                    _ = try write(dropped, to: engine, journal: &journal)
                }
            }
        }
        try require(deliveries <= 10_000, "\(deliveries) deliveries in one day")
        try requireSameRecovery(engine, journal, "after \(op.rawValue) and a day of deliveries")
    }

    static func requireJSON(_ bytes: [UInt8], _ what: String) throws(Violation) {
        do {
            _ = try JSON(parsing: bytes)
        } catch {
            throw Violation(
                description: "\(what) is not valid JSON (\(error)): \(String(decoding: bytes, as: UTF8.self))"
            )
        }
    }

    /// Applies `entry` as chimed does, after its journal round trip, and keeps the stored form.
    static func write(
        _ entry: JournalEntry,
        to engine: Engine,
        journal: inout [JournalEntry]
    ) throws(Violation)
        -> ReplyResult?
    {
        let bytes = entry.encode()
        let stored: JournalEntry
        do {
            stored = try JournalEntry.decode(kind: entry.kind.rawValue, payload: bytes)
        } catch {
            throw Violation(description: "journal entry cannot be read back (\(error)): \(text(bytes))")
        }
        try require(
            stored.encode() == bytes,
            "journal entry changes through the journal: \(text(bytes)) became \(text(stored.encode()))"
        )
        journal.append(stored)
        return engine.apply(entry)
    }

    /// The engine every command input starts from, and the journal that built it.
    static func prepared() throws(Violation) -> (Engine, [JournalEntry]) {
        let engine = Engine(configuration: engineConfiguration)
        var journal: [JournalEntry] = []
        var random = SplitMix64(seed: 1)
        let setup: [(Operation, String)] = [
            (
                .device,
                #"{"timeZone":"Europe/Paris","badge":3,"quietHours":{"start":"22:00","end":"07:00"},"receipts":true}"#
            ),
            (.schedule, #"{"id":"a","after":60,"alertBody":"a","badge":"+1","userInfo":{"k":"v"}}"#),
            (
                .schedule,
                #"{"id":"b","fireDate":"2026-06-01T09:00:00","rrule":"FREQ=DAILY;BYHOUR=9,21","misfire":"all"}"#
            ),
            (.schedule, #"{"id":"c","fireDate":"2026-06-01T09:00","repeatInterval":"week","enabled":false}"#),
            // Receipts: a one-shot already due, kept after firing, delivered, resumed and delivered
            // again, so the inbox holds two entries of one fireId for ack, inbox and history to read.
            (
                .schedule,
                #"{"id":"p","fireDate":"2026-06-15T09:00:00Z","keepAfterFiring":true,"alertBody":"p","ignoreQuietHours":true}"#
            ),
            (.resume, #"{"id":"p"}"#),
        ]
        engine.setConnected(true)
        for (op, payload) in setup {
            guard case .success(let request) = decoder.decode(deviceId: device, op: op, payload: Array(payload.utf8)),
                case .write(let entry) = engine.decide(request, now: now, random: &random)
            else { throw Violation(description: "setup command \(payload) was not accepted") }
            _ = try write(entry, to: engine, journal: &journal)
            // What fell due goes out, and the broker acknowledges it.
            for case .publish(let delivery) in engine.tick(now: now) {
                if let acknowledged = engine.acknowledged(delivery.token) {
                    _ = try write(acknowledged, to: engine, journal: &journal)
                }
            }
        }
        return (engine, journal)
    }

    /// What a client reads of the device: its settings and every notification, as reply bytes.
    static func observed(_ engine: Engine) throws(Violation) -> [UInt8] {
        var random = SplitMix64(seed: 0)
        var bytes: [UInt8] = []
        var reads: [(Operation, Command)] = [
            (.device, .device(DeviceUpdate())), (.list, .list(match: nil, limit: 1000, cursor: nil)),
            (.history, .history(since: nil, limit: 1000)), (.inbox, .inbox(limit: 1000, cursor: nil)),
        ]
        // The inbox a delivery a page: its cursors, as a client follows them.
        var cursor: String?
        for _ in 0..<100 {
            let page = engine.decide(
                Request(deviceId: device, op: .inbox, command: .inbox(limit: 1, cursor: cursor)),
                now: now,
                random: &random
            )
            guard case .reply(let reply) = page, case .success(.inbox(let inbox)) = reply.outcome else {
                throw Violation(description: "an inbox page is not an inbox")
            }
            guard let next = inbox.cursor else { break }
            try require(next != cursor, "the inbox's cursor \(next) does not move")
            cursor = next
            reads.append((.inbox, .inbox(limit: 1, cursor: next)))
        }
        for (op, command) in reads {
            guard
                case .reply(let reply) = engine.decide(
                    Request(deviceId: device, op: op, command: command),
                    now: now,
                    random: &random
                )
            else { throw Violation(description: "a \(op.rawValue) wants to write") }
            try requireJSON(reply.bytes, "\(op.rawValue) reply")
            bytes += reply.bytes
        }
        return bytes
    }

    static func requireSameRecovery(_ live: Engine, _ journal: [JournalEntry], _ stage: String) throws(Violation) {
        let seen = try observed(live)
        let replayedRestorer = EngineRestorer(configuration: engineConfiguration)
        for entry in journal { replayedRestorer.apply(entry) }
        let replayed = replayedRestorer.finish()
        let fromJournal = try observed(replayed)
        try require(
            fromJournal == seen,
            "\(stage): replay differs from the live state:\n  live   \(text(seen))\n  replay \(text(fromJournal))"
        )
        let restoredRestorer = EngineRestorer(configuration: engineConfiguration)
        var failure: String?
        live.snapshot.forEachEntry { (entry: [UInt8]) in
            do {
                try restoredRestorer.restore(snapshotEntry: entry)
            } catch {
                failure = failure ?? "snapshot entry cannot be restored (\(error)): \(text(entry))"
            }
        }
        if let failure { throw Violation(description: failure) }
        let restored = restoredRestorer.finish()
        let fromSnapshot = try observed(restored)
        try require(
            fromSnapshot == seen,
            "\(stage): snapshot differs from the live state:\n  live     \(text(seen))\n  snapshot \(text(fromSnapshot))"
        )
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    // MARK: Recurrence

    private static let defaultStart = DateTimeValue.local(
        LocalDateTime(year: 2026, month: 3, day: 29, hour: 2, minute: 30, second: 0)
    )

    /// A recurrence input: text, one item a line; a missing or unreadable item takes a default.
    ///   1. the rule: an RRULE value, or `@unit` for an Apple repeatInterval (`@month;count=5`)
    ///   2. the start (DTSTART), ISO 8601 wall-clock or absolute (default 2026-03-29T02:30:00)
    ///   3. the zone, an IANA name (default Europe/Paris; an unknown one is UTC)
    ///   4. where the search starts, ISO 8601 (default: the start)
    ///
    /// Properties: a parsed rule prints a canonical form that parses back to an equal rule;
    /// `first(atOrAfter: t)` is at or after `t`; each of up to 16 `next(after:)` is strictly later
    /// and not past 9999-12-31, and is what `first(atOrAfter:)` finds just after the previous one;
    /// `first(atOrAfter:)` an occurrence's own instant finds that same occurrence. Indices are not
    /// checked for order: a rule numbers its occurrences in wall-clock order, and a spring-forward
    /// gap moves some of them after later-numbered ones. (Never hanging is checked by the fuzzer's
    /// timeout.)
    static func recurrence(_ text: String) -> String? {
        do throws(Violation) {
            try recurrenceProperties(text)
            return nil
        } catch {
            return error.description
        }
    }

    private static func recurrenceProperties(_ text: String) throws(Violation) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let ruleText = lines.first else { return }
        let start = lines.count > 1 ? DateTimeValue(iso8601: lines[1]) ?? defaultStart : defaultStart
        let zone = lines.count > 2 ? Zone(identifier: lines[2]) ?? Zone.utc : Zone(identifier: "Europe/Paris")!
        let pattern: Recurrence.Pattern
        var count: Int?
        if ruleText.hasPrefix("@") {
            let parts = ruleText.dropFirst().split(separator: ";", maxSplits: 1)
            guard let name = parts.first, let unit = RepeatUnit(parsing: String(name)) else { return }
            if parts.count == 2, parts[1].hasPrefix("count="), let n = Int(parts[1].dropFirst(6)) { count = n }
            pattern = .interval(unit)
        } else {
            let rule: RecurrenceRule
            do {
                rule = try RecurrenceRule(parsing: ruleText)
            } catch {
                return
            }
            let canonical = rule.description
            try require(
                (try? RecurrenceRule(parsing: canonical)) == rule,
                "\(ruleText): its canonical form \(canonical) does not parse back to an equal rule"
            )
            pattern = .rule(rule)
        }
        let recurrence: Recurrence
        do {
            recurrence = try Recurrence(start: start, zone: zone, pattern: pattern, count: count)
        } catch {
            return
        }
        _ = try? recurrence.smallestSpacing()
        let from = lines.count > 3 ? DateTimeValue(iso8601: lines[3])?.resolved(in: zone) : nil
        let target = from ?? start.resolved(in: zone)
        guard var occurrence = (try? recurrence.first(atOrAfter: target)) ?? nil else { return }
        try require(occurrence.instant >= target, "first(atOrAfter: \(target)) gave the earlier \(occurrence)")
        for _ in 0..<16 {
            try require(occurrence.instant <= Instant.distantFuture, "\(occurrence) is past 9999-12-31")
            if let again = try? recurrence.first(atOrAfter: occurrence.instant) {
                try require(
                    again == occurrence,
                    "first(atOrAfter: \(occurrence.instant)) gave \(String(describing: again)), expected \(occurrence)"
                )
            }
            guard let following = (try? recurrence.next(after: occurrence)) ?? nil else { return }
            try require(following.instant > occurrence.instant, "next(after: \(occurrence)) gave \(following)")
            // Nothing in between: the search from just after it finds the same one.
            if let between = try? recurrence.first(atOrAfter: occurrence.instant.adding(milliseconds: 1)) {
                try require(
                    between == following,
                    "next(after: \(occurrence)) gave \(following), first(atOrAfter:) just after it \(String(describing: between))"
                )
            }
            occurrence = following
        }
    }
}
