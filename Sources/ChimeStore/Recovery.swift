import ChimeEngine

/// One journaled record. The journal does not interpret `type` or `payload`.
public struct JournalRecord: Hashable, Sendable {
    public var sequence: UInt64
    public var type: UInt8
    public var payload: [UInt8]

    public init(sequence: UInt64, type: UInt8, payload: [UInt8]) {
        self.sequence = sequence
        self.type = type
        self.payload = payload
    }
}

/// The entries of a snapshot, back to back in one buffer: a million of them read at start-up
/// are one allocation, not a million.
public struct SnapshotEntries: RandomAccessCollection, Hashable, Sendable {
    private var bytes: [UInt8] = []
    /// Where each entry ends in `bytes`.
    private var ends: [Int] = []

    public init() {}

    public init(_ entries: [[UInt8]]) {
        for entry in entries { entry.withUnsafeBytes { append($0) } }
    }

    mutating func append(_ entry: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: entry)
        ends.append(bytes.count)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { ends.count }
    public subscript(position: Int) -> ArraySlice<UInt8> {
        bytes[(position == 0 ? 0 : ends[position - 1])..<ends[position]]
    }
}

/// What `Journal.open` found: the state to rebuild, in order.
public struct Recovery: Sendable {
    /// A snapshot: the opaque entries that describe the state after `sequence`.
    ///
    /// One that `Journal.open` found stays in its file, checked and held open, and is read again
    /// entry by entry: a snapshot of millions of notifications is gigabytes, and recovery needs
    /// no copy of it in memory. One from another store (PostgreSQL) is held in memory.
    public struct Snapshot: Sendable {
        public var sequence: UInt64
        /// How many entries it holds.
        public var count: Int { source.count }
        private let source: Source

        private enum Source: Sendable {
            case memory(SnapshotEntries)
            case file(any SnapshotSource)

            var count: Int {
                switch self {
                case .memory(let entries): entries.count
                case .file(let file): file.count
                }
            }
        }

        public init(sequence: UInt64, entries: SnapshotEntries) {
            self.sequence = sequence
            self.source = .memory(entries)
        }

        public init(sequence: UInt64, entries: [[UInt8]]) {
            self.init(sequence: sequence, entries: SnapshotEntries(entries))
        }

        /// One the data directory holds in a file (`Journal.open`'s), read again entry by entry.
        public init(reading file: any SnapshotSource) {
            self.sequence = file.sequence
            self.source = .file(file)
        }

        /// Hands each entry to `body`, in order. One in a file is read again, every frame
        /// checked again.
        /// - Throws: what `body` throws, or ``JournalError/corrupt`` if the file no longer reads
        ///   as it did when `Journal.open` checked it.
        public func forEachEntry(_ body: (ArraySlice<UInt8>) throws(JournalError) -> Void) throws(JournalError) {
            switch source {
            case .memory(let entries):
                for entry in entries { try body(entry) }
            case .file(let file):
                try file.forEachEntry(body)
            }
        }

        /// How many notifications each larger device has, for ``Engine/reserveCapacity(for:records:)``:
        /// counted when `Journal.open` checked the file.
        public var sizing: SnapshotSizing {
            switch source {
            case .memory(let entries): SnapshotSizing(entries)
            case .file(let file): file.sizing
            }
        }

        /// All the entries, in memory: for tools and tests.
        public func loadEntries() throws(JournalError) -> SnapshotEntries {
            if case .memory(let entries) = source { return entries }
            var entries = SnapshotEntries()
            try forEachEntry { entry in entry.withUnsafeBytes { entries.append($0) } }
            return entries
        }
    }

    /// The newest usable snapshot, if any. Apply it first.
    public var snapshot: Snapshot?
    /// Every valid record after the snapshot's sequence, in order. Apply them after it.
    public var records: [JournalRecord]
    /// Things recovery fixed or worked around, one line each (a torn tail truncated, a damaged
    /// snapshot skipped, a stale temporary file removed). Worth logging; not errors.
    public var warnings: [String]
    /// The greatest sequence recovered; the next append gets `lastSequence + 1`.
    public var lastSequence: UInt64

    /// What another store recovered (PostgreSQL), for ``Engine/replaying(_:configuration:directory:progress:timings:)``.
    public init(snapshot: Snapshot?, records: [JournalRecord], warnings: [String] = [], lastSequence: UInt64) {
        self.snapshot = snapshot
        self.records = records
        self.warnings = warnings
        self.lastSequence = lastSequence
    }
}

/// A snapshot read again from where it is kept rather than held in memory: the data directory's
/// checked snapshot file (ChimeJournal's), for ``Recovery/Snapshot``.
public protocol SnapshotSource: Sendable {
    /// The sequence the snapshot covers.
    var sequence: UInt64 { get }
    /// How many entries it holds.
    var count: Int { get }
    /// How many notifications each larger device has, counted when the snapshot was checked.
    var sizing: SnapshotSizing { get }
    /// Reads the snapshot again and hands each entry to `body`, in order.
    /// - Throws: what `body` throws, or ``JournalError/corrupt`` if it no longer reads as it did
    ///   when checked.
    func forEachEntry(_ body: (ArraySlice<UInt8>) throws(JournalError) -> Void) throws(JournalError)
}
