import ChimeTestSupport
import ChimeTime
import Testing

@testable import ChimeConsole

@Suite struct ConsoleCookieTests {
    private static let id = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    private static let other = "_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_"

    @Test func setsAndClearsTheSessionCookieWithEveryProtection() throws {
        var machine = ConsoleSessions(accounts: TestAccounts.accounts, random: SplitMix64(seed: 3))
        let outcome = machine.login(
            name: "bob",
            password: TestAccounts.bobPassword,
            address: "127.0.0.1",
            now: Instant(seconds: 0)
        )
        guard case .signedIn(let session) = outcome else {
            Issue.record("not signed in: \(outcome)")
            return
        }
        #expect(
            ConsoleSessions.setCookie(session)
                == "__Host-chime_console=\(session.id); Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=43200"
        )
        #expect(
            ConsoleSessions.clearCookie
                == "__Host-chime_console=; Path=/; HttpOnly; Secure; SameSite=Strict; Max-Age=0"
        )
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: "__Host-chime_console=\(session.id)") == [session.id])
        // What the __Host- prefix asks of the cookie: Secure, Path=/, no Domain.
        let attributes = ConsoleSessions.setCookie(session).split(separator: ";").map {
            $0.drop { $0 == " " }.lowercased()
        }
        #expect(attributes.contains("secure") && attributes.contains("path=/"))
        #expect(!attributes.contains { $0.hasPrefix("domain") })
    }

    @Test(
        arguments: [
            ("__Host-chime_console=\(id)", [id]),
            ("theme=dark; __Host-chime_console=\(id); lang=en", [id]),
            ("  __Host-chime_console \t=  \(id)  ;x=y", [id]),
            ("__Host-chime_console=\"\(id)\"", [id]),
            // Every one, in order.
            ("__Host-chime_console=\(id); __Host-chime_console=\(other)", [id, other]),
            ("__Host-chime_console=\(other); __Host-chime_console=\(id)", [other, id]),
            // Malformed pairs and values are passed over.
            ("garbage; ;;=; __Host-chime_console; __Host-chime_console=short; __Host-chime_console=\(id)", [id]),
            ("__Host-chime_console=\(id)x; __Host-chime_console=\(other)", [other]),
            ("__Host-chime_console=\(id.dropLast())+", []),
            ("__Host-chime_console=\"\(id)", []),
            // Not the name: case, prefixes, suffixes, the name without its prefix.
            ("__host-chime_console=\(id)", []),
            ("x__Host-chime_console=\(id)", []),
            ("__Host-chime_console_old=\(id)", []),
            ("chime_console=\(id)", []),
            ("__Secure-chime_console=\(id)", []),
            ("", []),
            ("__Host-chime_console=", []),
        ] as [(String, [String])]
    )
    func findsTheSessionIdsInACookieHeader(header: String, ids: [String]) {
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: header) == ids)
    }

    @Test func readsOnlyTheFirstFourKilobytesOfAHugeHeader() {
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: nil).isEmpty)
        let cookie = "__Host-chime_console=\(Self.id)"
        // 10,000 other cookies first: the session's is past 4 KiB, so not read.
        let many = (0..<10_000).map { "c\($0)=v" }.joined(separator: "; ")
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: many + "; " + cookie).isEmpty)
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: cookie + "; " + many) == [Self.id])
        // One megabyte in one cookie.
        let huge = "big=" + String(repeating: "x", count: 1 << 20)
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: huge + "; " + cookie).isEmpty)
        // Cut at the limit: a value cut short is not an id.
        let padding = String(repeating: "p", count: ConsoleSessions.maximumCookieHeaderBytes - cookie.utf8.count - 3)
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: "a=\(padding);" + cookie) == [Self.id])
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: "a=\(padding)p;" + cookie).isEmpty)
        // Many session cookies: the well-formed ones, at most eight.
        let sessions = String(repeating: "__Host-chime_console=bad; ", count: 100) + cookie
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: sessions) == [Self.id])
        let ids = String(repeating: cookie + "; ", count: 20)
        #expect(ConsoleSessions.sessionIds(fromCookieHeader: ids).count == ConsoleSessions.maximumSessionCandidates)
        #expect(ConsoleSessions.maximumSessionCandidates == 8)
    }
}

@Suite struct ConsoleOriginTests {
    @Test(
        arguments: [
            // (Origin, Referer, Host, allowed)
            ("http://127.0.0.1:8080", nil, "127.0.0.1:8080", true),
            ("HTTP://127.0.0.1:8080", nil, "127.0.0.1:8080", true),
            ("https://console.example", nil, "console.example", true),
            ("https://console.example:443", nil, "console.example", true),
            ("https://CONSOLE.Example", nil, "console.example:443", true),
            ("http://console.example", nil, "console.example:80", true),
            ("http://[::1]:8080", nil, "[::1]:8080", true),
            (nil, "http://127.0.0.1:8080/devices/d1?x=1#top", "127.0.0.1:8080", true),
            (nil, "http://127.0.0.1:8080", "127.0.0.1:8080", true),
            (nil, "https://console.example?q", "console.example", true),
            // Another site, port or scheme.
            ("https://evil.example", nil, "127.0.0.1:8080", false),
            ("http://127.0.0.1:8081", nil, "127.0.0.1:8080", false),
            ("http://127.0.0.1", nil, "127.0.0.1:8080", false),
            ("http://localhost:8080", nil, "127.0.0.1:8080", false),
            ("http://console.example", nil, "console.example:443", false),
            ("https://console.example", nil, "console.example:80", false),
            ("https://console.example.evil.example", nil, "console.example", false),
            ("https://evil.example", "https://console.example/", "console.example", false),
            (nil, "https://evil.example/https://console.example/", "console.example", false),
            (nil, "https://console.example.evil.example/", "console.example", false),
            // `null`, and what is not an origin.
            ("null", nil, "127.0.0.1:8080", false),
            ("null", "http://127.0.0.1:8080/", "127.0.0.1:8080", false),
            ("", nil, "127.0.0.1:8080", false),
            ("127.0.0.1:8080", nil, "127.0.0.1:8080", false),
            ("http://127.0.0.1:8080/", nil, "127.0.0.1:8080", false),
            ("ftp://127.0.0.1:8080", nil, "127.0.0.1:8080", false),
            ("file://", nil, "127.0.0.1:8080", false),
            ("http://user@127.0.0.1:8080", nil, "127.0.0.1:8080", false),
            (nil, "http://user:pw@127.0.0.1:8080/", "127.0.0.1:8080", false),
            ("http://127.0.0.1:99999", nil, "127.0.0.1:99999", false),
            ("http://127.0.0.1:0", nil, "127.0.0.1:0", false),
            ("http://127.0.0.1:", nil, "127.0.0.1:", false),
            ("http://127.0.0.1:8080 ", nil, "127.0.0.1:8080", false),
            ("http://127.0.0.1%2f:8080", nil, "127.0.0.1%2f:8080", false),
            ("http://[::1:8080", nil, "[::1:8080", false),
            ("http://" + String(repeating: "a", count: 10_000), nil, String(repeating: "a", count: 10_000), false),
            // Missing headers.
            (nil, nil, "127.0.0.1:8080", false),
            ("http://127.0.0.1:8080", nil, nil, false),
            ("http://127.0.0.1:8080", nil, "", false),
            (nil, "", "127.0.0.1:8080", false),
        ] as [(String?, String?, String?, Bool)]
    )
    func allowsOnlyTheConsoleOwnOrigin(origin: String?, referer: String?, host: String?, allowed: Bool) {
        #expect(ConsoleSessions.originAllowed(origin: origin, referer: referer, host: host) == allowed)
    }
}

@Suite struct ConsoleOriginsTests {
    @Test func allowsTheListenAddressAndLoopbackNamesOnItsPort() {
        let loopback = ConsoleOrigins(listenHost: "127.0.0.1", port: 8080, secure: false)
        #expect(loopback.allowed == ["http://127.0.0.1:8080", "http://localhost:8080", "http://[::1]:8080"])
        #expect(
            ConsoleOrigins(listenHost: "::1", port: 9, secure: true).allowed
                == ["https://[::1]:9", "https://localhost:9", "https://127.0.0.1:9"]
        )
        #expect(
            ConsoleOrigins(listenHost: "0.0.0.0", port: 80, secure: false).allowed
                == ["http://localhost:80", "http://127.0.0.1:80", "http://[::1]:80"]
        )
        #expect(ConsoleOrigins(listenHost: "10.1.2.3", port: 443, secure: true).allowed == ["https://10.1.2.3:443"])
        #expect(
            ConsoleOrigins(listenHost: "Console.Internal", port: 8080, secure: false).allowed == [
                "http://console.internal:8080"
            ]
        )
    }

    @Test(
        arguments: [
            ("127.0.0.1:8080", true), ("localhost:8080", true), ("LOCALHOST:8080", true), ("[::1]:8080", true),
            ("console.example.com", true), ("console.example.com:443", true),
            ("evil.example:8080", false), ("evil.example", false), ("127.0.0.1", false), ("127.0.0.1:8081", false),
            ("localhost", false), ("console.example.com:8080", false), ("console.example.com:80", false),
            ("127.0.0.2:8080", false), ("", false), ("127.0.0.1:8080 ", false), ("user@127.0.0.1:8080", false),
        ] as [(String, Bool)]
    )
    func allowsOnlyItsOwnHosts(host: String, allowed: Bool) throws {
        let origins = try #require(
            ConsoleOrigins(listenHost: "127.0.0.1", port: 8080, secure: false)
                .adding(origin: "https://console.example.com/")
        )
        #expect(origins.allowsHost(host) == allowed)
        #expect(!origins.allowsHost(nil))
    }

    @Test func takesPostsOnlyFromItsOriginsSchemeIncluded() throws {
        let origins = try #require(
            ConsoleOrigins(listenHost: "127.0.0.1", port: 8080, secure: false)
                .adding(origin: "https://console.example.com")
        )
        #expect(origins.allowsSource(origin: "http://127.0.0.1:8080", referer: nil))
        #expect(origins.allowsSource(origin: "https://console.example.com", referer: nil))
        #expect(origins.allowsSource(origin: "https://console.example.com:443", referer: nil))
        #expect(origins.allowsSource(origin: nil, referer: "https://console.example.com/device/d1?x=1"))
        #expect(!origins.allowsSource(origin: "http://console.example.com", referer: nil))
        #expect(!origins.allowsSource(origin: "https://127.0.0.1:8080", referer: nil))
        #expect(!origins.allowsSource(origin: "http://evil.example:8080", referer: nil))
        #expect(!origins.allowsSource(origin: "null", referer: "http://127.0.0.1:8080/"))
        #expect(!origins.allowsSource(origin: nil, referer: nil))
    }

    @Test(arguments: [
        "https://console.example.com", "https://console.example.com/", "http://10.0.0.1:8080", "https://[::1]:8443",
    ])
    func takesAnOrigin(text: String) {
        #expect(ConsoleOrigins.isOrigin(text))
    }

    @Test(arguments: [
        "console.example.com", "https://console.example.com/console", "https://console.example.com?x",
        "ftp://console.example.com", "https://user@console.example.com", "https://", "null", "",
        "https://console.example.com:0", "https://console.example.com:70000",
    ])
    func refusesWhatIsNotAnOrigin(text: String) {
        #expect(!ConsoleOrigins.isOrigin(text))
    }
}

@Suite struct ConsoleHeaderTests {
    @Test func sendsAStrictPolicyAndNoScript() {
        let headers = Dictionary(uniqueKeysWithValues: ConsoleSessions.securityHeaders)
        #expect(headers.count == ConsoleSessions.securityHeaders.count)
        #expect(
            headers["Content-Security-Policy"]
                == "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
                + "frame-ancestors 'none'; base-uri 'none'"
        )
        #expect(headers["X-Content-Type-Options"] == "nosniff")
        #expect(headers["Referrer-Policy"] == "same-origin")
        #expect(headers["X-Frame-Options"] == "DENY")
        #expect(headers["Cache-Control"] == "no-store")
        let policy = headers["Content-Security-Policy"] ?? ""
        for loophole in ["unsafe-inline", "unsafe-eval", "script-src", "*", "http:", "https:"] {
            #expect(!policy.contains(loophole))
        }
    }
}
