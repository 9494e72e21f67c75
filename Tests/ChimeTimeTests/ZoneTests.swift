import Foundation
import Testing

@testable import ChimeTime

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

    /// Names a zone directory opens as a path (`Europe//Paris` is the file `Europe/Paris`) but no other
    /// database knows: a name accepted from a client must resolve wherever the journal is replayed.
    @Test(arguments: [
        "Europe//Paris", "America/Argentina//Buenos_Aires", "Europe/Paris/", "/Europe/Paris", "Europe/./Paris",
        "Europe/../Europe/Paris", "Europe/", "Europe/-Paris", "Etc//UTC",
    ])
    func rejectsSpellingsThatAreNotCanonical(_ name: String) {
        #expect(Zone(identifier: name) == nil)
    }

    /// Every zone and link of the machine's tzdata source is a name the check accepts (`Factory` is
    /// not a zone), so that the canonical rule refuses no real zone.
    @Test func everyTzdataNameIsAccepted() throws {
        let source = try String(contentsOfFile: "/usr/share/zoneinfo/tzdata.zi", encoding: .utf8)
        var names: [String] = []
        for line in source.split(separator: "\n") {
            let parts = line.split(separator: " ")
            if parts.count >= 2, parts[0] == "Z" { names.append(String(parts[1])) }
            if parts.count >= 3, parts[0] == "L" { names.append(String(parts[2])) }
        }
        #expect(names.count > 500)
        #expect(names.filter { $0 != "Factory" && !Zone.isIANAName($0) } == [])
    }

    /// A zone a journal or snapshot names is never refused: a spelling an earlier chimed accepted
    /// is read as the file it named, a zone this machine lacks stays unresolved and reads in UTC.
    @Test func recordedNamesAlwaysMakeAZone() {
        let paris = Zone(recorded: "Europe//Paris")
        #expect(paris.identifier == "Europe/Paris")
        #expect(paris.isResolved)
        #expect(paris.offset(at: at("2030-07-01T00:00:00Z")) == 7200)
        #expect(Zone(recorded: "Europe/Paris").rulesFingerprint == zone("Europe/Paris").rulesFingerprint)

        for name in ["America/Atlantis", "../../etc/passwd", "", "Mars/Olympus"] {
            let unknown = Zone(recorded: name)
            #expect(unknown.identifier == name)
            #expect(!unknown.isResolved)
            #expect(unknown.offset(at: at("2030-07-01T00:00:00Z")) == 0)
            #expect(
                unknown.instant(for: LocalDateTime(year: 2030, month: 7, day: 1, hour: 9)) == at("2030-07-01T09:00:00Z")
            )
            #expect(unknown.rulesFingerprint != Zone.utc.rulesFingerprint)
        }
        #expect(Zone(recorded: "Atlantis//Lost").identifier == "Atlantis//Lost")
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
