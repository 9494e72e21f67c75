import CMalloc

/// The process's heap.
public enum Memory {
    /// Hands the heap's free pages back to the system (glibc's `malloc_trim`).
    ///
    /// Recovery reads the snapshot's bytes and the journal's records, and decodes them, in
    /// allocations that are freed in pieces between the engine's own. The allocator kept those
    /// pages: at a million, 453 B a notification beyond content after recovery, 348 B after this
    /// (`chime-bench recovery`, about 10 ms). Called once, before serving: it takes each arena's
    /// lock while it walks it.
    public static func releaseFree() {
        _ = malloc_trim(0)
    }
}
