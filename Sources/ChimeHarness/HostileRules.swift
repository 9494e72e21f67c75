/// RRULEs built to cost as much as Chime's recurrence limits allow, for the tests that bound them
/// (`NeverHangsTests`, by candidates examined) and the benchmark that times them (`chime-bench recurrence
/// --hostile`): one list, so that what is timed is what is tested.
///
/// Plain strings, no ChimeTime types, so that any target can use them.
public enum HostileRules {
    public struct Rule: Sendable {
        /// A short name, which the tests key their expected outcomes by.
        public var name: String
        public var rule: String
        /// DTSTART, a wall-clock time (`YYYY-MM-DDTHH:MM:SS`).
        public var start: String
        /// Where the first search starts (RFC 3339), when not at DTSTART.
        public var from: String?

        init(_ name: String, _ rule: String, start: String = "2026-01-01T09:15:30", from: String? = nil) {
            self.name = name
            self.rule = rule
            self.start = start
            self.from = from
        }
    }

    /// `lo,...,hi`, or every `step`-th of them: `BYSECOND=0,...,59` without writing it out.
    public static func list(_ range: ClosedRange<Int>, step: Int = 1) -> String {
        stride(from: range.lowerBound, through: range.upperBound, by: step).map(String.init).joined(separator: ",")
    }

    /// Every value of `range` and its negative (`BYMONTHDAY=1,...,31,-1,...,-31`).
    public static func signed(_ range: ClosedRange<Int>) -> String {
        list(range) + "," + list(-range.upperBound...(-1))
    }

    public static let allWeekdays = "MO,TU,WE,TH,FR,SA,SU"
    public static let allTimes = "BYHOUR=\(list(0...23));BYMINUTE=\(list(0...59));BYSECOND=\(list(0...59))"

    /// The finding: one short rule (about 580 bytes) with every list written out took about a minute to
    /// answer a schedule or a preview, its one period expanding to 32 million date-times.
    public static let finding =
        "FREQ=YEARLY;BYMONTH=\(list(1...12));BYMONTHDAY=\(list(1...31));\(allTimes);BYSETPOS=-1"

    /// Every BY part with the longest list it may take, times written out in full.
    public static let everyPart =
        "FREQ=YEARLY;\(allTimes);BYDAY=\(allWeekdays);BYMONTHDAY=\(signed(1...31));BYYEARDAY=\(signed(1...366));"
        + "BYWEEKNO=\(signed(1...53));BYMONTH=\(list(1...12));BYSETPOS=\(signed(1...366))"

    public static let all: [Rule] = [
        // Over the per-period limit.
        Rule("finding", finding),
        Rule("yearly-all-monthdays-all-times", "FREQ=YEARLY;BYMONTHDAY=\(signed(1...31));\(allTimes)"),
        Rule("every-part", everyPart),
        Rule("weekly-all-times", "FREQ=WEEKLY;BYDAY=\(allWeekdays);\(allTimes)"),
        Rule("monthly-all-times", "FREQ=MONTHLY;BYDAY=\(allWeekdays);\(allTimes)"),
        Rule("weekno53-feb-all-times", "FREQ=YEARLY;BYWEEKNO=53;BYMONTH=2;BYDAY=\(allWeekdays);\(allTimes)"),
        // Just under it: every BY part at its longest, fewer minutes.
        Rule(
            "every-part-under-limit",
            "FREQ=YEARLY;BYHOUR=\(list(0...23));BYMINUTE=\(list(0...59, step: 6));BYDAY=\(allWeekdays);"
                + "BYMONTHDAY=\(signed(1...31));BYYEARDAY=\(signed(1...366));BYWEEKNO=\(signed(1...53));"
                + "BYMONTH=\(list(1...12));BYSETPOS=\(signed(1...366))"
        ),
        // BYSETPOS over huge periods: the whole period is built to pick one date-time of it.
        Rule(
            "monthly-setpos-89280",
            "FREQ=MONTHLY;BYMONTHDAY=\(list(1...31));BYHOUR=\(list(0...23));BYMINUTE=\(list(0...59));"
                + "BYSECOND=0,30;BYSETPOS=-1"
        ),
        Rule("daily-setpos-86400", "FREQ=DAILY;\(allTimes);BYSETPOS=1"),
        Rule("hourly-setpos-3600", "FREQ=HOURLY;BYMINUTE=\(list(0...59));BYSECOND=\(list(0...59));BYSETPOS=-1"),
        Rule(
            "yearly-setpos-since-1900",
            "FREQ=YEARLY;BYDAY=\(allWeekdays);BYHOUR=\(list(0...23));BYMINUTE=\(list(0...59, step: 10));BYSETPOS=-1",
            start: "1900-01-01T00:00:30",
            from: "2026-01-01T00:00:00Z"
        ),
        Rule(
            "yearly-all-weeknos",
            "FREQ=YEARLY;BYWEEKNO=\(signed(1...53));BYDAY=\(allWeekdays);BYHOUR=\(list(0...23));BYMINUTE=0,15,30,45"
        ),
        Rule(
            "yearly-all-ordinals",
            "FREQ=YEARLY;BYDAY="
                + (1...53).map { "\($0)MO,-\($0)TU,\($0)WE,-\($0)TH,\($0)FR,-\($0)SA,\($0)SU" }.joined(separator: ",")
                + ";BYHOUR=\(list(0...23))"
        ),
        // BYYEARDAY with FREQ=SECONDLY: one candidate per period, days tested one at a time.
        Rule("secondly-all-yeardays", "FREQ=SECONDLY;BYYEARDAY=\(signed(1...366))"),
        Rule("secondly-yearday-minus-366", "FREQ=SECONDLY;BYYEARDAY=-366;BYMONTH=1"),
        Rule("secondly-yearday-366-monday", "FREQ=SECONDLY;BYYEARDAY=366;BYDAY=MO"),
        Rule(
            "minutely-all-yeardays-setpos",
            "FREQ=MINUTELY;BYYEARDAY=\(signed(1...366));BYSETPOS=1,-1;BYSECOND=\(list(0...59))"
        ),
        // COUNT large with sparse matches, DTSTART long ago: the periods before are counted.
        Rule(
            "minutely-friday-13th-since-2000",
            "FREQ=MINUTELY;BYMONTHDAY=13;BYDAY=FR;COUNT=1000000000",
            start: "2000-01-01T00:00:00",
            from: "2026-01-01T00:00:00Z"
        ),
        Rule(
            "daily-first-every-minute-since-1900",
            "FREQ=DAILY;BYMONTHDAY=1;BYHOUR=\(list(0...23));BYMINUTE=\(list(0...59));COUNT=1000000000",
            start: "1900-01-01T00:00:00",
            from: "2026-01-01T00:00:30Z"
        ),
        Rule(
            "secondly-first-since-2000",
            "FREQ=SECONDLY;BYMONTHDAY=1;COUNT=1000000000",
            start: "2000-01-01T00:00:00",
            from: "2026-01-01T00:00:00Z"
        ),
        // Periods that fall differently on each of 1447 days cannot be counted by day: walked one by one.
        Rule(
            "secondly-interval-1447-since-1900",
            "FREQ=SECONDLY;INTERVAL=1447;BYMONTHDAY=\(list(1...28));COUNT=1000000000",
            start: "1900-01-01T00:00:00",
            from: "2026-01-01T00:00:00Z"
        ),
        Rule(
            "weekly-bymonth-since-1900",
            "FREQ=WEEKLY;BYDAY=MO;BYMONTH=2;BYHOUR=9;COUNT=1000000000",
            start: "1900-01-01T09:00:00",
            from: "2026-01-01T00:00:00Z"
        ),
        // Look plausible, never match.
        Rule("yearly-31st-of-short-months", "FREQ=YEARLY;BYMONTHDAY=31;BYMONTH=2,4,6,9,11"),
        Rule("secondly-31st-of-short-months", "FREQ=SECONDLY;BYMONTHDAY=31;BYMONTH=2,4,6,9,11"),
        Rule("minutely-minus-30th-of-february", "FREQ=MINUTELY;BYMONTHDAY=-30;BYMONTH=2;BYSECOND=\(list(0...59))"),
        Rule("daily-30th-of-february-all-times", "FREQ=DAILY;BYMONTHDAY=30,31;BYMONTH=2;\(allTimes)"),
        Rule(
            "weekno53-in-february",
            "FREQ=YEARLY;BYWEEKNO=53;BYMONTH=2;BYDAY=\(allWeekdays);BYHOUR=\(list(0...23));BYMINUTE=\(list(0...59))"
        ),
        Rule("late-yeardays-in-january", "FREQ=YEARLY;BYYEARDAY=\(list(60...366));BYMONTH=1;BYMINUTE=\(list(0...59))"),
        Rule("monthly-32nd-weekday", "FREQ=MONTHLY;BYDAY=\(allWeekdays);BYSETPOS=32"),
        // Look impossible, are rare.
        Rule("fifth-last-monday-of-february", "FREQ=MONTHLY;BYDAY=-5MO;BYMONTH=2"),
        Rule("53rd-last-monday", "FREQ=YEARLY;BYDAY=-53MO"),
        Rule("53rd-weekdays", "FREQ=YEARLY;BYDAY=53MO,53TU,53WE,53FR,53SA,53SU"),
        Rule("secondly-february-29th-monday", "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=9;BYMINUTE=15"),
    ]
}
