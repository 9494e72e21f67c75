/// Text chosen by a device or a worker (ids, bodies, `userInfo`, error messages, worker statuses)
/// made safe to show on a terminal: a character that a terminal acts on instead of showing (ESC
/// starting a title change, a screen clear or an OSC 52 clipboard write) is written as `\u{XX}`,
/// its code point in hex, so the operator sees it and the terminal does nothing.
///
/// Escaped: C0 controls (U+0000–U+001F, tab and newline included unless kept), DEL (U+007F),
/// C1 controls (U+0080–U+009F, CSI U+009B among them), and the Unicode bidirectional formatting
/// characters (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069), which reorder what is shown.
/// A backslash is left as it is, so escaping twice changes nothing. JSON output (`--json`,
/// `--raw`) is not escaped: it goes out exactly as chimed sent it (``Console/exact(_:)``).
enum TerminalText {
    /// `text` with each character that a terminal would act on written as `\u{XX}`.
    /// - Parameter keepingNewlines: keep U+000A as a line break (text of several lines).
    static func escaped(_ text: String, keepingNewlines: Bool = false) -> String {
        let scalars = text.unicodeScalars
        guard scalars.contains(where: { needsEscape($0, keepingNewlines) }) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in scalars {
            guard needsEscape(scalar, keepingNewlines) else {
                out.append(scalar)
                continue
            }
            let hex = String(scalar.value, radix: 16, uppercase: true)
            out.append(contentsOf: "\\u{\(hex.count < 2 ? "0" + hex : hex)}".unicodeScalars)
        }
        return String(out)
    }

    static func needsEscape(_ scalar: Unicode.Scalar, _ keepingNewlines: Bool) -> Bool {
        switch scalar.value {
        case 0x0A: return !keepingNewlines
        case 0x00...0x1F, 0x7F...0x9F: return true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }
}
