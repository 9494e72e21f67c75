import ChimeEngine
import ChimeLog
import ChimeProtocol

/// Zone rules that change while notifications wait (a tzdata upgrade): when to read the zone
/// database again, and what to journal when it changed.
///
/// The reading is the loop's (``Action/checkZones(_:)``, on SIGHUP and every
/// ``Policy/zoneCheckInterval``); what it found comes back as ``Event/zoneRulesChecked(_:)``. The
/// engine of each slot that uses a changed zone journals a ``JournalEntry/zoneRules(at:zones:)``
/// and, once it is appended, computes its notifications again (``Engine/applyZoneRules(_:)``). At
/// start (and when a slot is loaded) the rules the engine now computes with are compared with those
/// its snapshot and journal recorded: a change made while chimed was stopped is journaled and logged.
///
/// A zone that the journal or snapshot names and the zone database here does not have is
/// *unresolved* (``Zone/isResolved``): recovery never fails on it. It is logged when the engine is
/// loaded, counted by the `chime_unresolved_zones` gauge, read in UTC, and asked for again with every
/// check; once the database has it, it is resolved as changed rules are (journaled, then every
/// notification that depends on it computed again).
extension WorkerStateMachine {
    /// Asks the loop to read again the rules of every zone the engines use.
    mutating func checkZones(because reason: String, now: Instant, _ actions: inout [Action]) {
        zones.checking(now: now)
        var inUse = Set<String>()
        for engine in engines.values { inUse.formUnion(engine.zonesInUse.map(\.identifier)) }
        log(.debug, "reading the zone rules again", ["reason": reason, "zones": "\(inUse.count)"], into: &actions)
        actions.append(.checkZones(inUse.sorted()))
    }

    /// The periodic check, and the comparison with the recorded rules of engines new to the machine.
    mutating func maybeCheckZones(now: Instant, _ actions: inout [Action]) {
        for slot in zones.toCompare.sorted() {
            guard let engine = engines[slot] else { continue }
            for (zone, use) in engine.unresolvedZoneUse().sorted(by: { $0.key < $1.key }) {
                log(
                    .warning,
                    "zone not in the zone database; its wall-clock times are read in UTC until it is",
                    [
                        "zone": zone, "device": use.devices.first ?? "", "devices": "\(use.devices.count)",
                        "notifications": "\(use.notifications)",
                    ],
                    into: &actions
                )
            }
            // Only changes: zones never recorded are recorded by the next snapshot or check.
            let changed = engine.unrecordedZoneRules.filter { $0.previous != nil }
            guard !changed.isEmpty else { continue }
            let dependents = engine.dependents(on: Set(changed.map(\.record.zone)))
            for (record, previous) in changed {
                stats.zoneRulesChanges += 1
                log(
                    .notice,
                    "zone rules changed while chimed was stopped; its notifications were computed with the new rules",
                    [
                        "zone": record.zone, "notifications": "\(dependents[record.zone] ?? 0)",
                        "previous": ZoneRulesRecord.hex(previous ?? 0),
                        "rules": ZoneRulesRecord.hex(record.fingerprint),
                    ],
                    into: &actions
                )
            }
            journalZoneRules(changed.map(\.record), changed: [], slot: slot, now: now, &actions)
        }
        zones.toCompare.removeAll()
        if lifecycle == .running, zones.periodicDue(now: now) { checkZones(because: "periodic", now: now, &actions) }
    }

    /// What the loop found when it read the zone database again.
    mutating func zoneRulesChecked(_ reload: ZoneDatabase.Reload, now: Instant, _ actions: inout [Action]) {
        for (zone, error) in reload.failures.sorted(by: { $0.key < $1.key }) {
            log(
                .warning,
                "cannot read a zone's rules again; keeping those in use",
                ["zone": zone, "error": "\(error)"],
                into: &actions
            )
        }
        stats.zoneRulesChanges += reload.changes.count
        let changed = Dictionary(reload.changes.map { ($0.identifier, $0) }, uniquingKeysWith: { $1 })
        for (slot, engine) in engines.sorted(by: { $0.key < $1.key }) {
            var records = engine.unrecordedZoneRules.map(\.record)
            var mine = Set<String>()
            for zone in engine.zonesInUse.map(\.identifier) {
                guard let change = changed[zone] else { continue }
                records.removeAll { $0.zone == zone }
                records.append(ZoneRulesRecord(zone: zone, fingerprint: change.newFingerprint))
                mine.insert(zone)
            }
            // Unresolved zones the database has now: applying their rules resolves them.
            for zone in engine.unresolvedZones.sorted() {
                guard let fingerprint = reload.current[zone] else { continue }
                records.removeAll { $0.zone == zone }
                records.append(ZoneRulesRecord(zone: zone, fingerprint: fingerprint))
            }
            guard !records.isEmpty else { continue }
            journalZoneRules(records, changed: mine, slot: slot, now: now, &actions)
        }
        if reload.changes.isEmpty {
            log(.debug, "zone rules read again; none changed", into: &actions)
        }
    }

    /// Journals zone rules for a slot's engine; ``zoneRulesAppended(_:changed:slot:_:)`` applies them.
    mutating func journalZoneRules(
        _ records: [ZoneRulesRecord],
        changed: Set<String>,
        slot: Int,
        now: Instant,
        _ actions: inout [Action]
    ) {
        let entry = JournalEntry.zoneRules(at: now, zones: records)
        if snapshots.isDiverged {
            snapshots.diverge()
            zoneRulesAppended(records, changed: changed, slot: slot, &actions)
            return
        }
        append(.zoneRules(records, changed: changed, slot: slot), entry, key: nil, slot: slot, &actions)
    }

    /// The zone rules entry was appended (or could not be: the new rules are used all the same, as a
    /// restart would use them): the engine computes its notifications again, and says how many moved.
    mutating func zoneRulesAppended(
        _ records: [ZoneRulesRecord],
        changed: Set<String>,
        slot: Int,
        _ actions: inout [Action]
    ) {
        guard let engine = engines[slot] else { return }
        let unresolved = engine.unresolvedZones
        let counts = engine.applyZoneRules(records)
        let found = unresolved.subtracting(engine.unresolvedZones)
        let lines =
            found.map { ($0, "zone found in the zone database; next occurrences computed again with its rules") }
            + changed.map { ($0, "zone rules changed; next occurrences computed again") }
        for (zone, message) in lines.sorted(by: { $0.0 < $1.0 }) {
            let count = counts[zone] ?? (0, 0)
            log(
                .notice,
                message,
                [
                    "zone": zone, "notifications": "\(count.notifications)", "moved": "\(count.moved)",
                    "rules": ZoneRulesRecord.hex(records.first { $0.zone == zone }?.fingerprint ?? 0),
                ],
                into: &actions
            )
        }
    }
}

/// When the zone database is read again, and which engines' recorded zone rules are still to be
/// compared with those they compute with.
struct ZoneChecks {
    /// Milliseconds between two periodic readings (``WorkerStateMachine/Policy/zoneCheckInterval``);
    /// 0: only on SIGHUP.
    let interval: Int64
    /// Slots whose engine's zone rules are still to be compared with those it recorded (at start,
    /// and when a slot is loaded).
    var toCompare: Set<Int>
    /// When the zone database is read again next.
    private var next: Instant?

    init(interval: Int64, toCompare: Set<Int>) {
        self.interval = interval
        self.toCompare = toCompare
    }

    /// The database is read now: the next periodic reading is an interval away.
    mutating func checking(now: Instant) {
        if interval > 0 { next = now.adding(milliseconds: interval) }
    }

    /// Whether the periodic reading is due; the first is an interval after the first turn.
    mutating func periodicDue(now: Instant) -> Bool {
        guard interval > 0 else { return false }
        guard let next else {
            checking(now: now)
            return false
        }
        return now >= next
    }
}
