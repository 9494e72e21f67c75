/// Base64 with the URL and file-name safe alphabet (RFC 4648 section 5), as JOSE (RFC 7515) and
/// Web Push (RFC 8291, RFC 8292) write keys, secrets and signatures.
public enum Base64URL {
    /// The 64 characters, in the order of the values they stand for.
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The value of each byte that is in the alphabet, and 0xFF for every other byte.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in alphabet.enumerated() {
            table[Int(character)] = UInt8(value)
        }
        return table
    }()

    /// Encodes bytes, without the `=` padding (as JOSE and Web Push write it).
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let bytes = Array(bytes)
        var text: [UInt8] = []
        text.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let count = min(3, bytes.count - index)
            var group = UInt32(bytes[index]) << 16
            if count > 1 { group |= UInt32(bytes[index + 1]) << 8 }
            if count > 2 { group |= UInt32(bytes[index + 2]) }
            for position in 0...count {
                text.append(alphabet[Int((group >> (18 - 6 * UInt32(position))) & 0x3F)])
            }
            index += 3
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Decodes text written with or without `=` padding.
    ///
    /// Refuses what is not canonical base64url: a character of the standard alphabet (`+`, `/`)
    /// or any other outside the URL-safe one (white space included), padding that is not at the
    /// end or does not make the length a multiple of four, a length no encoding has (one character
    /// past a multiple of four), and unused low bits in the last character that are not zero.
    /// - Returns: the bytes, or nil when `text` is not base64url.
    public static func decode(_ text: String) -> [UInt8]? {
        var characters = Array(text.utf8)
        if let firstPad = characters.firstIndex(of: UInt8(ascii: "=")) {
            let padding = characters.count - firstPad
            guard padding <= 2, characters.count % 4 == 0,
                characters[firstPad...].allSatisfy({ $0 == UInt8(ascii: "=") })
            else { return nil }
            characters.removeLast(padding)
        }
        guard characters.count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(characters.count * 3 / 4)
        var group: UInt32 = 0
        var bits = 0
        for character in characters {
            let value = values[Int(character)]
            guard value != 0xFF else { return nil }
            group = (group << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: group >> UInt32(bits)))
                group &= (1 << UInt32(bits)) - 1
            }
        }
        // What is left is the last character's unused low bits: zero in a canonical encoding.
        guard group == 0 else { return nil }
        return bytes
    }
}
