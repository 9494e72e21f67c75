import ChimeCore
import ChimeJournal
import ChimeMQTT
import ChimeTestSupport
import Foundation
import Testing

/// `repartition(inputs:outputs:partitionCount:)`: the data directories of one partition layout made
/// into those of another, with real workers before and after.
@Suite(.serialized) struct RepartitionTests {
    @Test func twoPartitionsBecomeThreeAndThreeBecomeTwoWithTheSameState() async throws {
        let broker = try await TestBroker.start()
        let client = try RecordingClient(options: broker.clientOptions(clientId: "repartition-tester"))
        defer { client.requester.stop() }
        try await client.requester.connect(timeout: .seconds(10))
        try await client.requester.subscribe("chime/+/notifications", timeout: .seconds(10))

        let devices = (0..<60).map { "user-\($0)@example.com" }
        var commands: [(device: String, op: ChimeCore.Operation, payload: String)] = []
        for (i, device) in devices.enumerated() {
            commands.append(
                (
                    device, .schedule,
                    #"{"id":"far","fireDate":"2030-06-01T09:00:00Z","alertBody":"far","userInfo":{"i":\#(i)}}"#
                )
            )
            if i % 3 == 0 {
                commands.append(
                    (
                        device, .schedule,
                        #"{"id":"weekly","fireDate":"2030-01-07T08:30","timeZone":"Europe/Paris","rrule":"FREQ=WEEKLY;BYDAY=MO,WE","leadTime":900}"#
                    )
                )
            }
            if i % 5 == 0 {
                commands.append(
                    (
                        device, .device,
                        #"{"timeZone":"Asia/Tokyo","badge":3,"quietHours":{"start":"22:00","end":"07:00"}}"#
                    )
                )
            }
            if i % 7 == 0 {
                commands.append((device, .schedule, #"{"id":"off","fireDate":"2031-01-01T00:00:00Z"}"#))
                commands.append((device, .pause, #"{"ids":["off"]}"#))
            }
            if i % 4 == 0 {
                // Fires at once and stays listed: firedCount and lastFiredAt must move with it. It
                // ignores quiet hours: some devices have Tokyo's from 22:00, which would hold it
                // back when the test runs between 13:00 and 22:00 UTC.
                commands.append(
                    (
                        device, .schedule,
                        #"{"id":"fired","after":1,"keepAfterFiring":true,"badge":"+2","ignoreQuietHours":true}"#
                    )
                )
                commands.append((device, .snooze, #"{"id":"far","after":86400}"#))
            }
        }
        let old = try await WorkerCluster.start(broker: broker, count: 2, name: "old")
        // Commands run twenty at a time: what a later one needs (snooze and pause need their
        // notification) goes first.
        let goesFirst = { (c: (device: String, op: ChimeCore.Operation, payload: String)) in
            c.op == .device
                || (c.op == .schedule && (c.payload.contains(#""id":"far""#) || c.payload.contains(#""id":"off""#)))
        }
        let first = commands.filter(goesFirst)
        let then = commands.filter { !goesFirst($0) }
        for phase in [first, then] {
            for (command, reply) in zip(phase, try await client.send(phase)) {
                #expect(reply["ok"] == true, "\(command): \(JSON.object(reply).text)")
            }
        }
        let firing = devices.indices.filter { $0 % 4 == 0 }.count
        #expect(await client.wait { $0.filter { $0.topic.hasSuffix("/notifications") }.count >= firing })
        // The delivered records must be journaled before the workers stop: wait until every fired one
        // lists as fired.
        var before: [String: JSONObject] = [:]
        var fired = 0
        _ = try await eventually {
            before = try await state(of: devices, via: client)
            fired = before.values.filter { JSON.object($0).text.contains(#""firedCount":1"#) }.count
            return fired == firing
        }
        #expect(fired == firing)
        // chimed's own snapshots (SIGUSR1), snoozes included, then records after them: the inputs
        // hold both.
        for worker in old.workers { worker.process.signal(SIGUSR1) }
        for worker in old.workers {
            let written = await worker.process.waitForLine(onStandardError: true, timeout: .seconds(20)) {
                $0.contains("snapshot written")
            }
            #expect(written != nil, "no snapshot: \(worker.log)")
        }
        let later = devices.indices.filter { $0 % 6 == 0 }.map {
            (
                device: devices[$0], op: ChimeCore.Operation.schedule,
                payload: #"{"id":"later","fireDate":"2032-02-29T12:00:00Z"}"#
            )
        }
        let laterReplies = try await client.send(later)
        #expect(laterReplies.allSatisfy { $0["ok"] == true }, "\(laterReplies.map { JSON.object($0).text })")
        before = try await state(of: devices, via: client)
        await old.stop()

        // 2 -> 3.
        let three = try (0..<3).map { _ in try TemporaryDirectory(prefix: "chime-three") }
        let report = try repartition(inputs: old.data.map(\.path), outputs: three.map(\.path), partitionCount: 3)
        #expect(report.inputs.map(\.devices).reduce(0, +) == devices.count)
        #expect(report.outputs.map(\.devices).reduce(0, +) == devices.count)
        #expect(report.outputs.map(\.partition) == (0..<3).map { Partition(index: UInt32($0), count: 3) })
        for k in 0..<3 {
            let onDisk = try snapshotDevices(three[k].path)
            #expect(onDisk == Set(devices.filter { Partition(index: UInt32(k), count: 3).owns($0) }), "output \(k)")
        }
        // The snoozes moved too (they are not listed, so look on disk).
        let snoozes = try (0..<3).flatMap { try snapshotIds(three[$0].path) }.filter { $0.hasSuffix("~snooze") }
        #expect(snoozes.count == firing)

        let new = try await WorkerCluster.start(broker: broker, count: 3, name: "new", dataDirectories: three)
        let after = try await state(of: devices, via: client)
        for device in devices {
            #expect(after[device] == before[device], "\(device)")
        }
        // The new layout serves: a change on a moved device, and a delivery, once.
        let moved = devices[7]
        let changed = try await client.send([
            (moved, .schedule, #"{"id":"after-move","after":1}"#), (moved, .cancel, #"{"ids":["off"]}"#),
        ])
        #expect(changed.allSatisfy { $0["ok"] == true })
        #expect(
            await client.wait {
                $0.contains {
                    $0.topic == "chime/\(moved)/notifications"
                        && (try? RecordingClient.object($0.payload))?["id"] == "after-move"
                }
            }
        )
        var current: [String: JSONObject] = [:]
        #expect(
            try await eventually {
                current = try await state(of: devices, via: client)
                return current[moved].map { JSON.object($0).text.contains("after-move") } == false
            },
            "the delivery of after-move is not recorded"
        )
        await new.stop()

        // 3 -> 2: the inputs now hold a snapshot and records written after it.
        let two = try (0..<2).map { _ in try TemporaryDirectory(prefix: "chime-two") }
        _ = try repartition(inputs: new.data.map(\.path), outputs: two.map(\.path), partitionCount: 2)
        let back = try await WorkerCluster.start(broker: broker, count: 2, name: "back", dataDirectories: two)
        let final = try await state(of: devices, via: client)
        for device in devices {
            #expect(final[device] == current[device], "\(device)")
        }
        // Each occurrence was delivered once, across the three layouts (fireId is per device).
        let deliveries = client.messages.filter { $0.topic.hasSuffix("/notifications") }.map {
            "\($0.topic) \((try? RecordingClient.object($0.payload))?["fireId"]?.stringValue ?? "?")"
        }
        let twice = Dictionary(grouping: deliveries, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(twice.isEmpty, "sent more than once")
        #expect(deliveries.count == firing + 1)
        await back.stop()
        await broker.stop()
    }

    @Test func refusesWhatWouldLoseOrMixState() async throws {
        let root = try TemporaryDirectory(prefix: "chime-repartition")
        func dataDirectory(_ name: String, devices: [String]) throws -> String {
            let path = root.appending(name)
            let (journal, _) = try Journal.open(directory: path)
            for device in devices {
                let entry = JournalEntry.device(
                    deviceId: device,
                    at: Instant(milliseconds: 1_800_000_000_000),
                    update: DeviceUpdate(badge: 4)
                )
                try journal.append(type: entry.kind.rawValue, payload: entry.encode())
            }
            try journal.commit()
            try journal.close()
            return path
        }
        let a = try dataDirectory("a", devices: ["d1", "d2"])
        let b = try dataDirectory("b", devices: ["d3"])
        let clash = try dataDirectory("clash", devices: ["d2"])
        let out = (0..<2).map { root.appending("out-\($0)") }

        func refused(_ inputs: [String], _ outputs: [String], _ count: Int, _ words: String) {
            do {
                _ = try repartition(inputs: inputs, outputs: outputs, partitionCount: count)
                Issue.record("accepted \(inputs) -> \(outputs)")
            } catch {
                #expect(error.message.contains(words), "\(error.message)")
            }
        }
        refused([], out, 2, "no input")
        refused([a, b], out, 3, "need 3 output")
        refused([a, b], out, 0, "at least 1")
        refused([a, root.appending("typo")], out, 2, "not a directory")
        try FileManager.default.createDirectory(atPath: root.appending("empty"), withIntermediateDirectories: false)
        refused([a, root.appending("empty")], out, 2, "holds no journal")
        refused([a, b], [out[0], a], 2, "same directory")
        refused([a, b, a + "/."], out, 2, "same directory")
        refused([a, clash], out, 2, "device d2 has state in both")
        try "x".write(toFile: root.appending("full"), atomically: true, encoding: .utf8)
        refused([a, b], [out[0], root.appending("full")], 2, "not a directory")
        try FileManager.default.createDirectory(atPath: out[1], withIntermediateDirectories: false)
        try "x".write(toFile: out[1] + "/stray", atomically: true, encoding: .utf8)
        refused([a, b], out, 2, "is not empty")
        try FileManager.default.removeItem(atPath: out[1])
        // A running worker holds its directory's lock.
        let (running, _) = try Journal.open(directory: b)
        refused([a, b], out, 2, "locked")
        try running.close()
        // Nothing was written by any refusal.
        #expect(!FileManager.default.fileExists(atPath: out[0]))
        #expect(!FileManager.default.fileExists(atPath: out[1]))

        let report = try repartition(inputs: [a, b], outputs: out, partitionCount: 2)
        #expect(report.inputs.map(\.devices) == [2, 1])
        #expect(report.outputs.map(\.devices).reduce(0, +) == 3)
        #expect(try Set(out.flatMap { try snapshotDevices($0) }) == ["d1", "d2", "d3"])
        // The outputs are now data directories: repartitioning into them again is refused.
        refused([a, b], out, 2, "is not empty")
        // One partition: everything in one directory.
        let single = root.appending("single")
        let one = try repartition(inputs: out, outputs: [single], partitionCount: 1)
        #expect(one.outputs.first?.devices == 3)
        #expect(one.description.contains("--partition 0/1"))
    }
}

/// Every device's `list` and `device` replies, by device.
private func state(of devices: [String], via client: RecordingClient) async throws -> [String: JSONObject] {
    let lists = try await client.send(devices.map { ($0, .list, #"{"limit":1000}"#) })
    let infos = try await client.send(devices.map { ($0, .device, "{}") })
    var state: [String: JSONObject] = [:]
    for (i, device) in devices.enumerated() {
        state[device] = ["list": .object(lists[i].okResult()), "device": .object(infos[i].okResult())]
    }
    return state
}

/// The snapshot entries of a data directory written by repartition (no records after it yet).
private func snapshotEntries(_ directory: String) throws -> [[UInt8]] {
    // Read without the lock, which a process another test is spawning may hold for an instant
    // after repartition closed the directory (see openJournal in Repartition.swift).
    let recovery = try JournalTools.read(directory: directory)
    guard let snapshot = recovery.snapshot, recovery.records.isEmpty else {
        throw HarnessError("\(directory) holds no snapshot alone")
    }
    return try snapshot.loadEntries().map(Array.init)
}

/// The devices a repartitioned directory's snapshot holds.
private func snapshotDevices(_ directory: String) throws -> Set<String> {
    Set(try EngineSnapshot(entries: snapshotEntries(directory)).deviceIds)
}

/// The ids of the notifications a repartitioned directory's snapshot holds, snoozes included.
private func snapshotIds(_ directory: String) throws -> [String] {
    try EngineSnapshot(entries: snapshotEntries(directory)).notificationKeys.map(\.id)
}
