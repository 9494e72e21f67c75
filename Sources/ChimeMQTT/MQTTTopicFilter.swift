/// MQTT topic filters (MQTT 5 section 4.7): which topics a subscription receives.
public enum MQTTTopicFilter {
    /// Whether a subscription to `filter` receives messages published on `topic`: level by level,
    /// `+` one level, `#` (last) the rest; a topic starting with `$` only by a filter that names its
    /// first level.
    public static func matches(_ filter: String, _ topic: String) -> Bool {
        let filterLevels = filter.split(separator: "/", omittingEmptySubsequences: false)
        let topicLevels = topic.split(separator: "/", omittingEmptySubsequences: false)
        if topic.hasPrefix("$"), let first = filterLevels.first, first == "+" || first == "#" { return false }
        for (index, level) in filterLevels.enumerated() {
            if level == "#" { return index == filterLevels.count - 1 }
            guard index < topicLevels.count else { return false }
            if level != "+" && level != topicLevels[index] { return false }
        }
        return filterLevels.count == topicLevels.count
    }
}
