import ChimeCore
import ChimeJournal
import ChimeTestSupport
import ChimeWorker
import Foundation
import Testing

/// The worker, in this process on a real broker, over a file system that fails on demand
/// (``FaultyFileSystem`` through the journal's `FileSystem` seam): what a full disk, an I/O error
/// or a failed `fdatasync` does to commands, reads and deliveries. (The journal's own behaviour
/// under these faults is unit-tested in ChimeJournalTests; this is the worker's.)
@Suite(.serialized) struct DurabilityFaultTests {
    /// How every write fails, as a rule for ``FaultyFileSystem/inject(_:)``.
    enum WriteFault: String, Sendable, CaseIterable, CustomTestStringConvertible {
        /// ENOSPC.
        case noSpace
        /// EIO.
        case ioError
        /// Half the bytes written and reported (ENOSPC when there is no half to write).
        case shortWrite

        var testDescription: String { rawValue }

        func fault(_ call: FaultyFileSystem.Call) -> FaultyFileSystem.Fault? {
            guard call.operation == .write else { return nil }
            switch self {
            case .noSpace: return .fail(.noSpace)
            case .ioError: return .fail(.ioError)
            case .shortWrite: return call.length / 2 > 0 ? .short(call.length / 2) : .fail(.noSpace)
            }
        }
    }

    struct World {
        let broker: TestBroker
        let data: TemporaryDirectory
        let disk: FaultyFileSystem
        let worker: InProcessWorker
        let client: CommandClient

        static func start() async throws -> World {
            let broker = try await TestBroker.start()
            let data = try TemporaryDirectory(prefix: "chime-faults")
            let disk = FaultyFileSystem()
            let worker = try InProcessWorker(
                broker: broker,
                dataDirectory: data.path,
                workerId: "faults-\(UInt32.random(in: 0...UInt32.max))",
                fileSystem: disk
            )
            try await worker.start()
            let client = try await CommandClient(broker: broker)
            return World(broker: broker, data: data, disk: disk, worker: worker, client: client)
        }

        func end() async {
            client.stop()
            disk.inject(nil)
            disk.release()
            if worker.result == nil { await worker.stop() }
            await broker.stop()
        }
    }

    /// While writes fail, a change is refused with `unavailable` and changes nothing, reads still
    /// answer, and what was scheduled is still delivered (its delivery record cannot be written,
    /// so the worker keeps refusing changes until a snapshot has caught the disk up). Once writes
    /// work again, changes succeed again, and the data directory holds exactly what was
    /// acknowledged.
    @Test(arguments: WriteFault.allCases)
    func writeFailuresRefuseChangesButReadsAndDeliveriesGoOn(fault: WriteFault) async throws {
        let w = try await World.start()
        defer { Task { await w.end() } }
        let c = w.client
        try await c.subscribeDeliveries("d1")
        try await c.ok("d1", .device, #"{"timeZone":"Europe/Paris"}"#)
        try await c.ok("d1", .schedule, #"{"id":"due","after":2,"alertBody":"still delivered"}"#)
        try await c.ok("d1", .schedule, #"{"id":"keep","after":3600}"#)
        let listBefore = try await c.ok("d1", .list, "{}")

        w.disk.inject(fault.fault)
        for (op, payload) in [
            (ChimeCore.Operation.schedule, #"{"id":"new","after":60}"#),
            (.cancel, #"{"ids":["keep"]}"#),
            (.pause, #"{"all":true}"#),
            (.device, #"{"badge":7}"#),
            (.snooze, #"{"id":"keep","after":60}"#),
        ] {
            let reply = try await c.send("d1", op, payload)
            #expect(reply.errorCode == "unavailable", "\(op.rawValue): \(JSON.object(reply).text)")
        }
        #expect(w.disk.faults(.write) > 0)
        // Reads answer, and show nothing changed ("due" may have fired meanwhile on a busy machine:
        // its delivery is checked below).
        func kept(_ list: JSONObject) -> [JSON] {
            list["notifications"]?.arrayValue?.filter { $0.objectValue?["id"] != "due" } ?? []
        }
        #expect(kept(try await c.ok("d1", .list, "{}")) == kept(listBefore))
        #expect(!kept(listBefore).isEmpty)
        #expect(try await c.ok("d1", .device, "{}")["badge"] == 0)
        #expect(try await c.ok("d1", .preview, #"{"id":"keep"}"#)["fireDates"]?.arrayValue?.count == 1)

        // Deliveries go on; the record of this one cannot be written.
        let delivered = await c.waitForDelivery("d1", id: "due")
        #expect(delivered?["alertBody"] == "still delivered")
        #expect(try await c.send("d1", .schedule, #"{"id":"new","after":60}"#).errorCode == "unavailable")

        // Writes work again: after the worker's catch-up snapshot, changes are accepted again.
        w.disk.inject(nil)
        let accepted = try await eventually(timeout: .seconds(30), every: .milliseconds(500)) {
            try await c.send("d1", .schedule, #"{"id":"new","after":3600}"#).isOK
        }
        #expect(accepted, "\(w.worker.log)")
        #expect(try await c.listedIds("d1") == ["keep", "new"])

        // What is on disk is what was acknowledged, and the delivery is recorded.
        try #require(await w.worker.stop()?.isSuccess == true, "\(w.worker.log)")
        let (engine, _) = try Durability.recover(w.data.path)
        #expect(try Durability.listedIds(engine, "d1") == ["keep", "new"])
    }

    /// In diverged mode (a delivery record could not be written) the worker catches the disk up
    /// with a snapshot of its memory. A delivery acknowledged while that snapshot is being written
    /// is in neither the snapshot nor the journal, so the worker must stay diverged until a
    /// snapshot covers it too: otherwise the delivery is forgotten, and the notification is
    /// delivered again after a clean restart.
    @Test func aDeliveryAcknowledgedDuringTheCatchUpSnapshotIsNotForgotten() async throws {
        let w = try await World.start()
        defer { Task { await w.end() } }
        let c = w.client
        try await c.subscribeDeliveries("d1")
        try await c.ok("d1", .schedule, #"{"id":"first","after":1}"#)
        try await c.ok("d1", .schedule, #"{"id":"second","after":12}"#)
        try await c.ok("d1", .schedule, #"{"id":"keep","after":3600}"#)

        // "first" is delivered while writes fail: the worker diverges.
        w.disk.inject(WriteFault.noSpace.fault)
        #expect(await c.waitForDelivery("d1", id: "first") != nil)
        try #require(await eventually { w.worker.log.contains("refusing commands until a snapshot") })
        // Writes work again, but the catch-up snapshot is held while "second" is delivered.
        w.disk.inject { $0.operation == .write && $0.path.contains(".snap") ? .hold : nil }
        try #require(await eventually(timeout: .seconds(30)) { w.disk.held > 0 })
        #expect(await c.waitForDelivery("d1", id: "second") != nil)
        // Its PUBACK has reached the worker once the delivery is applied: a delivered one-shot
        // leaves the list (reads are answered while diverged).
        try #require(await eventually { try await !c.listedIds("d1").contains("second") }, "\(w.worker.log)")
        w.disk.inject(nil)
        w.disk.release()
        // Commands are accepted again once a snapshot covers everything in memory.
        let accepted = try await eventually(timeout: .seconds(30), every: .milliseconds(500)) {
            try await c.send("d1", .schedule, #"{"id":"later","after":3600}"#).isOK
        }
        #expect(accepted, "\(w.worker.log)")

        try #require(await w.worker.stop()?.isSuccess == true, "\(w.worker.log)")
        let (engine, _) = try Durability.recover(w.data.path)
        let listed = try Durability.listedIds(engine, "d1")
        #expect(listed == ["keep", "later"])
    }

    /// A failed `fdatasync` may have lost the data it was to make durable, and retrying could
    /// "succeed" over the loss: the worker must not acknowledge the command, and must stop
    /// (`run()` throws; chimed exits with status 1) so that recovery reads what is really on disk.
    @Test func aFailedSyncStopsTheWorkerWithoutAcknowledging() async throws {
        let w = try await World.start()
        defer { Task { await w.end() } }
        let c = w.client
        try await c.ok("d1", .schedule, #"{"id":"before","after":3600}"#)

        w.disk.inject { $0.operation == .dataSync ? .fail(.ioError) : nil }
        let reply = try? await c.send("d1", .schedule, #"{"id":"unsynced","after":3600}"#, timeout: .seconds(5))
        #expect(
            reply == nil || reply?.isOK == false,
            "acknowledged without a sync: \(reply.map { JSON.object($0).text } ?? "")"
        )
        let result = await w.worker.waitForEnd()
        guard case .failure(let error)? = result else {
            Issue.record("the worker did not stop: \(String(describing: result))")
            return
        }
        #expect(error.message.contains("journal sync failed"), "\(error)")
        #expect(w.disk.faults(.dataSync) >= 1)

        // Restarted (with a working disk), it has everything acknowledged.
        w.disk.inject(nil)
        let (engine, _) = try Durability.recover(w.data.path)
        #expect(try Durability.listedIds(engine, "d1").contains("before"))
    }
}

extension DurabilityFaultTests {
    /// A short write whose partial record cannot be truncated away leaves the journal in a state
    /// the worker cannot append after: it must stop (as after a failed sync) without acknowledging,
    /// and the restart must treat the partial record as the torn tail it is.
    @Test func aPartialRecordThatCannotBeUndoneStopsTheWorker() async throws {
        let w = try await World.start()
        defer { Task { await w.end() } }
        let c = w.client
        try await c.ok("d1", .schedule, #"{"id":"before","after":3600}"#)

        w.disk.inject { call in
            call.operation == .truncate ? .fail(.ioError) : WriteFault.shortWrite.fault(call)
        }
        let reply = try? await c.send("d1", .schedule, #"{"id":"torn","after":3600}"#, timeout: .seconds(5))
        #expect(reply?.isOK != true, "acknowledged: \(reply.map { JSON.object($0).text } ?? "")")
        guard case .failure(let error)? = await w.worker.waitForEnd() else {
            Issue.record("the worker did not stop:\n\(w.worker.log)")
            return
        }
        #expect(error.message.contains("could not be truncated"), "\(error)")

        w.disk.inject(nil)
        let (engine, recovery) = try Durability.recover(w.data.path)
        #expect(try Durability.listedIds(engine, "d1") == ["before"])
        #expect(recovery.warnings.contains { $0.contains("bytes dropped") }, "\(recovery.warnings)")
    }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}
