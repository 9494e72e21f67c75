import ChimeCore
import Testing

@Suite struct JSONTests {
    @Test func roundTripKeepsOrderAndTypes() throws {
        let text = #"{"b":1,"a":[true,false,null,-0.5,"x\n\"y\u00e9"],"c":{"z":9223372036854775807}}"#
        let value = try JSON(parsing: text)
        #expect(value.text == #"{"b":1,"a":[true,false,null,-0.5,"x\n\"yé"],"c":{"z":9223372036854775807}}"#)
        #expect(try JSON(parsing: value.bytes) == value)
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
        #expect(try JSON(parsing: "9223372036854775808") == .double(9_223_372_036_854_775_808))
        #expect(try JSON(parsing: "1e3") == .int(1000))
        #expect(JSON.double(2.5).text == "2.5")
        #expect(JSON.double(100).text == "100")
    }
}
