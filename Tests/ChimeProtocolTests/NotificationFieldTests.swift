import ChimeTestSupport
import Testing

@testable import ChimeEngine
@testable import ChimeProtocol
@testable import ChimeWorkerPolicy

/// ``NotificationField`` is the one declaration of a notification's fields: every field set
/// reaches every place that handles fields (decoder, journal, stored form, snapshot, `list`,
/// delivery), so that a place that misses one fails here.
@Suite struct NotificationFieldTests {
    static let base: JSONObject = ["id": "n", "fireDate": "2026-12-01T12:00:00Z"]

    /// For each field, a notification that sets it (with what it goes with), as a client sends it.
    static let samples: [NotificationField: JSONObject] = [
        .id: base,
        .fireDate: base,
        .after: ["id": "n", "after": 90],
        .alignTo: ["id": "n", "after": 90, "alignTo": "08:30", "timeZone": "Europe/Paris"],
        .timeZone: with(["timeZone": "Asia/Shanghai"]),
        .repeatInterval: with(["repeatInterval": "day"]),
        .rrule: with(["rrule": "FREQ=WEEKLY;BYDAY=MO"]),
        .count: with(["repeatInterval": "day", "count": 3]),
        .until: with(["repeatInterval": "day", "until": "2026-12-31T00:00:00Z"]),
        .exdates: with(["repeatInterval": "day", "exdates": ["2026-12-02T12:00:00Z"]]),
        .leadTime: with(["leadTime": 60]),
        .alertTitle: with(["alertTitle": "Title"]),
        .alertBody: with(["alertBody": "Body"]),
        .alertBodies: with(["alertBodies": ["One", "Two"]]),
        .alertAction: with(["alertAction": "Open"]),
        .hasAction: with(["hasAction": false]),
        .soundName: with(["soundName": "default"]),
        .category: with(["category": "c"]),
        .threadId: with(["threadId": "meds"]),
        .interruptionLevel: with(["interruptionLevel": "timeSensitive"]),
        .badge: with(["badge": "+2"]),
        .userInfo: with(["userInfo": ["k": "v", "n": 1]]),
        .expiresAfter: with(["expiresAfter": 3600.5]),
        .misfire: with(["misfire": "skip"]),
        .ignoreQuietHours: with(["ignoreQuietHours": true]),
        .enabled: with(["enabled": false]),
        .keepAfterFiring: with(["keepAfterFiring": true]),
        .channels: with(["channels": "mqtt"]),
    ]

    /// Two notifications that set every field between them (some exclude others).
    static let together: [JSONObject] = [
        with(
            NotificationField.allCases.filter { ![.after, .alignTo, .rrule, .alertBodies, .enabled].contains($0) }
                .compactMap { field in samples[field]?[field.wireName].map { (field.wireName, $0) } }
        ),
        [
            "id": "m", "after": 90, "alignTo": "08:30", "timeZone": "Europe/Paris", "rrule": "FREQ=DAILY;COUNT=5",
            "alertBodies": ["A", "B"], "enabled": true,
        ],
    ]

    static func with(_ members: [(String, JSON)]) -> JSONObject {
        var o = base
        for (key, value) in members { o[key] = value }
        return o
    }

    static func with(_ members: JSONObject) -> JSONObject { with(members.members.map { ($0.key, $0.value) }) }

    @Test func everyFieldHasASample() {
        for field in NotificationField.allCases {
            let sample = Self.samples[field]
            #expect(sample?[field.wireName] != nil, "no sample sets \(field)")
        }
        #expect(Set(Self.together.flatMap(\.keys)).isSuperset(of: NotificationField.allCases.map(\.wireName)))
    }

    /// The spec shares its storage between copies: a change to one copy leaves the others as they
    /// were, and specs compare and hash by value, not by storage.
    @Test func aCopyOfASpecChangesAlone() {
        var a = NotificationSpec()
        a.id = "a"
        a.alertBody = "Take it"
        var b = a
        b.alertBody = "Changed"
        b.seed = 7
        #expect(a.alertBody == "Take it")
        #expect(a.seed == 0)
        #expect(b.id == "a")
        #expect(b.alertBody == "Changed")
        var c = NotificationSpec()
        c.id = "a"
        c.alertBody = "Take it"
        #expect(a == c)
        #expect(a.hashValue == c.hashValue)
        #expect(a != b)
    }

    /// A property added to the spec without a field (or the other way round) fails here.
    @Test func theSpecHasAPropertyForEachFieldAndNoOther() throws {
        // The fields live in the spec's shared storage.
        let fields = try #require(Mirror(reflecting: NotificationSpec()).descendant("storage", "fields"))
        let properties = Mirror(reflecting: fields).children.compactMap(\.label)
        #expect(properties == NotificationField.allCases.map(\.wireName) + ["seed"])
        var extras = NotificationSpec()
        extras.rrule = try? RecurrenceRule(parsing: "FREQ=DAILY")
        let stored = Mirror(reflecting: SpecExtras(extras)).children.compactMap(\.label)
        // hasRule is derived from rrule (SpecExtras.hasRule).
        #expect(stored == NotificationField.extras.map(\.wireName) + ["seed", "hasRule"])
    }

    @Test func userInfoIsTheTailOfTheContent() {
        #expect(NotificationField.content.last == .userInfo)
        #expect(NotificationCoding.fields == Set(NotificationField.allCases.map(\.wireName)))
    }

    /// A notification written once when it is scheduled (``NotificationCoding/encoded(_:)``) is
    /// the same bytes as each writer on its own: the listed form, the stored content, the record.
    @Test func aNotificationWrittenOnceIsWhatEachWriterWrites() throws {
        #expect(NotificationField.allCases.count <= 64, "a field's bit in NotificationCoding.fieldBit")
        let local: JSONObject = ["id": "l", "fireDate": "2026-12-01T18:00:00", "alertBody": "q\"é\u{1}"]
        for object in Array(Self.samples.values) + Self.together + [local] {
            let spec = try NotificationCoding.decode(FieldReader(object), limits: CommandLimits())
            let resolved = ResolvedNotification(
                id: spec.id ?? "n",
                fireDate: spec.fireDate ?? .instant(Instant(milliseconds: 0)),
                spec
            )
            .encodedOnce()
            let encoded = try #require(resolved.encoded)
            var listed: [UInt8] = []
            NotificationCoding.write(resolved.spec, to: &listed)
            #expect(encoded.listed == listed, "\(object)")
            var content: [UInt8] = []
            #expect(NotificationCoding.writeContent(resolved.spec, to: &content) == encoded.userInfoStart)
            #expect(encoded.content == content, "\(object)")
            var record: [UInt8] = []
            NotificationCoding.write(resolved.spec, internal: true, to: &record)
            var fromEncoded: [UInt8] = []
            NotificationCoding.writeRecord(resolved, to: &fromEncoded)
            #expect(fromEncoded == record, "\(object)")
        }
    }

    @Test(arguments: NotificationField.allCases)
    func aFieldAloneReachesEveryPlace(_ field: NotificationField) throws {
        try Self.followThrough([try #require(Self.samples[field])], checking: [field])
    }

    @Test func everyFieldAtOnceReachesEveryPlace() throws {
        try Self.followThrough(Self.together, checking: NotificationField.allCases)
    }

    /// Schedules `notifications` (through the decoder and the journal), then checks that each of
    /// `fields` they set is listed as given, the same after replaying the journal and after a
    /// snapshot, and delivered where deliveries carry it.
    static func followThrough(_ notifications: [JSONObject], checking fields: [NotificationField]) throws {
        var h = Harness()
        let payload: JSONObject = ["notifications": .array(notifications.map(JSON.object))]
        h.ok("d", .schedule, JSON.object(payload).text)
        let listed = h.list("d")
        try #require(listed.count == notifications.count)
        for (given, row) in zip(notifications.sorted { $0["id"]!.stringValue! < $1["id"]!.stringValue! }, listed) {
            for field in fields where given[field.wireName] != nil {
                if field.storage == .resolvedIntoFireDate {
                    #expect(row[field.wireName] == nil, "\(field) is listed after it was resolved")
                    #expect(row["fireDate"] != nil)
                } else {
                    #expect(
                        row[field.wireName] == given[field.wireName],
                        "\(field) listed as \(String(describing: row))"
                    )
                }
            }
        }
        // The journal's writer writes what the encoder's object holds.
        guard
            case .success(let request) = CommandDecoder().decode(
                deviceId: "d",
                op: .schedule,
                payload: JSON.object(payload).bytes
            ),
            case .schedule(let specs, _, _) = request.command
        else {
            Issue.record("the notifications do not decode")
            return
        }
        for spec in specs {
            for `internal` in [false, true] {
                var written: [UInt8] = []
                NotificationCoding.write(spec, internal: `internal`, to: &written)
                #expect(written == JSON.object(NotificationCoding.encode(spec, internal: `internal`)).bytes)
            }
        }
        // The same bytes after a replay of the journal and after a snapshot.
        #expect(h.list("d", engine: h.replayed()).map { JSON.object($0).text } == listed.map { JSON.object($0).text })
        var entries: [[UInt8]] = []
        h.engine.snapshot.forEachEntry { entries.append($0) }
        let restoredRestorer = EngineRestorer()
        for entry in entries { try restoredRestorer.restore(snapshotEntry: entry) }
        let restored = restoredRestorer.finish()
        restored.setConnected(true)
        #expect(h.list("d", engine: restored).map { JSON.object($0).text } == listed.map { JSON.object($0).text })

        // Delivered: enable what was scheduled paused, then let a year pass.
        h.ok("d", .resume, #"{"all": true}"#)
        let deliveries = h.advance(seconds: 366 * 86_400)
        for given in notifications {
            let id = given["id"]!
            let delivery = try #require(deliveries.first { $0["id"] == id }, "\(id) was not delivered")
            for field in fields where given[field.wireName] != nil {
                guard let key = field.deliveredAs else { continue }
                #expect(delivery[key] != nil, "\(field) is not delivered as \(key): \(delivery)")
                if key == field.wireName && field != .badge {
                    #expect(
                        delivery[key] == given[field.wireName],
                        "\(field) delivered as \(String(describing: delivery[key]))"
                    )
                }
            }
        }
    }

    /// A snooze keeps what is delivered and how; it drops the schedule.
    @Test func aSnoozeKeepsWhatItDelivers() throws {
        var h = Harness()
        let notification = Self.together[0]
        h.ok("d", .schedule, JSON.object(notification).text)
        h.ok("d", .snooze, #"{"id": "n", "after": 60}"#)
        let deliveries = h.advance(seconds: 60)
        let snooze = try #require(deliveries.first { $0["id"] == "n~snooze" })
        for field in NotificationField.allCases where field.keptBySnooze {
            guard let key = field.deliveredAs, key == field.wireName, notification[key] != nil else { continue }
            #expect(snooze[key] != nil, "the snooze lost \(field)")
        }
    }
}
