/// Message encryption for Web Push (RFC 8291): the body of a push message to a browser's
/// subscription, in the `aes128gcm` content coding (RFC 8188) with one record.
///
/// The body is a header (salt, record size, the application server's public key) of
/// `headerLength` bytes, then one record: AES-128-GCM of the plaintext and the 0x02 delimiter
/// (no further padding), then the tag. Send it with `Content-Encoding: aes128gcm`.
///
/// A push service need not take a body of more than `pushServiceBodyLimit` bytes (RFC 8030
/// section 7.2): `maximumPushPlaintext` is the most plaintext that fits it, whatever the record
/// size. `encrypt` itself takes up to `maximumPlaintext(recordSize:)`, for services that take more.
public enum WebPushEncryption {
    /// The salt's length (RFC 8188 section 2.1).
    static let saltLength = 16
    /// The length of a subscription's authentication secret, `auth` (RFC 8291 section 3.2).
    public static let authSecretLength = 16
    /// The header's length: salt (16), record size (4), key id length (1), key id: the
    /// application server's public key (65).
    public static let headerLength = saltLength + 4 + 1 + P256PrivateKey.publicKeyLength
    /// The delimiter that ends the plaintext of the last record (RFC 8188 section 2).
    static let lastRecordDelimiter: UInt8 = 0x02
    /// What a record holds besides the plaintext: the delimiter (1) and the tag (16).
    static let recordOverhead = 1 + AES128GCM.tagLength
    /// The record sizes this implementation takes: from RFC 8188's least (section 2.1: less than 18
    /// is invalid) to 2^31 - 1.
    public static let recordSizes = 18...Int(Int32.max)
    /// The largest body a push service must accept (RFC 8030 section 7.2, RFC 8291 section 4).
    public static let pushServiceBodyLimit = 4096
    /// The most plaintext whose body fits `pushServiceBodyLimit`: 3993 bytes (RFC 8291 section 4).
    public static let maximumPushPlaintext = pushServiceBodyLimit - headerLength - recordOverhead

    /// The most plaintext one record of `recordSize` holds: `recordSize - 18`, because RFC 8291
    /// section 4 wants the record size greater than the plaintext, the delimiter (1) and the tag
    /// (16) together (RFC 8188 alone would allow one byte more). For a record size out of
    /// `recordSizes`, 0.
    public static func maximumPlaintext(recordSize: Int = 4096) -> Int {
        guard recordSizes.contains(recordSize) else { return 0 }
        return recordSize - recordOverhead - 1
    }

    /// Encrypts `plaintext` for a subscription (RFC 8291 section 3 and 4).
    /// - Parameters:
    ///   - plaintext: the message, at most `maximumPlaintext(recordSize:)` bytes (and
    ///     `maximumPushPlaintext` for the body to fit what every push service accepts).
    ///   - userAgentPublicKey: the subscription's `p256dh`: an uncompressed P-256 point, 65 bytes.
    ///   - authSecret: the subscription's `auth`, 16 bytes.
    ///   - recordSize: the header's `rs`, in `recordSizes`.
    ///   - applicationServerKey: the sender's key pair; nil (as a sender should) makes a new one for
    ///     this message. Given, for the tests' fixed vectors.
    ///   - salt: 16 bytes; nil (as a sender should) draws new random ones. Given, for the tests.
    /// - Returns: the body: header, then the record.
    /// - Throws: `.malformedKey` for a `userAgentPublicKey` that is not a P-256 point;
    ///   `.malformedInput` for an `authSecret` or `salt` of the wrong length, a `recordSize` out
    ///   of range or a plaintext too long for one record.
    public static func encrypt(
        plaintext: [UInt8],
        userAgentPublicKey: [UInt8],
        authSecret: [UInt8],
        recordSize: Int = 4096,
        applicationServerKey: P256PrivateKey? = nil,
        salt: [UInt8]? = nil
    ) throws(CryptoError) -> [UInt8] {
        guard recordSizes.contains(recordSize) else {
            throw CryptoError(.malformedInput, "the record size is \(recordSize), outside \(recordSizes)")
        }
        guard plaintext.count <= maximumPlaintext(recordSize: recordSize) else {
            throw CryptoError(
                .malformedInput,
                "\(plaintext.count) bytes of plaintext do not fit one record of \(recordSize) bytes"
                    + " (at most \(maximumPlaintext(recordSize: recordSize)))"
            )
        }
        guard authSecret.count == authSecretLength else {
            throw CryptoError(.malformedInput, "the authentication secret is \(authSecretLength) bytes")
        }
        if let salt, salt.count != saltLength {
            throw CryptoError(.malformedInput, "the salt is \(saltLength) bytes")
        }
        let salt = salt ?? SecureRandom.bytes(saltLength)
        let sender = applicationServerKey ?? P256PrivateKey.generate()

        // RFC 8291 section 3.3 and 3.4: the ECDH secret, bound to the subscription's secret and
        // both public keys, is the input keying material of RFC 8188's key and nonce.
        let ecdhSecret = try sender.sharedSecret(peerPublicKey: userAgentPublicKey)
        let keyInfo = Array("WebPush: info".utf8) + [0] + userAgentPublicKey + sender.publicKey
        let inputKeyMaterial = try HKDF.sha256(
            salt: authSecret,
            inputKeyMaterial: ecdhSecret,
            info: keyInfo,
            length: SHA256.digestLength
        )
        // RFC 8188 section 2.2 and 2.3. The nonce is used as derived: the one record is number 0.
        let contentKey = try HKDF.sha256(
            salt: salt,
            inputKeyMaterial: inputKeyMaterial,
            info: Array("Content-Encoding: aes128gcm".utf8) + [0],
            length: AES128GCM.keyLength
        )
        let nonce = try HKDF.sha256(
            salt: salt,
            inputKeyMaterial: inputKeyMaterial,
            info: Array("Content-Encoding: nonce".utf8) + [0],
            length: AES128GCM.nonceLength
        )
        let record = try AES128GCM.seal(key: contentKey, nonce: nonce, plaintext: plaintext + [lastRecordDelimiter])

        var body = salt
        body.reserveCapacity(headerLength + record.count)
        body += withUnsafeBytes(of: UInt32(recordSize).bigEndian, Array.init)
        body.append(UInt8(P256PrivateKey.publicKeyLength))
        body += sender.publicKey
        body += record
        return body
    }
}
