import ChimeCore

/// Counters the worker publishes on `P/$worker/{id}/stats`. Owned by the loop thread.
final class WorkerStats {
    var commands: [String: Int] = [:]
    var errors = 0
    var invalidTopics = 0
    var deliveries = 0
    var reconnects = 0

    var json: JSONObject {
        var byOp = JSONObject()
        for (op, n) in commands.sorted(by: { $0.key < $1.key }) { byOp.append(op, .int(Int64(n))) }
        return [
            "commands": .object(byOp),
            "errors": .int(Int64(errors)),
            "invalidTopics": .int(Int64(invalidTopics)),
            "deliveries": .int(Int64(deliveries)),
            "reconnects": .int(Int64(reconnects)),
        ]
    }
}
