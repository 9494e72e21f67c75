import Testing

@testable import ChimeMQTT

@Suite("MQTTOptions(url:)")
struct MQTTOptionsTests {
    struct Valid: Sendable, CustomTestStringConvertible {
        let url: String
        let host: String
        let port: Int
        let tls: Bool
        var username: String? = nil
        var password: String? = nil
        var testDescription: String { url }
    }

    static let valid: [Valid] = [
        Valid(url: "mqtt://localhost", host: "localhost", port: 1883, tls: false),
        Valid(url: "mqtt://127.0.0.1:1884", host: "127.0.0.1", port: 1884, tls: false),
        Valid(url: "mqtt://broker.example.com:1883/", host: "broker.example.com", port: 1883, tls: false),
        Valid(url: "MQTT://Broker:1", host: "Broker", port: 1, tls: false),
        Valid(url: "mqtts://broker.example.com", host: "broker.example.com", port: 8883, tls: true),
        Valid(url: "mqtts://broker.example.com:443", host: "broker.example.com", port: 443, tls: true),
        Valid(url: "mqtt://worker@host", host: "host", port: 1883, tls: false, username: "worker"),
        Valid(
            url: "mqtt://worker:s3cret@host:65535",
            host: "host",
            port: 65535,
            tls: false,
            username: "worker",
            password: "s3cret"
        ),
        Valid(
            url: "mqtts://us%40er:p%3Ass%40w%2Fd@host",
            host: "host",
            port: 8883,
            tls: true,
            username: "us@er",
            password: "p:ss@w/d"
        ),
        Valid(url: "mqtt://user:@host", host: "host", port: 1883, tls: false, username: "user", password: ""),
        Valid(url: "mqtt://[::1]", host: "::1", port: 1883, tls: false),
        Valid(url: "mqtt://[::1]:1999", host: "::1", port: 1999, tls: false),
    ]

    @Test("parses", arguments: valid)
    func parses(_ expected: Valid) throws {
        let options = try MQTTOptions(url: expected.url)
        #expect(options.host == expected.host)
        #expect(options.port == expected.port)
        #expect(options.useTLS == expected.tls)
        #expect(options.username == expected.username)
        #expect(options.password == expected.password)
        #expect(options.protocolVersion == .v5)
        #expect(options.keepAlive == 30)
        #expect(options.reconnectDelay == .milliseconds(500) ... .seconds(5))
    }

    static let invalid: [(url: String, mentions: String)] = [
        ("localhost:1883", "expected mqtt://"),
        ("", "expected mqtt://"),
        ("http://localhost", "unsupported scheme 'http'"),
        ("ws://localhost:9001", "unsupported scheme 'ws'"),
        ("mqtt://", "host is empty"),
        ("mqtt://:1883", "host is empty"),
        ("mqtt://host:", "port"),
        ("mqtt://host:0", "port"),
        ("mqtt://host:65536", "port"),
        ("mqtt://host:-1", "port"),
        ("mqtt://host:12ab", "port"),
        ("mqtt://host/chime", "after the host"),
        ("mqtt://host:1883?x=1", "after the host"),
        ("mqtt://host#frag", "after the host"),
        ("mqtt://@host", "user name"),
        ("mqtt://us%4:pw@host", "percent"),
        ("mqtt://::1", "brackets"),
        ("mqtt://[::1", "unclosed"),
        ("mqtt://[::1]x", "':port'"),
        ("mqtt://my host", "not a host name"),
    ]

    @Test("rejects with a message naming the problem", arguments: invalid)
    func rejects(url: String, mentions: String) {
        let error = #expect(throws: MQTTError(.invalidArgument)) {
            try MQTTOptions(url: url)
        }
        #expect(error?.message.contains(mentions) == true, "\(error?.message ?? "no error")")
        #expect(error?.message.contains("'\(url)'") == true)
    }
}
