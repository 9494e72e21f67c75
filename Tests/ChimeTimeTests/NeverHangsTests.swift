import ChimeTestSupport
import Testing

@testable import ChimeTime

/// Pathological rules: each call returns (an occurrence, nil, or `.searchLimit`) within its budget of
/// candidate date-times, read from the budget's counter, never from a clock. `chime-bench recurrence
/// --hostile` measures what the budgets cost in time in a release build.
@Suite struct NeverHangsTests {
    enum Outcome: Sendable, Equatable {
        /// The first occurrence at or after the start's instant, as RFC 3339.
        case fires(String)
        case never
        /// The search gives up with `.searchLimit`: finding the next occurrence costs more than the budget.
        case limited
        /// Refused at construction (`.invalidRule`): a period expands to more than the limit.
        case refused
    }

    /// What ``Recurrence/smallestSpacing()`` gives: seconds, nil, or (`limited`) `.searchLimit`.
    enum Spacing: Sendable, Equatable {
        case seconds(Int64)
        case noSpacing
        case limited
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var rule: String
        var start = "2026-01-01T09:15:30"
        /// Where the search starts (RFC 3339), when not at the start.
        var from: String?
        var outcome: Outcome
        /// When given, what the spacing check must give.
        var spacing: Spacing?
        var testDescription: String { "\(rule.count > 100 ? rule.prefix(100) + "..." : rule) from \(start)" }
    }

    static let allTimes = HostileRules.allTimes

    /// What each of ``HostileRules/all`` gives, by name.
    static let hostileOutcomes: [String: (outcome: Outcome, spacing: Spacing?)] = [
        "finding": (.refused, nil),
        "yearly-all-monthdays-all-times": (.refused, nil),
        "every-part": (.refused, nil),
        "weekly-all-times": (.refused, nil),
        "monthly-all-times": (.refused, nil),
        "weekno53-feb-all-times": (.refused, nil),
        "every-part-under-limit": (.fires("2026-01-01T09:18:30Z"), .seconds(360)),
        "monthly-setpos-89280": (.fires("2026-01-31T23:59:30Z"), .seconds(2_419_200)),
        "daily-setpos-86400": (.fires("2026-01-02T00:00:00Z"), .limited),
        "hourly-setpos-3600": (.fires("2026-01-01T09:59:59Z"), .seconds(3600)),
        "yearly-setpos-since-1900": (.fires("2026-12-31T23:50:30Z"), nil),
        "yearly-all-weeknos": (.fires("2026-01-01T09:15:30Z"), .seconds(900)),
        "yearly-all-ordinals": (.fires("2026-01-01T09:15:30Z"), .seconds(3600)),
        "secondly-all-yeardays": (.fires("2026-01-01T09:15:30Z"), .seconds(1)),
        "secondly-yearday-minus-366": (.fires("2028-01-01T00:00:00Z"), .seconds(1)),
        "secondly-yearday-366-monday": (.fires("2040-12-31T00:00:00Z"), .seconds(1)),
        "minutely-all-yeardays-setpos": (.fires("2026-01-01T09:15:59Z"), .seconds(1)),
        "minutely-friday-13th-since-2000": (.fires("2026-02-13T00:00:00Z"), .seconds(60)),
        "daily-first-every-minute-since-1900": (.fires("2026-01-01T00:01:00Z"), .seconds(60)),
        "secondly-first-since-2000": (.fires("2026-01-01T00:00:00Z"), .seconds(1)),
        "secondly-interval-1447-since-1900": (.limited, .seconds(1447)),
        "weekly-bymonth-since-1900": (.fires("2026-02-02T09:00:00Z"), .seconds(604_800)),
        "yearly-31st-of-short-months": (.never, .noSpacing),
        "secondly-31st-of-short-months": (.never, .noSpacing),
        "minutely-minus-30th-of-february": (.never, .noSpacing),
        "daily-30th-of-february-all-times": (.never, .noSpacing),
        "weekno53-in-february": (.never, .noSpacing),
        "late-yeardays-in-january": (.never, .noSpacing),
        "monthly-32nd-weekday": (.never, .noSpacing),
        "fifth-last-monday-of-february": (.fires("2044-02-01T09:15:30Z"), nil),
        "53rd-last-monday": (.fires("2029-01-01T09:15:30Z"), nil),
        "53rd-weekdays": (.fires("2027-12-31T09:15:30Z"), nil),
        "secondly-february-29th-monday": (.fires("2044-02-29T09:15:00Z"), .seconds(1)),
    ]

    /// The hostile rules as cases (an unlisted one fails ``everyHostileRuleHasAnOutcome()``).
    static let hostile: [Case] = HostileRules.all.map { h in
        let expected = hostileOutcomes[h.name]
        return Case(
            rule: h.rule,
            start: h.start,
            from: h.from,
            outcome: expected?.outcome ?? .limited,
            spacing: expected?.spacing
        )
    }

    @Test func everyHostileRuleHasAnOutcome() {
        #expect(Set(HostileRules.all.map(\.name)) == Set(Self.hostileOutcomes.keys))
        #expect(HostileRules.all.count == Self.hostileOutcomes.count)
    }

    static let cases: [Case] = [
        Case(rule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", outcome: .never),
        Case(rule: "FREQ=MONTHLY;BYMONTH=4,6,9,11;BYMONTHDAY=31", outcome: .never),
        Case(rule: "FREQ=YEARLY;BYWEEKNO=53;BYMONTH=6", outcome: .never),
        Case(rule: "FREQ=YEARLY;BYYEARDAY=366;BYMONTH=1", outcome: .never),
        Case(rule: "FREQ=MONTHLY;BYDAY=MO;BYSETPOS=7", outcome: .never),
        Case(rule: "FREQ=DAILY;BYSECOND=44;BYSETPOS=-2", outcome: .never),
        Case(rule: "FREQ=WEEKLY;INTERVAL=20871;BYMONTH=2", start: "2026-06-01T10:00:00", outcome: .never),
        Case(rule: "FREQ=DAILY;INTERVAL=146097;BYMONTH=2", start: "2026-06-01T10:00:00", outcome: .never),
        Case(rule: "FREQ=DAILY;INTERVAL=7;BYDAY=SU,WE", start: "2023-04-10T00:00:00", outcome: .never),
        Case(rule: "FREQ=MONTHLY;INTERVAL=12;BYMONTHDAY=30", start: "2026-02-01T10:00:00", outcome: .never),
        Case(rule: "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=30", outcome: .never),
        Case(rule: "FREQ=HOURLY;BYMONTH=4;BYMONTHDAY=31;BYHOUR=9", outcome: .never),
        // Sub-daily periods that never line up with the allowed times of day (proven by a congruence).
        Case(rule: "FREQ=SECONDLY;INTERVAL=2;BYSECOND=1", start: "2026-01-01T09:15:30", outcome: .never),
        Case(rule: "FREQ=HOURLY;INTERVAL=48;BYHOUR=5", start: "2026-01-01T04:00:00", outcome: .never),
        Case(rule: "FREQ=MINUTELY;INTERVAL=120;BYMINUTE=1", start: "2026-01-01T04:00:00", outcome: .never),
        Case(rule: "FREQ=HOURLY;INTERVAL=168;BYDAY=TU", start: "2026-01-05T04:00:00", outcome: .never),
        Case(
            rule: "FREQ=SECONDLY;INTERVAL=86401;BYSECOND=7;BYMONTH=2;BYMONTHDAY=29",
            outcome: .fires("2480-02-29T07:20:07Z")
        ),
        // COUNT used up, UNTIL before the start.
        Case(rule: "FREQ=DAILY;COUNT=3", start: "2000-01-01T10:00:00", from: "2026-01-01T00:00:00Z", outcome: .never),
        Case(rule: "FREQ=DAILY;UNTIL=20000101T000000Z", outcome: .never),
        Case(rule: "FREQ=DAILY;UNTIL=20251231", outcome: .never),
        // Rare but real: February 29 on a Monday comes every 28 years or so.
        Case(rule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", outcome: .fires("2044-02-29T09:15:30Z")),
        Case(rule: "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", outcome: .fires("2044-02-29T09:15:30Z")),
        Case(rule: "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=9", outcome: .fires("2044-02-29T09:15:30Z")),
        Case(
            rule: "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=9;BYMINUTE=15",
            outcome: .fires("2044-02-29T09:15:30Z")
        ),
        Case(
            rule: "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=9;BYMINUTE=15;BYSECOND=30",
            outcome: .fires("2044-02-29T09:15:30Z")
        ),
        Case(rule: "FREQ=MONTHLY;BYDAY=5FR;BYMONTH=2", outcome: .fires("2036-02-29T09:15:30Z")),
        Case(rule: "FREQ=YEARLY;BYDAY=53FR", outcome: .fires("2027-12-31T09:15:30Z")),
        Case(rule: "FREQ=MINUTELY;INTERVAL=7;BYHOUR=3;BYMINUTE=1", outcome: .fires("2026-01-03T03:01:30Z")),
        // Huge numbers.
        Case(rule: "FREQ=YEARLY;INTERVAL=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        Case(rule: "FREQ=SECONDLY;INTERVAL=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        Case(rule: "FREQ=DAILY;COUNT=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        Case(rule: "FREQ=SECONDLY;COUNT=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        // The end of the calendar.
        Case(rule: "FREQ=HOURLY", start: "9999-12-31T23:00:00", outcome: .fires("9999-12-31T23:00:00Z")),
        Case(rule: "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", start: "9999-01-01T00:00:00", outcome: .never),
        Case(rule: "FREQ=MONTHLY;BYMONTHDAY=31", start: "9999-12-01T00:00:00", outcome: .fires("9999-12-31T00:00:00Z")),
        Case(rule: "FREQ=WEEKLY;BYDAY=SU", start: "9999-12-31T00:00:00", outcome: .never),
        Case(rule: "FREQ=DAILY", start: "0001-01-01T00:00:00", outcome: .fires("0001-01-01T00:00:00Z")),
        // RFC 7529: leap months no year of 1901...2099 has, days no month has, SKIP moving dates.
        Case(rule: "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=12L;BYMONTHDAY=1", outcome: .never),
        Case(rule: "RSCALE=CHINESE;FREQ=MONTHLY;BYMONTH=9L,10L", outcome: .never),
        Case(rule: "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=1L;BYMONTHDAY=30;BYDAY=MO", outcome: .never),
        Case(rule: "RSCALE=CHINESE;FREQ=MONTHLY;BYMONTHDAY=30;BYSETPOS=2", outcome: .never),
        Case(rule: "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=11L;BYMONTHDAY=1", outcome: .fires("2033-12-22T09:15:30Z")),
        Case(
            rule: "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=2L;BYMONTHDAY=1;BYDAY=SA",
            outcome: .fires("2042-03-22T09:15:30Z")
        ),
        Case(rule: "RSCALE=CHINESE;FREQ=YEARLY;INTERVAL=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        Case(rule: "RSCALE=CHINESE;FREQ=MONTHLY;INTERVAL=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        Case(rule: "RSCALE=CHINESE;FREQ=MONTHLY;COUNT=1000000000", outcome: .fires("2026-01-01T09:15:30Z")),
        Case(
            rule: "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1",
            start: "2099-06-01T00:00:00",
            outcome: .never
        ),
        Case(
            rule: "RSCALE=CHINESE;FREQ=MONTHLY;BYMONTHDAY=1",
            start: "1901-02-19T00:00:00",
            from: "2099-12-31T00:00:00Z",
            outcome: .fires("2100-01-10T00:00:00Z")
        ),
        Case(rule: "RSCALE=GREGORIAN;FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30;SKIP=OMIT", outcome: .never),
        Case(
            rule: "RSCALE=GREGORIAN;FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30;SKIP=BACKWARD",
            outcome: .fires("2026-02-28T09:15:30Z")
        ),
        Case(
            rule: "RSCALE=GREGORIAN;FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30;SKIP=FORWARD",
            outcome: .fires("2026-03-01T09:15:30Z")
        ),
        Case(
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTH=2;BYMONTHDAY=31;BYDAY=MO;SKIP=BACKWARD",
            outcome: .fires("2033-02-28T09:15:30Z")
        ),
        Case(
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;BYMONTH=2;BYDAY=MO;BYSETPOS=2;SKIP=FORWARD",
            outcome: .never
        ),
        Case(
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=FORWARD",
            start: "9999-11-15T00:00:00",
            outcome: .fires("9999-12-01T00:00:00Z")
        ),
        Case(
            rule: "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=BACKWARD",
            start: "0001-01-01T00:00:00",
            from: "9999-12-01T00:00:00Z",
            outcome: .fires("9999-12-31T00:00:00Z")
        ),
        Case(
            rule: "RSCALE=GREGORIAN;FREQ=YEARLY;SKIP=FORWARD",
            start: "0004-02-29T00:00:00",
            from: "9999-01-01T00:00:00Z",
            outcome: .fires("9999-03-01T00:00:00Z")
        ),
    ]

    @Test(arguments: cases + hostile)
    func bounded(_ c: Case) throws {
        let start = wall(c.start)
        let pattern = try rule(c.rule)
        let recurrence: Recurrence
        do {
            recurrence = try Recurrence(start: start, zone: .utc, pattern: pattern)
        } catch {
            #expect(c.outcome == .refused, "\(error)")
            #expect(error.code == .invalidRule)
            #expect(error.message.contains("more than the \(RecurrenceRule.maximumCandidatesPerPeriod) allowed"))
            return
        }
        #expect(c.outcome != .refused)
        #expect(recurrence.proofCandidates <= Recurrence.maximumCandidatesPerProof)

        var budget = Budget(Budget.perCall)
        var first: Occurrence?
        var limited = false
        do {
            first = try recurrence.first(atOrAfter: c.from.map(at) ?? start.resolved(in: .utc), budget: &budget)
        } catch {
            #expect(error.code == .searchLimit)
            limited = true
        }
        #expect(budget.used <= Budget.perCall)
        switch c.outcome {
        case .fires(let text):
            #expect(first?.instant == at(text))
            if let first {
                var next = Budget(Budget.perCall)
                _ = try? recurrence.next(after: first, budget: &next)
                #expect(next.used <= Budget.perCall)
            }
        case .never:
            #expect(first == nil && !limited)
        case .limited:
            #expect(limited)
            // It gave up because the budget was used up, not before.
            #expect(budget.used > Budget.perCall / 2)
        case .refused:
            break
        }
        for later in ["2999-06-01T00:00:00Z", "9999-12-31T23:59:59Z"] {
            var budget = Budget(Budget.perCall)
            _ = try? recurrence.first(atOrAfter: at(later), budget: &budget)
            #expect(budget.used <= Budget.perCall)
        }

        var spacingBudget = Budget(Budget.perSpacing, for: .spacing)
        let spacing: Spacing
        do {
            spacing = try recurrence.smallestSpacing(budget: &spacingBudget).map(Spacing.seconds) ?? .noSpacing
        } catch {
            #expect(error.code == .searchLimit)
            #expect(spacingBudget.used > Budget.perSpacing / 2)
            spacing = .limited
        }
        #expect(spacingBudget.used <= Budget.perSpacing)
        if let expected = c.spacing { #expect(spacing == expected) }
        if c.outcome == .never && c.from == nil { #expect(spacing == .noSpacing) }
    }

    /// The counter is the work: a period's date-times are paid for as they are built or counted, so a test
    /// of `used` is a test of the work done.
    @Test func expansionIsPaidFor() throws {
        let daily = try RecurrenceRule(parsing: "FREQ=DAILY;\(Self.allTimes);BYSETPOS=1")
        let expansion = RuleExpansion(rule: daily, start: LocalDateTime(year: 2026, month: 1, day: 1))
        var budget = Budget(.max)
        var out: [Int64] = []
        #expect(try expansion.candidates(period: 3, into: &out, budget: &budget))
        #expect(out.count == 1)
        #expect(budget.used >= 86_400)
        var counting = Budget(.max)
        #expect(try expansion.candidateCount(period: 3, budget: &counting) == 1)
        #expect(counting.used < 100)
        // Out of budget part way through a period: it stops there, having done no more than it paid for.
        var short = Budget(1000)
        out.removeAll()
        #expect(throws: RecurrenceError(.searchLimit)) {
            try expansion.candidates(period: 3, into: &out, budget: &short)
        }
        #expect(out.count <= 1000 && short.used <= 1000)
    }

    /// The finding, through the public API: refused at once instead of a minute's work.
    @Test func theFindingIsRefused() throws {
        let text = HostileRules.finding
        #expect(text.utf8.count > 500 && text.utf8.count < 600)
        let parsed = try RecurrenceRule(parsing: text)
        #expect(parsed.periodExpansionBound == 12 * 31 * 86_400 || parsed.periodExpansionBound == 366 * 86_400)
        #expect(throws: RecurrenceError(.invalidRule)) {
            try Recurrence(start: wall("2026-01-01T09:15:30"), zone: .utc, pattern: .rule(parsed))
        }
    }

    /// A rule under the per-period limit whose spacing check needs a whole day per occurrence gives up with
    /// a message naming the budget (the original search counted periods, and expanded 86 million date-times).
    @Test func spacingCheckGivesUpWithAMessage() throws {
        let recurrence = try Recurrence(
            start: wall("2026-01-01T09:15:30"),
            zone: .utc,
            pattern: rule("FREQ=DAILY;\(Self.allTimes);BYSETPOS=1")
        )
        do {
            _ = try recurrence.smallestSpacing()
            Issue.record("the spacing check should have run out of budget")
        } catch {
            #expect(error == RecurrenceError(.searchLimit))
            #expect(
                error.message
                    == "needs more than \(Recurrence.maximumCandidatesPerSpacingCheck) candidate date-times to check "
                    + "the spacing of its first \(Recurrence.spacingOccurrences) occurrences; simplify the rule"
            )
        }
        #expect(try recurrence.first(atOrAfter: at("2026-01-01T09:15:30Z"))?.instant == at("2026-01-02T00:00:00Z"))
    }

    /// Every RFC 5545 example and python-dateutil vector stays far within the budgets, walked from the
    /// start and asked about today and the year 2200, and its spacing checked (for every fifth vector, to
    /// keep the test quick): the limits cost legitimate rules nothing.
    @Test func legitimateRulesUseLittleOfTheBudget() throws {
        var schedules: [(String, Recurrence)] = []
        let examples = RFC5545ExampleTests()
        for example in RFC5545ExampleTests.examples {
            let start = try #require(examples.basicDateTime(example.start))
            let exdates = try example.exdates.map { try #require(examples.basicDateTime($0)) }
            let pattern = try rule(example.rule)
            let recurrence = try Recurrence(
                start: start,
                zone: zone("America/New_York"),
                pattern: pattern,
                exdates: exdates
            )
            schedules.append((example.rule, recurrence))
        }
        for v in try loadFixture("rule_vectors", as: [DifferentialTests.RuleVector].self) {
            let start = try #require(DateTimeValue(iso8601: v.start))
            let exdates = try v.exdates.map { try #require(DateTimeValue(iso8601: $0)) }
            let pattern = try rule(v.rule)
            schedules.append(
                (v.rule, try Recurrence(start: start, zone: zone(v.zone), pattern: pattern, exdates: exdates))
            )
        }
        #expect(schedules.count > 2000)
        var most: [String: (used: Int, rule: String)] = [:]
        func record(_ what: String, _ used: Int, _ rule: String) {
            if used > most[what, default: (0, "")].used { most[what] = (used, rule) }
        }
        var failures: [String] = []
        for (n, (text, recurrence)) in schedules.enumerated() {
            record("proof", recurrence.proofCandidates, text)
            do throws(RecurrenceError) {
                var budget = Budget(Budget.perCall)
                var occurrence = try recurrence.first(atOrAfter: .distantPast, budget: &budget)
                record("search", budget.used, text)
                for _ in 0..<20 {
                    guard let current = occurrence else { break }
                    budget = Budget(Budget.perCall)
                    occurrence = try recurrence.next(after: current, budget: &budget)
                    record("search", budget.used, text)
                }
                for query in ["2026-06-01T00:00:00Z", "2200-01-01T00:00:00Z"] {
                    budget = Budget(Budget.perCall)
                    _ = try recurrence.first(atOrAfter: at(query), budget: &budget)
                    record("search", budget.used, text)
                }
            } catch {
                failures.append("\(text): \(error)")
            }
            guard n < RFC5545ExampleTests.examples.count || n % 5 == 0 else { continue }
            var spacing = Budget(Budget.perSpacing, for: .spacing)
            do {
                _ = try recurrence.smallestSpacing(budget: &spacing)
                record("spacing", spacing.used, text)
            } catch {
                failures.append("\(text) spacing: \(error)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) failures: \(failures.prefix(10))")
        let search = most["search", default: (0, "")]
        let spacing = most["spacing", default: (0, "")]
        let proof = most["proof", default: (0, "")]
        #expect(search.used <= Budget.perCall / 4, "\(search.used) candidates for \(search.rule)")
        #expect(spacing.used <= Budget.perSpacing / 2, "\(spacing.used) candidates for \(spacing.rule)")
        #expect(proof.used <= Budget.perProof / 10, "\(proof.used) candidates for \(proof.rule)")
        print("legitimate rules, most candidates: search \(search), spacing \(spacing), proof \(proof)")
    }

    @Test func searchLimitIsAnErrorWithAMessage() throws {
        let recurrence = try Recurrence(
            start: wall("2026-01-01T09:15:30"),
            zone: .utc,
            pattern: rule("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO")
        )
        let from = at("2026-01-01T00:00:00Z")
        var budget = Budget(50)
        do {
            _ = try recurrence.first(atOrAfter: from, budget: &budget)
            Issue.record("the search should have run out of budget")
        } catch {
            #expect(error == RecurrenceError(.searchLimit))
            #expect(
                error.message
                    == "needs more than 50 candidate date-times to find the next occurrence; simplify the rule"
            )
        }
        #expect(budget.used <= 50)
        #expect(try recurrence.first(atOrAfter: from)?.instant == at("2044-02-29T09:15:30Z"))
    }
}
