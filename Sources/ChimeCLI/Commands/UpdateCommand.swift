import ChimeCore
import ChimeSupport

/// `chime update`: change some fields of a notification and keep the rest.
struct UpdateCommand: Command {
    static let name = "update"
    static let summary = "change some fields of a notification, keeping the rest and its on/off switch"
    static let synopsis = "chime update --device ID --id ID [notification flags] [--clear FIELD] [--enable] [options]"
    static let discussion = """
        Sends chimed's update command: only the fields the flags give change; the others, the
        on/off switch (unless --enable or --disabled is given), the delivery count and the creation
        time stay. A new --at, --in, --tz, --every, --on, --rrule, --times, --until, --except or --lead
        starts the series again from now; any other change applies from the next delivery.
        --clear FIELD removes a field (its protocol name: userInfo, badge, leadTime, ...).
        """
    static let specs: [Flags.Spec] =
        [ConnectionOptions.deviceSpec] + NotificationFlags.specs
        + [
            .init("clear", env: false, repeatable: true, placeholder: "FIELD", "remove this field (userInfo)"),
            .init("enable", value: false, env: false, "switch it on (resume it)"),
            DeviceRequest.rawSpec,
        ] + ConnectionOptions.specs
    static let examples: [(comment: String, command: String)] = [
        (
            "new text, same schedule, still off if it was off",
            #"chime update --device phone-1 --id med --body "Take two""#
        ),
        ("another time, same text", "chime update --device phone-1 --id med --at 19:30"),
        ("no userInfo any more, and switch it on", "chime update --device phone-1 --id med --clear userInfo --enable"),
    ]

    let request: DeviceRequest
    let notification: NotificationFlags
    let namedZone: Zone?

    init(_ flags: Flags) throws(UsageError) {
        request = try DeviceRequest(flags)
        guard flags["id"] != nil else { throw UsageError("--id is required: the notification to change") }
        var fields = try NotificationFlags(flags, countIsTimes: true, partial: true)
        for name in flags.all("clear") {
            guard let field = NotificationField(rawValue: name), field != .id else {
                let hint =
                    suggestion(for: name, among: NotificationField.allCases.map(\.wireName)).map {
                        " (did you mean \($0)?)"
                    } ?? ""
                throw UsageError("--clear: \"\(name)\" is not a field of a notification\(hint)")
            }
            guard fields.object[field.wireName] == nil else {
                throw UsageError("--clear \(name): the flags also set it")
            }
            fields.object[field.wireName] = .null
        }
        if flags.isSet("enable") {
            guard !flags.isSet("disabled") else { throw UsageError("give either --enable or --disabled, not both") }
            fields.object["enabled"] = true
        }
        guard fields.object.count > 1 else {
            throw UsageError("say what to change: a notification flag (--body, --at, ...), --clear or --enable")
        }
        notification = fields
        namedZone = fields.namedZone
    }

    func run(_ console: Console) async throws(CLIFailure) {
        Self.warn(notification.warnings, console)
        try await request.send(.update, notification, namedZone: namedZone, console) { result, zone in
            guard case .updated(let updated) = result else { return }
            let next = updated.nextFireDate.map { "next delivery \(TimeDisplay(zone: zone).both($0))" }
            console.out("updated \(updated.id), \(next ?? "paused")")
        }
    }
}
