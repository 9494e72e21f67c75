import ChimePassword
import ChimeTestSupport
import Foundation
import Testing

/// Hashes made by other programs than ChimePassword, with the password each was made from.
enum IndependentHashes {
    /// `mkpasswd -m yescrypt` (Debian's whois 5.5), libcrypt's default cost.
    static let yescrypt = "$y$j9T$gohnttz3eoWQPAy7JXwIp1$e/ENDf5D1MevokIxZiR5/yPD1kkfsCmRbiGafhlM5X2"
    static let yescryptPassword = "correct horse battery staple"
    /// `mkpasswd -m yescrypt` of a password beyond ASCII.
    static let yescryptUnicode = "$y$j9T$TFxB7vpbBlSt2RvbI6nWg1$Aozvel6qJf1WfOaR9VAHtqrf0J.AJTlnSRtM.SYKl80"
    static let yescryptUnicodePassword = "pässwörd ✓"
    /// Python's `bcrypt` 5.0.0 (pyca: its own implementation, not libcrypt's), cost 5.
    static let bcrypt = "$2b$05$u9kmBWgfyOg0hoOVDVPFn.X20oJX5nVnEyKi8pXN93fpl.sTB.2MG"
    static let bcryptPassword = "correct horse battery staple"
    /// `mkpasswd -m yescrypt -R 7`: N = 16384, four times the default's cost.
    static let costlyYescrypt = "$y$jBT$VnKSpeF2aHU2.1ppN/qz61$AarvSj9G5SYC/mlK8Eohqk2H/tJRAgol8hBFde9mY96"
    /// `mkpasswd -m yescrypt -R 3`: N = 1024, a quarter of the default's.
    static let cheapYescrypt = "$y$j7T$BAOgHjpTUtruu85cPpw1n0$nx66Vj4ck1quEdm95ccPHx9SQsIboPYT8qOTprpN1V1"
    /// `mkpasswd -m bcrypt -R 12` and `-R 13`.
    static let bcrypt12 = "$2b$12$7ii.toViJssDNH5lM5PXq.QpIboExqi3WkKdl60QzjNJaWPdn6jW."
    static let bcrypt13 = "$2b$13$3JNLf8GySJ0g6ruhce0ieO6na3r49ym/PZOSvNt.K22EpKSlSJ0aS"
    /// The password of the four above.
    static let costPassword = "correct horse battery staple"
}

@Suite struct PasswordHashTests {
    @Test func makesYescryptHashesThatVerify() throws {
        let hash = try PasswordHash.make("correct horse battery staple")
        #expect(hash.hasPrefix("$y$"))
        #expect(PasswordHash.isSupported(hash))
        #expect(PasswordHash.verify("correct horse battery staple", against: hash))
        #expect(!PasswordHash.verify("correct horse battery stapler", against: hash))
        #expect(!PasswordHash.verify("correct horse battery stapl", against: hash))
        #expect(!PasswordHash.verify("Correct horse battery staple", against: hash))
    }

    @Test func saltsEveryHash() throws {
        let first = try PasswordHash.make("same password")
        let second = try PasswordHash.make("same password")
        #expect(first != second)
        #expect(PasswordHash.verify("same password", against: first))
        #expect(PasswordHash.verify("same password", against: second))
    }

    @Test func hashesEveryByteOfAPasswordBeyondASCII() throws {
        let hash = try PasswordHash.make("pässwörd ✓")
        #expect(PasswordHash.verify("pässwörd ✓", against: hash))
        #expect(!PasswordHash.verify("passwörd ✓", against: hash))
        #expect(!PasswordHash.verify("pässwörd ✗", against: hash))
    }

    @Test(arguments: [
        (IndependentHashes.yescrypt, IndependentHashes.yescryptPassword),
        (IndependentHashes.yescryptUnicode, IndependentHashes.yescryptUnicodePassword),
        (IndependentHashes.bcrypt, IndependentHashes.bcryptPassword),
        // mkpasswd -m bcrypt.
        ("$2b$05$lrJsVN6noL5doutQwfrStuztQkr67I9areJBmWVmUhRJ5o4Ba/j9y", "correct horse battery staple"),
        // Openwall's crypt_blowfish test vector, as $2a$, $2b$ and $2y$ (htpasswd -B writes $2y$).
        ("$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "U*U"),
        ("$2b$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "U*U"),
        ("$2y$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW", "U*U"),
    ])
    func verifiesHashesMadeByOtherPrograms(hash: String, password: String) {
        #expect(PasswordHash.isSupported(hash))
        #expect(PasswordHash.verify(password, against: hash))
        #expect(!PasswordHash.verify(password + "x", against: hash))
        #expect(!PasswordHash.verify(String(password.dropLast()), against: hash))
    }

    /// A hash made now by mkpasswd (Debian's whois, which scripts/bootstrap installs: yescrypt), or
    /// else by Python's crypt module (bcrypt): another caller of libcrypt, with a password chosen now.
    @Test(.enabled(if: HashTool.available != nil, "needs mkpasswd or Python's crypt module"))
    func verifiesAHashMadeNowByAnotherTool() async throws {
        let password = "p-\(UInt64.random(in: 0...UInt64.max))"
        let hash = try #require(try await HashTool.hash(password))
        #expect(hash.hasPrefix("$y$") || hash.hasPrefix("$2b$"))
        #expect(PasswordHash.verify(password, against: hash))
        #expect(!PasswordHash.verify(password + "!", against: hash))
    }

    @Test(arguments: [
        "", "*", "!", "*0", "*1", "x",
        // A valid hash of "pw", locked.
        "!$y$j9T$gohnttz3eoWQPAy7JXwIp1$e/ENDf5D1MevokIxZiR5/yPD1kkfsCmRbiGafhlM5X2",
        // Real hashes of "pw" in the legacy and fast schemes libcrypt also knows: MD5, SHA-512, DES.
        "$1$abc$Kb85XxsXB.VXinPhbS4431",
        "$6$abc$MtSdWSZbhct2oe.SOqOUM2M/GA/uj5.vyVtJgRHgKi9uqXuWuJqOYE7H/YlsYGVg/YYzDV0xt3fEIwYt580.5.",
        "abzlUXK5ed5rs",
        // Truncated, lengthened and broken yescrypt hashes.
        "$y$", "$y$j9T$", "$y$j9T$gohnttz3eoWQPAy7JXwIp1$", "$y$j9T$gohnttz3eoWQPAy7JXwIp1",
        "$y$j9T$gohnttz3eoWQPAy7JXwIp1$e/ENDf5D1MevokIxZiR5/yPD1kkfsCmRbiGafhlM5X",
        "$y$j9T$gohnttz3eoWQPAy7JXwIp1$e/ENDf5D1MevokIxZiR5/yPD1kkfsCmRbiGafhlM5X2X",
        "$y$$gohnttz3eoWQPAy7JXwIp1$e/ENDf5D1MevokIxZiR5/yPD1kkfsCmRbiGafhlM5X2",
        "$y$j9T$gohnttz3eoWQPAy7JXwIp1$e/ENDf5D1MevokIxZiR5/yPD1kkfsCmRbiGafhlM5X2\n",
        "$y$j9T$gohnttz3eoWQPAy7JXwIp1$e/ENDf5D1MevokIxZiR5/yPD1kkfsCmRbiGafhlM5X\u{0}2",
        "$y$j9T$gohnttz3eoWQPAy7JXwIp1$e/ENDf5D1MevokIxZiR5/yPD1kkfsCmRbiGafhlM5Xé",
        " $y$j9T$gohnttz3eoWQPAy7JXwIp1$e/ENDf5D1MevokIxZiR5/yPD1kkfsCmRbiGafhlM5X2",
        // bcrypt with costs out of range, a missing `$`, a short hash.
        "$2b$03$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
        "$2b$32$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
        "$2b$5$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeWx",
        "$2b$05CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeWx",
        "$2b$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOe",
        "$2x$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
        String(repeating: "$y$", count: 5000),
    ])
    func refusesWhatIsNotAWellFormedYescryptOrBcryptHash(hash: String) {
        #expect(!PasswordHash.isSupported(hash))
        for password in ["pw", "U*U", "correct horse battery staple", ""] {
            #expect(!PasswordHash.verify(password, against: hash))
        }
    }

    @Test func checksHashesUpToTheDefaultCostOnly() {
        // Within the bounds: verified.
        for hash in [IndependentHashes.cheapYescrypt, IndependentHashes.bcrypt12, IndependentHashes.yescrypt] {
            #expect(PasswordHash.isSupported(hash) && !PasswordHash.isTooCostly(hash), "\(hash)")
            #expect(PasswordHash.verify(IndependentHashes.costPassword, against: hash), "\(hash)")
        }
        // Past them: refused without hashing, the right password too.
        let costly = [
            IndependentHashes.costlyYescrypt, IndependentHashes.bcrypt13,
            // bcrypt at its largest cost (2³¹ rounds: minutes), and yescrypt with N = 2³⁰, with r = 2³⁰,
            // with p = 2 (the optional parameters), and of another flavour: none is hashed.
            "$2b$31$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
            "$y$jtT$VnKSpeF2aHU2.1ppN/qz61$AarvSj9G5SYC/mlK8Eohqk2H/tJRAgol8hBFde9mY96",
            "$y$j9zzzzz$VnKSpeF2aHU2.1ppN/qz61$AarvSj9G5SYC/mlK8Eohqk2H/tJRAgol8hBFde9mY96",
            "$y$j9T/$VnKSpeF2aHU2.1ppN/qz61$AarvSj9G5SYC/mlK8Eohqk2H/tJRAgol8hBFde9mY96",
            "$y$i9T$VnKSpeF2aHU2.1ppN/qz61$AarvSj9G5SYC/mlK8Eohqk2H/tJRAgol8hBFde9mY96",
        ]
        for hash in costly {
            #expect(!PasswordHash.isSupported(hash), "\(hash)")
            #expect(!PasswordHash.verify(IndependentHashes.costPassword, against: hash), "\(hash)")
        }
        #expect(PasswordHash.isTooCostly(IndependentHashes.costlyYescrypt))
        #expect(PasswordHash.isTooCostly(IndependentHashes.bcrypt13))
        #expect(!PasswordHash.isTooCostly("*") && !PasswordHash.isTooCostly("$2b$13$short"))
        #expect(PasswordHash.maximumBcryptCost == 12 && PasswordHash.maximumYescryptBlocks == 4096 * 32)
    }

    @Test func refusesPasswordsLibcryptCannotHashAsGiven() {
        #expect(throws: PasswordError(.empty)) { try PasswordHash.make("") }
        #expect(throws: PasswordError(.containsNUL)) { try PasswordHash.make("before\u{0}after") }
        #expect(throws: PasswordError(.tooLong)) {
            try PasswordHash.make(String(repeating: "a", count: PasswordHash.maximumPasswordBytes + 1))
        }
        // Bytes, not characters: 256 two-byte characters are 512 bytes.
        #expect(throws: PasswordError(.tooLong)) { try PasswordHash.make(String(repeating: "é", count: 256)) }
        #expect(!PasswordHash.verify("", against: IndependentHashes.yescrypt))
    }

    @Test func hashesThePasswordOfTheLargestSize() throws {
        let longest = String(repeating: "a", count: PasswordHash.maximumPasswordBytes)
        #expect(PasswordHash.maximumPasswordBytes == 511)
        let hash = try PasswordHash.make(longest)
        #expect(PasswordHash.verify(longest, against: hash))
        #expect(!PasswordHash.verify(String(longest.dropLast()), against: hash))
        #expect(!PasswordHash.verify(longest + "a", against: hash))
    }

    @Test func refusalsSayWhyWithoutThePassword() {
        do {
            _ = try PasswordHash.make("secret\u{0}")
            Issue.record("a password with NUL was hashed")
        } catch {
            #expect(error.description.contains("NUL"))
            #expect(!error.description.contains("secret"))
        }
    }

    @Test func verifiesFromManyThreadsAtOnce() async throws {
        let hash = try PasswordHash.make("shared")
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask { PasswordHash.verify(index % 2 == 0 ? "shared" : "other", against: hash) }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.filter { $0 }.count == 4)
    }

    @Test func comparesInConstantTime() {
        #expect(ConstantTime.equal([], []))
        #expect(ConstantTime.equal([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equal([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equal([1, 2, 3], [1, 2]))
        #expect(!ConstantTime.equal([1, 2], [1, 2, 3]))
        #expect(!ConstantTime.equal([], [0]))
        #expect(!ConstantTime.equal([0], []))
    }
}

/// Another program that makes password hashes through libcrypt.
enum HashTool {
    /// `mkpasswd -m yescrypt` when it is on the PATH, else `python3` with its crypt module (which
    /// cannot make a yescrypt salt: bcrypt), else nil.
    static let available: [String]? = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        func found(_ name: String) -> Bool {
            path.split(separator: ":").contains { FileManager.default.isExecutableFile(atPath: "\($0)/\(name)") }
        }
        if found("mkpasswd") { return ["mkpasswd", "-m", "yescrypt"] }
        guard found("python3") else { return nil }
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        check.arguments = ["python3", "-W", "ignore", "-c", "import crypt; assert crypt.METHOD_BLOWFISH"]
        check.standardOutput = FileHandle.nullDevice
        check.standardError = FileHandle.nullDevice
        guard (try? check.run()) != nil else { return nil }
        check.waitUntilExit()
        guard check.terminationStatus == 0 else { return nil }
        return [
            "python3", "-W", "ignore", "-c",
            "import crypt, sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=32)))",
        ]
    }()

    /// A hash of `password` made by the tool, or nil when there is none.
    static func hash(_ password: String) async throws -> String? {
        guard let command = available else { return nil }
        let child = try ChildProcess(command[0], arguments: Array(command.dropFirst()) + [password])
        try child.start()
        guard await child.waitForExit(timeout: .seconds(30)) == .exited(0) else {
            throw HarnessError("\(command[0]) failed: \(child.standardErrorLines.joined(separator: " "))")
        }
        return child.standardOutputLines.first
    }
}
