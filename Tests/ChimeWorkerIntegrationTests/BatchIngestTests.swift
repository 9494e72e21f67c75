import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// Batches sent together reach the real chimed in the same turns of its loop, where they are
/// decoded on a second thread while the loop handles them in order (`Predecoding`): each gets
/// the reply it would get alone, and what was acknowledged is there after a kill -9.
@Suite struct BatchIngestTests {
    @Test(arguments: StoreKind.allCases)
    func batchesSentTogetherAreEachAnsweredAndKeptAcrossAKill(store: StoreKind) async throws {
        let f = try await WorkerFixture.start(store: store)
        defer { Task { await f.stop() } }
        let devices = ["b1", "b2", "b3", "b4"]
        let perDevice = 6
        let body = String(repeating: "b", count: 100)
        // 24 batches of 100 (about 15 KB each, all sent at once); the third of each device's
        // has an id twice and is refused whole.
        func batch(_ device: String, _ k: Int) -> String {
            let items = (0..<100).map { i in
                let id = k == 2 && i == 99 ? "\(device)-\(k)-0" : "\(device)-\(k)-\(i)"
                return #"{"id":"\#(id)","after":3600,"alertBody":"\#(body)","userInfo":{"k":\#(k)}}"#
            }
            return #"{"notifications":[\#(items.joined(separator: ","))]}"#
        }
        let replies = try await withThrowingTaskGroup(of: (String, Int, JSONObject).self) { group in
            for device in devices {
                for k in 0..<perDevice {
                    let payload = batch(device, k)
                    group.addTask { (device, k, try await f.send(device, .schedule, payload, timeout: .seconds(30))) }
                }
            }
            var all: [(String, Int, JSONObject)] = []
            for try await reply in group { all.append(reply) }
            return all
        }
        #expect(replies.count == devices.count * perDevice)
        for (device, k, reply) in replies {
            if k == 2 {
                #expect(reply["ok"] == false, "\(device) batch \(k): \(JSON.object(reply).text)")
                #expect(reply["error"]?.objectValue?["code"] == "invalid_argument")
            } else {
                #expect(reply["ok"] == true, "\(device) batch \(k): \(JSON.object(reply).text)")
                let scheduled = reply["result"]?.objectValue?["scheduled"]?.arrayValue ?? []
                #expect(scheduled.count == 100, "\(device) batch \(k)")
            }
        }
        func expectAll() async throws {
            for device in devices {
                let ids = Set(try await f.commands.listedIds(device))
                let expected = Set(
                    (0..<perDevice).filter { $0 != 2 }.flatMap { k in (0..<100).map { "\(device)-\(k)-\($0)" } }
                )
                #expect(ids == expected, "\(device): \(ids.count) listed")
            }
        }
        try await expectAll()
        await f.killWorker()
        try await f.startWorker()
        try await expectAll()
    }
}
