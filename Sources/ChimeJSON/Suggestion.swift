/// The candidate closest to a word that is not one of them, for a "did you mean" hint: an unknown
/// flag (`--bdy` → `body`), command or JSON field (`alertbody` → `alertBody`).
///
/// Words are compared without regard to case, by their optimal string alignment distance (the
/// Damerau–Levenshtein distance without editing a substring twice: insertions, deletions,
/// substitutions and transpositions of two neighbours each cost 1). A candidate is close when that
/// distance is at most a third of the word's length, at least 1 and at most 2, so that a short word
/// is not "corrected" into an unrelated one. Of several equally close candidates the one that sorts
/// first wins, whatever order they come in.
/// - Parameters:
///   - word: what was given.
///   - candidates: what would have been accepted.
/// - Returns: the closest candidate as spelled among `candidates`; nil when none is close, or when
///   `word` is one of them exactly.
public func suggestion(for word: String, among candidates: some Sequence<String>) -> String? {
    let typed = Array(word.lowercased().unicodeScalars)
    let limit = min(2, max(1, (typed.count + 1) / 3))
    var best: (distance: Int, candidate: String)?
    for candidate in candidates {
        if candidate == word { return nil }
        let known = Array(candidate.lowercased().unicodeScalars)
        // Lengths further apart than the limit cannot be within it.
        guard abs(known.count - typed.count) <= limit else { continue }
        let distance = alignmentDistance(typed, known)
        guard distance <= limit else { continue }
        if let current = best, (current.distance, current.candidate) <= (distance, candidate) { continue }
        best = (distance, candidate)
    }
    return best?.candidate
}

/// The candidate a word stands for, for a "did you mean" hint: the one `hints` names for it
/// (another API's or tool's name for it: `body` for `alertBody`, `--repeat` for `--every`) when
/// that is among `candidates` (`hints` keyed as spelled, or in lower case), else the closest as
/// ``suggestion(for:among:)`` finds it.
/// - Parameters:
///   - word: what was given.
///   - candidates: what would have been accepted.
///   - hints: other names, each for the candidate it stands for.
public func suggestion(
    for word: String,
    among candidates: some Sequence<String>,
    hints: [String: String]
) -> String? {
    if let hinted = hints[word] ?? hints[word.lowercased()], candidates.contains(hinted) { return hinted }
    return suggestion(for: word, among: candidates)
}

/// The optimal string alignment distance between `a` and `b`.
private func alignmentDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    // Three rows of the dynamic programme: the one before the previous (for transpositions), the
    // previous and the current.
    var before = [Int](repeating: 0, count: b.count + 1)
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
        current[0] = i
        for j in 1...b.count {
            let cost = a[i - 1] == b[j - 1] ? 0 : 1
            var d = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d = min(d, before[j - 2] + 1) }
            current[j] = d
        }
        (before, previous, current) = (previous, current, before)
    }
    return previous[b.count]
}
