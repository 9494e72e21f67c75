import ChimeTime
import Testing

@Suite struct CivilTimeTests {
    @Test(arguments: [
        (1970, 1, 1, Int64(0)), (2000, 3, 1, 11_017), (2024, 2, 29, 19_782), (1969, 12, 31, -1), (1, 1, 1, -719_162),
    ])
    func daysRoundTrip(year: Int, month: Int, day: Int, days: Int64) {
        #expect(daysFromCivil(year: year, month: month, day: day) == days)
        let back = civilFromDays(days)
        #expect(back.year == year && back.month == month && back.day == day)
    }

    @Test func weekdays() {
        #expect(LocalDateTime(year: 1970, month: 1, day: 1).weekday == 4)
        #expect(LocalDateTime(year: 2026, month: 11, day: 29).weekday == 7)
        #expect(LocalDateTime(year: 2025, month: 2, day: 28).weekday == 5)
    }

    @Test func iso8601Forms() {
        #expect(
            DateTimeValue(iso8601: "2026-12-01T18:00") == .local(LocalDateTime(year: 2026, month: 12, day: 1, hour: 18))
        )
        #expect(
            DateTimeValue(iso8601: "2026-12-01T18:00:05")
                == .local(
                    LocalDateTime(year: 2026, month: 12, day: 1, hour: 18, second: 5)
                )
        )
        #expect(DateTimeValue(iso8601: "2026-12-01T10:00:00Z") == .instant(Instant(seconds: 1_796_119_200)))
        #expect(DateTimeValue(iso8601: "2026-12-01T18:00:00+08:00") == .instant(Instant(seconds: 1_796_119_200)))
        #expect(
            DateTimeValue(iso8601: "2026-12-01T09:45:00.004Z") == .instant(Instant(milliseconds: 1_796_118_300_004))
        )
        for bad in [
            "tomorrow", "2026-02-30T10:00", "2026-12-01", "2026-12-01T24:00", "2026-12-01T10:00:00.5",
            "2026-12-01T10:00Zx",
        ] {
            #expect(DateTimeValue(iso8601: bad) == nil, "\(bad)")
        }
    }

    @Test func rfc3339() {
        #expect(Instant(seconds: 1_796_119_200).rfc3339() == "2026-12-01T10:00:00Z")
        #expect(Instant(milliseconds: 1_796_118_300_004).rfc3339() == "2026-12-01T09:45:00.004Z")
        #expect(Instant(seconds: 0).rfc3339(fractional: true) == "1970-01-01T00:00:00.000Z")
    }

    @Test func gapMovesForwardAndOverlapTakesTheFirstInstant() throws {
        let ny = try #require(Zone(identifier: "America/New_York"))
        // 2026-03-08 02:30 does not exist in New York: it is 03:30 EDT, 07:30Z.
        let gap = ny.instant(for: LocalDateTime(year: 2026, month: 3, day: 8, hour: 2, minute: 30))
        #expect(gap.rfc3339() == "2026-03-08T07:30:00Z")
        // 2026-11-01 01:30 happens twice; the first is EDT, 05:30Z.
        let overlap = ny.instant(for: LocalDateTime(year: 2026, month: 11, day: 1, hour: 1, minute: 30))
        #expect(overlap.rfc3339() == "2026-11-01T05:30:00Z")
        let apia = try #require(Zone(identifier: "Pacific/Apia"))
        // 2011-12-30 was skipped in Apia: noon that day becomes noon on the 31st.
        let skipped = apia.instant(for: LocalDateTime(year: 2011, month: 12, day: 30, hour: 12))
        #expect(apia.localDateTime(at: skipped) == LocalDateTime(year: 2011, month: 12, day: 31, hour: 12))
    }
}
