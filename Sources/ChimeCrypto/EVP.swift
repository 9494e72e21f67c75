import CCrypto

/// The one owner of an `EVP_PKEY *`: holds the reference it was given and frees it in `deinit`.
///
/// `@unchecked Sendable` because the pointer is shared across threads, which OpenSSL 3 allows for
/// a key that is no longer modified: every key is finished (validated, its point format set)
/// before its owner is made, and from then on it is only read, through an operation context
/// (`EVP_PKEY_CTX`, `EVP_MD_CTX`) that each call makes for itself.
final class OwnedKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        EVP_PKEY_free(pointer)
    }

    /// A new operation context for this key (`EVP_PKEY_CTX_new_from_pkey`); the caller frees it.
    func makeContext() throws(CryptoError) -> OpaquePointer {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else {
            throw .library("cannot make a key context", function: "EVP_PKEY_CTX_new_from_pkey")
        }
        return context
    }

    /// Checks that the private and the public halves belong together and are in range
    /// (`EVP_PKEY_pairwise_check`): for P-256, the scalar is in [1, n-1], the point on the curve
    /// and the scalar's multiple of the generator; for RSA, n = p·q and d·e ≡ 1.
    func checkPair() throws(CryptoError) {
        let context = try makeContext()
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_pairwise_check(context) == 1 else {
            throw .library(
                "the key's halves do not belong together",
                code: .malformedKey,
                function: "EVP_PKEY_pairwise_check"
            )
        }
    }

    /// Signs `message` with SHA-256 (`EVP_DigestSign`): DER ECDSA for an EC key, PKCS #1 v1.5
    /// for an RSA key (its padding set by `configure`).
    func signSHA256(
        _ message: [UInt8],
        configure: (OpaquePointer) -> Int32 = { _ in 1 }
    ) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else {
            throw .library("cannot make a digest context", function: "EVP_MD_CTX_new")
        }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        guard EVP_DigestSignInit(context, &keyContext, EVP_sha256(), nil, pointer) == 1, let keyContext else {
            throw .library("cannot start a SHA-256 signature", function: "EVP_DigestSignInit")
        }
        guard configure(keyContext) == 1 else {
            throw .library("cannot set the signature's padding", function: "EVP_PKEY_CTX_set_rsa_padding")
        }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, message, message.count) == 1 else {
            throw .library("cannot size the signature", function: "EVP_DigestSign")
        }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else {
            throw .library("cannot sign", function: "EVP_DigestSign")
        }
        signature.removeLast(signature.count - length)
        return signature
    }

    /// Whether `signature` is a SHA-256 signature of `message` by this key's public half
    /// (`EVP_DigestVerify`): DER ECDSA or PKCS #1 v1.5.
    func verifySHA256(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pointer) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }

    /// The private key as PEM PKCS #8 (`BEGIN PRIVATE KEY`), unencrypted (`PEM_write_bio_PrivateKey`).
    func privateKeyPEM() throws(CryptoError) -> String {
        try writePEM(function: "PEM_write_bio_PrivateKey") {
            PEM_write_bio_PrivateKey($0, pointer, nil, nil, 0, nil, nil)
        }
    }

    /// The public half as PEM SubjectPublicKeyInfo (`BEGIN PUBLIC KEY`, `PEM_write_bio_PUBKEY`).
    func publicKeyPEM() throws(CryptoError) -> String {
        try writePEM(function: "PEM_write_bio_PUBKEY") { PEM_write_bio_PUBKEY($0, pointer) }
    }

    /// Runs `write` on a memory BIO and returns what it wrote; the BIO is wiped before it is freed
    /// (it may hold a private key).
    private func writePEM(function: String, _ write: (OpaquePointer) -> Int32) throws(CryptoError) -> String {
        try withCleanErrorQueue { () throws(CryptoError) -> String in
            guard let bio = BIO_new(BIO_s_mem()) else {
                throw .library("cannot make a memory BIO", function: "BIO_new")
            }
            defer { BIO_free(bio) }
            guard write(bio) == 1 else { throw .library("cannot write the key as PEM", function: function) }
            let length = Int(BIO_ctrl_pending(bio))
            var text = [UInt8](repeating: 0, count: length)
            let read = text.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(length)) }
            defer { OPENSSL_cleanse(&text, text.count) }
            guard read == Int32(length) else { throw .library("cannot read the PEM back", function: "BIO_read") }
            return String(decoding: text, as: UTF8.self)
        }
    }

    /// The key a PEM private key holds: PKCS #8 (`BEGIN PRIVATE KEY`), or the traditional forms
    /// (`BEGIN EC PRIVATE KEY`, SEC 1; `BEGIN RSA PRIVATE KEY`, PKCS #1). Other PEM blocks before
    /// it (such as the `EC PARAMETERS` that `openssl ecparam -genkey` writes first) are skipped.
    /// - Throws: `.malformedKey` for text that holds no private key, or an encrypted one.
    static func readPrivateKey(pem: String) throws(CryptoError) -> OwnedKey {
        // An encrypted key would need a passphrase: refuse it by name rather than as unreadable.
        // "ENCRYPTED PRIVATE KEY" is PKCS #8's label, "Proc-Type: 4,ENCRYPTED" the traditional
        // forms' header.
        guard !pem.contains("ENCRYPTED") else {
            throw CryptoError(.malformedKey, "the PEM key is encrypted; give it decrypted (openssl pkey)")
        }
        let text = Array(pem.utf8)
        guard text.count <= Int32.max else {
            throw CryptoError(.malformedKey, "the PEM text is too long to be a key")
        }
        return try withCleanErrorQueue { () throws(CryptoError) -> OwnedKey in
            let key = text.withUnsafeBytes { bytes -> OpaquePointer? in
                guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
                defer { BIO_free(bio) }
                // A passphrase callback that gives none: without one libcrypto would ask on the terminal.
                return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
            }
            guard let key else {
                throw .library(
                    "the text is not a PEM private key",
                    code: .malformedKey,
                    function: "PEM_read_bio_PrivateKey"
                )
            }
            return OwnedKey(key)
        }
    }

    /// A key from its parameters (`EVP_PKEY_fromdata`).
    /// - Parameters:
    ///   - type: the key type, such as `EC`.
    ///   - selection: `EVP_PKEY_KEYPAIR` or `EVP_PKEY_PUBLIC_KEY` (as the shim names them).
    ///   - parameters: the key's parameters.
    /// - Throws: `.malformedKey` when libcrypto refuses them, for example a point off the curve.
    static func fromParameters(
        type: String,
        selection: Int32,
        _ parameters: OSSLParameters
    ) throws(CryptoError) -> OwnedKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            throw .library("cannot make a key context", function: "EVP_PKEY_CTX_new_from_name")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_fromdata_init(context) == 1 else {
            throw .library("cannot import a key", function: "EVP_PKEY_fromdata_init")
        }
        var key: OpaquePointer?
        let ok = parameters.withUnsafeParameters { EVP_PKEY_fromdata(context, &key, selection, $0) }
        guard ok == 1, let key else {
            throw .library("libcrypto refused the key", code: .malformedKey, function: "EVP_PKEY_fromdata")
        }
        return OwnedKey(key)
    }
}

/// The parameters of an `OSSL_PARAM` array, by name (libcrypto's `OSSL_*_PARAM_*` names).
///
/// An `OSSL_PARAM` holds pointers to its name and its value, which must stay valid for as long as
/// libcrypto reads the array; a Swift string passed as a C string lives only for one call.
/// `withUnsafeParameters` copies every name and value into one buffer that lives for its body,
/// and wipes it afterwards (it may hold a private scalar).
struct OSSLParameters {
    enum Value {
        /// A UTF-8 string, such as an algorithm's or a group's name.
        case utf8(String)
        /// Bytes, such as a key, a salt or an encoded point.
        case octets([UInt8])
        /// An unsigned integer, given big-endian (libcrypto reads it in the machine's order).
        case unsignedInteger(bigEndian: [UInt8])
    }

    private var entries: [(name: String, value: Value)] = []

    init(_ entries: [(name: String, value: Value)]) {
        self.entries = entries
    }

    /// Calls `body` with the array, terminated by `OSSL_PARAM_END`, valid only inside `body`.
    func withUnsafeParameters<R>(_ body: (UnsafeMutablePointer<OSSL_PARAM>) -> R) -> R {
        let stored = entries.map { entry -> (name: [UInt8], value: [UInt8]) in
            switch entry.value {
            case .utf8(let text): (Array(entry.name.utf8) + [0], Array(text.utf8) + [0])
            case .octets(let bytes): (Array(entry.name.utf8) + [0], bytes)
            case .unsignedInteger(let bigEndian):
                (Array(entry.name.utf8) + [0], UInt16(1).bigEndian == 1 ? bigEndian : bigEndian.reversed())
            }
        }
        let size = stored.reduce(0) { $0 + $1.name.count + $1.value.count }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(size, 1), alignment: 16)
        defer {
            OPENSSL_cleanse(storage.baseAddress, storage.count)
            storage.deallocate()
        }
        let parameters = UnsafeMutablePointer<OSSL_PARAM>.allocate(capacity: entries.count + 1)
        defer { parameters.deallocate() }
        var offset = 0
        func place(_ bytes: [UInt8]) -> UnsafeMutableRawPointer {
            let start = storage.baseAddress!.advanced(by: offset)
            storage[offset..<offset + bytes.count].copyBytes(from: bytes)
            offset += bytes.count
            return start
        }
        for (index, entry) in entries.enumerated() {
            let name = place(stored[index].name).assumingMemoryBound(to: CChar.self)
            let value = place(stored[index].value)
            let count = stored[index].value.count
            parameters[index] =
                switch entry.value {
                case .utf8: OSSL_PARAM_construct_utf8_string(name, value.assumingMemoryBound(to: CChar.self), count - 1)
                case .octets: OSSL_PARAM_construct_octet_string(name, value, count)
                case .unsignedInteger: OSSL_PARAM_construct_BN(name, value.assumingMemoryBound(to: UInt8.self), count)
                }
        }
        parameters[entries.count] = OSSL_PARAM_construct_end()
        return body(parameters)
    }
}
