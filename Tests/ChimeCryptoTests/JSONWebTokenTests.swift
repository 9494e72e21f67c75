import Testing

@testable import ChimeCrypto

@Suite struct JSONWebTokenTests {
    /// The FCM OAuth grant's JWT, as the openssl tool signed it (and PyJWT verified it).
    @Test func signsRS256TokensAsTheOpenSSLToolDoes() throws {
        let token = try JSONWebToken.rs256(
            header: Array(Fixtures.rs256Header.utf8),
            claims: Array(Fixtures.rs256Claims.utf8),
            key: RSAPrivateKey(pem: Fixtures.rsaPKCS8.text)
        )
        #expect(token == Fixtures.rs256Token)
    }

    /// An APNs provider token: the parts decode to what was given, and the signature (64 bytes,
    /// r and s) verifies over the first two parts.
    @Test func signsES256Tokens() throws {
        let key = try P256PrivateKey(pem: Fixtures.p256PKCS8.text)
        let header = Array(#"{"alg":"ES256","kid":"ABC123DEFG"}"#.utf8)
        let claims = Array(#"{"iss":"DEF123GHIJ","iat":1700000000}"#.utf8)
        let token = try JSONWebToken.es256(header: header, claims: claims, key: key)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        #expect(parts.count == 3)
        #expect(parts[0] == "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyM0RFRkcifQ")
        #expect(Base64URL.decode(parts[1]) == claims)
        let signature = try #require(Base64URL.decode(parts[2]))
        #expect(signature.count == 64)
        let verifier = try P256PublicKey(uncompressed: key.publicKey)
        #expect(verifier.verifyES256(signature, of: Array("\(parts[0]).\(parts[1])".utf8)))
        #expect(!verifier.verifyES256(signature, of: Array("\(parts[0]).\(parts[0])".utf8)))
        #expect(!token.contains("=") && !token.contains("+") && !token.contains("/"))
    }
}
