import ChimeCrypto
import Testing

@Suite struct WebPushEncryptionTests {
    static let agent = try! P256PrivateKey(rawScalar: base64url(RFC8291.userAgentPrivateKey))
    static let authSecret = base64url(RFC8291.authSecret)

    /// RFC 8291 section 5 and appendix A: its keys and salt give its body, byte for byte.
    @Test func encryptsRFC8291sExample() throws {
        let body = try WebPushEncryption.encrypt(
            plaintext: Array(RFC8291.plaintext.utf8),
            userAgentPublicKey: base64url(RFC8291.userAgentPublicKey),
            authSecret: Self.authSecret,
            recordSize: 4096,
            applicationServerKey: P256PrivateKey(rawScalar: base64url(RFC8291.applicationServerPrivateKey)),
            salt: base64url(RFC8291.salt)
        )
        #expect(Base64URL.encode(body) == RFC8291.body)
        #expect(try decrypt(body) == Array(RFC8291.plaintext.utf8))
    }

    /// As a sender sends: a new key pair and salt each time, so two bodies of one message differ,
    /// and the subscriber's key opens both.
    @Test func encryptsWithANewKeyAndSaltEachTime() throws {
        let plaintext = Array(#"{"title":"Exam","body":"07:00"}"#.utf8)
        let first = try WebPushEncryption.encrypt(
            plaintext: plaintext,
            userAgentPublicKey: Self.agent.publicKey,
            authSecret: Self.authSecret
        )
        let second = try WebPushEncryption.encrypt(
            plaintext: plaintext,
            userAgentPublicKey: Self.agent.publicKey,
            authSecret: Self.authSecret
        )
        #expect(first.count == WebPushEncryption.headerLength + plaintext.count + 1 + 16)
        #expect(first.prefix(16) != second.prefix(16))
        #expect(first[21..<86] != second[21..<86])
        #expect(Array(first[16..<20]) == [0, 0, 0x10, 0x00])
        #expect(first[20] == 65 && first[21] == 0x04)
        #expect(try decrypt(first) == plaintext)
        #expect(try decrypt(second) == plaintext)
        // The positive control above opens; another subscription's secret does not.
        #expect(throws: CryptoError(.authenticationFailed)) {
            try decrypt(first, authSecret: [UInt8](repeating: 7, count: 16))
        }
    }

    /// RFC 8291 section 4: the record size must exceed plaintext, delimiter and tag together.
    @Test(arguments: [18, 19, 100, 4096])
    func fillsOneRecordAndNoMore(recordSize: Int) throws {
        let most = WebPushEncryption.maximumPlaintext(recordSize: recordSize)
        #expect(most == recordSize - 18)
        let plaintext = [UInt8](repeating: 0x61, count: most)
        let body = try WebPushEncryption.encrypt(
            plaintext: plaintext,
            userAgentPublicKey: Self.agent.publicKey,
            authSecret: Self.authSecret,
            recordSize: recordSize
        )
        #expect(body.count - WebPushEncryption.headerLength == recordSize - 1)
        #expect(try decrypt(body) == plaintext)
        #expect(throws: CryptoError(.malformedInput)) {
            try WebPushEncryption.encrypt(
                plaintext: plaintext + [0x61],
                userAgentPublicKey: Self.agent.publicKey,
                authSecret: Self.authSecret,
                recordSize: recordSize
            )
        }
    }

    /// RFC 8291 section 4: 3993 bytes of plaintext make a body of 4096, all a push service must take.
    @Test func theLargestPushMessageFillsAPushServicesLimit() throws {
        #expect(WebPushEncryption.headerLength == 86)
        #expect(WebPushEncryption.maximumPushPlaintext == 3993)
        #expect(WebPushEncryption.maximumPlaintext() == 4078)
        let body = try WebPushEncryption.encrypt(
            plaintext: [UInt8](repeating: 0, count: WebPushEncryption.maximumPushPlaintext),
            userAgentPublicKey: Self.agent.publicKey,
            authSecret: Self.authSecret
        )
        #expect(body.count == WebPushEncryption.pushServiceBodyLimit)
    }

    @Test(arguments: [Int.min, -1, 0, 17, Int(Int32.max) + 1])
    func refusesRecordSizesOutOfRange(recordSize: Int) {
        #expect(WebPushEncryption.maximumPlaintext(recordSize: recordSize) == 0)
        #expect(throws: CryptoError(.malformedInput)) {
            try WebPushEncryption.encrypt(
                plaintext: [],
                userAgentPublicKey: Self.agent.publicKey,
                authSecret: Self.authSecret,
                recordSize: recordSize
            )
        }
    }

    @Test func refusesSecretsSaltsAndKeysOfTheWrongShape() {
        for secret in [[], [UInt8](repeating: 1, count: 15), [UInt8](repeating: 1, count: 17)] {
            #expect(throws: CryptoError(.malformedInput)) {
                try WebPushEncryption.encrypt(
                    plaintext: [1],
                    userAgentPublicKey: Self.agent.publicKey,
                    authSecret: secret
                )
            }
        }
        #expect(throws: CryptoError(.malformedInput)) {
            try WebPushEncryption.encrypt(
                plaintext: [1],
                userAgentPublicKey: Self.agent.publicKey,
                authSecret: Self.authSecret,
                salt: [UInt8](repeating: 1, count: 15)
            )
        }
        var offCurve = Self.agent.publicKey
        offCurve[40] ^= 0x01
        for key in [offCurve, Array(Self.agent.publicKey.prefix(33)), []] {
            #expect(throws: CryptoError(.malformedKey)) {
                try WebPushEncryption.encrypt(plaintext: [1], userAgentPublicKey: key, authSecret: Self.authSecret)
            }
        }
    }

    /// The subscriber's side of RFC 8291, for the tests: reads the header, derives the key and
    /// nonce from its own key pair and secret, opens the one record and takes off the delimiter.
    private func decrypt(_ body: [UInt8], authSecret: [UInt8] = authSecret) throws -> [UInt8] {
        let header = WebPushEncryption.headerLength
        let salt = Array(body[0..<16])
        let recordSize = body[16..<20].reduce(0) { $0 << 8 | Int($1) }
        #expect(body[20] == 65)
        let senderKey = Array(body[21..<header])
        let record = Array(body[header...])
        #expect(record.count < recordSize)
        let ecdhSecret = try Self.agent.sharedSecret(peerPublicKey: senderKey)
        let keyInfo = Array("WebPush: info".utf8) + [0] + Self.agent.publicKey + senderKey
        let ikm = try HKDF.sha256(salt: authSecret, inputKeyMaterial: ecdhSecret, info: keyInfo, length: 32)
        let key = try HKDF.sha256(
            salt: salt,
            inputKeyMaterial: ikm,
            info: Array("Content-Encoding: aes128gcm\0".utf8),
            length: 16
        )
        let nonce = try HKDF.sha256(
            salt: salt,
            inputKeyMaterial: ikm,
            info: Array("Content-Encoding: nonce\0".utf8),
            length: 12
        )
        var padded = try AES128GCM.open(key: key, nonce: nonce, sealed: record)
        while padded.last == 0 { padded.removeLast() }
        #expect(padded.last == 0x02)
        return Array(padded.dropLast())
    }
}
