#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 address, without port or zone.
public enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// `a.b.c.d` as `a << 24 | b << 16 | c << 8 | d`.
    case v4(UInt32)
    /// The 128 bits, the first written byte most significant.
    case v6(UInt128)

    /// Parses a dotted quad (`192.0.2.1`, exactly four decimal parts) or an IPv6 address in its
    /// text form (`2001:db8::1`, `::ffff:127.0.0.1`), without brackets or a zone; nil otherwise.
    public init?(_ text: String) {
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            self.init(bytes: withUnsafeBytes(of: &v6) { Array($0) })
            return
        }
        var v4 = in_addr()
        guard inet_pton(AF_INET, text, &v4) == 1 else { return nil }
        self.init(bytes: withUnsafeBytes(of: &v4) { Array($0) })
    }

    /// The address in network byte order: 4 bytes (IPv4) or 16 (IPv6); nil for another count.
    public init?(bytes: some Collection<UInt8>) {
        switch bytes.count {
        case 4: self = .v4(bytes.reduce(0) { $0 << 8 | UInt32($1) })
        case 16: self = .v6(bytes.reduce(0) { $0 << 8 | UInt128($1) })
        default: return nil
        }
    }

    /// The address in network byte order (4 or 16 bytes).
    public var bytes: [UInt8] {
        switch self {
        case .v4(let value): (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
        case .v6(let value): (0..<16).map { UInt8(truncatingIfNeeded: value >> (120 - 8 * $0)) }
        }
    }

    /// The conventional text form (`inet_ntop`): `127.0.0.1`, `::ffff:127.0.0.1`, `2001:db8::1`.
    public var description: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = if case .v4 = self { AF_INET } else { AF_INET6 }
        let converted = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        guard converted != nil else { return "?" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Where an address leads, as far as an outgoing connection is concerned.
    public enum Category: String, Hashable, Sendable, CaseIterable {
        /// Globally routable unicast: what push services and Web Push endpoints are.
        case global
        /// This host: `127.0.0.0/8`, `::1`.
        case loopback
        /// Networks of one organisation: RFC 1918 (`10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`),
        /// carrier-grade NAT (`100.64.0.0/10`), benchmarking (`198.18.0.0/15`), unique local IPv6
        /// (`fc00::/7`), deprecated site-local IPv6 (`fec0::/10`), local-use NAT64 (`64:ff9b:1::/48`).
        case `private`
        /// `169.254.0.0/16`, `fe80::/10`: where cloud metadata services answer (169.254.169.254).
        case linkLocal
        /// `0.0.0.0/8`, `::`: connecting to them reaches this host on Linux.
        case unspecified
        /// `224.0.0.0/4`, `ff00::/8`.
        case multicast
        /// `255.255.255.255`.
        case broadcast
        /// Neither routable nor assigned to hosts: documentation (`192.0.2.0/24`,
        /// `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`), IETF protocol assignments
        /// (`192.0.0.0/24`), the 6to4 relay (`192.88.99.0/24`), `240.0.0.0/4`, IPv4-compatible IPv6
        /// (`::a.b.c.d`), Teredo (`2001::/32`), discard-only (`100::/64`), and every IPv6 address
        /// outside `2000::/3` that no other category names.
        case reserved
    }

    /// The address's category. IPv6 forms that carry an IPv4 address to which traffic may be
    /// translated (IPv4-mapped `::ffff:0:0/96`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) take the
    /// category of that IPv4 address: `::ffff:127.0.0.1` is loopback.
    public var category: Category {
        switch self {
        case .v4(let value):
            return Self.v4Ranges.first { $0.contains(value) }?.category ?? .global
        case .v6(let value):
            if let embedded = Self.embeddedIPv4(value) {
                return IPAddress.v4(embedded).category
            }
            return Self.v6Ranges.first { $0.contains(value) }?.category ?? .reserved
        }
    }

    /// The IPv4 address an IPv6 address carries in one of the translated forms, if it is one.
    private static func embeddedIPv4(_ value: UInt128) -> UInt32? {
        if mapped.contains(value) || nat64.contains(value) { return UInt32(truncatingIfNeeded: value) }
        if sixToFour.contains(value) { return UInt32(truncatingIfNeeded: value >> 80) }
        return nil
    }

    /// `::ffff:a.b.c.d`: IPv4-mapped, how a dual-stack socket writes an IPv4 peer.
    private static let mapped = v6("::ffff:0:0", 96)
    /// `64:ff9b::a.b.c.d`: the well-known NAT64 prefix.
    private static let nat64 = v6("64:ff9b::", 96)
    /// `2002:aabb:ccdd::/48`: 6to4, the IPv4 address in the 32 bits after the prefix.
    private static let sixToFour = v6("2002::", 16)

    /// A prefix of `bits` bits and the category of the addresses in it.
    private struct Prefix<Value: FixedWidthInteger & UnsignedInteger & Sendable>: Sendable {
        let prefix: Value
        let mask: Value
        let category: Category

        init(_ prefix: Value, bits: Int, _ category: Category) {
            self.mask = bits == 0 ? 0 : ~Value(0) << (Value.bitWidth - bits)
            self.prefix = prefix & mask
            self.category = category
        }

        func contains(_ value: Value) -> Bool { value & mask == prefix }
    }

    /// `text/bits`, for the tables (whose texts are all IPv4).
    private static func v4(_ text: String, _ bits: Int, _ category: Category) -> Prefix<UInt32> {
        guard case .v4(let value) = IPAddress(text) else { preconditionFailure("not IPv4: \(text)") }
        return Prefix(value, bits: bits, category)
    }

    /// `text/bits`, for the tables (whose texts are all IPv6).
    private static func v6(_ text: String, _ bits: Int, _ category: Category = .reserved) -> Prefix<UInt128> {
        guard case .v6(let value) = IPAddress(text) else { preconditionFailure("not IPv6: \(text)") }
        return Prefix(value, bits: bits, category)
    }

    /// Every IPv4 range that is not global; the first that contains an address decides.
    private static let v4Ranges: [Prefix<UInt32>] = [
        v4("0.0.0.0", 8, .unspecified),
        v4("10.0.0.0", 8, .private),
        v4("100.64.0.0", 10, .private),  // carrier-grade NAT
        v4("127.0.0.0", 8, .loopback),
        v4("169.254.0.0", 16, .linkLocal),
        v4("172.16.0.0", 12, .private),
        v4("192.0.0.0", 24, .reserved),  // IETF protocol assignments
        v4("192.0.2.0", 24, .reserved),  // documentation
        v4("192.88.99.0", 24, .reserved),  // 6to4 relay anycast
        v4("192.168.0.0", 16, .private),
        v4("198.18.0.0", 15, .private),  // benchmarking
        v4("198.51.100.0", 24, .reserved),  // documentation
        v4("203.0.113.0", 24, .reserved),  // documentation
        v4("224.0.0.0", 4, .multicast),
        v4("255.255.255.255", 32, .broadcast),
        v4("240.0.0.0", 4, .reserved),
    ]

    /// The IPv6 ranges after the translated forms; the first that contains an address decides,
    /// and an address in none is reserved.
    private static let v6Ranges: [Prefix<UInt128>] = [
        v6("::", 128, .unspecified),
        v6("::1", 128, .loopback),
        v6("::", 96, .reserved),  // IPv4-compatible ::a.b.c.d (deprecated)
        v6("64:ff9b:1::", 48, .private),  // local-use NAT64
        v6("100::", 64, .reserved),  // discard-only
        v6("2001:db8::", 32, .reserved),  // documentation
        v6("2001::", 32, .reserved),  // Teredo
        v6("2000::", 3, .global),  // global unicast
        v6("fc00::", 7, .private),  // unique local
        v6("fe80::", 10, .linkLocal),
        v6("fec0::", 10, .private),  // site-local (deprecated)
        v6("ff00::", 8, .multicast),
    ]
}

/// Which addresses the client may connect to: checked on the address each connection is actually
/// made to (after DNS, so a name that resolves, or later re-resolves, to a refused address is
/// refused: no DNS rebinding), and on a literal address in the URL before anything is sent.
///
/// Global unicast addresses are always allowed. Loopback and private networks only when allowed
/// here. Link-local, unspecified, multicast, broadcast and reserved addresses are refused whatever
/// the policy: link-local is where cloud metadata services answer (169.254.169.254), `0.0.0.0`
/// reaches this host, and the rest are no host's address. IPv6 forms that carry an IPv4 address
/// are judged by that address (``IPAddress/category``).
public struct AddressPolicy: Hashable, Sendable {
    /// Allow `127.0.0.0/8` and `::1` (and `::ffff:127.0.0.0/104`): for tests and a local relay.
    public var allowLoopback: Bool
    /// Allow the ``IPAddress/Category/private`` ranges: for a push relay inside one's own network.
    /// This includes AWS's IPv6 metadata address `fd00:ec2::254` (in `fc00::/7`).
    public var allowPrivate: Bool

    public init(allowLoopback: Bool = false, allowPrivate: Bool = false) {
        self.allowLoopback = allowLoopback
        self.allowPrivate = allowPrivate
    }

    /// Global unicast addresses only: the default, for servers on the internet.
    public static let publicOnly = AddressPolicy()

    /// Whether a connection to `address` is allowed. Pure.
    public func allows(_ address: IPAddress) -> Bool {
        switch address.category {
        case .global: true
        case .loopback: allowLoopback
        case .private: allowPrivate
        case .linkLocal, .unspecified, .multicast, .broadcast, .reserved: false
        }
    }
}
