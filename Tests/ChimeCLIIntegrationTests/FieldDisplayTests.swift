import ChimeCore
import ChimeSupport
import Testing

@testable import ChimeCLI

/// The CLI places every ``NotificationField``: each flag it names sets its field, and each
/// field the `list` table shows changes its column.
@Suite struct FieldDisplayTests {
    /// Arguments that set each field that has a flag (with what the field goes with).
    static let arguments: [NotificationField: [String]] = [
        .id: ["--id", "x"],
        .fireDate: ["--at", "2026-12-01 10:00"],
        .after: ["--in", "15m"],
        .alignTo: ["--in", "1d", "--align", "08:00"],
        .timeZone: ["--tz", "Europe/Paris"],
        .repeatInterval: ["--every", "day"],
        .rrule: ["--rrule", "FREQ=DAILY"],
        .count: ["--every", "day", "--times", "3"],
        .until: ["--every", "day", "--until", "2027-01-01T00:00Z"],
        .exdates: ["--every", "day", "--except", "2026-12-02 10:00"],
        .leadTime: ["--lead", "5m"],
        .alertTitle: ["--title", "T"],
        .alertBody: ["--body", "B"],
        .alertAction: ["--action", "Open"],
        .hasAction: ["--no-action"],
        .soundName: ["--sound", "default"],
        .category: ["--category", "c"],
        .threadId: ["--thread", "meds"],
        .interruptionLevel: ["--level", "timeSensitive"],
        .badge: ["--badge", "+1"],
        .userInfo: ["--info", "k=v"],
        .expiresAfter: ["--expires", "1h"],
        .misfire: ["--misfire", "skip"],
        .ignoreQuietHours: ["--ignore-quiet-hours"],
        .enabled: ["--disabled"],
        .keepAfterFiring: ["--keep"],
        .channels: ["--channels", "mqtt"],
    ]

    @Test(arguments: NotificationField.allCases)
    func eachFlagSetsItsField(_ field: NotificationField) throws {
        guard let flag = NotificationFlags.flag(for: field) else {
            #expect(Self.arguments[field] == nil, "\(field) has arguments but no flag")
            return
        }
        #expect(NotificationFlags.names.contains(flag), "--\(flag) is not a notification flag")
        var arguments = try #require(Self.arguments[field], "no arguments set \(field)")
        #expect(arguments.contains("--" + flag))
        if !arguments.contains("--at") && !arguments.contains("--in") { arguments += ["--at", "2026-12-01 10:00"] }
        let flags = try Flags(arguments, specs: NotificationFlags.specs, environment: [:])
        let notification = try NotificationFlags(flags, countIsTimes: true)
        #expect(notification.object[field.wireName] != nil, "\(arguments) do not set \(field)")
    }

    static let row = ListedNotification(
        notification: ResolvedNotification(
            id: "n",
            fireDate: .instant(Instant(milliseconds: 1_796_119_200_000)),
            {
                var spec = NotificationSpec()
                spec.repeatInterval = .day
                return spec
            }()
        ),
        nextFireDate: Instant(milliseconds: 1_796_119_200_000),
        enabled: true,
        firedCount: 0,
        lastFiredAt: nil,
        createdAt: Instant(milliseconds: 0),
        updatedAt: Instant(milliseconds: 0)
    )

    /// ``row`` with the field set to something else; nil for fields without a change here.
    static func changed(_ field: NotificationField) -> ListedNotification? {
        var row = Self.row
        var id = row.notification.id
        var spec = row.notification.spec
        switch field {
        case .id: id = "other"
        case .timeZone: spec.timeZone = Zone(identifier: "Asia/Shanghai").map(TimeZoneSetting.named)
        case .repeatInterval: spec.repeatInterval = .month
        case .rrule: spec.rrule = try? RecurrenceRule(parsing: "FREQ=WEEKLY")
        case .count: spec.count = 3
        case .until: spec.until = DateTimeValue(iso8601: "2027-01-01T00:00:00Z")
        case .enabled: row.enabled = false
        case .alertTitle: spec.alertTitle = "T"
        case .alertBody: spec.alertBody = "B"
        case .alertBodies: spec.alertBodies = ["A", "B"]
        default: return nil
        }
        row.notification = ResolvedNotification(id: id, fireDate: row.notification.fireDate, spec)
        return row
    }

    @Test(arguments: NotificationField.allCases)
    func eachFieldTheTableShowsChangesItsColumn(_ field: NotificationField) throws {
        guard let column = ListCommand.column(for: field) else {
            #expect(Self.changed(field) == nil, "\(field) has a change but no column")
            return
        }
        let changed = try #require(Self.changed(field), "no change of \(field) to show")
        let before = ListCommand.cell(column, Self.row, deviceZone: nil)
        let after = ListCommand.cell(column, changed, deviceZone: nil)
        #expect(before != after, "\(field) does not change the \(column) column (\(before))")
    }
}
