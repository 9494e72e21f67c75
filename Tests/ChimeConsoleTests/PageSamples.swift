import ChimeConsole
import ChimeProtocol
import ChimeTime

/// Samples of what the protocol's replies hold, plain or with hostile strings in every field a
/// device or a worker chooses.
enum PageSamples {
    static let script = "<script>alert(1)</script>"
    static let breakout = "\"><img src=x onerror=alert(1)>"
    static let single = "'><svg onload=alert(1)>"
    /// The three, in one string.
    static let hostile = script + breakout + single

    static let now = Instant(seconds: 1_796_637_600)  // 2026-12-07T10:00:00Z

    static func operatorSession(_ csrf: String = "token-123") -> ConsolePages.SignedIn {
        .init(account: "alice", role: .operator, csrf: csrf)
    }

    static func viewerSession(_ csrf: String = "token-123") -> ConsolePages.SignedIn {
        .init(account: "victor", role: .viewer, csrf: csrf)
    }

    static func device(zone: String = "Asia/Shanghai", text: String? = nil) -> JSONObject {
        var d: JSONObject = [
            "deviceId": "phone-1", "timeZone": .string(zone), "badge": 2,
            "quietHours": ["start": "22:00", "end": "07:00"], "pending": 2, "receipts": true, "history": true,
        ]
        if let text {
            d["push"] = [["id": .string(text), "provider": .string(text), "environment": .string(text)]]
            d["quietHours"] = ["start": .string(text), "end": .string(text)]
        }
        return d
    }

    static func notifications(text: String? = nil) -> [JSONObject] {
        [
            [
                "id": .string(text ?? "pill"), "alertTitle": .string(text ?? "Pills"),
                "alertBody": .string(text ?? "Take the evening pill"),
                "fireDate": "2026-12-01T18:00:00", "timeZone": "Asia/Shanghai",
                "rrule": "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "enabled": true,
                "nextFireDate": "2026-12-07T10:00:00Z", "firedCount": 4, "lastFiredAt": "2026-12-04T10:00:00.004Z",
                "userInfo": .object(JSONObject([(text ?? "tag", .string(text ?? "med")), ("n", 1)])),
            ],
            [
                "id": .string((text ?? "") + "exam"), "alertBodies": .array([.string(text ?? "Good luck"), "Go"]),
                "fireDate": "2026-12-05T07:00:00", "timeZone": .string(text ?? "Europe/Paris"), "enabled": false,
                "nextFireDate": nil, "firedCount": 0,
            ],
        ]
    }

    static func previews(text: String? = nil) -> [String: [String]] {
        [text ?? "pill": ["2026-12-07T10:00:00Z", "2026-12-08T10:00:00Z", text ?? "2026-12-09T10:00:00Z"]]
    }

    static func inbox(text: String? = nil) -> [JSONObject] {
        [
            [
                "deviceId": "phone-1", "id": .string(text ?? "pill"), "fireId": .string(text ?? "pill@x"),
                "fireDate": "2026-12-04T10:00:00Z", "firedAt": .string(text ?? "2026-12-04T10:00:00.004Z"),
                "late": false, "missed": 0, "deferred": false, "alertBody": .string(text ?? "Take the evening pill"),
                "alertTitle": .string(text ?? "Pills"),
            ]
        ]
    }

    static func history(text: String? = nil) -> [JSONObject] {
        let states = ["acknowledged", "unacknowledged", "delivered", "expired", "dropped", text ?? "delivered"]
        return states.map { state in
            [
                "fireId": "pill@2026-12-04T10:00:00Z", "id": .string(text ?? "pill"),
                "occurrenceDate": "2026-12-04T10:00:00Z", "fireDate": "2026-12-04T10:00:00Z",
                "firedAt": "2026-12-04T10:00:01.204Z", "late": true,
                "acknowledgedAt": state == "acknowledged" ? "2026-12-04T10:02:00Z" : nil, "state": .string(state),
                "mqtt": "acknowledged", "pushOutcome": .string(text ?? "accepted"),
                "push": [
                    [
                        "registration": .string(text ?? "apns-1a2b3c4d"), "outcome": "accepted",
                        "reason": .string(text ?? "HTTP 200"), "at": "2026-12-04T10:00:01.300Z",
                    ]
                ],
            ]
        }
    }

    static func status(_ id: String, version: String? = nil) -> JSONObject {
        var s: JSONObject = [
            "state": "online", "workerId": .string(id), "instance": "i-1", "partition": "0/1",
            "startedAt": "2026-12-07T07:00:00Z", "pid": 42,
        ]
        if let version { s["version"] = .string(version) }
        return s
    }

    static func stats(_ id: String, at: String, commands: Int64, deliveries: Int64) -> JSONObject {
        [
            "workerId": .string(id), "at": .string(at), "pending": 120, "devices": 40,
            "commands": ["schedule": .int(commands - 1), "list": 1], "deliveries": .int(deliveries),
            "lateDeliveries": 1, "refusedDeliveries": 2, "takeovers": 0,
            "lateness": [
                "count": 87, "p50": 1, "p99": 2, "max": 3, "mean": 0.4, "buckets": ["le1": 85, "le2": 2],
            ],
            "loopStep": ["count": 0, "p50": nil, "p99": nil, "max": 0, "mean": nil, "buckets": [:]],
        ]
    }

    /// Every page, rendered with `text` (hostile or not) wherever the data allows, and `session`.
    static func pages(text: String?, session: ConsolePages.SignedIn) -> [(name: String, html: String)] {
        let id = text ?? "phone-1"
        let tag = text.map { (key: $0, value: $0) }
        let worker = FleetWorker(
            id: text ?? "w1",
            status: status(text ?? "w1", version: text),
            stats: stats(text ?? "w1", at: "2026-12-07T09:59:50Z", commands: 500, deliveries: 300),
            previousStats: stats(text ?? "w1", at: "2026-12-07T09:59:40Z", commands: 400, deliveries: 250)
        )
        return [
            ("login", ConsolePages.login(error: text, username: text ?? "")),
            ("fleet", ConsolePages.fleet(workers: [worker], now: now, signedIn: session)),
            ("fleet empty", ConsolePages.fleet(workers: [], now: now, statusTopic: text ?? "c/+", signedIn: session)),
            ("find", ConsolePages.find(query: nil, signedIn: session)),
            (
                "find results",
                ConsolePages.find(
                    query: id,
                    tag: tag,
                    found: ConsolePages.Found(
                        devices: [
                            FoundDevice(deviceId: id, pending: 3, matching: [id, "pill"], matchingCount: 12),
                            FoundDevice(deviceId: id + "2", pending: 0, matching: [], matchingCount: 0),
                        ],
                        next: id + "2",
                        after: text,
                        problems: text.map { ["Worker \($0) did not answer in time."] } ?? []
                    ),
                    signedIn: session
                )
            ),
            (
                "find none",
                ConsolePages.find(query: id, found: ConsolePages.Found(devices: [], next: nil), signedIn: session)
            ),
            ("find error", ConsolePages.find(query: id, error: text ?? "bad", signedIn: session)),
            (
                "edit",
                ConsolePages.edit(
                    device: id,
                    notification: notifications(text: text)[0],
                    signedIn: session
                )
            ),
            (
                "edit confirm",
                ConsolePages.confirmEdit(
                    device: id,
                    id: text ?? "pill",
                    changes: [
                        ConsolePages.Change(field: "alertBody", from: text ?? "Take it", to: text ?? "Take two"),
                        ConsolePages.Change(field: "alertTitle", from: "", to: ""),
                    ],
                    signedIn: session
                )
            ),
            (
                "device",
                ConsolePages.device(
                    id: id,
                    device: device(text: text),
                    notifications: notifications(text: text),
                    previews: previews(text: text),
                    inbox: inbox(text: text),
                    history: history(text: text),
                    tagFilter: tag,
                    signedIn: session
                )
            ),
            (
                "device empty",
                ConsolePages.device(
                    id: id,
                    device: device(zone: text ?? "UTC"),
                    notifications: [],
                    inbox: [],
                    history: [],
                    tagFilter: tag,
                    signedIn: session
                )
            ),
            (
                "device unavailable",
                ConsolePages.device(
                    id: id,
                    device: device(zone: text ?? "UTC"),
                    notifications: [],
                    inbox: [],
                    history: [],
                    unavailable: [
                        .notifications: text ?? "The worker refused the list (error rate_limited).",
                        .inbox: text ?? "No worker answered the inbox.", .history: text ?? "The history failed.",
                    ],
                    signedIn: session
                )
            ),
            (
                "confirm",
                ConsolePages.confirm(action: .snooze, device: id, ids: [id, "b"], snoozeMinutes: 15, signedIn: session)
            ),
            ("confirm none", ConsolePages.confirm(action: .cancel, device: id, ids: [], signedIn: session)),
            (
                "message",
                ConsolePages.message(
                    title: text ?? "Paused",
                    text: text ?? "Paused 2 notifications",
                    status: .error,
                    back: .init(title: text ?? "Back", path: ConsolePaths.device(id)),
                    signedIn: session
                )
            ),
        ]
    }
}
