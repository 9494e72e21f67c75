import CCrypto

/// An RSA private key, for RS256 signatures: the JWT a Google service account signs to get an
/// OAuth 2.0 access token for FCM HTTP v1 (RFC 7523).
public struct RSAPrivateKey: Sendable {
    /// RFC 7518 section 3.3: a key of 2048 bits or more MUST be used with RS256.
    public static let minimumBits = 2048

    let key: OwnedKey

    /// Reads a PEM private key: PKCS #8 (`BEGIN PRIVATE KEY`, the `private_key` of a service
    /// account's JSON file) or PKCS #1 (`BEGIN RSA PRIVATE KEY`).
    /// - Throws: `.malformedKey` for text that holds no readable private key (an encrypted one
    ///   included) or an inconsistent one; `.wrongKeyType` for a key that is not RSA (RSA-PSS-only
    ///   keys included) or is shorter than `minimumBits`.
    public init(pem: String) throws(CryptoError) {
        let key = try OwnedKey.readPrivateKey(pem: pem)
        try withCleanErrorQueue { () throws(CryptoError) in
            guard EVP_PKEY_is_a(key.pointer, "RSA") == 1 else {
                throw CryptoError(.wrongKeyType, "the key is not an RSA key; RS256 needs one")
            }
            let bits = Int(EVP_PKEY_get_bits(key.pointer))
            guard bits >= Self.minimumBits else {
                throw CryptoError(
                    .wrongKeyType,
                    "the RSA key has \(bits) bits; RS256 needs \(Self.minimumBits) or more"
                )
            }
            try key.checkPair()
        }
        self.key = key
    }

    /// Signs `message` with RSASSA-PKCS1-v1_5 over SHA-256 (RS256, RFC 7518 section 3.3). The
    /// signature is as long as the modulus, and the same for the same key and message.
    /// - Throws: `.libraryFailure` when libcrypto cannot sign (out of memory).
    public func signRS256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try withCleanErrorQueue { () throws(CryptoError) -> [UInt8] in
            try key.signSHA256(message) { EVP_PKEY_CTX_set_rsa_padding($0, RSA_PKCS1_PADDING) }
        }
    }

    /// Whether `signature` is an RS256 signature of `message` by this key. For the tests: the
    /// server only signs.
    func verifyRS256(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        withCleanErrorQueue { key.verifySHA256(signature, of: message) }
    }
}
