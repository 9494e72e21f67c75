import ChimeCore
import Testing

@testable import ChimeClient

/// The center's pagers (`pendingNotificationRequests`, `inbox`) against replies whose cursor never
/// ends: they throw `.invalidReply` instead of asking forever.
@Suite struct PagerTests {
    @Test func pendingAndInboxStopWhenAPageRepeatsTheCursor() async throws {
        // Up to 100 replies: a pager that follows them all then waits in vain and throws `.timeout`.
        let transport = FakeTransport { message, index in
            guard index < 100 else { return nil }
            switch message.op {
            case "list": return FakeTransport.ok("list", #"{"notifications":[],"cursor":"again"}"#)
            case "inbox": return FakeTransport.ok("inbox", #"{"deliveries":[],"cursor":"again","dropped":0}"#)
            default: return nil
            }
        }
        let center = try ChimeNotificationCenter(
            deviceId: "d1",
            transport: transport,
            configuration: .init(timeout: .milliseconds(500), attempts: 1)
        )
        do {
            _ = try await center.pendingNotificationRequests()
            Issue.record("pendingNotificationRequests returned")
        } catch {
            #expect(error == ChimeClientError(.invalidReply))
            #expect(error.message == "list page 2 has the cursor of an earlier page: the pages would never end")
        }
        await #expect(throws: ChimeClientError(.invalidReply)) { try await center.inbox() }
        // Each asked for the first page, and once for the page after the cursor.
        #expect(transport.published.map(\.op) == ["list", "list", "inbox", "inbox"])
        #expect(transport.published.map { $0.json["cursor"] } == [nil, "again", nil, "again"])
        await center.disconnect()
    }

    @Test func pagesStopPastWhatADeviceCanFill() throws {
        // chimed's own limits, which its configuration checks its flags against.
        #expect(PageTrail(.list).maxPages == DeviceLimits.maxPendingPerDevice + 1)
        #expect(PageTrail(.inbox).maxPages == DeviceLimits.maxInboxPerDevice + 1)

        var trail = PageTrail(.list, maxPages: 3)
        #expect(try trail.follow("1") == "1")
        #expect(try trail.follow("2") == "2")
        #expect(throws: PageTrail.Endless.self) { try trail.follow("3") }
        var ending = PageTrail(.list, maxPages: 3)
        _ = try ending.follow("1")
        _ = try ending.follow("2")
        #expect(try ending.follow(nil) == nil)
    }
}
