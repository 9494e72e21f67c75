import Foundation

/// Text in aligned columns: each column as wide as its widest cell, two spaces between columns,
/// the last column not padded. An empty header shows no header line. Cells are shown with their
/// control characters escaped, line breaks too (``TerminalText``), and measured so.
struct Table: Sendable {
    var header: [String]
    var rows: [[String]] = []

    init(_ header: [String]) {
        self.header = header
    }

    mutating func append(_ row: [String]) {
        rows.append(row)
    }

    var lines: [String] {
        let all = (header.isEmpty ? rows : [header] + rows).map { $0.map { TerminalText.escaped($0) } }
        let columns = all.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: columns)
        for row in all {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        return all.map { row in
            var line = ""
            for (index, cell) in row.enumerated() {
                if index > 0 { line += "  " }
                line += cell
                if index < row.count - 1 { line += String(repeating: " ", count: widths[index] - cell.count) }
            }
            while line.hasSuffix(" ") { line.removeLast() }
            return line
        }
    }

    /// `text` on one line (line breaks as spaces, control characters escaped) cut to `width`
    /// characters, ending in `…` when cut, never inside an escape.
    static func truncated(_ text: String, _ width: Int) -> String {
        let flat = TerminalText.escaped(text.replacingOccurrences(of: "\n", with: " "))
        guard flat.count > width else { return flat }
        var cut = flat.prefix(width - 1)
        if let open = cut.range(of: "\\u{", options: .backwards), !cut[open.upperBound...].contains("}") {
            cut = cut[..<open.lowerBound]
        }
        return cut + "…"
    }
}
