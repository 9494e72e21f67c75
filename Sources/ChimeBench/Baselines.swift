import ChimeMQTT
import ChimeTime
import Dispatch
import Foundation

/// The broker's own ceiling, measured by two trivial programs on the same MQTT library as
/// chimed, run as separate processes so that their CPU time can be read like chimed's.
enum Baselines {
    /// `chime-bench relay URL PREFIX`: answers every command with a fixed reply, like chimed
    /// would (to the Response Topic with its Correlation Data, QoS 1), and does nothing else.
    static func relay(url: String, prefix: String) throws -> Never {
        var options = try MQTTOptions(url: url)
        options.clientId = "bench-relay"
        options.receiveMaximum = 65535
        options.maxInflight = 65535
        let reply = Array(#"{"ok":true,"op":"schedule","result":{"scheduled":[],"replaced":0}}"#.utf8)
        let filter = "\(prefix)/+/cmd/+"
        let holder = ClientHolder()
        let client = try MQTTClient(options: options) { event in
            switch event {
            case .connected:
                _ = try? holder.client?.subscribe(filter, qos: 1)
            case .message(let m):
                guard let topic = m.responseTopic else { return }
                var properties = MQTTPublishProperties()
                properties.correlationData = m.correlationData
                properties.contentType = "application/json"
                _ = try? holder.client?.publish(topic: topic, payload: reply, qos: 1, properties: properties)
            case .subscribed:
                FileHandle.standardOutput.write(Data("ready\n".utf8))
            default: break
            }
        }
        holder.client = client
        try client.start()
        dispatchMain()
    }

    /// `chime-bench pump URL PREFIX COUNT DEVICES`: publishes COUNT ready-made delivery payloads
    /// (QoS 1, the same size and properties as chimed's) as fast as PUBACKs allow, keeping up to
    /// 1000 unacknowledged, then exits.
    static func pump(url: String, prefix: String, count: Int, devices: Int) throws -> Never {
        var options = try MQTTOptions(url: url)
        options.clientId = "bench-pump"
        options.maxInflight = 1000
        let window = DispatchSemaphore(value: 1000)
        let acked = DispatchSemaphore(value: 0)
        let connected = DispatchSemaphore(value: 0)
        let client = try MQTTClient(options: options) { event in
            switch event {
            case .connected: connected.signal()
            case .published:
                window.signal()
                acked.signal()
            default: break
            }
        }
        try client.start()
        connected.wait()
        let now = Instant(milliseconds: wallMilliseconds())
        let topics = (0..<devices).map { "\(prefix)/bench-\($0)/notifications" }
        var properties = MQTTPublishProperties()
        properties.contentType = "application/json"
        for i in 0..<count {
            let device = "bench-\(i % devices)"
            let id = "n\(i)"
            let payload = Array(
                (#"{"deviceId":"\#(device)","id":"\#(id)","fireId":"\#(id)@\#(now)","occurrenceDate":"\#(now)","fireDate":"\#(now)","#
                    + #""firedAt":"\#(now)","occurrence":1,"last":true,"late":false,"missed":0,"deferred":false,"#
                    + #""alertBody":"\#(String(repeating: "x", count: 100))","userInfo":{"a":1,"b":"two","c":true}}"#)
                    .utf8
            )
            properties.userProperties = [MQTTUserProperty("fire-id", "\(id)@\(now)")]
            window.wait()
            while (try? client.publish(topic: topics[i % devices], payload: payload, qos: 1, properties: properties))
                == nil
            {
                usleep(10_000)
            }
        }
        for _ in 0..<count { acked.wait() }
        client.stop()
        exit(0)
    }
}

/// Lets the event handler reach its own client.
final class ClientHolder: @unchecked Sendable {
    // Set once before start(), read afterwards from the network thread only.
    var client: MQTTClient?
}
