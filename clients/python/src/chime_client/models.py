"""What a request carries and what the server returns, as typed values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime
from typing import Any, Literal, TypedDict
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ._wire import Seconds, Zone, optional_datetime, parse_datetime, present
from .errors import ChimeError, ErrorCode
from .triggers import DateTrigger, RepeatInterval, RRuleTrigger, Trigger

Misfire = Literal["coalesce", "skip", "all"]
"""What happens to occurrences missed while the worker or the broker was down."""


#: The largest badge counter, and the largest number a badge sets or changes it by (PROTOCOL.md
#: section 3.8): chimed saturates the counter there and refuses a larger badge.
MAX_BADGE = 1_000_000


@dataclass(frozen=True)
class Badge:
    """A change of the device's badge counter when the notification fires (never below 0):
    ``Badge.increment(1)`` is ``"+1"`` on the wire. An absolute badge is a plain ``int``."""

    delta: int

    def __post_init__(self) -> None:
        if not -MAX_BADGE <= self.delta <= MAX_BADGE:
            raise ValueError(f"badge: a change of {self.delta} is past {MAX_BADGE} either way")

    @classmethod
    def increment(cls, by: int = 1) -> Badge:
        if by < 0:
            raise ValueError(f"Badge.increment takes a count >= 0, got {by}")
        return cls(by)

    @classmethod
    def decrement(cls, by: int = 1) -> Badge:
        if by < 0:
            raise ValueError(f"Badge.decrement takes a count >= 0, got {by}")
        return cls(-by)

    def wire(self) -> str:
        return f"-{-self.delta}" if self.delta < 0 else f"+{self.delta}"

    @staticmethod
    def to_wire(value: object) -> int | str:
        """A badge as the wire takes it; an absolute one must be from 0 to ``MAX_BADGE``."""
        if isinstance(value, Badge):
            return value.wire()
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BADGE:
            raise ValueError(f"badge: expected an integer from 0 to {MAX_BADGE} or a Badge, got {value!r}")
        return value

    @classmethod
    def parse(cls, value: Any) -> int | Badge | None:
        """A badge as the server lists it: ``3``, ``"+1"`` or ``"-1"``."""
        if isinstance(value, str):
            return cls(int(value))
        return value if isinstance(value, int) else None


@dataclass(frozen=True, kw_only=True)
class NotificationContent:
    """``UNNotificationContent``: what the device shows. Fields left ``None`` are not sent.

    ``alert_bodies`` instead of ``body``: one is picked at random for each delivery. ``badge``:
    an absolute number, or ``Badge.increment(n)`` / ``Badge.decrement(n)``. ``thread_id``
    (``threadIdentifier``) and ``interruption_level`` (``"passive"``, ``"active"``,
    ``"timeSensitive"``, ``"critical"``) shape a push (PROTOCOL.md section 3.11).
    """

    title: str | None = None
    body: str | None = None
    alert_bodies: Sequence[str] | None = None
    action: str | None = None
    has_action: bool | None = None
    sound: str | None = None
    category: str | None = None
    badge: int | Badge | None = None
    user_info: Mapping[str, Any] | None = None
    thread_id: str | None = None
    interruption_level: str | None = None

    def wire(self) -> dict[str, Any]:
        return present({"alertTitle": self.title, "alertBody": self.body,
                        "alertBodies": list(self.alert_bodies) if self.alert_bodies is not None else None,
                        "alertAction": self.action, "hasAction": self.has_action, "soundName": self.sound,
                        "category": self.category,
                        "badge": None if self.badge is None else Badge.to_wire(self.badge),
                        "userInfo": self.user_info, "threadId": self.thread_id,
                        "interruptionLevel": self.interruption_level})

    @classmethod
    def from_wire(cls, fields: Mapping[str, Any]) -> NotificationContent:
        return cls(title=fields.get("alertTitle"), body=fields.get("alertBody"),
                   alert_bodies=fields.get("alertBodies"), action=fields.get("alertAction"),
                   has_action=fields.get("hasAction"), sound=fields.get("soundName"),
                   category=fields.get("category"), badge=Badge.parse(fields.get("badge")),
                   user_info=fields.get("userInfo"), thread_id=fields.get("threadId"),
                   interruption_level=fields.get("interruptionLevel"))


@dataclass(frozen=True)
class NotificationRequest:
    """``UNNotificationRequest(identifier:content:trigger:)``, plus Chime's delivery options.

    Adding a request whose identifier is pending replaces it. A ``None`` trigger delivers at once.
    """

    identifier: str
    content: NotificationContent
    trigger: Trigger | None = None
    _: KW_ONLY
    #: A delivery more than this late is dropped, not sent.
    expires_after: Seconds | None = None
    misfire: Misfire | None = None
    ignore_quiet_hours: bool | None = None
    #: ``False`` stores it paused (the on/off switch of a reminder list).
    enabled: bool | None = None
    #: A one-shot that fired stays listed, paused, until removed.
    keep_after_firing: bool | None = None
    #: ``"mqtt"`` (not pushed: silent data), ``"push"`` (pushed only), or ``"all"`` (the default).
    channels: str | None = None

    def wire(self, now: datetime, device_zone: str | None = None) -> dict[str, Any]:
        """The notification object of PROTOCOL.md section 2, for a command sent at ``now``."""
        when = self.trigger.wire(now, device_zone) if self.trigger is not None else {"after": 0.001}
        return {"id": self.identifier, **when, **self.content.wire(), **self.options()}

    def options(self) -> dict[str, Any]:
        return present({"expiresAfter": self.expires_after, "misfire": self.misfire,
                        "ignoreQuietHours": self.ignore_quiet_hours, "enabled": self.enabled,
                        "keepAfterFiring": self.keep_after_firing, "channels": self.channels})


class UpdateFields(TypedDict, total=False):
    """The fields ``update`` may change; a field given as ``None`` is cleared (sent as null)."""

    title: str | None
    body: str | None
    alert_bodies: Sequence[str] | None
    action: str | None
    has_action: bool | None
    sound: str | None
    category: str | None
    badge: int | Badge | None
    user_info: Mapping[str, Any] | None
    thread_id: str | None
    interruption_level: str | None
    channels: str | None
    expires_after: Seconds | None
    misfire: Misfire | None
    ignore_quiet_hours: bool | None
    enabled: bool | None
    keep_after_firing: bool | None
    fire_date: datetime | None
    after: Seconds | None
    align_to: str | None
    time_zone: Zone | None
    repeat_interval: RepeatInterval | str | None
    rrule: str | None
    count: int | None
    until: datetime | None
    exdates: Sequence[datetime] | None
    lead_time: Seconds | None


#: ``UpdateFields`` names → wire names.
UPDATE_WIRE_NAMES: dict[str, str] = {
    "title": "alertTitle", "body": "alertBody", "alert_bodies": "alertBodies", "action": "alertAction",
    "has_action": "hasAction", "sound": "soundName", "category": "category", "badge": "badge",
    "user_info": "userInfo", "thread_id": "threadId", "interruption_level": "interruptionLevel",
    "channels": "channels", "expires_after": "expiresAfter", "misfire": "misfire",
    "ignore_quiet_hours": "ignoreQuietHours", "enabled": "enabled", "keep_after_firing": "keepAfterFiring",
    "fire_date": "fireDate", "after": "after", "align_to": "alignTo", "time_zone": "timeZone",
    "repeat_interval": "repeatInterval", "rrule": "rrule", "count": "count", "until": "until",
    "exdates": "exdates", "lead_time": "leadTime",
}

#: The stored trigger fields that a new trigger given to ``update`` clears unless it sets them
#: (``fireDate`` is always set, from ``fireDate`` or ``after``).
TRIGGER_WIRE_NAMES = ("timeZone", "repeatInterval", "rrule", "count", "until", "exdates", "leadTime")


@dataclass(frozen=True)
class ScheduledNotification:
    """What ``add`` returns: the id and when its next delivery is due (``None`` when a retry was
    answered as a duplicate of a command whose reply was lost; ``pending_notification_requests``
    shows it)."""

    identifier: str
    next_fire_date: datetime | None


@dataclass(frozen=True)
class PendingNotification:
    """One row of ``pending_notification_requests()``: the request as scheduled (its trigger as
    a ``DateTrigger`` or ``RRuleTrigger``, since that is what the server keeps) and its state."""

    request: NotificationRequest
    next_fire_date: datetime | None
    enabled: bool
    fired_count: int
    last_fired_at: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    #: The notification object exactly as listed.
    fields: dict[str, Any] = field(repr=False)

    @property
    def identifier(self) -> str:
        return self.request.identifier

    @property
    def content(self) -> NotificationContent:
        return self.request.content

    @property
    def trigger(self) -> Trigger | None:
        return self.request.trigger

    @classmethod
    def from_wire(cls, fields: dict[str, Any]) -> PendingNotification:
        trigger: Trigger | None = None
        exdates = [parse_datetime(d) for d in fields.get("exdates", [])]
        if isinstance(fields.get("rrule"), str) and isinstance(fields.get("fireDate"), str):
            trigger = RRuleTrigger(fields["rrule"], parse_datetime(fields["fireDate"]),
                                   time_zone=fields.get("timeZone"), exdates=exdates,
                                   lead_time=fields.get("leadTime"))
        elif isinstance(fields.get("fireDate"), str):
            trigger = DateTrigger(parse_datetime(fields["fireDate"]), time_zone=fields.get("timeZone"),
                                  repeat_interval=fields.get("repeatInterval"), count=fields.get("count"),
                                  until=optional_datetime(fields.get("until")), exdates=exdates,
                                  lead_time=fields.get("leadTime"))
        request = NotificationRequest(
            fields["id"], NotificationContent.from_wire(fields), trigger,
            expires_after=fields.get("expiresAfter"), misfire=fields.get("misfire"),
            ignore_quiet_hours=fields.get("ignoreQuietHours"), enabled=fields.get("enabled"),
            keep_after_firing=fields.get("keepAfterFiring"),
        )
        return cls(request, optional_datetime(fields.get("nextFireDate")), bool(fields.get("enabled", True)),
                   int(fields.get("firedCount", 0)), optional_datetime(fields.get("lastFiredAt")),
                   optional_datetime(fields.get("createdAt")), optional_datetime(fields.get("updatedAt")), fields)


@dataclass(frozen=True)
class UpdatedNotification:
    """What ``update`` returns (``next_fire_date`` ``None`` when paused or finished, or when a
    retry was answered as a duplicate)."""

    identifier: str
    next_fire_date: datetime | None


@dataclass(frozen=True)
class Delivery:
    """A notification as delivered on ``P/{deviceId}/notifications`` (PROTOCOL.md section 5) or
    returned by ``inbox()``. Acknowledge it with ``ack([delivery.fire_id])``."""

    device_id: str
    identifier: str
    #: Unique per occurrence and the same on every resend: deduplicate by it.
    fire_id: str
    occurrence_date: datetime
    fire_date: datetime
    fired_at: datetime
    occurrence: int
    last: bool
    late: bool
    missed: int
    deferred: bool
    title: str | None
    body: str | None
    action: str | None
    has_action: bool | None
    sound: str | None
    category: str | None
    #: The device's badge counter after this delivery.
    badge: int | None
    user_info: dict[str, Any] | None
    #: The delivery object as published.
    payload: dict[str, Any] = field(repr=False)

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> Delivery:
        return cls(
            device_id=d["deviceId"], identifier=d["id"], fire_id=d["fireId"],
            occurrence_date=parse_datetime(d["occurrenceDate"]), fire_date=parse_datetime(d["fireDate"]),
            fired_at=parse_datetime(d["firedAt"]), occurrence=int(d.get("occurrence", 1)),
            last=bool(d.get("last", False)), late=bool(d.get("late", False)), missed=int(d.get("missed", 0)),
            deferred=bool(d.get("deferred", False)), title=d.get("alertTitle"), body=d.get("alertBody"),
            action=d.get("alertAction"), has_action=d.get("hasAction"), sound=d.get("soundName"),
            category=d.get("category"), badge=d.get("badge"), user_info=d.get("userInfo"), payload=d,
        )


@dataclass(frozen=True)
class QuietHours:
    """Deliveries due between ``start`` and ``end`` (``"22:00"``, ``"07:00"``, in the device's zone)
    are held until the end, then sent once with ``deferred=True``."""

    start: str
    end: str

    def wire(self) -> dict[str, str]:
        return {"start": self.start, "end": self.end}


@dataclass(frozen=True)
class DeviceSettings:
    """The device as chimed keeps it (``device`` command).

    The instants the client returns (``next_fire_date``, ``fired_at``, ...) are aware datetimes
    in UTC; :meth:`local` shows one on the device's wall clock::

        settings = center.device_settings()
        print(settings.local(scheduled.next_fire_date))   # 2026-12-01 18:00:00+01:00
    """

    device_id: str
    time_zone: str | None
    badge: int
    quiet_hours: QuietHours | None
    pending: int
    receipts: bool
    history: bool
    #: Its push registrations as chimed shows them: ``id``, ``provider`` and the rest without
    #: secrets (PROTOCOL.md section 3.11).
    push: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> DeviceSettings:
        quiet = d.get("quietHours")
        push = d.get("push")
        return cls(d["deviceId"], d.get("timeZone"), min(int(d.get("badge", 0)), MAX_BADGE),
                   QuietHours(quiet["start"], quiet["end"]) if isinstance(quiet, dict) else None,
                   int(d.get("pending", 0)), bool(d.get("receipts", False)), bool(d.get("history", False)),
                   tuple(r for r in push if isinstance(r, dict)) if isinstance(push, list) else ())

    @property
    def zone(self) -> ZoneInfo | None:
        """The device's zone, ``None`` when it has none (or this machine's zone database lacks it)."""
        if self.time_zone is None:
            return None
        try:
            return ZoneInfo(self.time_zone)
        except (ZoneInfoNotFoundError, ValueError):
            return None

    def local(self, instant: datetime) -> datetime:
        """An instant (an aware ``datetime``) on the device's wall clock, as an aware ``datetime``
        in its zone. Raises :class:`ChimeError` ``timezone_required`` when the device has no zone
        this machine knows, :class:`ValueError` for a naive ``datetime`` (a wall-clock time already)."""
        if instant.tzinfo is None or instant.utcoffset() is None:
            raise ValueError(f"local() takes an aware datetime (an instant), got {instant.isoformat()}")
        zone = self.zone
        if zone is None:
            raise ChimeError(ErrorCode.TIMEZONE_REQUIRED, f"device {self.device_id} has no time zone this machine "
                             f"knows ({self.time_zone!r})", field="timeZone")
        return instant.astimezone(zone)


class DeviceChanges(TypedDict, total=False):
    """What ``update_device_settings`` may set; ``quiet_hours=None`` clears them.

    ``push`` replaces the device's push registrations, ``add_push`` adds, ``remove_push`` removes
    by id (one of the three at a time). A registration is the wire's object:
    ``{"apns": {"token": ..., "topic": ...}}``, ``{"fcm": {"token": ...}}``, or
    ``{"webpush": subscription}`` with a browser's ``PushSubscription.toJSON()``.
    """

    time_zone: Zone
    badge: int
    quiet_hours: QuietHours | None
    receipts: bool
    history: bool
    push: Sequence[Mapping[str, Any]]
    add_push: Sequence[Mapping[str, Any]]
    remove_push: Sequence[str]


@dataclass(frozen=True)
class AckResult:
    """``acknowledged``: deliveries newly acknowledged; ``unknown``: fireIds the device has neither
    in its inbox nor in its history."""

    acknowledged: int
    unknown: list[str]


@dataclass(frozen=True)
class Inbox:
    """The unacknowledged deliveries, oldest first; ``dropped`` counts those that ever left the
    inbox to make room."""

    deliveries: list[Delivery]
    dropped: int


@dataclass(frozen=True)
class HistoryEntry:
    """Whether a delivery reached the device. ``state``: ``unacknowledged``, ``acknowledged``,
    ``expired``, ``dropped`` or ``delivered``; ``fire_date`` when it was due; ``mqtt``:
    ``acknowledged`` (the broker took it) or ``none`` (pushed only); ``push_outcome``:
    ``accepted``, ``pending``, ``refused``, ``unregistered``, ``expired`` or ``None`` (not pushed)."""

    fire_id: str
    identifier: str
    occurrence_date: datetime
    fired_at: datetime
    late: bool
    acknowledged_at: datetime | None
    state: str
    fire_date: datetime | None = None
    mqtt: str = "acknowledged"
    push_outcome: str | None = None

    @classmethod
    def from_wire(cls, d: Mapping[str, Any]) -> HistoryEntry:
        outcome = d.get("pushOutcome")
        return cls(d["fireId"], d["id"], parse_datetime(d["occurrenceDate"]), parse_datetime(d["firedAt"]),
                   bool(d.get("late", False)), optional_datetime(d.get("acknowledgedAt")), str(d["state"]),
                   optional_datetime(d.get("fireDate")), str(d.get("mqtt", "acknowledged")),
                   None if outcome is None else str(outcome))
