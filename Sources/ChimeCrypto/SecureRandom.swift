import CCrypto

/// Random bytes from libcrypto's generator (`RAND_bytes`), seeded from the operating system: for
/// keys, salts and nonces.
public enum SecureRandom {
    /// `count` random bytes.
    ///
    /// libcrypto's generator fails only when it cannot be seeded; no secret may be made then, so
    /// that stops the process.
    /// - Precondition: `count` is not negative.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "SecureRandom.bytes: a negative count (\(count))")
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        // RAND_bytes takes an Int32 count: a larger request is served in pieces.
        while offset < count {
            let piece = min(count - offset, Int(Int32.max))
            let ok = bytes.withUnsafeMutableBytes { buffer in
                RAND_bytes(buffer.baseAddress!.advanced(by: offset).assumingMemoryBound(to: UInt8.self), Int32(piece))
            }
            guard ok == 1 else {
                fatalError("\(CryptoError.library("the random generator failed", function: "RAND_bytes"))")
            }
            offset += piece
        }
        return bytes
    }
}
