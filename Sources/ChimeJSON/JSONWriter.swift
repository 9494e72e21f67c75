/// Printed as JSON text (`print(delivery.userInfo)` shows `{"kind":"med"}`).
extension JSON: CustomStringConvertible {
    public var description: String { text }
}

extension JSONObject: CustomStringConvertible {
    public var description: String { JSON.object(self).text }
}

/// Where the writer puts JSON text: a byte array, or a counter that only measures it.
public protocol JSONOutput {
    mutating func append(_ byte: UInt8)
    mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>)
}

extension Array: JSONOutput where Element == UInt8 {}

/// Counts the bytes of JSON text without keeping them: the size of a value as ``JSON/bytes``
/// would write it, without allocating.
public struct JSONByteCount: JSONOutput {
    public private(set) var count = 0

    public init() {}

    public mutating func append(_ byte: UInt8) { count += 1 }
    public mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) { count += bytes.count }
}

extension JSONOutput {
    @inlinable package mutating func append(_ text: StaticString) {
        text.withUTF8Buffer { append(contentsOf: $0) }
    }

    /// An integer in decimal, without going through a `String`. (On the stack, not in an
    /// `InlineArray`: that needs a runtime newer than the client library's platforms.)
    @inlinable package mutating func append(decimal n: Int64) {
        if n < 0 { append(UInt8(ascii: "-")) }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var magnitude = n.magnitude
            var i = 20
            repeat {
                i -= 1
                digits[i] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            append(contentsOf: UnsafeBufferPointer(rebasing: digits[i...]))
        }
    }
}

extension JSON {
    /// The compact UTF-8 encoding of this value (no insignificant white space, keys in order).
    @inlinable public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(to: &out)
        return out
    }

    /// How many bytes ``bytes`` holds, counted without writing them.
    public var byteCount: Int {
        var counter = JSONByteCount()
        write(to: &counter)
        return counter.count
    }

    /// The compact encoding as a `String`.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    @inlinable public func write(to out: inout some JSONOutput) {
        switch self {
        case .null: out.append("null")
        case .bool(let b): out.append(b ? "true" : "false")
        case .int(let i): out.append(decimal: i)
        case .double(let d):
            if let exact = Int64(exactly: d), abs(d) < 1e15 {
                out.append(decimal: exact)
            } else {
                var text = String(d)
                text.withUTF8 { out.append(contentsOf: $0) }
            }
        case .string(let s): JSON.writeString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, element) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                element.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, member) in o.members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    @usableFromInline static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes a JSON string literal, escaping quotes, backslashes and control characters.
    @inlinable public static func writeString(_ s: String, to out: inout some JSONOutput) {
        out.append(UInt8(ascii: "\""))
        var string = s
        string.withUTF8 { utf8 in
            // Most strings need no escaping: copy them in one go.
            var needsEscape = false
            for b in utf8 where b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") {
                needsEscape = true
                break
            }
            if !needsEscape {
                out.append(contentsOf: utf8)
                return
            }
            for b in utf8 {
                switch b {
                case UInt8(ascii: "\""): out.append("\\\"")
                case UInt8(ascii: "\\"): out.append("\\\\")
                case 0x0A: out.append("\\n")
                case 0x0D: out.append("\\r")
                case 0x09: out.append("\\t")
                case 0..<0x20:
                    out.append("\\u00")
                    out.append(hexDigits[Int(b >> 4)])
                    out.append(hexDigits[Int(b & 0xF)])
                default: out.append(b)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension JSONOutput {
    /// Writes an object member's `"key":`, after a comma unless it is the object's first
    /// (`first`, which it clears): for encoders that write an object straight into bytes rather
    /// than build a ``JSONObject`` first. Keys are plain ASCII that needs no escaping.
    @inlinable package mutating func appendKey(_ key: StaticString, first: inout Bool) {
        if first { first = false } else { append(UInt8(ascii: ",")) }
        append(UInt8(ascii: "\""))
        append(key)
        append("\":")
    }

    /// A member and its value (``appendKey(_:first:)``).
    @inlinable package mutating func appendMember(_ key: StaticString, _ value: JSON, first: inout Bool) {
        appendKey(key, first: &first)
        value.write(to: &self)
    }
}
