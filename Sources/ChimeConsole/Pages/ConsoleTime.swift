import ChimeTime

/// Instants as the console shows them: in a device's zone, with the UTC instant in the markup
/// (`<time datetime>`) and on hover (`title`).
public enum ConsoleTime {
    static let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The zone named `name` (an IANA identifier), nil when there is none or no such zone; `"device"`
    /// and other names that are not zones give nil.
    public static func zone(named name: String?) -> Zone? {
        guard let name, !name.isEmpty else { return nil }
        return Zone(identifier: name)
    }

    /// The instant an RFC 3339 string from the protocol means, nil when it is not one (a wall-clock
    /// time has no instant).
    public static func instant(_ text: String) -> Instant? {
        guard case .instant(let instant)? = DateTimeValue(iso8601: text) else { return nil }
        return instant
    }

    /// `Mon 7 Dec 2026 18:00 (Asia/Shanghai)`: the wall-clock time at `instant` in `zone` (UTC
    /// without one), seconds shown when they are not 0.
    public static func text(_ instant: Instant, zone: Zone?) -> String {
        let zone = zone ?? .utc
        let wall = zone.localDateTime(at: instant)
        return "\(weekdays[wall.weekday - 1]) \(date(wall)) \(clock(wall)) (\(zone.identifier))"
    }

    /// `<time datetime="2026-12-07T10:00:00Z" title="2026-12-07T10:00:00Z UTC">Mon 7 Dec 2026
    /// 18:00 (Asia/Shanghai)</time>`.
    public static func html(_ instant: Instant, zone: Zone?) -> HTML {
        let utc = instant.rfc3339()
        return "<time datetime=\"\(utc)\" title=\"\(utc) UTC\">\(text(instant, zone: zone))</time>"
    }

    /// ``html(_:zone:)`` of an RFC 3339 string; a string that is not one is shown as it is, escaped.
    public static func html(_ text: String, zone: Zone?) -> HTML {
        guard let instant = instant(text) else { return HTML(text: text) }
        return html(instant, zone: zone)
    }

    /// `10:00 UTC`, or `6 Dec 23:00 UTC` when the UTC date differs from the date in `zone`.
    public static func utcText(_ instant: Instant, besides zone: Zone?) -> String {
        let utc = Zone.utc.localDateTime(at: instant)
        let local = (zone ?? .utc).localDateTime(at: instant)
        let sameDay = (utc.year, utc.month, utc.day) == (local.year, local.month, local.day)
        let day = sameDay ? "" : "\(utc.day) \(months[utc.month - 1]) "
        return "\(day)\(clock(utc)) UTC"
    }

    /// `7 Dec 2026`.
    static func date(_ t: LocalDateTime) -> String { "\(t.day) \(months[t.month - 1]) \(t.year)" }

    /// `18:00`, or `18:00:07` when the seconds are not 0.
    static func clock(_ t: LocalDateTime) -> String {
        "\(two(t.hour)):\(two(t.minute))" + (t.second == 0 ? "" : ":\(two(t.second))")
    }

    static func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

    /// `3 d 4 h`, `5 h 12 min`, `4 min 2 s`, `42 s`: an elapsed time, to its two largest units.
    public static func duration(milliseconds: Int64) -> String {
        let seconds = max(0, milliseconds / 1000)
        let (d, h, m, s) = (seconds / 86_400, seconds / 3600 % 24, seconds / 60 % 60, seconds % 60)
        if d > 0 { return h > 0 ? "\(d) d \(h) h" : "\(d) d" }
        if h > 0 { return m > 0 ? "\(h) h \(m) min" : "\(h) h" }
        if m > 0 { return s > 0 ? "\(m) min \(s) s" : "\(m) min" }
        return "\(s) s"
    }
}
