import ChimeHTTPClient
import Testing

@Suite("AddressPolicy: every range, IPv6 and IPv4-mapped IPv6")
struct AddressPolicyTests {
    typealias Category = IPAddress.Category

    /// Addresses at the edges of each range, and just outside them, with the category each must be
    /// in: written out by hand, not derived from the implementation's table.
    static let golden: [(String, Category)] = [
        // IPv4
        ("0.0.0.0", .unspecified), ("0.1.2.3", .unspecified), ("0.255.255.255", .unspecified),
        ("1.0.0.0", .global), ("1.1.1.1", .global), ("8.8.8.8", .global), ("17.253.144.10", .global),
        ("9.255.255.255", .global), ("10.0.0.0", .private), ("10.255.255.255", .private), ("11.0.0.0", .global),
        ("100.63.255.255", .global), ("100.64.0.0", .private), ("100.127.255.255", .private),
        ("100.128.0.0", .global),
        ("126.255.255.255", .global), ("127.0.0.1", .loopback), ("127.0.0.0", .loopback),
        ("127.255.255.255", .loopback), ("128.0.0.0", .global),
        ("169.253.255.255", .global), ("169.254.0.0", .linkLocal), ("169.254.169.254", .linkLocal),
        ("169.254.255.255", .linkLocal), ("169.255.0.0", .global),
        ("172.15.255.255", .global), ("172.16.0.0", .private), ("172.31.255.255", .private),
        ("172.32.0.0", .global),
        ("192.0.0.0", .reserved), ("192.0.0.255", .reserved), ("192.0.1.0", .global), ("192.0.2.1", .reserved),
        ("192.0.3.0", .global), ("192.88.99.1", .reserved), ("192.167.255.255", .global),
        ("192.168.0.0", .private), ("192.168.255.255", .private), ("192.169.0.0", .global),
        ("198.17.255.255", .global), ("198.18.0.0", .private), ("198.19.255.255", .private),
        ("198.20.0.0", .global), ("198.51.100.7", .reserved), ("203.0.113.9", .reserved),
        ("203.0.114.0", .global),
        ("223.255.255.255", .global), ("224.0.0.0", .multicast), ("224.0.0.1", .multicast),
        ("239.255.255.255", .multicast), ("240.0.0.0", .reserved), ("255.255.255.254", .reserved),
        ("255.255.255.255", .broadcast),
        // IPv6
        ("::", .unspecified), ("::1", .loopback), ("::2", .reserved), ("::127.0.0.1", .reserved),
        ("::8.8.8.8", .reserved),
        ("::ffff:127.0.0.1", .loopback), ("::ffff:127.255.0.1", .loopback), ("::ffff:10.1.2.3", .private),
        ("::ffff:172.16.0.1", .private), ("::ffff:192.168.1.1", .private), ("::ffff:100.64.0.1", .private),
        ("::ffff:169.254.169.254", .linkLocal), ("::ffff:0.0.0.0", .unspecified),
        ("::ffff:224.0.0.1", .multicast), ("::ffff:255.255.255.255", .broadcast),
        ("::ffff:192.0.2.1", .reserved), ("::ffff:8.8.8.8", .global), ("::ffff:0:127.0.0.1", .reserved),
        ("64:ff9b::127.0.0.1", .loopback), ("64:ff9b::10.0.0.1", .private), ("64:ff9b::8.8.8.8", .global),
        ("64:ff9b:1::1", .private), ("64:ff9b:1:ffff::1", .private),
        ("2002:7f00:1::1", .loopback), ("2002:a9fe:a9fe::", .linkLocal), ("2002:808:808::1", .global),
        ("100::1", .reserved), ("100::ffff:ffff:ffff:ffff", .reserved), ("100:0:0:1::", .reserved),
        ("2001::1", .reserved), ("2001:0:ffff::1", .reserved), ("2001:db8::1", .reserved),
        ("2001:db8:ffff::1", .reserved), ("2001:db9::1", .global), ("2001:4860:4860::8888", .global),
        ("1fff:ffff::1", .reserved), ("2000::", .global), ("2606:4700::1111", .global),
        ("2a00:1450:4001::200e", .global), ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", .global),
        ("4000::1", .reserved), ("fbff::1", .reserved),
        ("fc00::", .private), ("fd00:ec2::254", .private), ("fdff:ffff::1", .private),
        ("fe7f::1", .reserved), ("fe80::", .linkLocal), ("fe80::1", .linkLocal), ("febf:ffff::1", .linkLocal),
        ("fec0::1", .private), ("feff::1", .private),
        ("ff00::", .multicast), ("ff02::1", .multicast), ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", .multicast),
    ]

    @Test(arguments: golden)
    func category(_ text: String, _ expected: Category) throws {
        let address = try #require(IPAddress(text), "\(text) does not parse")
        #expect(address.category == expected, "\(text)")
    }

    /// One representative of each category, for the policy table.
    static let representatives: [Category: String] = [
        .global: "93.184.216.34", .loopback: "127.0.0.1", .private: "10.0.0.1", .linkLocal: "169.254.169.254",
        .unspecified: "0.0.0.0", .multicast: "224.0.0.1", .broadcast: "255.255.255.255", .reserved: "240.0.0.1",
    ]

    @Test("the representatives are in their categories, and every category has one")
    func representativesCoverEveryCategory() throws {
        #expect(Set(Self.representatives.keys) == Set(Category.allCases))
        for (category, text) in Self.representatives {
            #expect(try #require(IPAddress(text)).category == category)
        }
    }

    @Test(
        "what each policy allows",
        arguments: [
            (AddressPolicy.publicOnly, Set<Category>([.global])),
            (AddressPolicy(allowLoopback: true), Set<Category>([.global, .loopback])),
            (AddressPolicy(allowPrivate: true), Set<Category>([.global, .private])),
            (AddressPolicy(allowLoopback: true, allowPrivate: true), Set<Category>([.global, .loopback, .private])),
        ]
    )
    func policy(_ policy: AddressPolicy, allowed: Set<Category>) throws {
        for category in Category.allCases {
            let v4 = try #require(IPAddress(Self.representatives[category]!))
            #expect(policy.allows(v4) == allowed.contains(category), "\(category) \(v4)")
            // The same address written as IPv4-mapped IPv6, as a dual-stack resolver may return it.
            let mapped = try #require(IPAddress("::ffff:\(v4)"))
            #expect(policy.allows(mapped) == allowed.contains(category), "\(category) \(mapped)")
        }
    }

    @Test("IPv6 loopback, private and link-local under each policy")
    func ipv6Policy() throws {
        let loopback = try #require(IPAddress("::1"))
        let uniqueLocal = try #require(IPAddress("fd12:3456::1"))
        let linkLocal = try #require(IPAddress("fe80::1"))
        let global = try #require(IPAddress("2a00:1450:4001::200e"))
        #expect(!AddressPolicy.publicOnly.allows(loopback))
        #expect(!AddressPolicy.publicOnly.allows(uniqueLocal))
        #expect(AddressPolicy.publicOnly.allows(global))
        #expect(AddressPolicy(allowLoopback: true).allows(loopback))
        #expect(!AddressPolicy(allowLoopback: true).allows(uniqueLocal))
        #expect(AddressPolicy(allowPrivate: true).allows(uniqueLocal))
        #expect(!AddressPolicy(allowPrivate: true).allows(loopback))
        #expect(!AddressPolicy(allowLoopback: true, allowPrivate: true).allows(linkLocal))
    }

    @Test(
        "text that is not exactly one address does not parse",
        arguments: [
            "", "localhost", "127.1", "2130706433", "0x7f.0.0.1", "127.0.0.1.", "1.2.3.4.5", "256.0.0.1", "[::1]",
            "::1%lo", "fe80::1%eth0", ":::", "1:2:3:4:5:6:7:8:9", " 127.0.0.1",
        ]
    )
    func notAnAddress(_ text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test("bytes and text round-trip")
    func bytes() throws {
        #expect(IPAddress(bytes: [127, 0, 0, 1]) == .v4(0x7F00_0001))
        #expect(IPAddress(bytes: [1, 2, 3]) == nil)
        #expect(IPAddress(bytes: [UInt8](repeating: 0, count: 17)) == nil)
        let mapped = try #require(IPAddress("::ffff:127.0.0.1"))
        #expect(mapped.bytes == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1])
        #expect(IPAddress(bytes: mapped.bytes) == mapped)
        #expect(mapped.description == "::ffff:127.0.0.1")
        #expect(try #require(IPAddress("2001:DB8:0:0::1")).description == "2001:db8::1")
        #expect(try #require(IPAddress("10.20.30.40")).description == "10.20.30.40")
        #expect(try #require(IPAddress("10.20.30.40")).bytes == [10, 20, 30, 40])
    }
}
