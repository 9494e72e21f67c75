import ChimeConsole
import ChimePassword
import ChimeTestSupport
import Foundation
import Testing

/// Accounts whose passwords the tests know, with hashes made by other programs.
enum TestAccounts {
    static let alicePassword = IndependentHashes.yescryptPassword
    static let bobPassword = IndependentHashes.bcryptPassword
    static let text = """
        # The console's accounts: name:role:hash
        alice:operator:\(IndependentHashes.yescrypt)

        bob:viewer:\(IndependentHashes.bcrypt)
        carol:operator:!\(IndependentHashes.yescrypt)

        """
    static let accounts = try! ConsoleAccounts(parsing: text)

    /// `count` accounts `user0`, `user1`, ..., each a viewer with the same hash (nothing is
    /// hashed), after a comment line.
    static func many(_ count: Int) -> String {
        "# many\n" + (0..<count).map { "user\($0):viewer:\(IndependentHashes.yescrypt)\n" }.joined()
    }
}

@Suite struct ConsoleAccountsTests {
    @Test func readsNamesRolesAndHashesSkippingCommentsAndBlankLines() throws {
        let accounts = TestAccounts.accounts
        #expect(accounts.count == 3)
        #expect(accounts.accounts.map(\.name) == ["alice", "bob", "carol"])
        #expect(accounts["alice"]?.role == .operator)
        #expect(accounts["bob"]?.role == .viewer)
        #expect(accounts["dave"] == nil)
    }

    @Test func writesItsTextBackWithTheCommentsAsTheyWere() throws {
        #expect(TestAccounts.accounts.text == TestAccounts.text)
        let crlf = TestAccounts.text.replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try ConsoleAccounts(parsing: crlf).text == TestAccounts.text)
        let indented = "  # note\n\talice:operator:\(IndependentHashes.yescrypt)  \n"
        #expect(
            try ConsoleAccounts(parsing: indented).text == "  # note\nalice:operator:\(IndependentHashes.yescrypt)\n"
        )
    }

    @Test func authenticatesOnlyTheRightNameAndPassword() {
        let accounts = TestAccounts.accounts
        #expect(accounts.authenticate(name: "alice", password: TestAccounts.alicePassword)?.name == "alice")
        #expect(accounts.authenticate(name: "bob", password: TestAccounts.bobPassword)?.role == .viewer)
        #expect(accounts.authenticate(name: "alice", password: TestAccounts.bobPassword + "!") == nil)
        #expect(accounts.authenticate(name: "bob", password: TestAccounts.alicePassword + "!") == nil)
        #expect(accounts.authenticate(name: "dave", password: TestAccounts.alicePassword) == nil)
        #expect(accounts.authenticate(name: "ALICE", password: TestAccounts.alicePassword) == nil)
        #expect(accounts.authenticate(name: "", password: "") == nil)
        #expect(accounts.authenticate(name: "alice:operator", password: TestAccounts.alicePassword) == nil)
        // Carol's hash is alice's, locked with `!`: her password is right and still refused.
        #expect(accounts.authenticate(name: "carol", password: TestAccounts.alicePassword) == nil)
    }

    /// An unknown name costs a password check, as a known one does, so that the time taken does
    /// not tell which names have accounts. Each side's fastest of five runs is compared: without the
    /// dummy check an unknown name takes microseconds, a yescrypt check milliseconds.
    @Test func costsTheSameForAnUnknownNameAsForAKnownOne() {
        let accounts = TestAccounts.accounts
        let clock = ContinuousClock()
        var known: [Duration] = []
        var unknown: [Duration] = []
        for _ in 0..<5 {
            known.append(clock.measure { _ = accounts.authenticate(name: "alice", password: "wrong") })
            unknown.append(clock.measure { _ = accounts.authenticate(name: "nobody", password: "wrong") })
            unknown.append(clock.measure { _ = accounts.authenticate(name: "carol", password: "wrong") })
        }
        #expect(unknown.min()! * 4 > known.min()!, "known \(known.min()!), unknown \(unknown.min()!)")
    }

    @Test(arguments: [
        // (text, line, code)
        ("alice:operator", 1, ConsoleAccountsError.Code.malformed),
        ("a:b:operator:\(IndependentHashes.yescrypt)", 1, .malformed),  // a name with `:`
        ("# x\n\nali ce:viewer:\(IndependentHashes.yescrypt)", 3, .malformed),
        ("ali\nce:viewer:\(IndependentHashes.yescrypt)", 1, .malformed),  // a name cut by a newline
        ("alice\u{7}:viewer:\(IndependentHashes.yescrypt)", 1, .malformed),
        ("élise:viewer:\(IndependentHashes.yescrypt)", 1, .malformed),
        (":viewer:\(IndependentHashes.yescrypt)", 1, .malformed),
        ("\(String(repeating: "a", count: 65)):viewer:\(IndependentHashes.yescrypt)", 1, .malformed),
        ("alice:admin:\(IndependentHashes.yescrypt)", 1, .malformed),
        ("alice:Operator:\(IndependentHashes.yescrypt)", 1, .malformed),
        ("alice:operator:", 1, .malformed),
        ("alice:operator:password123", 1, .malformed),
        ("alice:operator:$1$abc$Kb85XxsXB.VXinPhbS4431", 1, .malformed),  // MD5
        ("alice:operator:! spaced", 1, .malformed),
        (
            "alice:viewer:\(IndependentHashes.yescrypt)\nbob:viewer:\(IndependentHashes.bcrypt)\n"
                + "alice:operator:\(IndependentHashes.bcrypt)", 3, .duplicateName
        ),
    ])
    func refusesMalformedLinesWithTheirNumber(text: String, line: Int, code: ConsoleAccountsError.Code) {
        do {
            _ = try ConsoleAccounts(parsing: text)
            Issue.record("accepted \(text.debugDescription)")
        } catch {
            #expect(error.code == code)
            #expect(error.line == line)
            #expect(error.description.hasPrefix("line \(line): "))
            if code == .duplicateName { #expect(error.description.hasSuffix("at line 1 already")) }
            // One line, whatever the input held.
            #expect(!error.description.contains("\n"))
            // Never the hash.
            #expect(!error.description.contains(IndependentHashes.yescrypt))
        }
    }

    @Test(arguments: [IndependentHashes.costlyYescrypt, IndependentHashes.bcrypt13])
    func refusesAHashCostlierThanTheConsoleChecksWithItsLine(hash: String) throws {
        let text = "# accounts\nalice:operator:\(IndependentHashes.yescrypt)\nbob:viewer:\(hash)\n"
        #expect(throws: ConsoleAccountsError(.costlyHash)) { try ConsoleAccounts(parsing: text) }
        do {
            _ = try ConsoleAccounts(parsing: text)
        } catch {
            #expect(error.line == 3)
            #expect(error.description.hasPrefix("line 3: the hash of bob costs more to check than the console allows"))
            #expect(!error.description.contains(hash))
        }
        let files = try TemporaryDirectory(prefix: "chime-accounts-cost")
        let path = files.appending("console.passwd")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        chmod(path, 0o600)
        #expect(throws: ConsoleAccountsError(.costlyHash)) { try ConsoleAccounts.load(path: path) }
        #expect(throws: ConsoleAccountsError(.costlyHash)) {
            try ConsoleAccounts().adding(name: "bob", role: .viewer, passwordHash: hash)
        }
        // Locked, it is kept: it is never checked.
        #expect(try ConsoleAccounts(parsing: "bob:viewer:!\(hash)\n").count == 1)
    }

    @Test func holdsTenThousandAccountsAndNoMore() throws {
        #expect(try ConsoleAccounts(parsing: TestAccounts.many(ConsoleAccounts.maximumAccounts)).count == 10_000)
        do {
            _ = try ConsoleAccounts(parsing: TestAccounts.many(ConsoleAccounts.maximumAccounts + 1))
            Issue.record("accepted 10,001 accounts")
        } catch {
            #expect(error.code == .tooManyAccounts)
            #expect(error.line == 10_002)  // after the comment line
        }
        let full = try ConsoleAccounts(parsing: TestAccounts.many(ConsoleAccounts.maximumAccounts))
        #expect(throws: ConsoleAccountsError(.tooManyAccounts)) {
            try full.adding(name: "one-more", role: .viewer, passwordHash: IndependentHashes.bcrypt)
        }
    }

    @Test func refusesTextOverOneMebibyte() {
        let comment = "#" + String(repeating: "x", count: 1022) + "\n"
        let text = String(repeating: comment, count: 1024)
        #expect(text.utf8.count == ConsoleAccounts.maximumFileBytes)
        #expect((try? ConsoleAccounts(parsing: text))?.count == 0)
        #expect(throws: ConsoleAccountsError(.tooLarge)) { try ConsoleAccounts(parsing: text + "\n") }
    }

    @Test func addsAndRemovesAccountsKeepingTheRest() throws {
        let added = try TestAccounts.accounts.adding(
            name: "dave.smith@example-1_2",
            role: .viewer,
            password: "dave's long password"
        )
        #expect(added.count == 4)
        #expect(added.authenticate(name: "dave.smith@example-1_2", password: "dave's long password")?.role == .viewer)
        #expect(added.text.hasPrefix(TestAccounts.text))
        #expect(added.text.hasSuffix("\n"))
        let reread = try ConsoleAccounts(parsing: added.text)
        #expect(reread.authenticate(name: "dave.smith@example-1_2", password: "dave's long password") != nil)

        let removed = try added.removing(name: "alice")
        #expect(removed["alice"] == nil)
        #expect(removed.count == 3)
        #expect(removed.text.contains("# The console's accounts"))
        #expect(!removed.text.contains("alice"))
        // The value it came from is as it was.
        #expect(added["alice"] != nil)
    }

    @Test func refusesInvalidChanges() {
        let accounts = TestAccounts.accounts
        #expect(throws: ConsoleAccountsError(.duplicateName)) {
            try accounts.adding(name: "alice", role: .viewer, password: "x")
        }
        for name in ["", "a:b", "a\nb", "a b", "a/b", String(repeating: "n", count: 65)] {
            #expect(throws: ConsoleAccountsError(.malformed)) {
                try accounts.adding(name: name, role: .viewer, password: "x")
            }
        }
        #expect(throws: ConsoleAccountsError(.invalidPassword)) {
            try accounts.adding(name: "dave", role: .viewer, password: "")
        }
        #expect(throws: ConsoleAccountsError(.invalidPassword)) {
            try accounts.adding(name: "dave", role: .viewer, password: "a\u{0}b" + String(repeating: "c", count: 12))
        }
        // Shorter than 12 characters, however many bytes: refused, with the rule.
        for short in ["elevenchars", "ééééééééééé", "a b c d e f"] {
            do {
                _ = try accounts.adding(name: "dave", role: .viewer, password: short)
                Issue.record("took \(short)")
            } catch {
                #expect(error.code == .invalidPassword)
                #expect(error.description.hasPrefix("the password is shorter than 12 characters: choose a longer one"))
            }
        }
        #expect((try? accounts.adding(name: "dave", role: .viewer, password: "twelve chars"))?.count == 4)
        #expect(ConsoleAccounts.minimumPasswordLength == 12)
        #expect(throws: ConsoleAccountsError(.malformed)) {
            try accounts.adding(name: "dave", role: .viewer, passwordHash: "$6$abc$x")
        }
        #expect(throws: ConsoleAccountsError(.malformed)) {
            try accounts.adding(name: "dave", role: .viewer, passwordHash: "!a\nb")
        }
        #expect(throws: ConsoleAccountsError(.unknownAccount)) { try accounts.removing(name: "dave") }
        let locked = try? accounts.adding(name: "dave", role: .viewer, passwordHash: "*")
        #expect(locked?.text.hasSuffix("dave:viewer:*\n") == true)
        #expect(ConsoleAccounts.isValidName(String(repeating: "n", count: 64)))
    }

    @Test func givesRolesTheirRights() {
        for action in ConsoleAction.allCases {
            #expect(ConsoleRole.operator.may(action))
            #expect(!ConsoleRole.viewer.may(action))
        }
    }
}

@Suite struct ConsoleAccountsFileTests {
    private func write(_ text: String, mode: mode_t, in directory: TemporaryDirectory) -> String {
        let path = directory.appending("console accounts")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        chmod(path, mode)
        return path
    }

    @Test func readsAFileOnlyItsOwnerMayRead() throws {
        let directory = try TemporaryDirectory(prefix: "chime-console")
        let path = write(TestAccounts.text, mode: 0o600, in: directory)
        #expect(try ConsoleAccounts.load(path: path).count == 3)
        chmod(path, 0o400)
        #expect(try ConsoleAccounts.load(path: path).count == 3)
    }

    @Test(arguments: [0o644, 0o640, 0o620, 0o604, 0o602, 0o660, 0o666, 0o610, 0o601] as [mode_t])
    func refusesAFileOthersMayReadOrWrite(mode: mode_t) throws {
        let directory = try TemporaryDirectory(prefix: "chime-console")
        let path = write(TestAccounts.text, mode: mode, in: directory)
        do {
            _ = try ConsoleAccounts.load(path: path)
            Issue.record("read a file of mode \(String(mode, radix: 8))")
        } catch {
            #expect(error.code == .insecureFile)
            #expect(error.description.contains("chmod 600 '\(path)'"))
            #expect(error.description.contains("0\(String(mode, radix: 8))"))
            #expect(error.description.hasPrefix(path + ": "))
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func refusesWhatIsNotAReadableRegularFile() throws {
        let directory = try TemporaryDirectory(prefix: "chime-console")
        #expect(throws: ConsoleAccountsError(.unreadable)) { try ConsoleAccounts.load(path: directory.path) }
        #expect(throws: ConsoleAccountsError(.unreadable)) {
            try ConsoleAccounts.load(path: directory.appending("missing"))
        }
        // A FIFO: refused at once, not waited on.
        let fifo = directory.appending("fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: ConsoleAccountsError(.unreadable)) { try ConsoleAccounts.load(path: fifo) }
    }

    @Test func followsALinkToAPrivateFile() throws {
        let directory = try TemporaryDirectory(prefix: "chime-console")
        let path = write(TestAccounts.text, mode: 0o600, in: directory)
        let link = directory.appending("link")
        #expect(symlink(path, link) == 0)
        #expect(try ConsoleAccounts.load(path: link).count == 3)
    }

    @Test func refusesAFileTooLargeOrNotUTF8WithTheLine() throws {
        let directory = try TemporaryDirectory(prefix: "chime-console")
        let large = write(
            String(repeating: "#\n", count: ConsoleAccounts.maximumFileBytes / 2 + 1),
            mode: 0o600,
            in: directory
        )
        #expect(throws: ConsoleAccountsError(.tooLarge)) { try ConsoleAccounts.load(path: large) }

        for bytes in [[0xFF, 0xFE], [0x61, 0x00, 0x62]] as [[UInt8]] {
            let path = directory.appending("bytes")
            #expect(FileManager.default.createFile(atPath: path, contents: Data("# ok\n".utf8 + bytes + [0x0A])))
            chmod(path, 0o600)
            do {
                _ = try ConsoleAccounts.load(path: path)
                Issue.record("read \(bytes)")
            } catch {
                #expect(error.code == .malformed)
                #expect(error.line == 2)
                #expect(error.description.hasPrefix("\(path):2: "))
            }
        }
    }
}
