@_exported import ChimeJSON
@_exported import ChimeTime
