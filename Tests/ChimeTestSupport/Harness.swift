// The harness the benchmark shares (a broker, child processes, temporary directories, waiting,
// SplitMix64, the hostile rules) comes with the test helpers: a test imports ChimeTestSupport only.
@_exported import ChimeHarness
