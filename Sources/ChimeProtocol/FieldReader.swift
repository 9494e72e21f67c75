/// Reads the members of one JSON object of a command, with errors that name the field by its
/// full path (`notifications[2].fireDate`).
package struct FieldReader {
    package let object: JSONObject
    package let path: String

    package init(_ object: JSONObject, path: String = "") {
        self.object = object
        self.path = path
    }

    package func name(_ key: String) -> String { path + key }

    /// Rejects members not in `allowed` with `unknown_field`, with a "did you mean" when one of
    /// them is close, or when `hints` names the member (another API's name for one of ours).
    package func checkKnown(_ allowed: Set<String>, hints: [String: String] = [:]) throws(ChimeError) {
        for key in object.keys where !allowed.contains(key) {
            let hint = suggestion(for: key, among: allowed, hints: hints)
            throw ChimeError(
                .unknownField,
                field: name(key),
                "\(name(String(key.prefix(128)))): unknown field" + (hint.map { " (did you mean \($0)?)" } ?? "")
            )
        }
    }

    package func has(_ key: String) -> Bool { object[key] != nil }

    /// A member that must be there: `value` as read, or `invalid_argument` "missing".
    package func required<T>(_ value: T?, _ key: String) throws(ChimeError) -> T {
        guard let value else { throw .invalid(name(key), "missing") }
        return value
    }

    package func wrongType(_ key: String, _ expected: String, _ value: JSON) -> ChimeError {
        .invalid(name(key), "expected \(expected), got \(value.typeDescription)")
    }

    package func string(_ key: String, maxLength: Int = 65_536, allowEmpty: Bool = true) throws(ChimeError) -> String? {
        guard let value = object[key] else { return nil }
        guard case .string(let s) = value else { throw wrongType(key, "a string", value) }
        if !allowEmpty && s.isEmpty { throw .invalid(name(key), "must not be empty") }
        if !Self.fits(s, maxLength) { throw .invalid(name(key), "longer than \(maxLength) characters") }
        return s
    }

    /// Whether `s` has at most `maxLength` characters. A string has no more characters than UTF-8
    /// bytes, so the characters are counted (a walk over grapheme clusters) only when the bytes
    /// are more.
    package static func fits(_ s: String, _ maxLength: Int) -> Bool {
        s.utf8.count <= maxLength || s.count <= maxLength
    }

    package func bool(_ key: String) throws(ChimeError) -> Bool? {
        guard let value = object[key] else { return nil }
        guard case .bool(let b) = value else { throw wrongType(key, "true or false", value) }
        return b
    }

    package func integer(_ key: String, in range: ClosedRange<Int64>) throws(ChimeError) -> Int64? {
        guard let value = object[key] else { return nil }
        let n: Int64
        switch value {
        case .int(let i): n = i
        case .double(let d) where d.rounded() == d && abs(d) < 9e18: n = Int64(d)
        default: throw wrongType(key, "an integer", value)
        }
        guard range.contains(n) else {
            throw .invalid(name(key), "\(n) is out of range \(range.lowerBound)...\(range.upperBound)")
        }
        return n
    }

    /// A number of seconds, returned in milliseconds (rounded to the nearest). With `minInclusive`
    /// false, the milliseconds too must be above `min`: `0.0004` is above 0 but would be kept as 0,
    /// which the journal, reading it back with the same bounds, would refuse.
    package func seconds(_ key: String, min: Double, minInclusive: Bool, max: Double) throws(ChimeError) -> Int64? {
        guard let value = object[key] else { return nil }
        let d: Double
        switch value {
        case .int(let i): d = Double(i)
        case .double(let x): d = x
        default: throw wrongType(key, "a number of seconds", value)
        }
        let lowOK = minInclusive ? d >= min : d > min
        guard lowOK, d <= max else {
            let low = minInclusive ? ">= \(format(min))" : "> \(format(min))"
            throw .invalid(name(key), "must be \(low) and <= \(format(max)) seconds")
        }
        let milliseconds = Int64((d * 1000).rounded())
        guard minInclusive || Double(milliseconds) > min * 1000 else {
            throw .invalid(name(key), "must be > \(format(min)) seconds once rounded to the millisecond")
        }
        return milliseconds
    }

    package func object(_ key: String) throws(ChimeError) -> JSONObject? {
        guard let value = object[key] else { return nil }
        guard case .object(let o) = value else { throw wrongType(key, "an object", value) }
        return o
    }

    package func array(_ key: String, maxCount: Int) throws(ChimeError) -> [JSON]? {
        guard let value = object[key] else { return nil }
        guard case .array(let a) = value else { throw wrongType(key, "an array", value) }
        guard a.count <= maxCount else { throw .invalid(name(key), "more than \(maxCount) elements") }
        return a
    }

    package func strings(_ key: String, maxCount: Int, maxLength: Int) throws(ChimeError) -> [String]? {
        guard let array = try array(key, maxCount: maxCount) else { return nil }
        var out: [String] = []
        out.reserveCapacity(array.count)
        for (i, element) in array.enumerated() {
            guard case .string(let s) = element else {
                throw .invalid("\(name(key))[\(i)]", "expected a string, got \(element.typeDescription)")
            }
            guard !s.isEmpty, Self.fits(s, maxLength) else {
                throw .invalid("\(name(key))[\(i)]", "must be 1 to \(maxLength) characters")
            }
            out.append(s)
        }
        return out
    }

    package func dateTime(_ key: String) throws(ChimeError) -> DateTimeValue? {
        guard let s = try string(key, maxLength: 64) else { return nil }
        guard let value = DateTimeValue(iso8601: s) else { throw ChimeError.badDate(name(key), s) }
        return value
    }
}

extension ChimeError {
    package static func badDate(_ field: String, _ text: String) -> ChimeError {
        .invalid(
            field,
            "expected an ISO 8601 date-time such as 2026-12-01T18:00:00 or 2026-12-01T10:00:00Z, got \(quoted(text))"
        )
    }
}

/// A string quoted for an error message, cut short when long.
package func quoted(_ text: String) -> String {
    let short = text.count > 64 ? String(text.prefix(64)) + "…" : text
    return JSON.string(short).text
}

package func format(_ d: Double) -> String {
    d.rounded() == d && abs(d) < 1e15 ? String(Int64(d)) : String(d)
}
