// ChimePassword: password hashes (yescrypt, and bcrypt to check) through the system's libcrypt
// (libxcrypt), for the console's accounts. The only code that imports CCrypt.

import CCrypt

#if canImport(Glibc)
import Glibc
#endif

/// Password hashes in the crypt(5) format, made and checked by the system's libcrypt
/// (libxcrypt), never by a hash written here.
///
/// ``make(_:)`` makes yescrypt hashes (`$y$…`) with libcrypt's default cost and a salt from its
/// own entropy source; ``verify(_:against:)`` checks a password against a yescrypt hash or a
/// bcrypt one (`$2b$`, `$2y$`, `$2a$`), as `mkpasswd -m yescrypt` or `htpasswd -B` write them.
/// Other schemes libcrypt knows (DES, MD5, SHA-crypt) are refused: they are legacy or fast.
///
/// Both calls are thread-safe: each uses `crypt_rn` with a `struct crypt_data` (32 KiB) of its
/// own on the heap, zeroed before it is freed. Each costs what the hash's parameters say (tens of
/// milliseconds and 16 MiB for yescrypt's default), so call them off latency-sensitive threads.
///
/// bcrypt reads only the first 72 bytes of a password: two passwords that share them match the
/// same bcrypt hash. yescrypt reads every byte.
public enum PasswordHash {
    /// The longest password, in bytes of UTF-8: libcrypt refuses a passphrase of
    /// `CRYPT_MAX_PASSPHRASE_SIZE` (512) bytes or more, counting the C string's NUL.
    public static let maximumPasswordBytes = Int(CRYPT_MAX_PASSPHRASE_SIZE) - 1

    /// The longest hash ``verify(_:against:)`` reads: libcrypt's `CRYPT_OUTPUT_SIZE` less the NUL.
    public static let maximumHashBytes = Int(CRYPT_OUTPUT_SIZE) - 1

    /// Makes a yescrypt hash of `password` with a fresh random salt.
    ///
    /// The salt comes from `crypt_gensalt_rn("$y$", 0, NULL, 0, …)`: libcrypt's default cost and
    /// its own entropy source (`getrandom`), so two hashes of one password differ.
    /// - Returns: the hash, such as `$y$j9T$…$…`, to store as it is.
    /// - Throws: ``PasswordError`` `.empty`, `.tooLong` (over ``maximumPasswordBytes``) or
    ///   `.containsNUL` for a password refused before libcrypt is called, `.libraryFailure` when
    ///   libcrypt cannot make a salt or a hash.
    public static func make(_ password: String) throws(PasswordError) -> String {
        try check(password)
        var setting = [CChar](repeating: 0, count: Int(CRYPT_GENSALT_OUTPUT_SIZE))
        errno = 0
        guard crypt_gensalt_rn("$y$", 0, nil, 0, &setting, Int32(setting.count)) != nil else {
            throw PasswordError(
                .libraryFailure,
                "cannot make a yescrypt salt: \(String(cString: strerror(errno)))",
                function: "crypt_gensalt_rn"
            )
        }
        let settingText = String(decoding: setting.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let hash = crypt(password, setting: settingText), hash.hasPrefix(settingText) else {
            throw PasswordError(
                .libraryFailure,
                "cannot hash with yescrypt: \(String(cString: strerror(errno)))",
                function: "crypt_rn"
            )
        }
        return hash
    }

    /// Whether `password` is the one `hash` was made from.
    ///
    /// The hash is recomputed with the stored hash as libcrypt's setting and compared with it in
    /// constant time. Never throws and never traps: a hash that is not a well-formed yescrypt or
    /// bcrypt hash (``isSupported(_:)``), such as a locked account's `*` or `!…`, and a password
    /// that ``make(_:)`` would refuse, are false without calling libcrypt.
    public static func verify(_ password: String, against hash: String) -> Bool {
        guard isSupported(hash), (try? check(password)) != nil else { return false }
        guard let computed = crypt(password, setting: hash) else { return false }
        return ConstantTime.equal(Array(computed.utf8), Array(hash.utf8))
    }

    /// Whether `hash` is a well-formed hash that ``verify(_:against:)`` checks: yescrypt
    /// (`$y$PARAMS$SALT$` and 43 characters of hash) or bcrypt (`$2b$`, `$2y$` or `$2a$`, a cost of
    /// 04 to 31, `$`, and 53 characters of salt and hash), in crypt(5)'s alphabet, that
    /// `crypt_checksalt` takes as neither invalid nor legacy.
    ///
    /// Cheap: it reads the text and does not hash.
    public static func isSupported(_ hash: String) -> Bool {
        let bytes = Array(hash.utf8)
        guard bytes.count <= maximumHashBytes, bytes.allSatisfy(\.isCryptCharacter) else { return false }
        let wellFormed: Bool
        if hash.hasPrefix("$y$") {
            // "", "y", parameters, salt, hash.
            let fields = bytes.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
            wellFormed = fields.count == 5 && !fields[2].isEmpty && !fields[3].isEmpty && fields[4].count == 43
        } else if hash.hasPrefix("$2b$") || hash.hasPrefix("$2y$") || hash.hasPrefix("$2a$") {
            wellFormed = bytes.count == 60 && bcryptCost(bytes) != nil && !bytes[7...].contains(UInt8(ascii: "$"))
        } else {
            wellFormed = false
        }
        return wellFormed && crypt_checksalt(hash) == CRYPT_SALT_OK
    }

    /// The cost of a bcrypt hash, `$2b$NN$…`: two digits, 04 to 31, then `$`; nil when it is not.
    private static func bcryptCost(_ bytes: [UInt8]) -> Int? {
        guard bytes.count > 6, bytes[6] == UInt8(ascii: "$") else { return nil }
        let digits = bytes[4...5].map { Int($0) - Int(UInt8(ascii: "0")) }
        guard digits.allSatisfy({ (0...9).contains($0) }) else { return nil }
        let cost = digits[0] * 10 + digits[1]
        return (4...31).contains(cost) ? cost : nil
    }

    /// Refuses a password that libcrypt cannot hash as it is given.
    private static func check(_ password: String) throws(PasswordError) {
        let utf8 = password.utf8
        guard !utf8.isEmpty else { throw PasswordError(.empty, "the password is empty") }
        guard utf8.count <= maximumPasswordBytes else {
            throw PasswordError(.tooLong, "the password is longer than \(maximumPasswordBytes) bytes")
        }
        guard !utf8.contains(0) else { throw PasswordError(.containsNUL, "the password contains a NUL character") }
    }

    /// `crypt_rn(password, setting)` with a `struct crypt_data` of its own, allocated on the heap
    /// (it is 32 KiB, too large for a thread's stack to be sure of) and wiped before it is freed,
    /// since libcrypt leaves the password's traces in it.
    /// - Returns: the hash, or nil when libcrypt refused (it returns NULL, or a failure token that
    ///   starts with `*`).
    private static func crypt(_ password: String, setting: String) -> String? {
        let size = MemoryLayout<crypt_data>.size
        let data = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<crypt_data>.alignment)
        // libcrypt wants the structure zeroed before its first use.
        data.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        defer {
            explicit_bzero(data, size)
            data.deallocate()
        }
        errno = 0
        guard let output = crypt_rn(password, setting, data, Int32(size)), output.pointee != CChar(UInt8(ascii: "*"))
        else { return nil }
        return String(cString: output)
    }
}

/// Comparison of secrets in a time that does not depend on where they differ.
public enum ConstantTime {
    /// Whether `a` and `b` are the same bytes, reading every byte of `a` whatever the result: the
    /// time taken reveals the lengths, not the position of the first difference.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference: UInt8 = a.count == b.count ? 0 : 1
        for index in a.indices {
            difference |= a[index] ^ (index < b.count ? b[index] : 0)
        }
        return difference == 0
    }
}

extension UInt8 {
    /// Whether this byte may appear in a crypt(5) hash: `./0-9A-Za-z` and `$`.
    fileprivate var isCryptCharacter: Bool {
        switch self {
        case UInt8(ascii: "."), UInt8(ascii: "/"), UInt8(ascii: "$"): true
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            true
        case UInt8(ascii: "a")...UInt8(ascii: "z"): true
        default: false
        }
    }
}
