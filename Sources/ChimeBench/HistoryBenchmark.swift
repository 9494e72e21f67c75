import ChimeCore
import Foundation

/// `chime-bench history`: what the delivery history that every device keeps by default costs, in
/// process, through the engine's own delivery path (due, published, acknowledged by the broker,
/// journal record encoded, applied), 1,000 deliveries in flight at most, as the worker has them.
///
/// 1. Memory: `devices` devices, each with a notification repeating every minute, deliver
///    `--history-per-device` + 2 times, so that each history is full and its ring has gone round;
///    the growth of this process's RSS from before the first delivery, per device and per entry.
/// 2. CPU: the same path for 20,000 devices whose histories are full, 10 rounds, with history (the
///    default) and without (`--history false`), alternately, best of 5: the microseconds a delivery
///    costs each way once a device's history is full (its ring then replaces its oldest entry).
struct HistoryBenchmark {
    var devices: Int
    /// Only the memory run, with history off (`--without`): the control, run in a process of its
    /// own, since memory freed by an earlier run in the same process would be used again.
    var without = false

    /// The id every device's notification has: 16 bytes, so stored out of line and shared.
    static let id = "evening-reminder"

    func run() throws {
        let cap = EngineConfiguration.Receipts.defaultHistoryPerDevice
        if without {
            say("history off: \(devices) devices, \(cap + 2) deliveries each")
            let memory = fill(devices: devices, rounds: cap + 2, history: false)
            say(
                String(
                    format: "  memory: %.0f B RSS a device, %.0f B of it allocated and in use",
                    Double(memory.grown) / Double(devices),
                    Double(memory.heap) / Double(devices)
                )
            )
            return
        }
        say("history: \(devices) devices, each history filled to --history-per-device \(cap) and gone round")
        let memory = fill(devices: devices, rounds: cap + 2, history: true)
        let perDevice = Double(memory.grown) / Double(devices)
        let perEntry = perDevice / Double(cap)
        say(
            String(
                format: "  memory: %.0f B RSS a device (%.1f B an entry of %d, the device's bookkeeping included), "
                    + "%.0f B of it allocated and in use; a million devices: %.2f GiB",
                perDevice,
                perEntry,
                cap,
                Double(memory.heap) / Double(devices),
                perDevice * 1e6 / 1_073_741_824
            )
        )
        // The allocated bytes, not RSS: RSS also grows by what the deliveries themselves leave
        // (`--without` measures that, a few tens of bytes a device).
        let heap = Double(memory.heap) / Double(devices)
        say(
            String(
                format: "  budget: %d B a device (PROTOCOL.md section 3.9); allocated %.0f B, %.0f %% of it",
                EngineConfiguration.Receipts.historyBytesPerDevice,
                heap,
                100 * heap / Double(EngineConfiguration.Receipts.historyBytesPerDevice)
            )
        )
        var on = Double.infinity
        var off = Double.infinity
        for _ in 0..<5 {
            on = min(on, fill(devices: 20_000, rounds: 10, history: true, warmUp: cap).microsecondsPerDelivery)
            off = min(off, fill(devices: 20_000, rounds: 10, history: false, warmUp: cap).microsecondsPerDelivery)
        }
        say(
            String(
                format: "  CPU a delivery (due, published, acknowledged, encoded, applied): %.2f µs with history, "
                    + "%.2f µs without (%+.1f %%)",
                on,
                off,
                100 * (on - off) / off
            )
        )
    }

    /// Schedules one repeating notification on each of `devices` devices, delivers `warmUp` times,
    /// then `rounds` times more: returns the RSS and the allocated bytes grown over all of them,
    /// and the CPU a delivery of the last `rounds` took.
    func fill(
        devices: Int,
        rounds: Int,
        history: Bool,
        warmUp: Int = 0
    ) -> (grown: Int, heap: Int, microsecondsPerDelivery: Double) {
        var configuration = EngineConfiguration()
        configuration.receipts.historyByDefault = history
        let engine = Engine(configuration: configuration)
        let minute: Int64 = 60_000
        let start = Instant(milliseconds: wallMilliseconds() / minute * minute)
        var spec = NotificationSpec()
        spec.repeatInterval = .minute
        spec.alertBody = "Time for your pills"
        let first = Instant(milliseconds: start.milliseconds + minute)
        for d in 0..<devices {
            let n = ResolvedNotification(id: Self.id, fireDate: .instant(first), spec)
            _ = engine.apply(.schedule(deviceId: "device-\(d)", at: start, replaced: [], notifications: [n]))
        }
        engine.setConnected(true, now: start)
        let rss0 = residentBytes(pid: getpid()) ?? 0
        let heap0 = Self.heapInUse()
        var delivered = 0
        var cpu0 = processCPUSeconds()
        for round in 1...(warmUp + rounds) {
            if round == warmUp + 1 {
                cpu0 = processCPUSeconds()
                delivered = 0
            }
            let now = Instant(milliseconds: start.milliseconds + Int64(round) * minute)
            // At most the worker's deliveries in flight at once (its `maxDeliveriesInFlight`).
            var outputs = engine.tick(now: now, limit: 1000)
            while !outputs.isEmpty {
                for output in outputs {
                    switch output {
                    case .publish(let delivery):
                        guard let entry = engine.acknowledged(delivery.token) else { continue }
                        _ = entry.encode()
                        _ = engine.apply(entry)
                        delivered += 1
                    case .write(let entry):
                        _ = engine.apply(entry)
                    }
                }
                outputs = engine.tick(now: now, limit: 1000)
            }
        }
        let cpu = processCPUSeconds() - cpu0
        let rss1 = residentBytes(pid: getpid()) ?? 0
        let heap1 = Self.heapInUse()
        precondition(delivered == devices * rounds, "delivered \(delivered) of \(devices * rounds)")
        withExtendedLifetime(engine) {}
        return (rss1 - rss0, heap1 - heap0, cpu * 1e6 / Double(max(1, delivered)))
    }

    /// The bytes the allocator has handed out and not had back, from glibc's `malloc_info`: the
    /// memory it holds from the system, less its free blocks (which RSS also counts), plus what
    /// it mapped for large blocks.
    static func heapInUse() -> Int {
        var buffer: UnsafeMutablePointer<CChar>?
        var size = 0
        // Not in the Glibc module: looked up in the process (RTLD_DEFAULT is a null handle).
        typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
        guard let symbol = dlsym(nil, "malloc_info"), let stream = open_memstream(&buffer, &size) else { return 0 }
        _ = unsafeBitCast(symbol, to: MallocInfo.self)(0, stream)
        fclose(stream)
        guard let buffer else { return 0 }
        defer { free(buffer) }
        // The totals of all arenas come last: `<total type="fast|rest|mmap" count=".." size=".."/>`
        // and `<system type="current" size=".."/>`.
        let xml = String(cString: buffer)
        guard let all = xml.range(of: "</heap>", options: .backwards) else { return 0 }
        var free = 0
        var mapped = 0
        var current = 0
        for line in xml[all.upperBound...].split(separator: "\n") {
            guard let at = line.range(of: "size=\"") else { continue }
            let value = Int(line[at.upperBound...].prefix { $0.isNumber }) ?? 0
            if line.contains("type=\"fast\"") || line.contains("type=\"rest\"") { free += value }
            if line.contains("type=\"mmap\"") { mapped += value }
            if line.contains("<system type=\"current\"") { current = value }
        }
        return current - free + mapped
    }

    /// CPU seconds this process has used.
    func processCPUSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
