/// A JSON value, as RFC 8259 defines it.
///
/// Chime parses and writes JSON itself rather than through Foundation: it needs exact error
/// positions for replies, integers that stay integers, objects that keep their key order (a
/// notification is listed with its fields as they were given), and no bridging through `NSNumber`,
/// where `true` and `1` are hard to tell apart.
public enum JSON: Sendable {
    case null
    case bool(Bool)
    /// An integral number that fits in 64 bits.
    case int(Int64)
    /// Any other number.
    case double(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)
}

/// A JSON object: its members in the order they were written. Keys are unique.
public struct JSONObject: Sendable, Hashable, Sequence {
    public private(set) var members: [(key: String, value: JSON)]

    public init() { members = [] }

    /// Builds an object; a later duplicate key replaces the earlier value.
    public init(_ members: [(String, JSON)]) {
        self.members = []
        self.members.reserveCapacity(members.count)
        for (key, value) in members { self[key] = value }
    }

    @inlinable public var count: Int { members.count }
    @inlinable public var isEmpty: Bool { members.isEmpty }
    public var keys: [String] { members.map(\.key) }

    public subscript(key: String) -> JSON? {
        @inlinable get { members.first(where: { $0.key == key })?.value }
        set {
            if let index = members.firstIndex(where: { $0.key == key }) {
                if let newValue {
                    members[index].value = newValue
                } else {
                    members.remove(at: index)
                }
            } else if let newValue {
                members.append((key, newValue))
            }
        }
    }

    /// Appends a member without looking for an existing one: for writers that know keys are new.
    public mutating func append(_ key: String, _ value: JSON) {
        members.append((key, value))
    }

    @inlinable public func makeIterator() -> IndexingIterator<[(key: String, value: JSON)]> {
        members.makeIterator()
    }

    /// Objects are equal when they have the same keys with equal values, in any order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for (key, value) in lhs.members {
            guard let other = rhs[key], other == value else { return false }
        }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        // Order-independent: combine the members' hashes commutatively.
        var sum = 0
        for (key, value) in members {
            var h = Hasher()
            h.combine(key)
            h.combine(value)
            sum = sum &+ h.finalize()
        }
        hasher.combine(count)
        hasher.combine(sum)
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, JSON)...) { self.init(elements) }
}

extension JSON: Hashable {
    /// JSON equality: numbers compare by value (`1` equals `1.0`), objects ignore key order.
    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.double(let a), .double(let b)): return a == b
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)): return Double(exactly: a) == b
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .int(let i): hasher.combine(Double(i))
        case .double(let d): hasher.combine(d)
        case .string(let s): hasher.combine(s)
        case .array(let a): hasher.combine(a)
        case .object(let o): hasher.combine(o)
        }
    }
}

extension JSON {
    public var objectValue: JSONObject? {
        if case .object(let o) = self { return o }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var arrayValue: [JSON]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// How many levels of arrays and objects the value nests: 0 for a scalar, 1 for `[]` or `{"a":1}`.
    @inlinable public var depth: Int {
        switch self {
        case .array(let a): return 1 + (a.lazy.map(\.depth).max() ?? 0)
        case .object(let o): return 1 + (o.members.lazy.map(\.value.depth).max() ?? 0)
        default: return 0
        }
    }

    /// A short name of the value's type, for error messages ("expected a string, got a number").
    public var typeDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .int, .double: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, JSON)...) { self = .object(JSONObject(elements)) }
}
