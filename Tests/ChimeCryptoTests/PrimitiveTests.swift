import ChimeCrypto
import Testing

@Suite struct SHA256Tests {
    /// FIPS 180-4's examples (NIST's SHA256.pdf): "abc", the empty string, the two-block message.
    @Test(arguments: [
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
    ])
    func hashesTheStandardsExamples(message: String, digest: String) {
        #expect(SHA256.hash(Array(message.utf8)) == hex(digest))
    }
}

@Suite struct SecureRandomTests {
    @Test func givesTheLengthAskedForAndDifferentBytesEachTime() {
        #expect(SecureRandom.bytes(0).isEmpty)
        let first = SecureRandom.bytes(32)
        let second = SecureRandom.bytes(32)
        #expect(first.count == 32 && second.count == 32)
        // Equal by chance once in 2^256 draws.
        #expect(first != second)
    }
}

@Suite struct HKDFTests {
    /// RFC 5869 appendix A.1, test case 1 (SHA-256).
    @Test func derivesRFC5869TestCase1() throws {
        let okm = try HKDF.sha256(
            salt: hex("000102030405060708090a0b0c"),
            inputKeyMaterial: [UInt8](repeating: 0x0b, count: 22),
            info: hex("f0f1f2f3f4f5f6f7f8f9"),
            length: 42
        )
        #expect(okm == hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
    }

    /// RFC 5869 appendix A.3, test case 3: an empty salt and info.
    @Test func derivesRFC5869TestCase3() throws {
        let okm = try HKDF.sha256(salt: [], inputKeyMaterial: [UInt8](repeating: 0x0b, count: 22), info: [], length: 42)
        #expect(okm == hex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"))
    }

    /// Empty input keying material is allowed (Python's cryptography gives the same).
    @Test func derivesFromEmptyInputKeyingMaterial() throws {
        let okm = try HKDF.sha256(salt: [], inputKeyMaterial: [], info: [], length: 16)
        #expect(okm == hex("eb70f01dede9afafa449eee1b1286504"))
    }

    @Test(arguments: [0, -1, HKDF.maximumSHA256Length + 1])
    func refusesALengthOutOfRange(length: Int) {
        #expect(throws: CryptoError(.malformedInput)) {
            try HKDF.sha256(salt: [], inputKeyMaterial: [1], info: [], length: length)
        }
    }

    @Test func givesTheLongestOutput() throws {
        #expect(
            try HKDF.sha256(salt: [], inputKeyMaterial: [1], info: [], length: HKDF.maximumSHA256Length).count == 8160
        )
    }
}

@Suite struct AES128GCMTests {
    /// The GCM specification's test case 3 (McGrew and Viega; NIST's gcmEncryptExtIV128 has it):
    /// a 128-bit key, a 96-bit IV, four blocks, no associated data. Python's cryptography gives
    /// the same.
    static let key = hex("feffe9928665731c6d6a8f9467308308")
    static let nonce = hex("cafebabefacedbaddecaf888")
    static let plaintext = hex(
        "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
            + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255"
    )
    static let sealed = hex(
        "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e"
            + "21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985"
            + "4d5c2af327cd64a62cf35abd2ba6fab4"
    )

    @Test func sealsTheSpecificationsTestCase3() throws {
        #expect(try AES128GCM.seal(key: Self.key, nonce: Self.nonce, plaintext: Self.plaintext) == Self.sealed)
        #expect(try AES128GCM.open(key: Self.key, nonce: Self.nonce, sealed: Self.sealed) == Self.plaintext)
    }

    /// Test case 2: a zero key, IV and block.
    @Test func sealsTheSpecificationsTestCase2() throws {
        let sealed = try AES128GCM.seal(
            key: [UInt8](repeating: 0, count: 16),
            nonce: [UInt8](repeating: 0, count: 12),
            plaintext: [UInt8](repeating: 0, count: 16)
        )
        #expect(sealed == hex("0388dace60b6a392f328c2b971b2fe78ab6e47d42cec13bdf53a67b21257bddf"))
    }

    @Test(arguments: [0, 1, 15, 16, 17, 4096])
    func roundTrips(length: Int) throws {
        let key = SecureRandom.bytes(16)
        let nonce = SecureRandom.bytes(12)
        let plaintext = SecureRandom.bytes(length)
        let sealed = try AES128GCM.seal(key: key, nonce: nonce, plaintext: plaintext)
        #expect(sealed.count == length + AES128GCM.tagLength)
        #expect(try AES128GCM.open(key: key, nonce: nonce, sealed: sealed) == plaintext)
    }

    @Test func refusesAnAlteredMessage() throws {
        for index in [0, Self.sealed.count / 2, Self.sealed.count - 1] {
            var altered = Self.sealed
            altered[index] ^= 0x01
            #expect(throws: CryptoError(.authenticationFailed)) {
                try AES128GCM.open(key: Self.key, nonce: Self.nonce, sealed: altered)
            }
        }
        var otherNonce = Self.nonce
        otherNonce[0] ^= 0x80
        #expect(throws: CryptoError(.authenticationFailed)) {
            try AES128GCM.open(key: Self.key, nonce: otherNonce, sealed: Self.sealed)
        }
        #expect(throws: CryptoError(.authenticationFailed)) {
            try AES128GCM.open(key: Self.key, nonce: Self.nonce, sealed: Array(Self.sealed.dropFirst()))
        }
    }

    @Test func refusesKeysNoncesAndMessagesOfTheWrongLength() {
        #expect(throws: CryptoError(.malformedKey)) {
            try AES128GCM.seal(key: [UInt8](repeating: 0, count: 32), nonce: Self.nonce, plaintext: [])
        }
        #expect(throws: CryptoError(.malformedInput)) {
            try AES128GCM.seal(key: Self.key, nonce: [UInt8](repeating: 0, count: 16), plaintext: [])
        }
        #expect(throws: CryptoError(.malformedKey)) {
            try AES128GCM.open(key: [], nonce: Self.nonce, sealed: Self.sealed)
        }
        #expect(throws: CryptoError(.malformedInput)) {
            try AES128GCM.open(key: Self.key, nonce: Self.nonce, sealed: Array(Self.sealed.prefix(15)))
        }
    }
}
