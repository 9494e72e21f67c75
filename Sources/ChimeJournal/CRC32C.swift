import CCRC32C

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI, ext4 and etcd.
///
/// With the processor's instruction where it has one (SSE 4.2 on x86-64, the CRC extension on
/// ARM; `CCRC32C`), several gigabytes a second; elsewhere slice-by-8 in software, eight bytes per
/// step through eight 256-entry tables, about a gigabyte a second. Every snapshot and journal
/// byte recovery reads is checked, so at start-up this is a part of the read time.
/// Known vector: `"123456789"` → `0xE3069283`.
public enum CRC32C {
    /// Whether ``checksum(_:continuing:)`` uses the processor's instruction.
    static let usesHardware = chime_crc32c_available() == 1

    /// The eight tables, 256 entries each, laid out one after the other.
    private static let table: [UInt32] = {
        var table = [UInt32](repeating: 0, count: 8 * 256)
        for n in 0..<256 {
            var crc = UInt32(n)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
            table[n] = crc
        }
        for n in 0..<256 {
            var crc = table[n]
            for slice in 1..<8 {
                crc = table[Int(crc & 0xFF)] ^ (crc >> 8)
                table[slice * 256 + n] = crc
            }
        }
        return table
    }()

    /// The checksum of `bytes`, continuing from `crc` (the result of an earlier call, or 0 to start).
    public static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard usesHardware, let base = bytes.baseAddress else { return software(bytes, continuing: crc) }
        return ~chime_crc32c_update(~crc, base, bytes.count)
    }

    /// The same checksum in software, whatever the processor (tests compare the two).
    static func software(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        guard var pointer = bytes.baseAddress else { return crc }
        var remaining = bytes.count
        var c = ~crc
        table.withUnsafeBufferPointer { t in
            while remaining >= 8 {
                let word = UInt64(littleEndian: pointer.loadUnaligned(as: UInt64.self))
                let low = UInt32(truncatingIfNeeded: word) ^ c
                let high = UInt32(truncatingIfNeeded: word >> 32)
                c =
                    t[7 * 256 + Int(low & 0xFF)] ^ t[6 * 256 + Int((low >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((low >> 16) & 0xFF)] ^ t[4 * 256 + Int(low >> 24)]
                    ^ t[3 * 256 + Int(high & 0xFF)] ^ t[2 * 256 + Int((high >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((high >> 16) & 0xFF)] ^ t[Int(high >> 24)]
                pointer += 8
                remaining -= 8
            }
            while remaining > 0 {
                c = t[Int((c ^ UInt32(pointer.load(as: UInt8.self))) & 0xFF)] ^ (c >> 8)
                pointer += 1
                remaining -= 1
            }
        }
        return ~c
    }

    /// The checksum of a byte array.
    public static func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, continuing: crc) }
    }
}
