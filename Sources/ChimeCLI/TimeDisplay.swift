import ChimeCore
import Foundation

/// How `chime` shows instants: `2026-12-01 18:00 CST (10:00Z)` in a zone, `2026-12-01 10:00Z` in UTC.
///
/// Seconds are shown only when they are not zero. The zone's abbreviation comes from the system's
/// tz database (``ZoneAbbreviations``): Foundation on Linux only knows `GMT+8`.
struct TimeDisplay: Sendable {
    /// The zone to show local times in; nil shows UTC only.
    let zone: Zone?
    private let names: ZoneAbbreviations?

    init(zone: Zone?) {
        self.zone = zone == .utc ? nil : zone
        self.names = self.zone.map { ZoneAbbreviations($0) }
    }

    /// `2026-12-01 18:00 CST (10:00Z)`, the UTC date added when it differs; UTC alone without a zone.
    func both(_ instant: Instant) -> String {
        guard let zone else { return utc(instant) }
        let local = zone.localDateTime(at: instant)
        let universal = Zone.utc.localDateTime(at: instant)
        let sameDay = local.year == universal.year && local.month == universal.month && local.day == universal.day
        let inUTC = sameDay ? Self.clock(universal) + "Z" : utc(instant)
        return "\(self.local(instant, in: zone)) (\(inUTC))"
    }

    /// `2026-12-01 18:00 CST` in the display zone (UTC without one).
    func local(_ instant: Instant) -> String {
        guard let zone else { return utc(instant) }
        return local(instant, in: zone)
    }

    /// `Tue 2026-12-01 18:00 CST`.
    func localWithWeekday(_ instant: Instant) -> String {
        guard let zone else { return Self.weekday(Zone.utc.localDateTime(at: instant)) + " " + utc(instant) }
        return Self.weekday(zone.localDateTime(at: instant)) + " " + local(instant, in: zone)
    }

    private func local(_ instant: Instant, in zone: Zone) -> String {
        let wall = zone.localDateTime(at: instant)
        let label = names?.abbreviation(at: instant, offset: zone.offset(at: instant)) ?? zone.identifier
        return "\(Self.date(wall)) \(Self.clock(wall)) \(label)"
    }

    /// `2026-12-01 10:00Z`.
    func utc(_ instant: Instant) -> String {
        let wall = Zone.utc.localDateTime(at: instant)
        return "\(Self.date(wall)) \(Self.clock(wall))Z"
    }

    /// An RFC 3339 string from a reply shown as ``both(_:)``; the text itself if it is not one.
    func both(_ text: String) -> String {
        guard case .instant(let instant)? = DateTimeValue(iso8601: text) else { return text }
        return both(instant)
    }

    static func date(_ t: LocalDateTime) -> String {
        "\(pad(t.year, 4))-\(pad(t.month))-\(pad(t.day))"
    }

    static func clock(_ t: LocalDateTime) -> String {
        "\(pad(t.hour)):\(pad(t.minute))" + (t.second == 0 ? "" : ":\(pad(t.second))")
    }

    static func weekday(_ t: LocalDateTime) -> String {
        let names = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
        let day = isoWeekday(daysSinceEpoch: daysFromCivil(year: t.year, month: t.month, day: t.day))
        return names[(day - 1 + 7) % 7]
    }

    static func pad(_ value: Int, _ width: Int = 2) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    /// `+08:00`, `-03:30`.
    static func offset(_ seconds: Int) -> String {
        let sign = seconds < 0 ? "-" : "+"
        let minutes = abs(seconds) / 60
        return "\(sign)\(pad(minutes / 60)):\(pad(minutes % 60))"
    }

    /// `2h 05m`, `3d 4h`, `45s`: an elapsed time, roughly.
    static func elapsed(milliseconds: Int64) -> String {
        let s = max(0, milliseconds / 1000)
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m \(pad(Int(s % 60)))s" }
        if s < 86_400 { return "\(s / 3600)h \(pad(Int(s % 3600 / 60)))m" }
        return "\(s / 86_400)d \(s % 86_400 / 3600)h"
    }
}

/// The zone abbreviations (`CST`, `EDT`, `+0530`) of one zone, read from its TZif file in the
/// system's tz database (`$TZDIR` or `/usr/share/zoneinfo`).
///
/// The offset comes from ``Zone`` (so from the same data the worker uses); the file only names it.
/// Where the file is missing or disagrees about the offset, the name is the offset itself (`+08:00`).
struct ZoneAbbreviations: Sendable {
    private struct LocalType: Sendable {
        var offset: Int
        var name: String
    }

    private var transitions: [Int64] = []
    private var typeOfTransition: [Int] = []
    private var types: [LocalType] = []
    /// From the footer's POSIX TZ string: the names in force after the last transition.
    private var footer: [LocalType] = []

    /// - Parameter directory: the tz database; nil: `$TZDIR`, else `/usr/share/zoneinfo`.
    init(_ zone: Zone, directory: String? = nil) {
        if zone == .utc {
            footer = [LocalType(offset: 0, name: "UTC")]
            return
        }
        let directory = directory ?? ProcessInfo.processInfo.environment["TZDIR"] ?? "/usr/share/zoneinfo"
        guard let data = FileManager.default.contents(atPath: directory + "/" + zone.identifier) else { return }
        parse(Array(data))
    }

    /// The abbreviation in force at `instant`, given the zone's offset there.
    func abbreviation(at instant: Instant, offset: Int) -> String {
        let seconds = instant.seconds
        if transitions.isEmpty || seconds >= transitions.last! {
            if let match = footer.first(where: { $0.offset == offset }) { return match.name }
        }
        if !transitions.isEmpty {
            // The last transition at or before the instant.
            var low = 0
            var high = transitions.count
            while low < high {
                let mid = (low + high) / 2
                if transitions[mid] <= seconds { low = mid + 1 } else { high = mid }
            }
            let index = low == 0 ? nil : typeOfTransition[low - 1]
            if let index, index < types.count, types[index].offset == offset { return types[index].name }
        }
        if let match = types.last(where: { $0.offset == offset }) { return match.name }
        return TimeDisplay.offset(offset)
    }

    /// Reads the version 2+ part of a TZif file (64-bit times) and its footer (RFC 8536).
    private mutating func parse(_ bytes: [UInt8]) {
        func u32(_ at: Int) -> Int {
            Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        }
        func i64(_ at: Int) -> Int64 {
            var value: UInt64 = 0
            for i in 0..<8 { value = value << 8 | UInt64(bytes[at + i]) }
            return Int64(bitPattern: value)
        }
        func header(_ at: Int) -> (isut: Int, isstd: Int, leap: Int, time: Int, type: Int, char: Int)? {
            guard bytes.count >= at + 44, bytes[at..<at + 4].elementsEqual("TZif".utf8) else { return nil }
            return (u32(at + 20), u32(at + 24), u32(at + 28), u32(at + 32), u32(at + 36), u32(at + 40))
        }
        guard let v1 = header(0), bytes[4] >= UInt8(ascii: "2") else { return }
        let v1Size = v1.time * 5 + v1.type * 6 + v1.char + v1.leap * 8 + v1.isstd + v1.isut
        let start = 44 + v1Size
        guard let h = header(start) else { return }
        var at = start + 44
        let size = h.time * 9 + h.type * 6 + h.char + h.leap * 12 + h.isstd + h.isut
        guard bytes.count >= at + size, h.type > 0 else { return }
        transitions = (0..<h.time).map { i64(at + $0 * 8) }
        at += h.time * 8
        typeOfTransition = (0..<h.time).map { Int(bytes[at + $0]) }
        at += h.time
        let typeStart = at
        let charStart = typeStart + h.type * 6
        types = (0..<h.type).map { index in
            let base = typeStart + index * 6
            let raw = UInt32(u32(base))
            let offset = Int(Int32(bitPattern: raw))
            var nameIndex = charStart + Int(bytes[base + 5])
            var name: [UInt8] = []
            while nameIndex < charStart + h.char, bytes[nameIndex] != 0 {
                name.append(bytes[nameIndex])
                nameIndex += 1
            }
            return LocalType(offset: offset, name: String(decoding: name, as: UTF8.self))
        }
        at = charStart + h.char + h.leap * 12 + h.isstd + h.isut
        // Footer: "\n" POSIX-TZ "\n".
        guard at < bytes.count, bytes[at] == UInt8(ascii: "\n"),
            let end = bytes[(at + 1)...].firstIndex(of: UInt8(ascii: "\n"))
        else { return }
        footer = Self.posixNames(String(decoding: bytes[(at + 1)..<end], as: UTF8.self))
    }

    /// The standard and daylight names and offsets of a POSIX TZ string such as `EST5EDT,M3.2.0,M11.1.0`
    /// or `<+0530>-5:30`.
    private static func posixNames(_ text: String) -> [LocalType] {
        var rest = Substring(text)
        func name() -> String? {
            if rest.first == "<" {
                guard let close = rest.firstIndex(of: ">") else { return nil }
                let value = String(rest[rest.index(after: rest.startIndex)..<close])
                rest = rest[rest.index(after: close)...]
                return value
            }
            let value = rest.prefix { $0.isLetter }
            guard value.count >= 3 else { return nil }
            rest = rest.dropFirst(value.count)
            return String(value)
        }
        /// POSIX offsets are west of UTC: `5` is UTC-5.
        func offset() -> Int? {
            var sign = -1
            if rest.first == "+" || rest.first == "-" {
                if rest.first == "-" { sign = 1 }
                rest = rest.dropFirst()
            }
            let text = rest.prefix { $0.isNumber || $0 == ":" }
            guard !text.isEmpty else { return nil }
            rest = rest.dropFirst(text.count)
            let parts = text.split(separator: ":").compactMap { Int($0) }
            guard !parts.isEmpty else { return nil }
            let seconds = parts[0] * 3600 + (parts.count > 1 ? parts[1] * 60 : 0) + (parts.count > 2 ? parts[2] : 0)
            return sign * seconds
        }
        guard let standardName = name(), let standardOffset = offset() else { return [] }
        var names = [LocalType(offset: standardOffset, name: standardName)]
        if let daylightName = name() {
            let daylightOffset = rest.first == "," || rest.isEmpty ? standardOffset + 3600 : offset()
            if let daylightOffset { names.append(LocalType(offset: daylightOffset, name: daylightName)) }
        }
        return names
    }
}
