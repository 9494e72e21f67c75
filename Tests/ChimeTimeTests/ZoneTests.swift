import ChimeTime
import Foundation
import Testing

@Suite struct ZoneTests {
    @Test(arguments: [
        "UTC", "GMT", "Etc/GMT+5", "Etc/UTC", "EST5EDT", "US/Eastern", "Europe/Paris", "America/Argentina/Buenos_Aires",
        "GMT0",
    ])
    func acceptsIANANames(_ name: String) {
        #expect(Zone(identifier: name) != nil)
    }

    @Test(arguments: [
        "", "GMT+5", "UTC+3", "IST", "PST", "SystemV/AST4", "Foo/Bar", "europe/paris", "Europe/Paris ", "Etc/Unknown",
        "Factory", "localtime",
    ])
    func rejectsOtherNames(_ name: String) {
        #expect(Zone(identifier: name) == nil)
    }

    /// The cached table answers exactly as Foundation does, at every transition and between them.
    @Test(arguments: [
        "America/New_York", "Europe/Paris", "Australia/Lord_Howe", "America/Santiago", "Pacific/Apia", "Asia/Shanghai",
        "Africa/Casablanca",
    ])
    func tableMatchesFoundation(_ name: String) throws {
        let zone = try #require(Zone(identifier: name))
        let tz = try #require(TimeZone(identifier: name))
        var t = Date(timeIntervalSince1970: -2_208_988_800)  // 1900
        var checked = 0
        while let next = tz.nextDaylightSavingTimeTransition(after: t), next.timeIntervalSince1970 < 4_102_444_800 {
            for delta in [-86_400.0, -1, 0, 1, 3600] {
                let date = next.addingTimeInterval(delta)
                #expect(
                    zone.offset(at: Instant(seconds: Int64(date.timeIntervalSince1970))) == tz.secondsFromGMT(for: date)
                )
                checked += 1
            }
            t = next
        }
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let seconds = Int64.random(in: -2_208_988_800..<4_102_444_800, using: &rng)
            #expect(
                zone.offset(at: Instant(seconds: seconds))
                    == tz.secondsFromGMT(for: Date(timeIntervalSince1970: Double(seconds)))
            )
        }
        #expect(checked > 0 || name == "Asia/Shanghai")
    }

    @Test func farFromTheTableStillAnswers() throws {
        let ny = try #require(Zone(identifier: "America/New_York"))
        let future = ny.instant(for: LocalDateTime(year: 9999, month: 7, day: 1, hour: 12))
        #expect(ny.localDateTime(at: future) == LocalDateTime(year: 9999, month: 7, day: 1, hour: 12))
        let past = ny.instant(for: LocalDateTime(year: 1700, month: 1, day: 1))
        #expect(ny.localDateTime(at: past) == LocalDateTime(year: 1700, month: 1, day: 1))
    }
}
