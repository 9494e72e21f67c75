import ChimeConsole
import ChimeTime
import Testing

@Suite("HTML escaping, paths and times")
struct HTMLTests {
    @Test("Text and attribute escaping")
    func escaping() {
        #expect(HTML.escapeText("<a href=\"x\">'&'</a>") == "&lt;a href=\"x\"&gt;'&amp;'&lt;/a&gt;")
        #expect(
            HTML.escapeAttribute("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        )
        #expect(HTML.escapeAttribute("plain text, é 漢字 🙂") == "plain text, é 漢字 🙂")
        #expect(HTML.escapeText("&amp;") == "&amp;amp;")
    }

    @Test("Interpolated strings are escaped, literals and HTML are not")
    func builder() {
        let body = "\"><script>x</script>"
        let html: HTML = "<td title=\"\(body)\">\(body)\(HTML("<br>"))\(3)</td>"
        #expect(
            html.rendered
                == "<td title=\"&quot;&gt;&lt;script&gt;x&lt;/script&gt;\">&quot;&gt;&lt;script&gt;x&lt;/script&gt;<br>3</td>"
        )
        #expect(HTML(text: "<b>").rendered == "&lt;b&gt;")
        #expect(HTML.join(["<i>a</i>", HTML(text: "<")], separator: ", ").rendered == "<i>a</i>, &lt;")
    }

    @Test("Paths percent-encode what a device chose")
    func paths() {
        #expect(ConsolePaths.device("phone-1") == "/device/phone-1")
        #expect(ConsolePaths.device("a@b:c.d_e~") == "/device/a%40b%3Ac.d_e~")
        #expect(ConsolePaths.device("../x?y#z") == "/device/..%2Fx%3Fy%23z")
        #expect(ConsolePaths.deviceAction("a b") == "/device/a%20b/act")
        #expect(ConsolePaths.device("d", tag: (key: "k&=", value: "é")) == "/device/d?key=k%26%3D&value=%C3%A9")
    }

    @Test("Times in a zone, with UTC in the markup and on hover")
    func times() {
        let instant = Instant(seconds: 1_796_637_600)  // 2026-12-07T10:00:00Z
        let shanghai = Zone(identifier: "Asia/Shanghai")
        #expect(ConsoleTime.text(instant, zone: shanghai) == "Mon 7 Dec 2026 18:00 (Asia/Shanghai)")
        #expect(
            ConsoleTime.html(instant, zone: shanghai).rendered
                == "<time datetime=\"2026-12-07T10:00:00Z\" title=\"2026-12-07T10:00:00Z UTC\">Mon 7 Dec 2026 18:00 (Asia/Shanghai)</time>"
        )
        #expect(ConsoleTime.text(instant.adding(seconds: 7), zone: nil) == "Mon 7 Dec 2026 10:00:07 (UTC)")
        #expect(ConsoleTime.utcText(instant, besides: shanghai) == "10:00 UTC")
        let late = Instant(seconds: 1_796_680_800)  // 2026-12-07T22:00:00Z, 06:00 on the 8th in Shanghai
        #expect(ConsoleTime.utcText(late, besides: shanghai) == "7 Dec 22:00 UTC")
        #expect(ConsoleTime.html("<b>not a time</b>", zone: nil).rendered == "&lt;b&gt;not a time&lt;/b&gt;")
        #expect(ConsoleTime.html("2026-12-01T18:00:00", zone: nil).rendered == "2026-12-01T18:00:00")
        #expect(ConsoleTime.duration(milliseconds: 273_600_000) == "3 d 4 h")
        #expect(ConsoleTime.duration(milliseconds: 18_720_000) == "5 h 12 min")
        #expect(ConsoleTime.duration(milliseconds: 42_000) == "42 s")
        #expect(ConsoleTime.zone(named: "device") == nil)
    }
}
