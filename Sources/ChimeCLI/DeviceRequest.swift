import ChimeCore
import ChimeSupport

/// What every command addressed to one device shares: the connection, `--device`, `--raw`, and
/// the open-send-print sequence.
struct DeviceRequest: Sendable {
    /// `--raw`: print the reply's `result` as JSON instead of the readable form.
    static let rawSpec = Flags.Spec("raw", value: false, env: false, "print the reply's result as JSON")

    let connection: ConnectionOptions
    let device: String
    let raw: Bool

    /// Reads the connection flags, `--device` (required) and `--raw`.
    /// - Parameter positional: the command reads positional arguments itself (`ack`'s fireIds);
    ///   otherwise one is a usage mistake.
    init(_ flags: Flags, positional: Bool = false) throws(UsageError) {
        if !positional { try flags.expectNoPositional() }
        connection = try ConnectionOptions(flags)
        device = try ConnectionOptions.device(flags)
        raw = flags.isSet("raw")
    }

    /// Connects, sends one command and prints its result: as JSON with `--raw` (as chimed sent it),
    /// else through `show`, which may use the connection for more (reading the device's zone).
    func send(
        _ op: ChimeCore.Operation,
        _ payload: JSONObject,
        _ console: Console,
        show: (Connection, ReplyResult) async throws(CLIFailure) -> Void
    ) async throws(CLIFailure) {
        let broker = try await Connection.open(connection)
        defer { broker.close() }
        let result = try await broker.send(op, device: device, payload)
        if raw {
            console.exact(JSON.object(result).text)
        } else {
            try await show(broker, try Connection.typed(op, result))
        }
    }
}

extension DeviceRequest {
    /// Sends `op` (`schedule`, `update`) with the notification the flags describe, completed for
    /// now in the device's zone when it needs it (`--at HH:MM`, `--times`), or without flags the
    /// `--json` payload as it is. Prints the result as JSON with `--raw`; else hands `show` the
    /// typed result and the zone to show times in (the named one, else the device's).
    func send(
        _ op: ChimeCore.Operation,
        _ notification: NotificationFlags?,
        json payload: JSONObject = [:],
        namedZone: Zone?,
        _ console: Console,
        show: (ReplyResult, Zone?) -> Void
    ) async throws(CLIFailure) {
        let broker = try await Connection.open(connection)
        defer { broker.close() }
        let needed = notification?.needsDeviceZone ?? false
        let deviceZone = namedZone == nil && (needed || !raw) ? try await broker.deviceZone(device) : nil
        let payload =
            try notification?.payload(
                now: wallClock(),
                deviceZone: deviceZone,
                missingZone: NotificationFlags.missingZone(device)
            ) ?? payload
        let result = try await broker.send(op, device: device, payload)
        if raw {
            console.exact(JSON.object(result).text)
        } else {
            show(try Connection.typed(op, result), namedZone ?? deviceZone)
        }
    }
}

extension Flags {
    /// - Throws: ``UsageError`` naming the first positional argument, if there is one.
    func expectNoPositional() throws(UsageError) {
        if let extra = positional.first { throw UsageError("unexpected argument \"\(extra)\"") }
    }
}
