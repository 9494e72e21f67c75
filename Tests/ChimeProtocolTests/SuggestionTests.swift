import ChimeCore
import Testing

/// `suggestion(for:among:)`, the "did you mean" of unknown flags, commands and fields.
@Suite struct SuggestionTests {
    static let fields = ["alertBody", "alertTitle", "alertAction", "badge", "fireDate", "timeZone", "userInfo"]
    static let flags = ["body", "title", "times", "tz", "at", "in", "info", "every", "except", "on"]

    @Test(
        arguments: [
            // A letter missing, one too many, one wrong, two swapped.
            ("bdy", flags, "body"),
            ("bodyy", flags, "body"),
            ("tilte", flags, "title"),
            ("evry", flags, "every"),
            ("exept", flags, "except"),
            // Case alone, and case with a typo.
            ("alertbody", fields, "alertBody"),
            ("ALERTBODY", fields, "alertBody"),
            ("alertbdy", fields, "alertBody"),
            ("firedate", fields, "fireDate"),
            ("timezone", fields, "timeZone"),
            ("userinfo", fields, "userInfo"),
            ("bagde", fields, "badge"),
            // Two edits in a long word.
            ("alertTilte", fields, "alertTitle"),
            ("alrtActon", fields, "alertAction"),
            // Short words: one edit.
            ("tx", flags, "tz"),
        ] as [(String, [String], String)]
    )
    func closeWordsGetTheirCandidate(word: String, candidates: [String], expected: String) {
        #expect(suggestion(for: word, among: candidates) == expected)
    }

    @Test(
        arguments: [
            // Too far for their length.
            ("bogus", flags),
            ("xyz", flags),
            ("b", ["body"]),
            ("applicationIconBadgeNumber", fields),
            ("alertMessage", fields),
            ("", flags),
            // Nothing to choose from.
            ("body", [String]()),
        ] as [(String, [String])]
    )
    func farWordsGetNothing(word: String, candidates: [String]) {
        #expect(suggestion(for: word, among: candidates) == nil)
    }

    @Test func aWordThatIsACandidateNeedsNoSuggestion() {
        #expect(suggestion(for: "body", among: Self.flags) == nil)
    }

    @Test func tiesGoToTheCandidateThatSortsFirstWhateverTheOrder() {
        // "tme" is one edit from both "time" and "tee".
        #expect(suggestion(for: "tme", among: ["time", "tee"]) == "tee")
        #expect(suggestion(for: "tme", among: ["tee", "time"]) == "tee")
        #expect(suggestion(for: "badg", among: Set(["badge", "bad"])) == "bad")
        // A closer candidate beats one that sorts first.
        #expect(suggestion(for: "bodyy", among: ["boda", "body"]) == "body")
    }

    @Test func anySequenceOfStringsWillDo() {
        #expect(suggestion(for: "bdy", among: Set(Self.flags)) == "body")
        #expect(suggestion(for: "bdy", among: Self.flags.lazy.map { $0 }) == "body")
    }
}
