import ChimeClient
import ChimeClientMQTT
import ChimeCore
import ChimeHarness
import ChimeMQTT
import Foundation
import Testing

/// A calendar trigger's components, to compare chimed's dates with Foundation's.
struct AppleCase: Sendable, CustomTestStringConvertible {
    var name: String
    var components: DateComponents
    var testDescription: String { name }
}

/// Every call of `ChimeNotificationCenter` against a real mosquitto and a real chimed.
@Suite(.serialized) struct NotificationCenterTests {
    static func paris() throws -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "Europe/Paris"))
        return calendar
    }

    @Test func addedRequestsAreListedAsScheduledAndCanBeAddedAgain() async throws {
        try await withWorld { world in
            let center = try world.center("phone-1")
            try await center.setDeviceSettings(timeZone: "Asia/Shanghai")
            var content = NotificationContent.everyField
            content.enabled = nil
            let request = NotificationRequest(
                identifier: "medicine",
                content: content,
                trigger: .calendar(matching: DateComponents(hour: 18, minute: 0), repeats: true)
            )
            let next = try #require(try await center.add(request))

            var shanghai = Calendar(identifier: .gregorian)
            shanghai.timeZone = try #require(TimeZone(identifier: "Asia/Shanghai"))
            let expected = shanghai.nextDate(
                after: Date(),
                matching: DateComponents(hour: 18, minute: 0, second: 0),
                matchingPolicy: .strict
            )
            #expect(next == expected)

            let pending = try await center.pendingNotificationRequests()
            try #require(pending.count == 1)
            let listed = pending[0]
            #expect(listed.identifier == "medicine")
            #expect(listed.content == content)
            #expect(listed.isEnabled)
            #expect(listed.nextFireDate == next)
            #expect(listed.firedCount == 0)
            #expect(listed.lastFiredAt == nil)
            #expect(listed.createdAt <= listed.updatedAt)
            guard case .rule(let rrule, .wallClock(let start)) = listed.trigger.kind else {
                Issue.record("listed as \(listed.trigger)")
                return
            }
            #expect(rrule == "FREQ=DAILY;BYSECOND=0;BYMINUTE=0;BYHOUR=18")
            #expect(start.hour == 0 && start.minute == 0)

            // Read, modify, write: what was listed goes back as it is; a switched-off reminder
            // stays off.
            var edited = listed.request
            edited.content.body = "Take two pills"
            edited.content.enabled = false
            try await center.add(edited)
            let again = try await center.pendingNotificationRequests()
            #expect(again.map(\.content.body) == ["Take two pills"])
            #expect(again.map(\.isEnabled) == [false])
            #expect(again.first?.nextFireDate == nil)
            let off = try #require(again.first)
            try await center.add(off.request)
            #expect(try await center.pendingNotificationRequests().map(\.isEnabled) == [false])
            #expect(try await center.deviceSettings().pending == 1)
        }
    }

    static let appleCases = [
        AppleCase(name: "daily at 18:00", components: DateComponents(hour: 18, minute: 0)),
        AppleCase(name: "Mondays at 08:30", components: DateComponents(hour: 8, minute: 30, weekday: 2)),
        AppleCase(name: "every hour at :45", components: DateComponents(minute: 45)),
        AppleCase(name: "the 31st at 09:00", components: DateComponents(day: 31, hour: 9)),
        AppleCase(name: "Friday the 13th", components: DateComponents(day: 13, hour: 12, weekday: 6)),
        AppleCase(name: "Christmas morning", components: DateComponents(month: 12, day: 25, hour: 7)),
        AppleCase(
            name: "the second Tuesday at 10:00",
            components: DateComponents(hour: 10, weekday: 3, weekdayOrdinal: 2)
        ),
        AppleCase(
            name: "the fourth Thursday of November",
            components: DateComponents(month: 11, hour: 12, weekday: 5, weekdayOrdinal: 4)
        ),
    ]

    /// chimed's dates for a repeating calendar trigger are those Foundation's calendar matches.
    @Test(arguments: appleCases)
    func calendarTriggersFireWhereFoundationsCalendarMatches(_ c: AppleCase) async throws {
        try await withWorld { world in
            let center = try world.center("phone-1")
            try await center.setDeviceSettings(timeZone: "Europe/Paris")
            let from = Date()
            let request = NotificationRequest(
                identifier: "x",
                content: .init(body: "x"),
                trigger: .calendar(matching: c.components, repeats: true)
            )
            let dates = try await center.preview(request, count: 5, from: from)
            let calendar = try Self.paris()
            var expected: [Date] = []
            var after = from
            while expected.count < 5,
                let next = calendar.nextDate(after: after, matching: c.components, matchingPolicy: .strict)
            {
                expected.append(next)
                after = next
            }
            #expect(dates == expected)
        }
    }

    /// Without `repeats`, a calendar trigger is scheduled as the one date its components match next.
    @Test func aCalendarTriggerWithoutRepeatsIsScheduledOnce() async throws {
        try await withWorld { world in
            let center = try world.center("phone-1")
            try await center.setDeviceSettings(timeZone: "Europe/Paris")
            let components = DateComponents(hour: 7, minute: 15)
            let request = NotificationRequest(
                identifier: "exam",
                content: .init(body: "The exam starts at 07:30"),
                trigger: .calendar(matching: components, repeats: false)
            )
            let expected = try Self.paris().nextDate(after: Date(), matching: components, matchingPolicy: .strict)
            #expect(try await center.preview(request) == [expected].compactMap { $0 })
            let next = try await center.add(request)
            #expect(next == expected)
            let listed = try #require(try await center.pendingNotificationRequests().first)
            #expect(!listed.trigger.repeats)
            guard case .date(.instant(let date), nil, nil, nil) = listed.trigger.kind else {
                Issue.record("listed as \(listed.trigger)")
                return
            }
            #expect(date == expected)
            #expect(try await center.preview(identifier: "exam", count: 3) == [date])
        }
    }

    /// Monday to Friday at 18:00 as one trigger: chimed's next date is the first such time, and
    /// the next ten are those Foundation's calendar matches for any of the five weekdays.
    @Test func aCalendarTriggerOnASetOfWeekdaysFiresOnEachOfThem() async throws {
        try await withWorld { world in
            let center = try world.center("phone-1")
            try await center.setDeviceSettings(timeZone: "Europe/Paris")
            let time = DateComponents(hour: 18, minute: 0)
            let from = Date()
            let calendar = try Self.paris()
            func next(after date: Date) -> Date? {
                Set<Weekday>.weekdays.compactMap { day in
                    var components = time
                    components.weekday = day.rawValue
                    return calendar.nextDate(after: date, matching: components, matchingPolicy: .strict)
                }.min()
            }
            var expected: [Date] = []
            var after = from
            while expected.count < 10, let date = next(after: after) {
                expected.append(date)
                after = date
            }
            let request = NotificationRequest(
                identifier: "medicine",
                content: .init(body: "Take your medicine"),
                trigger: .calendar(matching: time, on: .weekdays, repeats: true)
            )
            #expect(try await center.preview(request, count: 10, from: from) == expected)
            let first = try #require(try await center.add(request))
            #expect(first == expected.first)
            #expect(expected.allSatisfy { ![1, 7].contains(calendar.component(.weekday, from: $0)) })
            let listed = try #require(try await center.pendingNotificationRequests().first)
            guard case .rule(let rrule, _) = listed.trigger.kind else {
                Issue.record("listed as \(listed.trigger)")
                return
            }
            #expect(rrule == "FREQ=WEEKLY;BYSECOND=0;BYMINUTE=0;BYHOUR=18;BYDAY=MO,TU,WE,TH,FR")
        }
    }

    @Test func triggersOfEveryKindAreScheduled() async throws {
        try await withWorld { world in
            let center = try world.center("phone-1")
            try await center.setDeviceSettings(timeZone: "Asia/Shanghai")
            // chimed keeps milliseconds: a millisecond before, to compare with what it computes.
            let start = Date().addingTimeInterval(-0.001)
            func request(_ id: String, _ trigger: NotificationTrigger) -> NotificationRequest {
                NotificationRequest(identifier: id, content: .init(body: id), trigger: trigger)
            }
            // Every 90 seconds from 90 seconds from now, in whole seconds (a rule's).
            let interval = try #require(try await center.add(request("interval", .timeInterval(90, repeats: true))))
            #expect(interval > start.addingTimeInterval(89))
            #expect(interval <= Date().addingTimeInterval(90))
            #expect(interval.timeIntervalSince1970.rounded(.down) == interval.timeIntervalSince1970)
            let intervals = try await center.preview(identifier: "interval", count: 3)
            #expect(intervals.count == 3)
            #expect(zip(intervals, intervals.dropFirst()).allSatisfy { $1.timeIntervalSince($0) == 90 })

            // Come back tomorrow or later, at noon in the device's zone.
            let comeBack = try #require(
                try await center.add(
                    request("come-back", .timeInterval(86_400, alignedTo: TimeOfDay(hour: 12, minute: 0)))
                )
            )
            var shanghai = Calendar(identifier: .gregorian)
            shanghai.timeZone = try #require(TimeZone(identifier: "Asia/Shanghai"))
            #expect(
                shanghai.dateComponents([.hour, .minute, .second], from: comeBack)
                    == DateComponents(hour: 12, minute: 0, second: 0)
            )
            #expect(comeBack >= start.addingTimeInterval(86_400))
            #expect(comeBack < start.addingTimeInterval(2 * 86_400))

            // UILocalNotification's fireDate and repeatInterval, with a lead time.
            let first = Date(timeIntervalSince1970: (start.timeIntervalSince1970 / 60).rounded(.up) * 60 + 3600)
            var hourly = NotificationTrigger.date(first, repeatInterval: .hour)
            hourly.leadTime = 900
            let hourlyNext = try #require(try await center.add(request("hourly", hourly)))
            #expect(hourlyNext == first.addingTimeInterval(-900))
            #expect(
                try await center.preview(identifier: "hourly", count: 2)
                    == [first.addingTimeInterval(-900), first.addingTimeInterval(2700)]
            )

            // An RRULE: weekdays at 18:00 in the device's zone.
            let rule = NotificationTrigger.rule(
                "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
                startingAt: .wallClock(DateComponents(year: 2026, month: 1, day: 1, hour: 18, minute: 0))
            )
            try await center.add(request("weekdays", rule))
            let weekdays = try await center.preview(identifier: "weekdays", count: 10)
            #expect(weekdays.count == 10)
            #expect(
                weekdays.allSatisfy {
                    let parts = shanghai.dateComponents([.weekday, .hour, .minute], from: $0)
                    return (2...6).contains(parts.weekday ?? 0) && parts.hour == 18 && parts.minute == 0
                }
            )

            // A wall-clock date in a zone of its own, listed as it was given.
            let exam = DateComponents(year: 2030, month: 6, day: 7, hour: 7, minute: 0, second: 0)
            try await center.add(request("exam", .date(.wallClock(exam), timeZone: .named("Europe/Paris"))))
            let listed = try await center.pendingNotificationRequests()
            #expect(listed.map(\.identifier) == ["come-back", "exam", "hourly", "interval", "weekdays"])
            let examListed = try #require(listed.first { $0.identifier == "exam" })
            #expect(examListed.trigger == .date(.wallClock(exam), timeZone: .named("Europe/Paris")))
            #expect(examListed.nextFireDate == Date(timeIntervalSince1970: 1_907_038_800))
        }
    }

    @Test func deliveriesArriveWithTheirBadgeAndUserInfo() async throws {
        try await withWorld { world in
            let center = try world.center("phone-1")
            try await center.connect()
            let deliveries = center.deliveries
            for (id, seconds) in [("tea", 1.0), ("cake", 2.0)] {
                try await center.add(
                    NotificationRequest(
                        identifier: id,
                        content: .init(
                            title: "Kitchen",
                            body: "\(id) is ready",
                            sound: "default",
                            badge: .increment(1),
                            userInfo: ["kind": "kitchen", "item": .string(id)]
                        ),
                        trigger: .timeInterval(seconds)
                    )
                )
            }
            var received: [ChimeDelivery] = []
            for await delivery in deliveries {
                received.append(delivery)
                if received.count == 2 { break }
            }
            #expect(received.map(\.identifier) == ["tea", "cake"])
            #expect(received.map(\.badge) == [1, 2])
            #expect(
                received.map(\.userInfo) == [["kind": "kitchen", "item": "tea"], ["kind": "kitchen", "item": "cake"]]
            )
            let tea = try #require(received.first)
            #expect(tea.deviceId == "phone-1")
            #expect(tea.fireId.hasPrefix("tea@"))
            #expect(tea.content.title == "Kitchen")
            #expect(tea.content.body == "tea is ready")
            #expect(tea.content.sound == "default")
            #expect(tea.occurrence == 1 && tea.isLast && tea.missed == 0 && !tea.isDeferred)
            #expect(tea.firedAt >= tea.fireDate)
            #expect(tea.occurrenceDate == tea.fireDate)
            // One-shots that fired are gone.
            #expect(try await center.pendingNotificationRequests().isEmpty)
            #expect(try await center.deviceSettings().badge == 2)
        }
    }

    @Test func receiptsKeepDeliveriesUntilTheyAreAcknowledged() async throws {
        try await withWorld { world in
            let center = try world.center("phone-2")
            let settings = try await center.setDeviceSettings(receipts: true)
            #expect(settings.receipts && settings.history)
            let deliveries = center.deliveries
            try await center.add(
                NotificationRequest(
                    identifier: "pill",
                    content: .init(body: "Take your pill", badge: .increment(1), userInfo: ["kind": "med"]),
                    trigger: .timeInterval(1)
                )
            )
            try await center.add(
                NotificationRequest(identifier: "tea", content: .init(body: "Tea"), trigger: .timeInterval(1.5))
            )
            var received: [ChimeDelivery] = []
            for await delivery in deliveries {
                received.append(delivery)
                if received.count == 2 { break }
            }
            try #require(received.map(\.identifier) == ["pill", "tea"])
            let delivered = received[0]

            // Each delivery as it was published, oldest first, over pages of one as over one page.
            let inbox = try await center.inbox()
            #expect(inbox.deliveries == received)
            #expect(inbox.dropped == 0)
            let paged = try world.center("phone-2", configuration: .init(pageSize: 1))
            #expect(try await paged.inbox().deliveries == received)
            #expect(try await center.history().map(\.state) == [.unacknowledged, .unacknowledged])
            try await center.ack(fireIds: [received[1].fireId])

            let acked = try await center.ack(fireIds: [delivered.fireId], badge: .decrement(1))
            #expect(acked == AckResult(acknowledged: 1, unknown: []))
            let unknown = "pill@2020-01-01T00:00:00.000Z"
            let again = try await center.ack(fireIds: [delivered.fireId, unknown], badge: .decrement(1))
            #expect(again == AckResult(acknowledged: 0, unknown: [unknown]))

            #expect(try await center.inbox().deliveries.isEmpty)
            let history = try await center.history(since: delivered.firedAt.addingTimeInterval(-1), limit: 10)
            #expect(history.map(\.fireId) == received.reversed().map(\.fireId))
            #expect(history.map(\.state) == [.acknowledged, .acknowledged])
            #expect(history.allSatisfy { $0.acknowledgedAt != nil })
            #expect(history.map(\.identifier) == ["tea", "pill"])
            #expect(
                history.allSatisfy { $0.mqtt == .acknowledged && $0.pushOutcome == nil && $0.fireDate <= $0.firedAt }
            )
            #expect(try await center.history(limit: 1).map(\.identifier) == ["tea"])
            #expect(try await center.history(since: Date().addingTimeInterval(60)).isEmpty)
            #expect(try await center.deviceSettings().badge == 0)
        }
    }

    /// More notifications than a page holds: every page is fetched, in id order.
    @Test func pendingRequestsFollowTheCursorThroughEveryPage() async throws {
        try await withWorld { world in
            let center = try world.center("phone-1")
            let requests = (0..<250).map { (index: Int) -> NotificationRequest in
                let id = "r" + String(1000 + index).dropFirst()
                let userInfo: JSONObject = ["group": .int(Int64(index % 2))]
                let content = NotificationContent(body: "reminder \(index)", userInfo: userInfo)
                return NotificationRequest(
                    identifier: id,
                    content: content,
                    trigger: .timeInterval(3600 + Double(index))
                )
            }
            let scheduled = try await center.add(contentsOf: requests)
            #expect(scheduled.map(\.identifier) == requests.map(\.identifier))
            #expect(scheduled.allSatisfy { $0.nextFireDate != nil })

            let pending = try await center.pendingNotificationRequests()
            #expect(pending.count == 250)
            #expect(pending.map(\.identifier) == requests.map(\.identifier))
            #expect(pending.map(\.content.body) == requests.map(\.content.body))
            let even = try await center.pendingNotificationRequests(matchingUserInfo: ["group": 0])
            #expect(even.count == 125)
            #expect(even.allSatisfy { $0.content.userInfo?["group"] == 0 })

            let small = try world.center("phone-1", configuration: .init(pageSize: 7))
            #expect(try await small.pendingNotificationRequests().map(\.identifier) == requests.map(\.identifier))

            // A batch that replaces: the odd ones go, two come, in one step.
            try await center.add(
                contentsOf: [
                    NotificationRequest(identifier: "new-1", content: .init(body: "1"), trigger: .timeInterval(60)),
                    NotificationRequest(identifier: "new-2", content: .init(body: "2"), trigger: .timeInterval(60)),
                ],
                replacing: .userInfo(["group": 1])
            )
            #expect(try await center.deviceSettings().pending == 127)
        }
    }

    @Test func removePauseAndResume() async throws {
        try await withWorld { world in
            let center = try world.center("phone-1")
            for (id, kind) in [("a", "x"), ("b", "x"), ("c", "y"), ("d", "y")] {
                try await center.add(
                    NotificationRequest(
                        identifier: id,
                        content: .init(body: id, userInfo: ["kind": .string(kind)]),
                        trigger: .timeInterval(3600)
                    )
                )
            }
            func states() async throws -> [String: Bool] {
                Dictionary(
                    uniqueKeysWithValues: try await center.pendingNotificationRequests().map {
                        ($0.identifier, $0.isEnabled)
                    }
                )
            }
            try await center.pause(.identifiers(["a"]))
            #expect(try await states() == ["a": false, "b": true, "c": true, "d": true])
            try await center.pause(.userInfo(["kind": "y"]))
            #expect(try await states() == ["a": false, "b": true, "c": false, "d": false])
            #expect(try await center.pendingNotificationRequests().first?.nextFireDate == nil)
            try await center.resume(.all)
            #expect(try await states() == ["a": true, "b": true, "c": true, "d": true])
            try await center.pause(.all)
            try await center.resume(.identifiers(["d"]))
            #expect(try await states() == ["a": false, "b": false, "c": false, "d": true])

            try await center.removePendingNotificationRequests(withIdentifiers: ["a", "not-there"])
            #expect(try await states().keys.sorted() == ["b", "c", "d"])
            try await center.removePendingNotificationRequests(matchingUserInfo: ["kind": "x"])
            #expect(try await states().keys.sorted() == ["c", "d"])
            try await center.removeAllPendingNotificationRequests()
            #expect(try await states().isEmpty)
        }
    }

    @Test func snoozeDeliversTheContentOnceMore() async throws {
        try await withWorld { world in
            let center = try world.center("phone-1")
            try await center.connect()
            let deliveries = center.deliveries
            try await center.add(
                NotificationRequest(
                    identifier: "call",
                    content: .init(title: "Call", body: "Call mum", userInfo: ["who": "mum"]),
                    trigger: .timeInterval(3600)
                )
            )
            let before = Date().addingTimeInterval(-0.001)  // chimed keeps milliseconds
            let due = try #require(try await center.snooze(identifier: "call", for: 1))
            #expect(due >= before.addingTimeInterval(1))
            let delivery = try #require(await firstElement(of: deliveries))
            #expect(delivery.identifier == "call~snooze")
            #expect(delivery.content.body == "Call mum")
            #expect(delivery.userInfo == ["who": "mum"])
            // The original is unchanged.
            #expect(try await center.pendingNotificationRequests().map(\.identifier) == ["call"])
        }
    }

    @Test func deviceSettingsAreReadAndChanged() async throws {
        try await withWorld { world in
            let center = try world.center("phone-3")
            let fresh = try await center.deviceSettings()
            #expect(fresh.deviceId == "phone-3")
            #expect(fresh.timeZoneIdentifier == nil)
            #expect(fresh.badge == 0 && fresh.pending == 0 && !fresh.receipts && fresh.history)

            let quiet = QuietHours(start: TimeOfDay(hour: 22, minute: 0), end: TimeOfDay(hour: 7, minute: 0))
            let changed = try await center.setDeviceSettings(
                timeZone: "Europe/Paris",
                badge: 3,
                quietHours: .set(quiet),
                history: true
            )
            #expect(changed.timeZoneIdentifier == "Europe/Paris")
            #expect(changed.timeZone?.identifier == "Europe/Paris")
            #expect(changed.badge == 3)
            #expect(changed.quietHours == quiet)
            #expect(changed.history && !changed.receipts)
            #expect(try await center.deviceSettings() == changed)

            let cleared = try await center.setDeviceSettings(quietHours: .clear)
            #expect(cleared.quietHours == nil)
            #expect(cleared.badge == 3)

            let error = await #expect(throws: ChimeClientError(.invalidArgument)) {
                try await center.setDeviceSettings(timeZone: "Mars/Olympus_Mons")
            }
            #expect(error?.field == "timeZone")
        }
    }

    @Test func errorRepliesComeBackTyped() async throws {
        try await withWorld { world in
            let center = try world.center("phone-4")
            let snooze = await #expect(throws: ChimeClientError(.notFound)) {
                try await center.snooze(identifier: "nothing", for: 60)
            }
            #expect(snooze?.field == "id")
            await #expect(throws: ChimeClientError(.notFound)) { try await center.preview(identifier: "nothing") }

            let typo = await #expect(throws: ChimeClientError(.unknownField)) {
                try await center.command("schedule", ["id": "x", "after": 60, "alertbody": "typo"])
            }
            #expect(typo?.field == "alertbody")

            // The device has no zone: a wall-clock trigger cannot be placed.
            let daily = NotificationRequest(
                identifier: "daily",
                content: .init(body: "x"),
                trigger: .calendar(matching: DateComponents(hour: 9, minute: 0), repeats: true)
            )
            await #expect(throws: ChimeClientError(.timezoneRequired)) { try await center.add(daily) }

            let never = NotificationRequest(
                identifier: "never",
                content: .init(body: "x"),
                trigger: .rule(
                    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
                    startingAt: .instant(Date()),
                    timeZone: .named("UTC")
                )
            )
            await #expect(throws: ChimeClientError(.neverFires)) { try await center.add(never) }

            var bad = never
            bad.trigger = .rule("FREQ=SOMETIMES", startingAt: .instant(Date()))
            let rule = await #expect(throws: ChimeClientError(.invalidArgument)) { try await center.add(bad) }
            #expect(rule?.field == "rrule")
            #expect(rule?.message.contains("FREQ") == true)

            #expect(try await center.pendingNotificationRequests().isEmpty)
        }
    }

    /// The first reply is lost: the command goes again, the same bytes and Correlation Data, and
    /// chimed applies it once and answers the retry as a duplicate.
    @Test func aCommandWhoseReplyIsLostIsSentAgainAndAppliedOnce() async throws {
        try await withWorld { world in
            let prefix = "chime/phone-5/replies/"
            let transport = ReplyLosingTransport(
                try MQTTChimeTransport(options: world.options()),
                losingFirstReplyOn: prefix
            )
            let center = try world.center(
                "phone-5",
                transport: transport,
                configuration: .init(timeout: .seconds(2), attempts: 3)
            )
            let request = NotificationRequest(
                identifier: "once",
                content: .init(body: "once"),
                trigger: .timeInterval(3600)
            )
            #expect(try await center.add(request) == nil)  // the retry's answer: a duplicate
            #expect(transport.replies >= 2)  // 3 if the retry's reply is slower than the timeout
            let pending = try await center.pendingNotificationRequests()
            #expect(pending.map(\.identifier) == ["once"])
            #expect(try await center.preview(identifier: "once", count: 1).count == 1)
        }
    }

    /// Nobody answers: every attempt is the same message, then `.timeout`.
    @Test func withoutAWorkerACallTimesOutAfterItsAttempts() async throws {
        try await withWorld(worker: false) { world in
            let watcher = try MQTTRequester(options: world.options())
            defer { watcher.stop() }
            try await watcher.connect(timeout: .seconds(10))
            try await watcher.subscribe("chime/+/cmd/#", qos: 1, timeout: .seconds(10))
            let center = try world.center("phone-6", configuration: .init(timeout: .milliseconds(300), attempts: 2))
            let error = await #expect(throws: ChimeClientError(.timeout)) { try await center.deviceSettings() }
            #expect(error?.message.contains("2 attempts") == true)

            var seen: [MQTTMessage] = []
            for await message in watcher.messages {
                seen.append(message)
                if seen.count == 2 { break }
            }
            #expect(seen.map(\.topic) == ["chime/phone-6/cmd/device", "chime/phone-6/cmd/device"])
            #expect(seen.first?.payload == seen.last?.payload)
            #expect(seen.first?.correlationData == seen.last?.correlationData)
            #expect(seen.first?.responseTopic == center.replyTopic)
        }
    }

    @Test func aTransportThatCannotConnectIsATransportError() async throws {
        var options = MQTTOptions(host: "127.0.0.1", port: try TestBroker.freePort())
        options.clientId = "nobody"
        let center = try ChimeNotificationCenter(
            deviceId: "phone-7",
            mqtt: options,
            configuration: .init(timeout: .milliseconds(300))
        )
        await #expect(throws: ChimeClientError(.transport)) { try await center.deviceSettings() }
        await center.disconnect()
        #expect(throws: ChimeClientError(.invalidArgument)) {
            try ChimeNotificationCenter(deviceId: "phone-7", brokerURL: "http://example.com")
        }
        var v311 = options
        v311.protocolVersion = .v311
        #expect(throws: ChimeClientError(.invalidArgument)) { try MQTTChimeTransport(options: v311) }
    }

    @Test
    func updateChangesOnlyTheFieldsGiven() async throws {
        try await withWorld { world in
            let center = try world.center("phone-8")
            try await center.setDeviceSettings(timeZone: "Europe/Paris")
            try await center.add(
                NotificationRequest(
                    identifier: "med",
                    content: .init(title: "Medicine", body: "Take your pill", sound: "default", badge: .increment(1)),
                    trigger: .calendar(matching: DateComponents(hour: 18, minute: 0), repeats: true)
                )
            )
            try await center.pause(.identifiers(["med"]))

            // Only the body changes; the reminder stays off.
            #expect(try await center.update(identifier: "med", content: .init(body: "Take two pills")) == nil)
            var listed = try #require(try await center.pendingNotificationRequests().first)
            #expect(listed.content.title == "Medicine")
            #expect(listed.content.body == "Take two pills")
            #expect(!listed.isEnabled)

            // A new schedule, and a field cleared.
            try await center.resume(.identifiers(["med"]))
            let weekly = NotificationTrigger.calendar(
                matching: DateComponents(hour: 8, minute: 0, weekday: 2),
                repeats: true
            )
            let next = try #require(try await center.update(identifier: "med", trigger: weekly, clearing: [.badge]))
            let expected = try Self.paris().nextDate(
                after: Date(),
                matching: DateComponents(hour: 8, minute: 0, weekday: 2),
                matchingPolicy: .strict
            )
            #expect(next == expected)
            listed = try #require(try await center.pendingNotificationRequests().first)
            #expect(listed.content.badge == nil)
            #expect(listed.content.sound == "default")
            #expect(listed.isEnabled)
            guard case .rule(let rrule, _) = listed.trigger.kind else {
                Issue.record("listed as \(listed.trigger)")
                return
            }
            #expect(rrule == "FREQ=WEEKLY;BYSECOND=0;BYMINUTE=0;BYHOUR=8;BYDAY=MO")

            await #expect(throws: ChimeClientError(.notFound)) {
                try await center.update(identifier: "nothing", content: .init(body: "x"))
            }
        }
    }
}
