import ChimeProtocol

/// One of a worker's histograms in its stats message (PROTOCOL.md section 7, "Worker"): `count`,
/// `p50`, `p99`, `max` and `mean` in milliseconds, and `buckets` keyed `le1` ... `le60000`, `inf`.
public struct HistogramSummary: Sendable, Hashable {
    /// One bar: the values up to `upperBound` milliseconds (above the previous bucket's), or above
    /// every bound when `upperBound` is nil (`inf`).
    public struct Bucket: Sendable, Hashable {
        public var upperBound: Int64?
        public var count: Int64

        public init(upperBound: Int64?, count: Int64) {
            self.upperBound = upperBound
            self.count = count
        }
    }

    /// The bounds (ms) of the worker's buckets, in order (`Histogram.bounds` of ChimeWorkerPolicy;
    /// the console's tests check they agree). A stats message only has the buckets that hold values.
    public static let bounds: [Int64] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 60000]

    /// The keys of the buckets exactly as the worker writes them, in the order of ``bounds``, then
    /// `inf`: `le1`, `le2`, ... `le60000`, `inf`. No other spelling is read (`le01`, `LE1`).
    public static let bucketKeys: [String] = bounds.map { "le\($0)" } + ["inf"]

    /// The index in ``bucketKeys`` of each key.
    private static let bucketIndex: [String: Int] = Dictionary(
        uniqueKeysWithValues: bucketKeys.enumerated().map { ($0.element, $0.offset) }
    )

    public var count: Int64
    public var p50: Double?
    public var p99: Double?
    public var max: Double?
    public var mean: Double?
    /// One bucket for each of ``bucketKeys``, empty ones included, in order: always 15, whatever
    /// the message holds.
    public var buckets: [Bucket]

    /// Reads a histogram object; members that are missing or not numbers read as absent (0 for
    /// counts). Buckets under keys other than ``bucketKeys`` are ignored, so a message cannot add
    /// bars; a count below 0 reads as 0, and one past `Int64.max` stops there.
    public init(json: JSONObject) {
        count = json["count"].flatMap(Self.integer) ?? 0
        p50 = json["p50"].flatMap(Self.number)
        p99 = json["p99"].flatMap(Self.number)
        max = json["max"].flatMap(Self.number)
        mean = json["mean"].flatMap(Self.number)
        var counts = [Int64](repeating: 0, count: Self.bucketKeys.count)
        if case .object(let given)? = json["buckets"] {
            for (key, value) in given {
                guard let index = Self.bucketIndex[key], let n = Self.integer(value), n > 0 else { continue }
                counts[index] = counts[index].saturatingAdd(n)
            }
        }
        buckets = counts.enumerated().map { index, count in
            Bucket(upperBound: index < Self.bounds.count ? Self.bounds[index] : nil, count: count)
        }
    }

    /// `lateness: p50 0 ms, p99 1 ms, max 3 ms, 87 samples`, or `lateness: no samples yet`.
    public func summary(_ name: String) -> String {
        guard count > 0 else { return "\(name): no samples yet" }
        var parts: [String] = []
        for (label, value) in [("p50", p50), ("p99", p99), ("max", max)] {
            if let value { parts.append("\(label) \(Self.format(value)) ms") }
        }
        parts.append("\(count) sample\(count == 1 ? "" : "s")")
        return "\(name): " + parts.joined(separator: ", ")
    }

    static func integer(_ value: JSON) -> Int64? {
        switch value {
        case .int(let i): return i
        case .double(let d) where d.isFinite && d >= -9e18 && d <= 9e18: return Int64(d)
        default: return nil
        }
    }

    static func number(_ value: JSON) -> Double? {
        switch value {
        case .int(let i): return Double(i)
        case .double(let d) where d.isFinite: return d
        default: return nil
        }
    }

    /// `3`, `0.4`, `12.5`: a number with at most one decimal.
    static func format(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        if rounded == rounded.rounded(), abs(rounded) < 1e15 { return String(Int64(rounded)) }
        return String(rounded)
    }
}

/// A histogram's buckets as an inline SVG bar chart: no script and no style attribute (its colours
/// come from ``ConsolePages/stylesheet`` by class), `role="img"` with the summary as its label and
/// `<title>`, each bar's bucket and count in a `<title>` of its own for pointer users, and every
/// label SVG text, escaped.
public enum SVGChart {
    static let width = 400
    static let height = 200
    static let left = 36
    static let right = 6
    static let top = 30
    static let bottom = 34

    /// The chart of `histogram`.
    ///
    /// - Parameters:
    ///   - histogram: the buckets to draw.
    ///   - name: what is measured (`lateness`), the start of the summary.
    ///   - unitLabel: what a bar counts, on the vertical axis (`deliveries`).
    public static func histogram(_ histogram: HistogramSummary, name: String, unitLabel: String) -> HTML {
        let summary = histogram.summary(name)
        let buckets = histogram.buckets
        let plotWidth = width - left - right
        let plotHeight = height - top - bottom
        let slot = Double(plotWidth) / Double(max(buckets.count, 1))
        let highest = buckets.map(\.count).max() ?? 0
        var bars: [HTML] = []
        for (index, bucket) in buckets.enumerated() {
            let x = Double(left) + slot * Double(index)
            let label = boundLabel(bucket.upperBound)
            let centre = number(x + slot / 2)
            bars.append(
                "<text class=\"axis\" x=\"\(centre)\" y=\"\(height - bottom + 12)\" "
                    + "text-anchor=\"middle\">\(label)</text>"
            )
            guard bucket.count > 0, highest > 0 else { continue }
            let barHeight = Swift.max(2, Double(plotHeight) * Double(bucket.count) / Double(highest))
            let y = Double(top + plotHeight) - barHeight
            let range = bucket.upperBound.map { "up to \($0) ms" } ?? "over \(HistogramSummary.bounds.last!) ms"
            bars.append(
                "<rect class=\"bar\" x=\"\(number(x + 1))\" y=\"\(number(y))\" width=\"\(number(slot - 2))\" "
                    + "height=\"\(number(barHeight))\"><title>\(range): \(String(bucket.count))</title></rect>"
                    + "<text class=\"count\" x=\"\(centre)\" y=\"\(number(y - 3))\" "
                    + "text-anchor=\"middle\">\(String(bucket.count))</text>"
            )
        }
        let empty: HTML =
            highest == 0
            ? """
            <text class="empty" x="\(left + plotWidth / 2)" y="\(top + plotHeight / 2)" \
            text-anchor="middle">No samples yet</text>
            """
            : ""
        let axisY = top + plotHeight
        return """
            <svg class="chart" viewBox="0 0 \(width) \(height)" role="img" aria-label="\(summary)" \
            xmlns="http://www.w3.org/2000/svg"><title>\(summary)</title>\
            <line class="axis-line" x1="\(left)" y1="\(axisY)" x2="\(width - right)" y2="\(axisY)"/>\
            <line class="axis-line" x1="\(left)" y1="\(top)" x2="\(left)" y2="\(axisY)"/>\
            <text class="axis" x="\(left - 4)" y="\(top + 4)" text-anchor="end">\(String(highest))</text>\
            <text class="axis" x="\(left - 4)" y="\(axisY)" text-anchor="end">0</text>\
            <text class="axis" x="4" y="12">\(unitLabel)</text>\
            \(bars)\(empty)\
            <text class="axis" x="\(left + plotWidth / 2)" y="\(height - 6)" \
            text-anchor="middle">milliseconds (at most)</text>\
            </svg>
            """
    }

    /// `1`, `500`, `1s`, `60s`, `more`: a bucket's upper bound, short enough for a bar's width.
    static func boundLabel(_ bound: Int64?) -> String {
        guard let bound else { return "more" }
        return bound >= 1000 && bound % 1000 == 0 ? "\(bound / 1000)s" : String(bound)
    }

    /// A coordinate with at most one decimal.
    static func number(_ value: Double) -> String { HistogramSummary.format(value) }
}
