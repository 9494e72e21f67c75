/// The largest per-device limits chimed accepts (`--max-pending-per-device`,
/// `--max-inbox-per-device`), whatever a worker is configured with. chimed checks its flags against
/// them; the CLI derives from them how many pages of `list` and `inbox` a worker can send at most,
/// so that a reply whose cursor never ends stops the pager instead of looping (PROTOCOL.md 3.8).
public enum DeviceLimits {
    /// The largest `--max-pending-per-device`: notifications one device may hold.
    public static let maxPendingPerDevice = 100_000_000
    /// The largest `--max-inbox-per-device`: unacknowledged deliveries one inbox holds.
    public static let maxInboxPerDevice = 100_000
}
