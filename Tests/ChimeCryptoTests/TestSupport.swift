import ChimeCrypto

/// Bytes from hexadecimal, for the RFCs' and NIST's vectors.
func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8)
    precondition(digits.count.isMultiple(of: 2), "an odd number of hex digits")
    return stride(from: 0, to: digits.count, by: 2).map {
        UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)!
    }
}

/// Bytes from base64url, for vectors written that way.
func base64url(_ text: String) -> [UInt8] {
    guard let bytes = Base64URL.decode(text) else { preconditionFailure("not base64url: \(text)") }
    return bytes
}
