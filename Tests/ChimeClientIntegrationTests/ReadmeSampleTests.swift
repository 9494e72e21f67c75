// Imports only what an app imports: the types the API uses come with ChimeClientMQTT.
import ChimeClientMQTT
import Foundation
import Testing

/// The Swift client library's samples, run against the test broker: README's (ReadmeSample.swift),
/// docs/getting-started.md's backend (BackendSample.swift) and the DocC catalog's
/// (Sources/ChimeClient/ChimeClient.docc/ChimeClient.md, DocCSample.swift), which DocSampleTests
/// finds verbatim in those pages.
@Suite struct ReadmeSampleTests {
    @Test func theReadmeSampleRuns() async throws {
        try await withWorld { world in
            let delivery = try #require(try await remindMe(brokerURL: world.broker.url))
            #expect(delivery.fireId.hasPrefix("tea@"))
            #expect(delivery.badge == 1)
            #expect(delivery.userInfo == ["kind": "tea"])
            let center = try ChimeNotificationCenter(deviceId: "phone-1", brokerURL: world.broker.url)
            let pending = try await center.pendingNotificationRequests()
            #expect(pending.map(\.identifier).contains("medicine"), "\(pending)")
            #expect(try await center.preview(identifier: "medicine", count: 3).count == 3)
            await center.disconnect()
        }
    }

    /// docs/getting-started.md's backend sample (BackendSample.swift): 100 phones from one connection, each
    /// delivered once.
    @Test func theBackendSampleRuns() async throws {
        try await withWorld { world in
            let phones = (0..<100).map { "phone-\($0)" }
            let received = try await springCampaign(brokerURL: world.broker.url, phones: phones)
            #expect(received == Dictionary(uniqueKeysWithValues: phones.map { ($0, 1) }))
            let center = try ChimeNotificationCenter(deviceId: "phone-0", brokerURL: world.broker.url)
            #expect(try await center.deviceSettings().timeZoneIdentifier == "Asia/Shanghai")
            await center.disconnect()
        }
    }

    /// The DocC catalog's sample (DocCSample.swift): Monday to Friday at 18:00 in Paris, one rule.
    @Test func theDocCSampleRuns() async throws {
        try await withWorld { world in
            let next = try await remindOnWeekdays(brokerURL: world.broker.url)
            #expect(next.count == 5, "\(next)")
            var paris = Calendar(identifier: .gregorian)
            paris.timeZone = try #require(TimeZone(identifier: "Europe/Paris"))
            for date in next {
                let local = paris.dateComponents([.weekday, .hour, .minute, .second], from: date)
                #expect((2...6).contains(local.weekday ?? 0), "\(date) is not Monday to Friday in Paris")
                #expect(local.hour == 18 && local.minute == 0 && local.second == 0, "\(date)")
            }
            #expect(next == next.sorted() && Set(next).count == 5, "\(next)")
            #expect(next[4].timeIntervalSince(next[0]) < 8 * 86_400, "five weekdays in a row: \(next)")
            let center = try ChimeNotificationCenter(deviceId: "phone-1", brokerURL: world.broker.url)
            let pending = try await center.pendingNotificationRequests()
            await center.disconnect()
            guard case .rule(let rrule, _)? = pending.first?.trigger.kind, pending.count == 1 else {
                Issue.record("not one rule: \(pending)")
                return
            }
            #expect(rrule.contains("BYDAY=MO,TU,WE,TH,FR"), "\(rrule)")
        }
    }

    /// The protocol's model types the API takes are there without importing ChimeCore.
    @Test func theModelTypesComeWithTheClient() {
        let info: JSONObject = ["kind": "med", "dose": JSON.int(2)]
        let content = NotificationContent(badge: Badge.increment(1), userInfo: info, misfire: Misfire.skip)
        let quiet = QuietHours(start: TimeOfDay(hour: 22, minute: 0), end: TimeOfDay(hour: 7, minute: 0))
        let trigger = NotificationTrigger.date(Date(), repeatInterval: RepeatUnit.day)
        let cleared: Set<NotificationField> = [.badge]
        let state = DeliveryState.acknowledged
        #expect(content.userInfo == info)
        #expect(quiet.start.hour == 22)
        #expect(trigger.repeats)
        #expect(cleared.contains(.badge))
        #expect(state.rawValue == "acknowledged")
    }
}
