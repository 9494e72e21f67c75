/// Why a payload is not JSON (or not JSON Chime can keep exactly), and where.
public struct JSONParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem: equality compares codes, so tests can build the expected error.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable { case syntax, tooDeep, inexactNumber }
        private let value: Value
        /// Not JSON (RFC 8259).
        public static let syntax = Code(value: .syntax)
        /// Nested deeper than the parser's depth limit.
        public static let tooDeep = Code(value: .tooDeep)
        /// A number that a 64-bit integer or float cannot hold exactly (it would come back changed).
        public static let inexactNumber = Code(value: .inexactNumber)
        public var description: String { "\(value)" }
    }

    public var code: Code
    /// Byte offset of the problem in the input.
    public var offset: Int
    public var reason: String

    public init(_ code: Code = .syntax, offset: Int, reason: String) {
        self.code = code
        self.offset = offset
        self.reason = reason
    }

    public var description: String { "\(reason) at byte \(offset)" }
}

extension JSON {
    /// The deepest nesting of arrays and objects a payload may have. Parsing is recursive, so this
    /// bound is what keeps a payload of ten thousand `[` from overflowing the stack. Commands are
    /// parsed with it; what Chime writes itself (journal records, snapshots, replies) wraps a
    /// command's values in at most a few more levels, which the limits on those values leave room
    /// for (see `NotificationCoding.maximumUserInfoDepth`).
    public static let maximumDepth = 64

    /// Parses a complete JSON text (RFC 8259, strict: no comments, no trailing commas, valid UTF-8,
    /// no lone surrogates, no duplicate keys), in time linear in its length.
    ///
    /// Numbers are kept exactly or refused: an integer within 64 bits stays an integer; any other
    /// number must be one that a 64-bit float holds exactly as written (at most 17 significant
    /// digits that survive the conversion), else ``JSONParseError/Code/inexactNumber``, so that
    /// what is stored and sent back is what was received (`12345678901234567890` is refused
    /// rather than turned into `1.2345678901234567e+19`).
    public init(parsing bytes: [UInt8], maximumDepth: Int = JSON.maximumDepth) throws(JSONParseError) {
        self = try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            var parser = JSONParser(buffer, maximumDepth: maximumDepth)
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 0)
            parser.skipWhitespace()
            guard parser.index == buffer.count else { throw parser.error("unexpected data after the JSON value") }
            return value
        }
    }

    public init(parsing text: String, maximumDepth: Int = JSON.maximumDepth) throws(JSONParseError) {
        try self.init(parsing: Array(text.utf8), maximumDepth: maximumDepth)
    }
}

private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maximumDepth: Int
    var index = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    func error(_ reason: String) -> JSONParseError { JSONParseError(offset: index, reason: reason) }

    func tooDeep() -> JSONParseError {
        JSONParseError(.tooDeep, offset: index, reason: "nested deeper than \(maximumDepth) levels")
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSON {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            guard depth < maximumDepth else { throw tooDeep() }
            return .object(try parseObject(depth: depth + 1))
        case UInt8(ascii: "["):
            guard depth < maximumDepth else { throw tooDeep() }
            return .array(try parseArray(depth: depth + 1))
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber()
        default:
            throw error("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw error("invalid literal") }
        let start = literal.utf8Start
        for i in 0..<count where bytes[index + i] != start[i] {
            throw error("invalid literal")
        }
        index += count
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONObject {
        index += 1  // {
        var object = JSONObject()
        // Duplicate keys: a scan while the object is small, a set once it is not, so that an object
        // of n members costs O(n) and not O(n²).
        var keys: Set<String>?
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return object
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let keyOffset = index
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            let duplicate: Bool
            if keys != nil {
                duplicate = !keys!.insert(key).inserted
            } else {
                duplicate = object.members.contains { $0.key == key }
                if object.count == Self.keyScanLimit { keys = Set(object.keys + [key]) }
            }
            if duplicate { throw JSONParseError(offset: keyOffset, reason: "duplicate key \"\(key)\"") }
            object.append(key, value)
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return object
            } else {
                throw error("expected ',' or '}'")
            }
        }
    }

    /// Objects with more members than this check for duplicate keys in a set.
    static let keyScanLimit = 16

    mutating func parseArray(depth: Int) throws(JSONParseError) -> [JSON] {
        index += 1  // [
        var array: [JSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return array
        }
        while true {
            skipWhitespace()
            array.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input in an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return array
            } else {
                throw error("expected ',' or ']'")
            }
        }
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        var isASCII = true
        // Fast path: no escapes.
        while index < bytes.count {
            let b = bytes[index]
            if b >= 0x80 { isASCII = false }
            if b == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                // ASCII is valid UTF-8: skip the (slower) validating initializer.
                if isASCII { return String(decoding: slice, as: UTF8.self) }
                guard let s = String(validating: slice, as: UTF8.self) else {
                    throw JSONParseError(offset: start, reason: "invalid UTF-8 in a string")
                }
                return s
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw error("unescaped control character in a string") }
            index += 1
        }
        var out: [UInt8] = Array(bytes[start..<index])
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                index += 1
                guard let s = String(validating: out, as: UTF8.self) else {
                    throw JSONParseError(offset: start, reason: "invalid UTF-8 in a string")
                }
                return s
            }
            if b < 0x20 { throw error("unescaped control character in a string") }
            if b != UInt8(ascii: "\\") {
                out.append(b)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { break }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try parseHex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard bytes.count - index >= 6, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    else { throw error("lone surrogate in a string") }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw error("lone surrogate in a string") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw error("lone surrogate in a string")
                }
                guard let u = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                out.append(contentsOf: String(Character(u)).utf8)
            default:
                throw error("invalid escape")
            }
        }
        throw JSONParseError(offset: start - 1, reason: "unterminated string")
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw error("invalid \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws(JSONParseError) -> JSON {
        let start = index
        var negative = false
        if bytes[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
        var integral = true
        var magnitude: UInt64 = 0
        var overflow = false
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw error("leading zero in a number") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) {
                let (m1, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (m2, o2) = m1.addingReportingOverflow(UInt64(bytes[index] - UInt8(ascii: "0")))
                overflow = overflow || o1 || o2
                magnitude = m2
                index += 1
            }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if integral && !overflow {
            if negative {
                if magnitude <= UInt64(Int64.max) { return .int(-Int64(magnitude)) }
                if magnitude == UInt64(Int64.max) + 1 { return .int(Int64.min) }
            } else if magnitude <= UInt64(Int64.max) {
                return .int(Int64(magnitude))
            }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw JSONParseError(offset: start, reason: "number out of range")
        }
        guard DecimalDigits(text) == DecimalDigits(value.description) else {
            throw JSONParseError(
                .inexactNumber,
                offset: start,
                reason:
                    "the number \(text.prefix(40)) cannot be kept exactly (a 64-bit integer or float would change it; send it as a string)"
            )
        }
        return .double(value)
    }

    @inline(__always) func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
}

/// A decimal number as its significant digits and the power of ten of the first one, so that
/// `0.10`, `1e-1` and `.1e0` compare equal and `12345678901234567890` differs from
/// `1.2345678901234567e+19`.
private struct DecimalDigits: Equatable {
    var negative = false
    var digits: [UInt8] = []
    var exponent = 0

    /// - Parameter text: a JSON number, or a Swift `Double.description` (`1e-05`, `100.0`).
    init(_ text: String) {
        var pointSeen = false
        var position = 0  // digits before the point, counting leading zeros
        var leadingZeros = 0
        var mantissaDone = false
        var exponentText = ""
        for b in text.utf8 {
            if mantissaDone {
                exponentText.unicodeScalars.append(Unicode.Scalar(b))
                continue
            }
            switch b {
            case UInt8(ascii: "-"): negative = true
            case UInt8(ascii: "."): pointSeen = true
            case UInt8(ascii: "e"), UInt8(ascii: "E"): mantissaDone = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if !pointSeen { position += 1 }
                if digits.isEmpty && b == UInt8(ascii: "0") {
                    leadingZeros += 1
                } else {
                    digits.append(b)
                }
            default: break
            }
        }
        while digits.last == UInt8(ascii: "0") { digits.removeLast() }
        if digits.isEmpty {
            // Zero: its sign and exponent do not matter.
            negative = false
            return
        }
        exponent = position - leadingZeros + (Int(exponentText) ?? 0)
    }
}
