import ChimeCore
import ChimeJournal
import ChimeTestSupport
import Foundation
import Testing

@testable import ChimeCLI

/// `watch`, `status` and `journal` against a real chimed and the data directory it wrote.
@Suite(.serialized) struct WatchStatusJournalTests {
    @Test func watchPrintsADeliveryLineAndExitsZeroOnSIGTERM() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        // Times in the device's zone, as list and history show them, unless --tz names another.
        try await w.ok("device", "--device", "phone-1", "--tz", "Europe/Paris")
        let watch = try w.spawn("watch", "--device", "phone-1", "--tz", "Asia/Shanghai")
        let inDeviceZone = try w.spawn("watch", "--device", "phone-1")
        let everything = try w.spawn("watch", "--all", "--json")
        defer {
            watch.kill()
            inDeviceZone.kill()
            everything.kill()
        }
        for process in [watch, inDeviceZone, everything] {
            let ready = await process.waitForLine(onStandardError: true, timeout: .seconds(20)) {
                $0.hasPrefix("watching ")
            }
            #expect(ready != nil, "\(process.standardErrorLines)")
        }
        try await w.ok(
            "schedule",
            "--device",
            "phone-1",
            "--id",
            "quick",
            "--in",
            "1s",
            "--title",
            "Hi",
            "--body",
            "Hello there",
            "--badge",
            "+1"
        )
        try await w.ok("schedule", "--device", "other", "--id", "elsewhere", "--in", "1s", "--body", "Not for phone-1")

        let line = await watch.waitForLine(timeout: .seconds(20)) { $0.contains("quick") }
        let shown = try #require(line, "\(watch.standardOutputLines) \(watch.standardErrorLines)")
        // `2026-11-30 07:28:21 CST (2026-11-29 23:28:21Z)  phone-1  quick  #1  badge 1  Hi: Hello there`
        let fields = shown.components(separatedBy: "  ")
        #expect(fields.count == 6, "\(shown)")
        #expect(fields.first?.contains(" CST (") == true && fields.first?.hasSuffix("Z)") == true, "\(shown)")
        #expect(Array(fields.dropFirst()) == ["phone-1", "quick", "#1", "badge 1", "Hi: Hello there"], "\(shown)")
        let local = await inDeviceZone.waitForLine(timeout: .seconds(20)) { $0.contains("quick") }
        let paris = try #require(local, "\(inDeviceZone.standardOutputLines) \(inDeviceZone.standardErrorLines)")
        let when = paris.components(separatedBy: "  ").first ?? ""
        #expect(when.contains(" CET (") || when.contains(" CEST ("), "\(paris)")

        let json = await everything.waitForLine(timeout: .seconds(20)) { $0.contains("elsewhere") }
        #expect(json != nil)
        let both = everything.standardOutputLines.compactMap { (try? JSON(parsing: $0))?.objectValue }
        #expect(Set(both.compactMap { $0["id"]?.stringValue }) == ["quick", "elsewhere"])
        #expect(both.first { $0["id"] == "quick" }?["alertBody"] == "Hello there")
        // The device's watch saw only its own.
        #expect(!watch.standardOutputLines.contains { $0.contains("elsewhere") })

        watch.terminate()
        inDeviceZone.terminate()
        everything.signal(SIGINT)
        #expect(await watch.waitForExit(timeout: .seconds(10)) == .exited(0))
        #expect(await everything.waitForExit(timeout: .seconds(10)) == .exited(0))
    }

    @Test func statusShowsWorkersAndTheProbeFollowsPartitions() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        try await w.ok("schedule", "--device", "d1", "--in", "1h")

        // By default two samples, so rates; every stat chimed sends on the line of its kind.
        let status = try await w.ok("status")
        let head = try #require(status.out.first, "\(status)")
        #expect(head.hasPrefix("worker \(w.workerId)  online  partition 0/1  pid "), "\(status)")
        #expect(status.out.contains { $0.hasPrefix("  counts    pending 1  devices 1  inflight 0") }, "\(status)")
        #expect(status.out.contains { $0.hasPrefix("  totals    deliveries 0  lateDeliveries 0") }, "\(status)")
        #expect(status.out.contains { $0.hasPrefix("  broker    reconnects ") }, "\(status)")
        #expect(status.out.contains { $0.hasPrefix("  commands  ") && $0.contains("schedule 1") }, "\(status)")
        for line in ["  lateness  count ", "  fsync     count ", "  journal   sequence ", "  rates     commands "] {
            #expect(status.out.contains { $0.hasPrefix(line) }, "\(line): \(status)")
        }
        #expect(
            !status.out.contains { $0.hasPrefix("  other") },
            "chime status does not know a stat chimed sends: \(status)"
        )
        #expect(status.out.last?.hasSuffix(", 2 samples") == true, "\(status)")
        #expect(status.err.isEmpty, "\(status)")
        // --samples N waits for N.
        let three = try await w.ok("status", "--samples", "3")
        #expect(three.out.last?.hasSuffix(", 3 samples") == true, "\(three)")
        // Or says why it did not get them: one stats message a second does not fit three in 0.9 s.
        let short = try await w.ok("status", "--samples", "3", "--timeout", "300ms")
        #expect(
            short.err.first?.hasPrefix("chime status: worker \(w.workerId): ") == true
                && short.err.first?.contains(" of 3 stats messages within ") == true,
            "\(short)"
        )
        let json = try await w.ok("status", "--json")
        let mine = try #require(json.jsonLines.first { $0["workerId"] == .string(w.workerId) }, "\(json)")
        #expect(mine["status"]?.objectValue?["state"] == "online")
        #expect(mine["stats"]?.objectValue?["pending"] == 1, "\(json)")
        #expect(mine["samples"] == 2, "\(json)")
        #expect(mine["rates"]?.objectValue?["commands"] != nil, "\(json)")

        // Readiness: this worker, yes; one never seen, no.
        let ready = try await w.ok("status", "--worker", w.workerId)
        #expect(ready.stdout.hasPrefix("ready: worker \(w.workerId) is online (partition 0/1)"), "\(ready)")
        let unknown = try await w.chime("status", "--worker", "nobody", "--timeout", "1s")
        #expect(unknown.status == 1, "\(unknown)")

        // A worker serving partition 1/3 answers only for its devices: the probe must pick one of them.
        // The first worker (0/1, every device) is stopped so that it cannot answer in its place.
        let data = try TemporaryDirectory(prefix: "chime-cli-part")
        let partitioned = try Chimed(
            broker: w.broker,
            dataDirectory: data.path,
            workerId: "part-1",
            extra: ["--partition", "1/3"]
        )
        try await partitioned.start()
        defer { partitioned.process.kill() }
        await w.stopWorker()
        let probed = try await w.ok("status", "--worker", "part-1")
        let device = try #require(probed.stdout.split(separator: " ").dropLast(3).last.map(String.init), "\(probed)")
        #expect(Partition(index: 1, count: 3).owns(device), "\(probed)")

        // Once stopped, the retained status says offline: not ready.
        let stopped = try await w.chime("status", "--worker", w.workerId, "--timeout", "2s")
        #expect(stopped.status == 1, "\(stopped)")
        #expect(stopped.stderr.contains("not ready: worker \(w.workerId) is offline"), "\(stopped)")
        partitioned.process.terminate()
        await partitioned.process.waitForExit(timeout: .seconds(20))
        let noneOnline = try await w.chime("status", "--timeout", "2s")
        #expect(noneOnline.status == 1, "\(noneOnline)")
        #expect(noneOnline.out.contains { $0.hasPrefix("worker part-1  offline  partition 1/3") }, "\(noneOnline)")
    }

    @Test func journalExportToPostgreSQLAndImportBackReadTheSameState() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        try await w.ok("device", "--device", "d1", "--tz", "Europe/Paris", "--receipts", "on")
        for id in ["a", "b", "c"] {
            try await w.ok("schedule", "--device", "d1", "--id", id, "--in", "1h", "--info", "k=\(id)")
        }
        try await w.ok("cancel", "--device", "d1", "--id", "b")
        let before = try await w.ok("list", "--device", "d1", "--json").jsonLines
        await w.stopWorker()

        let postgres = try await TestPostgres.start()
        defer { Task { await postgres.stop() } }
        let exported = try await w.ok("journal", "export", w.data.path, "--to", postgres.uri)
        #expect(exported.stdout.contains("2 notifications on 1 devices"), "\(exported)")
        // Only into an empty database: never over another worker's state.
        let again = try await w.chime("journal", "export", w.data.path, "--to", postgres.uri)
        #expect(again.status == 1, "\(again)")
        #expect(again.stderr.contains("already holds a journal"), "\(again)")
        let verified = try await w.ok("journal", "verify", postgres.uri)
        #expect(verified.out.last == "ok: chimed --store can start from it", "\(verified)")

        // A chimed on the database serves the same notifications.
        let onPostgres = try Chimed(
            broker: w.broker,
            dataDirectory: w.data.path,
            workerId: w.workerId,
            extra: ["--store", postgres.uri]
        )
        try await onPostgres.start()
        let listed = try await w.ok("list", "--device", "d1", "--json").jsonLines
        #expect(listed.map { $0["id"] } == before.map { $0["id"] })
        #expect(listed.map { $0["userInfo"] } == before.map { $0["userInfo"] })
        try await w.ok("schedule", "--device", "d1", "--id", "d", "--in", "2h")
        onPostgres.process.terminate()
        await onPostgres.process.waitForExit(timeout: .seconds(20))

        // And back into a new data directory, with what was added on PostgreSQL.
        let back = try TemporaryDirectory(prefix: "chime-import")
        let imported = try await w.ok("journal", "import", postgres.uri, "--to", back.appending("data"))
        #expect(imported.stdout.contains("3 notifications on 1 devices"), "\(imported)")
        let local = try await w.ok("journal", "verify", back.appending("data"))
        #expect(local.out.last == "ok", "\(local)")
        // Never into a directory that holds something.
        let refused = try await w.chime("journal", "import", postgres.uri, "--to", w.data.path)
        #expect(refused.status == 1, "\(refused)")

        let usage = try await w.chime("journal", "export", w.data.path)
        #expect(usage.status == 2, "\(usage)")
        let wrongWay = try await w.chime("journal", "export", w.data.path, "--to", back.path)
        #expect(wrongWay.status == 2, "\(wrongWay)")
    }

    @Test func journalVerifyDumpAndRepairOnADirectoryChimedWrote() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        try await w.ok("device", "--device", "d1", "--tz", "Europe/Paris")
        for id in ["a", "b", "c"] { try await w.ok("schedule", "--device", "d1", "--id", id, "--in", "1h") }
        try await w.ok("cancel", "--device", "d1", "--id", "b")

        // Beside the running worker: verify reads, repair refuses.
        let live = try await w.ok("journal", "verify", w.data.path)
        #expect(live.out.last == "ok", "\(live)")
        let refused = try await w.chime("journal", "repair", w.data.path)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("in use by a running chimed"), "\(refused)")

        await w.stopWorker()
        let verified = try await w.ok("journal", "verify", w.data.path)
        #expect(verified.out.first?.hasPrefix("segments: 1, records: 5, sequences 1...5") == true, "\(verified)")
        let dump = try await w.ok("journal", "dump", w.data.path)
        let records = dump.jsonLines
        #expect(records.compactMap { $0["seq"] } == [1, 2, 3, 4, 5], "\(dump)")
        #expect(
            records.compactMap { $0["type"]?.stringValue } == ["device", "schedule", "schedule", "schedule", "cancel"]
        )
        #expect(records.allSatisfy { $0["entry"]?.objectValue?["device"] == "d1" }, "\(dump)")
        #expect(records.last?["entry"]?.objectValue?["ids"] == ["b"])

        // A copy with a flipped byte in the first record: damage that is not a torn tail.
        let copy = try TemporaryDirectory(prefix: "chime-cli-corrupt")
        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: w.data.path).first { $0.hasPrefix("journal-") }
        )
        var bytes = try Data(contentsOf: URL(fileURLWithPath: w.data.appending(segment)))
        bytes[24 + 20] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: copy.appending(segment)))
        let damaged = try await w.chime("journal", "verify", copy.path)
        #expect(damaged.status == 1, "\(damaged)")
        #expect(damaged.out.last?.hasPrefix("PROBLEM: \(segment): offset 24") == true, "\(damaged)")
        let partial = try await w.chime("journal", "dump", copy.path)
        #expect(partial.status == 1, "\(partial)")

        let repaired = try await w.ok("journal", "repair", copy.path)
        #expect(repaired.out.contains { $0.hasPrefix("truncated \(segment) at offset 24") }, "\(repaired)")
        #expect(repaired.out.contains { $0.hasPrefix("backup: \(copy.path)/backup-") }, "\(repaired)")
        #expect(repaired.out.last == "ok", "\(repaired)")
        try await w.ok("journal", "verify", copy.path)
    }

    @Test func journalRepartitionSplitsADirectoryByTheNewPartitions() async throws {
        let w = try await CLIWorld.start()
        defer { Task { await w.stop() } }
        let devices = (0..<8).map { "dev\($0)" }
        for device in devices { try await w.ok("schedule", "--device", device, "--id", "n", "--in", "1h") }
        await w.stopWorker()

        let usage = try await w.chime("journal", "repartition", "--partitions", "2", "--from", w.data.path, "--to", "x")
        #expect(usage.status == 2, "\(usage)")
        let outputs = try (0..<2).map { _ in try TemporaryDirectory(prefix: "chime-cli-part") }
        let run = try await w.ok(
            "journal",
            "repartition",
            "--partitions",
            "2",
            "--from",
            w.data.path,
            "--to",
            outputs[0].path,
            "--to",
            outputs[1].path
        )
        #expect(run.out.contains { $0.hasPrefix("read  \(w.data.path): 8 devices, 8 notifications") }, "\(run)")
        for k in 0..<2 {
            let partition = Partition(index: UInt32(k), count: 2)
            let verified = try await w.ok("journal", "verify", outputs[k].path)
            #expect(verified.out.last == "ok", "\(verified)")
            // The output is a snapshot holding exactly the devices of partition k.
            let (journal, recovery) = try Journal.open(directory: outputs[k].path)
            try journal.close()
            let snapshot = try EngineSnapshot(entries: try #require(recovery.snapshot).loadEntries())
            #expect(Set(snapshot.deviceIds) == Set(devices.filter(partition.owns)), "output \(k)")
        }
    }
}
