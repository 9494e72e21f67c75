import CCrypto

/// The curve's names as libcrypto gives them (`EVP_PKEY_get_group_name`): its SEC 2 name and NIST's.
private let curveNames: Set<String> = ["prime256v1", "P-256"]
/// The length of a scalar and of a coordinate on P-256.
private let coordinateLength = 32

/// A private key on the NIST P-256 curve (secp256r1, prime256v1): for ES256 signatures (APNs token
/// authentication, VAPID) and for ECDH (Web Push encryption).
public struct P256PrivateKey: Sendable {
    /// The length of a public key as an uncompressed point (SEC 1 section 2.3.3): 0x04, X, Y.
    public static let publicKeyLength = 1 + 2 * coordinateLength

    let key: OwnedKey

    /// The public key as an uncompressed point, 65 bytes: 0x04, X, Y. Base64url, it is the VAPID
    /// public key (the browser's `applicationServerKey`) and RFC 8291's `as_public`.
    public let publicKey: [UInt8]

    /// Reads a PEM private key: PKCS #8 (`BEGIN PRIVATE KEY`, as Apple's `.p8` files are) or SEC 1
    /// (`BEGIN EC PRIVATE KEY`).
    /// - Throws: `.malformedKey` for text that holds no readable private key (an encrypted one
    ///   included); `.wrongKeyType` for a key that is not on P-256 (RSA, P-384, Ed25519...).
    public init(pem: String) throws(CryptoError) {
        try self.init(adopting: OwnedKey.readPrivateKey(pem: pem))
    }

    /// Makes the key from its 32-byte private scalar, big-endian: the form web-push libraries
    /// keep a VAPID private key in (base64url-encoded), and RFC 8291's `as_private`.
    /// - Throws: `.malformedKey` unless `rawScalar` is 32 bytes and in [1, n-1].
    public init(rawScalar: [UInt8]) throws(CryptoError) {
        guard rawScalar.count == coordinateLength else {
            throw CryptoError(.malformedKey, "a P-256 private scalar is \(coordinateLength) bytes")
        }
        let key = try withCleanErrorQueue { () throws(CryptoError) -> OwnedKey in
            try OwnedKey.fromParameters(
                type: "EC",
                selection: CHIME_EVP_PKEY_KEYPAIR,
                OSSLParameters([
                    (OSSL_PKEY_PARAM_GROUP_NAME, .utf8("prime256v1")),
                    (OSSL_PKEY_PARAM_PRIV_KEY, .unsignedInteger(bigEndian: rawScalar)),
                    (OSSL_PKEY_PARAM_PUB_KEY, .octets(Self.publicPoint(ofScalar: rawScalar))),
                ])
            )
        }
        try self.init(adopting: key)
    }

    /// The key as PEM PKCS #8 (`BEGIN PRIVATE KEY`), unencrypted: what ``init(pem:)`` reads.
    /// - Throws: `.libraryFailure` when libcrypto cannot write it (out of memory).
    public func privateKeyPEM() throws(CryptoError) -> String { try key.privateKeyPEM() }

    /// The public key as PEM SubjectPublicKeyInfo (`BEGIN PUBLIC KEY`), as `openssl pkey -pubout`
    /// writes it: what a verifier (the broker's device-token plugin, PyJWT) reads.
    /// - Throws: `.libraryFailure` when libcrypto cannot write it (out of memory).
    public func publicKeyPEM() throws(CryptoError) -> String { try key.publicKeyPEM() }

    /// A new random key (`EVP_PKEY_generate`), such as the ephemeral key of one Web Push message.
    ///
    /// libcrypto fails here only without memory or randomness; that stops the process.
    public static func generate() -> P256PrivateKey {
        do {
            return try withCleanErrorQueue { () throws(CryptoError) -> P256PrivateKey in
                guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
                    throw .library("cannot make a key context", function: "EVP_PKEY_CTX_new_from_name")
                }
                defer { EVP_PKEY_CTX_free(context) }
                guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1 else {
                    throw .library("cannot set up P-256 key generation", function: "EVP_PKEY_keygen_init")
                }
                var key: OpaquePointer?
                guard EVP_PKEY_generate(context, &key) == 1, let key else {
                    throw .library("cannot generate a P-256 key", function: "EVP_PKEY_generate")
                }
                return try P256PrivateKey(adopting: OwnedKey(key))
            }
        } catch {
            fatalError("P256PrivateKey.generate: \(error)")
        }
    }

    /// Takes a key libcrypto made: checks that it is a whole P-256 key pair, fixes the public
    /// point's encoding to uncompressed and reads it.
    private init(adopting key: OwnedKey) throws(CryptoError) {
        self.key = key
        self.publicKey = try withCleanErrorQueue { () throws(CryptoError) -> [UInt8] in
            guard EVP_PKEY_is_a(key.pointer, "EC") == 1 else {
                throw CryptoError(.wrongKeyType, "the key is not an elliptic-curve key, so not a P-256 key")
            }
            var name = [CChar](repeating: 0, count: 80)
            var nameLength = 0
            guard EVP_PKEY_get_group_name(key.pointer, &name, name.count, &nameLength) == 1 else {
                throw .library(
                    "the key names no curve, so not P-256",
                    code: .wrongKeyType,
                    function: "EVP_PKEY_get_group_name"
                )
            }
            let curve = String(decoding: name.prefix(nameLength).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard curveNames.contains(curve) else {
                throw CryptoError(.wrongKeyType, "the key is on \(curve), not P-256")
            }
            try key.checkPair()
            // A SEC 1 key may carry its point compressed; publicKey is always the uncompressed form.
            guard
                EVP_PKEY_set_utf8_string_param(key.pointer, OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, "uncompressed")
                    == 1
            else {
                throw .library("cannot set the point format", function: "EVP_PKEY_set_utf8_string_param")
            }
            var point = [UInt8](repeating: 0, count: P256PrivateKey.publicKeyLength)
            var length = 0
            guard
                EVP_PKEY_get_octet_string_param(key.pointer, OSSL_PKEY_PARAM_PUB_KEY, &point, point.count, &length)
                    == 1, length == P256PrivateKey.publicKeyLength
            else {
                throw .library(
                    "the key has no public point",
                    code: .malformedKey,
                    function: "EVP_PKEY_get_octet_string_param"
                )
            }
            return point
        }
    }

    /// d·G, uncompressed, for a scalar d in [1, n-1] (`EC_POINT_mul`): importing a bare scalar,
    /// libcrypto 3.0 does not derive the public point itself.
    private static func publicPoint(ofScalar scalar: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else {
            throw .library("cannot load P-256", function: "EC_GROUP_new_by_curve_name")
        }
        defer { EC_GROUP_free(group) }
        guard let d = BN_bin2bn(scalar, Int32(scalar.count), nil) else {
            throw .library("cannot read the scalar", function: "BN_bin2bn")
        }
        defer { BN_clear_free(d) }
        guard BN_is_zero(d) == 0, BN_cmp(d, EC_GROUP_get0_order(group)) < 0 else {
            throw CryptoError(.malformedKey, "a P-256 private scalar is in [1, n-1], n the group's order")
        }
        guard let point = EC_POINT_new(group) else {
            throw .library("cannot make a point", function: "EC_POINT_new")
        }
        defer { EC_POINT_free(point) }
        guard EC_POINT_mul(group, point, d, nil, nil, nil) == 1 else {
            throw .library("cannot compute the public point", function: "EC_POINT_mul")
        }
        var encoded = [UInt8](repeating: 0, count: P256PrivateKey.publicKeyLength)
        let length = EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &encoded, encoded.count, nil)
        guard length == P256PrivateKey.publicKeyLength else {
            throw .library("cannot encode the public point", function: "EC_POINT_point2oct")
        }
        return encoded
    }

    /// Signs `message` with ECDSA over SHA-256 (ES256, RFC 7518 section 3.4): the signature in the
    /// JOSE form, r and s as 32 bytes each, big-endian (64 bytes; not DER).
    /// - Throws: `.libraryFailure` when libcrypto cannot sign (out of memory).
    public func signES256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try withCleanErrorQueue { () throws(CryptoError) -> [UInt8] in
            let der = try key.signSHA256(message)
            // libcrypto writes ECDSA-Sig-Value (RFC 3279): SEQUENCE { r INTEGER, s INTEGER }.
            let signature = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
                var cursor = buffer.baseAddress
                return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
            }
            guard let signature else {
                throw .library("cannot read libcrypto's signature", function: "d2i_ECDSA_SIG")
            }
            defer { ECDSA_SIG_free(signature) }
            var jose = [UInt8](repeating: 0, count: 2 * coordinateLength)
            let written = jose.withUnsafeMutableBufferPointer { buffer in
                let base = buffer.baseAddress!
                return (
                    BN_bn2binpad(ECDSA_SIG_get0_r(signature), base, Int32(coordinateLength)),
                    BN_bn2binpad(ECDSA_SIG_get0_s(signature), base + coordinateLength, Int32(coordinateLength))
                )
            }
            guard written == (Int32(coordinateLength), Int32(coordinateLength)) else {
                throw .library("cannot write the signature's r and s", function: "BN_bn2binpad")
            }
            return jose
        }
    }

    /// The ECDH shared secret with a peer's public key (SEC 1 section 3.3.1): the x-coordinate of
    /// d·Q, 32 bytes. RFC 8291's `ecdh_secret`.
    /// - Parameter peerPublicKey: the peer's uncompressed point, 65 bytes (a subscription's `p256dh`).
    /// - Throws: `.malformedKey` unless the peer's key is 65 bytes starting with 0x04 and a point on
    ///   the curve.
    public func sharedSecret(peerPublicKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        let peer = try P256PublicKey(uncompressed: peerPublicKey)
        return try withCleanErrorQueue { () throws(CryptoError) -> [UInt8] in
            let context = try key.makeContext()
            defer { EVP_PKEY_CTX_free(context) }
            guard EVP_PKEY_derive_init(context) == 1 else {
                throw .library("cannot start ECDH", function: "EVP_PKEY_derive_init")
            }
            // 1: validate the peer's key (on the curve, not the point at infinity) once more.
            guard EVP_PKEY_derive_set_peer_ex(context, peer.key.pointer, 1) == 1 else {
                throw .library(
                    "libcrypto refused the peer's public key",
                    code: .malformedKey,
                    function: "EVP_PKEY_derive_set_peer_ex"
                )
            }
            var secret = [UInt8](repeating: 0, count: coordinateLength)
            var length = secret.count
            guard EVP_PKEY_derive(context, &secret, &length) == 1, length == coordinateLength else {
                throw .library("cannot derive the shared secret", function: "EVP_PKEY_derive")
            }
            return secret
        }
    }
}

/// A public key on P-256, from its uncompressed point: the peer of ECDH, and the verifier of ES256
/// signatures for the tests.
struct P256PublicKey: Sendable {
    let key: OwnedKey

    /// - Throws: `.malformedKey` unless `uncompressed` is 65 bytes, 0x04 first, and a point on the
    ///   curve (libcrypto checks it as it imports it, and `EVP_PKEY_public_check` again).
    init(uncompressed: [UInt8]) throws(CryptoError) {
        guard uncompressed.count == P256PrivateKey.publicKeyLength, uncompressed.first == 0x04 else {
            throw CryptoError(
                .malformedKey,
                "a P-256 public key is an uncompressed point: \(P256PrivateKey.publicKeyLength) bytes, 0x04 first"
            )
        }
        key = try withCleanErrorQueue { () throws(CryptoError) -> OwnedKey in
            let key = try OwnedKey.fromParameters(
                type: "EC",
                selection: CHIME_EVP_PKEY_PUBLIC_KEY,
                OSSLParameters([
                    (OSSL_PKEY_PARAM_GROUP_NAME, .utf8("prime256v1")),
                    (OSSL_PKEY_PARAM_PUB_KEY, .octets(uncompressed)),
                ])
            )
            let context = try key.makeContext()
            defer { EVP_PKEY_CTX_free(context) }
            guard EVP_PKEY_public_check(context) == 1 else {
                throw .library("the point is not on P-256", code: .malformedKey, function: "EVP_PKEY_public_check")
            }
            return key
        }
    }

    /// Whether `signature` (JOSE form: r and s, 32 bytes each) is an ES256 signature of `message`
    /// by this key. For the tests: the server only signs.
    func verifyES256(_ signature: [UInt8], of message: [UInt8]) -> Bool {
        guard signature.count == 2 * coordinateLength else { return false }
        return withCleanErrorQueue { () -> Bool in
            guard let value = ECDSA_SIG_new() else { return false }
            defer { ECDSA_SIG_free(value) }
            guard let r = BN_bin2bn(signature, Int32(coordinateLength), nil) else { return false }
            guard let s = BN_bin2bn(Array(signature[coordinateLength...]), Int32(coordinateLength), nil) else {
                BN_free(r)
                return false
            }
            // ECDSA_SIG_set0 takes r and s over.
            guard ECDSA_SIG_set0(value, r, s) == 1 else {
                BN_free(r)
                BN_free(s)
                return false
            }
            let length = i2d_ECDSA_SIG(value, nil)
            guard length > 0 else { return false }
            var der = [UInt8](repeating: 0, count: Int(length))
            let written = der.withUnsafeMutableBufferPointer { buffer in
                var cursor = buffer.baseAddress
                return i2d_ECDSA_SIG(value, &cursor)
            }
            guard written == length else { return false }
            return key.verifySHA256(der, of: message)
        }
    }
}
