// The store layer's types are this module's vocabulary: `Journal.open` returns a ``Recovery``,
// every call throws a ``JournalError``, and ``JournalStore`` is a ``WorkerStore``.
@_exported import ChimeStore
