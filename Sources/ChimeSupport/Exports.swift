// Logging is part of what chimed and chime share: ChimeLog's logger, levels and wall clock.
@_exported import ChimeLog
