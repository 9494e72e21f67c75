/// Why zone data could not be read: a TZif file (RFC 8536) or a POSIX `TZ` rule.
public struct ZoneDataError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case notTZif, truncated, tooLarge, invalid, badRule, unreadable
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// The file does not start with `TZif`.
        public static let notTZif = Code(.notTZif)
        /// The file ends inside its header, its data or its footer.
        public static let truncated = Code(.truncated)
        /// Larger than ``TZifFile/maximumBytes`` or counts past ``TZifFile/maximumTransitions`` /
        /// ``TZifFile/maximumTypes``.
        public static let tooLarge = Code(.tooLarge)
        /// A count, a type index, an offset or the order of the transitions is not what RFC 8536 allows.
        public static let invalid = Code(.invalid)
        /// The footer is not a POSIX `TZ` rule (RFC 8536 section 3.3).
        public static let badRule = Code(.badRule)
        /// The file could not be opened or read.
        public static let unreadable = Code(.unreadable)

        public var description: String {
            switch value {
            case .notTZif: return "not_tzif"
            case .truncated: return "truncated"
            case .tooLarge: return "too_large"
            case .invalid: return "invalid"
            case .badRule: return "bad_rule"
            case .unreadable: return "unreadable"
            }
        }
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
    public static func == (lhs: ZoneDataError, rhs: ZoneDataError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// A zone read from a TZif file (RFC 8536, versions 1 to 4): its transitions, the local time types
/// they switch to, and the footer's rule for the time after the last one.
///
/// Only what the offsets need is kept: abbreviations, standard/wall and UT/local indicators and leap
/// seconds are read past (their counts still checked). With a version 2+ file the 64-bit section is
/// used and the 32-bit one skipped.
public struct TZifFile: Hashable, Sendable {
    /// A local time type: its offset from UTC (seconds east) and whether it is daylight time.
    public struct LocalTimeType: Hashable, Sendable {
        public var utcOffset: Int32
        public var isDST: Bool
    }

    /// The file's version: 1, 2, 3 or 4.
    public var version: Int
    /// Transition instants (seconds since the epoch), strictly ascending.
    public var transitions: [Int64]
    /// `types[typeIndices[i]]` is in effect from `transitions[i]` on.
    public var typeIndices: [Int]
    public var types: [LocalTimeType]
    /// The footer: the POSIX `TZ` rule for instants after the last transition (nil in a version 1
    /// file, or when the footer is empty).
    public var rule: PosixTimeZone?

    /// Files larger than this are refused: the largest in tzdata is under 4 KiB (slim) or 100 KiB (fat).
    public static let maximumBytes = 256 * 1024
    /// Transitions in one section, at most (tzdata's largest fat file has fewer than 2,000).
    public static let maximumTransitions = 10_000
    /// Local time types, at most (RFC 8536 allows 256; tzdata uses fewer than 20).
    public static let maximumTypes = 256

    /// The type in effect before the first transition: type 0 (RFC 8536 section 3.2).
    public var initialType: LocalTimeType { types[0] }

    /// Parses a TZif file.
    /// - Throws: ``ZoneDataError`` for a file that is not TZif, truncated, too large or inconsistent.
    public init(bytes: [UInt8]) throws(ZoneDataError) {
        guard bytes.count <= Self.maximumBytes else {
            throw ZoneDataError(.tooLarge, "\(bytes.count) bytes, more than \(Self.maximumBytes)")
        }
        var reader = ByteReader(bytes)
        let v1 = try reader.header(used: false)
        guard v1.version >= 2 else {
            try reader.checkTypes(v1)
            (transitions, typeIndices, types) = try reader.section(v1, timeSize: 4)
            version = 1
            rule = nil
            return
        }
        try reader.skip(v1.dataLength(timeSize: 4))
        let v2 = try reader.header(used: true)
        (transitions, typeIndices, types) = try reader.section(v2, timeSize: 8)
        version = v2.version
        // The footer: a newline, the rule (possibly empty), a newline.
        guard try reader.byte() == 0x0A else {
            throw ZoneDataError(.invalid, "the footer does not start with a newline")
        }
        var text: [UInt8] = []
        while true {
            let b = try reader.byte()
            if b == 0x0A { break }
            guard text.count < 256 else { throw ZoneDataError(.badRule, "the footer is longer than 256 bytes") }
            text.append(b)
        }
        rule = text.isEmpty ? nil : try PosixTimeZone(parsing: String(decoding: text, as: UTF8.self))
    }
}

/// The counts of a TZif header.
private struct TZifHeader {
    var version: Int
    var isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt: Int

    func dataLength(timeSize: Int) -> Int {
        timecnt * timeSize + timecnt + typecnt * 6 + charcnt + leapcnt * (timeSize + 4) + isstdcnt + isutcnt
    }
}

private struct ByteReader {
    let bytes: [UInt8]
    var position = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func need(_ count: Int) throws(ZoneDataError) {
        guard count <= bytes.count - position else {
            throw ZoneDataError(.truncated, "ends at byte \(bytes.count), \(count) more needed at \(position)")
        }
    }

    mutating func skip(_ count: Int) throws(ZoneDataError) {
        try need(count)
        position += count
    }

    mutating func byte() throws(ZoneDataError) -> UInt8 {
        try need(1)
        defer { position += 1 }
        return bytes[position]
    }

    mutating func u32() throws(ZoneDataError) -> UInt32 {
        try need(4)
        defer { position += 4 }
        return bytes[position..<position + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func i64() throws(ZoneDataError) -> Int64 {
        try need(8)
        defer { position += 8 }
        return Int64(bitPattern: bytes[position..<position + 8].reduce(0) { $0 << 8 | UInt64($1) })
    }

    /// The header at the current position; `used`: its section is the one read (a version 1 block
    /// before a version 2+ one may have no types, as zic's slim files write it).
    mutating func header(used: Bool) throws(ZoneDataError) -> TZifHeader {
        try need(44)
        guard bytes[position..<position + 4].elementsEqual("TZif".utf8) else {
            throw ZoneDataError(.notTZif, "no TZif magic at byte \(position)")
        }
        let v = bytes[position + 4]
        let version: Int
        switch v {
        case 0: version = 1
        case UInt8(ascii: "2"), UInt8(ascii: "3"), UInt8(ascii: "4"): version = Int(v - UInt8(ascii: "0"))
        default: throw ZoneDataError(.invalid, "unknown version byte \(v)")
        }
        position += 20
        var counts: [Int] = []
        for _ in 0..<6 { counts.append(Int(try u32())) }
        let h = TZifHeader(
            version: version,
            isutcnt: counts[0],
            isstdcnt: counts[1],
            leapcnt: counts[2],
            timecnt: counts[3],
            typecnt: counts[4],
            charcnt: counts[5]
        )
        guard h.timecnt <= TZifFile.maximumTransitions, h.leapcnt <= TZifFile.maximumTransitions,
            h.charcnt <= 4096
        else {
            throw ZoneDataError(
                .tooLarge,
                "\(h.timecnt) transitions, \(h.leapcnt) leap seconds, \(h.charcnt) characters"
            )
        }
        guard h.typecnt <= TZifFile.maximumTypes else {
            throw ZoneDataError(.tooLarge, "\(h.typecnt) local time types")
        }
        if used { try checkTypes(h) }
        guard h.isutcnt == 0 || h.isutcnt == h.typecnt, h.isstdcnt == 0 || h.isstdcnt == h.typecnt else {
            throw ZoneDataError(.invalid, "indicator counts \(h.isstdcnt) and \(h.isutcnt) for \(h.typecnt) types")
        }
        return h
    }

    func checkTypes(_ h: TZifHeader) throws(ZoneDataError) {
        guard h.typecnt >= 1 else { throw ZoneDataError(.invalid, "no local time types") }
    }

    mutating func section(
        _ h: TZifHeader,
        timeSize: Int
    ) throws(ZoneDataError) -> ([Int64], [Int], [TZifFile.LocalTimeType]) {
        try need(h.dataLength(timeSize: timeSize))
        var transitions: [Int64] = []
        transitions.reserveCapacity(h.timecnt)
        for _ in 0..<h.timecnt {
            let t = timeSize == 8 ? try i64() : Int64(Int32(bitPattern: try u32()))
            if let last = transitions.last, t <= last {
                throw ZoneDataError(.invalid, "transition \(transitions.count) at \(t) is not after \(last)")
            }
            transitions.append(t)
        }
        var indices: [Int] = []
        indices.reserveCapacity(h.timecnt)
        for _ in 0..<h.timecnt {
            let i = Int(try byte())
            guard i < h.typecnt else { throw ZoneDataError(.invalid, "type index \(i) of \(h.typecnt) types") }
            indices.append(i)
        }
        var types: [TZifFile.LocalTimeType] = []
        for _ in 0..<h.typecnt {
            let offset = Int32(bitPattern: try u32())
            // RFC 8536: -2^31 is not allowed; real offsets are within a day (-25:59:59 to 25:59:59, generously).
            guard abs(Int(offset)) < 26 * 3600 else { throw ZoneDataError(.invalid, "UTC offset \(offset)") }
            let dst = try byte()
            guard dst <= 1 else { throw ZoneDataError(.invalid, "isdst \(dst)") }
            let abbreviation = Int(try byte())
            guard abbreviation < max(h.charcnt, 1) else {
                throw ZoneDataError(.invalid, "abbreviation index \(abbreviation) of \(h.charcnt)")
            }
            types.append(.init(utcOffset: offset, isDST: dst == 1))
        }
        // Abbreviations, leap seconds, standard/wall and UT/local indicators: not needed.
        try skip(h.charcnt + h.leapcnt * (timeSize + 4) + h.isstdcnt + h.isutcnt)
        return (transitions, indices, types)
    }
}
