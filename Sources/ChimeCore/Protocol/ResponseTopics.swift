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
        // On UTF-8 bytes: every command with a Response Topic comes through here.
        var rest = topic.utf8[...]
        guard rest.starts(with: prefix.utf8), rest.dropFirst(prefix.utf8.count).first == UInt8(ascii: "/") else {
            return true
        }
        rest = rest.dropFirst(prefix.utf8.count + 1)
        let owner = rest.prefix { $0 != UInt8(ascii: "/") }
        var below = rest.dropFirst(owner.count)
        if owner.elementsEqual("$reply".utf8) {
            guard below.first == UInt8(ascii: "/") else { return false }
            below = below.dropFirst()
            return below.starts(with: deviceId.utf8) && below.dropFirst(deviceId.utf8.count).first == UInt8(ascii: "/")
        }
        guard owner.elementsEqual(deviceId.utf8), below.starts(with: "/replies".utf8) else { return false }
        let after = below.dropFirst("/replies".utf8.count)
        return after.isEmpty || after.first == UInt8(ascii: "/")
    }
}
