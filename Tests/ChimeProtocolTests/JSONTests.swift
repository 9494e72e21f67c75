import ChimeCore
import Testing

@Suite struct JSONTests {
    @Test func roundTripKeepsOrderAndTypes() throws {
        let text = #"{"b":1,"a":[true,false,null,-0.5,"x\n\"y\u00e9"],"c":{"z":9223372036854775807}}"#
        let value = try JSON(parsing: text)
        #expect(value.text == #"{"b":1,"a":[true,false,null,-0.5,"x\n\"yé"],"c":{"z":9223372036854775807}}"#)
        #expect(try JSON(parsing: value.bytes) == value)
    }

    /// What the byte counter measures is what the writer writes, escapes and all.
    @Test(arguments: [
        #"{"b":1,"a":[true,false,null,-0.5,"x\n\"y\u00e9\\\u0001\t"],"c":{"z":9223372036854775807}}"#,
        "-9223372036854775808", "0", "[1e300,2.5,-7,100.0]", #""😀 and 漢字""#, "{}", "[]",
    ])
    func byteCountIsTheWrittenSize(_ text: String) throws {
        let value = try JSON(parsing: text)
        #expect(value.byteCount == value.bytes.count)
        #expect(value.byteCount > 0)
    }

    @Test func integersAreWrittenInDecimal() {
        for n: Int64 in [0, 7, -7, 10, 1_000_000, .max, .min] {
            #expect(JSON.int(n).text == String(n))
        }
    }

    @Test func equalityIsJSONEquality() throws {
        #expect(try JSON(parsing: "1") == JSON(parsing: "1.0"))
        #expect(try JSON(parsing: #"{"a":1,"b":2}"#) == JSON(parsing: #"{"b":2,"a":1}"#))
        #expect(try JSON(parsing: "1") != JSON(parsing: "true"))
        #expect(try JSON(parsing: #""1""#) != JSON(parsing: "1"))
    }

    @Test(arguments: [
        "", "{", "[1,]", #"{"a":1,}"#, "01", "1.", "-", "tru", #""\x""#, #""\ud800""#, #""\udc00x""#,
        #"{"a":1,"a":2}"#, "[1] x", "\"a\u{01}\"", "NaN", "1e999",
    ])
    func rejectsInvalid(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSON(parsing: text) }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSON(parsing: [0x22, 0xFF, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSON(parsing: [0x22, 0x5C, 0x6E, 0xC3, 0x22]) }
    }

    @Test func depthIsBounded() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSON(parsing: deep) }
        let ok = String(repeating: "[", count: JSON.maximumDepth) + String(repeating: "]", count: JSON.maximumDepth)
        #expect((try? JSON(parsing: ok)) != nil)
    }

    @Test func surrogatePairs() throws {
        #expect(try JSON(parsing: #""\ud83d\ude00""#) == .string("😀"))
    }

    @Test func numbers() throws {
        #expect(try JSON(parsing: "-9223372036854775808") == .int(Int64.min))
        #expect(try JSON(parsing: "9.223372036854776e18") == .double(9_223_372_036_854_775_808))
        #expect(try JSON(parsing: "1e3") == .int(1000))
        #expect(JSON.double(2.5).text == "2.5")
        #expect(JSON.double(100).text == "100")
    }

    /// Every number Chime accepts comes back as the same value; the others are refused.
    @Test(arguments: [
        "0.1", "0.10", "-0.5", "1e-5", "0.00001", "1.5e300", "123456789012345.6", "-0.0", "5e-324",
        "1.7976931348623157e308", "1E+2", "9007199254740992",
    ])
    func exactNumbersRoundTrip(_ text: String) throws {
        let value = try JSON(parsing: text)
        #expect(try JSON(parsing: value.bytes) == value)
    }

    @Test(arguments: [
        "12345678901234567890", "12345678901234567891", "-12345678901234567890", "1.0000000000000000001",
        "0.1000000000000000055511151231257827", "1e-400", "9007199254740993.0", "18446744073709551616",
    ])
    func inexactNumbersAreRefused(_ text: String) {
        let alone = #expect(throws: JSONParseError.self) { try JSON(parsing: text) }
        #expect(alone?.code == .inexactNumber)
        let inside = #expect(throws: JSONParseError.self) { try JSON(parsing: #"{"order":\#(text)}"#) }
        #expect(inside?.code == .inexactNumber)
    }

    /// Duplicate keys are found whether the object is small (scanned) or large (a set).
    @Test(arguments: [2, 16, 17, 100, 50_000])
    func duplicateKeysInObjectsOfAnySize(_ count: Int) throws {
        let members = (0..<count).map { "\"k\($0)\":\($0)" }
        let unique = try JSON(parsing: "{" + members.joined(separator: ",") + "}")
        #expect(unique.objectValue?.count == count)
        #expect(throws: JSONParseError.self) {
            try JSON(parsing: "{" + (members + ["\"k\(count - 1)\":0"]).joined(separator: ",") + "}")
        }
        #expect(throws: JSONParseError.self) {
            try JSON(parsing: "{" + (members + ["\"k0\":0"]).joined(separator: ",") + "}")
        }
    }

    @Test func depthLimitIsAParameter() throws {
        let nested = String(repeating: "[", count: 70) + String(repeating: "]", count: 70)
        let error = #expect(throws: JSONParseError.self) { try JSON(parsing: nested) }
        #expect(error?.code == .tooDeep)
        #expect(try JSON(parsing: nested, maximumDepth: 70).depth == 70)
    }
}
