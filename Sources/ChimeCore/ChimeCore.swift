// The protocol, the engine and the worker's policy, for the modules that use all three: the
// worker, the journal, the command-line tool and the benchmark. The client library depends on
// ChimeProtocol alone.
@_exported import ChimeEngine
@_exported import ChimeProtocol
@_exported import ChimeWorkerPolicy
