import CCrypto

/// AES-128 in Galois/Counter Mode (NIST SP 800-38D) with a 96-bit nonce and a 128-bit tag, and no
/// associated data: AEAD_AES_128_GCM as RFC 8188 uses it. libcrypto's (`EVP_aes_128_gcm`).
public enum AES128GCM {
    /// The key's length: 16 bytes.
    public static let keyLength = 16
    /// The nonce's length: 12 bytes.
    public static let nonceLength = 12
    /// The authentication tag's length: 16 bytes.
    public static let tagLength = 16

    /// Encrypts and authenticates `plaintext`.
    /// - Returns: the ciphertext (as long as the plaintext), then the 16-byte tag.
    /// - Throws: `.malformedKey` for a key that is not 16 bytes; `.malformedInput` for a nonce that
    ///   is not 12 bytes or a plaintext of 2 GiB or more.
    public static func seal(key: [UInt8], nonce: [UInt8], plaintext: [UInt8]) throws(CryptoError) -> [UInt8] {
        try check(key: key, nonce: nonce, textLength: plaintext.count)
        return try withCleanErrorQueue { () throws(CryptoError) -> [UInt8] in
            let context = try makeContext()
            defer { EVP_CIPHER_CTX_free(context) }
            guard EVP_EncryptInit_ex2(context, EVP_aes_128_gcm(), key, nonce, nil) == 1 else {
                throw .library("cannot start AES-128-GCM", function: "EVP_EncryptInit_ex2")
            }
            var sealed = [UInt8](repeating: 0, count: plaintext.count + tagLength)
            try sealed.withUnsafeMutableBufferPointer { (output) throws(CryptoError) in
                let base = output.baseAddress!
                var written: Int32 = 0
                if !plaintext.isEmpty {
                    guard EVP_EncryptUpdate(context, base, &written, plaintext, Int32(plaintext.count)) == 1 else {
                        throw .library("cannot encrypt", function: "EVP_EncryptUpdate")
                    }
                }
                var last: Int32 = 0
                guard EVP_EncryptFinal_ex(context, base + Int(written), &last) == 1,
                    Int(written + last) == plaintext.count
                else {
                    throw .library("cannot finish encrypting", function: "EVP_EncryptFinal_ex")
                }
                let tag = base + plaintext.count
                guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), tag) == 1 else {
                    throw .library("cannot read the tag", function: "EVP_CIPHER_CTX_ctrl")
                }
            }
            return sealed
        }
    }

    /// Checks the tag and decrypts what `seal` gave.
    /// - Parameter sealed: the ciphertext, then the 16-byte tag.
    /// - Returns: the plaintext.
    /// - Throws: `.authenticationFailed` when the tag does not match (the data, the key or the
    ///   nonce differ from the seal's); `.malformedKey` for a key that is not 16 bytes;
    ///   `.malformedInput` for a nonce that is not 12 bytes or `sealed` shorter than a tag.
    public static func open(key: [UInt8], nonce: [UInt8], sealed: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard sealed.count >= tagLength else {
            throw CryptoError(.malformedInput, "a sealed message is at least its \(tagLength)-byte tag")
        }
        let textLength = sealed.count - tagLength
        try check(key: key, nonce: nonce, textLength: textLength)
        return try withCleanErrorQueue { () throws(CryptoError) -> [UInt8] in
            let context = try makeContext()
            defer { EVP_CIPHER_CTX_free(context) }
            guard EVP_DecryptInit_ex2(context, EVP_aes_128_gcm(), key, nonce, nil) == 1 else {
                throw .library("cannot start AES-128-GCM", function: "EVP_DecryptInit_ex2")
            }
            var plaintext = [UInt8](repeating: 0, count: textLength)
            var tag = Array(sealed[textLength...])
            try plaintext.withUnsafeMutableBufferPointer { (output) throws(CryptoError) in
                var written: Int32 = 0
                if textLength > 0 {
                    guard EVP_DecryptUpdate(context, output.baseAddress, &written, sealed, Int32(textLength)) == 1
                    else {
                        throw .library("cannot decrypt", function: "EVP_DecryptUpdate")
                    }
                }
                guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tag) == 1 else {
                    throw .library("cannot set the tag", function: "EVP_CIPHER_CTX_ctrl")
                }
                // The tag is checked here: a mismatch is the one failure to expect. GCM writes
                // nothing more at the end; the scratch block is there for the form's sake.
                var scratch = [UInt8](repeating: 0, count: tagLength)
                var last: Int32 = 0
                guard EVP_DecryptFinal_ex(context, &scratch, &last) == 1 else {
                    throw .library(
                        "the tag does not match",
                        code: .authenticationFailed,
                        function: "EVP_DecryptFinal_ex"
                    )
                }
            }
            return plaintext
        }
    }

    private static func check(key: [UInt8], nonce: [UInt8], textLength: Int) throws(CryptoError) {
        guard key.count == keyLength else {
            throw CryptoError(.malformedKey, "an AES-128 key is \(keyLength) bytes")
        }
        guard nonce.count == nonceLength else {
            throw CryptoError(.malformedInput, "an AES-128-GCM nonce is \(nonceLength) bytes")
        }
        guard textLength < Int(Int32.max) else {
            throw CryptoError(.malformedInput, "AES128GCM takes less than 2 GiB at once")
        }
    }

    private static func makeContext() throws(CryptoError) -> OpaquePointer {
        guard let context = EVP_CIPHER_CTX_new() else {
            throw .library("cannot make a cipher context", function: "EVP_CIPHER_CTX_new")
        }
        return context
    }
}
