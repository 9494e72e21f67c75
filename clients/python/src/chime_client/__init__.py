"""A Python client for Chime, the durable notification scheduler for MQTT, shaped like Apple's
``UNUserNotificationCenter``: :class:`NotificationCenter` (blocking) and
:class:`AsyncNotificationCenter` (asyncio) over paho-mqtt, MQTT 5. The wire contract is
PROTOCOL.md in the Chime repository."""

from ._ops import ALL, AllPending, Match, Selector
from .aio import AsyncNotificationCenter
from .center import NotificationCenter
from .errors import ChimeConnectionError, ChimeError, ChimeTimeoutError, ErrorCode
from .models import (
    AckResult,
    MAX_BADGE,
    Badge,
    Delivery,
    DeviceChanges,
    DeviceSettings,
    HistoryEntry,
    Inbox,
    Misfire,
    NotificationContent,
    NotificationRequest,
    PendingNotification,
    QuietHours,
    ScheduledNotification,
    UpdatedNotification,
    UpdateFields,
)
from .triggers import CalendarTrigger, DateTrigger, RepeatInterval, RRuleTrigger, TimeIntervalTrigger, Trigger

__all__ = [
    "ALL",
    "AckResult",
    "AllPending",
    "AsyncNotificationCenter",
    "MAX_BADGE",
    "Badge",
    "CalendarTrigger",
    "ChimeConnectionError",
    "ChimeError",
    "ChimeTimeoutError",
    "DateTrigger",
    "Delivery",
    "DeviceChanges",
    "DeviceSettings",
    "ErrorCode",
    "HistoryEntry",
    "Inbox",
    "Match",
    "Misfire",
    "NotificationCenter",
    "NotificationContent",
    "NotificationRequest",
    "PendingNotification",
    "QuietHours",
    "RRuleTrigger",
    "RepeatInterval",
    "ScheduledNotification",
    "Selector",
    "TimeIntervalTrigger",
    "Trigger",
    "UpdateFields",
    "UpdatedNotification",
]
