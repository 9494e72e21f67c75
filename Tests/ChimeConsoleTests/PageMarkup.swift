// The pages' markup taken apart, for the tests: every `<` in a page is markup (text is escaped), so
// a scan from `<` to `>` finds every tag, and every attribute value is between double quotes.

/// One tag of a page.
struct Tag: CustomStringConvertible {
    var name: String
    var attributes: [String: String]
    var isClosing: Bool
    var isSelfClosing: Bool
    /// Where it starts in the page, in characters.
    var offset: Int

    var description: String { "<\(isClosing ? "/" : "")\(name) \(attributes)>" }
}

/// A page's tags, or why they could not be read.
struct PageMarkup {
    static let voidElements: Set<String> = ["meta", "link", "input", "br", "hr", "img", "source", "wbr"]

    var tags: [Tag] = []
    var problems: [String] = []

    init(_ page: String) {
        let chars = Array(page)
        var i = 0
        while i < chars.count {
            guard chars[i] == "<" else {
                if chars[i] == ">" { problems.append("a bare > at \(i)") }
                i += 1
                continue
            }
            let start = i
            guard let end = chars[i...].firstIndex(of: ">") else {
                problems.append("a tag that never ends at \(i)")
                break
            }
            let inner = String(chars[(i + 1)..<end])
            i = end + 1
            if inner.lowercased().hasPrefix("!doctype") { continue }
            if let tag = Self.parse(inner, offset: start, problems: &problems) { tags.append(tag) }
        }
        checkNesting()
    }

    static func parse(_ inner: String, offset: Int, problems: inout [String]) -> Tag? {
        var text = Substring(inner)
        let isClosing = text.first == "/"
        if isClosing { text = text.dropFirst() }
        let isSelfClosing = text.last == "/"
        if isSelfClosing { text = text.dropLast() }
        let name = String(text.prefix { $0.isLetter || $0.isNumber || $0 == "-" })
        guard !name.isEmpty else {
            problems.append("not a tag: <\(inner)>")
            return nil
        }
        text = text.dropFirst(name.count)
        var attributes: [String: String] = [:]
        while true {
            text = text.drop { $0 == " " || $0 == "\n" }
            guard !text.isEmpty else { break }
            let attribute = String(text.prefix { $0 != "=" && $0 != " " && $0 != "\n" })
            guard !attribute.isEmpty else {
                problems.append("unreadable attributes in <\(inner)>")
                return nil
            }
            text = text.dropFirst(attribute.count)
            if attributes[attribute] != nil { problems.append("\(attribute) twice in <\(inner)>") }
            guard text.first == "=" else {
                attributes[attribute] = ""
                continue
            }
            text = text.dropFirst()
            guard text.first == "\"", let close = text.dropFirst().firstIndex(of: "\"") else {
                problems.append("an unquoted value of \(attribute) in <\(inner)>")
                return nil
            }
            attributes[attribute] = String(text[text.index(after: text.startIndex)..<close])
            text = text[text.index(after: close)...]
        }
        return Tag(
            name: name.lowercased(),
            attributes: attributes,
            isClosing: isClosing,
            isSelfClosing: isSelfClosing,
            offset: offset
        )
    }

    /// Every element that is not void is closed, in order.
    mutating func checkNesting() {
        var open: [Tag] = []
        for tag in tags {
            if tag.isClosing {
                guard let last = open.popLast() else {
                    problems.append("</\(tag.name)> closes nothing")
                    continue
                }
                if last.name != tag.name { problems.append("</\(tag.name)> closes <\(last.name)> at \(last.offset)") }
            } else if !tag.isSelfClosing && !Self.voidElements.contains(tag.name) {
                open.append(tag)
            }
        }
        for tag in open { problems.append("<\(tag.name)> at \(tag.offset) is never closed") }
    }

    func all(_ name: String) -> [Tag] { tags.filter { $0.name == name && !$0.isClosing } }

    /// The tags between an opening tag and its closing one.
    func inside(_ element: Tag) -> [Tag] {
        guard let start = tags.firstIndex(where: { $0.offset == element.offset }) else { return [] }
        var depth = 0
        var found: [Tag] = []
        for tag in tags[(start + 1)...] {
            if tag.name == element.name {
                if tag.isClosing {
                    if depth == 0 { break }
                    depth -= 1
                } else {
                    depth += 1
                }
            }
            found.append(tag)
        }
        return found
    }
}
