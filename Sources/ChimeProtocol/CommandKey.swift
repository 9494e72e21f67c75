/// What makes two commands the same command, for telling an MQTT redelivery (or a client's retry)
/// from a new command (PROTOCOL.md section 4, "Idempotency").
///
/// A 64-bit FNV-1a digest of the operation, the payload and the MQTT 5 Correlation Data; when the
/// command carries neither a `requestId` nor Correlation Data, also of the MQTT packet identifier,
/// which a broker keeps when it sends a message again. The digest is stored in the journal, so it
/// must never change between versions: it is not Swift's (per-process seeded) `Hasher`.
public struct CommandKey: Hashable, Sendable, CustomStringConvertible {
    public var value: UInt64

    public init(_ value: UInt64) { self.value = value }

    /// The key of a command as it arrived, or nil when a redelivery cannot be told from a new
    /// command: QoS 0 without `requestId` or Correlation Data (a broker never sends QoS 0 twice,
    /// and every such message has packet identifier 0).
    public static func of(
        op: String,
        payload: [UInt8],
        correlationData: [UInt8]?,
        hasRequestId: Bool,
        packetId: Int32,
        qos: Int
    ) -> CommandKey? {
        let keyed = hasRequestId || correlationData != nil
        guard keyed || qos > 0 else { return nil }
        var h = FNV1a()
        h.add(op.utf8)
        h.add(0)
        h.add(payload)
        h.add(correlationData == nil ? 0 : 1)
        h.add(correlationData ?? [])
        if !keyed { withUnsafeBytes(of: packetId.littleEndian) { h.add($0) } }
        return CommandKey(h.value)
    }

    /// Sixteen hex digits, as the journal stores it.
    public var description: String {
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    public init?(hex: String) {
        guard hex.utf8.count == 16, let v = UInt64(hex, radix: 16) else { return nil }
        value = v
    }
}

private struct FNV1a {
    var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ byte: UInt8) {
        value = (value ^ UInt64(byte)) &* 0x100_0000_01b3
    }

    mutating func add<S: Sequence<UInt8>>(_ bytes: S) {
        for b in bytes { add(b) }
    }
}
