/// Apple's `repeatInterval`: occurrence `k` is the first one plus `k` units, computed from the first one
/// (never by repeated addition, so a monthly series from January 31 comes back to the 31st after February).
///
/// - `year`, `quarter`, `month`: same wall-clock day and time, the day clamped to the month's length.
/// - `weekOfYear` (7 days), `day` and `weekday` (Apple's `weekday` means every day): same wall-clock time.
/// - `hour`, `minute`, `second`: elapsed time from the first instant.
///
/// Wall-clock times become instants by ``Zone/instant(for:)``; the first instant's millisecond part is
/// carried by every occurrence, so occurrence 0 is exactly the start. Occurrences are non-decreasing in
/// time (a gap moves a time forward by less than one unit), so two equal instants are neighbours: the later
/// of them is a duplicate and is dropped (it happens on a skipped day such as Pacific/Apia's 2011-12-30).
struct IntervalSeries: Sendable {
    let unit: RepeatUnit
    let zone: Zone
    /// The first occurrence, in milliseconds.
    let startMilliseconds: Int64
    /// Its wall-clock time in the zone, in whole seconds, and the milliseconds below them.
    let startLocal: LocalDateTime
    let subsecond: Int64

    /// A wall-clock start keeps its own time of day even when it falls in a gap (02:30 on a spring-forward
    /// night fires at 03:30 that night and at 02:30 on the others); an instant is read in the zone.
    init(unit: RepeatUnit, zone: Zone, start: DateTimeValue) {
        self.unit = unit
        self.zone = zone
        let instant = start.resolved(in: zone)
        startMilliseconds = instant.milliseconds
        switch start {
        case .local(let local): startLocal = local
        case .instant(let instant): startLocal = zone.localDateTime(at: instant)
        }
        subsecond = instant.milliseconds - instant.seconds * 1000
    }

    private var months: Int64? {
        switch unit {
        case .year: return 12
        case .quarter: return 3
        case .month: return 1
        default: return nil
        }
    }

    private var days: Int64 {
        unit == .weekOfYear ? 7 : 1
    }

    /// The instant (ms) of occurrence `k` before de-duplication, or nil past 9999-12-31.
    func instant(_ k: Int64) -> Int64? {
        guard k >= 0 else { return nil }
        let time = Int64(startLocal.hour * 3600 + startLocal.minute * 60 + startLocal.second)
        if let seconds = unit.elapsedSeconds {
            guard k <= (Instant.distantFuture.milliseconds - startMilliseconds) / (seconds * 1000) else { return nil }
            return startMilliseconds + k * seconds * 1000
        }
        let wall: Int64
        if let months {
            guard k <= 12 * 10_000 else { return nil }
            let index = Int64(startLocal.year) * 12 + Int64(startLocal.month - 1) + k * months
            let year = Int(index / 12)
            let month = Int(index % 12) + 1
            guard year <= 9999 else { return nil }
            let day = min(startLocal.day, daysInMonth(year: year, month: month))
            wall = daysFromCivil(year: year, month: month, day: day) * 86_400 + time
        } else {
            guard k <= lastDay else { return nil }
            let day = daysFromCivil(year: startLocal.year, month: startLocal.month, day: startLocal.day) + k * days
            guard day <= lastDay else { return nil }
            wall = day * 86_400 + time
        }
        return zone.instantSeconds(forWall: wall) * 1000 + subsecond
    }

    /// Whether occurrence `k` lands on the same instant as occurrence `k - 1`.
    func isDuplicate(_ k: Int64, instant: Int64) -> Bool {
        k > 0 && self.instant(k - 1) == instant
    }

    /// The smallest `k` whose instant is at or after `target` (ms), ignoring duplicates, or nil when none is
    /// before 9999-12-31. A calendar estimate from the wall-clock date is corrected by a few steps.
    func firstIndex(atOrAfter target: Int64) -> Int64? {
        guard target > startMilliseconds else { return 0 }
        if let seconds = unit.elapsedSeconds {
            let k = ceilDiv(target - startMilliseconds, seconds * 1000)
            return instant(k) == nil ? nil : k
        }
        let local = LocalDateTime(secondsSinceEpoch: zone.wallSeconds(atSeconds: floorDiv(target, 1000)))
        let estimate: Int64
        if let months {
            let elapsed =
                (Int64(local.year) * 12 + Int64(local.month)) - (Int64(startLocal.year) * 12 + Int64(startLocal.month))
            estimate = floorDiv(elapsed, months)
        } else {
            let elapsed =
                daysFromCivil(year: local.year, month: local.month, day: local.day)
                - daysFromCivil(year: startLocal.year, month: startLocal.month, day: startLocal.day)
            estimate = floorDiv(elapsed, days)
        }
        var k = max(0, estimate - 2)
        while k > 0, let previous = instant(k - 1), previous >= target { k -= 1 }
        while true {
            guard let value = instant(k) else { return nil }
            if value >= target { return k }
            k += 1
        }
    }
}
