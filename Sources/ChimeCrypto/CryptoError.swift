import CCrypto

/// An error from ChimeCrypto: what kind of thing went wrong, a sentence for people, and the
/// libcrypto function that failed when one did.
///
/// The message says which input was wrong and why, and carries OpenSSL's own error strings when
/// libcrypto queued any. It never carries key material: not a key's bytes, not a PEM's text, not a
/// secret's length beyond what the caller already knows.
///
/// Two errors are equal when their codes are equal, so tests can write
/// `#expect(throws: CryptoError(.malformedKey))`.
public struct CryptoError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of thing went wrong.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Kind: Hashable, Sendable {
            case malformedKey
            case wrongKeyType
            case malformedInput
            case authenticationFailed
            case libraryFailure
        }

        private let kind: Kind

        private init(_ kind: Kind) {
            self.kind = kind
        }

        /// A key that cannot be read: not PEM, not a private key, encrypted, a scalar or a point of
        /// the wrong length or off the curve.
        public static let malformedKey = Code(.malformedKey)
        /// A well-formed key of another kind than the one asked for: an RSA key where a P-256 key
        /// is needed, a P-384 key, an RSA key shorter than 2048 bits.
        public static let wrongKeyType = Code(.wrongKeyType)
        /// An argument that is not a key and is out of bounds: a nonce or an authentication secret
        /// of the wrong length, a record size out of range, a plaintext too long for one record.
        public static let malformedInput = Code(.malformedInput)
        /// A ciphertext whose authentication tag does not match: it was altered, or the key or nonce
        /// is not the one it was sealed with.
        public static let authenticationFailed = Code(.authenticationFailed)
        /// libcrypto refused an operation on inputs that were checked (out of memory, a missing
        /// algorithm): the message carries OpenSSL's error strings.
        public static let libraryFailure = Code(.libraryFailure)

        public var description: String {
            switch kind {
            case .malformedKey: "malformedKey"
            case .wrongKeyType: "wrongKeyType"
            case .malformedInput: "malformedInput"
            case .authenticationFailed: "authenticationFailed"
            case .libraryFailure: "libraryFailure"
            }
        }
    }

    /// What went wrong.
    public let code: Code
    /// A sentence for people, with OpenSSL's error strings when there were some.
    public let message: String
    /// The libcrypto function that failed, such as `EVP_DigestSign`; nil when the input was refused
    /// before libcrypto was called.
    public let function: String?

    /// Creates an error; `message` defaults to the code's name.
    public init(_ code: Code, _ message: String? = nil, function: String? = nil) {
        self.code = code
        self.message = message ?? code.description
        self.function = function
    }

    public static func == (lhs: CryptoError, rhs: CryptoError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(code)
    }

    public var description: String {
        let prefix = function.map { "\($0): " } ?? ""
        return "\(prefix)\(message) [\(code)]"
    }

    /// The error for a libcrypto call that failed: `message`, then the error strings libcrypto
    /// queued on this thread (which it takes off the queue). OpenSSL's strings name the library,
    /// the reason and the function, never the data.
    /// - Parameters:
    ///   - message: what was being done.
    ///   - code: what kind of failure it is for the caller.
    ///   - function: the libcrypto function that failed.
    static func library(_ message: String, code: Code = .libraryFailure, function: String) -> CryptoError {
        var reasons: [String] = []
        var buffer = [CChar](repeating: 0, count: 256)
        var error = ERR_get_error()
        while error != 0 {
            ERR_error_string_n(error, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            error = ERR_get_error()
        }
        let detail = reasons.isEmpty ? "" : " (OpenSSL: \(reasons.joined(separator: "; ")))"
        return CryptoError(code, message + detail, function: function)
    }
}

/// Runs a libcrypto operation with this thread's error queue empty, so that the strings a failure
/// reports are its own and not those of an earlier call that was allowed to fail. Every public
/// operation that may report OpenSSL's errors starts here.
@inline(__always)
func withCleanErrorQueue<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
    ERR_clear_error()
    defer { ERR_clear_error() }
    return try body()
}
