import ChimeCore
import ChimeJournal
import ChimeSupport

extension Engine {
    /// ``Engine/replaying(_:configuration:directory:progress:timings:)`` with the worker's error
    /// and phase times in milliseconds, as `Worker.recover()` reports them.
    /// - Throws: ``WorkerError`` naming the snapshot or record that cannot be read.
    static func recovered(
        from recovery: Recovery,
        configuration: EngineConfiguration = EngineConfiguration(),
        directory: String,
        progress: (_ phase: String, _ done: Int, _ total: Int) -> Void = { _, _, _ in },
        timings: ((String, Int64) -> Void)? = nil
    ) throws(WorkerError) -> Engine {
        do {
            return try replaying(recovery, configuration: configuration, directory: directory, progress: progress) {
                timings?($0, milliseconds($1))
            }
        } catch {
            throw WorkerError(error.message)
        }
    }
}
