import Testing

@testable import ChimeCrypto

@Suite struct RSAPrivateKeyTests {
    /// RSASSA-PKCS1-v1_5 is deterministic: the openssl tool's signature, byte for byte, from either
    /// form of the key.
    @Test(arguments: [Fixtures.rsaPKCS8, Fixtures.rsaPKCS1])
    func signsRS256AsTheOpenSSLToolDoes(pem: PEMFixture) throws {
        let key = try RSAPrivateKey(pem: pem.text)
        let parts = Fixtures.rs256Token.split(separator: ".")
        let signingInput = Array("\(parts[0]).\(parts[1])".utf8)
        let signature = try key.signRS256(signingInput)
        #expect(signature == base64url(String(parts[2])))
        #expect(signature.count == 256)
        #expect(key.verifyRS256(signature, of: signingInput))
        #expect(!key.verifyRS256(signature, of: signingInput + [0x2E]))
    }

    @Test func refusesTextThatHoldsNoPrivateKey() {
        for pem in ["", "garbage", String(Fixtures.rsaPKCS8.text.prefix(200)), Fixtures.p256Public.text] {
            #expect(throws: CryptoError(.malformedKey), "\(pem.prefix(40))") { try RSAPrivateKey(pem: pem) }
        }
    }

    @Test(arguments: [Fixtures.p256PKCS8, Fixtures.p384, Fixtures.ed25519, Fixtures.rsa1024])
    func refusesKeysOfOtherKindsAndShortKeys(pem: PEMFixture) {
        #expect(throws: CryptoError(.wrongKeyType)) { try RSAPrivateKey(pem: pem.text) }
    }
}
