import Foundation

/// Text in aligned columns: each column as wide as its widest cell, two spaces between columns,
/// the last column not padded. An empty header shows no header line.
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
        let all = header.isEmpty ? rows : [header] + rows
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

    /// `text` cut to `width` characters, ending in `…` when cut.
    static func truncated(_ text: String, _ width: Int) -> String {
        let flat = text.replacingOccurrences(of: "\n", with: " ")
        guard flat.count > width else { return flat }
        return String(flat.prefix(width - 1)) + "…"
    }
}
