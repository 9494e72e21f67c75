import ChimeCore
import ChimeSupport
import Testing

@testable import ChimeCLI

/// `--lunar`, `--every month --on-day` and `--skip`: the rules they send, their mistakes, and `next`
/// showing the Chinese dates.
@Suite struct CalendarFlagTests {
    static func rule(_ arguments: [String]) throws -> String? {
        let flags = try Flags(arguments + ["--tz", "Asia/Shanghai"], specs: NotificationFlags.specs, environment: [:])
        return try NotificationFlags(flags, countIsTimes: true).object["rrule"]?.stringValue
    }

    @Test(arguments: [
        (["--lunar", "8-15", "--at", "09:00"], "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=8;BYMONTHDAY=15"),
        (["--lunar", "1-1", "--at", "2027-01-01 09:00"], "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1"),
        (["--lunar", "4L-3", "--at", "09:00"], "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=4L;BYMONTHDAY=3;SKIP=BACKWARD"),
        (["--lunar", "3-30", "--at", "09:00"], "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=30;SKIP=BACKWARD"),
        (
            ["--lunar", "4l-30", "--skip", "forward", "--at", "09:00"],
            "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=4L;BYMONTHDAY=30;SKIP=FORWARD"
        ),
        (
            ["--lunar", "4L-3", "--skip", "omit", "--at", "09:00"],
            "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=4L;BYMONTHDAY=3;SKIP=OMIT"
        ),
        (["--on", "weekdays", "--at", "18:00"], "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"),
        (["--on", "weekends", "--at", "09:00"], "FREQ=WEEKLY;BYDAY=SA,SU"),
        (["--every", "weekdays", "--at", "18:00"], "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"),
        (["--every", "month", "--on-day", "15", "--at", "09:00"], "FREQ=MONTHLY;BYMONTHDAY=15"),
        (["--every", "month", "--on-day", "last", "--at", "09:00"], "FREQ=MONTHLY;BYMONTHDAY=-1"),
        (
            ["--every", "month", "--on-day", "31", "--skip", "backward", "--at", "09:00"],
            "RSCALE=GREGORIAN;FREQ=MONTHLY;BYMONTHDAY=31;SKIP=BACKWARD"
        ),
        (
            ["--lunar", "8-15", "--at", "2027-01-01 09:00", "--times", "3"],
            "RSCALE=CHINESE;FREQ=YEARLY;BYMONTH=8;BYMONTHDAY=15;COUNT=3"
        ),
    ])
    func sentRule(_ arguments: [String], _ expected: String) throws {
        #expect(try Self.rule(arguments) == expected)
        // Each is a rule chimed accepts.
        _ = try RecurrenceRule(parsing: expected)
    }

    @Test(arguments: [
        (["--lunar", "13-1", "--at", "09:00"], "--lunar: the month must be 1 to 12, got 13"),
        (
            ["--lunar", "8-31", "--at", "09:00"],
            "--lunar: the day must be 1 to 30 (a Chinese month has 29 or 30), got 31"
        ),
        (
            ["--lunar", "8/15", "--at", "09:00"],
            "--lunar: expected a Chinese calendar date MONTH-DAY such as 8-15, or 4L-3 for a leap month, got \"8/15\""
        ),
        (["--lunar", "8-15", "--in", "1h"], "--lunar goes with --at: --lunar 8-15 --at 09:00"),
        (
            ["--lunar", "8-15", "--every", "year", "--at", "09:00"],
            "--lunar is a yearly rule: give no --every, --on or --rrule"
        ),
        (
            ["--on-day", "31", "--every", "week", "--at", "09:00"],
            "--on-day goes with --every month: --every month --on-day 31 --skip backward"
        ),
        (
            ["--on-day", "0", "--every", "month", "--at", "09:00"],
            "--on-day: expected a day of the month, 1 to 31, or last, got \"0\""
        ),
        (
            ["--skip", "backward", "--every", "month", "--at", "09:00"],
            "--skip goes with --lunar or --every month --on-day"
        ),
        (
            ["--skip", "later", "--lunar", "8-15", "--at", "09:00"],
            "--skip: expected one of omit, backward, forward, got \"later\""
        ),
    ])
    func mistakes(_ arguments: [String], _ message: String) {
        do {
            _ = try Self.rule(arguments)
            Issue.record("\(arguments) should be refused")
        } catch let error as UsageError {
            #expect(error.message == message)
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test func nextShowsTheChineseDates() async throws {
        let table = try await runChime(
            [
                "next", "--lunar", "8-15", "--at", "09:00", "--tz", "Asia/Shanghai", "--count", "2", "--from",
                "2026-12-01T00:00Z",
            ],
            environment: OfflineTests.nowhere
        )
        #expect(table.status == 0, "\(table)")
        #expect(table.out.first?.hasSuffix("CHINESE") == true, "\(table)")
        #expect(
            table.out.count == 3 && table.out[1].hasSuffix("8-15") && table.out[1].contains("2027-09-15"),
            "\(table)"
        )
        let raw = try await runChime(
            [
                "next", "--lunar", "4L-3", "--at", "08:00", "--tz", "Asia/Shanghai", "--count", "1", "--from",
                "2028-01-01T00:00Z", "--raw",
            ],
            environment: OfflineTests.nowhere
        )
        #expect(raw.jsonLines.first?["fireDates"] == ["2028-04-27T00:00:00Z"], "\(raw)")
        #expect(raw.jsonLines.first?["calendarDates"] == ["4-3"], "\(raw)")
        let monthEnd = try await runChime(
            [
                "next", "--every", "month", "--on-day", "31", "--skip", "backward", "--at", "2027-02-01 09:00", "--tz",
                "UTC", "--count", "2", "--raw", "--from", "2027-01-01T00:00Z",
            ],
            environment: OfflineTests.nowhere
        )
        #expect(
            monthEnd.jsonLines.first?["fireDates"] == ["2027-02-28T09:00:00Z", "2027-03-31T09:00:00Z"],
            "\(monthEnd)"
        )
        #expect(monthEnd.jsonLines.first?["calendarDates"] == nil, "\(monthEnd)")
    }
}
