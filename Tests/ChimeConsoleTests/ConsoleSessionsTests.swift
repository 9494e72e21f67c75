import ChimeTestSupport
import ChimeTime
import Testing

@testable import ChimeConsole

/// A start time, and the test's clock moved from it.
private let start = Instant(seconds: 1_800_000_000)

private func at(seconds: Int64 = 0, minutes: Int64 = 0, hours: Int64 = 0) -> Instant {
    start.adding(seconds: seconds + minutes * 60 + hours * 3600)
}

private func sessions(seed: UInt64 = 1) -> ConsoleSessions {
    ConsoleSessions(accounts: TestAccounts.accounts, random: SplitMix64(seed: seed))
}

extension ConsoleSessions.LoginOutcome {
    var session: ConsoleSessions.Session? {
        if case .signedIn(let session) = self { session } else { nil }
    }
}

@Suite struct ConsoleLoginTests {
    @Test func signsInWithTheRightNameAndPassword() throws {
        var machine = sessions()
        let outcome = machine.login(
            name: "alice",
            password: TestAccounts.alicePassword,
            address: "10.0.0.1",
            now: start
        )
        let session = try #require(outcome.session)
        #expect(session.account == "alice")
        #expect(session.role == .operator)
        #expect(session.createdAt == start && session.lastSeen == start)
        #expect(session.id.utf8.count == 43 && session.csrfToken.utf8.count == 43)
        #expect(ConsoleSessions.isToken(session.id) && ConsoleSessions.isToken(session.csrfToken))
        #expect(session.id != session.csrfToken)
        #expect(machine.session(id: session.id, now: at(seconds: 1))?.account == "alice")
        #expect(machine.count == 1)
    }

    @Test func refusesAWrongNameAndAWrongPasswordAlike() {
        var machine = sessions()
        let wrongPassword = machine.login(name: "alice", password: "guess", address: "10.0.0.1", now: start)
        let wrongName = machine.login(
            name: "mallory",
            password: TestAccounts.alicePassword,
            address: "10.0.0.2",
            now: start
        )
        let locked = machine.login(name: "carol", password: TestAccounts.alicePassword, address: "10.0.0.3", now: start)
        #expect(wrongPassword == .refused && wrongName == .refused && locked == .refused)
        #expect(machine.count == 0)
    }

    @Test func limitsFailuresPerAddressInASlidingWindow() {
        var machine = sessions()
        for second in 0..<5 {
            #expect(
                machine.login(name: "alice", password: "guess", address: "10.0.0.1", now: at(seconds: Int64(second)))
                    == .refused
            )
        }
        // Even the right password is not checked now, until the first failure is 5 minutes old.
        #expect(
            machine.login(
                name: "alice",
                password: TestAccounts.alicePassword,
                address: "10.0.0.1",
                now: at(seconds: 10)
            )
                == .tooManyAttempts(retryAfterSeconds: 290)
        )
        #expect(
            machine.login(name: "bob", password: "guess", address: "10.0.0.1", now: at(seconds: 299))
                == .tooManyAttempts(retryAfterSeconds: 1)
        )
        // Another address is not held back.
        #expect(
            machine.login(
                name: "alice",
                password: TestAccounts.alicePassword,
                address: "10.0.0.2",
                now: at(seconds: 10)
            ).session != nil
        )
        // When the first failure leaves the window, one more attempt may be made, and no more.
        #expect(machine.login(name: "alice", password: "guess", address: "10.0.0.1", now: at(minutes: 5)) == .refused)
        #expect(
            machine.login(name: "alice", password: "guess", address: "10.0.0.1", now: at(minutes: 5))
                == .tooManyAttempts(retryAfterSeconds: 1)
        )
        #expect(
            machine.login(
                name: "alice",
                password: TestAccounts.alicePassword,
                address: "10.0.0.1",
                now: at(minutes: 10)
            ).session != nil
        )
    }

    @Test func aSuccessDoesNotWipeTheAddressFailures() {
        var machine = sessions()
        for _ in 0..<4 {
            #expect(machine.login(name: "bob", password: "guess", address: "10.0.0.1", now: start) == .refused)
        }
        #expect(
            machine.login(name: "alice", password: TestAccounts.alicePassword, address: "10.0.0.1", now: start).session
                != nil
        )
        #expect(machine.login(name: "bob", password: "guess", address: "10.0.0.1", now: start) == .refused)
        #expect(
            machine.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.0.1", now: start)
                == .tooManyAttempts(retryAfterSeconds: 300)
        )
    }

    @Test func limitsFailuresPerNameWhateverTheAddresses() {
        var machine = sessions()
        for index in 0..<20 {
            #expect(machine.login(name: "alice", password: "guess", address: "10.0.1.\(index)", now: start) == .refused)
        }
        #expect(
            machine.login(name: "alice", password: TestAccounts.alicePassword, address: "10.0.2.1", now: start)
                == .tooManyAttempts(retryAfterSeconds: 300)
        )
        #expect(
            machine.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.2.1", now: start).session
                != nil
        )
    }

    @Test func countsAnIPv6ClientByItsSlash64() {
        var machine = sessions()
        for host in 1...5 {
            #expect(machine.login(name: "bob", password: "guess", address: "2001:db8::\(host)", now: start) == .refused)
        }
        #expect(
            machine.login(name: "bob", password: "guess", address: "2001:db8:0:0:ffff::1", now: start)
                == .tooManyAttempts(retryAfterSeconds: 300)
        )
        #expect(machine.login(name: "bob", password: "guess", address: "2001:db8:0:1::1", now: start) == .refused)
    }

    @Test(arguments: [
        ("10.0.0.1", "10.0.0.1"),
        ("::ffff:10.0.0.1", "10.0.0.1"),
        ("2001:db8::1", "2001:db8:0:0::/64"),
        ("[2001:DB8:0:0:1:2:3:4]", "2001:db8:0:0::/64"),
        ("2001:db8:aaaa:bbbb:1::", "2001:db8:aaaa:bbbb::/64"),
        ("::1", "0:0:0:0::/64"),
    ])
    func keysAddresses(address: String, key: String) {
        #expect(LoginThrottle.addressKey(address) == key)
        #expect(LoginThrottle.addressKey(String(repeating: "x", count: 1000)).utf8.count == 64)
    }

    /// The attempts being checked count, so that logins checked at once cannot all pass.
    @Test func countsAdmittedAttemptsUntilTheyEnd() throws {
        var machine = sessions()
        var tickets: [ConsoleSessions.LoginTicket] = []
        for _ in 0..<5 {
            guard case .proceed(let ticket) = machine.beginLogin(name: "alice", address: "10.0.0.1", now: start) else {
                Issue.record("refused before the limit")
                return
            }
            tickets.append(ticket)
        }
        #expect(
            machine.beginLogin(name: "alice", address: "10.0.0.1", now: start)
                == .tooManyAttempts(retryAfterSeconds: 300)
        )
        let alice = try #require(machine.accounts.authenticate(name: "alice", password: TestAccounts.alicePassword))
        #expect(machine.finishLogin(tickets[0], account: alice, now: start).session != nil)
        // One success frees its place.
        guard case .proceed = machine.beginLogin(name: "alice", address: "10.0.0.1", now: start) else {
            Issue.record("a success kept its place")
            return
        }
        // A ticket of another name cannot sign alice in.
        guard case .proceed(let bobs) = machine.beginLogin(name: "bob", address: "10.0.0.9", now: start) else { return }
        #expect(machine.finishLogin(bobs, account: alice, now: start) == .refused)
        #expect(machine.finishLogin(tickets[1], account: nil, now: start) == .refused)
    }

    /// Each table keeps at most 10,000 keys; the one whose last failure is the oldest goes.
    @Test func remembersAtMostTenThousandAddressesAndNames() {
        var machine = sessions()
        for _ in 0..<5 { _ = machine.beginLogin(name: "first", address: "192.168.0.1", now: start) }
        #expect(
            machine.beginLogin(name: "x", address: "192.168.0.1", now: start)
                == .tooManyAttempts(retryAfterSeconds: 300)
        )
        for index in 0..<ConsoleSessions.maximumTrackedKeys {
            _ = machine.beginLogin(
                name: "n\(index)",
                address: "10.\(index >> 16).\((index >> 8) & 255).\(index & 255)",
                now: at(seconds: 1)
            )
        }
        var throttle = machine.throttle
        #expect(throttle.addresses.failures.count == 10_000)
        #expect(throttle.names.failures.count == 10_000)
        #expect(throttle.addresses.failures["192.168.0.1"] == nil)
        #expect(throttle.names.failures["first"] == nil)
        // Forgotten, so it may try again: the price of bounded memory (the per-name limit stays).
        guard case .proceed = machine.beginLogin(name: "x", address: "192.168.0.1", now: at(seconds: 2)) else {
            Issue.record("the oldest address was not forgotten")
            return
        }
        // Made-up names that could not be an account are not remembered.
        _ = throttle.admit(address: "172.16.0.1", name: "not a name", now: at(seconds: 3))
        #expect(throttle.names.failures["not a name"] == nil)
    }

    @Test func forgetsExpiredKeysBeforeRecentOnes() {
        var log = AttemptLog(limit: 2, window: 1000, capacity: 3)
        log.record("a", now: Instant(milliseconds: 0))
        log.record("b", now: Instant(milliseconds: 500))
        log.record("c", now: Instant(milliseconds: 900))
        log.record("b", now: Instant(milliseconds: 950))
        // At 1,200 "a" has left the window: it goes, and "c" (older than "b") stays.
        log.record("d", now: Instant(milliseconds: 1200))
        #expect(Set(log.failures.keys) == ["b", "c", "d"])
        // Full of recent keys: the one whose last failure is the oldest goes.
        log.record("e", now: Instant(milliseconds: 1300))
        #expect(Set(log.failures.keys) == ["b", "d", "e"])
        // A key holds at most `limit` times.
        for ms in 1400..<1410 { log.record("e", now: Instant(milliseconds: Int64(ms))) }
        #expect(log.failures["e"]?.count == 2)
        // "e" waits until its older kept failure (1,408) is 1,000 ms old; "b" until 500's is.
        #expect(log.wait("e", now: Instant(milliseconds: 1410)) == 998)
        #expect(log.wait("b", now: Instant(milliseconds: 1410)) == 90)
        #expect(log.wait("b", now: Instant(milliseconds: 1500)) == nil)
        #expect(log.wait("d", now: Instant(milliseconds: 1410)) == nil)
    }
}

@Suite struct ConsoleSessionTests {
    /// Signs an account in `times` times, a millisecond apart from `now` on, without checking its
    /// password each time.
    private func signIn(
        _ machine: inout ConsoleSessions,
        _ name: String,
        times: Int,
        now: Instant
    )
        -> [ConsoleSessions.Session]
    {
        let account = machine.accounts[name]!
        return (0..<times).compactMap { index in
            let now = now.adding(milliseconds: Int64(index))
            guard case .proceed(let ticket) = machine.beginLogin(name: name, address: "10.0.0.1", now: now) else {
                return nil
            }
            return machine.finishLogin(ticket, account: account, now: now).session
        }
    }

    private func manyAccounts(_ count: Int) -> ConsoleSessions {
        ConsoleSessions(accounts: try! ConsoleAccounts(parsing: TestAccounts.many(count)), random: SplitMix64(seed: 7))
    }

    @Test func endsASessionUnusedForThirtyMinutes() throws {
        var machine = sessions()
        let session = try #require(
            machine.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.0.1", now: start).session
        )
        #expect(session.expiresAt == at(minutes: 30))
        #expect(machine.session(id: session.id, now: at(minutes: 29))?.lastSeen == at(minutes: 29))
        #expect(machine.session(id: session.id, now: at(seconds: 59, minutes: 58)) != nil)
        #expect(machine.session(id: session.id, now: at(seconds: 59, minutes: 88)) == nil)
        // Ended: an earlier clock does not bring it back.
        #expect(machine.session(id: session.id, now: at(minutes: 60)) == nil)
        #expect(machine.count == 0)
    }

    @Test func endsASessionTwelveHoursAfterSignInHoweverUsed() throws {
        var machine = sessions()
        let session = try #require(
            machine.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.0.1", now: start).session
        )
        var now = start
        while now < at(hours: 12).adding(milliseconds: -20 * 60 * 1000) {
            now = now.adding(seconds: 20 * 60)
            #expect(machine.session(id: session.id, now: now) != nil)
        }
        #expect(machine.session(id: session.id, now: at(hours: 12).adding(milliseconds: -1)) != nil)
        #expect(machine.session(id: session.id, now: at(hours: 12)) == nil)
        #expect(ConsoleSessions.setCookie(session).hasSuffix("Max-Age=43200"))
    }

    @Test func aClockThatGoesBackDoesNotExtendASession() throws {
        var machine = sessions()
        let session = try #require(
            machine.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.0.1", now: at(minutes: 10))
                .session
        )
        #expect(machine.session(id: session.id, now: at(minutes: 5))?.lastSeen == at(minutes: 10))
        #expect(machine.session(id: session.id, now: at(minutes: 40)) == nil)
    }

    @Test func logsOut() throws {
        var machine = sessions()
        let session = try #require(
            machine.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.0.1", now: start).session
        )
        machine.logout(id: session.id)
        #expect(machine.session(id: session.id, now: start) == nil)
        machine.logout(id: "no such session")
    }

    @Test func findsNothingForIdsOfAnotherShape() throws {
        var machine = sessions()
        let session = try #require(
            machine.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.0.1", now: start).session
        )
        for id in [
            "", String(session.id.dropLast()), session.id + "A", session.id.uppercased(), session.csrfToken,
            String(repeating: "A", count: 100_000),
        ] {
            #expect(machine.session(id: id, now: start) == nil)
        }
    }

    @Test func keepsTwentySessionsAnAccountEndingTheOneUnusedTheLongest() {
        var machine = manyAccounts(2)
        let first = signIn(&machine, "user0", times: 20, now: start)
        let other = signIn(&machine, "user1", times: 1, now: start)
        // The first session is used, so the second is the one unused the longest.
        #expect(machine.session(id: first[0].id, now: at(seconds: 1)) != nil)
        let newer = signIn(&machine, "user0", times: 1, now: at(seconds: 2))
        #expect(newer.count == 1)
        #expect(machine.count == 22 - 1)
        #expect(machine.session(id: first[1].id, now: at(seconds: 3)) == nil)
        #expect(machine.session(id: first[0].id, now: at(seconds: 3)) != nil)
        #expect(machine.session(id: other[0].id, now: at(seconds: 3)) != nil)
    }

    @Test func keepsAThousandSessionsEndingTheOneUnusedTheLongest() {
        var machine = manyAccounts(51)
        var all: [ConsoleSessions.Session] = []
        for index in 0..<50 {
            all += signIn(&machine, "user\(index)", times: 20, now: at(seconds: Int64(index)))
        }
        #expect(machine.count == 1000)
        #expect(machine.session(id: all[0].id, now: at(seconds: 60)) != nil)
        let newest = signIn(&machine, "user50", times: 1, now: at(seconds: 61))
        #expect(newest.count == 1)
        #expect(machine.count == 1000)
        #expect(machine.session(id: all[0].id, now: at(seconds: 62)) != nil)
        #expect(machine.session(id: all[1].id, now: at(seconds: 62)) == nil)
        #expect(machine.session(id: all[2].id, now: at(seconds: 62)) != nil)
        // Expired sessions go before live ones.
        _ = signIn(&machine, "user50", times: 1, now: at(hours: 1))
        #expect(machine.count == 1)
    }

    @Test func endsTheSessionsOfAccountsThatChange() throws {
        var machine = sessions()
        let alice = try #require(
            machine.login(name: "alice", password: TestAccounts.alicePassword, address: "10.0.0.1", now: start).session
        )
        let bob = try #require(
            machine.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.0.1", now: start).session
        )
        // Alice becomes a viewer; bob stays as he was.
        let text = TestAccounts.text.replacingOccurrences(of: "alice:operator", with: "alice:viewer")
        machine.replaceAccounts(try ConsoleAccounts(parsing: text))
        #expect(machine.session(id: alice.id, now: start) == nil)
        #expect(machine.session(id: bob.id, now: start) != nil)
        // Bob is locked.
        machine.replaceAccounts(
            try ConsoleAccounts(parsing: text.replacingOccurrences(of: "bob:viewer:", with: "bob:viewer:!"))
        )
        #expect(machine.session(id: bob.id, now: start) == nil)
        // A sign-in checked against the old accounts does not open a session.
        guard case .proceed(let ticket) = machine.beginLogin(name: "alice", address: "10.0.0.2", now: start) else {
            return
        }
        let oldAlice = TestAccounts.accounts.authenticate(name: "alice", password: TestAccounts.alicePassword)
        #expect(machine.finishLogin(ticket, account: oldAlice, now: start) == .refused)
    }

    @Test func drawsIdsAndTokensFromTheGenerator() throws {
        var one = sessions(seed: 42)
        var two = sessions(seed: 42)
        let a = try #require(
            one.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.0.1", now: start).session
        )
        let b = try #require(
            two.login(name: "bob", password: TestAccounts.bobPassword, address: "10.0.0.1", now: start).session
        )
        #expect(a.id == b.id && a.csrfToken == b.csrfToken)

        var system = ConsoleSessions(accounts: TestAccounts.accounts)
        let signedIn = signIn(&system, "bob", times: 20, now: start)
        let tokens = Set(signedIn.flatMap { [$0.id, $0.csrfToken] })
        #expect(tokens.count == 40)
        #expect(tokens.allSatisfy { ConsoleSessions.isToken($0) })
    }

    @Test func encodesBase64URLWithoutPadding() {
        #expect(ConsoleSessions.base64URL([]) == "")
        #expect(ConsoleSessions.base64URL(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(ConsoleSessions.base64URL(Array("fooba".utf8)) == "Zm9vYmE")
        #expect(ConsoleSessions.base64URL(Array("foob".utf8)) == "Zm9vYg")
        #expect(ConsoleSessions.base64URL([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(ConsoleSessions.base64URL([UInt8](repeating: 0xFF, count: 32)).utf8.count == 43)
    }

    @Test func checksTheCSRFTokenExactly() throws {
        var machine = sessions()
        let session = try #require(
            machine.login(name: "alice", password: TestAccounts.alicePassword, address: "10.0.0.1", now: start).session
        )
        let other = try #require(
            machine.login(name: "alice", password: TestAccounts.alicePassword, address: "10.0.0.1", now: start).session
        )
        #expect(ConsoleSessions.validCSRF(session.csrfToken, for: session))
        var changed = Array(session.csrfToken.utf8)
        changed[changed.count - 1] = changed.last == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        for token in [
            nil, "", other.csrfToken, session.id, String(session.csrfToken.dropLast()), session.csrfToken + "A",
            String(decoding: changed, as: UTF8.self), " " + session.csrfToken,
        ] {
            #expect(!ConsoleSessions.validCSRF(token, for: session))
        }
    }
}
