import ChimeCore
import ChimeTestSupport
import Testing

/// Matching by userInfo on a device past `UserInfoIndex.threshold` (1024) goes through the index: it
/// must answer exactly what a scan would, through replacements, cancels, pauses, snoozes, the
/// index's rebuilds after many removals, and recovery.
@Suite struct UserInfoIndexTests {
    /// The test's own model: id → tag of every listed notification.
    struct Model {
        var tags: [String: Int] = [:]
        func ids(tag: Int) -> [String] { tags.filter { $0.value == tag }.map(\.key).sorted() }
    }

    static func schedule(_ h: inout Harness, _ model: inout Model, ids: Range<Int>, tag: (Int) -> Int) {
        let items = ids.map { i in #"{"id":"n\#(i)","after":86400,"userInfo":{"tag":\#(tag(i)),"all":true}}"# }
        h.ok("big", .schedule, #"{"notifications":[\#(items.joined(separator: ","))]}"#)
        for i in ids { model.tags["n\(i)"] = tag(i) }
    }

    static func matched(_ h: inout Harness, tag: Int, engine: Engine? = nil) -> [String] {
        matched(&h, #"{"tag":\#(tag)}"#, engine: engine)
    }

    static func matched(_ h: inout Harness, _ userInfo: String, engine: Engine? = nil) -> [String] {
        var ids: [String] = []
        var cursor: String?
        repeat {
            var payload = #"{"match":{"userInfo":\#(userInfo)},"limit":1000"#
            if let cursor { payload += #","cursor":"\#(cursor)""# }
            var on = h
            if let engine { on.engine = engine }
            let page = on.ok("big", .list, payload + "}")
            ids += page["notifications"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } ?? []
            cursor = page["cursor"]?.stringValue
        } while cursor != nil
        return ids
    }

    @Test func indexAnswersLikeAScan() {
        var h = Harness(configuration: EngineConfiguration(maxPendingPerDevice: 100_000))
        var model = Model()
        // 3000 notifications, tags 0..<30: past the threshold, so matches use the index.
        for start in stride(from: 0, to: 3000, by: 500) {
            Self.schedule(&h, &model, ids: start..<(start + 500), tag: { $0 % 30 })
        }
        #expect(Self.matched(&h, tag: 7) == model.ids(tag: 7))
        #expect(Self.matched(&h, tag: 7).count == 100)
        // A member that every notification has is not listed in the index: matched by a scan,
        // alone or with a selective one; a member that none has matches nothing.
        #expect(Self.matched(&h, #"{"all":true}"#).count == 3000)
        #expect(Self.matched(&h, #"{"all":true,"tag":7}"#) == model.ids(tag: 7))
        #expect(Self.matched(&h, #"{"all":false}"#).isEmpty)
        #expect(Self.matched(&h, #"{"all":true,"tag":99}"#).isEmpty)

        // Replaced with another tag: found under the new one only.
        Self.schedule(&h, &model, ids: 0..<300, tag: { _ in 31 })
        #expect(Self.matched(&h, tag: 0) == model.ids(tag: 0))
        #expect(Self.matched(&h, tag: 31) == model.ids(tag: 31))
        #expect(Self.matched(&h, tag: 31).count == 300)

        // Cancelled by match and by id.
        let cancelled = h.ok("big", .cancel, #"{"match":{"userInfo":{"tag":5}}}"#)["cancelled"]?.arrayValue ?? []
        #expect(cancelled.count == model.ids(tag: 5).count && !cancelled.isEmpty)
        for id in model.ids(tag: 5) { model.tags[id] = nil }
        h.ok("big", .cancel, #"{"ids":["n301","n302"]}"#)
        model.tags["n301"] = nil
        model.tags["n302"] = nil
        #expect(Self.matched(&h, tag: 5).isEmpty)
        #expect(Self.matched(&h, tag: 11) == model.ids(tag: 11))

        // Paused ones are still listed and matched; a snooze is not listed.
        h.ok("big", .pause, #"{"match":{"userInfo":{"tag":12}}}"#)
        h.ok("big", .snooze, #"{"id":"n1000","after":60}"#)
        #expect(Self.matched(&h, tag: 12) == model.ids(tag: 12))
        #expect(Self.matched(&h, tag: model.tags["n1000"]!) == model.ids(tag: model.tags["n1000"]!))

        // More removals than live ones: the index is rebuilt, and still right.
        for start in stride(from: 1000, to: 3000, by: 100) {
            let ids = (start..<(start + 100)).map { #""n\#($0)""# }.joined(separator: ",")
            h.ok("big", .cancel, #"{"ids":[\#(ids)]}"#)
        }
        for i in 1000..<3000 { model.tags["n\(i)"] = nil }
        for tag in [0, 7, 12, 29, 31] { #expect(Self.matched(&h, tag: tag) == model.ids(tag: tag), "tag \(tag)") }
        // Back under the threshold: matched by a scan, the same answers.
        #expect(h.list("big").count == model.tags.count)
        #expect(model.tags.count < 1024)  // UserInfoIndex.threshold
        for tag in [0, 7, 31] { #expect(Self.matched(&h, tag: tag) == model.ids(tag: tag), "tag \(tag)") }

        // And past it again, after recovery from the journal.
        Self.schedule(&h, &model, ids: 5000..<6000, tag: { $0 % 7 })
        let replayed = h.replayed()
        for tag in [0, 3, 6, 31] {
            #expect(Self.matched(&h, tag: tag, engine: replayed) == model.ids(tag: tag), "tag \(tag)")
            #expect(Self.matched(&h, tag: tag) == model.ids(tag: tag), "tag \(tag)")
        }
    }
}
