import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// Receipts against the real thing: the built chimed, mosquitto, a device that was away.
@Suite struct ReceiptsEndToEndTests {
    @Test(arguments: StoreKind.allCases)
    func aDeviceThatWasAwayGetsEveryDeliveryFromItsInboxAcrossARestart(store: StoreKind) async throws {
        let fixture = try await WorkerFixture.start(store: store)
        defer { Task { await fixture.stop() } }
        // The device is switched off: nobody reads its notifications topic but an observer that
        // records what chimed published, to compare with.
        try await fixture.subscribeDeliveries("phone")
        #expect(try await fixture.ok("phone", .device, #"{"receipts":true}"#)["receipts"] == true)
        for i in 1...3 {
            try await fixture.ok(
                "phone",
                .schedule,
                #"{"id":"r\#(i)","after":\#(i),"alertBody":"take \#(i)","userInfo":{"dose":\#(i)}}"#
            )
        }
        let published = await fixture.waitForDeliveries("phone", count: 3, timeout: .seconds(20))
        #expect(published.count == 3)
        // Recorded once the broker acknowledged each (history says unacknowledged).
        var inbox: [JSONObject] = []
        let held = await eventually(timeout: .seconds(10)) {
            inbox =
                (try? await fixture.ok("phone", .inbox, "{}"))?["deliveries"]?.arrayValue?.compactMap(\.objectValue)
                ?? []
            return inbox.count == 3
        }
        #expect(held)
        #expect(inbox == published)

        let ids = inbox.compactMap { $0["fireId"]?.stringValue }
        let ack = try await fixture.ok("phone", .ack, #"{"fireIds":["\#(ids[0])","\#(ids[1])"]}"#)
        #expect(ack["acknowledged"] == 2)
        #expect(ack["unknown"] == [])
        func inboxIds() async throws -> [String] {
            (try await fixture.ok("phone", .inbox, "{}"))["deliveries"]?.arrayValue?
                .compactMap { $0.objectValue?["fireId"]?.stringValue } ?? []
        }
        #expect(try await inboxIds() == [ids[2]])

        await fixture.killWorker()
        try await fixture.startWorker()
        #expect(try await inboxIds() == [ids[2]])
        let history =
            try await fixture.ok("phone", .history, "{}")["deliveries"]?.arrayValue?.compactMap(\.objectValue) ?? []
        #expect(history.map { $0["state"] } == ["unacknowledged", "acknowledged", "acknowledged"])
        #expect(history.map { $0["fireId"]?.stringValue } == ids.reversed().map { $0 })

        // A snapshot, then a kill: the snapshot carries the inbox.
        fixture.worker?.process.signal(SIGUSR1)
        _ = await fixture.worker?.process.waitForLine(onStandardError: true, timeout: .seconds(10)) {
            $0.contains("snapshot written")
        }
        await fixture.killWorker()
        try await fixture.startWorker()
        #expect(try await inboxIds() == [ids[2]])
    }

    @Test func theWorkerFlagGivesReceiptsToDevicesThatDidNotChoose() async throws {
        let fixture = try await WorkerFixture.start(extra: ["--receipts", "true", "--max-inbox-per-device", "2"])
        defer { Task { await fixture.stop() } }
        #expect(try await fixture.ok("tablet", .device, "{}")["receipts"] == true)
        #expect(try await fixture.ok("opted-out", .device, #"{"receipts":false}"#)["receipts"] == false)
        try await fixture.subscribeDeliveries("tablet")
        for i in 1...3 { try await fixture.ok("tablet", .schedule, #"{"id":"t\#(i)","after":\#(i)}"#) }
        _ = await fixture.waitForDeliveries("tablet", count: 3, timeout: .seconds(20))
        var page: JSONObject = [:]
        let capped = await eventually(timeout: .seconds(10)) {
            page = (try? await fixture.ok("tablet", .inbox, "{}")) ?? [:]
            return page["dropped"] == 1
        }
        #expect(capped, "\(page)")
        #expect(page["deliveries"]?.arrayValue?.count == 2)
    }
}
