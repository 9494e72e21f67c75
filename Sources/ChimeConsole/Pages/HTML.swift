/// A piece of HTML that is safe to send: markup written in this module's source, and text that went
/// through ``escapeAttribute(_:)`` on its way in.
///
/// Escaping is the default. A string literal is markup (it was written here); a `String`
/// interpolated into one is text, escaped for both element content and a quoted attribute value;
/// only another `HTML` is inserted as it is:
///
/// ```swift
/// let row: HTML = "<td title=\"\(body)\">\(body)</td>"  // body escaped twice over, safely
/// ```
///
/// Interpolating any other type does not compile, so no device string reaches a page unescaped by
/// accident. Attribute values must be written between double quotes, as every page here does.
public struct HTML: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringInterpolation {
    /// The markup.
    public private(set) var rendered: String

    /// Markup written in the source: a literal, never data.
    public init(stringLiteral markup: String) { rendered = markup }

    /// Literal markup with escaped text (`String`), numbers and trusted `HTML` interpolated.
    public init(stringInterpolation: Interpolation) { rendered = stringInterpolation.output }

    /// Text, escaped: `<script>` becomes `&lt;script&gt;`.
    public init(text: String) { rendered = HTML.escapeAttribute(text) }

    /// Nothing.
    public static let empty: HTML = ""

    public var description: String { rendered }

    /// Appends `other` as it is.
    public mutating func append(_ other: HTML) { rendered += other.rendered }

    /// `parts` one after the other, with `separator` between them.
    public static func join(_ parts: [HTML], separator: HTML = "") -> HTML {
        HTML(trusted: parts.map(\.rendered).joined(separator: separator.rendered))
    }

    /// `lhs` followed by `rhs`.
    public static func + (lhs: HTML, rhs: HTML) -> HTML { HTML(trusted: lhs.rendered + rhs.rendered) }

    /// Markup this module built from escaped parts.
    init(trusted markup: String) { rendered = markup }

    /// Text for element content: `&`, `<` and `>` escaped.
    public static func escapeText(_ text: String) -> String {
        escape(text, quotes: false)
    }

    /// Text for a double- or single-quoted attribute value (and element content): `&`, `<`, `>`,
    /// `"` and `'` escaped.
    public static func escapeAttribute(_ text: String) -> String {
        escape(text, quotes: true)
    }

    private static func escape(_ text: String, quotes: Bool) -> String {
        guard text.utf8.contains(where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 || $0 == 0x27 }) else {
            return text
        }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"" where quotes: out += "&quot;"
            case "'" where quotes: out += "&#39;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Builds an ``HTML`` value from a literal with interpolations (see ``HTML``).
    public struct Interpolation: StringInterpolationProtocol {
        var output = ""

        public init(literalCapacity: Int, interpolationCount: Int) {
            output.reserveCapacity(literalCapacity + interpolationCount * 16)
        }

        /// The literal parts: markup.
        public mutating func appendLiteral(_ literal: String) { output += literal }

        /// Text, escaped (safe in element content and in a quoted attribute value).
        public mutating func appendInterpolation(_ text: String) { output += HTML.escapeAttribute(text) }

        /// Markup already safe, as it is.
        public mutating func appendInterpolation(_ html: HTML) { output += html.rendered }

        /// Several pieces of markup, one after the other.
        public mutating func appendInterpolation(_ parts: [HTML]) {
            for part in parts { output += part.rendered }
        }

        /// A number.
        public mutating func appendInterpolation(_ number: Int) { output += String(number) }
    }
}

/// The console's paths, written once: the pages link to them and the routes serve them.
///
/// Every part that comes from a device (its id, a `userInfo` key or value) is percent-encoded, so
/// that it stays one path segment or one query value whatever it holds.
public enum ConsolePaths {
    public static let login = "/login"
    public static let logout = "/logout"
    public static let fleet = "/fleet"
    /// The find form's target: `GET /find?device=...` (with `key` and `value` for a `userInfo` tag,
    /// `go=list` to list the devices found, `after` for the next page of them).
    public static let find = "/find"
    /// The one stylesheet every page links, ``ConsolePages/stylesheet``.
    public static let stylesheet = "/console.css"

    /// `/device/{id}`, with `?key=...&value=...` when a `userInfo` tag filters its notifications.
    public static func device(_ id: String, tag: (key: String, value: String)? = nil) -> String {
        let path = "/device/" + percentEncoded(id)
        guard let tag else { return path }
        return path + "?key=" + percentEncoded(tag.key) + "&value=" + percentEncoded(tag.value)
    }

    /// `/device/{id}/act`: where the action forms post (`action`, `ids`, `minutes`, `confirm`, `csrf`).
    public static func deviceAction(_ id: String) -> String { device(id) + "/act" }

    /// `/device/{id}/edit?id={notification}`: the form that edits one notification's text.
    public static func deviceEdit(_ id: String, notification: String) -> String {
        device(id) + "/edit?id=" + percentEncoded(notification)
    }

    /// `/find?go=list&...`: the devices whose id starts with `prefix` and, with a `tag`, that have a
    /// notification with it, after `after`.
    public static func found(prefix: String, tag: (key: String, value: String)?, after: String? = nil) -> String {
        var path = find + "?go=list&device=" + percentEncoded(prefix)
        if let tag { path += "&key=" + percentEncoded(tag.key) + "&value=" + percentEncoded(tag.value) }
        if let after { path += "&after=" + percentEncoded(after) }
        return path
    }

    /// `text` with every byte outside RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`)
    /// written `%XX`: safe as a path segment and as a query value.
    public static func percentEncoded(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
