/// The operations a client may publish to `P/{deviceId}/cmd/{op}`.
public enum Operation: String, Hashable, Sendable, CaseIterable {
    case schedule, update, cancel, pause, resume, list, preview, device, snooze, ack, inbox, history

    /// Whether the operation can change state (and so must not be applied twice). A `device`,
    /// `cancel` or `ack` that changes nothing is not journaled, so it is never taken for a duplicate.
    public var changesState: Bool { self != .list && self != .preview && self != .inbox && self != .history }

    /// Each operation by its name: one hash of the topic's last level, where `init(rawValue:)`
    /// compares it with every name in turn.
    static let named = Dictionary(uniqueKeysWithValues: allCases.map { ($0.rawValue, $0) })
}

/// Device ids: 1 to 128 characters from `A-Z a-z 0-9 _ . : @ -`, not starting with `$`.
public enum DeviceID {
    public static func isValid(_ id: Substring) -> Bool {
        var id = id
        return id.withUTF8 { isValid($0) }
    }

    public static func isValid(_ id: String) -> Bool { isValid(id[...]) }

    /// Also refuses a leading `$`, which no character allowed here is.
    static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard (1...128).contains(bytes.count) else { return false }
        for b in bytes {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"),
                UInt8(ascii: "@"), UInt8(ascii: "-"):
                continue
            default:
                return false
            }
        }
        return true
    }
}

/// The topics of PROTOCOL.md section 1 under one prefix.
public struct Topics: Hashable, Sendable {
    public let prefix: String

    public init(prefix: String) { self.prefix = prefix }

    /// What the worker subscribes to: every device's commands.
    public var commandFilter: String { "\(prefix)/+/cmd/+" }
    /// Routing by slot (`--routing slot`): the same commands through one shared subscription of all
    /// workers, so that each command reaches one of them. `group` is the store's secret group name:
    /// a client that joined the group would take a share of every device's commands.
    public func sharedCommandFilter(group: String) -> String { "$share/\(group)/\(prefix)/+/cmd/+" }
    /// Routing by slot: the commands forwarded to the owner of `slot`, which it alone subscribes to.
    public func slotCommandFilter(_ slot: Int) -> String { "\(prefix)/$slot/\(slot)/+/cmd/+" }
    /// Routing by slot: a command's topic `P/{deviceId}/cmd/{op}` as forwarded to the owner of
    /// `slot`: `P/$slot/{slot}/{deviceId}/cmd/{op}`.
    public func forwarded(_ commandTopic: String, toSlot slot: Int) -> String {
        let rest = commandTopic.utf8.index(commandTopic.startIndex, offsetBy: prefix.utf8.count)
        return "\(prefix)/$slot/\(slot)\(commandTopic[rest...])"
    }
    public func command(_ deviceId: String, _ op: Operation) -> String { "\(prefix)/\(deviceId)/cmd/\(op.rawValue)" }
    public func notifications(_ deviceId: String) -> String { "\(prefix)/\(deviceId)/notifications" }
    public func replies(_ deviceId: String) -> String { "\(prefix)/\(deviceId)/replies" }
    public func workerStatus(_ workerId: String) -> String { "\(prefix)/$worker/\(workerId)/status" }
    public func workerStats(_ workerId: String) -> String { "\(prefix)/$worker/\(workerId)/stats" }

    /// What a worker publishes about itself.
    public enum WorkerTopic: String, Hashable, Sendable {
        case status, stats
    }

    /// `P/$worker/{workerId}/status` or `P/$worker/{workerId}/stats` taken apart; nil for any other
    /// topic.
    public func parseWorkerTopic(_ topic: String) -> (workerId: String, kind: WorkerTopic)? {
        let base = prefix + "/$worker/"
        guard topic.hasPrefix(base) else { return nil }
        let parts = topic.dropFirst(base.count).split(separator: "/")
        guard parts.count == 2, let kind = WorkerTopic(rawValue: String(parts[1])) else { return nil }
        return (String(parts[0]), kind)
    }

    /// A command topic taken apart. `deviceId` and `op` are what the topic says, valid or not, so
    /// that an error can still be addressed; `problem` says what is wrong with them, if anything.
    public struct CommandAddress: Hashable, Sendable {
        public var deviceId: String
        public var opName: String
        public var op: Operation?
        public var problem: ChimeError?
        /// The slot in `P/$slot/{slot}/{deviceId}/cmd/{op}`: a command another worker forwarded to
        /// this slot's owner. nil on a device's own command topic.
        public var forwardedSlot: Int?
    }

    /// Parses `prefix/{deviceId}/cmd/{op}`, or a forwarded `prefix/$slot/{slot}/{deviceId}/cmd/{op}`;
    /// nil when the topic is not a command topic at all.
    /// Every command goes through it: it reads the topic's UTF-8 bytes once, in place, without
    /// splitting it (through `String.UTF8View` indices it cost 2,800 instructions a command).
    public func parseCommand(_ topic: String) -> CommandAddress? {
        var topic = topic
        var prefix = prefix
        return topic.withUTF8 { bytes in prefix.withUTF8 { Self.parseCommand(bytes, prefix: $0) } }
    }

    private static func parseCommand(
        _ bytes: UnsafeBufferPointer<UInt8>,
        prefix: UnsafeBufferPointer<UInt8>
    ) -> CommandAddress? {
        let slash = UInt8(ascii: "/")
        func text(_ range: Range<Int>) -> String {
            String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
        }
        func matches(_ expected: UnsafeBufferPointer<UInt8>, at i: Int) -> Bool {
            guard i + expected.count <= bytes.count else { return false }
            for k in 0..<expected.count where bytes[i + k] != expected[k] { return false }
            return true
        }
        guard bytes.count > prefix.count, bytes[prefix.count] == slash, matches(prefix, at: 0) else { return nil }
        var i = prefix.count + 1
        var forwardedSlot: Int?
        // A device id never starts with $: `$slot/{slot}/` is a forwarded command's.
        if i < bytes.count, bytes[i] == UInt8(ascii: "$"), let (slot, next) = slotSegment(bytes, from: i) {
            (forwardedSlot, i) = (slot, next)
        }
        let deviceStart = i
        while i < bytes.count, bytes[i] != slash { i += 1 }
        let device = deviceStart..<i
        let cmd: StaticString = "/cmd/"
        guard cmd.withUTF8Buffer({ matches($0, at: i) }) else { return nil }
        i += cmd.utf8CodeUnitCount
        let opStart = i
        while i < bytes.count {
            guard bytes[i] != slash else { return nil }
            i += 1
        }
        let opName = text(opStart..<bytes.count)
        let op = Operation.named[opName]
        let deviceId = text(device)
        var problem: ChimeError?
        if !DeviceID.isValid(UnsafeBufferPointer(rebasing: bytes[device])) {
            problem = ChimeError(
                .invalidArgument,
                field: "deviceId",
                "deviceId: \"\(deviceId.prefix(140))\" is not 1 to 128 characters of A-Z a-z 0-9 _ . : @ -"
            )
        } else if op == nil {
            let known = Operation.allCases.map(\.rawValue).joined(separator: ", ")
            problem = ChimeError(
                .invalidArgument,
                field: "op",
                "op: unknown operation \"\(opName.prefix(64))\"; one of \(known)"
            )
        }
        return CommandAddress(
            deviceId: deviceId,
            opName: opName,
            op: op,
            problem: problem,
            forwardedSlot: forwardedSlot
        )
    }

    /// Reads `$slot/{slot}/` at `start`: the slot (1 to 5 digits) and the index after the segment.
    private static func slotSegment(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> (Int, Int)? {
        var i = start
        for c in "$slot/".utf8 {
            guard i < bytes.count, bytes[i] == c else { return nil }
            i += 1
        }
        var slot = 0
        var digits = 0
        while i < bytes.count, bytes[i] != UInt8(ascii: "/") {
            guard digits < 5, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) else { return nil }
            slot = slot * 10 + Int(bytes[i] - UInt8(ascii: "0"))
            digits += 1
            i += 1
        }
        guard digits > 0, i < bytes.count else { return nil }
        return (slot, i + 1)
    }
}

/// Which devices a worker serves: `crc32(deviceId) mod count == index` (PROTOCOL.md section 6).
public struct Partition: Hashable, Sendable, CustomStringConvertible {
    public let index: UInt32
    public let count: UInt32

    public static let all = Partition(index: 0, count: 1)

    public init(index: UInt32, count: UInt32) {
        precondition(count > 0 && index < count)
        self.index = index
        self.count = count
    }

    /// Parses `k/N` with 0 ≤ k < N.
    public init?(parsing text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let k = UInt32(parts[0]), let n = UInt32(parts[1]), n > 0, k < n else { return nil }
        self.init(index: k, count: n)
    }

    public func owns(_ deviceId: String) -> Bool {
        deviceBucket(deviceId, among: count) == index
    }

    public var description: String { "\(index)/\(count)" }
}

/// A device's bucket among `count`: `crc32(UTF-8 of deviceId) mod count`, the one function that places
/// a device in a partition (`--partition k/N`) or a slot (`--slots S`) (PROTOCOL.md section 6).
public func deviceBucket(_ deviceId: String, among count: UInt32) -> UInt32 {
    count == 1 ? 0 : crc32(Array(deviceId.utf8)) % count
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`), used to partition devices.
public func crc32(_ bytes: [UInt8]) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    for b in bytes {
        crc = crc32Table[Int((crc ^ UInt32(b)) & 0xFF)] ^ (crc >> 8)
    }
    return crc ^ 0xFFFF_FFFF
}

private let crc32Table: [UInt32] = (0..<256).map { n in
    var c = UInt32(n)
    for _ in 0..<8 {
        c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1
    }
    return c
}
