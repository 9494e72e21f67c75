import ChimeCore
import ChimeJournal
import ChimeMQTT
import ChimePostgres
import ChimeSupport
import ChimeTestSupport
import Foundation
import Synchronization
import Testing

/// chimed killed with SIGKILL at random moments (also while it recovers) while a client keeps
/// scheduling and cancelling and notifications fall due, then started again:
/// - every ok-replied command is reflected after each restart: a scheduled id is listed until its
///   last occurrence is due, a cancelled id is gone;
/// - every occurrence that fell due was delivered at least once (deliveries collected by `fireId`
///   over all the restarts); for `misfire: coalesce` a delivery stands for the `missed` ones
///   before it, as PROTOCOL.md says.
///
/// `CHIME_KILLS` sets the number of kills (default 20; `make soak` runs 200) and
/// `CHIME_KILL_SEED` replays a run.
@Suite(.serialized) struct DurabilityKillTests {
    enum Kind: String, Sendable, CaseIterable {
        /// A one-shot due in 1 to 3 s.
        case once
        /// Every second, 3 to 5 times, `misfire: all`.
        case everyAll
        /// Every second, 3 to 5 times, `misfire: coalesce`.
        case everyCoalesce
        /// An hour ahead: listed until cancelled.
        case far
    }

    /// A schedule the worker answered ok.
    struct Scheduled: Sendable {
        var id: String
        var kind: Kind
        var count: Int
        /// `nextFireDate` of the reply: the first occurrence.
        var first: Instant
        /// The last occurrence.
        var last: Instant { first.adding(seconds: Int64(count - 1)) }
    }

    /// What the client was told.
    final class Model: Sendable {
        struct State {
            var scheduled: [String: Scheduled] = [:]
            var cancelled: Set<String> = []
            /// Cancels sent and not (yet) acknowledged: these ids may or may not be listed.
            var cancelling: Set<String> = []
            /// Far ids that are neither cancelled nor being cancelled: cancel candidates.
            var cancellable: [String] = []
            var sent = 0
            var unanswered = 0
        }

        let state = Mutex(State())
    }

    @Test(arguments: StoreKind.allCases)
    func killDashNineAtRandomMomentsLosesNothingAcknowledged(store: StoreKind) async throws {
        let environment = ProcessInfo.processInfo.environment
        let kills = max(1, environment["CHIME_KILLS"].flatMap(Int.init) ?? 20)
        let seed = environment["CHIME_KILL_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 0...UInt64.max)
        let context = "seed \(seed) (CHIME_KILL_SEED=\(seed) replays the choices)"
        // Small snapshots, so that kills also land in snapshot writes and compactions.
        let f = try await WorkerFixture.start(extra: ["--snapshot-bytes", "65536"], store: store)
        defer { Task { await f.stop() } }
        let device = "k1"
        try await f.subscribeDeliveries(device)

        let model = Model()
        let traffic = Task {
            var random = SplitMix64(seed: seed ^ 0x5EED)
            var serial = 0
            await withTaskGroup(of: Void.self) { group in
                while !Task.isCancelled {
                    serial += 1
                    let n = serial
                    let pick = random.next() % 10
                    let cancelTarget: String? =
                        pick < 2
                        ? model.state.withLock { s in
                            guard !s.cancellable.isEmpty else { return nil }
                            let id = s.cancellable.remove(at: Int(random.next() % UInt64(s.cancellable.count)))
                            s.cancelling.insert(id)
                            return id
                        } : nil
                    let kind: Kind = [.once, .once, .everyAll, .everyCoalesce, .far][Int(random.next() % 5)]
                    let count = kind == .once || kind == .far ? 1 : 3 + Int(random.next() % 3)
                    let after = 1 + Int(random.next() % 3)
                    group.addTask {
                        await Self.send(
                            f,
                            device,
                            n,
                            cancel: cancelTarget,
                            kind: kind,
                            count: count,
                            after: after,
                            model
                        )
                    }
                    try? await Task.sleep(for: .milliseconds(40 + Int(random.next() % 120)))
                }
            }
        }

        var random = SplitMix64(seed: seed)
        var killed = 0
        var snapshots = 0
        while killed < kills {
            if random.next() % 5 == 0 {
                // A kill while the worker recovers and connects.
                let early = try Chimed(
                    broker: f.broker,
                    dataDirectory: f.data.path,
                    workerId: f.workerId,
                    extra: f.extraArguments
                )
                try early.process.start()
                try await Task.sleep(for: .milliseconds(10 + Int(random.next() % 300)))
                early.process.kill()
                await early.process.waitForExit(timeout: .seconds(10))
            } else {
                try await Task.sleep(for: .milliseconds(200 + Int(random.next() % 1800)))
                if random.next() % 3 == 0 {
                    // A kill while a snapshot (SIGUSR1) is being written or has just been.
                    f.worker?.process.signal(SIGUSR1)
                    snapshots += 1
                    try await Task.sleep(for: .milliseconds(Int(random.next() % 40)))
                }
                await f.killWorker()
            }
            killed += 1
            try await f.startWorker()
            try await Self.checkListed(f, device, model, context: "after kill \(killed); \(context)")
        }

        // Let the traffic stop and everything acknowledged fall due, with the worker up.
        traffic.cancel()
        await traffic.value
        let (scheduled, cancelled, sent, unanswered) = model.state.withLock {
            ($0.scheduled, $0.cancelled, $0.sent, $0.unanswered)
        }
        try await Self.checkListed(f, device, model, context: "at the end; \(context)")
        let expected = scheduled.values.filter { $0.kind != .far }
        let covered = await eventually(timeout: .seconds(30), every: .milliseconds(200)) {
            Self.uncovered(expected, f.deliveries(device)).isEmpty
        }
        let missing = Self.uncovered(expected, f.deliveries(device))
        #expect(
            covered,
            "occurrences never delivered: \(missing.sorted()); \(context)\n\(f.worker?.log.suffix(3000) ?? "")"
        )
        // Nothing cancelled was delivered: cancelled ones were an hour ahead.
        let cancelledDeliveries = f.deliveries(device).filter { cancelled.contains($0["id"]?.stringValue ?? "") }
        #expect(cancelledDeliveries.isEmpty, "\(context)")
        #expect(f.worker?.process.isRunning == true)
        // Snapshots still work after all those kills (the kills may have interrupted every one
        // taken so far), and the directory reads back clean.
        f.worker?.process.signal(SIGUSR1)
        let written = await f.worker?.process.waitForLine(onStandardError: true, timeout: .seconds(30)) {
            $0.contains("snapshot written")
        }
        #expect(written != nil, "\(context)\n\(f.worker?.log.suffix(3000) ?? "")")
        switch store {
        case .directory:
            let files = try FileManager.default.contentsOfDirectory(atPath: f.data.path)
            #expect(files.contains { $0.hasPrefix("snapshot-") && $0.hasSuffix(".snap") }, "\(files); \(context)")
            let report = try JournalTools.verify(directory: f.data.path)
            #expect(report.isOpenable, "\(report); \(context)")
        case .postgres:
            let sql = try PostgresConnection(try #require(f.postgres).uri)
            defer { sql.close() }
            let snapshots = try sql.execute("SELECT count(*)::text FROM chime_snapshot").rows.first?.text(0)
            #expect(snapshots == "1", "\(context)")
        }
        print(
            "kill -9: \(killed) kills, \(sent) commands, \(scheduled.count) schedules and \(cancelled.count) cancels "
                + "acknowledged, \(unanswered) unanswered, \(f.deliveries(device).count) deliveries, \(snapshots) kills "
                + "around a SIGUSR1 snapshot; \(context)"
        )
    }

    /// Sends one schedule (or a cancel of `cancel`) and records what was acknowledged.
    static func send(
        _ f: WorkerFixture,
        _ device: String,
        _ n: Int,
        cancel: String?,
        kind: Kind,
        count: Int,
        after: Int,
        _ model: Model
    ) async {
        model.state.withLock { $0.sent += 1 }
        // Replies can come from the next incarnation: the broker keeps commands for the worker's
        // persistent session while it is down.
        let timeout = Duration.seconds(15)
        if let cancel {
            let reply = await f.reply(device, .cancel, #"{"ids":["\#(cancel)"]}"#, timeout: timeout)
            model.state.withLock { s in
                if reply?.isOK == true {
                    s.cancelled.insert(cancel)
                    s.cancelling.remove(cancel)
                } else {
                    s.unanswered += 1
                }
            }
            return
        }
        let id = "\(kind.rawValue)-\(n)"
        let payload: String
        switch kind {
        case .once: payload = #"{"id":"\#(id)","after":\#(after),"alertBody":"\#(n)"}"#
        case .everyAll:
            payload = #"{"id":"\#(id)","after":\#(after),"repeatInterval":"second","count":\#(count),"misfire":"all"}"#
        case .everyCoalesce:
            payload = #"{"id":"\#(id)","after":\#(after),"repeatInterval":"second","count":\#(count)}"#
        case .far: payload = #"{"id":"\#(id)","after":3600}"#
        }
        let reply = await f.reply(device, .schedule, payload, timeout: timeout)
        let first = reply?["result"]?.objectValue?["scheduled"]?.arrayValue?.first?.objectValue?["nextFireDate"]
        guard reply?.isOK == true,
            case .instant(let instant)? = first?.stringValue.flatMap(DateTimeValue.init(iso8601:))
        else {
            model.state.withLock { $0.unanswered += 1 }
            return
        }
        model.state.withLock { s in
            s.scheduled[id] = Scheduled(id: id, kind: kind, count: count, first: instant)
            if kind == .far { s.cancellable.append(id) }
        }
    }

    /// Every acknowledged schedule whose last occurrence is still ahead is listed; every
    /// acknowledged cancel is not.
    static func checkListed(_ f: WorkerFixture, _ device: String, _ model: Model, context: String) async throws {
        let snapshot = model.state.withLock { ($0.scheduled, $0.cancelled, $0.cancelling) }
        let listed = Set(try await f.list(device).compactMap { $0["id"]?.stringValue })
        let horizon = wallClock().adding(seconds: 3)
        for s in snapshot.0.values where !snapshot.1.contains(s.id) && !snapshot.2.contains(s.id) && s.last > horizon {
            #expect(listed.contains(s.id), "\(s.id) (acknowledged, due \(s.last)) is not listed \(context)")
        }
        for id in snapshot.1 {
            #expect(!listed.contains(id), "\(id) (cancel acknowledged) is listed \(context)")
        }
    }

    /// The fireIds of occurrences that no delivery covers.
    static func uncovered(_ expected: [Scheduled], _ deliveries: [JSONObject]) -> Set<String> {
        var covered = Set<String>()
        for d in deliveries {
            guard let id = d["id"]?.stringValue, let fireId = d["fireId"]?.stringValue else { continue }
            covered.insert(fireId)
            // A coalesced delivery stands for the `missed` occurrences before it.
            guard case .int(let missed)? = d["missed"], missed > 0,
                case .instant(let at)? = d["occurrenceDate"]?.stringValue.flatMap(DateTimeValue.init(iso8601:))
            else { continue }
            for k in 1...missed { covered.insert("\(id)@\(at.adding(seconds: -k).rfc3339())") }
        }
        var missing = Set<String>()
        for s in expected {
            for k in 0..<s.count {
                let fireId = "\(s.id)@\(s.first.adding(seconds: Int64(k)).rfc3339())"
                if !covered.contains(fireId) { missing.insert(fireId) }
            }
        }
        return missing
    }
}
