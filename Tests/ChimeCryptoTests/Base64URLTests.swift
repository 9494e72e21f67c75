import ChimeCrypto
import Testing

@Suite struct Base64URLTests {
    /// RFC 4648 section 10, without padding, and bytes whose encoding needs `-` and `_`.
    @Test(arguments: [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ])
    func encodesTheRFCVectors(text: String, encoded: String) {
        #expect(Base64URL.encode(Array(text.utf8)) == encoded)
        #expect(Base64URL.decode(encoded) == Array(text.utf8))
    }

    @Test func usesTheURLSafeAlphabet() {
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.encode([0xFF]) == "_w")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
    }

    @Test func acceptsPadding() {
        #expect(Base64URL.decode("Zg==") == Array("f".utf8))
        #expect(Base64URL.decode("Zm8=") == Array("fo".utf8))
        #expect(Base64URL.decode("Zm9vYg==") == Array("foob".utf8))
    }

    @Test(arguments: [
        "+/+/",  // the standard alphabet
        "Zm9v Yg",  // white space
        "Zm9v\nYg",
        "Z",  // a length no encoding has
        "Zm9vY",
        "Zg=",  // padding that does not make a multiple of four
        "Zg===",
        "Z===",
        "Zm9v====",
        "Zg==Zg==",  // padding inside
        "=Zg=",
        "Zh",  // unused bits that are not zero
        "Zm9",
        "Zm9vYh==",
        "é",
    ])
    func refusesWhatIsNotCanonicalBase64URL(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func roundTripsEveryByteAndLength() {
        let bytes = (0..<256).map { UInt8($0) }
        for length in 0...bytes.count {
            let prefix = Array(bytes[..<length])
            let text = Base64URL.encode(prefix)
            #expect(!text.contains("="))
            #expect(Base64URL.decode(text) == prefix)
        }
    }
}
