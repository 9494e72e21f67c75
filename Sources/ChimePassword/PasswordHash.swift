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
/// milliseconds and 16 MiB for yescrypt's default), so call them off latency-sensitive threads;
/// ``verify(_:against:)`` refuses hashes costlier than ``maximumBcryptCost`` and
/// ``maximumYescryptBlocks`` without hashing.
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

    /// The costliest bcrypt hash ``verify(_:against:)`` checks: cost 12 (2¹² rounds, about a
    /// quarter of a second). `htpasswd -B` writes 5 by default, `mkpasswd -m bcrypt` 5.
    public static let maximumBcryptCost = 12

    /// The costliest yescrypt hash ``verify(_:against:)`` checks, as the product of its N and r:
    /// libcrypt's default (`$y$j9T$`: N = 4096, r = 32, 16 MiB, tens of milliseconds), which is
    /// what ``make(_:)`` and `mkpasswd -m yescrypt` write.
    public static let maximumYescryptBlocks: UInt64 = 4096 * 32

    /// Whether `password` is the one `hash` was made from.
    ///
    /// The hash is recomputed with the stored hash as libcrypt's setting and compared with it in
    /// constant time. Never throws and never traps: a hash that is not a well-formed yescrypt or
    /// bcrypt hash within the costs allowed (``isSupported(_:)``), such as a locked account's `*`
    /// or `!…`, or one whose cost would make a check take seconds, and a password that ``make(_:)``
    /// would refuse, are false without calling libcrypt.
    public static func verify(_ password: String, against hash: String) -> Bool {
        guard isSupported(hash), (try? check(password)) != nil else { return false }
        guard let computed = crypt(password, setting: hash) else { return false }
        return ConstantTime.equal(Array(computed.utf8), Array(hash.utf8))
    }

    /// Whether `hash` is a well-formed hash that ``verify(_:against:)`` checks: yescrypt
    /// (`$y$PARAMS$SALT$` and 43 characters of hash) or bcrypt (`$2b$`, `$2y$` or `$2a$`, a cost of
    /// 04 to 31, `$`, and 53 characters of salt and hash), in crypt(5)'s alphabet, that
    /// `crypt_checksalt` takes as neither invalid nor legacy, and no costlier than
    /// ``maximumBcryptCost`` or ``maximumYescryptBlocks`` (``isTooCostly(_:)``).
    ///
    /// Cheap: it reads the text and does not hash.
    public static func isSupported(_ hash: String) -> Bool {
        shape(hash) == .supported
    }

    /// Whether `hash` is a well-formed yescrypt or bcrypt hash that ``verify(_:against:)`` refuses
    /// for its cost: bcrypt over ``maximumBcryptCost``; yescrypt with N × r over
    /// ``maximumYescryptBlocks``, another flavour than libcrypt's, or parameters past N and r
    /// (p, t, g, a ROM), each of which only adds cost. A hand-edited accounts line must not make
    /// each sign-in take seconds, or minutes, of the server's time.
    public static func isTooCostly(_ hash: String) -> Bool {
        shape(hash) == .tooCostly
    }

    private enum Shape { case supported, tooCostly, unsupported }

    private static func shape(_ hash: String) -> Shape {
        let bytes = Array(hash.utf8)
        guard bytes.count <= maximumHashBytes, bytes.allSatisfy(\.isCryptCharacter) else { return .unsupported }
        let affordable: Bool
        if hash.hasPrefix("$y$") {
            // "", "y", parameters, salt, hash.
            let fields = bytes.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
            guard fields.count == 5, !fields[3].isEmpty, fields[4].count == 43,
                let withinCost = yescryptWithinCost(fields[2])
            else { return .unsupported }
            affordable = withinCost
        } else if hash.hasPrefix("$2b$") || hash.hasPrefix("$2y$") || hash.hasPrefix("$2a$") {
            guard bytes.count == 60, let cost = bcryptCost(bytes), !bytes[7...].contains(UInt8(ascii: "$")) else {
                return .unsupported
            }
            affordable = cost <= maximumBcryptCost
        } else {
            return .unsupported
        }
        guard crypt_checksalt(hash) == CRYPT_SALT_OK else { return .unsupported }
        return affordable ? .supported : .tooCostly
    }

    /// The cost of a bcrypt hash, `$2b$NN$…`: two digits, 04 to 31, then `$`; nil when it is not.
    private static func bcryptCost(_ bytes: [UInt8]) -> Int? {
        guard bytes.count > 6, bytes[6] == UInt8(ascii: "$") else { return nil }
        let digits = bytes[4...5].map { Int($0) - Int(UInt8(ascii: "0")) }
        guard digits.allSatisfy({ (0...9).contains($0) }) else { return nil }
        let cost = digits[0] * 10 + digits[1]
        return (4...31).contains(cost) ? cost : nil
    }

    /// libcrypt's yescrypt flavour (`YESCRYPT_DEFAULTS`, written `j`): the only one it writes.
    private static let yescryptFlavor: UInt32 = 47

    /// Whether yescrypt parameters (`j9T`: flavour, log₂ N, r, then optional ones) cost at most
    /// the default's; nil when they are not well-formed.
    private static func yescryptWithinCost(_ field: ArraySlice<UInt8>) -> Bool? {
        var rest = field
        guard let flavor = yescryptNumber(&rest, minimum: 0), let logN = yescryptNumber(&rest, minimum: 1),
            let r = yescryptNumber(&rest, minimum: 1)
        else { return nil }
        // p, t, g and a ROM follow only when they differ from the defaults, and each costs more.
        guard rest.isEmpty, flavor == yescryptFlavor, logN <= 32 else { return false }
        // At most 2³² × (2³² − 1): no overflow.
        return (UInt64(1) << UInt64(logN)) * UInt64(r) <= maximumYescryptBlocks
    }

    /// A number in yescrypt's variable-length encoding, taken from the front of `bytes`: a first
    /// character that says how many follow and their high bits, then six bits a character
    /// (`decode64_uint32` in libxcrypt's yescrypt-common.c). Nil when it is not one.
    private static func yescryptNumber(_ bytes: inout ArraySlice<UInt8>, minimum: UInt32) -> UInt32? {
        guard let first = bytes.popFirst(), let c = cryptDigit(first) else { return nil }
        var start: UInt64 = 0
        var end: UInt64 = 47
        var chars = 1
        var bits: UInt64 = 0
        var value = UInt64(minimum)
        while UInt64(c) > end {
            value += (end + 1 - start) << bits
            start = end + 1
            end = start + (62 - end) / 2
            chars += 1
            bits += 6
        }
        value += (UInt64(c) - start) << bits
        while chars > 1 {
            chars -= 1
            guard let next = bytes.popFirst(), let digit = cryptDigit(next) else { return nil }
            bits -= 6
            value += UInt64(digit) << bits
        }
        return value <= UInt64(UInt32.max) ? UInt32(value) : nil
    }

    /// The value of a character of crypt(5)'s base 64, `./0-9A-Za-z`: 0 to 63.
    private static func cryptDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "."): 0
        case UInt8(ascii: "/"): 1
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 2
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A") + 12
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 38
        default: nil
        }
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
