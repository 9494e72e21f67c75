@_exported import ChimeTime
