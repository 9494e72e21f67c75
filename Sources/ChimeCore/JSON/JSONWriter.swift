/// Printed as JSON text (`print(delivery.userInfo)` shows `{"kind":"med"}`).
extension JSON: CustomStringConvertible {
    public var description: String { text }
}

extension JSONObject: CustomStringConvertible {
    public var description: String { JSON.object(self).text }
}

extension JSON {
    /// The compact UTF-8 encoding of this value (no insignificant white space, keys in order).
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(to: &out)
        return out
    }

    /// The compact encoding as a `String`.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            if let exact = Int64(exactly: d), abs(d) < 1e15 {
                out.append(contentsOf: String(exact).utf8)
            } else {
                out.append(contentsOf: String(d).utf8)
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

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes a JSON string literal, escaping quotes, backslashes and control characters.
    public static func writeString(_ s: String, to out: inout [UInt8]) {
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
                case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
                case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case 0..<0x20:
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30])
                    out.append(hexDigits[Int(b >> 4)])
                    out.append(hexDigits[Int(b & 0xF)])
                default: out.append(b)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
