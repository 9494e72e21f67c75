import ChimeHTTP
import ChimeTestSupport
import Testing

/// The form decoder alone: what a browser sends, and what it never would.
@Suite struct HTTPFormTests {
    @Test(
        arguments: [
            ("", []),
            ("a=1&b=2", ["a=1", "b=2"]),
            ("a+b=c+d", ["a b=c d"]),
            ("a=%41%e2%82%AC", ["a=A€"]),
            ("a=%2B%26%3D%25", ["a=+&=%"]),
            ("a", ["a="]),
            ("a=", ["a="]),
            ("=x", ["=x"]),
            ("a=1=2", ["a=1=2"]),
            ("a=1&&b=2&", ["a=1", "b=2"]),
            ("a=1&a=2", ["a=1", "a=2"]),
            ("a=x%0D%0Ay", ["a=x\r\ny"]),
            ("name=J%C3%BCrgen+M&csrf=abc%2B%2F", ["name=Jürgen M", "csrf=abc+/"]),
        ] as [(String, [String])]
    )
    func decodesWhatBrowsersSend(body: String, expected: [String]) {
        #expect(formText(HTTPForm.decode(Array(body.utf8))) == expected)
    }

    @Test(arguments: [
        Array("a=%".utf8), Array("a=%4".utf8), Array("a=%zz".utf8), Array("a=%4g".utf8), Array("%=1".utf8),
        // Escapes of bytes that are not UTF-8, and such bytes sent as they are.
        Array("a=%ff".utf8), Array("%c3%28=x".utf8), Array("a=".utf8) + [0xFF], [0xC3] + Array("=x".utf8),
    ])
    func malformedFormsAreNil(body: [UInt8]) {
        #expect(HTTPForm.decode(body) == nil)
    }

    @Test func atMostMaxFieldsFields() {
        let fields = (0..<HTTPForm.maxFields).map { "f\($0)=\($0)" }
        #expect(HTTPForm.decode(Array(fields.joined(separator: "&").utf8))?.count == HTTPForm.maxFields)
        let more = (fields + ["one=more"]).joined(separator: "&")
        #expect(HTTPForm.decode(Array(more.utf8)) == nil)
        // Empty fields are not fields.
        let sparse = fields.joined(separator: "&&&") + "&&&&"
        #expect(HTTPForm.decode(Array(sparse.utf8))?.count == HTTPForm.maxFields)
    }

    @Test func aCallerMayTakeMoreFields() {
        let fields = (0..<1100).map { "ids=\($0)" }.joined(separator: "&")
        #expect(HTTPForm.decode(Array(fields.utf8)) == nil)
        #expect(HTTPForm.decode(Array(fields.utf8), maxFields: 1100)?.count == 1100)
        #expect(HTTPForm.decode(Array((fields + "&x=1").utf8), maxFields: 1100) == nil)
        let request = HTTPRequest(
            method: "POST",
            path: "/",
            headers: [("Content-Type", "application/x-www-form-urlencoded")],
            body: Array(fields.utf8)
        )
        #expect(request.form == nil && request.form(maxFields: 1100)?.count == 1100)
    }

    @Test func encodeGivesBackWhatDecodeReads() {
        let fields = [
            ("a b", "c+d"), ("&=%", "?#/"), ("é€😀", "\r\n\t"), ("", ""), ("plain", "A-Z_a.z*0~9"),
        ]
        let encoded = HTTPForm.encode(fields)
        #expect(encoded.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "#") })
        #expect(formText(HTTPForm.decode(Array(encoded.utf8))) == formText(fields))
        #expect(HTTPForm.encode([("q", "a b&c")]) == "q=a+b%26c")
    }

    @Test func aRequestReadsItsQueryAndItsFormBody() {
        var request = HTTPRequest(method: "POST", path: "/login", query: "next=%2Fhome&x")
        #expect(formText(request.queryItems) == ["next=/home", "x="])
        request.body = Array("user=ann&password=a+b".utf8)
        // Not a form without its type.
        #expect(request.form == nil)
        request.headers = [("content-TYPE", " application/x-www-form-urlencoded ; charset=UTF-8")]
        #expect(formText(request.form) == ["user=ann", "password=a b"])
        request.headers = [("Content-Type", "multipart/form-data; boundary=x")]
        #expect(request.form == nil)
        request.headers = [("Content-Type", HTTPForm.contentType)]
        request.body = Array("a=%".utf8)
        #expect(request.form == nil)
    }
}
