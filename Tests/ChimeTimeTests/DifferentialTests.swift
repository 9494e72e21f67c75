import Foundation
import Testing

@testable import ChimeTime

/// Vectors from `Fixtures/generate_vectors.py` (python-dateutil and zoneinfo); see the script for how the
/// expected values were computed.
@Suite struct DifferentialTests {
    struct RuleVector: Decodable {
        var zone: String
        var start: String
        var rule: String
        var exdates: [String]
        var complete: Bool
        var expect: [[Int64]]
        var queries: [[Int64]]
    }

    struct ZoneFile: Decodable {
        struct Entry: Decodable {
            var names: [String]
            var transitions: String
        }
        var zones: [Entry]
    }

    static func describe(_ occurrence: Occurrence?) -> String {
        guard let occurrence else { return "nil" }
        return "#\(occurrence.index) \(occurrence.instant)"
    }

    @Test func rulesAgreeWithDateutil() throws {
        let vectors = try loadFixture("rule_vectors", as: [RuleVector].self)
        #expect(vectors.count >= 2000)
        var failures: [String] = []
        var checked = 0
        for v in vectors {
            let zone = try #require(Zone(identifier: v.zone))
            let start = try #require(DateTimeValue(iso8601: v.start))
            let exdates = try v.exdates.map { try #require(DateTimeValue(iso8601: $0)) }
            let label = "\(v.zone) \(v.start) \(v.rule)"
            do {
                let rule = try RecurrenceRule(parsing: v.rule)
                let recurrence = try Recurrence(start: start, zone: zone, pattern: .rule(rule), exdates: exdates)
                var got = try recurrence.first(atOrAfter: Instant.distantPast)
                for (n, e) in v.expect.enumerated() {
                    let want = Occurrence(index: Int(e[0]), instant: Instant(seconds: e[1]))
                    guard got == want else {
                        failures.append(
                            "\(label): occurrence \(n): got \(Self.describe(got)), want \(Self.describe(want))"
                        )
                        break
                    }
                    checked += 1
                    got = try recurrence.next(after: want)
                }
                if v.complete && got != nil && failures.last?.hasPrefix(label) != true {
                    failures.append("\(label): expected the end, got \(Self.describe(got))")
                }
                for q in v.queries {
                    let want = q.count == 3 ? Occurrence(index: Int(q[1]), instant: Instant(seconds: q[2])) : nil
                    let got = try recurrence.first(atOrAfter: Instant(seconds: q[0]))
                    if got != want {
                        failures.append(
                            "\(label): first(atOrAfter: \(Instant(seconds: q[0]))): got \(Self.describe(got)), want \(Self.describe(want))"
                        )
                    }
                    checked += 1
                }
            } catch {
                failures.append("\(label): threw \(error)")
            }
        }
        #expect(
            failures.count == 0,
            Comment(rawValue: "\(failures.count) failures:\n" + failures.prefix(25).joined(separator: "\n"))
        )
        #expect(checked > 10_000)
    }

    @Test func zoneInstantsAgreeWithZoneinfo() throws {
        let file = try loadFixture("zone_vectors", as: ZoneFile.self)
        var failures: [String] = []
        var bracketingMisses: [String] = []
        var names = 0
        var points = 0
        for entry in file.zones {
            let rows = entry.transitions.split(separator: ";").map { $0.split(separator: ",").compactMap { Int64($0) } }
            for name in entry.names {
                names += 1
                guard let zone = Zone(identifier: name) else {
                    failures.append("\(name): not accepted")
                    continue
                }
                for row in rows where row.count == 4 {
                    let (t, before, after, mask) = (row[0], row[1], row[2], row[3])
                    if zone.offset(at: Instant(seconds: t - 1)) != Int(before)
                        || zone.offset(at: Instant(seconds: t)) != Int(after)
                    {
                        failures.append("\(name): offsets around \(Instant(seconds: t)) differ")
                    }
                    let low = t + min(before, after)
                    let high = t + max(before, after)
                    for (bit, wall) in [low - 1, low, (low + high) / 2, high - 1, high].enumerated() {
                        let used = mask & (1 << bit) != 0 ? after : before
                        let got = zone.instant(for: LocalDateTime(secondsSinceEpoch: wall))
                        let bracketed = zone.instantSecondsByBracketing(forWall: wall)
                        points += 1
                        if bracketed != wall - used {
                            bracketingMisses.append(
                                "\(name) \(LocalDateTime(secondsSinceEpoch: wall)): \(bracketed - (wall - used))"
                            )
                        }
                        if got != Instant(seconds: wall - used) {
                            failures.append(
                                "\(name): \(LocalDateTime(secondsSinceEpoch: wall)) got \(got), want \(Instant(seconds: wall - used))"
                            )
                        }
                    }
                }
            }
        }
        // The +/-1 day bracketing used outside the table's years must agree too.
        #expect(bracketingMisses.count == 0, Comment(rawValue: bracketingMisses.prefix(25).joined(separator: "\n")))
        #expect(names >= 590)
        #expect(points > 100_000)
        #expect(
            failures.count == 0,
            Comment(rawValue: "\(failures.count) failures:\n" + failures.prefix(25).joined(separator: "\n"))
        )
    }
}
