import ChimeCore
import ChimeTime
import Foundation

/// Where a batch command's CPU goes, in process and without I/O: the same commands as the batch
/// ingest workload (100 notifications each) through the stages chimed's loop runs for each one.
/// Prints microseconds per notification for each stage, best of three passes over fresh engines.
struct IngestCPUBenchmark {
    var quick: Bool

    func run() {
        let perCommand = 100
        let n = quick ? 100_000 : 500_000
        let devices = 2000
        let far = Instant(milliseconds: wallMilliseconds() + 30 * 86_400_000)
        // The batch ingest workload's commands, each with the device its topic names.
        let topics = Topics(prefix: SystemBenchmark.prefix)
        let payloads = SystemBenchmark.batches(prefix: "batch", count: n, devices: devices, batch: perCommand) { _ in
            far
        }.map { topic, bytes in (device: topics.parseCommand(topic)!.deviceId, bytes: bytes) }
        say("ingest cpu: \(n) notifications, \(perCommand) a command, in process (no broker, no disk)")
        let stages = ["decode", "decide", "encode", "apply", "reply"]
        var best = [Double](repeating: .infinity, count: stages.count)
        for _ in 0..<3 {
            let engine = Engine(configuration: EngineConfiguration(maxPendingPerDevice: 1_000_000))
            let decoder = CommandDecoder()
            var random = SystemRandomNumberGenerator()
            var spent = [UInt64](repeating: 0, count: stages.count)
            var bytes = 0
            let now = Instant(milliseconds: wallMilliseconds())
            for (k, payload) in payloads.enumerated() {
                var t = DispatchTime.now().uptimeNanoseconds
                func lap(_ stage: Int) {
                    let u = DispatchTime.now().uptimeNanoseconds
                    spent[stage] += u - t
                    t = u
                }
                guard
                    case .success(var request) = decoder.decode(
                        deviceId: payload.device,
                        op: .schedule,
                        payload: payload.bytes
                    )
                else { fatalError("ingest cpu: a command was refused") }
                request.key = CommandKey.of(
                    op: "schedule",
                    payload: payload.bytes,
                    correlationData: nil,
                    hasRequestId: false,
                    packetId: Int32(truncatingIfNeeded: k),
                    qos: 1
                )
                lap(0)
                guard case .write(let entry) = engine.decide(request, now: now, random: &random) else {
                    fatalError("ingest cpu: a command was answered without a write")
                }
                lap(1)
                bytes += entry.encode(key: request.key).count
                lap(2)
                guard let result = engine.apply(entry, key: request.key) else { fatalError("ingest cpu: no result") }
                lap(3)
                bytes += Reply(request: request, result: result).bytes.count
                lap(4)
            }
            precondition(bytes > 0)
            for s in stages.indices { best[s] = min(best[s], Double(spent[s]) / 1000 / Double(n)) }
        }
        for (s, name) in stages.enumerated() { say(String(format: "  %-7@ %6.2f µs a notification", name, best[s])) }
        let total = best.reduce(0, +)
        say(String(format: "  total   %6.2f µs a notification (%.0f notifications/s on one core)", total, 1e6 / total))
    }
}
