import CPostgres

#if canImport(Glibc)
import Glibc
#endif

/// The type OIDs ChimePostgres sends and decodes (`pg_type.oid`, fixed in every PostgreSQL).
enum TypeOID {
    static let unspecified: Oid = 0
    static let bool: Oid = 16
    static let bytea: Oid = 17
    static let char: Oid = 18
    static let name: Oid = 19
    static let int8: Oid = 20
    static let int2: Oid = 21
    static let int4: Oid = 23
    static let text: Oid = 25
    static let oid: Oid = 26
    static let xid: Oid = 28
    static let json: Oid = 114
    static let unknown: Oid = 705
    static let bpchar: Oid = 1042
    static let varchar: Oid = 1043
    /// What a function that returns nothing returns (`pg_advisory_xact_lock`, `pg_sleep`): empty.
    static let void: Oid = 2278
    static let jsonb: Oid = 3802
}

/// The parameters of one statement as the C arrays `PQsendQueryParams` takes: text in the text
/// format with its type left to the server, bytea in binary. Owns the copies until ``deallocate()``.
struct EncodedParameters {
    private(set) var types: [Oid] = []
    private(set) var values: [UnsafePointer<CChar>?] = []
    private(set) var lengths: [Int32] = []
    private(set) var formats: [Int32] = []
    private var storage: [UnsafeMutableRawPointer] = []

    init(_ parameters: [PostgresValue?]) throws(PostgresError) {
        do throws(PostgresError) {
            for (index, parameter) in parameters.enumerated() {
                switch parameter {
                case nil:
                    append(type: TypeOID.unspecified, value: nil, length: 0, format: 0)
                case .text(let text):
                    let utf8 = Array(text.utf8)
                    guard !utf8.contains(0) else {
                        throw PostgresError(
                            .invalidParameter,
                            "parameter $\(index + 1) contains a NUL character, which PostgreSQL text cannot hold: "
                                + "send it as bytea"
                        )
                    }
                    let copy = copyBytes(utf8, terminated: true)
                    append(type: TypeOID.unspecified, value: copy, length: Int32(clamping: utf8.count), format: 0)
                case .bytea(let bytes):
                    guard bytes.count <= Int(Int32.max) else {
                        throw PostgresError(.invalidParameter, "parameter $\(index + 1) is larger than 2 GiB")
                    }
                    let copy = copyBytes(bytes, terminated: false)
                    append(type: TypeOID.bytea, value: copy, length: Int32(bytes.count), format: 1)
                }
            }
        } catch {
            deallocate()
            throw error
        }
    }

    /// Frees the copies of the values.
    func deallocate() {
        storage.forEach { $0.deallocate() }
    }

    private mutating func append(type: Oid, value: UnsafeMutableRawPointer?, length: Int32, format: Int32) {
        types.append(type)
        values.append(value.map { UnsafePointer($0.assumingMemoryBound(to: CChar.self)) })
        lengths.append(length)
        formats.append(format)
    }

    /// A copy of the bytes in memory of our own (at least one byte: an empty bytea must still be a
    /// non-NULL pointer, as NULL means SQL NULL).
    private mutating func copyBytes(_ bytes: [UInt8], terminated: Bool) -> UnsafeMutableRawPointer {
        let count = bytes.count + (terminated ? 1 : 0)
        let memory = UnsafeMutableRawPointer.allocate(byteCount: max(count, 1), alignment: 1)
        storage.append(memory)
        bytes.withUnsafeBytes { source in
            if let base = source.baseAddress {
                memory.copyMemory(from: base, byteCount: source.count)
            }
        }
        if terminated || count == 0 {
            memory.storeBytes(of: 0, toByteOffset: bytes.count, as: UInt8.self)
        }
        return memory
    }
}

/// Turns a column's binary value into a ``PostgresValue``: bytea as bytes, the text types as
/// text, integers, booleans and `void` as the text the server would print for them. Other types are
/// refused when the result arrives, with a hint to cast them to text in the query.
enum CellDecoder {
    case bytes
    case text
    /// jsonb's binary format: a version byte (1), then the text.
    case jsonb
    case signed
    case unsigned
    case bool

    init?(type: Oid) {
        switch type {
        case TypeOID.bytea: self = .bytes
        case TypeOID.text, TypeOID.varchar, TypeOID.bpchar, TypeOID.name, TypeOID.char, TypeOID.json,
            TypeOID.unknown, TypeOID.void:
            self = .text
        case TypeOID.jsonb: self = .jsonb
        case TypeOID.int2, TypeOID.int4, TypeOID.int8: self = .signed
        case TypeOID.oid, TypeOID.xid: self = .unsigned
        case TypeOID.bool: self = .bool
        default: return nil
        }
    }

    func decode(_ bytes: UnsafeRawBufferPointer, column: String) throws(PostgresError) -> PostgresValue {
        switch self {
        case .bytes:
            return .bytea(Array(bytes))
        case .text:
            return .text(try utf8(bytes, column: column))
        case .jsonb:
            guard bytes.first == 1 else { throw malformed(column, "jsonb of an unknown version") }
            return .text(try utf8(UnsafeRawBufferPointer(rebasing: bytes.dropFirst()), column: column))
        case .signed:
            guard [2, 4, 8].contains(bytes.count) else { throw malformed(column, "an integer of \(bytes.count) bytes") }
            let unsigned = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            // Sign-extend from the integer's width.
            let shift = UInt64(64 - bytes.count * 8)
            return .integer(Int64(bitPattern: unsigned << shift) >> shift)
        case .unsigned:
            guard bytes.count == 4 else { throw malformed(column, "an oid of \(bytes.count) bytes") }
            return .integer(bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        case .bool:
            guard bytes.count == 1 else { throw malformed(column, "a boolean of \(bytes.count) bytes") }
            return .text(bytes[0] == 0 ? "f" : "t")
        }
    }

    private func utf8(_ bytes: UnsafeRawBufferPointer, column: String) throws(PostgresError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw malformed(column, "text that is not UTF-8")
        }
        return text
    }

    private func malformed(_ column: String, _ what: String) -> PostgresError {
        PostgresError(.unexpectedResult, "column '\(column)' holds \(what)")
    }
}
