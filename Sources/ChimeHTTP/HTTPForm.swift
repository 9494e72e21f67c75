/// `application/x-www-form-urlencoded`, the body of an HTML form's `POST` and the shape of a query:
/// `name=value` fields joined by `&`, with `+` for a space and `%XX` for any other byte.
///
/// Pure, and strict where the WHATWG URL standard is lenient: a malformed escape or text that is
/// not UTF-8 makes the whole input nil rather than a guess, so that a handler never acts on a
/// field it read differently from the browser that sent it.
public enum HTTPForm {
    /// The media type, for `Content-Type`.
    public static let contentType = "application/x-www-form-urlencoded"

    /// The most fields ``decode(_:maxFields:)`` takes by default: more makes it nil.
    public static let maxFields = 1000

    /// The fields of `body` in order, each name and value with `+` read as a space and `%XX` as
    /// the byte XX. Empty fields (`a=1&&b=2`, a trailing `&`) are skipped; a field without `=` has
    /// an empty value; names may repeat.
    ///
    /// - Parameter maxFields: the most fields taken (``maxFields`` unless told): a form that names
    ///   up to 1,000 things besides a few fields of its own needs more.
    /// - Returns: nil if an escape is not `%` and two hexadecimal digits, if a name or value is not
    ///   UTF-8 once decoded, or if there are more than `maxFields` fields.
    public static func decode(_ body: [UInt8], maxFields: Int = HTTPForm.maxFields) -> [(String, String)]? {
        var fields: [(String, String)] = []
        for field in body.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            guard fields.count < maxFields else { return nil }
            let equals = field.firstIndex(of: UInt8(ascii: "=")) ?? field.endIndex
            guard let name = decodeComponent(field[..<equals]),
                let value = decodeComponent(field[equals...].dropFirst())
            else { return nil }
            fields.append((name, value))
        }
        return fields
    }

    /// `fields` as a form body or query (without `?`): every byte but letters, digits and `*-._`
    /// escaped, a space as `+`; ``decode(_:maxFields:)`` gives them back.
    public static func encode(_ fields: [(String, String)]) -> String {
        fields.map { "\(encodeComponent($0.0))=\(encodeComponent($0.1))" }.joined(separator: "&")
    }

    private static func decodeComponent(_ bytes: ArraySlice<UInt8>) -> String? {
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            switch bytes[index] {
            case UInt8(ascii: "+"):
                decoded.append(UInt8(ascii: " "))
                index += 1
            case UInt8(ascii: "%"):
                guard bytes.endIndex - index >= 3, let high = hexValue(bytes[index + 1]),
                    let low = hexValue(bytes[index + 2])
                else { return nil }
                decoded.append(high << 4 | low)
                index += 3
            case let byte:
                decoded.append(byte)
                index += 1
            }
        }
        return String(validating: decoded, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func encodeComponent(_ text: String) -> String {
        let digits = Array("0123456789ABCDEF".utf8)
        var encoded: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "*"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "_"):
                encoded.append(byte)
            case UInt8(ascii: " "):
                encoded.append(UInt8(ascii: "+"))
            default:
                encoded += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
            }
        }
        return String(decoding: encoded, as: UTF8.self)
    }
}
