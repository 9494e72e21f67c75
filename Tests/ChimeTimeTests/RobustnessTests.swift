import Testing

@testable import ChimeTime

/// Random rule texts and forged occurrences: nothing may crash, and every call stays within its budget.
@Suite struct RobustnessTests {
    struct Random {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        mutating func pick<T>(_ values: [T]) -> T { values[next(values.count)] }
    }

    static let parts = [
        "INTERVAL", "COUNT", "UNTIL", "BYSECOND", "BYMINUTE", "BYHOUR", "BYDAY", "BYMONTHDAY", "BYYEARDAY", "BYWEEKNO",
        "BYMONTH", "BYSETPOS", "WKST",
    ]
    static let values = [
        "0", "1", "2", "-1", "7", "13", "31", "-31", "53", "-53", "59", "60", "366", "-366", "1000000000", "MO", "-1FR",
        "2TU,TH", "SU", "20261201", "20261201T100000Z", "99991231T235959", "1,,2", "", "x", "5,4,5",
    ]

    @Test func randomRulesNeverCrash() throws {
        var random = Random(state: 5545)
        let zones = ["UTC", "America/New_York", "Pacific/Apia", "Australia/Lord_Howe"].map(zone)
        var parsed = 0
        for _ in 0..<1500 {
            var text =
                "FREQ=" + random.pick(["SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"])
            for _ in 0..<random.next(4) {
                text += ";\(random.pick(Self.parts))=\(random.pick(Self.values))"
            }
            guard let rule = try? RecurrenceRule(parsing: text) else { continue }
            parsed += 1
            #expect(try RecurrenceRule(parsing: rule.description) == rule)
            let start = wall(
                random.pick(["2026-03-08T02:30", "9999-12-30T00:00", "0001-01-01T00:00", "2011-12-29T10:00"])
            )
            let recurrence: Recurrence
            do {
                recurrence = try Recurrence(start: start, zone: random.pick(zones), pattern: .rule(rule))
            } catch {
                // 0001-01-01T00:00 east of UTC is before the year 1.
                #expect(error.code == .invalidCombination)
                continue
            }
            do {
                var occurrence = try recurrence.first(atOrAfter: at("2026-06-01T00:00:00Z"))
                for _ in 0..<3 {
                    guard let current = occurrence else { break }
                    occurrence = try recurrence.next(after: current)
                    if let next = occurrence { #expect(next.instant > current.instant) }
                }
            } catch {
                #expect(error.code == .searchLimit)
            }
        }
        #expect(parsed > 200)
    }

    /// Random RFC 7529 rules (RSCALE, leap months, SKIP) in their own calendars: nothing crashes, every call
    /// stays within its budget, occurrences move forward, and counting a period gives what building it does.
    @Test func randomCalendarRulesNeverCrash() throws {
        var random = Random(state: 7529)
        let zones = ["UTC", "Asia/Shanghai", "America/New_York", "Pacific/Apia"].map(zone)
        var parsed = 0
        var compared = 0
        for _ in 0..<800 {
            var parts = [
                "RSCALE=" + random.pick(["CHINESE", "GREGORIAN"]), "FREQ=" + random.pick(["YEARLY", "MONTHLY"]),
            ]
            if random.next(2) == 0 {
                let months = (0...random.next(3)).map { _ in "\(1 + random.next(12))\(random.next(3) == 0 ? "L" : "")" }
                parts.append("BYMONTH=" + months.joined(separator: ","))
            }
            if random.next(3) > 0 {
                let days = (0...random.next(3)).map { _ in
                    String(random.pick([1, 15, 28, 29, 30, 31, -1, -29, -30, -31]))
                }
                parts.append("BYMONTHDAY=" + days.joined(separator: ","))
            }
            if random.next(4) == 0 { parts.append("BYDAY=" + random.pick(["MO", "SA,SU", "FR"])) }
            if random.next(4) == 0 { parts.append("BYHOUR=" + random.pick(["0", "9,21", "2"])) }
            if random.next(4) == 0 { parts.append("BYSETPOS=" + random.pick(["1", "-1", "2,-2"])) }
            if random.next(3) == 0 { parts.append("INTERVAL=\(random.pick([2, 3, 12, 13, 1000]))") }
            if random.next(4) == 0 { parts.append("COUNT=\(1 + random.next(50))") }
            parts.append("SKIP=" + random.pick(["OMIT", "BACKWARD", "FORWARD"]))
            guard let rule = try? RecurrenceRule(parsing: parts.joined(separator: ";")) else { continue }
            parsed += 1
            #expect(try RecurrenceRule(parsing: rule.description) == rule)
            let start = wall(
                random.pick(["2026-03-08T02:30", "1901-02-19T00:00", "2099-12-30T09:00", "2011-12-29T10:00"])
            )
            let recurrence: Recurrence
            do {
                recurrence = try Recurrence(start: start, zone: random.pick(zones), pattern: .rule(rule))
            } catch {
                #expect(error.code == .invalidCombination || error.code == .invalidRule, "\(rule): \(error)")
                continue
            }
            do {
                var budget = Budget(Budget.perCall)
                var occurrence = try recurrence.first(atOrAfter: at("2026-06-01T00:00:00Z"), budget: &budget)
                #expect(budget.used <= Budget.perCall)
                for _ in 0..<3 {
                    guard let current = occurrence else { break }
                    occurrence = try recurrence.next(after: current)
                    if let next = occurrence { #expect(next.instant > current.instant && next.index > current.index) }
                }
            } catch {
                #expect(error.code == .searchLimit)
            }
            let local = start.resolved(in: .utc)
            let expansion = RuleExpansion(
                rule: rule,
                start: Zone.utc.localDateTime(at: local),
                chinese: ChineseCalendar.shared
            )
            for _ in 0..<3 {
                let period = Int64(random.next(150))
                var built: [Int64] = []
                var budget = Budget(.max)
                guard try expansion.candidates(period: period, into: &built, budget: &budget) else { continue }
                var counting = Budget(.max)
                #expect(try expansion.candidateCount(period: period, budget: &counting) == Int64(built.count))
                #expect(built == built.sorted() && Set(built).count == built.count, "\(rule)")
                compared += 1
            }
        }
        #expect(parsed > 300)
        #expect(compared > 300)
    }

    @Test func forgedOccurrences() throws {
        let rule = try Recurrence(
            start: wall("2026-01-01T09:00"),
            zone: zone("Europe/Paris"),
            pattern: rule("FREQ=DAILY")
        )
        let daily = try Recurrence(
            start: wall("2026-01-01T09:00"),
            zone: zone("Europe/Paris"),
            pattern: .interval(.day)
        )
        let instants = [
            at("2026-01-05T08:00:00Z"), at("2026-01-05T08:00:00.5Z"), Instant.distantFuture, Instant.distantPast,
        ]
        for recurrence in [rule, daily] {
            for index in [Int.min, -1, 0, 1, 5, 1_000_000, Int.max] {
                for instant in instants {
                    let next = try recurrence.next(after: Occurrence(index: index, instant: instant))
                    if let next { #expect(next.instant > instant) }
                }
            }
            #expect(try recurrence.first(atOrAfter: Instant(milliseconds: .max)) == nil)
            #expect(try recurrence.first(atOrAfter: Instant(milliseconds: .min))?.index == 1)
        }
        // The real successor of a real occurrence keeps its numbering.
        #expect(try rule.next(after: Occurrence(index: 5, instant: at("2026-01-05T08:00:00Z")))?.index == 6)
    }
    /// A random rule of `frequency` with a few of the parts that filter days and times, as text.
    static func randomRule(_ random: inout Random, _ frequency: String) -> String {
        func values(_ range: ClosedRange<Int>, signed: Bool = false, most: Int = 4) -> String {
            (0...random.next(most)).map { _ in
                let v = range.lowerBound + random.next(range.count)
                return String(signed && random.next(2) == 0 ? -v : v)
            }.joined(separator: ",")
        }
        var parts = ["FREQ=" + frequency]
        if random.next(3) == 0 { parts.append("INTERVAL=\(random.pick([2, 3, 5, 7, 13, 25, 48, 100]))") }
        if random.next(3) == 0 { parts.append("BYMONTH=" + values(1...12)) }
        if random.next(3) == 0 { parts.append("BYMONTHDAY=" + values(1...31, signed: true)) }
        if random.next(4) == 0 && frequency != "MONTHLY" { parts.append("BYYEARDAY=" + values(1...366, signed: true)) }
        if random.next(3) == 0 {
            let days = (0...random.next(3)).map { _ in weekdayNames[random.next(7)] }
            let ordinal = ["MONTHLY", "YEARLY"].contains(frequency) && random.next(2) == 0
            parts.append(
                "BYDAY="
                    + days.map { (ordinal ? String(random.pick([1, 2, -1, 5, -5])) : "") + $0 }.joined(separator: ",")
            )
        }
        if random.next(3) == 0 { parts.append("BYHOUR=" + values(0...23)) }
        if random.next(3) == 0 { parts.append("BYMINUTE=" + values(0...59)) }
        if random.next(3) == 0 { parts.append("BYSECOND=" + values(0...59)) }
        if random.next(4) == 0 { parts.append("BYSETPOS=" + values(1...4, signed: true, most: 2)) }
        return parts.joined(separator: ";")
    }

    /// ``randomRule(_:_:)`` of one of `frequencies` and its expansion from a random DTSTART in `years`; nil
    /// when the text is not a valid rule or one of its periods may hold more than 20,000 candidates.
    static func randomExpansion(
        _ random: inout Random,
        _ frequencies: [String],
        startingIn years: ClosedRange<Int> = 2000...2019
    ) -> (text: String, expansion: RuleExpansion)? {
        let text = randomRule(&random, random.pick(frequencies))
        guard let rule = try? RecurrenceRule(parsing: text), rule.periodExpansionBound <= 20_000 else { return nil }
        let start = LocalDateTime(
            year: years.lowerBound + random.next(years.count),
            month: 1 + random.next(12),
            day: 1 + random.next(28)
        )
        return (text, RuleExpansion(rule: rule, start: start))
    }

    /// Counting a period's candidates (used to number occurrences from DTSTART) gives what building them does.
    @Test func countingAgreesWithExpanding() throws {
        var random = Random(state: 2026)
        var compared = 0
        for _ in 0..<600 {
            let frequencies = ["MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"]
            guard let (text, expansion) = Self.randomExpansion(&random, frequencies, startingIn: 1990...2029)
            else { continue }
            for _ in 0..<5 {
                let period = Int64(random.next(2000))
                var built: [Int64] = []
                var budget = Budget(.max)
                guard try expansion.candidates(period: period, into: &built, budget: &budget) else { continue }
                var counting = Budget(.max)
                #expect(
                    try expansion.candidateCount(period: period, budget: &counting) == Int64(built.count),
                    "\(text)"
                )
                compared += 1
            }
        }
        #expect(compared > 1000)
    }

    /// Counting the periods of a sub-daily rule day by day gives what visiting each period does.
    @Test func countingByDaysAgreesWithWalking() throws {
        var random = Random(state: 86_400)
        var compared = 0
        for _ in 0..<400 {
            guard let (text, expansion) = Self.randomExpansion(&random, ["MINUTELY", "HOURLY", "HOURLY"]) else {
                continue
            }
            // (A rule proven never to fire again is not counted at all.)
            guard let cache = expansion.dayCounts, !expansion.laterPeriodsEmpty else { continue }
            let from = Int64(1 + random.next(3000))
            let to = from + Int64(random.next(20_000))
            var walking = Budget(.max)
            var byDays = Budget(.max)
            let walked = try expansion.countByWalking(from: from, to: to, budget: &walking)
            #expect(try expansion.countByDays(from: from, to: to, cache: cache, budget: &byDays) == walked, "\(text)")
            compared += 1
        }
        #expect(compared > 100)
    }

    /// The day skipping of searches never steps over a day that passes the day filters.
    @Test func skippingNeverPassesAMatchingDay() throws {
        var random = Random(state: 5545)
        var skipped = 0
        for _ in 0..<400 {
            let frequencies = ["SECONDLY", "MINUTELY", "HOURLY", "DAILY"]
            guard let (text, expansion) = Self.randomExpansion(&random, frequencies) else { continue }
            var day = daysFromCivil(year: 2020 + random.next(10), month: 1, day: 1)
            for _ in 0..<200 {
                let next = expansion.nextDayToTry(after: day)
                #expect(next.matches == expansion.dayMatches(day))
                if next.matches {
                    #expect(next.day == day)
                    day += 1
                    continue
                }
                #expect(next.day > day)
                for between in (day + 1)..<next.day { #expect(!expansion.dayMatches(between), "\(text)") }
                skipped += Int(next.day - day - 1)
                day = next.day
            }
        }
        #expect(skipped > 10_000)
    }

    @Test func smallIntSetSearches() {
        var random = Random(state: 384)
        for _ in 0..<50 {
            var set = SmallIntSet()
            var members: Set<Int> = []
            for _ in 0..<random.next(20) {
                let v = random.next(384)
                set.insert(v)
                members.insert(v)
            }
            for probe in [-1, 0, 1, 63, 64, 65, 127, 128, 200, 366, 383, 384, 400]
                + (0..<10).map({ _ in random.next(384) })
            {
                #expect(set.contains(probe) == members.contains(probe))
                #expect(set.first(atOrAbove: probe) == members.filter { $0 >= probe }.min())
                #expect(set.last(below: probe) == members.filter { $0 < probe }.max())
            }
        }
    }

    /// Date-times outside the years 0001...9999 are refused where they are parsed, and never computed.
    @Test func yearsOutsideOneToNineNineNineNine() throws {
        for text in [
            "0000-12-31T23:00:00Z", "0001-01-01T00:30:00+01:00", "9999-12-31T23:30:00-01:00", "0000-06-01T12:00:00",
            "10000-01-01T00:00:00Z", "-0001-01-01T00:00:00Z",
        ] {
            #expect(DateTimeValue(iso8601: text) == nil, "\(text)")
        }
        #expect(DateTimeValue(iso8601: "0001-01-01T00:00:00Z") == .instant(.distantPast))
        #expect(DateTimeValue(iso8601: "0001-01-01T00:30:00+00:30") == .instant(.distantPast))
        #expect(
            DateTimeValue(iso8601: "9999-12-31T23:59:59.999Z")
                == .instant(Instant.distantFuture.adding(milliseconds: 999))
        )
        #expect(DateTimeValue(iso8601: "9999-12-31T22:59:59-01:00") == .instant(.distantFuture))
        #expect(DateTimeValue(iso8601: "0001-01-01T00:00:00") != nil)
        #expect(throws: RecurrenceError(.invalidRule)) {
            try RecurrenceRule(parsing: "FREQ=DAILY;UNTIL=00001231T000000Z")
        }
        #expect(throws: RecurrenceError(.invalidRule)) { try RecurrenceRule(parsing: "FREQ=DAILY;UNTIL=00001231") }
        #expect(try RecurrenceRule(parsing: "FREQ=DAILY;UNTIL=99991231T235959Z").until != nil)

        // Rendering stays RFC 3339 even for an instant that arithmetic pushed out of range.
        #expect(Instant.distantPast.adding(seconds: -315_360_000).rfc3339() == "0001-01-01T00:00:00Z")
        #expect(Instant.distantFuture.adding(seconds: 86_400).rfc3339() == "9999-12-31T23:59:59.999Z")
        #expect(Instant.distantPast.rfc3339() == "0001-01-01T00:00:00Z")
        #expect(Instant.distantFuture.rfc3339() == "9999-12-31T23:59:59Z")

        // 9999-12-31T20:00 in New York is the year 10000 in UTC: the series ends the day before.
        let ny = zone("America/New_York")
        let start = wall("9999-12-30T20:00")
        for pattern in [try rule("FREQ=DAILY"), .interval(.day), try rule("FREQ=HOURLY;BYHOUR=20")] {
            let recurrence = try Recurrence(start: start, zone: ny, pattern: pattern)
            let first = try #require(try recurrence.first(atOrAfter: .distantPast))
            #expect(first.instant == at("9999-12-31T01:00:00Z"))
            #expect(try recurrence.next(after: first) == nil)
            #expect(try recurrence.first(atOrAfter: first.instant.adding(seconds: 1)) == nil)
            #expect(try recurrence.smallestSpacing() == nil)
        }
        // Every occurrence of a rule that runs to the end is in range, wherever it is asked from.
        let hourly = try Recurrence(start: wall("9999-12-31T00:00"), zone: ny, pattern: rule("FREQ=HOURLY"))
        var occurrence = try hourly.first(atOrAfter: .distantPast)
        var count = 0
        while let current = occurrence {
            #expect(current.instant.isInSupportedYears)
            count += 1
            occurrence = try hourly.next(after: current)
        }
        #expect(count == 19)
    }
}
