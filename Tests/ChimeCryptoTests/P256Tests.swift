import Foundation
import Testing

@testable import ChimeCrypto

@Suite struct P256PrivateKeyTests {
    @Test(arguments: [Fixtures.p256PKCS8, Fixtures.p256SEC1, Fixtures.p256SEC1Compressed])
    func readsPKCS8AndSEC1(pem: PEMFixture) throws {
        let key = try P256PrivateKey(pem: pem.text)
        #expect(key.publicKey == base64url(Fixtures.p256PublicKey))
        #expect(key.publicKey.count == P256PrivateKey.publicKeyLength && key.publicKey.first == 0x04)
    }

    @Test func skipsTheECParametersBlockBeforeTheKey() throws {
        let key = try P256PrivateKey(pem: Fixtures.p256WithParameters.text)
        #expect(key.publicKey == base64url(Fixtures.p256WithParametersPublicKey))
    }

    /// RFC 8291 appendix A gives both key pairs as a scalar and a point.
    @Test func derivesThePublicKeyOfARawScalar() throws {
        let server = try P256PrivateKey(rawScalar: base64url(RFC8291.applicationServerPrivateKey))
        #expect(server.publicKey == base64url(RFC8291.applicationServerPublicKey))
        let agent = try P256PrivateKey(rawScalar: base64url(RFC8291.userAgentPrivateKey))
        #expect(agent.publicKey == base64url(RFC8291.userAgentPublicKey))
    }

    @Test func signsES256ThatVerifies() throws {
        let key = try P256PrivateKey(pem: Fixtures.p256PKCS8.text)
        let verifier = try P256PublicKey(uncompressed: key.publicKey)
        let message = Array("eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJURUFNSUQifQ".utf8)
        let signature = try key.signES256(message)
        #expect(signature.count == 64)
        #expect(verifier.verifyES256(signature, of: message))
        // ECDSA draws a new nonce each time: another signature, as valid.
        let again = try key.signES256(message)
        #expect(again != signature)
        #expect(verifier.verifyES256(again, of: message))
        // The positive controls above pass; each change below must fail.
        #expect(!verifier.verifyES256(signature, of: message + [0x2E]))
        var altered = signature
        altered[63] ^= 0x01
        #expect(!verifier.verifyES256(altered, of: message))
        #expect(!verifier.verifyES256(Array(signature.prefix(63)), of: message))
        let other = try P256PublicKey(uncompressed: P256PrivateKey.generate().publicKey)
        #expect(!other.verifyES256(signature, of: message))
    }

    /// One key shared by many tasks at once, as the push sender shares its APNs key: every
    /// signature verifies.
    @Test func signsFromManyTasksAtOnce() async throws {
        let key = try P256PrivateKey(pem: Fixtures.p256PKCS8.text)
        let verifier = try P256PublicKey(uncompressed: key.publicKey)
        let valid = await withTaskGroup(of: Bool.self) { group in
            for task in 0..<8 {
                group.addTask {
                    (0..<50).allSatisfy { round in
                        let message = Array("task \(task) round \(round)".utf8)
                        return (try? key.signES256(message)).map { verifier.verifyES256($0, of: message) } ?? false
                    }
                }
            }
            return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(valid == 8)
    }

    /// A signature the openssl tool made verifies: signing and verifying do not merely agree with
    /// each other.
    @Test func verifiesTheOpenSSLToolsSignature() throws {
        let verifier = try P256PublicKey(uncompressed: base64url(Fixtures.p256PublicKey))
        let message = Array(Fixtures.es256Message.utf8)
        #expect(verifier.verifyES256(base64url(Fixtures.es256Signature), of: message))
        #expect(!verifier.verifyES256(base64url(Fixtures.es256Signature), of: message + [0]))
    }

    @Test func generatesDistinctWorkingKeys() throws {
        let first = P256PrivateKey.generate()
        let second = P256PrivateKey.generate()
        #expect(first.publicKey != second.publicKey)
        #expect(first.publicKey.count == 65 && first.publicKey.first == 0x04)
        let message: [UInt8] = [1, 2, 3]
        #expect(try P256PublicKey(uncompressed: first.publicKey).verifyES256(first.signES256(message), of: message))
    }

    @Test func writesPEMThatReadsBack() throws {
        let key = P256PrivateKey.generate()
        let pem = try key.privateKeyPEM()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(try P256PrivateKey(pem: pem).publicKey == key.publicKey)
        let publicPEM = try key.publicKeyPEM()
        #expect(publicPEM.hasPrefix("-----BEGIN PUBLIC KEY-----\n") && !publicPEM.contains("PRIVATE"))
        // SubjectPublicKeyInfo of an uncompressed P-256 point: 91 bytes of DER, the point last.
        let body = publicPEM.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        let der = try #require(Data(base64Encoded: body))
        #expect(der.count == 91 && Array(der.suffix(65)) == key.publicKey)
    }

    /// RFC 8291 appendix A's `ecdh_secret`, from either side.
    @Test func agreesOnRFC8291sSharedSecret() throws {
        let server = try P256PrivateKey(rawScalar: base64url(RFC8291.applicationServerPrivateKey))
        let agent = try P256PrivateKey(rawScalar: base64url(RFC8291.userAgentPrivateKey))
        let expected = base64url(RFC8291.ecdhSecret)
        #expect(try server.sharedSecret(peerPublicKey: agent.publicKey) == expected)
        #expect(try agent.sharedSecret(peerPublicKey: server.publicKey) == expected)
    }

    @Test func refusesTextThatHoldsNoPrivateKey() throws {
        for pem in [
            "", "garbage", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            String(Fixtures.p256PKCS8.text.prefix(120)), Fixtures.p256Public.text,
            // The EC PARAMETERS block alone: a curve, no key.
            Fixtures.p256WithParameters.text.split(separator: "\n").prefix(3).joined(separator: "\n"),
        ] {
            #expect(throws: CryptoError(.malformedKey), "\(pem.prefix(40))") { try P256PrivateKey(pem: pem) }
        }
        #expect(throws: CryptoError(.malformedKey)) { try P256PrivateKey(pem: Fixtures.p256Encrypted.text) }
    }

    @Test(arguments: [Fixtures.rsaPKCS8, Fixtures.rsaPKCS1, Fixtures.p384, Fixtures.ed25519])
    func refusesKeysOfOtherKinds(pem: PEMFixture) {
        #expect(throws: CryptoError(.wrongKeyType)) { try P256PrivateKey(pem: pem.text) }
    }

    @Test func refusesScalarsOutOfRange() {
        // n, the order of P-256's group, and n + 1; 0; 2^256 - 1; 31 and 33 bytes.
        let order = hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
        for scalar in [
            order, hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632552"),
            [UInt8](repeating: 0, count: 32), [UInt8](repeating: 0xFF, count: 32),
            [UInt8](repeating: 1, count: 31), [UInt8](repeating: 1, count: 33),
        ] {
            #expect(throws: CryptoError(.malformedKey)) { try P256PrivateKey(rawScalar: scalar) }
        }
        // n - 1 is the largest scalar.
        var largest = order
        largest[31] -= 1
        #expect(throws: Never.self) { try P256PrivateKey(rawScalar: largest) }
    }

    @Test func refusesPeerKeysThatAreNotPointsOnTheCurve() throws {
        let key = P256PrivateKey.generate()
        let good = base64url(RFC8291.userAgentPublicKey)
        var offCurve = good
        offCurve[64] ^= 0x01
        // The field prime p as x: a coordinate out of range.
        let p = hex("ffffffff00000001000000000000000000000000ffffffffffffffffffffffff")
        var compressed = [UInt8](good.prefix(33))
        compressed[0] = 0x02 | (good[64] & 1)
        var wrongPrefix = good
        wrongPrefix[0] = 0x05
        for peer in [
            offCurve, [UInt8](repeating: 0, count: 65), [0x04] + [UInt8](repeating: 0, count: 64),
            [0x04] + p + Array(good[33...]), compressed, wrongPrefix, Array(good.prefix(64)), good + [0], [], [0],
        ] {
            #expect(throws: CryptoError(.malformedKey)) { try key.sharedSecret(peerPublicKey: peer) }
        }
        #expect(try key.sharedSecret(peerPublicKey: good).count == 32)
    }

    /// What an error says: OpenSSL's reason when libcrypto gave one, and nothing of the key.
    @Test func errorsCarryOpenSSLsReasonButNoKeyMaterial() throws {
        let garbage = try #require(throws: CryptoError.self) { try P256PrivateKey(pem: "garbage") }
        #expect(garbage.description.contains("OpenSSL"))
        #expect(garbage.function == "PEM_read_bio_PrivateKey")
        for pem in [Fixtures.p384.text, Fixtures.rsaPKCS8.text, Fixtures.p256Encrypted.text] {
            let error = try #require(throws: CryptoError.self) { try P256PrivateKey(pem: pem) }
            let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }
            for line in body where line.count >= 16 {
                #expect(!error.description.contains(line.prefix(16)))
            }
        }
        let scalar = [UInt8](repeating: 0xFF, count: 32)
        let error = try #require(throws: CryptoError.self) { try P256PrivateKey(rawScalar: scalar) }
        #expect(!error.description.contains(Base64URL.encode(scalar).prefix(16)))
        #expect(!error.description.lowercased().contains("ffffffffffffffff"))
    }
}
