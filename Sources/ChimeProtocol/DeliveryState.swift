/// What became of a delivery, as `history` shows it.
public enum DeliveryState: String, Hashable, Sendable {
    /// In the inbox, waiting for the device's `ack`.
    case unacknowledged
    case acknowledged
    /// Left the inbox unacknowledged: `expiresAfter` or `--inbox-ttl` passed.
    case expired
    /// Left the inbox unacknowledged to make room (`--max-inbox-per-device`).
    case dropped
    /// Delivered to a device without receipts (history only).
    case delivered
}

/// What became of a delivery on MQTT, as `history` shows it.
public enum MQTTOutcome: String, Hashable, Sendable {
    /// Published, and the broker acknowledged it (section 5: what a delivery counts as done at).
    case acknowledged
    /// Not published over MQTT: `channels: "push"` to a device with push registrations.
    case none
}
