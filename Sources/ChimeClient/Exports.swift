// The protocol's own model types that the client's API uses, so that `import ChimeClient` is all
// an app needs. Each is declared once, in ChimeCore or ChimeTime, and shared with the worker.
@_exported import enum ChimeCore.Badge
@_exported import enum ChimeCore.DeliveryState
@_exported import enum ChimeCore.JSON
@_exported import struct ChimeCore.JSONObject
@_exported import enum ChimeCore.Misfire
@_exported import enum ChimeCore.NotificationField
@_exported import struct ChimeCore.QuietHours
@_exported import struct ChimeCore.TimeOfDay
@_exported import enum ChimeTime.RepeatUnit
