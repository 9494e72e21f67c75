"""When a notification fires: the triggers of ``UNUserNotificationCenter``, mapped onto Chime's
``fireDate``, ``after``, ``rrule`` and ``repeatInterval`` (PROTOCOL.md section 2)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timedelta, timezone
from enum import IntEnum, StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ._wire import Seconds, Zone, format_datetime, present, seconds, zone_of
from .errors import ChimeError, ErrorCode

class Weekday(IntEnum):
    """A day of the week, numbered as ``DateComponents.weekday`` (and
    ``CalendarTrigger(weekday=)``) numbers them: 1 is Sunday, 7 is Saturday."""

    SUNDAY = 1
    MONDAY = 2
    TUESDAY = 3
    WEDNESDAY = 4
    THURSDAY = 5
    FRIDAY = 6
    SATURDAY = 7

    @property
    def rrule(self) -> str:
        """The day as RFC 5545's ``BYDAY`` writes it: ``MO``."""
        return ("SU", "MO", "TU", "WE", "TH", "FR", "SA")[self - 1]


#: Monday to Friday: ``CalendarTrigger(weekdays=MONDAY_TO_FRIDAY, hour=18, repeats=True)``.
MONDAY_TO_FRIDAY: frozenset[Weekday] = frozenset(
    {Weekday.MONDAY, Weekday.TUESDAY, Weekday.WEDNESDAY, Weekday.THURSDAY, Weekday.FRIDAY})
#: Saturday and Sunday.
WEEKEND: frozenset[Weekday] = frozenset({Weekday.SATURDAY, Weekday.SUNDAY})


def _zone_info(zone: Zone) -> ZoneInfo:
    if isinstance(zone, ZoneInfo):
        return zone
    try:
        return ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError) as error:
        raise ChimeError(ErrorCode.INVALID_ARGUMENT, f"{zone!r} is not an IANA time zone",
                         field="timeZone") from error


class RepeatInterval(StrEnum):
    """``UILocalNotification.repeatInterval`` (``NSCalendarUnit``), as the wire names it.

    ``WEEKDAY`` repeats *every day*, as ``NSCalendarUnitWeekday`` does; for Monday to Friday use
    ``CalendarTrigger(weekdays=MONDAY_TO_FRIDAY, ...)`` (``BYDAY=MO,TU,WE,TH,FR``).
    """

    NONE = "none"
    YEAR = "year"
    QUARTER = "quarter"
    MONTH = "month"
    WEEK_OF_YEAR = "weekOfYear"
    DAY = "day"
    WEEKDAY = "weekday"
    HOUR = "hour"
    MINUTE = "minute"
    SECOND = "second"


class Trigger(ABC):
    """What decides when a request fires. One of :class:`CalendarTrigger`,
    :class:`TimeIntervalTrigger`, :class:`DateTrigger` and :class:`RRuleTrigger`."""

    @property
    def needs_device_zone(self) -> bool:
        """Whether :meth:`wire` needs the device's current time zone (the center asks chimed)."""
        return False

    @abstractmethod
    def wire(self, now: datetime, device_zone: str | None = None) -> dict[str, Any]:
        """The trigger's fields of a notification object, for a command sent at ``now``
        (an aware ``datetime``)."""


def _check_component(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"CalendarTrigger {name} must be an integer {low}...{high}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class CalendarTrigger(Trigger):
    """``UNCalendarNotificationTrigger(dateMatching:repeats:)``: fires when the wall clock in
    ``time_zone`` (default: the device's zone, followed when it changes) matches every given
    component. Components finer than the finest one given are 0 (``hour=18`` is 18:00:00); the
    coarser ones not given are free. So with ``repeats=True``:

    - ``hour=18, minute=0``: every day at 18:00;
    - ``weekday=2, hour=8``: every Monday at 08:00 (``weekday`` 1 is Sunday, as in Apple's API);
    - ``weekdays=MONDAY_TO_FRIDAY, hour=18``: Monday to Friday at 18:00, one trigger (a set of
      :class:`Weekday`, or of the same numbers; ``weekday`` and ``weekdays`` do not go together);
    - ``day=1, hour=9``: the 1st of every month at 09:00 (``day=31``: months that have one);
    - ``month=12, day=25``: every 25 December at 00:00; ``minute=30``: every hour at :30.

    Without ``repeats`` it fires once, at the next matching time after the command is sent (a
    rule with ``COUNT=1`` whose DTSTART is this machine's clock read in the zone; without a
    ``time_zone`` the center first asks chimed for the device's zone).
    """

    month: int | None = None
    day: int | None = None
    weekday: int | None = None
    #: Several days of the week (kept as a ``frozenset`` of :class:`Weekday`).
    weekdays: Collection[int] | None = None
    hour: int | None = None
    minute: int | None = None
    second: int | None = None
    repeats: bool = False
    time_zone: Zone | None = None
    lead_time: Seconds | None = None

    def __post_init__(self) -> None:
        limits = {"month": (1, 12), "day": (1, 31), "weekday": (1, 7), "hour": (0, 23), "minute": (0, 59),
                  "second": (0, 59)}
        given = self.weekdays is not None
        for name, (low, high) in limits.items():
            value = getattr(self, name)
            if value is None:
                continue
            given = True
            _check_component(name, value, low, high)
        if not given:
            raise ValueError("CalendarTrigger needs at least one of month, day, weekday, weekdays, hour, minute, "
                             "second")
        if self.weekdays is not None:
            if self.weekday is not None:
                raise ValueError("CalendarTrigger takes weekday or weekdays, not both")
            if isinstance(self.weekdays, int | str) or not self.weekdays:
                raise ValueError(f"CalendarTrigger weekdays must be a non-empty set of weekdays 1...7 (Weekday), "
                                 f"got {self.weekdays!r}")
            for value in self.weekdays:
                _check_component("weekdays", value, 1, 7)
            object.__setattr__(self, "weekdays", frozenset(Weekday(d) for d in self.weekdays))

    def _days(self) -> list[Weekday]:
        """The days of the week given, Monday first (as RFC 5545's default WKST)."""
        days = [Weekday(self.weekday)] if self.weekday is not None else [Weekday(d) for d in self.weekdays or ()]
        return sorted(days, key=lambda d: (d - Weekday.MONDAY) % 7)

    @property
    def needs_device_zone(self) -> bool:
        return not self.repeats and self.time_zone in (None, "device")

    def rrule(self) -> str:
        """The RFC 5545 rule whose occurrences are the matching times."""
        days = self._days()
        has_day = self.day is not None or bool(days)
        # Units from coarse to fine: the finest given one, and the free unit just coarser than it
        # that sets FREQ (each unit between them is given).
        levels = [self.month is not None, has_day, self.hour is not None, self.minute is not None,
                  self.second is not None]
        finest = max(i for i, given in enumerate(levels) if given)
        freq = "YEARLY"
        for level in range(finest - 1, -1, -1):
            if not levels[level]:
                freq = ["MONTHLY", "DAILY", "HOURLY", "MINUTELY"][level]
                if level == 0 and days and self.day is None:
                    freq = "WEEKLY"
                break
        parts = [f"FREQ={freq}"]
        if self.month is not None:
            parts.append(f"BYMONTH={self.month}")
        if self.day is not None:
            parts.append(f"BYMONTHDAY={self.day}")
        elif finest < 1:
            parts.append("BYMONTHDAY=1")
        if days:
            parts.append("BYDAY=" + ",".join(d.rrule for d in days))
        for level, (name, value) in enumerate([("BYHOUR", self.hour), ("BYMINUTE", self.minute),
                                               ("BYSECOND", self.second)], start=2):
            if value is not None:
                parts.append(f"{name}={value}")
            elif level > finest:
                parts.append(f"{name}=0")
        return ";".join(parts)

    def wire(self, now: datetime, device_zone: str | None = None) -> dict[str, Any]:
        rule = self.rrule()
        if self.repeats:
            # DTSTART only anchors the rule (every BY part is explicit): midnight of the day
            # before today in UTC is in the past in every zone, and the first occurrence after
            # the command's arrival is the first delivery.
            anchor = now.astimezone(timezone.utc).date() - timedelta(days=1)
            fire_date = f"{anchor.isoformat()}T00:00:00"
        else:
            zone = device_zone if self.needs_device_zone else self.time_zone
            if zone is None:
                raise ChimeError(ErrorCode.TIMEZONE_REQUIRED, "the device has no time zone: set one with "
                                 "update_device_settings(time_zone=...) or give time_zone", field="timeZone")
            local = now.astimezone(_zone_info(zone))
            # The next matching time strictly after now, as Calendar.nextDate(after:matching:).
            fire_date = format_datetime(local.replace(tzinfo=None, microsecond=0) + timedelta(seconds=1))
            rule += ";COUNT=1"
        return present({"fireDate": fire_date, "timeZone": self.time_zone, "rrule": rule,
                        "leadTime": self.lead_time})


@dataclass(frozen=True)
class TimeIntervalTrigger(Trigger):
    """``UNTimeIntervalNotificationTrigger(timeInterval:repeats:)``: ``seconds`` after chimed
    receives the command and, with ``repeats``, every ``seconds`` (whole seconds) after that.

    ``align_to="12:00"`` fires at the first such wall-clock time (in ``time_zone``, default the
    device's) at or after that moment: the "come back tomorrow at noon" reminder.
    """

    seconds: Seconds
    repeats: bool = False
    _: KW_ONLY
    align_to: str | None = None
    time_zone: Zone | None = None

    def __post_init__(self) -> None:
        value = seconds(self.seconds)
        if value <= 0:
            raise ValueError(f"TimeIntervalTrigger seconds must be > 0, got {value}")
        if self.repeats and not isinstance(value, int):
            raise ValueError(f"a repeating TimeIntervalTrigger needs whole seconds, got {value}")

    def wire(self, now: datetime, device_zone: str | None = None) -> dict[str, Any]:
        after = seconds(self.seconds)
        # `after` resolves into an absolute fireDate; without a timeZone the rule repeats in UTC,
        # where every interval is elapsed time.
        rule = f"FREQ=SECONDLY;INTERVAL={after}" if self.repeats else None
        return present({"after": after, "alignTo": self.align_to, "timeZone": self.time_zone, "rrule": rule})


@dataclass(frozen=True)
class DateTrigger(Trigger):
    """``UILocalNotification.fireDate`` (+ ``timeZone``, ``repeatInterval``).

    An aware ``date`` is an absolute instant; a naive one a wall-clock time in ``time_zone``
    (an IANA name, or ``"device"``; default for a naive date: the device's zone). An aware date
    in a ``zoneinfo.ZoneInfo`` also gives the zone it repeats in unless ``time_zone`` says
    otherwise: ``datetime(2027, 1, 4, 9, 0, tzinfo=ZoneInfo("Europe/Paris"))`` repeats at 09:00
    in Paris (a fixed offset, ``timezone.utc`` included, repeats in UTC, Apple's nil zone).
    ``repeat_interval`` repeats it (``count`` times at most, until ``until``), skipping ``exdates``;
    ``lead_time`` fires each occurrence that much earlier.
    """

    date: datetime
    _: KW_ONLY
    time_zone: Zone | None = None
    repeat_interval: RepeatInterval | str | None = None
    count: int | None = None
    until: datetime | None = None
    exdates: Sequence[datetime] = ()
    lead_time: Seconds | None = None

    def wire(self, now: datetime, device_zone: str | None = None) -> dict[str, Any]:
        zone = self.time_zone if self.time_zone is not None else zone_of(self.date)
        return present({"fireDate": self.date, "timeZone": zone, "repeatInterval": self.repeat_interval,
                        "count": self.count, "until": self.until, "exdates": list(self.exdates) or None,
                        "leadTime": self.lead_time})


@dataclass(frozen=True)
class RRuleTrigger(Trigger):
    """An RFC 5545 recurrence rule (``FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR``, with or without
    ``RRULE:``) whose DTSTART is ``start``: wall-clock (naive) in ``time_zone``, or absolute (an
    aware ``start`` in a ``ZoneInfo`` gives the rule's zone unless ``time_zone`` is given, as
    :class:`DateTrigger`'s date does)."""

    rrule: str
    start: datetime
    _: KW_ONLY
    time_zone: Zone | None = None
    exdates: Sequence[datetime] = ()
    lead_time: Seconds | None = None

    def wire(self, now: datetime, device_zone: str | None = None) -> dict[str, Any]:
        zone = self.time_zone if self.time_zone is not None else zone_of(self.start)
        return present({"fireDate": self.start, "timeZone": zone, "rrule": self.rrule,
                        "exdates": list(self.exdates) or None, "leadTime": self.lead_time})
