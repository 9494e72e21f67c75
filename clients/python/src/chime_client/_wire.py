"""Conversions between Python values and the protocol's JSON (PROTOCOL.md sections 2 and 7)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any
from zoneinfo import ZoneInfo

Seconds = float | timedelta
"""A duration: seconds as a number, or a ``timedelta``."""


Zone = str | ZoneInfo
"""A time zone: an IANA name (``"Europe/Paris"``), ``"device"`` where a trigger takes it (the
device's zone, followed when it changes), or a ``zoneinfo.ZoneInfo``."""


def zone_name(zone: Zone) -> str:
    """A zone as the wire names it."""
    if isinstance(zone, ZoneInfo):
        if zone.key is None:
            raise ValueError("a ZoneInfo read from a file has no IANA name: use ZoneInfo(name)")
        return zone.key
    return zone


def zone_of(value: datetime) -> str | None:
    """The IANA name of an aware ``datetime``'s zone when it is a ``ZoneInfo`` (a fixed offset,
    ``timezone.utc`` included, names none)."""
    zone = value.tzinfo
    return zone.key if isinstance(zone, ZoneInfo) else None


def format_datetime(value: datetime) -> str:
    """An aware ``datetime`` as an absolute instant in UTC (``2026-12-01T10:00:00.250Z``, milliseconds
    kept); a naive one as a wall-clock time (``2026-12-01T18:00:00``, whole seconds)."""
    if value.tzinfo is None or value.utcoffset() is None:
        if value.microsecond:
            raise ValueError(f"a wall-clock time has whole seconds, got {value.isoformat()}")
        return value.isoformat(timespec="seconds")
    utc = value.astimezone(timezone.utc).replace(tzinfo=None)
    millis = utc.microsecond // 1000
    text = utc.replace(microsecond=0).isoformat(timespec="seconds")
    return f"{text}.{millis:03d}Z" if millis else f"{text}Z"


def parse_datetime(text: str) -> datetime:
    """An instant the server sent (``...Z``) as an aware UTC ``datetime``; a wall-clock time
    (no offset) as a naive one."""
    value = datetime.fromisoformat(text)
    return value.astimezone(timezone.utc) if value.tzinfo is not None else value


def optional_datetime(value: Any) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) else None


def seconds(value: Seconds) -> int | float:
    """A duration in seconds as the wire writes it: an integer when it is whole."""
    number = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return int(number) if number.is_integer() else number


def to_json(value: Any) -> Any:
    """A field's value as JSON: datetimes formatted, durations in seconds, enums by value, zones
    by name, ``Badge`` as its wire form; ``None`` stays ``None`` (JSON null)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, ZoneInfo):
        return zone_name(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return format_datetime(value)
    if isinstance(value, timedelta):
        return seconds(value)
    wire = getattr(value, "wire", None)
    if callable(wire):
        return wire()
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


def present(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that are set (not ``None``), as JSON."""
    return {key: to_json(value) for key, value in fields.items() if value is not None}


def encode(payload: Mapping[str, Any]) -> bytes:
    """A command's bytes: compact UTF-8 JSON. A retry sends these same bytes."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
