import CCrypto

/// HKDF (RFC 5869), libcrypto's (`EVP_KDF` "HKDF").
public enum HKDF {
    /// The most bytes HKDF-SHA-256 can give: 255 blocks of 32 (RFC 5869 section 2.3).
    public static let maximumSHA256Length = 255 * SHA256.digestLength

    /// HKDF-SHA-256, extract then expand: `length` bytes of output keying material.
    /// - Parameters:
    ///   - salt: the extract step's salt; empty is allowed (RFC 5869 then uses 32 zero bytes).
    ///   - inputKeyMaterial: the secret, such as an ECDH shared secret.
    ///   - info: the expand step's context.
    ///   - length: 1 to `maximumSHA256Length`.
    /// - Throws: `.malformedInput` for a length out of range.
    public static func sha256(
        salt: [UInt8],
        inputKeyMaterial: [UInt8],
        info: [UInt8],
        length: Int
    ) throws(CryptoError) -> [UInt8] {
        guard (1...maximumSHA256Length).contains(length) else {
            throw CryptoError(.malformedInput, "HKDF-SHA-256 gives 1 to \(maximumSHA256Length) bytes, not \(length)")
        }
        return try withCleanErrorQueue { () throws(CryptoError) -> [UInt8] in
            guard let kdf = EVP_KDF_fetch(nil, "HKDF", nil) else {
                throw .library("libcrypto has no HKDF", function: "EVP_KDF_fetch")
            }
            defer { EVP_KDF_free(kdf) }
            guard let context = EVP_KDF_CTX_new(kdf) else {
                throw .library("cannot make an HKDF context", function: "EVP_KDF_CTX_new")
            }
            defer { EVP_KDF_CTX_free(context) }
            let parameters = OSSLParameters([
                (OSSL_KDF_PARAM_DIGEST, .utf8("SHA256")),
                (OSSL_KDF_PARAM_KEY, .octets(inputKeyMaterial)),
                (OSSL_KDF_PARAM_SALT, .octets(salt)),
                (OSSL_KDF_PARAM_INFO, .octets(info)),
            ])
            var output = [UInt8](repeating: 0, count: length)
            let ok = parameters.withUnsafeParameters { EVP_KDF_derive(context, &output, length, $0) }
            guard ok == 1 else {
                throw .library("HKDF-SHA-256 failed", function: "EVP_KDF_derive")
            }
            return output
        }
    }
}
