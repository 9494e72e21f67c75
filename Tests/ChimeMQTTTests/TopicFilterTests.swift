import ChimeMQTT
import Testing

/// Which topics a filter covers, as MQTT 5 section 4.7 says (the cases of its examples).
@Suite struct TopicFilterTests {
    @Test(arguments: [
        ("chime/+/replies/cli-1", "chime/phone-1/replies/cli-1", true),
        ("chime/+/replies/cli-1", "chime/phone-1/replies/cli-2", false),
        ("chime/+/replies/cli-1", "chime/a/b/replies/cli-1", false),
        ("sport/#", "sport", true),
        ("sport/#", "sport/tennis/player1", true),
        ("sport/tennis/#", "sport", false),
        ("+/+", "/finance", true),
        ("/+", "/finance", true),
        ("+", "/finance", false),
        ("#", "$SYS/broker", false),
        ("+/monitor/Clients", "$SYS/monitor/Clients", false),
        ("$SYS/#", "$SYS/broker", true),
        ("a/b", "a/b", true),
        ("a/b", "a/b/c", false),
    ])
    func filters(filter: String, topic: String, matches: Bool) {
        #expect(MQTTTopicFilter.matches(filter, topic) == matches)
    }
}
