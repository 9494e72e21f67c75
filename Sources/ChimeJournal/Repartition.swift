import ChimeCore
import Foundation

/// Why ``repartition(inputs:outputs:partitionCount:fileSystem:)`` refused or stopped: one line
/// naming the directory involved.
public struct RepartitionError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// What ``repartition(inputs:outputs:partitionCount:fileSystem:)`` read and wrote.
public struct RepartitionReport: Hashable, Sendable, CustomStringConvertible {
    /// One data directory and what it holds.
    public struct Directory: Hashable, Sendable {
        public var path: String
        /// The partition an output directory is for; nil for an input.
        public var partition: Partition?
        /// Devices with any state (notifications, a time zone, a badge, quiet hours).
        public var devices: Int
        /// Listed notifications, as `list` counts them.
        public var notifications: Int
    }

    public var inputs: [Directory]
    public var outputs: [Directory]

    public var description: String {
        var lines: [String] = []
        for input in inputs {
            lines.append("read  \(input.path): \(input.devices) devices, \(input.notifications) notifications")
        }
        for output in outputs {
            let partition = output.partition.map { " (--partition \($0))" } ?? ""
            lines.append(
                "wrote \(output.path)\(partition): \(output.devices) devices, \(output.notifications) notifications"
            )
        }
        return lines.joined(separator: "\n")
    }
}

/// Moves the state of the data directories of one partition layout into new data directories for
/// `partitionCount` partitions: the tool behind `chime journal repartition`, for changing the
/// number of workers (docs/production.md, "Changing the number of partitions").
///
/// Each input is opened and recovered exactly as `chimed` does at start-up (`Journal.open`, the
/// newest snapshot, then every record after it through `Engine.apply`, by ``Engine/replaying(_:configuration:directory:progress:timings:)``), so the state moved is the
/// state the stopped worker had: every acknowledged command, every acknowledged delivery.
/// Deliveries that were in flight when the worker stopped were not acknowledged, so they are not
/// recorded and the new owner sends them again with the same `fireId`, as after any restart.
///
/// Output `k` receives exactly the devices with `crc32(deviceId) mod partitionCount == k` (those
/// `chimed --partition k/partitionCount` serves), as a single snapshot in a fresh journal. Every
/// output is then opened again and replayed, and must hold the devices and notifications it was
/// given.
///
/// The inputs stay locked while this runs, so no worker can start on them, and they are not
/// changed beyond what opening them does anyway (truncating a torn tail, removing a temporary
/// file). Keep them until the new workers have proved healthy: they are the way back.
///
/// - Parameters:
///   - inputs: the data directories of every worker of the old layout, stopped. All of them: a
///     device whose directory is left out is not moved.
///   - outputs: one new data directory per new partition, `outputs[k]` for partition
///     `k/partitionCount`; each must be missing or empty, and none may be an input.
///   - partitionCount: the new number of partitions; must equal `outputs.count`.
///   - fileSystem: the journal's file operations; tests inject faults through it.
/// - Returns: the devices and notifications read from each input and written to each output.
/// - Throws: ``RepartitionError`` when the arguments do not fit, an input is not a data
///   directory, is locked by a running worker or is corrupt, a device appears in two inputs, or
///   writing an output fails. Outputs written before a failure are left as they are: delete them
///   and run again.
public func repartition(
    inputs: [String],
    outputs: [String],
    partitionCount: Int,
    fileSystem: any FileSystem = SystemFileSystem()
) throws(RepartitionError) -> RepartitionReport {
    guard !inputs.isEmpty else { throw RepartitionError("no input data directory given") }
    guard partitionCount >= 1, partitionCount <= Int(UInt32.max) else {
        throw RepartitionError("the partition count must be at least 1, got \(partitionCount)")
    }
    guard outputs.count == partitionCount else {
        throw RepartitionError(
            "\(partitionCount) partitions need \(partitionCount) output directories, got \(outputs.count)"
        )
    }
    var seen: [String: String] = [:]
    for path in inputs + outputs {
        let key = canonicalPath(path)
        if let earlier = seen[key] {
            throw RepartitionError("\(path) and \(earlier) are the same directory; every input and output must differ")
        }
        seen[key] = path
    }
    for path in inputs {
        try checkInput(path, fileSystem: fileSystem)
    }
    for path in outputs {
        try checkOutput(path, fileSystem: fileSystem)
    }

    // Recover every input, keeping each journal open (and so locked) until the end.
    var journals: [Journal] = []
    defer {
        for journal in journals { try? journal.close() }
    }
    var engines: [Engine] = []
    var report = RepartitionReport(inputs: [], outputs: [])
    var owners: [String: String] = [:]
    for path in inputs {
        let (journal, recovery): (Journal, Recovery)
        do {
            (journal, recovery) = try openJournal(path, fileSystem: fileSystem)
        } catch {
            throw RepartitionError("cannot open \(path): \(error.message)")
        }
        journals.append(journal)
        let engine = try replay(recovery, in: path)
        for deviceId in engine.snapshot.deviceIds {
            if let other = owners.updateValue(path, forKey: deviceId) {
                throw RepartitionError(
                    "device \(deviceId) has state in both \(other) and \(path); "
                        + "give each old partition's directory once, and no directory of another layout"
                )
            }
        }
        engines.append(engine)
        report.inputs.append(.init(path: path, devices: engine.deviceCount, notifications: engine.pendingCount))
    }

    let snapshots = engines.map(\.snapshot)
    for (k, path) in outputs.enumerated() {
        let partition = Partition(index: UInt32(k), count: UInt32(partitionCount))
        let part = EngineSnapshot(combining: snapshots, devices: { partition.owns($0) })
        try write(part, to: path, fileSystem: fileSystem)
        let written = try verifyOutput(path, expected: part, fileSystem: fileSystem)
        report.outputs.append(
            .init(path: path, partition: partition, devices: written.deviceCount, notifications: written.pendingCount)
        )
    }

    let devicesIn = report.inputs.reduce(0) { $0 + $1.devices }
    let devicesOut = report.outputs.reduce(0) { $0 + $1.devices }
    let notificationsIn = report.inputs.reduce(0) { $0 + $1.notifications }
    let notificationsOut = report.outputs.reduce(0) { $0 + $1.notifications }
    guard devicesIn == devicesOut, notificationsIn == notificationsOut else {
        throw RepartitionError(
            "read \(devicesIn) devices and \(notificationsIn) notifications but wrote \(devicesOut) and "
                + "\(notificationsOut); keep the inputs and report this"
        )
    }
    for journal in journals {
        do {
            try journal.close()
        } catch {
            throw RepartitionError("closing an input failed: \(error.message)")
        }
    }
    journals.removeAll()
    return report
}

/// `Journal.open`, trying again for a moment while the directory is locked.
///
/// A lock that this process has just released can still be held for an instant: a process that
/// another thread is spawning holds copies of our descriptors, the lock's included, until its
/// `exec` closes them (they are close-on-exec). A worker running on the directory holds it for
/// good, and is reported after a second.
private func openJournal(_ path: String, fileSystem: any FileSystem) throws(JournalError) -> (Journal, Recovery) {
    var attempt = 0
    while true {
        do {
            return try Journal.open(directory: path, fileSystem: fileSystem)
        } catch  where error.code == .locked && attempt < 20 {
            attempt += 1
            usleep(50_000)
        }
    }
}

/// The path made absolute and resolved through symbolic links, to spot one directory given twice.
private func canonicalPath(_ path: String) -> String {
    URL(fileURLWithPath: path).standardizedFileURL.resolvingSymlinksInPath().path
}

/// An input must be an existing data directory: a typo must not read as an empty partition,
/// whose devices would silently be left behind.
private func checkInput(_ path: String, fileSystem: any FileSystem) throws(RepartitionError) {
    guard case .entries = try? JournalTools.contents(of: path, fileSystem: fileSystem) else {
        throw RepartitionError("input \(path) is not a directory")
    }
    let report: VerifyReport
    do {
        report = try JournalTools.verify(directory: path, fileSystem: fileSystem)
    } catch {
        throw RepartitionError("cannot read input \(path): \(error.message)")
    }
    guard report.segmentCount > 0 || !report.snapshots.isEmpty else {
        throw RepartitionError("input \(path) holds no journal: it is not a chimed data directory")
    }
}

/// An output must not exist yet, or be an empty directory: repartitioning never merges into or
/// overwrites state.
private func checkOutput(_ path: String, fileSystem: any FileSystem) throws(RepartitionError) {
    let names: [String]
    do {
        switch try JournalTools.contents(of: path, fileSystem: fileSystem) {
        case .missing: return
        case .notADirectory: throw RepartitionError("output \(path) exists and is not a directory")
        case .entries(let entries): names = entries
        }
    } catch let error as RepartitionError {
        throw error
    } catch {
        throw RepartitionError("cannot list output \(path): \(error)")
    }
    guard names.isEmpty else {
        throw RepartitionError("output \(path) is not empty (\(names.sorted().prefix(3).joined(separator: ", ")))")
    }
}

/// Rebuilds a directory's state as `chimed` does at start-up.
private func replay(_ recovery: Recovery, in path: String) throws(RepartitionError) -> Engine {
    do {
        return try Engine.replaying(recovery, directory: path)
    } catch {
        throw RepartitionError(error.message)
    }
}

/// Writes `state` as the first snapshot of a fresh journal in `path`.
private func write(_ state: EngineSnapshot, to path: String, fileSystem: any FileSystem) throws(RepartitionError) {
    do {
        try JournalTools.createDirectory(path, fileSystem: fileSystem)
    } catch {
        throw RepartitionError("cannot create output \(path): \(error.message)")
    }
    do throws(JournalError) {
        let (journal, recovery) = try openJournal(path, fileSystem: fileSystem)
        defer { try? journal.close() }
        guard recovery.snapshot == nil, recovery.records.isEmpty else {
            throw JournalError(.invalidState, "output \(path) already holds a journal")
        }
        let writer = try journal.beginSnapshot()
        do throws(JournalError) {
            try state.forEachEntry { (entry: [UInt8]) throws(JournalError) in try writer.append(entry) }
            try writer.finish()
        } catch {
            writer.abandon()
            throw error
        }
        try journal.snapshotCompleted(writer)
        try journal.close()
    } catch {
        throw RepartitionError("writing output \(path) failed: \(error.message)")
    }
}

/// Opens an output as `chimed` would and checks that it replays to the state written.
private func verifyOutput(
    _ path: String,
    expected: EngineSnapshot,
    fileSystem: any FileSystem
) throws(RepartitionError) -> Engine {
    let (journal, recovery): (Journal, Recovery)
    do {
        (journal, recovery) = try openJournal(path, fileSystem: fileSystem)
    } catch {
        throw RepartitionError("output \(path) does not open after writing: \(error.message)")
    }
    defer { try? journal.close() }
    let written: SnapshotEntries?
    do {
        written = try recovery.snapshot?.loadEntries()
    } catch {
        throw RepartitionError("output \(path) cannot be read back: \(error.message)")
    }
    guard written == SnapshotEntries(expected.entries), recovery.records.isEmpty else {
        throw RepartitionError("output \(path) does not read back as written")
    }
    let engine = try replay(recovery, in: path)
    guard Set(engine.snapshot.deviceIds) == Set(expected.deviceIds) else {
        throw RepartitionError("output \(path) replays to other devices than were written")
    }
    return engine
}

extension JournalTools {
    /// Writes `state` as the first snapshot of a new data directory at `path` (missing, or an
    /// empty directory) and checks that it opens and replays to what was written, as
    /// `chime journal import` does with what another store holds.
    /// - Returns: the engine the directory replays to.
    public static func writeDirectory(
        _ state: EngineSnapshot,
        to path: String,
        fileSystem: any FileSystem = SystemFileSystem()
    ) throws(RepartitionError) -> Engine {
        try checkOutput(path, fileSystem: fileSystem)
        try write(state, to: path, fileSystem: fileSystem)
        return try verifyOutput(path, expected: state, fileSystem: fileSystem)
    }
}
