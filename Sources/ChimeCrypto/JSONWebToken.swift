/// Compact JWS (RFC 7515 section 7.1) for the JWTs push delivery signs: APNs provider tokens and
/// VAPID tokens (ES256), the OAuth JWT-bearer grant of a Google service account (RS256).
///
/// The header and the claims are given as JSON already serialized, so this module knows no JSON
/// library; they are signed byte for byte as given.
public enum JSONWebToken {
    /// `BASE64URL(header) "." BASE64URL(claims) "." BASE64URL(signature)`, signed with ES256: the
    /// signature is r and s, 32 bytes each (RFC 7518 section 3.4).
    /// - Throws: what `P256PrivateKey.signES256` throws.
    public static func es256(header: [UInt8], claims: [UInt8], key: P256PrivateKey) throws(CryptoError) -> String {
        try compact(header: header, claims: claims) { (input) throws(CryptoError) in try key.signES256(input) }
    }

    /// `BASE64URL(header) "." BASE64URL(claims) "." BASE64URL(signature)`, signed with RS256
    /// (RFC 7518 section 3.3).
    /// - Throws: what `RSAPrivateKey.signRS256` throws.
    public static func rs256(header: [UInt8], claims: [UInt8], key: RSAPrivateKey) throws(CryptoError) -> String {
        try compact(header: header, claims: claims) { (input) throws(CryptoError) in try key.signRS256(input) }
    }

    /// The one serialization: the signing input is the ASCII of the first two parts and the dot.
    private static func compact(
        header: [UInt8],
        claims: [UInt8],
        sign: ([UInt8]) throws(CryptoError) -> [UInt8]
    ) throws(CryptoError) -> String {
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(claims)
        let signature = try sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }
}
