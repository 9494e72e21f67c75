import ChimeClient
import ChimeClientMQTT
import ChimeHarness
import Foundation
import Testing

/// docs/porting.md's Swift samples (PortingGuideSamples.swift), run against a real chimed and
/// mosquitto, each with the world's broker for the guide's `broker`, checking what the guide says
/// they do through a center of the test's own.
@Suite struct PortingGuideTests {
    static func calendar(_ zone: String) throws -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: zone))
        return calendar
    }

    static func instant(_ text: String) throws -> Date {
        try #require(ISO8601DateFormatter().date(from: text))
    }

    /// `body` or a failure after `seconds`: a sample that waits for a delivery cannot hang the suite.
    static func within<T: Sendable>(
        seconds: Int,
        _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let value = first else {
                throw HarnessError("the sample did not finish within \(seconds) s")
            }
            return value
        }
    }

    /// The guide's `broker` is the one `make run` starts, which the samples' `broker` stands for.
    @Test func theGuidesBrokerIsMakeRunsBroker() {
        #expect(broker == "mqtt://127.0.0.1:1883")
    }

    @Test func theLaunchInboxShowsWhatFiredWhileTheAppWasAway() async throws {
        try await withWorld { world in
            let server = try world.center("launch-swift")
            try await server.setDeviceSettings(receipts: true)
            // Fired while the app was not connected: only the server's center is.
            try await server.add(
                NotificationRequest(
                    identifier: "pill",
                    content: NotificationContent(
                        body: "Take your pill",
                        badge: .increment(1),
                        userInfo: ["kind": "med"]
                    ),
                    trigger: .timeInterval(0.2)
                )
            )
            #expect(
                try await eventually { try await server.history().first?.state == .unacknowledged }
            )
            let (center, inbox) = try await PortingGuide.launchInbox(broker: world.broker.url)
            #expect(inbox.deliveries.map(\.identifier) == ["pill"])
            #expect(inbox.deliveries.first?.userInfo == ["kind": "med"])
            #expect(inbox.deliveries.first?.badge == 1)
            #expect(try await server.inbox().deliveries.isEmpty)
            #expect(try await server.history().first?.state == .acknowledged)
            #expect(try await server.deviceSettings().badge == 0)
            await center.disconnect()
        }
    }

    @Test func theMedicineFiresMondayToFridayAt18InParis() async throws {
        try await withWorld { world in
            let (center, next) = try await PortingGuide.medicine(broker: world.broker.url)
            let paris = try Self.calendar("Europe/Paris")
            func isWeekdayAt18(_ date: Date) -> Bool {
                let c = paris.dateComponents([.weekday, .hour, .minute, .second], from: date)
                return (2...6).contains(c.weekday ?? 0) && c.hour == 18 && c.minute == 0 && c.second == 0
            }
            #expect(next.count == 5)
            #expect(next.filter(isWeekdayAt18).count == 5)
            #expect(Set(next.map { paris.component(.weekday, from: $0) }) == Set(2...6))
            // 1 January 2027 is a Friday: Friday, then Monday to Thursday, never a weekend.
            let mine = try world.center("medicine-swift")
            let fromNewYear = try await mine.preview(
                identifier: "medicine",
                count: 5,
                from: try Self.instant("2027-01-01T00:00:00Z")
            )
            #expect(
                fromNewYear
                    == [
                        try Self.instant("2027-01-01T17:00:00Z"), try Self.instant("2027-01-04T17:00:00Z"),
                        try Self.instant("2027-01-05T17:00:00Z"), try Self.instant("2027-01-06T17:00:00Z"),
                        try Self.instant("2027-01-07T17:00:00Z"),
                    ]
            )
            let pending = try await mine.pendingNotificationRequests()
            #expect(pending.map(\.identifier) == ["medicine"])
            #expect(pending.first?.trigger.timeZone == .device)
            #expect(pending.first?.content.userInfo == ["kind": "med"])
            // The device's zone is followed: the same reminder at 18:00 in Tokyo once the phone is there.
            try await mine.setDeviceSettings(timeZone: "Asia/Tokyo")
            let tokyo = try Self.calendar("Asia/Tokyo")
            let inTokyo = try await mine.preview(identifier: "medicine", count: 5)
            #expect(inTokyo.allSatisfy { tokyo.component(.hour, from: $0) == 18 })
            await center.disconnect()
        }
    }

    @Test func theExamIsAt07InShanghaiAndTheEveningBeforeAt20() async throws {
        try await withWorld { world in
            let center = try await PortingGuide.exam(broker: world.broker.url)
            let mine = try world.center("exam-swift")
            let pending = try await mine.pendingNotificationRequests()
            #expect(pending.map(\.identifier) == ["exam", "exam-eve"])
            #expect(
                pending.map(\.nextFireDate)
                    == [try Self.instant("2030-06-06T23:00:00Z"), try Self.instant("2030-06-06T12:00:00Z")]
            )
            #expect(pending.allSatisfy { $0.trigger.timeZone == .named("Asia/Shanghai") && !$0.trigger.repeats })
            #expect(pending.allSatisfy { $0.content.userInfo == ["exam": "gaokao-2030"] })
            // A named zone does not follow the phone.
            try await mine.setDeviceSettings(timeZone: "Europe/Paris")
            #expect(
                try await mine.preview(identifier: "exam", count: 1) == [try Self.instant("2030-06-06T23:00:00Z")]
            )
            await center.disconnect()
        }
    }

    @Test func theTeaArrivesInEightSecondsWithItsBadgeAndUserInfo() async throws {
        try await withWorld { world in
            let mine = try world.center("tea-swift")
            try await mine.connect()
            let watched = mine.deliveries
            let start = Date()
            let url = world.broker.url
            // The sample returns once its loop has had the delivery.
            let center = try await Self.within(seconds: 40) { try await PortingGuide.tea(broker: url) }
            #expect(Date().timeIntervalSince(start) >= 7.9)
            #expect(Date().timeIntervalSince(start) < 30)
            // The same delivery, as another client of the device saw it.
            var iterator = watched.makeAsyncIterator()
            let received = try #require(await iterator.next())
            #expect(received.identifier == "tea")
            #expect(received.content.body == "Your tea is ready")
            #expect(received.badge == 1)
            #expect(received.userInfo == ["kind": "tea", "cup": 2])
            #expect(received.firedAt.timeIntervalSince(start) >= 7.9)
            #expect(try await mine.pendingNotificationRequests().isEmpty)
            #expect(try await mine.deviceSettings().badge == 1)
            await center.disconnect()
        }
    }

    @Test func theReminderListKeepsASwitchedOffReminderOffWhenItIsEdited() async throws {
        try await withWorld { world in
            let center = try await PortingGuide.remindersAdd(broker: world.broker.url)
            let mine = try world.center("reminders-swift")
            var rows = try await mine.pendingNotificationRequests()
            #expect(rows.map(\.identifier) == ["bins", "dentist", "plants"])
            #expect(rows.map(\.isEnabled) == [true, true, true])
            let newYork = try Self.calendar("America/New_York")
            let plantsNext = try #require(rows.first { $0.identifier == "plants" }?.nextFireDate)
            #expect(newYork.dateComponents([.weekday, .hour], from: plantsNext) == DateComponents(hour: 9, weekday: 7))
            let binsNext = try #require(rows.first { $0.identifier == "bins" }?.nextFireDate)
            #expect(newYork.dateComponents([.weekday, .hour], from: binsNext) == DateComponents(hour: 19, weekday: 3))

            try await PortingGuide.remindersSwitchOffAndEdit(center: center)
            rows = try await mine.pendingNotificationRequests()
            let plants = try #require(rows.first { $0.identifier == "plants" })
            #expect(!plants.isEnabled)
            #expect(plants.nextFireDate == nil)
            #expect(plants.content.body == "Water the plants and the herbs")
            #expect(
                plants.trigger.kind
                    == .date(
                        .wallClock(DateComponents(year: 2026, month: 12, day: 5, hour: 9, minute: 0, second: 0)),
                        repeatInterval: .weekOfYear,
                        count: nil,
                        until: nil
                    )
            )

            try await PortingGuide.remindersLeadTime(center: center)
            #expect(
                try await mine.preview(identifier: "dentist", count: 1) == [try Self.instant("2030-03-14T14:15:00Z")]
            )

            try await PortingGuide.remindersDeleteAndCheck(center: center)
            rows = try await mine.pendingNotificationRequests()
            #expect(rows.map(\.identifier) == ["dentist", "plants"])
            #expect(rows.map(\.isEnabled) == [true, false])
            #expect(rows.first?.nextFireDate == (try Self.instant("2030-03-14T14:15:00Z")))
            #expect(rows.first?.trigger.leadTime == 900)
            await center.disconnect()
        }
    }

    @Test func theComebackCampaignIsAtNoonAndReplacedAndCancelledAsABatch() async throws {
        try await withWorld { world in
            let start = Date().addingTimeInterval(-0.001)
            let (first, _) = try await PortingGuide.comebackLeave(broker: world.broker.url)
            // The player left again: the same three, not six.
            let (center, scheduled) = try await PortingGuide.comebackLeave(broker: world.broker.url)
            #expect(scheduled.map(\.identifier) == ["comeback-1d", "comeback-3d", "comeback-7d"])
            let tokyo = try Self.calendar("Asia/Tokyo")
            for (notification, hours) in zip(scheduled, [24.0, 72, 168]) {
                let next = try #require(notification.nextFireDate)
                #expect(
                    tokyo.dateComponents([.hour, .minute, .second], from: next)
                        == DateComponents(hour: 12, minute: 0, second: 0)
                )
                #expect(next >= start.addingTimeInterval(hours * 3600))
                #expect(next < Date().addingTimeInterval(hours * 3600 + 86_400))
            }
            let mine = try world.center("comeback-swift")
            #expect(try await mine.pendingNotificationRequests().count == 3)
            #expect(try await mine.pendingNotificationRequests(matchingUserInfo: ["campaign": "comeback"]).count == 3)

            try await PortingGuide.comebackReturn(center: center)
            #expect(try await mine.pendingNotificationRequests().isEmpty)
            await first.disconnect()
            await center.disconnect()
        }
    }
}
