import ChimeProtocol

/// How much of the engine thread each device may use: a token bucket per device, in
/// milliseconds of engine time (PROTOCOL.md section 3, "Limits").
///
/// Every command costs what it took to decode, decide and apply (at least
/// ``minimumCost`` ms, so that a flood of cheap commands is bounded too). A device whose bucket is
/// empty gets `rate_limited` before its command is even parsed, until the bucket refills at
/// `rate` ms per second. So a device that sends worst-case commands as fast as it can takes at
/// most `rate / 1000` of the engine, and other devices keep being served.
///
/// Pure: the caller gives the time and the measured cost.
public struct DeviceBudget: Sendable {
    /// Milliseconds of engine time a device earns per second (`--device-rate`).
    public var rate: Double
    /// The most a device can save up, in milliseconds (`--device-burst`).
    public var burst: Double
    public static let minimumCost: Double = 0.1
    /// The largest `--device-rate`, in milliseconds a second: one device takes at most half the
    /// worker, and the others are served in the other half (at 1000 a device sending the costliest
    /// commands kept the loop busy and the others' round trips at 0.3 to 1.6 s: docs/benchmarks.md,
    /// "Limits at their maxima").
    public static let largestRate = 500
    /// The largest `--device-burst`, in milliseconds: how long one device may keep the loop to
    /// itself after a quiet spell.
    public static let largestBurst = 10_000

    private struct Bucket {
        var level: Double
        var at: Int64

        /// Its level at `now`, refilled at `rate` ms a second up to `burst`.
        func refilled(at now: Int64, rate: Double, burst: Double) -> Double {
            min(burst, level + Double(max(0, now - at)) * rate / 1000)
        }

        /// Refilled to `now`, then `cost` taken.
        mutating func spend(_ cost: Double, now: Int64, rate: Double, burst: Double) {
            level = refilled(at: now, rate: rate, burst: burst) - cost
            at = now
        }
    }

    private var buckets: [String: Bucket] = [:]
    /// When buckets were last swept of the devices that have refilled.
    private var sweptAt: Int64 = 0

    public init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
    }

    /// Devices currently tracked (those that spent part of their budget recently).
    public var trackedDevices: Int { buckets.count }

    private func level(_ bucket: Bucket, at now: Instant) -> Double {
        bucket.refilled(at: now.milliseconds, rate: rate, burst: burst)
    }

    /// Whether `device` may send a command now; if not, how many milliseconds until it may.
    public func admits(_ device: String, now: Instant) -> (admitted: Bool, retryAfterMs: Int64) {
        guard rate > 0, let bucket = buckets[device] else { return (true, 0) }
        let level = level(bucket, at: now)
        if level > 0 { return (true, 0) }
        return (false, Int64((-level * 1000 / rate).rounded(.up)) + 1)
    }

    /// Takes the cost of a command `device` sent from its bucket.
    public mutating func charge(_ device: String, milliseconds cost: Double, now: Instant) {
        guard rate > 0 else { return }
        // One lookup: a device first seen starts full.
        buckets[device, default: Bucket(level: burst, at: now.milliseconds)]
            .spend(max(cost, Self.minimumCost), now: now.milliseconds, rate: rate, burst: burst)
        // Forget devices whose bucket is full again, at most once a second: memory follows the
        // devices active in the last `burst / rate` seconds, not every device ever seen.
        if now.milliseconds - sweptAt >= 1000 && buckets.count > 1024 {
            sweptAt = now.milliseconds
            buckets = buckets.filter { level($0.value, at: now) < burst }
        }
    }
}
