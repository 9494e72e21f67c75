import CCrypto

/// SHA-256 (FIPS 180-4), libcrypto's.
public enum SHA256 {
    /// The length of a digest: 32 bytes.
    public static let digestLength = 32

    /// The SHA-256 digest of `bytes`, 32 bytes.
    ///
    /// libcrypto fails here only when it cannot allocate its context; that stops the process, as
    /// running out of memory anywhere else in Swift does.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: digestLength)
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha256(), nil)
        }
        guard ok == 1, length == digestLength else {
            fatalError("\(CryptoError.library("SHA-256 failed", function: "EVP_Digest"))")
        }
        return digest
    }
}
