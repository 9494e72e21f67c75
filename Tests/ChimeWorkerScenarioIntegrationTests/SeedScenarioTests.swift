import ChimeCore
import ChimeTestSupport
import Foundation
import Testing

/// The five uses Chime was made for, the ones apps built on `UILocalNotification`, each run end
/// to end: the real chimed and mosquitto, a phone that uses receipts (it acknowledges what it shows,
/// and reads its inbox when it comes back from being switched off) and a backend. Where a use is
/// about a day of the week or a time of day, chimed's wall clock starts just before that time
/// (``FakeTime``, libfaketime), and a restart moves it on, as days go by while the worker runs.
@Suite(.serialized) struct SeedScenarioTests {
    /// A phone: its own MQTT connection, subscribed to its notifications while it is on.
    final class Phone: Sendable {
        let device: String
        let client: CommandClient

        init(_ device: String, on fixture: WorkerFixture) async throws {
            self.device = device
            client = try await CommandClient(broker: fixture.broker, clientId: "phone-\(device)")
            try await client.subscribeDeliveries(device)
        }

        func off() { client.stop() }

        /// Waits for the `count`th delivery and returns those received.
        func received(_ count: Int, timeout: Duration = .seconds(60)) async -> [JSONObject] {
            _ = await eventually(timeout: timeout) { client.deliveries(device).count >= count }
            return client.deliveries(device)
        }

        /// Everything in its inbox, page after page, oldest first.
        func inbox() async throws -> [JSONObject] {
            var all: [JSONObject] = []
            var cursor: String?
            repeat {
                let payload = cursor.map { #"{"limit":2,"cursor":"\#($0)"}"# } ?? #"{"limit":2}"#
                let page = try await client.ok(device, .inbox, payload)
                all += page["deliveries"]?.arrayValue?.compactMap(\.objectValue) ?? []
                cursor = page["cursor"]?.stringValue
            } while cursor != nil
            return all
        }

        @discardableResult
        func ack(_ deliveries: [JSONObject], badge: String? = nil) async throws -> JSONObject {
            let ids = JSON.array(deliveries.compactMap { $0["fireId"] }).text
            let badgeMember = badge.map { #","badge":\#($0)"# } ?? ""
            return try await client.ok(device, .ack, #"{"fireIds":\#(ids)\#(badgeMember)}"#)
        }

        /// `history`: `(fireId, state)`, newest first.
        func history() async throws -> [(fireId: String, state: String)] {
            let rows = try await client.ok(device, .history, "{}")["deliveries"]?.arrayValue ?? []
            return rows.compactMap { row in
                guard let o = row.objectValue, let f = o["fireId"]?.stringValue, let s = o["state"]?.stringValue else {
                    return nil
                }
                return (f, s)
            }
        }
    }

    /// Waits until the device's inbox holds `count` deliveries (published while its phone was off).
    static func inboxHolds(_ count: Int, _ device: String, _ f: WorkerFixture) async -> Bool {
        await eventually(timeout: .seconds(60)) {
            let page = try? await f.ok(device, .inbox, #"{"limit":1000}"#)
            return page?["deliveries"]?.arrayValue?.count == count
        }
    }

    /// Stops chimed and starts it again with its wall clock at `instant` (what a weekend, or three
    /// days, do to a worker that runs through them: its data directory is the same).
    static func restart(_ f: WorkerFixture, at instant: String) async throws {
        try #require(await f.stopWorker() == .exited(0))
        try await f.startWorker(environment: try FakeTime.environment(startingAt: instant))
    }

    // MARK: - 1. Every Monday to Friday at 18:00, take your medicine

    @Test func medicineEveryMondayToFridayAt18() async throws {
        // Friday 4 December 2026, 17:59:40 in Paris: 20 s before 18:00, room for a loaded machine.
        let f = try await WorkerFixture.start(environment: try FakeTime.environment(startingAt: "2026-12-04T16:59:40Z"))
        defer { Task { await f.stop() } }
        let phone = try await Phone("anna-phone", on: f)
        try await phone.client.ok(phone.device, .device, #"{"timeZone":"Europe/Paris","receipts":true}"#)
        let scheduled = try await f.ok(
            phone.device,
            .schedule,
            #"{"id":"medicine","fireDate":"2026-12-04T18:00:00","rrule":"FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR","alertBody":"Take your medicine","soundName":"default","userInfo":{"kind":"medicine"}}"#
        )
        #expect(scheduled["scheduled"] == [["id": "medicine", "nextFireDate": "2026-12-04T17:00:00Z"]])
        // Friday, then Monday to Friday: never a Saturday or a Sunday.
        let preview = try await f.ok(
            phone.device,
            .preview,
            #"{"id":"medicine","count":6,"from":"2026-12-04T16:00:00Z"}"#
        )
        #expect(
            preview["fireDates"]
                == [
                    "2026-12-04T17:00:00Z", "2026-12-07T17:00:00Z", "2026-12-08T17:00:00Z", "2026-12-09T17:00:00Z",
                    "2026-12-10T17:00:00Z", "2026-12-11T17:00:00Z",
                ]
        )

        // Friday 18:00: the phone shows it and acknowledges it.
        let friday = await phone.received(1)
        #expect(friday.map { $0["fireId"] } == ["medicine@2026-12-04T17:00:00Z"])
        #expect(friday.first?["alertBody"] == "Take your medicine")
        #expect(friday.first?["userInfo"] == ["kind": "medicine"])
        #expect(try await phone.ack(friday)["acknowledged"] == 1)
        #expect(try await phone.inbox().isEmpty)
        #expect(try await f.list(phone.device).first?["nextFireDate"] == "2026-12-07T17:00:00Z")

        // The phone is switched off for the weekend; the worker runs on to Monday 17:59:40.
        phone.off()
        try await Self.restart(f, at: "2026-12-07T16:59:40Z")
        #expect(await Self.inboxHolds(1, phone.device, f))

        // Monday evening the phone is switched on: its inbox has Monday's, and only Monday's.
        let back = try await Phone(phone.device, on: f)
        let inbox = try await back.inbox()
        #expect(inbox.map { $0["fireId"] } == ["medicine@2026-12-07T17:00:00Z"])
        #expect(inbox.first?["alertBody"] == "Take your medicine")
        try await back.ack(inbox)
        #expect(try await back.inbox().isEmpty)
        let history = try await back.history()
        #expect(history.map(\.fireId) == ["medicine@2026-12-07T17:00:00Z", "medicine@2026-12-04T17:00:00Z"])
        #expect(history.map(\.state) == ["acknowledged", "acknowledged"])
        #expect(try await f.list(phone.device).first?["nextFireDate"] == "2026-12-08T17:00:00Z")
    }

    // MARK: - 2. The exam starts at 07:00

    @Test func examDayAt0700WhileThePhoneIsOff() async throws {
        // 15 December 2026, 06:59:40 in Shanghai; the phone is off, charging.
        let f = try await WorkerFixture.start(environment: try FakeTime.environment(startingAt: "2026-12-14T22:59:40Z"))
        defer { Task { await f.stop() } }
        let device = "li-phone"
        try await f.ok(device, .device, #"{"timeZone":"Asia/Shanghai","receipts":true}"#)
        try await f.ok(
            device,
            .schedule,
            #"{"id":"exam","fireDate":"2026-12-15T07:00:00","alertTitle":"Exam","alertBody":"The exam starts at 07:00","alertAction":"Open","soundName":"default","userInfo":{"room":"B12"}}"#
        )
        #expect(await Self.inboxHolds(1, device, f))
        // Fired once, and gone from the pending list.
        #expect(try await f.list(device).isEmpty)

        let phone = try await Phone(device, on: f)
        let inbox = try await phone.inbox()
        #expect(inbox.count == 1)
        let exam = try #require(inbox.first)
        #expect(exam["fireId"] == "exam@2026-12-14T23:00:00Z")
        #expect(exam["alertTitle"] == "Exam")
        #expect(exam["alertBody"] == "The exam starts at 07:00")
        #expect(exam["alertAction"] == "Open")
        #expect(exam["userInfo"] == ["room": "B12"])
        // The phone did not get it live: it was off.
        #expect(phone.client.deliveries(device).isEmpty)
        try await phone.ack(inbox)
        #expect(try await phone.history().map(\.state) == ["acknowledged"])
        #expect(try await phone.inbox().isEmpty)
    }

    // MARK: - 3. In 8 seconds, with a badge and userInfo

    @Test func inEightSecondsWithABadgeAndUserInfo() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        let phone = try await Phone("game-phone", on: f)
        try await phone.client.ok(phone.device, .device, #"{"receipts":true}"#)
        // The seed's own names: applicationIconBadgeNumber = 1.
        let scheduled = try await f.ok(
            phone.device,
            .schedule,
            #"{"id":"reward","after":8,"alertBody":"Your reward is waiting","applicationIconBadgeNumber":1,"userInfo":{"screen":"rewards","coins":50}}"#
        )
        let due = try #require(scheduled["scheduled"]?.arrayValue?.first?.objectValue?["nextFireDate"]?.stringValue)
        let delivered = await phone.received(1)
        let reward = try #require(delivered.first)
        #expect(reward["fireDate"] == .string(due))
        #expect(reward["badge"] == 1)
        #expect(reward["userInfo"] == ["screen": "rewards", "coins": 50])
        #expect(reward["alertBody"] == "Your reward is waiting")
        let firedAt = try #require(reward["firedAt"]?.stringValue.flatMap { DateTimeValue(iso8601: $0) })
        let dueAt = try #require(DateTimeValue(iso8601: due))
        if case .instant(let sent) = firedAt, case .instant(let planned) = dueAt {
            #expect(sent >= planned)
        }
        // The app opens it: acknowledged, and the badge goes down once however often that is sent.
        #expect(try await phone.ack([reward], badge: #""-1""#)["acknowledged"] == 1)
        #expect(try await phone.ack([reward], badge: #""-1""#)["acknowledged"] == 0)
        #expect(try await f.ok(phone.device, .device, "{}")["badge"] == 0)
        #expect(try await phone.history().map(\.state) == ["acknowledged"])
    }

    // MARK: - 4. A reminder list: on/off switches, edit, delete, remind me 15 minutes before

    @Test func aReminderListWithSwitchesEditsDeletesAndFifteenMinutesBefore() async throws {
        let f = try await WorkerFixture.start()
        defer { Task { await f.stop() } }
        let phone = try await Phone("todo-phone", on: f)
        try await phone.client.ok(phone.device, .device, #"{"timeZone":"Europe/Paris","receipts":true}"#)
        let now = Date()
        func at(_ seconds: TimeInterval) -> String {
            let formatter = ISO8601DateFormatter()
            return formatter.string(from: now.addingTimeInterval(seconds))
        }
        let list = #""userInfo":{"list":"todo"}"#
        // The dentist is in 15 minutes and 5 seconds: "remind me 15 minutes before" is due in 5 s.
        let reminders = [
            #"{"id":"dentist","fireDate":"\#(at(905))","leadTime":900,"alertBody":"Dentist in 15 minutes",\#(list)}"#,
            #"{"id":"call-mom","fireDate":"\#(at(10))","alertBody":"Call mom",\#(list)}"#,
            #"{"id":"gym","fireDate":"\#(at(10))","alertBody":"Gym",\#(list)}"#,
            #"{"id":"groceries","fireDate":"\#(at(86400))","alertBody":"Groceries",\#(list)}"#,
        ]
        try await f.ok(
            phone.device,
            .schedule,
            #"{"notifications":[\#(reminders.joined(separator: ","))]}"#
        )
        // Switch "call mom" off, edit it while it is off, delete "gym".
        #expect(try await f.ok(phone.device, .pause, #"{"id":"call-mom"}"#)["paused"] == ["call-mom"])
        let edited = try await f.ok(phone.device, .update, #"{"id":"call-mom","alertBody":"Call mom back"}"#)
        #expect(edited["updated"] == ["id": "call-mom", "nextFireDate": nil])
        #expect(try await f.ok(phone.device, .cancel, #"{"id":"gym"}"#)["cancelled"] == ["gym"])
        let rows =
            try await f.ok(phone.device, .list, #"{"match":{"userInfo":{"list":"todo"}}}"#)["notifications"]?
            .arrayValue?.compactMap(\.objectValue) ?? []
        #expect(rows.map { $0["id"] } == ["call-mom", "dentist", "groceries"])
        #expect(rows.map { $0["enabled"] } == [false, true, true])
        #expect(rows.first?["alertBody"] == "Call mom back")

        // The dentist's reminder comes 15 minutes early; nothing else comes, though "call mom"
        // and "gym" were due a second later.
        let first = await phone.received(1)
        #expect(first.map { $0["id"] } == ["dentist"])
        #expect(first.first?["occurrenceDate"] == .string(at(905)))
        #expect(first.first?["fireDate"] == .string(at(5)))
        try await phone.ack(first)
        // Past the time "call mom" and "gym" had, plus a margin, with a positive control at it.
        try await f.ok(phone.device, .schedule, #"{"id":"control","fireDate":"\#(at(12))",\#(list)}"#)
        let second = await phone.received(2)
        #expect(second.map { $0["id"] } == ["dentist", "control"])
        try await phone.ack(second)

        // Switched on again: its time passed while it was off, so it fires at once, as edited.
        #expect(try await f.ok(phone.device, .update, #"{"id":"call-mom","enabled":true}"#)["updated"] != nil)
        let third = await phone.received(3)
        #expect(third.map { $0["id"] } == ["dentist", "control", "call-mom"])
        #expect(third.last?["alertBody"] == "Call mom back")
        try await phone.ack(third)
        #expect(try await phone.inbox().isEmpty)
        #expect(try await f.list(phone.device).map { $0["id"] } == ["groceries"])
        #expect(try await phone.history().map(\.state) == ["acknowledged", "acknowledged", "acknowledged"])
    }

    // MARK: - 5. Away 24 h, 72 h and 168 h: call the player back at noon

    @Test func comeBackCampaignAtNoonAfter24And72And168Hours() async throws {
        // The player leaves on Tuesday 1 December 2026 at 15:00 in Paris.
        let f = try await WorkerFixture.start(environment: try FakeTime.environment(startingAt: "2026-12-01T14:00:00Z"))
        defer { Task { await f.stop() } }
        let device = "player-7"
        try await f.ok(device, .device, #"{"timeZone":"Europe/Paris","receipts":true}"#)
        func campaign() -> String {
            let steps = [(86400, "We miss you"), (259200, "Your crops are ready"), (604800, "A gift is waiting")]
            let items = steps.map { after, text in
                #"{"id":"comeback-\#(after / 3600)h","after":\#(after),"alignTo":"12:00","alertBody":"\#(text)","userInfo":{"campaign":"comeback"}}"#
            }
            return
                #"{"notifications":[\#(items.joined(separator: ","))],"replace":{"match":{"userInfo":{"campaign":"comeback"}}}}"#
        }
        let scheduled = try await f.ok(device, .schedule, campaign())
        // At the first noon at or after 24, 72 and 168 hours away.
        #expect(
            scheduled["scheduled"]
                == [
                    ["id": "comeback-24h", "nextFireDate": "2026-12-03T11:00:00Z"],
                    ["id": "comeback-72h", "nextFireDate": "2026-12-05T11:00:00Z"],
                    ["id": "comeback-168h", "nextFireDate": "2026-12-09T11:00:00Z"],
                ]
        )

        // Thursday, 20 s before noon: the first call goes out; the player's phone is off.
        try await Self.restart(f, at: "2026-12-03T10:59:40Z")
        #expect(await Self.inboxHolds(1, device, f))
        let phone = try await Phone(device, on: f)
        let inbox = try await phone.inbox()
        #expect(inbox.map { $0["fireId"] } == ["comeback-24h@2026-12-03T11:00:00Z"])
        #expect(inbox.first?["alertBody"] == "We miss you")
        try await phone.ack(inbox)
        // The player is back: the backend calls the rest of the campaign off.
        let cancelled = try await f.ok(device, .cancel, #"{"match":{"userInfo":{"campaign":"comeback"}}}"#)
        #expect(Set(cancelled["cancelled"]?.arrayValue ?? []) == ["comeback-72h", "comeback-168h"])
        // A positive control just after the 72-hour call would have fired.
        try await f.ok(device, .schedule, #"{"id":"daily-bonus","fireDate":"2026-12-05T11:00:02Z"}"#)

        // Saturday noon comes: the control fires, the cancelled call does not.
        try await Self.restart(f, at: "2026-12-05T10:59:40Z")
        let live = await phone.received(1)
        #expect(live.map { $0["id"] } == ["daily-bonus"])
        try await phone.ack(live)
        #expect(
            try await phone.history().map(\.fireId) == [
                "daily-bonus@2026-12-05T11:00:02Z", "comeback-24h@2026-12-03T11:00:00Z",
            ]
        )
        #expect(try await f.list(device).isEmpty)
    }
}
