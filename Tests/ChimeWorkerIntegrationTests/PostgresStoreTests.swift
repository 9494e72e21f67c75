import ChimeCore
import ChimePostgres
import ChimeTestSupport
import Foundation
import Testing

/// `chimed --store postgres://...` against a real PostgreSQL (TestPostgres: initdb, run as the
/// postgres user) and a real mosquitto: what is acknowledged is in the database, recovery reads it
/// back, and a database that goes away stops commands but neither deliveries nor the worker.
@Suite(.serialized) struct PostgresStoreTests {
    static func start() async throws -> (TestPostgres, WorkerFixture) {
        let fixture = try await WorkerFixture.start(store: .postgres)
        return (try #require(fixture.postgres), fixture)
    }

    static func ids(_ f: WorkerFixture, _ device: String) async throws -> [String] {
        try await f.list(device).compactMap { $0["id"]?.stringValue }
    }

    @Test func whatIsAcknowledgedIsInTheDatabaseAndSurvivesKillsAndSnapshots() async throws {
        let (postgres, f) = try await Self.start()
        defer {
            Task {
                await f.stop(); await postgres.stop()
            }
        }
        try await f.subscribeDeliveries("d1")
        try await f.ok("d1", .device, #"{"timeZone":"Europe/Paris","receipts":true}"#)
        try await f.ok("d1", .schedule, #"{"id":"later","fireDate":"2099-01-01T09:00:00","repeatInterval":"day"}"#)
        try await f.ok("d1", .schedule, #"{"id":"soon","after":1,"alertBody":"now"}"#)
        _ = await f.waitForDeliveries("d1", count: 1, timeout: .seconds(20))
        // The delivery record is committed after the broker's PUBACK: wait until the inbox has it.
        #expect(await eventually { (try? await f.ok("d1", .inbox, "{}"))?["deliveries"]?.arrayValue?.count == 1 })

        // The records are rows of chime_journal.
        let sql = try PostgresConnection(postgres.uri)
        defer { sql.close() }
        let journalRows = try sql.execute("SELECT count(*)::text FROM chime_journal").rows.first?.text(0)
        #expect(Int(journalRows ?? "") ?? 0 >= 4, "\(journalRows ?? "none")")

        await f.killWorker()
        try await f.startWorker()
        #expect(try await Self.ids(f, "d1") == ["later"])
        #expect(try await f.ok("d1", .inbox, "{}")["deliveries"]?.arrayValue?.count == 1)
        #expect(try await f.ok("d1", .device, "{}")["timeZone"] == "Europe/Paris")

        // A snapshot goes into the database and trims the journal before it.
        f.worker?.process.signal(SIGUSR1)
        let written = await f.worker?.process.waitForLine(onStandardError: true, timeout: .seconds(20)) {
            $0.contains("snapshot written")
        }
        #expect(written != nil, "\(f.worker?.log ?? "")")
        let snapshots = try sql.execute("SELECT count(*)::text FROM chime_snapshot").rows.first?.text(0)
        #expect(snapshots == "1")
        try await f.ok("d1", .update, #"{"id":"later","alertBody":"after the snapshot"}"#)
        await f.killWorker()
        try await f.startWorker()
        let rows = try await f.list("d1")
        #expect(rows.map { $0["id"] } == ["later"])
        #expect(rows.first?["alertBody"] == "after the snapshot")
        #expect(try await f.ok("d1", .inbox, "{}")["deliveries"]?.arrayValue?.count == 1)

        // The machine is lost: a fresh chimed elsewhere, with an empty data directory and a worker
        // id of its own, continues from the database.
        await f.killWorker()
        let elsewhere = try TemporaryDirectory(prefix: "chime-elsewhere")
        let other = try Chimed(
            broker: f.broker,
            dataDirectory: elsewhere.path,
            workerId: "another-host",
            extra: ["--store", postgres.uri]
        )
        try await other.start()
        defer { other.process.kill() }
        #expect(try await f.list("d1").map { $0["alertBody"] } == ["after the snapshot"])
        #expect(try await f.ok("d1", .device, "{}")["timeZone"] == "Europe/Paris")
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
    }

    @Test func aDatabaseThatGoesAwayStopsCommandsButNotDeliveriesAndIsCaughtUp() async throws {
        let (postgres, f) = try await Self.start()
        defer {
            Task {
                await f.stop(); await postgres.stop()
            }
        }
        try await f.subscribeDeliveries("d1")
        try await f.ok("d1", .schedule, #"{"id":"kept","fireDate":"2099-01-01T09:00:00Z"}"#)
        try await f.ok("d1", .schedule, #"{"id":"due","after":6,"alertBody":"while the database is down"}"#)

        await postgres.kill()
        // A command now: its commit fails. It gets no reply, or `unavailable` once the worker
        // knows; never ok.
        let first = try? await f.send("d1", .schedule, #"{"id":"lost","fireDate":"2099-02-01T09:00:00Z"}"#)
        #expect(first?["ok"] != true, "\(first.map { JSON.object($0).text } ?? "no reply")")
        let refused = try await f.send("d1", .schedule, #"{"id":"refused","fireDate":"2099-03-01T09:00:00Z"}"#)
        #expect(refused["error"]?.objectValue?["code"] == "unavailable", "\(JSON.object(refused).text)")
        // Reads and deliveries go on from memory.
        #expect(try await Self.ids(f, "d1").contains("kept"))
        let delivered = await f.waitForDeliveries("d1", count: 1, timeout: .seconds(20))
        #expect(delivered.map { $0["id"] } == ["due"])
        // chimed is still running.
        #expect(f.worker?.process.isRunning == true)

        // The database is back: a snapshot catches it up, and commands are taken again.
        try await postgres.restart()
        let caughtUp = await eventually(timeout: .seconds(30)) {
            (try? await f.ok("d1", .schedule, #"{"id":"after","fireDate":"2099-04-01T09:00:00Z","requestId":"a"}"#))
                != nil
        }
        #expect(caughtUp, "\(f.worker?.log ?? "")")
        // What memory held when it caught up is what the database holds: a restart shows it.
        let before = try await Self.ids(f, "d1")
        await f.killWorker()
        try await f.startWorker()
        #expect(try await Self.ids(f, "d1") == before)
        #expect(before.contains("after") && before.contains("kept") && !before.contains("refused"))
        #expect(!before.contains("due"))
    }

    /// A primary whose commits wait for a synchronous standby; the primary killed with -9 while
    /// commands flow and the standby promoted: every command chimed acknowledged is on the new
    /// primary, and chimed, whose URI lists both hosts with `target_session_attrs=read-write`,
    /// serves again on it without a restart.
    @Test func aPromotedSynchronousStandbyHasEverythingAcknowledged() async throws {
        let primary = try await TestPostgres.start(.init(settings: ["synchronous_standby_names": "*"]))
        let standby = try await TestPostgres.startStandby(of: primary)
        defer {
            Task {
                await primary.stop(); await standby.stop()
            }
        }
        let uri =
            "postgresql://postgres@\(primary.host):\(primary.port),\(standby.host):\(standby.port)/postgres"
            + "?target_session_attrs=read-write"
        let f = try await WorkerFixture.start(extra: ["--store", uri])
        defer { Task { await f.stop() } }

        let acknowledged = Shared<[String]>([])
        let traffic = Task {
            var n = 0
            while !Task.isCancelled {
                n += 1
                let id = "n\(n)"
                let reply = try? await f.send(
                    "d1",
                    .schedule,
                    #"{"id":"\#(id)","fireDate":"2099-01-01T09:00:00Z","requestId":"\#(id)"}"#,
                    timeout: .seconds(3)
                )
                if reply?["ok"] == true { acknowledged.withLock { $0.append(id) } }
                try? await Task.sleep(for: .milliseconds(30))
            }
        }
        _ = await eventually(timeout: .seconds(20)) { acknowledged.value.count >= 30 }
        // The standby is synchronous: the primary's commits wait for it.
        let sql = try PostgresConnection(primary.uri)
        let state = try sql.execute("SELECT sync_state FROM pg_stat_replication").rows.first?.text(0)
        sql.close()
        #expect(state == "sync")
        await primary.kill()
        let atKill = acknowledged.value.count
        try await standby.promote()
        // chimed catches the new primary up and takes commands again.
        let serving = await eventually(timeout: .seconds(40)) { acknowledged.value.count >= atKill + 20 }
        traffic.cancel()
        _ = await traffic.value
        #expect(serving, "\(f.worker?.log.suffix(3000) ?? "")")
        #expect(f.worker?.process.isRunning == true)

        // Every acknowledged command, on the promoted standby after a restart of chimed.
        await f.killWorker()
        try await f.startWorker()
        let listed = Set(try await Self.ids(f, "d1"))
        let missing = acknowledged.value.filter { !listed.contains($0) }
        #expect(missing.isEmpty, "acknowledged but not on the new primary: \(missing)")
        #expect(acknowledged.value.count > atKill)
        print("failover: \(atKill) commands acknowledged before the kill, \(acknowledged.value.count) in all")
    }

    /// One writer per database, as one worker per data directory: a second chimed on a database one
    /// holds waits for the journal's lock, exits with the reason, and changes nothing.
    @Test func aSecondChimedOnTheSameDatabaseExitsWithTheReason() async throws {
        let (postgres, f) = try await Self.start()
        defer { Task { await f.stop() } }
        try await f.ok("d1", .schedule, #"{"id":"kept","after":3600}"#)
        let elsewhere = try TemporaryDirectory(prefix: "chime-second")
        let second = try Chimed(
            broker: f.broker,
            dataDirectory: elsewhere.path,
            workerId: "second",
            extra: ["--store", postgres.uri]
        )
        try second.process.start()
        let status = await second.process.waitForExit(timeout: .seconds(30))
        #expect(status == .exited(1), "\(second.log)")
        #expect(second.log.contains("is another chimed using this database"), "\(second.log)")
        // The first goes on, untouched.
        #expect(try await Self.ids(f, "d1") == ["kept"])
        try await f.ok("d1", .schedule, #"{"id":"more","after":3600}"#)
        #expect(try await Self.ids(f, "d1").sorted() == ["kept", "more"])
    }

    /// The slot flags at and past their bounds, and with what they exclude: a usage error (exit 2)
    /// that names the flag, before anything is opened.
    @Test(arguments: [
        (["--slots", "64"], "--slots needs --store postgres://"),
        (["--store", "postgres://127.0.0.1:1/x", "--slots", "64", "--partition", "0/2"], "exclude each other"),
        (["--store", "postgres://127.0.0.1:1/x", "--slots", "65537"], "--slots must be an integer from 0 to 65536"),
        (["--store", "postgres://127.0.0.1:1/x", "--slots", "-1"], "--slots must be an integer from 0 to 65536"),
        (
            ["--store", "postgres://127.0.0.1:1/x", "--slots", "8", "--lease-ttl", "1"],
            "--lease-ttl must be an integer from 2 to 300"
        ),
        (
            ["--store", "postgres://127.0.0.1:1/x", "--slots", "8", "--lease-ttl", "301"],
            "--lease-ttl must be an integer from 2 to 300"
        ),
    ])
    func slotFlagsOutOfBoundsAreUsageErrors(flags: [String], words: String) async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.stop() } }
        let data = try TemporaryDirectory(prefix: "chime-slot-flags")
        let chimed = try Chimed(broker: broker, dataDirectory: data.path, workerId: "w", extra: flags)
        try chimed.process.start()
        #expect(await chimed.process.waitForExit(timeout: .seconds(10)) == .exited(2), "\(chimed.log)")
        #expect(chimed.log.contains(words), "\(chimed.log)")
    }

    @Test func aStoreThatIsNotPostgreSQLIsAUsageError() async throws {
        let broker = try await TestBroker.start()
        defer { Task { await broker.stop() } }
        let data = try TemporaryDirectory(prefix: "chime-store")
        let chimed = try Chimed(
            broker: broker,
            dataDirectory: data.path,
            workerId: "w",
            extra: ["--store", "mysql://x"]
        )
        try chimed.process.start()
        let status = await chimed.process.waitForExit(timeout: .seconds(10))
        #expect(status == .exited(2), "\(chimed.log)")
        #expect(chimed.log.contains("--store: expected a PostgreSQL connection URI"))
    }
}
