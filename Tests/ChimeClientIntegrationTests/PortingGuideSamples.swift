// docs/porting.md's Swift samples. Every ```swift block of the guide is here verbatim (the runner of
// the docs' samples checks it), each as the body of a function of `PortingGuide`; PortingGuideTests
// runs them against a real chimed and mosquitto. The guide's first block is the three lines below:
// in the tests, each function's `broker` parameter (the test broker's URL) stands for it.
import ChimeClientMQTT  // re-exports ChimeClient
import Foundation

let broker = "mqtt://127.0.0.1:1883"  // make run's mosquitto; give your broker's URL

/// The samples of docs/porting.md, in the guide's order. A function that the guide continues in a
/// later block returns its `center` (the line after the block), and so do those whose results the
/// tests check.
enum PortingGuide {
    // MARK: - "Before you port": the app starts and looks at its inbox

    /// Receipts on, and what fired while the app was not connected (the launch options' key).
    static func launchInbox(broker: String) async throws -> (ChimeNotificationCenter, ChimeInbox) {
        let center = try ChimeNotificationCenter(deviceId: "launch-swift", brokerURL: broker)
        try await center.setDeviceSettings(receipts: true)  // once: deliveries wait until acknowledged
        // ... on every start, before anything else:
        let inbox = try await center.inbox()  // what fired while the app was not connected
        for delivery in inbox.deliveries {
            print("missed:", delivery.fireId, delivery.content.body ?? "")
        }
        if !inbox.deliveries.isEmpty {  // shown: out of the inbox, and the badge back down
            try await center.ack(fireIds: inbox.deliveries.map(\.fireId), badge: .absolute(0))
        }
        return (center, inbox)
    }

    // MARK: - 1. Monday to Friday at 18:00

    static func medicine(broker: String) async throws -> (ChimeNotificationCenter, [Date]) {
        let center = try ChimeNotificationCenter(deviceId: "medicine-swift", brokerURL: broker)
        try await center.setDeviceSettings(timeZone: "Europe/Paris")  // on the phone: TimeZone.current.identifier
        try await center.add(
            NotificationRequest(
                identifier: "medicine",
                content: NotificationContent(
                    title: "Medicine",
                    body: "Take your medicine",
                    sound: "default",
                    userInfo: ["kind": "med"]
                ),
                trigger: .rule(
                    "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
                    startingAt: .wallClock(DateComponents(year: 2026, month: 12, day: 1, hour: 18, minute: 0)),
                    timeZone: .device  // the wall clock of wherever the phone is
                )
            )
        )
        let next = try await center.preview(identifier: "medicine", count: 5)  // Monday to Friday, 18:00
        for date in next { print(date) }
        return (center, next)
    }

    // MARK: - 2. Exam day at 07:00 in Shanghai, and the evening before

    static func exam(broker: String) async throws -> ChimeNotificationCenter {
        let center = try ChimeNotificationCenter(deviceId: "exam-swift", brokerURL: broker)
        let shanghai = TimeZone(identifier: "Asia/Shanghai")  // the exam's clock, wherever the phone is
        let exam: JSONObject = ["exam": "gaokao-2030"]
        try await center.add(
            contentsOf: [
                NotificationRequest(
                    identifier: "exam",
                    content: NotificationContent(title: "Exam day", body: "The exam starts at 09:00", userInfo: exam),
                    trigger: .calendar(
                        matching: DateComponents(timeZone: shanghai, year: 2030, month: 6, day: 7, hour: 7, minute: 0),
                        repeats: false
                    )
                ),
                NotificationRequest(
                    identifier: "exam-eve",
                    content: NotificationContent(body: "Exam tomorrow: ID card and pencils", userInfo: exam),
                    trigger: .calendar(
                        matching: DateComponents(timeZone: shanghai, year: 2030, month: 6, day: 6, hour: 20, minute: 0),
                        repeats: false
                    )
                ),
            ]
        )
        for request in try await center.pendingNotificationRequests() {
            print(request.identifier, request.nextFireDate.map { "\($0)" } ?? "off")
        }
        return center
    }

    // MARK: - 3. In 8 seconds, with a badge and userInfo

    static func tea(broker: String) async throws -> ChimeNotificationCenter {
        let center = try ChimeNotificationCenter(deviceId: "tea-swift", brokerURL: broker)
        let deliveries = center.deliveries  // every delivery from now on: application(_:didReceive:)
        try await center.add(
            NotificationRequest(
                identifier: "tea",
                content: NotificationContent(
                    body: "Your tea is ready",
                    badge: .increment(1),  // "+1": the server counts; not 1
                    userInfo: ["kind": "tea", "cup": 2]
                ),
                trigger: .timeInterval(8)
            )
        )
        for await delivery in deliveries {  // 8 seconds later
            let kind = delivery.userInfo?["kind"]?.stringValue ?? ""  // userInfo, as the app put it
            print(delivery.content.body ?? "", "badge", delivery.badge ?? 0, kind)
            break
        }
        return center
    }

    // MARK: - 4. A reminder list

    static func remindersAdd(broker: String) async throws -> ChimeNotificationCenter {
        let center = try ChimeNotificationCenter(deviceId: "reminders-swift", brokerURL: broker)
        try await center.setDeviceSettings(timeZone: "America/New_York")
        try await center.add(
            contentsOf: [
                NotificationRequest(
                    identifier: "dentist",
                    content: NotificationContent(title: "Dentist", body: "Dentist at 10:30"),
                    trigger: .date(.wallClock(DateComponents(year: 2030, month: 3, day: 14, hour: 10, minute: 30)))
                ),
                NotificationRequest(
                    identifier: "plants",
                    content: NotificationContent(body: "Water the plants"),
                    trigger: .date(
                        .wallClock(DateComponents(year: 2026, month: 12, day: 5, hour: 9, minute: 0)),  // a Saturday
                        repeatInterval: .weekOfYear
                    )
                ),
                NotificationRequest(
                    identifier: "bins",
                    content: NotificationContent(body: "Put the bins out"),
                    trigger: .calendar(matching: DateComponents(hour: 19, minute: 0, weekday: 3), repeats: true)
                ),
            ]
        )
        return center
    }

    static func remindersSwitchOffAndEdit(center: ChimeNotificationCenter) async throws {
        try await center.pause(.identifiers(["plants"]))  // the row's switch, off
        try await center.update(
            identifier: "plants",
            content: NotificationContent(body: "Water the plants and the herbs")
        )
        // still off: update keeps the switch (add, a full replace, would turn it on unless enabled: false)
    }

    static func remindersLeadTime(center: ChimeNotificationCenter) async throws {
        let dentist = try await center.pendingNotificationRequests().first { $0.identifier == "dentist" }
        if var trigger = dentist?.trigger {
            trigger.leadTime = 15 * 60  // "remind me 15 minutes before": leadTime 900
            try await center.update(identifier: "dentist", trigger: trigger)
        }
    }

    static func remindersDeleteAndCheck(center: ChimeNotificationCenter) async throws {
        try await center.removePendingNotificationRequests(withIdentifiers: ["bins"])  // delete
        for row in try await center.pendingNotificationRequests() {
            let next = row.nextFireDate.map { "\($0)" } ?? "-"
            print(row.identifier, row.isEnabled ? "on" : "off", next, row.content.body ?? "")
        }
        // dentist on 2030-03-14 14:15:00 +0000 Dentist at 10:30
        // plants off - Water the plants and the herbs
    }

    // MARK: - 5. Come back: 24 h, 72 h and 168 h later, at noon

    static func comebackLeave(broker: String) async throws -> (ChimeNotificationCenter, [ScheduledNotification]) {
        let center = try ChimeNotificationCenter(deviceId: "comeback-swift", brokerURL: broker)
        try await center.setDeviceSettings(timeZone: "Asia/Tokyo")
        let noon = TimeOfDay(hour: 12, minute: 0)
        let campaign: JSONObject = ["campaign": "comeback"]
        let scheduled = try await center.add(
            contentsOf: [
                NotificationRequest(
                    identifier: "comeback-1d",
                    content: NotificationContent(body: "Your crops are ready to harvest", userInfo: campaign),
                    trigger: .timeInterval(24 * 3600, alignedTo: noon)
                ),
                NotificationRequest(
                    identifier: "comeback-3d",
                    content: NotificationContent(body: "Your village misses you", userInfo: campaign),
                    trigger: .timeInterval(72 * 3600, alignedTo: noon)
                ),
                NotificationRequest(
                    identifier: "comeback-7d",
                    content: NotificationContent(body: "A gift is waiting for you", userInfo: campaign),
                    trigger: .timeInterval(168 * 3600, alignedTo: noon)
                ),
            ],
            replacing: .userInfo(campaign)  // the campaign of an earlier absence goes, in the same step
        )
        for notification in scheduled {
            print(notification.identifier, notification.nextFireDate.map { "\($0)" } ?? "-")
        }
        return (center, scheduled)
    }

    static func comebackReturn(center: ChimeNotificationCenter) async throws {
        try await center.removePendingNotificationRequests(matchingUserInfo: ["campaign": "comeback"])
    }
}
