// The protocol's own model types that the client's API uses, so that `import ChimeClient` is all
// an app needs. Each is declared once, in ChimeProtocol or ChimeTime, and shared with the worker.
@_exported import enum ChimeProtocol.Badge
@_exported import enum ChimeProtocol.Channels
@_exported import enum ChimeProtocol.DeliveryState
@_exported import enum ChimeProtocol.InterruptionLevel
@_exported import enum ChimeProtocol.JSON
@_exported import struct ChimeProtocol.JSONObject
@_exported import enum ChimeProtocol.MQTTOutcome
@_exported import enum ChimeProtocol.Misfire
@_exported import enum ChimeProtocol.NotificationField
@_exported import struct ChimeProtocol.PushRegistration
@_exported import enum ChimeProtocol.PushSummary
@_exported import struct ChimeProtocol.QuietHours
@_exported import struct ChimeProtocol.TimeOfDay
@_exported import enum ChimeTime.RepeatUnit
