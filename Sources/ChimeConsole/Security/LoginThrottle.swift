import ChimeTime

#if canImport(Glibc)
import Glibc
#endif

/// The failed sign-ins of each key (a client address, or an account name) in a sliding window,
/// for as many keys as fit: the part of ``LoginThrottle`` that counts.
///
/// A key holds at most `limit` failure times, so the memory is bounded by `capacity × limit`
/// instants. When a new key does not fit, the keys whose failures have all left the window go
/// first, then the key whose last failure is the oldest.
struct AttemptLog: Sendable {
    /// The failures a key may have in the window before it must wait.
    let limit: Int
    /// The window, in milliseconds.
    let window: Int64
    /// The most keys kept.
    let capacity: Int

    /// Each key's failure times within the window (or before it, until they are pruned), oldest first.
    private(set) var failures: [String: [Instant]] = [:]

    /// How many milliseconds `key` must wait before it may try again, or nil when it may now.
    func wait(_ key: String, now: Instant) -> Int64? {
        guard let times = failures[key] else { return nil }
        let recent = times.filter { inWindow($0, now: now) }
        guard recent.count >= limit else { return nil }
        // The attempt that frees a place is when the oldest failure that still counts leaves.
        return max(1, recent[recent.count - limit].milliseconds + window - now.milliseconds)
    }

    /// Counts a failure of `key` at `now`.
    mutating func record(_ key: String, now: Instant) {
        var times = failures[key] ?? []
        times.removeAll { !inWindow($0, now: now) }
        times.append(now)
        if times.count > limit { times.removeFirst(times.count - limit) }
        if failures[key] == nil, failures.count >= capacity { makeRoom(now: now) }
        failures[key] = times
    }

    /// Takes back one failure of `key` counted at `instant` (a sign-in that was counted before its
    /// password was checked, and succeeded).
    mutating func refund(_ key: String, at instant: Instant) {
        guard var times = failures[key], let index = times.lastIndex(of: instant) else { return }
        times.remove(at: index)
        failures[key] = times.isEmpty ? nil : times
    }

    /// Whether a failure at `time` still counts at `now`. A time after `now` (a clock that went
    /// back) counts.
    private func inWindow(_ time: Instant, now: Instant) -> Bool {
        now.milliseconds - time.milliseconds < window
    }

    /// Frees a place for one more key.
    private mutating func makeRoom(now: Instant) {
        failures = failures.filter { _, times in times.contains { inWindow($0, now: now) } }
        while failures.count >= capacity {
            let oldest = failures.min { $0.value.last!.milliseconds < $1.value.last!.milliseconds }!
            failures[oldest.key] = nil
        }
    }
}

/// The sign-in rate limit: at most ``ConsoleSessions/maximumFailuresPerAddress`` failed sign-ins
/// from one client address, and ``ConsoleSessions/maximumFailuresPerName`` for one account name,
/// in any ``ConsoleSessions/loginWindowMilliseconds``, each over at most
/// ``ConsoleSessions/maximumTrackedKeys`` keys.
///
/// An attempt is counted as a failure when it is admitted, before its password is checked, so that
/// attempts checked at the same time cannot all pass; one that succeeds is taken back. A success
/// does not clear the address's earlier failures: one valid account must not reset the count of
/// guesses at others.
struct LoginThrottle: Sendable {
    var addresses = AttemptLog(
        limit: ConsoleSessions.maximumFailuresPerAddress,
        window: ConsoleSessions.loginWindowMilliseconds,
        capacity: ConsoleSessions.maximumTrackedKeys
    )
    var names = AttemptLog(
        limit: ConsoleSessions.maximumFailuresPerName,
        window: ConsoleSessions.loginWindowMilliseconds,
        capacity: ConsoleSessions.maximumTrackedKeys
    )

    /// Admits an attempt and counts it, or says in how many whole seconds (at least 1) one may be made.
    mutating func admit(address: String, name: String, now: Instant) -> Int? {
        let nameKey = Self.nameKey(name)
        let wait = max(addresses.wait(address, now: now) ?? 0, nameKey.flatMap { names.wait($0, now: now) } ?? 0)
        guard wait == 0 else { return Int((wait + 999) / 1000) }
        addresses.record(address, now: now)
        if let nameKey { names.record(nameKey, now: now) }
        return nil
    }

    /// Takes back the attempt admitted at `instant`, which succeeded.
    mutating func succeeded(address: String, name: String, admittedAt instant: Instant) {
        addresses.refund(address, at: instant)
        if let nameKey = Self.nameKey(name) { names.refund(nameKey, at: instant) }
    }

    /// The key a name is counted under: itself when it could name an account (so at most 64
    /// bytes), else none: text that cannot be a name is not kept, and the address's count still
    /// applies to it.
    private static func nameKey(_ name: String) -> String? {
        ConsoleAccounts.isValidName(name) ? name : nil
    }

    /// The key a client address is counted under: an IPv4 address as itself, an IPv6 one by its
    /// /64 prefix (one host is commonly given a whole /64), an IPv4-mapped IPv6 one as IPv4, and any
    /// other text cut to 64 bytes.
    static func addressKey(_ address: String) -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        let text = address.hasPrefix("[") && address.hasSuffix("]") ? String(address.dropFirst().dropLast()) : address
        if text.utf8.count <= 64, inet_pton(AF_INET6, text, &bytes) == 1 {
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
                return bytes[12...].map { String($0) }.joined(separator: ".")
            }
            let groups = stride(from: 0, to: 8, by: 2).map {
                String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
            }
            return groups.joined(separator: ":") + "::/64"
        }
        return String(decoding: address.utf8.prefix(64), as: UTF8.self)
    }
}
