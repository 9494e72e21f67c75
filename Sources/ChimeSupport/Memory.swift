import CMalloc

/// The process's heap.
public enum Memory {
    /// Hands the heap's free pages back to the system (glibc's `malloc_trim`).
    ///
    /// Recovery reads the snapshot's bytes and the journal's records, and decodes them, in
    /// allocations that are freed in pieces between the engine's own. The allocator keeps those
    /// pages, so that after recovery chimed held about 100 bytes a notification more than the same
    /// state loaded by commands (`chime-bench recovery`). Called once, before serving: it takes
    /// each arena's lock while it walks it.
    public static func releaseFree() {
        _ = malloc_trim(0)
    }
}
