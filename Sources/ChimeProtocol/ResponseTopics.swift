extension Topics {
    /// Whether the reply to a command on `deviceId` may go to the MQTT 5 Response Topic `topic`.
    ///
    /// The broker's ACL must let chimed publish into every device's topics, so without this check
    /// a Response Topic would let a client make chimed publish where the client itself may not: a
    /// device could aim the reply to its own command at another device's `notifications` or
    /// `replies`, or at a worker's retained status. Under the prefix only two kinds of Response
    /// Topic are honoured:
    /// - the command's own device's replies topic or a topic below it (`P/{deviceId}/replies/...`),
    ///   which the deploy ACL lets that device read;
    /// - `P/$reply/{deviceId}/...`, the same device's space under `$reply`.
    ///
    /// Another `$reply/X/...` is refused: MQTT does not tell chimed who published a command, so
    /// honouring it would let any device write replies (with Correlation Data of its choosing) into
    /// the reply space of account X.
    ///
    /// Topics outside the prefix are left to the broker's ACL. A Response Topic that is not honoured
    /// is replaced by `P/{deviceId}/replies`, so the command still gets its one reply.
    public func acceptsResponseTopic(_ topic: String, forCommandOn deviceId: String) -> Bool {
        // On the UTF-8 bytes in place: every command with a Response Topic comes through here.
        var topic = topic
        var prefix = prefix
        var deviceId = deviceId
        return topic.withUTF8 { t in
            prefix.withUTF8 { p in deviceId.withUTF8 { d in Self.accepts(t, prefix: p, device: d) } }
        }
    }

    /// Whether `topic` holds a wildcard (`+` or `#`), which no publication may name.
    public static func hasWildcard(_ topic: String) -> Bool {
        var topic = topic
        return topic.withUTF8 { $0.contains { $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "#") } }
    }

    private static func accepts(
        _ t: UnsafeBufferPointer<UInt8>,
        prefix p: UnsafeBufferPointer<UInt8>,
        device d: UnsafeBufferPointer<UInt8>
    ) -> Bool {
        let slash = UInt8(ascii: "/")
        /// Whether `t` holds `s` at `i`.
        func has(_ s: UnsafeBufferPointer<UInt8>, at i: Int) -> Bool {
            guard i + s.count <= t.count else { return false }
            for k in 0..<s.count where t[i + k] != s[k] { return false }
            return true
        }
        func has(_ s: StaticString, at i: Int) -> Bool {
            s.withUTF8Buffer { has($0, at: i) }
        }
        guard has(p, at: 0), p.count < t.count, t[p.count] == slash else { return true }
        let owner = p.count + 1
        if has("$reply/", at: owner) {
            let device = owner + 7
            return has(d, at: device) && device + d.count < t.count && t[device + d.count] == slash
        }
        let below = owner + d.count
        guard has(d, at: owner), has("/replies", at: below) else { return false }
        return below + 8 == t.count || t[below + 8] == slash
    }
}
