import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// chimed restarted on a zone directory that lacks a zone its journal names (PROTOCOL.md section
/// 6): one without it, one with a FIFO in its place, one with no zone files at all, each with
/// smaller limits. It starts every time, lists every notification, reads the missing zone in UTC and
/// says so; `chime journal verify` reads the directory too. Installing the zone and a SIGHUP
/// resolve it.
///
/// `America/Atlantis` is a zone the test compiles (zic) into the first directory only.
@Suite struct ZoneDirectoryRestartTests {
    static let zone = "America/Atlantis"
    static let device = "atl"

    /// Each notification's `nextFireDate`.
    static func nextFires(_ f: WorkerFixture) async throws -> [String: String] {
        var out: [String: String] = [:]
        for row in try await f.list(device) {
            if let id = row["id"]?.stringValue { out[id] = row["nextFireDate"]?.stringValue ?? "none" }
        }
        return out
    }

    /// `chime journal verify` on the data directory, zones from `zoneinfo` only (`TZDIR`).
    static func verify(_ f: WorkerFixture, zoneinfo: String) async throws -> ChildProcess.Termination? {
        let verify = try ChildProcess(
            try builtProduct("chime"),
            arguments: ["journal", "verify", f.data.path],
            environment: ["TZDIR": zoneinfo]
        )
        try verify.start()
        let ended = await verify.waitForExit(timeout: .seconds(60))
        if ended == nil { verify.kill() }
        return ended
    }

    @Test func chimedStartsWhateverItsZoneDirectoryLacks() async throws {
        let scratch = try TemporaryDirectory(prefix: "chime-zonedirs")
        let full = scratch.appending("full")
        let without = scratch.appending("without")
        let fifo = scratch.appending("fifo")
        let empty = scratch.appending("empty")
        for directory in [full, without, fifo, empty] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        try ZoneCompiler.compile("Zone \(Self.zone) -2:30 - %z\n", into: full)
        try ZoneCompiler.compile(ZoneCompiler.shifting(offset: "-4:00"), into: without)
        try FileManager.default.createDirectory(atPath: fifo + "/America", withIntermediateDirectories: true)
        #expect(mkfifo(fifo + "/" + Self.zone, 0o644) == 0)

        let f = try await WorkerFixture.start(
            extra: ["--zoneinfo-check", "0"],
            environment: ["CHIME_ZONEINFO": full]
        )
        defer { Task { await f.stop() } }
        try await f.ok(Self.device, .device, #"{"timeZone":"\#(Self.zone)"}"#)
        try await f.ok(
            Self.device,
            .schedule,
            #"{"id":"own","fireDate":"2030-07-01T09:00","timeZone":"\#(Self.zone)"}"#
        )
        try await f.ok(
            Self.device,
            .schedule,
            #"{"id":"follows","fireDate":"2030-07-01T09:00","repeatInterval":"day"}"#
        )
        // More than the 1024 bytes a device may hold after the restarts.
        let body = String(repeating: "x", count: 1500)
        try await f.ok(
            Self.device,
            .schedule,
            #"{"id":"paris","fireDate":"2030-07-01T09:00","timeZone":"Europe/Paris","alertBody":"\#(body)"}"#
        )
        try await f.ok(Self.device, .schedule, #"{"id":"absolute","fireDate":"2030-07-01T09:00:00Z"}"#)
        let atlantis = [
            "own": "2030-07-01T11:30:00Z", "follows": "2030-07-01T11:30:00Z", "paris": "2030-07-01T07:00:00Z",
            "absolute": "2030-07-01T09:00:00Z",
        ]
        #expect(try await Self.nextFires(f) == atlantis)
        var inUTC = atlantis
        inUTC["own"] = "2030-07-01T09:00:00Z"
        inUTC["follows"] = "2030-07-01T09:00:00Z"

        for directory in [without, fifo, empty] {
            #expect(await f.stopWorker() == .exited(0))
            #expect(try await Self.verify(f, zoneinfo: directory) == .exited(0), "\(directory)")
            try await f.startWorker(environment: [
                "CHIME_ZONEINFO": directory, "CHIME_MAX_PENDING_PER_DEVICE": "1", "CHIME_MAX_BYTES_PER_DEVICE": "1024",
            ])
            #expect(try await Self.nextFires(f) == inUTC, "\(directory)")
            let status = try await f.ok(Self.device, .device, "{}")
            #expect(status["timeZone"] == .string(Self.zone))
            #expect(status["pending"] == 4)
            let log = f.worker?.log ?? ""
            #expect(log.contains("zone not in the zone database"), "\(log)")
            #expect(log.contains("zone=\(Self.zone) device=\(Self.device) devices=1 notifications=2"), "\(log)")
        }

        // The zone installed where the FIFO was, then a SIGHUP: read with its rules again.
        #expect(await f.stopWorker() == .exited(0))
        try await f.startWorker(environment: ["CHIME_ZONEINFO": fifo])
        #expect(try await Self.nextFires(f) == inUTC)
        try FileManager.default.removeItem(atPath: fifo + "/" + Self.zone)
        try ZoneCompiler.install("Zone \(Self.zone) -2:30 - %z\n", into: fifo)
        f.worker?.process.signal(SIGHUP)
        #expect(
            await f.worker?.process.waitForLine(onStandardError: true, timeout: .seconds(20)) {
                $0.contains("zone found in the zone database")
            } != nil
        )
        #expect(try await Self.nextFires(f) == atlantis)
    }
}
