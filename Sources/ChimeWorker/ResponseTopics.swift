import ChimeCore

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
    /// - a level-two name starting with `$` other than `$worker` (no device id starts with `$`),
    ///   such as `P/$reply/{username}/...`, the deploy ACL's reply space for backends and tools.
    ///
    /// Topics outside the prefix are left to the broker's ACL. A Response Topic that is not honoured
    /// is replaced by `P/{deviceId}/replies`, so the command still gets its one reply.
    func acceptsResponseTopic(_ topic: String, forCommandOn deviceId: String) -> Bool {
        guard topic.hasPrefix(prefix + "/") else { return true }
        let rest = topic.dropFirst(prefix.count + 1)
        let owner = rest.prefix { $0 != "/" }
        if owner.hasPrefix("$") { return owner != "$worker" }
        guard owner == deviceId else { return false }
        let below = rest.dropFirst(owner.count)
        return below == "/replies" || below.hasPrefix("/replies/")
    }
}
