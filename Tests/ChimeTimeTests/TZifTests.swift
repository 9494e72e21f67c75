import ChimeTestSupport
import Foundation
import Synchronization
import Testing

@testable import ChimeTime

/// The TZif reader and the POSIX `TZ` rules of its footer, against Foundation (ICU), zic and hand-worked
/// cases.
@Suite struct TZifTests {
    static let zoneinfo = "/usr/share/zoneinfo"

    /// Every zone of the machine's database that Foundation also has, as (identifier, bytes).
    static func machineZones() throws -> [(String, [UInt8])] {
        let root = URL(fileURLWithPath: zoneinfo)
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey])
        else { return [] }
        var zones: [(String, [UInt8])] = []
        for case let url as URL in walker {
            let name = String(url.path.dropFirst(root.path.count + 1))
            guard Zone.isIANAName(name), TimeZone(identifier: name) != nil,
                (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true
            else { continue }
            zones.append((name, [UInt8](try Data(contentsOf: url))))
        }
        return zones.sorted { $0.0 < $1.0 }
    }

    /// Where two tables disagree on the offset between `from` and `to`: the first instant, or nil.
    static func firstDifference(_ a: ZoneTable, _ b: ZoneTable, from: Int64, to: Int64) -> Int64? {
        var instants = Set<Int64>()
        for t in a.transitions + b.transitions where t >= from && t < to {
            instants.formUnion([t - 1, t, t + 1])
        }
        for s in stride(from: from, to: to, by: 86_400 * 29) { instants.insert(s) }
        return instants.sorted().first { a.offset(atSeconds: $0) != b.offset(atSeconds: $0) }
    }

    /// Zones where Debian's tzdata 2025b and the ICU data Foundation bundles disagree since 1970, and
    /// why. Python's `zoneinfo`, reading the same files, agrees with the TZif reader on both: upstream
    /// tzdata 2024b made `EET` and `WET` links to Europe/Athens and Europe/Lisbon, which ICU follows,
    /// while Debian's package still builds them as the old rule-based zones (EET at +02 in April 1975
    /// where Athens was at +03; WET at +00 in 1970 where Lisbon was at +01).
    static let knownDifferences: Set<String> = ["EET", "WET"]

    @Test func everyMachineZoneAgreesWithFoundation() throws {
        let zones = try Self.machineZones()
        try #require(zones.count > 400, "expected the Debian tzdata package in \(Self.zoneinfo)")
        var differences: [String: String] = [:]
        for (name, bytes) in zones {
            let file = try TZifFile(bytes: bytes)
            let ours = ZoneTable(tzif: file)
            let icu = ZoneTable(timeZone: try #require(TimeZone(identifier: name)))
            // 1970 to 2100: tzdata keeps the history before 1970 only for zones that differ since;
            // Debian's package adds `backzone`, ICU links those zones instead.
            if let at = Self.firstDifference(ours, icu, from: 0, to: 4_102_444_800) {
                differences[name] =
                    "\(Instant(seconds: at)): \(ours.offset(atSeconds: at)) here, \(icu.offset(atSeconds: at)) in ICU"
            }
        }
        let unexpected = differences.filter { !Self.knownDifferences.contains($0.key) }
        for (name, what) in unexpected.sorted(by: { $0.key < $1.key }) { print("TZif vs ICU: \(name) \(what)") }
        print("TZif vs ICU: \(zones.count) zones, \(differences.count) differ")
        #expect(unexpected.isEmpty)
    }

    /// zic's slim files hold the future only in their footer; fat ones list transitions up to 2037:
    /// both give the same table.
    @Test(arguments: ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "America/Nuuk", "Asia/Jerusalem"])
    func slimAndFatAgree(_ name: String) throws {
        let source = try String(contentsOfFile: "\(Self.zoneinfo)/tzdata.zi", encoding: .utf8)
        // Only the zone's own lines and the rules it names: the whole database takes zic a while.
        let slim = try ZicOutput.compile(ZicOutput.extract(name, from: source), zone: name, slim: true)
        let fat = try ZicOutput.compile(ZicOutput.extract(name, from: source), zone: name, slim: false)
        #expect(slim.rule != nil && slim.transitions.count < fat.transitions.count)
        let a = ZoneTable(tzif: slim)
        let b = ZoneTable(tzif: fat)
        #expect(a.transitions == b.transitions)
        #expect(a.offsets == b.offsets)
        #expect(a.fingerprint == b.fingerprint)
    }

    @Test func fingerprintsTellRulesApart() throws {
        let one = ZoneTable(tzif: try ZicOutput.compile(ZicOutput.shifting(offset: "-4:00"), zone: "Test/Shifting"))
        let same = ZoneTable(tzif: try ZicOutput.compile(ZicOutput.shifting(offset: "-4:00"), zone: "Test/Shifting"))
        let other = ZoneTable(tzif: try ZicOutput.compile(ZicOutput.shifting(offset: "-3:00"), zone: "Test/Shifting"))
        #expect(one.fingerprint == same.fingerprint)
        #expect(one.fingerprint != other.fingerprint)
        // Known value: the fingerprint is the same in every process and on every machine.
        #expect(ZoneTable(initialOffset: 0, changes: [], far: .rule(nil)).fingerprint == 0xA8C7_F832_281A_39C5)
    }

    // MARK: Footers

    /// Hand-worked transitions (UTC) of footer rules in one year.
    @Test(arguments: [
        // Europe: last Sunday of March 01:00 UTC, last Sunday of October 01:00 UTC.
        ("CET-1CEST,M3.5.0,M10.5.0/3", 2030, ["2030-03-31T01:00:00Z +7200", "2030-10-27T01:00:00Z +3600"]),
        // US: second Sunday of March, first Sunday of November, 02:00 local.
        ("EST5EDT,M3.2.0,M11.1.0", 2026, ["2026-03-08T07:00:00Z -14400", "2026-11-01T06:00:00Z -18000"]),
        // Greenland since 2023: negative transition times (-1 = 23:00 the day before).
        ("<-02>2<-01>,M3.5.0/-1,M10.5.0/0", 2026, ["2026-03-29T01:00:00Z -3600", "2026-10-25T01:00:00Z -7200"]),
        // Israel: a time past 24 hours (Friday before the last Sunday of March, 02:00).
        ("IST-2IDT,M3.4.4/26,M10.5.0", 2026, ["2026-03-27T00:00:00Z +10800", "2026-10-24T23:00:00Z +7200"]),
        // Lord Howe: southern hemisphere, half-hour daylight saving, half-hour offsets, quoted names.
        ("<+1030>-10:30<+11>-11,M10.1.0,M4.1.0", 2026, ["2026-04-04T15:00:00Z +37800", "2026-10-03T15:30:00Z +39600"]),
        // Jn never counts February 29: J60 is March 1 in a leap year too.
        ("XXX3YYY,J60/0,J300/0", 2028, ["2028-03-01T03:00:00Z -7200", "2028-10-27T02:00:00Z -10800"]),
        // n counts it, from 0: day 59 is February 29 in a leap year (tzcode's reading; Python's zoneinfo
        // reads n a day early, and J59 as February 29).
        ("XXX3YYY,59/0,300/0", 2028, ["2028-02-29T03:00:00Z -7200", "2028-10-27T02:00:00Z -10800"]),
        // A daylight offset given, with seconds.
        (
            "AAA+3:30BBB+2:00:30,M4.1.0/0,M9.5.6/23:59:59", 2026,
            ["2026-04-05T03:30:00Z -7230", "2026-09-27T02:00:29Z -12600"]
        ),
    ])
    func footerTransitions(_ text: String, _ year: Int, _ expected: [String]) throws {
        let rule = try PosixTimeZone(parsing: text)
        let got = rule.transitions(inYear: year).map {
            "\(Instant(seconds: $0.at)) \($0.offset >= 0 ? "+" : "")\($0.offset)"
        }
        #expect(got == expected)
    }

    @Test func footerOffsets() throws {
        let fixed = try PosixTimeZone(parsing: "<+03>-3")
        #expect(fixed.standardOffset == 10_800 && fixed.daylight == nil)
        #expect(fixed.offset(atSeconds: 4_000_000_000) == 10_800)
        // Daylight time all year (zic writes this for permanent daylight saving): the end of one
        // year's and the start of the next cancel out.
        let always = try PosixTimeZone(parsing: "EST5EDT,0/0,J365/25")
        for day in stride(from: Int64(0), to: 800, by: 7) {
            #expect(always.offset(atSeconds: 4_102_444_800 + day * 86_400) == -14_400)
        }
        let table = ZoneTable(
            initialOffset: -14_400,
            changes: Self.expand(always, 2100...2111).filter { $0.at < 4_449_618_000 },
            far: .rule(always)
        )
        #expect(table.transitions.isEmpty)
        // Southern hemisphere across New Year: daylight time from October to April.
        let sydney = try PosixTimeZone(parsing: "AEST-10AEDT,M10.1.0,M4.1.0/3")
        #expect(sydney.offset(atSeconds: at("2100-01-01T00:00:00Z").seconds) == 39_600)
        #expect(sydney.offset(atSeconds: at("2100-07-01T00:00:00Z").seconds) == 36_000)
        // Without dates: the US rules, as tzcode.
        let bare = try PosixTimeZone(parsing: "EST5EDT")
        let us = try PosixTimeZone(parsing: "EST5EDT,M3.2.0,M11.1.0")
        #expect(bare == us)
    }

    static func expand(_ rule: PosixTimeZone, _ years: ClosedRange<Int>) -> [(at: Int64, offset: Int32)] {
        years.flatMap { rule.transitions(inYear: $0) }
    }

    @Test(arguments: [
        "", "AB1", "CET", "CET-", "CET-1CEST,M13.1.0,M10.5.0", "CET-1CEST,M3.5.0", "<+03-3", "<+3>-3",
        "CET-1CEST,M3.5.0/168,M10.5.0", "CET-25", "CET-1CEST,J0,J100", "CET-1CEST,M3.0.0,M10.5.0",
        "CET-1CEST,M3.5.7,M10.5.0", "CET-1CEST,366,10", "CET-1CEST,M3.5.0,M10.5.0 ", "CET-1:60",
        "C3T-1", "CET-1CEST,M3.5.0,M10.5.0,M11.1.0",
    ])
    func badFooters(_ text: String) {
        #expect(throws: ZoneDataError(.badRule, "")) { try PosixTimeZone(parsing: text) }
    }

    // MARK: Hostile files

    @Test func everyTruncationIsAnError() throws {
        let bytes = try #require(FileManager.default.contents(atPath: "\(Self.zoneinfo)/Europe/Paris"))
        let file = [UInt8](bytes)
        for length in 0..<file.count {
            #expect(throws: ZoneDataError.self) { try TZifFile(bytes: Array(file[..<length])) }
        }
        #expect(throws: ZoneDataError(.truncated, "")) { try TZifFile(bytes: Array(file[..<100])) }
        #expect(throws: ZoneDataError(.notTZif, "")) { try TZifFile(bytes: [UInt8]("TZiX".utf8) + file.dropFirst(4)) }
        #expect(throws: ZoneDataError(.tooLarge, "")) {
            try TZifFile(bytes: file + [UInt8](repeating: 0, count: TZifFile.maximumBytes))
        }
    }

    /// A header that claims more than the limits is refused before anything is allocated.
    @Test func countsPastTheLimitsAreRefused() {
        func header(timecnt: UInt32, typecnt: UInt32) -> [UInt8] {
            var h = [UInt8]("TZif2".utf8) + [UInt8](repeating: 0, count: 15)
            for count in [0, 0, 0, timecnt, typecnt, 4] as [UInt32] {
                h += [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)]
            }
            return h
        }
        #expect(throws: ZoneDataError(.tooLarge, "")) {
            try TZifFile(bytes: header(timecnt: 4_000_000_000, typecnt: 1))
        }
        #expect(throws: ZoneDataError(.tooLarge, "")) { try TZifFile(bytes: header(timecnt: 1, typecnt: 300)) }
        #expect(throws: ZoneDataError(.truncated, "")) { try TZifFile(bytes: header(timecnt: 9000, typecnt: 1)) }
    }

    /// Flipped bytes give an error or a file, never a crash or a hang.
    @Test func corruptedFilesNeverCrash() throws {
        let bytes = try #require(FileManager.default.contents(atPath: "\(Self.zoneinfo)/America/New_York"))
        let file = [UInt8](bytes)
        var rng = SplitMix64(seed: 20)
        var refused = 0
        for _ in 0..<3000 {
            var copy = file
            for _ in 0..<Int(rng.next() % 4 + 1) {
                copy[Int(rng.next() % UInt64(copy.count))] = UInt8(truncatingIfNeeded: rng.next())
            }
            do {
                _ = ZoneTable(tzif: try TZifFile(bytes: copy))
            } catch {
                refused += 1
            }
        }
        #expect(refused > 0)
    }

    @Test func unsortedTransitionsAndBadTypeIndicesAreInvalid() throws {
        let tzif = try ZicOutput.compileBytes(
            ZicOutput.shifting(offset: "-4:00", dst: true),
            zone: "Test/Shifting",
            slim: false
        )
        // The second header is after the first block: find the 64-bit transitions and swap two.
        let file = try TZifFile(bytes: tzif)
        try #require(file.transitions.count >= 2)
        let second = try #require(ZicOutput.secondHeader(tzif))
        var swapped = tzif
        let t0 = second + 44
        for k in 0..<8 { swapped.swapAt(t0 + k, t0 + 8 + k) }
        #expect(throws: ZoneDataError(.invalid, "")) { try TZifFile(bytes: swapped) }
        var badIndex = tzif
        badIndex[t0 + 8 * file.transitions.count] = 200
        #expect(throws: ZoneDataError(.invalid, "")) { try TZifFile(bytes: badIndex) }
    }

    @Test func aVersionOneFileIsRead() throws {
        // The first block alone, with version 1: no footer, so the last offset holds after 2037.
        let tzif = try ZicOutput.compileBytes(
            ZicOutput.shifting(offset: "-4:00", dst: true),
            zone: "Test/Shifting",
            slim: false
        )
        let second = try #require(ZicOutput.secondHeader(tzif))
        var v1 = Array(tzif[..<second])
        v1[4] = 0
        let file = try TZifFile(bytes: v1)
        #expect(file.version == 1 && file.rule == nil && !file.transitions.isEmpty)
        let table = ZoneTable(tzif: file)
        #expect(table.offset(atSeconds: 4_102_444_800) == Int64(table.offsets.last!))
    }

    // MARK: The database

    @Test func theDatabaseReadsADirectoryAndFallsBackToFoundation() throws {
        let directory = try ZicOutput.directory(ZicOutput.shifting(offset: "-4:00"))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = ZoneDatabase(directories: [directory])
        // The directory's rules, under any name it has (the name check still applies).
        let shifting = try #require(Zone(identifier: "America/Asuncion", database: database))
        #expect(shifting.offset(at: at("2030-07-01T00:00:00Z")) == -14_400)
        #expect(shifting.offset(at: at("2030-01-01T00:00:00Z")) == -14_400)
        // A zone the directory lacks comes from Foundation.
        let paris = try #require(Zone(identifier: "Europe/Paris", database: database))
        #expect(paris.offset(at: at("2030-07-01T00:00:00Z")) == 7200)
        #expect(database.sources["Europe/Paris"] == .foundation)
        #expect(database.sources["America/Asuncion"] == .file(directory + "/America/Asuncion"))
        #expect(Zone(identifier: "Test/Shifting", database: database) == nil)

        // Nothing changed: a reload reports nothing.
        #expect(database.reload(["America/Asuncion", "Europe/Paris"]).changes.isEmpty)
        // New rules on disk: only a reload sees them; a zone not read yet is looked up as on first use.
        try ZicOutput.install(ZicOutput.shifting(offset: "-3:00"), into: directory)
        #expect(Zone(identifier: "America/Asuncion", database: database)?.rulesFingerprint == shifting.rulesFingerprint)
        let reload = database.reload(["America/Asuncion", "Europe/Paris", "Asia/Tokyo"])
        #expect(reload.changes.map(\.identifier) == ["America/Asuncion"])
        #expect(reload.changes.first?.oldFingerprint == shifting.rulesFingerprint)
        #expect(reload.current["America/Asuncion"] == reload.changes.first?.newFingerprint)
        #expect(reload.current["Europe/Paris"] == paris.rulesFingerprint)
        let moved = try #require(Zone(identifier: "America/Asuncion", database: database))
        #expect(moved.rulesFingerprint == reload.changes.first?.newFingerprint)
        #expect(moved.offset(at: at("2030-07-01T00:00:00Z")) == -10_800)
        // The zone made before keeps its rules.
        #expect(shifting.offset(at: at("2030-07-01T00:00:00Z")) == -14_400)
        #expect(database.sources["Asia/Tokyo"] == .foundation)
        #expect(reload.current["Asia/Tokyo"] == Zone(identifier: "Asia/Tokyo", database: database)?.rulesFingerprint)

        // A file that became corrupt keeps the rules there were, and says why.
        try Data("TZif2 broken".utf8).write(to: URL(fileURLWithPath: directory + "/America/Asuncion"))
        let broken = database.reload(["America/Asuncion"])
        #expect(broken.changes.isEmpty)
        #expect(broken.failures["America/Asuncion"]?.code == .truncated)
        #expect(Zone(identifier: "America/Asuncion", database: database)?.rulesFingerprint == moved.rulesFingerprint)
    }
}

extension TZifTests {
    /// A FIFO named like a zone in the directory (or any file that is not a regular one) is refused
    /// at once: opening it to read would wait for a writer, and the zone is looked up on the worker's
    /// loop. The zone comes from Foundation instead, and a reload says why.
    @Test func aFIFONamedLikeAZoneIsRefusedWithoutWaiting() throws {
        let scratch = try TemporaryDirectory(prefix: "chime-fifo")
        try FileManager.default.createDirectory(atPath: scratch.appending("America"), withIntermediateDirectories: true)
        let fifo = scratch.appending("America/Asuncion")
        #expect(mkfifo(fifo, 0o644) == 0)
        let database = ZoneDatabase(directories: [scratch.path])

        let zone = try Self.returning(unblocking: fifo) { Zone(identifier: "America/Asuncion", database: database) }
        #expect((zone ?? nil) != nil)
        #expect(database.sources["America/Asuncion"] == .foundation)
        let reload = try Self.returning(unblocking: fifo) { database.reload(["America/Asuncion"]) }
        #expect(reload?.failures["America/Asuncion"]?.code == .unreadable)
        #expect(reload?.failures["America/Asuncion"]?.message.contains("not a regular file") == true)
        let read = try Self.returning(unblocking: fifo) {
            Result { () throws(ZoneDataError) in try ZoneDatabase.readFile(fifo) }
        }
        #expect(throws: ZoneDataError(.unreadable, "")) { try read?.get() }
    }

    /// Links, as tzdata installs some zones (`posixrules`, `US/Eastern` on some systems), are
    /// followed; a directory named like a zone is no zone.
    @Test func symbolicLinksAreFollowedAndDirectoriesAreNoZone() throws {
        let directory = try ZicOutput.directory(ZicOutput.shifting(offset: "-4:00"))
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/Europe", withIntermediateDirectories: true)
        #expect(symlink("../America/Asuncion", directory + "/Europe/Lisbon") == 0)
        try FileManager.default.createDirectory(atPath: directory + "/Asia/Tokyo", withIntermediateDirectories: true)
        let database = ZoneDatabase(directories: [directory])
        let linked = try #require(Zone(identifier: "Europe/Lisbon", database: database))
        #expect(linked.offset(at: at("2030-07-01T00:00:00Z")) == -14_400)
        #expect(try ZoneDatabase.readFile(directory + "/Asia/Tokyo") == nil)
        #expect(Zone(identifier: "Asia/Tokyo", database: database) != nil)
        #expect(database.sources["Asia/Tokyo"] == .foundation)
    }

    /// Runs `body` on a thread of its own and returns what it returned. A body that has not
    /// returned within a minute is taken as blocked opening or reading the FIFO at `fifo`: the test
    /// fails, and a writer is opened and closed on the FIFO until the body returns, so that the
    /// test ends whatever the code under test does.
    static func returning<T: Sendable>(unblocking fifo: String, _ body: @escaping @Sendable () -> T) throws -> T? {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        guard done.wait(timeout: .now() + 60) == .timedOut else { return result.withLock { $0 } }
        Issue.record("reading \(fifo) did not return: it waits for a writer")
        while done.wait(timeout: .now() + 0.1) == .timedOut {
            let writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
        }
        return nil
    }
}

/// Zone source text compiled with the machine's zic.
enum ZicOutput {
    static func shifting(offset: String, dst: Bool = false, name: String = "America/Asuncion") -> String {
        ZoneCompiler.shifting(offset: offset, dst: dst, name: name)
    }

    static func zic(_ source: String, into directory: String, slim: Bool = true) throws {
        try ZoneCompiler.compile(source, into: directory, slim: slim)
    }

    /// A new temporary directory with the zones of `source`.
    static func directory(_ source: String) throws -> String {
        let directory = NSTemporaryDirectory() + "chime-zic-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try zic(source, into: directory)
        return directory
    }

    /// Compiles `source` into `directory` as a tzdata upgrade does: each file replaced by a rename.
    static func install(_ source: String, into directory: String) throws {
        try ZoneCompiler.install(source, into: directory)
    }

    static func compileBytes(_ source: String, zone: String, slim: Bool = true) throws -> [UInt8] {
        let directory = NSTemporaryDirectory() + "chime-zic-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try zic(source, into: directory, slim: slim)
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: directory + "/" + zone)))
    }

    static func compile(_ source: String, zone: String, slim: Bool = true) throws -> TZifFile {
        try TZifFile(bytes: try compileBytes(source, zone: zone, slim: slim))
    }

    /// The lines of a compact tzdata source (`tzdata.zi`) for one zone: its `Z` line and continuations,
    /// and every `R` line (rules are few; zic ignores those unused).
    static func extract(_ zone: String, from source: String) -> String {
        var out: [Substring] = []
        var inZone = false
        for line in source.split(separator: "\n") {
            if line.hasPrefix("R ") {
                out.append(line)
                inZone = false
            } else if line.hasPrefix("Z ") {
                inZone = line.split(separator: " ")[1] == zone
                if inZone { out.append(line) }
            } else if line.hasPrefix("L ") {
                inZone = false
            } else if inZone {
                out.append(line)
            }
        }
        return out.joined(separator: "\n") + "\n"
    }

    /// Where the second (64-bit) header starts in a version 2+ file.
    static func secondHeader(_ bytes: [UInt8]) -> Int? {
        guard bytes.count > 44 else { return nil }
        func count(_ i: Int) -> Int { bytes[20 + 4 * i..<24 + 4 * i].reduce(0) { $0 << 8 | Int($1) } }
        let (isut, isstd, leap, time, type, char) = (count(0), count(1), count(2), count(3), count(4), count(5))
        let start = 44 + time * 5 + type * 6 + char + leap * 8 + isstd + isut
        return start + 44 <= bytes.count ? start : nil
    }
}
