import ChimeCore
import ChimeJournal
import ChimePostgresStore
import ChimeSupport
import ChimeWorker

extension StoreOpener {
    /// The store `configuration` names: the journal in PostgreSQL with `--store` (its slots with
    /// `--slots`), else the journal in the data directory, whose file operations go through
    /// `fileSystem`. What `chimed` runs, and the tests and the benchmark that start a worker in process.
    /// - Parameters:
    ///   - logger: the data directory's store logs compactions that failed.
    ///   - fileSystem: the journal's file operations; tests inject faults through it.
    public static func configured(
        _ configuration: WorkerConfiguration,
        logger: Logger,
        fileSystem: any FileSystem = SystemFileSystem()
    ) -> StoreOpener {
        StoreOpener(
            recover: { () throws(WorkerError) in
                if let uri = configuration.store {
                    do {
                        let (store, recovery) = try PostgresStore.open(
                            uri,
                            snapshotAfterBytes: configuration.snapshotBytes
                        )
                        return (store, recovery)
                    } catch {
                        throw WorkerError("cannot open the store \(redacted(uri)): \(error)")
                    }
                }
                do throws(JournalError) {
                    let (journal, recovery) = try Journal.open(
                        directory: configuration.dataDirectory,
                        options: JournalOptions(
                            fsync: configuration.fsync,
                            snapshotAfterBytes: configuration.snapshotBytes
                        ),
                        fileSystem: fileSystem
                    )
                    return (JournalStore(journal, logger: logger), recovery)
                } catch {
                    throw WorkerError(error.message)
                }
            },
            joinSlots: { slots, uri, instance throws(WorkerError) in
                let store: SlotWorkerStore
                do {
                    store = try SlotWorkerStore(
                        uri,
                        worker: configuration.workerId,
                        instance: instance,
                        slotCount: slots.count,
                        leaseTTL: slots.leaseTTL,
                        snapshotAfterBytes: configuration.snapshotBytes
                    )
                } catch {
                    throw WorkerError("cannot open the store \(redacted(uri)): \(error)")
                }
                return JoinedSlots(store: store, slotCount: store.slotCount, shareGroup: store.shareGroup)
            }
        )
    }
}

extension Worker {
    /// A worker on the store its configuration names (``StoreOpener/configured(_:logger:fileSystem:)``).
    /// - Parameter fileSystem: the journal's file operations; tests inject faults through it.
    public convenience init(
        configuration: WorkerConfiguration,
        logger: Logger,
        fileSystem: any FileSystem = SystemFileSystem()
    ) {
        self.init(
            configuration: configuration,
            logger: logger,
            store: .configured(configuration, logger: logger, fileSystem: fileSystem)
        )
    }
}
